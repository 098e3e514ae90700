/*
 * stream.c - streams, events, copies, memsets, stream memory operations and
 * host functions of the fake driver (fakecuda.h).
 *
 * Every stream (and each device's legacy default stream) has one worker
 * thread that runs its operations in FIFO order, asynchronously from the
 * host; FAKECUDA_DELAY_US delays each, so a missing synchronization shows as
 * a wrong result. The legacy stream synchronizes with blocking streams as on
 * a GPU. Host functions run on one callback thread for the whole process,
 * as the driver's, so a host function that blocks holds up every other.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fakecuda.h"

pthread_mutex_t fkEvLock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t fkStreamsLock = PTHREAD_MUTEX_INITIALIZER;
static fkStream* fkStreams;
static fkStream* fkLegacy[FK_MAX_DEVS];

static long long fkNowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- the host-function thread --------------------------------------------------- */
typedef struct fkCall {
  CUhostFn fn;
  void* arg;
  int done;
  struct fkCall* next;
} fkCall;
static pthread_mutex_t fkCbLock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fkCbCv = PTHREAD_COND_INITIALIZER;
static fkCall *fkCbHead, *fkCbTail;
static int fkCbStarted;

static void* fkCallbackThread(void* unused) {
  (void)unused;
  fkInHostFn = 1;
  for (;;) {
    pthread_mutex_lock(&fkCbLock);
    while (!fkCbHead) pthread_cond_wait(&fkCbCv, &fkCbLock);
    fkCall* c = fkCbHead;
    fkCbHead = c->next;
    if (!fkCbHead) fkCbTail = NULL;
    pthread_mutex_unlock(&fkCbLock);
    c->fn(c->arg);
    pthread_mutex_lock(&fkCbLock);
    c->done = 1;
    pthread_cond_broadcast(&fkCbCv);
    pthread_mutex_unlock(&fkCbLock);
  }
  return NULL;
}

static void fkBlockSignals(sigset_t* old) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, old);
}

static int fkStartThread(pthread_t* t, void* (*fn)(void*), void* arg) {
  sigset_t old;
  fkBlockSignals(&old); /* the thread inherits a mask with every signal blocked */
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  int rc = pthread_create(t, &a, fn, arg);
  pthread_attr_destroy(&a);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return rc;
}

/* Runs fn(arg) on the callback thread and waits for it. */
static void fkRunHostFn(CUhostFn fn, void* arg) {
  fkCall c = {fn, arg, 0, NULL};
  pthread_mutex_lock(&fkCbLock);
  if (!fkCbStarted) {
    pthread_t t;
    fkCbStarted = fkStartThread(&t, fkCallbackThread, NULL) == 0;
    if (!fkCbStarted) {
      pthread_mutex_unlock(&fkCbLock);
      fn(arg);
      return;
    }
  }
  if (fkCbTail) fkCbTail->next = &c;
  else fkCbHead = &c;
  fkCbTail = &c;
  pthread_cond_broadcast(&fkCbCv);
  while (!c.done) pthread_cond_wait(&fkCbCv, &fkCbLock);
  pthread_mutex_unlock(&fkCbLock);
}


/* ---- the worker -------------------------------------------------------------------- */
static int fkValueOk(uint32_t cur, uint32_t v, unsigned flags) {
  switch (flags & 0xf) {
    case CU_STREAM_WAIT_VALUE_GEQ: return (int32_t)(cur - v) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ: return cur == v;
    case CU_STREAM_WAIT_VALUE_AND: return (cur & v) != 0;
    case CU_STREAM_WAIT_VALUE_NOR: return ~(cur | v) != 0;
    default: return 1;
  }
}

static CUresult fkExec(fkStream* s, fkOp* op) {
  int sticky = atomic_load(&fkSticky) != 0;
  switch (op->kind) {
    case OP_COPY:
    case OP_SET: {
      if (sticky) return CUDA_SUCCESS;
      pthread_rwlock_rdlock(&fkRegLock);
      void* d = fkTranslate(op->dst, op->n, s->dev, 1, op->kind == OP_COPY);
      void* src = op->kind == OP_COPY ? fkTranslate(op->src, op->n, s->dev, 0, 1) : NULL;
      CUresult r = CUDA_SUCCESS;
      if (!d || (op->kind == OP_COPY && !src))
        r = fkFail(CUDA_ERROR_ILLEGAL_ADDRESS, "%s of %zu bytes at %p: memory gone or not accessible",
                   op->kind == OP_COPY ? "copy" : "memset", op->n, (void*)(op->kind == OP_COPY && d ? op->src : op->dst));
      else if (op->kind == OP_COPY && d != src) memcpy(d, src, op->n);
      else if (op->kind == OP_SET) memset(d, op->val, op->n);
      pthread_rwlock_unlock(&fkRegLock);
      return r;
    }
    case OP_KERNEL: {
      if (sticky) return CUDA_SUCCESS;
      pthread_rwlock_rdlock(&fkRegLock);
      CUresult r = op->fn(op->kernel, op->args, op->grid, op->block, s->dev);
      pthread_rwlock_unlock(&fkRegLock);
      return r;
    }
    case OP_EVENT:
      pthread_mutex_lock(&fkEvLock);
      if (op->ev->s == s && op->ev->seq == op->seq) op->ev->timeNs = fkNowNs();
      pthread_mutex_unlock(&fkEvLock);
      fkEventUnref(op->ev);
      return CUDA_SUCCESS;
    case OP_WAIT_STREAM:
      pthread_mutex_lock(&op->other->mu);
      while (op->other->done < op->otherSeq) pthread_cond_wait(&op->other->cv, &op->other->mu);
      pthread_mutex_unlock(&op->other->mu);
      return CUDA_SUCCESS;
    case OP_WAIT_VALUE:
    case OP_WRITE_VALUE: {
      pthread_rwlock_rdlock(&fkRegLock);
      _Atomic uint32_t* w = fkTranslate(op->dst, 4, s->dev, op->kind == OP_WRITE_VALUE, 0);
      pthread_rwlock_unlock(&fkRegLock);
      if (!w) return fkFail(CUDA_ERROR_ILLEGAL_ADDRESS, "stream memory operation at %p: not device-accessible",
                            (void*)op->dst);
      if (op->kind == OP_WRITE_VALUE) {
        atomic_store_explicit(w, op->value, memory_order_release);
        return CUDA_SUCCESS;
      }
      struct timespec ts = {0, 20000};
      while (!fkValueOk(atomic_load_explicit(w, memory_order_acquire), op->value, op->flags) &&
             !atomic_load(&fkSticky))
        nanosleep(&ts, NULL);
      return CUDA_SUCCESS;
    }
    case OP_HOSTFN:
      if (!sticky) fkRunHostFn(op->hfn, op->harg);
      return CUDA_SUCCESS;
    default: return CUDA_SUCCESS;
  }
}

static void* fkWorker(void* arg) {
  fkStream* s = arg;
  for (;;) {
    pthread_mutex_lock(&s->mu);
    while (!s->head) pthread_cond_wait(&s->cv, &s->mu);
    fkOp* op = s->head;
    s->head = op->next;
    if (!s->head) s->tail = NULL;
    s->cur = op;
    pthread_mutex_unlock(&s->mu);
    if (fkCfg.delayUs > 0 && op->kind != OP_EXIT) usleep((useconds_t)fkCfg.delayUs);
    while (op->hang) pause(); /* FAKECUDA_HANG: a hung GPU (every signal is blocked here) */
    CUresult r = fkExec(s, op);
    if (r != CUDA_SUCCESS) fkSetSticky(r);
    int kind = op->kind;
    pthread_mutex_lock(&s->mu);
    s->done = op->seq;
    s->cur = NULL;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    free(op);
    if (kind == OP_EXIT) return NULL;
  }
}

/* ---- streams ------------------------------------------------------------------------ */
static fkStream* fkNewStream(int dev, int blocking, int legacy) {
  fkStream* s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->magic = FK_STREAM_MAGIC;
  s->dev = dev;
  s->blocking = blocking;
  s->legacy = legacy;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  if (fkStartThread(&s->thread, fkWorker, s) != 0) {
    free(s);
    return NULL;
  }
  s->next = fkStreams; /* caller holds fkStreamsLock */
  fkStreams = s;
  return s;
}

fkStream* fkStreamOf(CUstream h, CUresult* err) {
  *err = CUDA_SUCCESS;
  if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
    int dev = fkCurrentDev();
    if (dev < 0) {
      *err = fkFail(CUDA_ERROR_INVALID_CONTEXT, "the default stream without a current context");
      return NULL;
    }
    pthread_mutex_lock(&fkStreamsLock);
    if (!fkLegacy[dev]) fkLegacy[dev] = fkNewStream(dev, 1, 1);
    fkStream* s = fkLegacy[dev];
    pthread_mutex_unlock(&fkStreamsLock);
    if (!s) *err = CUDA_ERROR_OUT_OF_MEMORY;
    return s;
  }
  pthread_mutex_lock(&fkStreamsLock);
  fkStream* s = fkStreams;
  while (s && s != (fkStream*)h) s = s->next;
  pthread_mutex_unlock(&fkStreamsLock);
  if (!s || s->destroyed) {
    *err = fkFail(CUDA_ERROR_INVALID_HANDLE, "stream %p: %s", (void*)h, s ? "destroyed" : "not a stream");
    return NULL;
  }
  return s;
}

/* Appends op to s; returns its number. */
static uint64_t fkPushRaw(fkStream* s, fkOp* op) {
  pthread_mutex_lock(&s->mu);
  op->seq = ++s->enq;
  op->next = NULL;
  if (op->kind == OP_EVENT) {
    pthread_mutex_lock(&fkEvLock);
    op->ev->s = s;
    op->ev->seq = op->seq;
    op->ev->timeNs = -1;
    op->ev->refs++;
    pthread_mutex_unlock(&fkEvLock);
  }
  if (s->tail) s->tail->next = op;
  else s->head = op;
  s->tail = op;
  pthread_cond_broadcast(&s->cv);
  uint64_t seq = op->seq;
  pthread_mutex_unlock(&s->mu);
  return seq;
}

static void fkWaitFor(fkStream* s, fkStream* other) {
  pthread_mutex_lock(&other->mu);
  uint64_t target = other->enq, done = other->done;
  pthread_mutex_unlock(&other->mu);
  if (done >= target) return;
  fkOp* w = calloc(1, sizeof *w);
  if (!w) return;
  w->kind = OP_WAIT_STREAM;
  w->other = other;
  w->otherSeq = target;
  fkPushRaw(s, w);
}

/* Appends op (allocated by the caller, owned by the stream from here),
 * after the implicit synchronization of the legacy stream. */
uint64_t fkPush(fkStream* s, fkOp* op) {
  if (fkHangNext) {
    op->hang = 1;
    fkHangNext = 0;
  }
  if (s->legacy) {
    pthread_mutex_lock(&fkStreamsLock);
    fkStream* list[256];
    int n = 0;
    for (fkStream* t = fkStreams; t && n < 256; t = t->next)
      if (t != s && t->dev == s->dev && t->blocking && !t->legacy && !t->destroyed) list[n++] = t;
    pthread_mutex_unlock(&fkStreamsLock);
    for (int i = 0; i < n; i++) fkWaitFor(s, list[i]);
  } else if (s->blocking) {
    pthread_mutex_lock(&fkStreamsLock);
    fkStream* l = fkLegacy[s->dev];
    pthread_mutex_unlock(&fkStreamsLock);
    if (l) fkWaitFor(s, l);
  }
  return fkPushRaw(s, op);
}

void fkWaitSeq(fkStream* s, uint64_t seq) {
  pthread_mutex_lock(&s->mu);
  while (s->done < seq) pthread_cond_wait(&s->cv, &s->mu);
  pthread_mutex_unlock(&s->mu);
}

static const char* fkOpName(int kind) {
  static const char* const names[] = {"a copy", "a memset", "a kernel", "an event record", "a wait for another stream",
                                      "cuStreamWaitValue32", "cuStreamWriteValue32", "a host function", "its end"};
  return kind >= 0 && kind <= OP_EXIT ? names[kind] : "?";
}

void fkSyncDevice(int dev, const char* why) {
  fkStream* list[256];
  int n = 0;
  pthread_mutex_lock(&fkStreamsLock);
  for (fkStream* t = fkStreams; t && n < 256; t = t->next)
    if (t->dev == dev || dev < 0) list[n++] = t;
  pthread_mutex_unlock(&fkStreamsLock);
  for (int i = 0; i < n; i++) {
    fkStream* t = list[i];
    pthread_mutex_lock(&t->mu);
    uint64_t target = t->enq;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    int told = 0;
    while (t->done < target) {
      if (pthread_cond_timedwait(&t->cv, &t->mu, &until) != 0 && !told && t->done < target) {
        /* a real GPU waits here just the same: say what the device waits for */
        fprintf(stderr, "fakecuda: %s has waited 5 s for GPU %d to go idle (it synchronizes the device, as the "
                        "real driver's does); stream %p is in %s%s\n",
                why, t->dev, (void*)t, t->cur ? fkOpName(t->cur->kind) : "nothing",
                t->cur && t->cur->kind == OP_WAIT_VALUE ? ", which only the host can satisfy: a deadlock if the "
                                                          "thread that would open it is this one" : "");
        told = 1;
      }
    }
    pthread_mutex_unlock(&t->mu);
  }
}

fkOp* fkNewOp(int kind) {
  fkOp* op = calloc(1, sizeof *op);
  if (op) op->kind = kind;
  return op;
}

CUresult fk_cuStreamCreate(CUstream* out, unsigned int flags) {
  FK_ENTER("cuStreamCreate");
  if (!out || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
  int dev = fkCurrentDev();
  if (dev < 0) return fkFail(CUDA_ERROR_INVALID_CONTEXT, "cuStreamCreate without a current context");
  pthread_mutex_lock(&fkStreamsLock);
  fkStream* s = fkNewStream(dev, !(flags & CU_STREAM_NON_BLOCKING), 0);
  pthread_mutex_unlock(&fkStreamsLock);
  if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
  *out = (CUstream)s;
  return CUDA_SUCCESS;
}

CUresult fk_cuStreamDestroy(CUstream h) {
  FK_ENTER("cuStreamDestroy");
  if (!h || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) return CUDA_ERROR_INVALID_HANDLE;
  CUresult err;
  fkStream* s = fkStreamOf(h, &err);
  if (!s) return err;
  fkOp* op = fkNewOp(OP_EXIT);
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  s->destroyed = 1; /* its work still runs; the thread then ends (the struct stays for events) */
  fkPushRaw(s, op);
  return CUDA_SUCCESS;
}

CUresult fk_cuStreamSynchronize(CUstream h) {
  FK_ENTER("cuStreamSynchronize");
  CUresult err;
  fkStream* s = fkStreamOf(h, &err);
  if (!s) return err;
  pthread_mutex_lock(&s->mu);
  uint64_t target = s->enq;
  pthread_mutex_unlock(&s->mu);
  fkWaitSeq(s, target);
  return (CUresult)atomic_load(&fkSticky);
}

CUresult fk_cuStreamQuery(CUstream h) {
  FK_ENTER("cuStreamQuery");
  CUresult err;
  fkStream* s = fkStreamOf(h, &err);
  if (!s) return err;
  pthread_mutex_lock(&s->mu);
  int idle = s->done == s->enq;
  pthread_mutex_unlock(&s->mu);
  return idle ? (CUresult)atomic_load(&fkSticky) : CUDA_ERROR_NOT_READY;
}

/* ---- copies ------------------------------------------------------------------------- */

/* A device-side range must lie inside its allocation; host memory is not checked. */
static CUresult fkCheckRange(uintptr_t p, size_t n, int needDevice, const char* what) {
  pthread_rwlock_rdlock(&fkRegLock);
  fkRegion* r = fkRegionFind(p);
  int ok = r ? n <= r->size - (p - r->base) : !needDevice;
  size_t have = r ? r->size - (p - r->base) : 0;
  pthread_rwlock_unlock(&fkRegLock);
  if (!ok)
    return fkFail(CUDA_ERROR_INVALID_VALUE, "%s: %zu bytes at %p %s", what, n, (void*)p,
                  r ? "run past the allocation" : "are not device memory");
  (void)have;
  return CUDA_SUCCESS;
}

static CUresult fkCopyEnqueue(const char* what, CUdeviceptr dst, CUdeviceptr src, size_t n, fkStream* s,
                              uint64_t* seq) {
  CUresult r;
  if (n == 0) return CUDA_SUCCESS;
  if ((r = fkCheckRange((uintptr_t)dst, n, 0, what)) != CUDA_SUCCESS ||
      (r = fkCheckRange((uintptr_t)src, n, 0, what)) != CUDA_SUCCESS)
    return r;
  if (dst != src && dst < src + n && src < dst + n)
    return fkFail(CUDA_ERROR_INVALID_VALUE, "%s: source %p and destination %p of %zu bytes overlap", what, (void*)src,
                  (void*)dst, n);
  fkOp* op = fkNewOp(OP_COPY);
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  op->dst = (uintptr_t)dst, op->src = (uintptr_t)src, op->n = n;
  uint64_t q = fkPush(s, op);
  if (seq) *seq = q;
  return CUDA_SUCCESS;
}

CUresult fk_cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
  FK_ENTER("cuMemcpyAsync");
  CUresult err;
  fkStream* s = fkStreamOf(h, &err);
  if (!s) return err;
  return fkCopyEnqueue("cuMemcpyAsync", dst, src, n, s, NULL);
}

/* The address a 2-D copy's side names: host, device or unified memory
 * (arrays are not modelled); 0 for another memory type. */
static uintptr_t fk2dSide(CUmemorytype t, const void* host, CUdeviceptr dev) {
  if (t == CU_MEMORYTYPE_HOST) return (uintptr_t)host;
  return t == CU_MEMORYTYPE_DEVICE || t == CU_MEMORYTYPE_UNIFIED ? (uintptr_t)dev : 0;
}

/* Height rows of WidthInBytes, row i from the source + i * srcPitch to the
 * destination + i * dstPitch (after the X/Y offsets), each row a copy of its
 * own on the stream, in order. As the driver: the width at most either
 * pitch, no pitch above CU_DEVICE_ATTRIBUTE_MAX_PITCH (2^31 - 1); every row
 * is checked before any is enqueued. */
CUresult fk_cuMemcpy2DAsync(const CUDA_MEMCPY2D* c, CUstream h) {
  FK_ENTER("cuMemcpy2DAsync");
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  CUresult err;
  fkStream* s = fkStreamOf(h, &err);
  if (!s) return err;
  uintptr_t src = fk2dSide(c->srcMemoryType, c->srcHost, c->srcDevice);
  uintptr_t dst = fk2dSide(c->dstMemoryType, c->dstHost, c->dstDevice);
  size_t w = c->WidthInBytes, maxPitch = 0x7fffffff;
  if (!src || !dst || w > c->srcPitch || w > c->dstPitch || c->srcPitch > maxPitch || c->dstPitch > maxPitch)
    return fkFail(CUDA_ERROR_INVALID_VALUE, "cuMemcpy2DAsync: memory types %d/%d, width %zu, pitches %zu/%zu",
                  (int)c->srcMemoryType, (int)c->dstMemoryType, w, c->srcPitch, c->dstPitch);
  src += c->srcXInBytes + c->srcY * c->srcPitch;
  dst += c->dstXInBytes + c->dstY * c->dstPitch;
  for (size_t i = 0; i < c->Height && w; i++)
    if ((err = fkCheckRange(dst + i * c->dstPitch, w, 0, "cuMemcpy2DAsync")) != CUDA_SUCCESS ||
        (err = fkCheckRange(src + i * c->srcPitch, w, 0, "cuMemcpy2DAsync")) != CUDA_SUCCESS)
      return err;
  for (size_t i = 0; i < c->Height; i++)
    if ((err = fkCopyEnqueue("cuMemcpy2DAsync", dst + i * c->dstPitch, src + i * c->srcPitch, w, s, NULL)) !=
        CUDA_SUCCESS)
      return err;
  return CUDA_SUCCESS;
}

CUresult fk_cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  FK_ENTER("cuMemcpy");
  CUresult err;
  fkStream* s = fkStreamOf(NULL, &err);
  if (!s) return err;
  uint64_t seq = 0;
  if ((err = fkCopyEnqueue("cuMemcpy", dst, src, n, s, &seq)) != CUDA_SUCCESS) return err;
  if (seq) fkWaitSeq(s, seq);
  return (CUresult)atomic_load(&fkSticky);
}

CUresult fk_cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream h) {
  FK_ENTER("cuMemsetD8Async");
  CUresult err;
  fkStream* s = fkStreamOf(h, &err);
  if (!s) return err;
  if (n == 0) return CUDA_SUCCESS;
  if ((err = fkCheckRange((uintptr_t)dst, n, 1, "cuMemsetD8Async")) != CUDA_SUCCESS) return err;
  fkOp* op = fkNewOp(OP_SET);
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  op->dst = (uintptr_t)dst, op->n = n, op->val = v;
  fkPush(s, op);
  return CUDA_SUCCESS;
}

/* ---- stream memory operations and host functions ------------------------------------------ */
static CUresult fkValueOp(const char* what, int kind, CUstream h, CUdeviceptr addr, cuuint32_t v, unsigned flags) {
  if (fkCfg.noMemOps) return fkFail(CUDA_ERROR_NOT_SUPPORTED, "%s: FAKECUDA_NO_MEMOPS", what);
  CUresult err;
  fkStream* s = fkStreamOf(h, &err);
  if (!s) return err;
  if (addr % 4) return fkFail(CUDA_ERROR_INVALID_VALUE, "%s: address %p not 4-byte aligned", what, (void*)addr);
  if ((err = fkCheckRange((uintptr_t)addr, 4, 1, what)) != CUDA_SUCCESS) return err;
  fkOp* op = fkNewOp(kind);
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  op->dst = (uintptr_t)addr, op->value = v, op->flags = flags;
  fkPush(s, op);
  return CUDA_SUCCESS;
}

CUresult fk_cuStreamWaitValue32(CUstream h, CUdeviceptr addr, cuuint32_t v, unsigned int flags) {
  FK_ENTER("cuStreamWaitValue32");
  if ((flags & 0xf) > CU_STREAM_WAIT_VALUE_NOR) return CUDA_ERROR_INVALID_VALUE;
  return fkValueOp("cuStreamWaitValue32", OP_WAIT_VALUE, h, addr, v, flags);
}

CUresult fk_cuStreamWriteValue32(CUstream h, CUdeviceptr addr, cuuint32_t v, unsigned int flags) {
  FK_ENTER("cuStreamWriteValue32");
  return fkValueOp("cuStreamWriteValue32", OP_WRITE_VALUE, h, addr, v, flags);
}

CUresult fk_cuLaunchHostFunc(CUstream h, CUhostFn fn, void* arg) {
  FK_ENTER("cuLaunchHostFunc");
  if (!fn) return CUDA_ERROR_INVALID_VALUE;
  CUresult err;
  fkStream* s = fkStreamOf(h, &err);
  if (!s) return err;
  fkOp* op = fkNewOp(OP_HOSTFN);
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  op->hfn = fn, op->harg = arg;
  fkPush(s, op);
  return CUDA_SUCCESS;
}

CUresult fkEnqueueKernel(fkStream* s, const void* kernel, fkKernelExec fn, const void* args, size_t argBytes,
                         const unsigned grid[3], const unsigned block[3]) {
  fkOp* op = fkNewOp(OP_KERNEL);
  if (!op || argBytes > sizeof op->args) {
    free(op);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  op->kernel = kernel, op->fn = fn;
  memcpy(op->args, args, argBytes);
  memcpy(op->grid, grid, sizeof op->grid);
  memcpy(op->block, block, sizeof op->block);
  fkPush(s, op);
  return CUDA_SUCCESS;
}
