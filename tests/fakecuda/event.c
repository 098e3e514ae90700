/* event.c - events of the fake driver: record, query, synchronize, timing
 * and cross-stream waits (fakecuda.h). An event remembers the stream and
 * operation number of its last record; it is complete once that stream
 * completed that operation. */
#include <stdlib.h>

#include "fakecuda.h"

void fkEventUnref(fkEvent* e) {
  pthread_mutex_lock(&fkEvLock);
  int last = --e->refs == 0;
  pthread_mutex_unlock(&fkEvLock);
  if (last) {
    e->magic = 0;
    free(e);
  }
}

static fkEvent* fkEventOf(CUevent h) {
  fkEvent* e = (fkEvent*)h;
  return e && e->magic == FK_EVENT_MAGIC && !e->destroyed ? e : NULL;
}

CUresult fk_cuEventCreate(CUevent* out, unsigned int flags) {
  FK_ENTER("cuEventCreate");
  if (!out || (flags & ~(unsigned)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)))
    return CUDA_ERROR_INVALID_VALUE;
  if (fkCurrentDev() < 0) return fkFail(CUDA_ERROR_INVALID_CONTEXT, "cuEventCreate without a current context");
  fkEvent* e = calloc(1, sizeof *e);
  if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
  e->magic = FK_EVENT_MAGIC;
  e->flags = flags;
  e->refs = 1;
  e->timeNs = -1;
  *out = (CUevent)e;
  return CUDA_SUCCESS;
}

CUresult fk_cuEventDestroy(CUevent h) {
  FK_ENTER("cuEventDestroy");
  fkEvent* e = fkEventOf(h);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  e->destroyed = 1;
  fkEventUnref(e);
  return CUDA_SUCCESS;
}

CUresult fk_cuEventRecord(CUevent h, CUstream sh) {
  FK_ENTER("cuEventRecord");
  fkEvent* e = fkEventOf(h);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  CUresult err;
  fkStream* s = fkStreamOf(sh, &err);
  if (!s) return err;
  fkOp* op = fkNewOp(OP_EVENT);
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  op->ev = e;
  fkPush(s, op);
  return CUDA_SUCCESS;
}

/* The stream and operation number of e's last record (NULL: never recorded). */
static fkStream* fkEventTarget(fkEvent* e, uint64_t* seq) {
  pthread_mutex_lock(&fkEvLock);
  fkStream* s = e->s;
  *seq = e->seq;
  pthread_mutex_unlock(&fkEvLock);
  return s;
}

CUresult fk_cuEventQuery(CUevent h) {
  FK_ENTER("cuEventQuery");
  fkEvent* e = fkEventOf(h);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  uint64_t seq;
  fkStream* s = fkEventTarget(e, &seq);
  if (!s) return CUDA_SUCCESS;
  pthread_mutex_lock(&s->mu);
  int done = s->done >= seq;
  pthread_mutex_unlock(&s->mu);
  return done ? (CUresult)atomic_load(&fkSticky) : CUDA_ERROR_NOT_READY;
}

CUresult fk_cuEventSynchronize(CUevent h) {
  FK_ENTER("cuEventSynchronize");
  fkEvent* e = fkEventOf(h);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  uint64_t seq;
  fkStream* s = fkEventTarget(e, &seq);
  if (s) fkWaitSeq(s, seq);
  return (CUresult)atomic_load(&fkSticky);
}

CUresult fk_cuStreamWaitEvent(CUstream sh, CUevent h, unsigned int flags) {
  FK_ENTER("cuStreamWaitEvent");
  (void)flags;
  fkEvent* e = fkEventOf(h);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  CUresult err;
  fkStream* s = fkStreamOf(sh, &err);
  if (!s) return err;
  uint64_t seq;
  fkStream* src = fkEventTarget(e, &seq);
  if (!src || src == s) return CUDA_SUCCESS;
  fkOp* op = fkNewOp(OP_WAIT_STREAM);
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  op->other = src, op->otherSeq = seq;
  fkPush(s, op);
  return CUDA_SUCCESS;
}

CUresult fk_cuEventElapsedTime(float* ms, CUevent a, CUevent b) {
  FK_ENTER("cuEventElapsedTime");
  fkEvent *x = fkEventOf(a), *y = fkEventOf(b);
  if (!ms || !x || !y) return CUDA_ERROR_INVALID_VALUE;
  if ((x->flags | y->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
  CUresult r;
  if ((r = fk_cuEventQuery(a)) != CUDA_SUCCESS || (r = fk_cuEventQuery(b)) != CUDA_SUCCESS) return r;
  pthread_mutex_lock(&fkEvLock);
  long long t0 = x->timeNs, t1 = y->timeNs;
  pthread_mutex_unlock(&fkEvLock);
  if (t0 < 0 || t1 < 0) return CUDA_ERROR_INVALID_HANDLE; /* never recorded */
  *ms = (float)((double)(t1 - t0) * 1e-6);
  return CUDA_SUCCESS;
}
