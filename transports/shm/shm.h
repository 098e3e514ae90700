/* shm.h - the shared-memory transport between processes of one node
 * (shm.c: table; shm_setup.c: connections; shm_ring.c: data path;
 * shm_cma.c: single copy). */
#ifndef COLL_SHM_H_
#define COLL_SHM_H_

#include "coll_net.h"

/* Operations table of the "shm" transport. Semantics beyond coll_net.h:
 *  - one device; both ends must run on the same kernel (and, for the listen
 *    socket, in the same network namespace);
 *  - connect returns collSuccess with *sendComm NULL while the receiver's
 *    listen backlog is full (call again; nothing is kept meanwhile); accept
 *    never blocks on the listen socket;
 *  - a receiver at its open-file limit rejects a connection whose
 *    descriptors the kernel dropped: its accept fails ("Too many open
 *    files"), and the sender's comm fails with that reason once it is
 *    blocked on it, or at closeSend (which then frees everything and returns
 *    collRemoteError with the reason);
 *  - at most COLL_SHM_MAX_REQUESTS requests in flight per comm: beyond that
 *    isend/irecv return collSuccess with *request = NULL (retry later);
 *  - a send copied through the ring completes once it is in the ring (it
 *    waits only while the ring's 8 slots are full); a single-copy send
 *    (from the connection's agreed threshold, if on: both processes' own
 *    decisions, COLL_SHM_CMA_THRESHOLD or measured, must be on, and the larger
 *    threshold applies) completes when the receiver
 *    has read it from the sender's buffer (rendezvous);
 *  - getPollFd of a send/recv comm arms a wake-up: call it right before
 *    poll()ing the fd (POLLOUT for send, POLLIN for recv); test disarms;
 *  - a peer process that dies is noticed within ~50 ms of idle testing;
 *  - test returning an error releases the request; once a comm failed,
 *    every later request on it fails the same way;
 *  - iflush returns *request = NULL; iput is not supported. */
extern const collNet_t collNetShm;

#define COLL_SHM_MAX_REQUESTS 64
#define COLL_SHM_NSLOTS 8 /* ring slots per connection (COLL_SHM_BUFFSIZE / 8 each) */

/* dst[i] = a[i] op b[i] for i < n elements (reduce.h's collReduceFn). */
typedef void (*collShmReduceFn)(void* dst, const void* a, const void* b, size_t n);

/* A receive that reduces as it reads (the engine's RECV_REDUCE without a
 * landing copy): the next message of recvComm, m, gives
 * dst[i] = reduce(m[i], local[i]) for its size / esize elements, host
 * memory, dst equal to local or disjoint from it. A message copied through
 * the ring is reduced from the ring's slots; a single-copy one is read from
 * the sender's buffer SHM_RR_PIECE (64 KiB) at a time into a bounce buffer
 * of the comm and reduced from there while it is in the cache. So each
 * payload byte is read once from memory and no staging copy of the whole
 * message is written and read back. size must be a multiple of esize (the
 * sender's message too: else collRemoteError at test). Completes, fails and
 * retries (*request NULL) as irecv; test's *size is the message's bytes.
 * If the connection falls back from single copy to the ring (NACK) after a
 * first piece was reduced, the receive fails (collRemoteError: dst may be
 * local, so it cannot be reduced twice). Errors: those of irecv, plus
 * collInvalidArgument (reduce NULL, esize 0 or not dividing size),
 * collSystemError (no memory for the bounce buffer). */
collResult_t collShmIrecvReduce(void* recvComm, void* dst, const void* local, size_t size, collShmReduceFn reduce,
                                size_t esize, void** request);

/* Counters of one send or recv comm, for tests and debugging. */
typedef struct {
  unsigned long long copyMsgs; /* messages moved through the ring */
  unsigned long long cmaMsgs;  /* messages moved by single copy (CMA) */
  unsigned long long reduceMsgs; /* of them, those reduced as they were read (collShmIrecvReduce) */
  int cmaEnabled;              /* 0 when single copy is off or this connection fell back to copying */
  int peerPid;                 /* the other process (as seen from this one) */
  size_t cmaThreshold;         /* single copy from this size, as both ends agreed at connect (0: never) */
} collShmStats;

/* Fills *st for a send or recv comm of collNetShm. Not part of the table. */
void collShmGetStats(const void* comm, collShmStats* st);

/* Reads len bytes at address addr of process pid into dst with
 * process_vm_readv (shm_cma.c; partial reads continued, EINTR retried).
 * Returns 0 or an errno value (ESRCH: no such process, EPERM: not allowed,
 * EFAULT: a range not mapped). Thread-safe. Also the all-gather of
 * engine/cmagather.c. */
int collShmCmaCopy(int pid, void* dst, uint64_t addr, size_t len);

/* Tests only: sets this process's own single-copy threshold (0: off) as if
 * it had been measured (or given by COLL_SHM_CMA_THRESHOLD). Affects the
 * connections made afterwards; not thread-safe against them. */
void collShmCmaSetThreshold(size_t threshold);

#endif
