/* p2p.h - the CUDA P2P transport between ranks of one node whose buffers
 * are GPU memory (p2p.c: table; p2p_setup.c: connections and ring memory;
 * p2p_ring.c: data path). */
#ifndef COLL_P2P_H_
#define COLL_P2P_H_

#include <stddef.h>

#include "coll_net.h"

/* Operations table of the "p2p" transport. Semantics beyond coll_net.h:
 *  - devices are the CUDA devices this process sees; listen(dev) and
 *    connect(dev) name the GPU of the rank (its buffers' GPU); several ranks
 *    may use one GPU (processes or threads);
 *  - data: isend/irecv take device memory (or any memory cuMemcpyAsync can
 *    address) of the comm's GPU. The SENDER owns the connection's ring:
 *    COLL_P2P_BUFFSIZE bytes of its GPU's memory in 8 slots (cuMemCreate),
 *    handed to the receiver as a POSIX file descriptor over an AF_UNIX
 *    socket (SCM_RIGHTS; cuMemExportToShareableHandle) and mapped there
 *    (cuMemImportFromShareableHandle, cuMemMap); ranks in one process map
 *    the same allocation without a descriptor (cuMemRetainAllocationHandle).
 *    Counters and slot descriptors live in a shared memfd page. The sender
 *    copies each chunk into a free slot with the copy engine
 *    (cuMemcpyAsync on its own stream) and publishes it once the copy
 *    completed; the receiver copies it out into the posted buffer the same
 *    way and frees the slot. Each end holds its own reference to the
 *    memory, so neither end can free it under the other;
 *  - connect never returns a NULL *sendComm with collSuccess; accept never
 *    blocks on the listen socket (it waits up to 10 s for the hello of a
 *    connection already made);
 *  - at most COLL_P2P_MAX_REQUESTS requests in flight per comm: beyond that
 *    isend/irecv return collSuccess with *request = NULL (retry later);
 *  - a send completes once its last chunk is in the ring; a receive once its
 *    last chunk is in the posted buffer (the GPU's copy finished: later work
 *    on any stream sees it);
 *  - test drives the comm's copies; getPollFd reports -1 (nothing to poll);
 *  - a peer process that dies or closes is noticed within ~50 ms of idle
 *    testing (EOF on the socket) and fails the comm with collRemoteError;
 *    a failed CUDA call fails it with collSystemError naming the call;
 *  - iput is not supported; iflush returns *request = NULL (copies are
 *    complete when test says so). */
extern const collNet_t collNetP2p;

#define COLL_P2P_MAX_REQUESTS 64
#define COLL_P2P_NSLOTS 8

/* Counters and state of a send or recv comm of collNetP2p (tests, logs). */
typedef struct {
  unsigned long long msgs;  /* messages completed */
  unsigned long long bytes; /* payload bytes moved */
  int sameProcess;          /* the peer is this process: no descriptor was used */
  int device;               /* this end's GPU */
  int peerPid;              /* the other process (as seen from this one) */
  size_t slotBytes;         /* bytes per ring slot */
} collP2pStats;

/* Fills *st for a send or recv comm of collNetP2p. Not part of the table. */
void collP2pGetStats(const void* comm, collP2pStats* st);

#endif
