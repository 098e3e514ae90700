/*
 * exec.h - the executor of a call's local steps (issue 16): copies,
 * reductions and avg's division, and the scratch and staging memory they
 * work in, chosen by the memory type of the call's buffers.
 *
 * The host executor is what the engine always did: memmove and the host
 * reduction kernels (reduce.h), buffers from realloc. The CUDA executor
 * enqueues the same steps on a stream with src/device/devexec (kernels of
 * the same math, reduce_math.h) and allocates device memory; it never waits
 * for the GPU. The host steps are inline, so the host path costs what it
 * did. Transports and the shared-memory mailbox stay host memory only.
 */
#ifndef COLL_ENGINE_EXEC_H_
#define COLL_ENGINE_EXEC_H_

#include <stddef.h>
#include <string.h>

#include "coll.h"
#include "device/memtype.h"
#include "reduce/reduce.h"

/* Device buffers replaced while calls may be gated (freeing one then would
 * synchronize the GPU, which waits for a user stream that waits for the
 * call: a deadlock); freed with the communicator (collExecKeepFree). */
typedef struct collExecKeep {
  void** p;
  int n, cap;
} collExecKeep;

typedef struct {
  int mem;                /* COLL_MEM_HOST, or COLL_MEM_DEVICE (managed memory runs as device) */
  int device;             /* CUDA ordinal, -1 on the host */
  void* stream;           /* CUstream the device steps are enqueued on */
  collDataType_t dtype;   /* of the reductions */
  collRedOp_t op;
  collReduceFn hostReduce; /* host: the kernel of (dtype, op), looked up once */
  collExecKeep* keep;     /* where collExecGrow puts device buffers it replaces (NULL: freed at once) */
} collExecutor;

/* The executor for a call of type t and op on memory *mem (NULL: host),
 * device steps on stream. Host: always collSuccess. Device: makes the GPU
 * current on this thread; errors those of collDevSetCurrent. e->keep is
 * NULL afterwards (the caller sets it). */
collResult_t collExecInit(collExecutor* e, const collMemInfo* mem, void* stream, collDataType_t t, collRedOp_t op);

collResult_t collExecCopyDevice(const collExecutor* e, void* dst, const void* src, size_t bytes);
collResult_t collExecReduceDevice(const collExecutor* e, void* dst, const void* a, const void* b, size_t n);

/* dst[0..bytes) = src[0..bytes). Host: may overlap (memmove). Device: dst
 * and src equal or disjoint. */
static inline collResult_t collExecCopy(const collExecutor* e, void* dst, const void* src, size_t bytes) {
  if (e->mem == COLL_MEM_HOST) {
    memmove(dst, src, bytes);
    return collSuccess;
  }
  return collExecCopyDevice(e, dst, src, bytes);
}

/* dst[i] = a[i] op b[i] for i < n elements (avg: sum); dst may equal a or b. */
static inline collResult_t collExecReduce(const collExecutor* e, void* dst, const void* a, const void* b, size_t n) {
  if (e->mem == COLL_MEM_HOST) {
    e->hostReduce(dst, a, b, n);
    return collSuccess;
  }
  return collExecReduceDevice(e, dst, a, b, n);
}

/* buf[i] /= nranks for i < n (avg's last step, collReduceAvgFinish). */
collResult_t collExecAvgFinish(const collExecutor* e, void* buf, size_t n, int nranks);

/* Makes *buf (holding *have bytes of memory type *bufMem) at least need
 * bytes of the executor's memory type. Host: realloc, contents kept, new
 * bytes zeroed (touched once here, not per call). Device, or a buffer of
 * the other type: freed and allocated anew (contents not kept). On failure
 * *buf is unchanged. Errors: collSystemError naming the size. */
collResult_t collExecGrow(const collExecutor* e, char** buf, size_t* have, int* bufMem, size_t need);

/* 1 when collExecGrow(e, ., &have, &bufMem, need) would move the buffer
 * (what was registered at the old address must be forgotten first). */
static inline int collExecGrowMoves(const collExecutor* e, size_t have, int bufMem, size_t need) {
  return need > have || (have > 0 && bufMem != e->mem);
}

/* Frees a buffer of collExecGrow by its memory type. */
void collExecFree(char* buf, int bufMem);

/* Frees every buffer in keep (the GPU must not wait on a gate then). */
void collExecKeepFree(collExecKeep* keep);

/* Device: 1 when every step enqueued on the stream finished, 0 while some
 * run, -1 when one failed (error set: collSystemError naming the CUDA
 * error). Host: 1. */
int collExecIdle(const collExecutor* e);

/* Device: waits for the steps enqueued on the stream. Errors: as
 * collExecIdle's. Host: collSuccess. */
collResult_t collExecSync(const collExecutor* e);

#endif
