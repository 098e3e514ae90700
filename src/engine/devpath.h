/*
 * devpath.h - the device-resident path (issue 16); the design
 * is at the top of devpath.c.
 *
 * Every function is called by the thread that runs comm's engine (the
 * progress thread, or the caller of a blocking call), with comm's GPU
 * current, except collDevPathStats (any thread, numbers read whole).
 */
#ifndef COLL_ENGINE_DEVPATH_H_
#define COLL_ENGINE_DEVPATH_H_

#include "engine/engine.h"
#include "engine/exec.h"

/* 1 when op (one collective on device buffers of comm's GPU) can run
 * device-resident: all-reduce, reduce-scatter, all-gather, broadcast or
 * reduce with count > 0, not a float16/bfloat16 sum/prod/avg (those take
 * a float32 working copy on the host), on a communicator whose device
 * path did not turn out unusable (spanning nodes, it is usable only where
 * the network transports read GPU memory, decided at the first call). The
 * answer is the same on every rank for the same call. Costs nothing on the
 * host path (devcall.c asks only for device calls). */
int collDevPathWanted(collComm_t comm, const collOp* op);

/* Runs op (collDevPathWanted) device-resident: at the first such call the
 * ranks exchange their p2p listen handles with a host all-gather and decide
 * together whether the path is usable (*ran 0: it is not, on any rank, and
 * op was not run: stage it); then collEngineRun(op). Errors: those of the
 * exchange and of the call (the communicator fails as with any transport
 * failure). */
collResult_t collDevPathRun(collComm_t comm, const collOp* op, int* ran);

/* For collRunSched on device buffers: the p2p connections (*set) and the
 * comm's internal stream the executor enqueues on. collInternalError when
 * the path was not made ready (a device op that did not come through
 * collDevPathRun). */
collResult_t collDevPathFor(collComm_t comm, const collConnSet** set, void** stream);

/* Where the executor keeps device buffers it replaced (exec.h); NULL when
 * comm never ran a device call. */
collExecKeep* collDevPathKeep(collComm_t comm);

/* Closes the p2p connections and the listener (the communicator failed or
 * is being freed): fds, memfds and GPU mappings go back. */
void collDevPathClose(collComm_t comm);

/* Frees the device path (after collDevPathClose): the stream, the kept
 * buffers and the channels' device scratch and staging. */
void collDevPathFree(collComm_t comm);

/* What the device path did on this rank (tests, logs). */
typedef struct {
  int state;                   /* 0: not decided yet, 1: in use, -1: unusable (device calls are staged) */
  unsigned long long calls;    /* collectives run device-resident */
  unsigned long long p2pBytesSent, p2pBytesRecv; /* over the p2p connections (collP2pGetStats) */
  int p2pConns;                /* send and receive connections open */
} collDevPathStats_t;
void collDevPathStats(collComm_t comm, collDevPathStats_t* st);

#endif
