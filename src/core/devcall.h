/*
 * devcall.h - calls on CUDA device buffers and on CUDA streams (issue 16).
 *
 * A single collective that engine/devpath.h can run device-resident (one
 * node: GPU kernels and p2p connections) runs so, with the gate and events
 * below unchanged. The rest takes the staged path: the thread that runs a call (the progress thread, or
 * the caller for stream NULL) copies the device inputs into pinned host
 * memory (cuMemHostAlloc, one buffer per communicator, grown as needed and
 * reused), runs the call with the host executor on the communicator's
 * connections, whatever their transport, and copies the results back.
 * All-reduce, broadcast, reduce, all-gather and reduce-scatter whose
 * count (per rank) is larger than COLL_CUDA_STAGE_CHUNK bytes go piece by
 * piece, two pieces in flight: the copies of the neighbouring pieces run on
 * a CUDA stream of coll's own while a piece is reduced and sent. A piece of
 * all-gather or reduce-scatter is the same element range of every rank's
 * block (n strided copies in or out), so the staging is 2 x (n + 1) pieces
 * instead of (n + 1) x the count. Send/recv, all-to-all and groups are
 * staged whole.
 *
 * Stream semantics (collStreamCreateCuda, coll.h): at issue, an event is
 * recorded on every CUDA stream of the call and each stream gets a wait on
 * the communicator's gate (device/gate.h) for the call's number; the
 * runner waits for the events, runs the call and opens the gate to that
 * number, whether the call succeeded or not. Calls of one communicator run
 * in issue order, so the gate only grows.
 *
 * Every function here is called with comm entered; none of them is needed
 * (or costs anything) for host buffers on host streams.
 */
#ifndef COLL_CORE_DEVCALL_H_
#define COLL_CORE_DEVCALL_H_

#include "core/comm.h"
#include "engine/engine.h"

typedef struct collDevWork collDevWork;

/* 1 when one of ops has device (or managed) buffers. */
static inline int collDevOpsOnDevice(const collOp* ops, int nops) {
  if (nops > 0 && ops[0].mem.kind != COLL_MEM_HOST) return 1;
  for (int i = 1; __builtin_expect(i < nops, 0); i++) /* one op: two tests */
    if (ops[i].mem.kind != COLL_MEM_HOST) return 1;
  return 0;
}

/* Binds comm to GPU `device` at its first device call, or checks that it
 * is the one comm is bound to. Errors: collInvalidArgument "<fn>: <what> is
 * on GPU <device> but this communicator runs on GPU <bound>...". */
collResult_t collDevBind(collComm_t comm, int device, const char* fn, const char* what);

/* At issue, for work on CUDA streams (streams[0..n), each s->cuda) or with
 * device buffers on a collStreamCreate stream: records the events, enqueues
 * the gate waits and returns the runner's state in *dw. A failure after a
 * wait was enqueued still gives *dw (the work must be queued, so that the
 * gate opens in turn) and fails comm. Errors: those of the CUDA calls
 * (collSystemError naming them), collInvalidUsage (built without CUDA). */
collResult_t collDevWorkIssue(collComm_t comm, collStream_t const* streams, int n, const collOp* ops, int nops,
                              collDevWork** dw);

/* Runs queued work made by collDevWorkIssue (on the thread that runs the
 * queue): waits for the events (bounded by the first op's deadline) and
 * runs ops staged. Returns the call's result. */
collResult_t collDevWorkRun(collComm_t comm, collDevWork* dw, const collOp* ops, int nops);

/* After collDevWorkRun and once the work counts as done on its coll
 * streams (so that a CUDA stream released by it finds collStreamQuery
 * done), or for work that could not be queued: opens the gate to the
 * work's number (also after a failure) and frees dw. */
void collDevWorkFinish(collComm_t comm, collDevWork* dw);

/* A call with stream NULL on device buffers, on the caller's thread after
 * the queue drained: waits for the legacy default stream, runs ops staged,
 * returns when the results are in device memory. */
collResult_t collDevRunBlocking(collComm_t comm, const collOp* ops, int nops);

/* Waits for the legacy default stream (comm's GPU current): a blocking
 * group over several communicators, whose device calls then run on
 * private coll streams. Errors: those of the CUDA call. */
collResult_t collDevSyncLegacy(collComm_t comm, const collOp* ops, int nops);

/* Device calls of comm that copied data through pinned host staging so far
 * (the others ran device-resident, engine/devpath.h, or moved no data).
 * Any thread. */
unsigned long long collDevStagedCalls(collComm_t comm);

/* Frees comm's device state (after its progress thread stopped). */
void collDevCommFree(collComm_t comm);

/* collStreamCreateCuda (coll.h). */
collResult_t collStreamCreateCudaImpl(collComm_t comm, void* cudaStream, collStream_t* stream);

#endif
