/* engine.h - executes operations (collectives via schedules, p2p batches). */
#ifndef COLL_ENGINE_H_
#define COLL_ENGINE_H_

#include "core/comm.h"

/* One operation as the user issued it (counts as in the public API). */
typedef struct collOp {
  collFunc fn;
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  collDataType_t dtype;
  collRedOp_t op;
  int root; /* broadcast/reduce */
  int peer; /* send/recv */
  const char* algo; /* forced algorithm name or NULL */
} collOp;

/* Runs ops in issue order on the calling thread: consecutive send/recv ops
 * form one concurrent batch, each collective runs alone. Blocks until done.
 * Every message carries the call's signature (sig.h). Returns
 * collInvalidUsage (a mismatched call), collRemoteError / collTimeout (and
 * aborts the comm) on failure. */
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
/* Closes every connection (peers waiting on this rank then fail at once
 * instead of at their timeout). Called when the communicator fails. */
void collEngineCloseConns(collComm_t comm);
/* Frees channel memory and closes every connection. */
void collEngineFree(collComm_t comm);

#endif
