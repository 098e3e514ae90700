/* net.h - choosing transports: the ordered list of a communicator and the
 * transport of each pair of ranks; inter-node by name, intra-node if allowed. */
#ifndef COLL_CORE_NET_H_
#define COLL_CORE_NET_H_

#include "coll_net.h"
#include "core/comm.h"

/* Does transport `net` connect ranks a and b (their published infos;
 * sameNode: same node by COLL_HOSTID / host hash)? NCCL's canConnect. */
typedef int (*collNetCanConnectFn)(const collPeerInfo* a, const collPeerInfo* b, int sameNode);

/* A communicator's transports in order of preference (comm.h slots). */
typedef struct {
  const collNet_t* nets[COLL_NET_SLOTS]; /* NULL: slot unused */
  collNetCanConnectFn canConnect[COLL_NET_SLOTS];
  int needsReg[COLL_NET_SLOTS]; /* buffers must be registered (ib, plugins; not tcp, shm, loopback) */
  collNetIrecvReduceFn irecvReduce[COLL_NET_SLOTS]; /* receive that reduces as it reads (shm), or NULL */
  int forced; /* the network transport was named (COLL_NET / config.netName) */
} collNetList;

/* The ordered list for a new communicator, every transport initialized:
 *  - slot 0: shm (pairs on one node), unless COLL_SHM_DISABLE=1, the
 *    network transport is loopback, or shm cannot work here;
 *  - name NULL (COLL_NET unset): the COLL_NET_PLUGIN transport if one is
 *    set, then "ib" when built and a usable port exists (else one INFO line
 *    per process says why not), then "tcp"; network transports connect any
 *    pair (inside a node too, when shm is off);
 *  - name set: only that network transport after shm; its init error (e.g.
 *    COLL_NET=ib without a usable HCA) is returned.
 * Errors: as collNetGetInter. Thread-safe. */
collResult_t collNetGetList(const char* name, collNetList* out);
/* The id a transport publishes in collPeerInfo.netId: a hash of its name, never 0. */
uint64_t collNetId(const char* name);
/* The slot of `list` (this rank's, `me`) that carries the pair (me, peer),
 * or -1 when the two ranks published no transport in common that accepts
 * the pair. Both ranks get the same transport: the pair follows the
 * preference order of the lower rank. infos: every rank's published info. */
int collNetPairSlot(const collNetList* list, const collPeerInfo* infos, int me, int peer, int sameNode);

/* The transport between nodes called `name` (NULL = the default: the
 * COLL_NET_PLUGIN transport when one is set, else "tcp"), initialized once.
 * A plugin is a shared object exporting `collNetPlugin_v2` (coll_net.h);
 * it is loaded at the first call, checked (ABI version and size, a name,
 * every operation present) and answers to its own name; a built-in of the
 * same name is then hidden. Errors: collInvalidArgument for an unknown name
 * or a plugin that cannot be loaded or fails the checks (every call then
 * fails the same way), or the transport's init error. Thread-safe. */
collResult_t collNetGetInter(const char* name, const collNet_t** out);
/* The intra-node transport (shared memory), initialized once, or NULL when
 * COLL_SHM_DISABLE=1, when `inter` is the in-process loopback transport
 * (then it carries everything), or when shm cannot work here (logged). */
const collNet_t* collNetGetIntra(const collNet_t* inter);
/* The device of `net` this rank listens and connects on: the one nearest
 * to the rank in the topology (collTopoPickNetDev, by the devices' PCI
 * paths) when the transport has several; logged at INFO. */
int collNetPickDev(const collNet_t* net, int rank);
/* Fills comm->peerKind (collNetPairSlot for every rank, itself included),
 * comm->interSlot, and closes the listeners no pair uses (a port each).
 * collSystemError naming the peer when a pair has no transport. */
collResult_t collNetPickPairs(collComm_t comm, const collNetList* list);
/* "shm to ranks 0-3; ib (mlx5_0) to ranks 4-7": the transport of every pair. */
void collNetPairsText(collComm_t comm, char* buf, size_t size);
/* Tests: forget the ib probe and the ib transport's init (after its fini),
 * so the next list probes again. Not thread-safe against communicators. */
void collNetForgetIb(void);

#endif
