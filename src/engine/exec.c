/* exec.c - the host and CUDA executors of local steps (exec.h). */
#include "engine/exec.h"

#include <stdlib.h>

#include "device/devexec.h"
#include "misc/log.h"

collResult_t collExecInit(collExecutor* e, const collMemInfo* mem, void* stream, collDataType_t t, collRedOp_t op) {
  e->mem = mem && mem->kind != COLL_MEM_HOST ? COLL_MEM_DEVICE : COLL_MEM_HOST;
  e->device = e->mem == COLL_MEM_HOST ? -1 : mem->device;
  e->stream = stream;
  e->dtype = t;
  e->op = op;
  e->hostReduce = NULL;
  e->keep = NULL;
  if (e->mem == COLL_MEM_DEVICE) return collDevSetCurrent(e->device);
  e->hostReduce = collReduceGetFn(t, op);
  return collSuccess;
}

collResult_t collExecCopyDevice(const collExecutor* e, void* dst, const void* src, size_t bytes) {
  return collDevCopyAsync(dst, src, bytes, COLL_DEV_COPY_KERNEL, e->stream);
}

collResult_t collExecReduceDevice(const collExecutor* e, void* dst, const void* a, const void* b, size_t n) {
  return collDevReduceAsync(dst, a, b, n, e->dtype, e->op, e->stream);
}

collResult_t collExecAvgFinish(const collExecutor* e, void* buf, size_t n, int nranks) {
  if (e->mem == COLL_MEM_DEVICE) return collDevAvgAsync(buf, n, e->dtype, nranks, e->stream);
  collReduceAvgFinish(buf, n, e->dtype, nranks);
  return collSuccess;
}

void collExecFree(char* buf, int bufMem) {
  if (bufMem == COLL_MEM_DEVICE) collDevFree(buf);
  else free(buf);
}

void collExecKeepFree(collExecKeep* keep) {
  for (int i = 0; i < keep->n; i++) collDevFree(keep->p[i]);
  free(keep->p);
  keep->p = NULL;
  keep->n = keep->cap = 0;
}

/* Room in e->keep for one more buffer (before anything is allocated). */
static collResult_t collExecKeepRoom(const collExecutor* e) {
  collExecKeep* k = e->keep;
  if (!k || k->n < k->cap) return collSuccess;
  int ncap = k->cap ? 2 * k->cap : 8;
  void** n = realloc(k->p, sizeof *n * (size_t)ncap);
  if (!n) return collSetError(collSystemError, "engine: out of memory keeping a replaced GPU buffer");
  k->p = n;
  k->cap = ncap;
  return collSuccess;
}

/* Frees buf; a device buffer goes to e->keep when there is one (room made
 * by collExecKeepRoom). */
static void collExecRetire(const collExecutor* e, char* buf, int bufMem) {
  if (buf && bufMem == COLL_MEM_DEVICE && e->keep) e->keep->p[e->keep->n++] = buf;
  else collExecFree(buf, bufMem);
}

int collExecIdle(const collExecutor* e) { return e->mem == COLL_MEM_HOST ? 1 : collDevStreamIdle(e->stream); }

collResult_t collExecSync(const collExecutor* e) {
  return e->mem == COLL_MEM_HOST ? collSuccess : collDevStreamSync(e->stream);
}

collResult_t collExecGrow(const collExecutor* e, char** buf, size_t* have, int* bufMem, size_t need) {
  if (!collExecGrowMoves(e, *have, *bufMem, need)) return collSuccess;
  if (e->mem == COLL_MEM_HOST && *bufMem == COLL_MEM_HOST) {
    char* n = realloc(*buf, need);
    if (!n) return collSetError(collSystemError, "engine: cannot allocate %zu bytes", need);
    memset(n + *have, 0, need - *have);
    *buf = n;
    *have = need;
    return collSuccess;
  }
  size_t want = need > *have ? need : *have;
  if (e->mem == COLL_MEM_DEVICE && *bufMem == COLL_MEM_DEVICE && want < 2 * *have)
    want = 2 * *have; /* the replaced ones are kept (collExecRetire): they add up to less than the last */
  void* n = NULL;
  if (*buf && *bufMem == COLL_MEM_DEVICE) {
    collResult_t r = collExecKeepRoom(e);
    if (r != collSuccess) return r;
  }
  if (e->mem == COLL_MEM_HOST) {
    if (!(n = calloc(1, want))) return collSetError(collSystemError, "engine: cannot allocate %zu bytes", want);
  } else {
    collResult_t r = collDevAlloc(&n, want);
    if (r != collSuccess)
      return collSetError(r, "engine: cannot allocate %zu bytes on GPU %d: %s", want, e->device,
                          collLastErrorMessage());
  }
  collExecRetire(e, *buf, *bufMem);
  *buf = n;
  *have = want;
  *bufMem = e->mem;
  return collSuccess;
}
