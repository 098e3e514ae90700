/* engine.h - executes operations (collectives via schedules, p2p batches). */
#ifndef COLL_ENGINE_H_
#define COLL_ENGINE_H_

#include "core/comm.h"
#include "device/memtype.h"

/* One operation as the user issued it (counts as in the public API). */
typedef struct collOp {
  collFunc fn;
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  collDataType_t dtype;
  collRedOp_t op;
  int root; /* broadcast/reduce */
  int peer; /* send/recv; COLL_PEER_BARRIER on collBarrier's all-reduce (its signature says "barrier") */
  const char* algo; /* forced algorithm name or NULL */
  /* deadline of every wait of this operation, taken when it was issued
   * (communicator timeout or collCommSetCallTimeout); 0 = none */
  double timeoutSec;
  int timeoutPerCall; /* 1: from collCommSetCallTimeout (for messages) */
  collMemInfo mem;    /* memory type of the buffers (collIssue): picks the executor (exec.h) */
} collOp;
#define COLL_PEER_BARRIER (-2)

/* Runs ops in issue order on the calling thread: consecutive send/recv ops
 * form one concurrent batch, each collective runs alone. Blocks until done.
 * Every message carries the call's signature (sig.h). Returns
 * collInvalidUsage (a mismatched call), collRemoteError / collTimeout (and
 * aborts the comm) on failure. On a communicator that already failed it
 * returns that error at once, touching no connection. */
collResult_t collEngineRun(collComm_t comm, const collOp* ops, int nops);

/* 1 when op's partial results are carried in float32: a float16/bfloat16
 * all-reduce, reduce-scatter or reduce with sum, prod or avg, unless
 * COLL_HALF_ACCUM=native (read once per process). */
int collEngineWide(const collOp* op);

/* COLL_CHECK=1: verifies that every rank issued the same collective (same
 * function, count, data type, op, root, COLL_HALF_ACCUM mode).
 * collInvalidUsage names the first differing rank and both calls. */
collResult_t collCheckSignature(collComm_t comm, const collOp* op);

/* Checks a connection hello (len bytes from the network): magic, the job's
 * secret, rank < nranks, channel < nchannels. 1 = valid (rank and channel
 * written), 0 = drop the connection. Never reads past len. */
int collConnHelloValid(const void* buf, size_t len, uint64_t secret, int nranks, int nchannels, int* rank,
                       int* channel);

/* Establishes (lazily, once) the connection to `peer` on `channel`. */
collResult_t collEngineSendConn(collComm_t comm, int peer, int channel, void** sendComm);
collResult_t collEngineRecvConn(collComm_t comm, int peer, int channel, void** recvComm);
/* A second set of connections beside comm->conns, with one transport for
 * every pair it carries (the device path's p2p connections,
 * engine/devpath.h); the pairs it leaves to comm->conns (viaComm) go over
 * the communicator's own transport (devpath: a network transport that
 * reads GPU memory, between nodes). */
typedef struct collConnSet {
  collConn* conns;         /* [maxChannels * nranks] */
  const collNet_t* net;
  void* listen;            /* this rank's listener of net */
  int dev;                 /* net's device this rank listens and connects on */
  const char* handles;     /* [nranks][COLL_NET_HANDLE_BYTES]: every rank's listen handle */
  const uint8_t* viaComm;  /* [nranks] or NULL: 1 = traffic with that rank goes over comm->conns */
} collConnSet;
/* The set that carries traffic with peer: set, or NULL (comm->conns) when
 * set is NULL or leaves that pair to the communicator's connections. */
static inline const collConnSet* collConnSetFor(const collConnSet* set, int peer) {
  return set && set->viaComm && set->viaComm[peer] ? NULL : set;
}
/* As collEngineSendConn / collEngineRecvConn on set (NULL: comm's own). */
collResult_t collEngineSendConnSet(collComm_t comm, const collConnSet* set, int peer, int channel, void** sendComm);
collResult_t collEngineRecvConnSet(collComm_t comm, const collConnSet* set, int peer, int channel, void** recvComm);
/* Closes every connection and the listeners (peers waiting on this rank
 * then fail at once instead of at their timeout; connections still waiting
 * in a listener's backlog are freed). Called when the communicator fails,
 * by the thread that runs its engine. */
void collEngineCloseConns(collComm_t comm);
/* Is peer known to be gone: its process exited or is a zombie (same host),
 * it marked itself failed in the mailbox, or an established connection
 * with it was closed? 1 = gone; *why gets a short reason. */
int collEnginePeerGone(collComm_t comm, int peer, char* why, size_t whySize);
/* Appends to msg (of size `size`) what this rank can tell about ranks on its
 * host that stopped progressing: ranks whose process exited, is a zombie or
 * is stopped (SIGSTOP, a debugger), read from /proc (engine/blame.c). */
void collEngineBlame(collComm_t comm, char* msg, size_t size);
/* Frees channel memory and closes every connection. */
void collEngineFree(collComm_t comm);

#endif
