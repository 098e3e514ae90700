/* devcall.c - calls on CUDA device buffers and CUDA streams (devcall.h). */
#include "core/devcall.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "device/cuda_loader.h"
#include "device/devexec.h"
#include "device/gate.h"
#include "engine/devpath.h"
#include "engine/progress.h"
#include "misc/log.h"
#include "misc/param.h"
#include "reduce/reduce.h"

#ifdef COLL_HAVE_CUDA

/* Serializes the creation of comm->dev (stream creation and issue may run
 * on different threads). */
static pthread_mutex_t collDevCreateLock = PTHREAD_MUTEX_INITIALIZER;

#define COLL_DEV_PIPE_SLOTS 2

struct collDevComm {
  pthread_mutex_t lock; /* the fields below */
  int device;           /* bound GPU; -1: not yet */
  int ready;            /* gate, copy stream and events exist */
  collDevGate* gate;
  uint32_t gateSeq;     /* number of the last call that got a gate wait (issue is one thread at a time) */
  CUstream copy;        /* staging copies (non-blocking: never ordered after the user's legacy stream) */
  CUevent in[COLL_DEV_PIPE_SLOTS], out[COLL_DEV_PIPE_SLOTS]; /* pipeline: a piece's copy in / out done */
  char* stage;          /* pinned host staging */
  size_t stageBytes;
  char** old;           /* staging buffers it replaced, freed with the comm */
  int nold;
  CUevent* pool;        /* events for issue, reused */
  int npool, cappool;
  int wedged;           /* a wait on coll's CUDA work gave up (timeout, abort): its pinned memory is never freed,
                           since cuMemFreeHost would wait for the device */
  unsigned long long stagedCalls; /* device calls that copied data through the staging (collDevStagedCalls) */
};

struct collDevWork {
  int failed;           /* issue failed after a gate wait: only open the gate */
  collResult_t failErr;
  int gated;            /* the gate opens to `gate` when done */
  uint32_t gate;
  int nev;
  CUevent ev[];         /* recorded at issue on each CUDA stream */
};

/* Memory of a wedged device that coll can never free (a stream of the GPU may
 * still read it): kept reachable here, so that leak checkers see it is
 * held on purpose. */
static void collDevKeepForever(void* p) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static void** kept;
  static size_t n, cap;
  pthread_mutex_lock(&lock);
  if (n == cap) {
    void** k = realloc(kept, (cap ? 2 * cap : 8) * sizeof *k);
    if (k) kept = k, cap = cap ? 2 * cap : 8;
  }
  if (n < cap) kept[n++] = p;
  pthread_mutex_unlock(&lock);
}

static struct collDevComm* collDevComm(collComm_t comm) {
  pthread_mutex_lock(&collDevCreateLock);
  if (!comm->dev) {
    struct collDevComm* d = calloc(1, sizeof *d);
    if (d) {
      pthread_mutex_init(&d->lock, NULL);
      d->device = -1;
      comm->dev = d;
    }
  }
  pthread_mutex_unlock(&collDevCreateLock);
  return comm->dev;
}

/* Saves the calling thread's CUDA context and makes comm's GPU current. */
static collResult_t collDevEnter(struct collDevComm* d, CUcontext* saved) {
  *saved = NULL;
  COLL_CU(cuCtxGetCurrent)(saved);
  return collDevSetCurrent(d->device);
}

static void collDevLeave(CUcontext saved) {
  CUcontext now = NULL;
  if (COLL_CU(cuCtxGetCurrent)(&now) == CUDA_SUCCESS && now != saved) COLL_CU(cuCtxSetCurrent)(saved);
}

collResult_t collDevBind(collComm_t comm, int device, const char* fn, const char* what) {
  struct collDevComm* d = collDevComm(comm);
  if (!d) return collSetError(collSystemError, "%s: out of memory", fn);
  pthread_mutex_lock(&d->lock);
  int bound = d->device;
  if (bound < 0) d->device = bound = device;
  pthread_mutex_unlock(&d->lock);
  if (bound != device)
    return collSetError(collInvalidArgument,
                        "%s: %s is on GPU %d but this communicator runs on GPU %d (bound by its first device call "
                        "or CUDA stream); one communicator uses one GPU: create one per GPU",
                        fn, what, device, bound);
  return collSuccess;
}

/* Creates the gate, the copy stream and the pipeline events once, with
 * comm's GPU current. */
static collResult_t collDevReady(struct collDevComm* d) {
  pthread_mutex_lock(&d->lock);
  collResult_t r = collSuccess;
  if (!d->ready) {
    CUresult cr = COLL_CU(cuStreamCreate)(&d->copy, CU_STREAM_NON_BLOCKING);
    if (cr != CUDA_SUCCESS) r = collCudaError(cr, "CUDA: creating coll's staging stream (cuStreamCreate) failed");
    for (int i = 0; r == collSuccess && i < COLL_DEV_PIPE_SLOTS; i++) {
      if ((cr = COLL_CU(cuEventCreate)(&d->in[i], CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS ||
          (cr = COLL_CU(cuEventCreate)(&d->out[i], CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS)
        r = collCudaError(cr, "CUDA: cuEventCreate failed");
    }
    if (r == collSuccess) r = collDevGateCreate(&d->gate);
    if (r == collSuccess) d->ready = 1;
  }
  pthread_mutex_unlock(&d->lock);
  return r;
}

/* ---- bounded waits on CUDA work ------------------------------------------------
 * Every wait for the device polls (cuEventQuery / cuStreamQuery) instead of
 * blocking in cuEventSynchronize / cuStreamSynchronize, so that a GPU that
 * never finishes (a hung kernel, a wedged device) still ends the call: at
 * the call's deadline (collTimeout) or when the communicator is aborted
 * (collCommAbort, a peer's failure). A wait that gives up marks the device
 * state wedged: its pinned memory is then never freed (cuMemFreeHost would
 * wait for the device) and the communicator has failed. The poll yields 64 times, then sleeps
 * from 50 us, doubling up to 1 ms: a long kernel before the call does not
 * burn a core, and the call starts at most 1 ms after the kernel ends. */

static double collDevNow(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define COLL_DEV_WAIT_SLEEP_MIN_NS 50000L
#define COLL_DEV_WAIT_SLEEP_MAX_NS 1000000L

/* What one call waits under: its deadline (0: none) and its timeout. */
typedef struct {
  double deadline, timeoutSec;
} collDevLimit;

static collDevLimit collDevLimitOf(double timeoutSec) {
  collDevLimit l = {timeoutSec > 0 ? collDevNow() + timeoutSec : 0, timeoutSec};
  return l;
}

/* Waits until ev (isEvent) or stream st (NULL: the legacy default stream)
 * finished. Errors: the CUDA error of the query ("CUDA: <what> failed"),
 * collTimeout at the deadline and, after collCommAbort or a failure of
 * the communicator, its error; each message names `what`. d (may be NULL)
 * is marked wedged when the wait gives up. */
static collResult_t collDevWaitDone(collComm_t comm, struct collDevComm* d, int isEvent, void* h, collDevLimit lim,
                                    const char* what) {
  long sleepNs = COLL_DEV_WAIT_SLEEP_MIN_NS;
  for (int spins = 0;; spins++) {
    CUresult q = isEvent ? COLL_CU(cuEventQuery)((CUevent)h) : COLL_CU(cuStreamQuery)((CUstream)h);
    if (q == CUDA_SUCCESS) return collSuccess;
    if (q != CUDA_ERROR_NOT_READY) {
      char m[256];
      snprintf(m, sizeof m, "CUDA: %s failed (%s)", what, isEvent ? "cuEventQuery" : "cuStreamQuery");
      return collCudaError(q, m);
    }
    collResult_t r = collSuccess;
    if (__atomic_load_n(&comm->abortFlag, __ATOMIC_ACQUIRE)) {
      char fn[192];
      snprintf(fn, sizeof fn, "rank %d: waiting for %s", comm->rank, what);
      r = collCommFailedError(comm, fn); /* the abort flag is set: never collSuccess */
    } else if (lim.deadline > 0 && collDevNow() > lim.deadline) {
      r = collSetError(collTimeout,
                       "rank %d: %s did not finish within %.3g s (the call's timeout): a kernel still running, or a "
                       "hung GPU",
                       comm->rank, what, lim.timeoutSec);
    }
    if (r != collSuccess) {
      if (d) d->wedged = 1;
      return r;
    }
    if (spins < 64) {
      sched_yield();
      continue;
    }
    nanosleep(&(struct timespec){0, sleepNs}, NULL);
    sleepNs = 2 * sleepNs < COLL_DEV_WAIT_SLEEP_MAX_NS ? 2 * sleepNs : COLL_DEV_WAIT_SLEEP_MAX_NS;
  }
}

/* ---- staging --------------------------------------------------------------- */

/* Makes the staging buffer at least need bytes. The old one is kept until
 * the communicator is freed: cuMemFreeHost synchronizes the whole device,
 * which would wait for the user's streams, which wait for this call's gate.
 * Sizes at least double, so the kept ones add up to less than the last. */
static collResult_t collDevGrowStage(struct collDevComm* d, size_t need) {
  if (need <= d->stageBytes) return collSuccess;
  if (need < 2 * d->stageBytes) need = 2 * d->stageBytes;
  if (d->stage) {
    char** n = realloc(d->old, sizeof *n * (size_t)(d->nold + 1));
    if (!n) return collSetError(collSystemError, "engine: out of memory growing the host staging");
    d->old = n;
    d->old[d->nold++] = d->stage;
  }
  d->stage = NULL;
  d->stageBytes = 0;
  void* p = NULL;
  CUresult cr = COLL_CU(cuMemHostAlloc)(&p, need, CU_MEMHOSTALLOC_PORTABLE);
  if (cr != CUDA_SUCCESS) {
    char what[128];
    snprintf(what, sizeof what, "CUDA: allocating %zu bytes of pinned host staging (cuMemHostAlloc) failed", need);
    return collCudaError(cr, what);
  }
  d->stage = p;
  d->stageBytes = need;
  return collSuccess;
}

/* What one op reads and writes, in bytes. */
typedef struct {
  size_t sBytes, rBytes;
  int sUsed, rUsed;
  int alias;   /* 1: send lies inside recv, 2: recv inside send, 0: apart */
  size_t sOff, rOff; /* in the staging buffer (of the outer region when aliased) */
} collStageMap;

static void collDevMapOp(collComm_t comm, const collOp* op, collStageMap* m) {
  size_t es = collTypeSize(op->dtype), b = op->count * es, n = (size_t)comm->nranks;
  memset(m, 0, sizeof *m);
  if (op->count == 0) return;
  m->sBytes = m->rBytes = b;
  m->sUsed = m->rUsed = 1;
  switch (op->fn) {
    case COLL_FN_ALLGATHER: m->rBytes = b * n; break;
    case COLL_FN_REDUCESCATTER: m->sBytes = b * n; break;
    case COLL_FN_BROADCAST: m->sUsed = comm->rank == op->root; break;
    case COLL_FN_REDUCE: m->rUsed = comm->rank == op->root; break;
    case COLL_FN_SEND: m->rUsed = 0; break;
    case COLL_FN_RECV: m->sUsed = 0; break;
    default: break;
  }
  if (m->sUsed && m->rUsed) {
    uintptr_t s = (uintptr_t)op->sendbuff, r = (uintptr_t)op->recvbuff;
    if (s >= r && s + m->sBytes <= r + m->rBytes) m->alias = 1;
    else if (r >= s && r + m->rBytes <= s + m->sBytes) m->alias = 2;
  }
}

static size_t collAlign64(size_t x) { return (x + 63) & ~(size_t)63; }

/* Where op's send / recv data lie in the staging buffer. */
static char* collStageSend(const struct collDevComm* d, const collOp* op, const collStageMap* m) {
  if (!m->sUsed) return NULL;
  if (m->alias == 1) return d->stage + m->rOff + ((const char*)op->sendbuff - (const char*)op->recvbuff);
  return d->stage + m->sOff;
}

static char* collStageRecv(const struct collDevComm* d, const collOp* op, const collStageMap* m) {
  if (!m->rUsed) return NULL;
  if (m->alias == 2) return d->stage + m->sOff + ((const char*)op->recvbuff - (const char*)op->sendbuff);
  return d->stage + m->rOff;
}

static collResult_t collDevCopy(struct collDevComm* d, void* dst, const void* src, size_t bytes, const char* what) {
  if (bytes == 0) return collSuccess;
  CUresult cr = COLL_CU(cuMemcpyAsync)((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, bytes, d->copy);
  return cr == CUDA_SUCCESS ? collSuccess : collCudaError(cr, what);
}

/* Waits for coll's staging copies (bounded: collDevWaitDone). */
static collResult_t collDevSync(collComm_t comm, struct collDevComm* d, collDevLimit lim, const char* what) {
  return collDevWaitDone(comm, d, 0, d->copy, lim, what);
}

/* After the failure r (whose message is the thread's error): waits for the
 * staging copies already enqueued, so that none still reads or writes the
 * staging, and keeps r's message. Unless a wait gave up before (d is
 * wedged: the staging is never freed nor reused, the comm has failed). */
static void collDevSettle(collComm_t comm, struct collDevComm* d, collDevLimit lim, collResult_t r) {
  if (d->wedged) return;
  char keep[1024];
  snprintf(keep, sizeof keep, "%s", collLastErrorMessage());
  collDevSync(comm, d, lim, "coll's staging copies after a failure");
  collSetError(r, "%s", keep);
}

/* A failure of coll's own CUDA work fails the communicator, as a transport
 * failure does (peers then fail instead of waiting for this rank). */
static collResult_t collDevFail(collComm_t comm, collResult_t r) {
  if (__atomic_load_n(&comm->abortFlag, __ATOMIC_ACQUIRE)) return r;
  return collEngineFail(comm, r);
}

/* Pitches a 2-D copy may have (CU_DEVICE_ATTRIBUTE_MAX_PITCH: 2^31 - 1 on
 * the GPUs CUDA 12 supports); a longer stride takes one copy per segment. */
#define COLL_DEV_MAX_PITCH ((size_t)0x7fffffff)

/* Copies nseg segments of bytes each on coll's copy stream: segment i from
 * src + i * srcStride to dst + i * dstStride. Several segments are one
 * cuMemcpy2DAsync (rows of bytes at the two pitches; unified addresses, so
 * either side may be device or pinned host memory) where the driver has it
 * and the strides fit its pitch limit, else one cuMemcpyAsync each. */
static collResult_t collDevCopySegs(struct collDevComm* d, char* dst, size_t dstStride, const char* src,
                                    size_t srcStride, size_t nseg, size_t bytes, const char* what) {
  if (nseg > 1 && bytes && COLL_CU(cuMemcpy2DAsync) && srcStride <= COLL_DEV_MAX_PITCH &&
      dstStride <= COLL_DEV_MAX_PITCH) {
    CUDA_MEMCPY2D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
    c.srcDevice = (CUdeviceptr)(uintptr_t)src;
    c.srcPitch = srcStride;
    c.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
    c.dstDevice = (CUdeviceptr)(uintptr_t)dst;
    c.dstPitch = dstStride;
    c.WidthInBytes = bytes;
    c.Height = nseg;
    CUresult cr = COLL_CU(cuMemcpy2DAsync)(&c, d->copy);
    return cr == CUDA_SUCCESS ? collSuccess : collCudaError(cr, what);
  }
  collResult_t r = collSuccess;
  for (size_t i = 0; i < nseg && r == collSuccess; i++)
    r = collDevCopy(d, dst + i * dstStride, src + i * srcStride, bytes, what);
  return r;
}

/* All-reduce, broadcast, reduce, all-gather or reduce-scatter piece by
 * piece (see devcall.h). Piece k covers elements [k * pe, k * pe + len) of
 * each rank's block: reduce-scatter's input and all-gather's output are the
 * n segments at r * count + k * pe (r < n), contiguous in the slot, and the
 * piece runs as the host collective of count len on the slot. */
static collResult_t collDevRunPiped(collComm_t comm, struct collDevComm* d, const collOp* op, const collStageMap* m,
                                    size_t pieceBytes) {
  size_t es = collTypeSize(op->dtype), pe = pieceBytes / es ? pieceBytes / es : 1, pb = pe * es;
  size_t npieces = (op->count + pe - 1) / pe, block = op->count * es, n = (size_t)comm->nranks;
  size_t sSegs = op->fn == COLL_FN_REDUCESCATTER ? n : 1, rSegs = op->fn == COLL_FN_ALLGATHER ? n : 1;
  size_t slotBytes = (sSegs + rSegs) * pb; /* a slot: the piece's input, then its output */
  __atomic_add_fetch(&d->stagedCalls, 1, __ATOMIC_RELAXED);
  collResult_t r = collDevGrowStage(d, COLL_DEV_PIPE_SLOTS * slotBytes);
  if (r != collSuccess) return collDevFail(comm, r);
  collDevLimit lim = collDevLimitOf(op->timeoutSec);
  const char* send = op->sendbuff;
  char* recv = op->recvbuff;
  CUresult cr = CUDA_SUCCESS;
  collResult_t err = collSuccess;
  for (size_t k = 0; k < npieces && err == collSuccess; k++) {
    /* copy in piece k (first) and k + 1: the latter overlaps piece k's collective */
    for (size_t j = k == 0 ? 0 : k + 1; j <= k + 1 && j < npieces && m->sUsed; j++) {
      char* slot = d->stage + (j % COLL_DEV_PIPE_SLOTS) * slotBytes;
      size_t len = (j + 1 < npieces ? pe : op->count - j * pe) * es;
      if ((err = collDevCopySegs(d, slot, len, send + j * pb, block, sSegs, len,
                                 "CUDA: copying a device input piece to host staging failed")))
        break;
      if ((cr = COLL_CU(cuEventRecord)(d->in[j % COLL_DEV_PIPE_SLOTS], d->copy)) != CUDA_SUCCESS) {
        err = collCudaError(cr, "CUDA: cuEventRecord failed");
        break;
      }
    }
    if (err != collSuccess) break;
    int s = (int)(k % COLL_DEV_PIPE_SLOTS);
    char* slot = d->stage + (size_t)s * slotBytes;
    if (m->sUsed &&
        (err = collDevWaitDone(comm, d, 1, d->in[s], lim, "the copy of a device input piece to host staging")))
      break;
    /* piece k - 2's copy back must have read this slot */
    if (m->rUsed && k >= COLL_DEV_PIPE_SLOTS &&
        (err = collDevWaitDone(comm, d, 1, d->out[s], lim, "the copy of a result piece to device memory")))
      break;
    collOp piece = *op;
    piece.mem = (collMemInfo)COLL_MEM_HOST_INFO;
    piece.count = k + 1 < npieces ? pe : op->count - k * pe;
    piece.sendbuff = m->sUsed ? slot : NULL;
    piece.recvbuff = m->rUsed ? slot + sSegs * pb : NULL;
    if ((r = collEngineRun(comm, &piece, 1)) != collSuccess) {
      collDevSettle(comm, d, lim, r); /* nothing may still read the staging */
      return r;
    }
    if (m->rUsed) {
      size_t len = piece.count * es;
      if ((err = collDevCopySegs(d, recv + k * pb, block, slot + sSegs * pb, len, rSegs, len,
                                 "CUDA: copying a result piece to device memory failed")))
        break;
      if ((cr = COLL_CU(cuEventRecord)(d->out[s], d->copy)) != CUDA_SUCCESS) {
        err = collCudaError(cr, "CUDA: cuEventRecord failed");
        break;
      }
    }
  }
  if (err == collSuccess) err = collDevSync(comm, d, lim, "the copies of the result pieces to device memory");
  else collDevSettle(comm, d, lim, err);
  return err == collSuccess ? collSuccess : collDevFail(comm, err);
}

/* Runs ops with their device buffers staged through pinned host memory,
 * with comm's GPU current on this thread. */
static collResult_t collDevRunStaged(collComm_t comm, struct collDevComm* d, const collOp* ops, int nops) {
  if (nops == 1 && ops[0].mem.kind != COLL_MEM_HOST &&
      (ops[0].fn == COLL_FN_ALLREDUCE || ops[0].fn == COLL_FN_BROADCAST || ops[0].fn == COLL_FN_REDUCE ||
       ops[0].fn == COLL_FN_ALLGATHER || ops[0].fn == COLL_FN_REDUCESCATTER)) {
    size_t piece = (size_t)collParamInt(COLL_PARAM_CUDA_STAGE_CHUNK);
    collStageMap m;
    collDevMapOp(comm, &ops[0], &m);
    if (ops[0].count * collTypeSize(ops[0].dtype) > piece) return collDevRunPiped(comm, d, &ops[0], &m, piece);
  }
  collStageMap one, *maps = nops == 1 ? &one : calloc((size_t)nops, sizeof *maps);
  collOp two[1], *staged = nops == 1 ? two : malloc(sizeof(collOp) * (size_t)nops);
  collResult_t r = collSuccess;
  collDevLimit lim = collDevLimitOf(ops[0].timeoutSec);
  if (!maps || !staged) {
    r = collDevFail(comm, collSetError(collSystemError, "engine: out of memory staging %d device calls", nops));
    goto out;
  }
  size_t total = 0;
  for (int i = 0; i < nops; i++) {
    staged[i] = ops[i];
    if (ops[i].mem.kind == COLL_MEM_HOST) continue;
    collDevMapOp(comm, &ops[i], &maps[i]);
    collStageMap* m = &maps[i];
    if (m->sUsed && m->alias != 1) {
      m->sOff = total;
      total += collAlign64(m->sBytes);
    }
    if (m->rUsed && m->alias != 2) {
      m->rOff = total;
      total += collAlign64(m->rBytes);
    }
  }
  if (total) __atomic_add_fetch(&d->stagedCalls, 1, __ATOMIC_RELAXED);
  if (total && (r = collDevGrowStage(d, total)) != collSuccess) {
    r = collDevFail(comm, r);
    goto out;
  }
  for (int i = 0; i < nops && r == collSuccess; i++) {
    if (ops[i].mem.kind == COLL_MEM_HOST) continue;
    staged[i].mem = (collMemInfo)COLL_MEM_HOST_INFO;
    staged[i].sendbuff = collStageSend(d, &ops[i], &maps[i]);
    staged[i].recvbuff = collStageRecv(d, &ops[i], &maps[i]);
    if (maps[i].sUsed)
      r = collDevCopy(d, (void*)staged[i].sendbuff, ops[i].sendbuff, maps[i].sBytes,
                      "CUDA: copying a device input to host staging failed");
  }
  if (r == collSuccess) r = collDevSync(comm, d, lim, "the copies of the call's device inputs to host staging");
  else collDevSettle(comm, d, lim, r);
  if (r != collSuccess) {
    r = collDevFail(comm, r);
    goto out;
  }
  if ((r = collEngineRun(comm, staged, nops)) != collSuccess) goto out;
  for (int i = 0; i < nops && r == collSuccess; i++)
    if (ops[i].mem.kind != COLL_MEM_HOST && maps[i].rUsed)
      r = collDevCopy(d, ops[i].recvbuff, staged[i].recvbuff, maps[i].rBytes,
                      "CUDA: copying a result to device memory failed");
  if (r == collSuccess) r = collDevSync(comm, d, lim, "the copies of the results to device memory");
  else collDevSettle(comm, d, lim, r);
  if (r != collSuccess) r = collDevFail(comm, r);
out:
  if (maps != &one) free(maps);
  if (staged != two) free(staged);
  return r;
}

/* One collective device-resident where it can be (engine/devpath.h), else
 * staged. */
static collResult_t collDevRunOps(collComm_t comm, struct collDevComm* d, const collOp* ops, int nops) {
  if (nops == 1 && collDevPathWanted(comm, &ops[0])) {
    int ran = 0;
    collResult_t r = collDevPathRun(comm, &ops[0], &ran);
    if (r != collSuccess || ran) return r;
  }
  return collDevRunStaged(comm, d, ops, nops);
}

unsigned long long collDevStagedCalls(collComm_t comm) {
  struct collDevComm* d = comm->dev;
  return d ? __atomic_load_n(&d->stagedCalls, __ATOMIC_RELAXED) : 0;
}

static void collDevPoolPut(struct collDevComm* d, CUevent ev) {
  pthread_mutex_lock(&d->lock);
  if (d->npool == d->cappool) {
    int ncap = d->cappool ? d->cappool * 2 : 8;
    CUevent* n = realloc(d->pool, sizeof *n * (size_t)ncap);
    if (!n) {
      pthread_mutex_unlock(&d->lock);
      COLL_CU(cuEventDestroy)(ev);
      return;
    }
    d->pool = n;
    d->cappool = ncap;
  }
  d->pool[d->npool++] = ev;
  pthread_mutex_unlock(&d->lock);
}

static collResult_t collDevPoolGet(struct collDevComm* d, CUevent* ev) {
  pthread_mutex_lock(&d->lock);
  int have = d->npool > 0;
  if (have) *ev = d->pool[--d->npool];
  pthread_mutex_unlock(&d->lock);
  if (have) return collSuccess;
  CUresult cr = COLL_CU(cuEventCreate)(ev, CU_EVENT_DISABLE_TIMING);
  return cr == CUDA_SUCCESS ? collSuccess : collCudaError(cr, "CUDA: cuEventCreate failed");
}

/* ---- issue and run ----------------------------------------------------------- */

/* The device of the call: bound at the first device call or CUDA stream. */
static collResult_t collDevFor(collComm_t comm, const collOp* ops, int nops, struct collDevComm** out) {
  collResult_t r = collCudaLoad();
  if (r != collSuccess) return r;
  for (int i = 0; i < nops; i++)
    if (ops[i].mem.kind != COLL_MEM_HOST && (r = collDevBind(comm, ops[i].mem.device, "call", "a buffer")))
      return r;
  struct collDevComm* d = collDevComm(comm);
  if (!d) return collSetError(collSystemError, "out of memory");
  if (d->device < 0) return collSetError(collInternalError, "CUDA work on a communicator bound to no GPU");
  *out = d;
  return collSuccess;
}

collResult_t collDevWorkIssue(collComm_t comm, collStream_t const* streams, int n, const collOp* ops, int nops,
                              collDevWork** out) {
  *out = NULL;
  struct collDevComm* d;
  collResult_t r = collDevFor(comm, ops, nops, &d);
  if (r != collSuccess) return r;
  int ncuda = 0;
  for (int i = 0; i < n; i++) ncuda += streams[i]->cuda;
  collDevWork* w = calloc(1, sizeof *w + sizeof(CUevent) * (size_t)ncuda);
  if (!w) return collSetError(collSystemError, "out of memory issuing a call on a CUDA stream");
  if (!ncuda) { /* device buffers on a collStreamCreate stream: staged when run, nothing to order */
    *out = w;
    return collSuccess;
  }
  CUcontext saved;
  if ((r = collDevEnter(d, &saved)) != collSuccess || (r = collDevReady(d)) != collSuccess) goto fail;
  for (int i = 0; i < n; i++) {
    if (!streams[i]->cuda) continue;
    CUevent ev;
    if ((r = collDevPoolGet(d, &ev)) != collSuccess) goto fail;
    w->ev[w->nev++] = ev;
    CUresult cr = COLL_CU(cuEventRecord)(ev, (CUstream)streams[i]->cuStream);
    if (cr != CUDA_SUCCESS) {
      r = collCudaError(cr, "CUDA: recording an event on the call's CUDA stream failed (cuEventRecord; is the stream "
                            "of this communicator's GPU?)");
      goto fail;
    }
  }
  /* from here on, the work is queued even if a wait fails: the gate must
   * reach this call's number in turn */
  w->gated = 1;
  w->gate = ++d->gateSeq;
  for (int i = 0; i < n; i++) {
    if (!streams[i]->cuda) continue;
    if ((r = collDevGateWait(d->gate, w->gate, streams[i]->cuStream)) != collSuccess) {
      w->failed = 1;
      w->failErr = collDevFail(comm, r);
      break;
    }
  }
  collDevLeave(saved);
  *out = w;
  return r;
fail:
  collDevLeave(saved);
  for (int i = 0; i < w->nev; i++) collDevPoolPut(d, w->ev[i]);
  free(w);
  return r;
}

collResult_t collDevWorkRun(collComm_t comm, collDevWork* w, const collOp* ops, int nops) {
  struct collDevComm* d = comm->dev;
  CUcontext saved;
  collResult_t r = w->failed ? w->failErr : collDevEnter(d, &saved);
  if (w->failed) saved = NULL;
  else if (r != collSuccess) r = collDevFail(comm, r);
  else {
    collDevLimit lim = collDevLimitOf(ops[0].timeoutSec);
    for (int i = 0; i < w->nev && r == collSuccess; i++)
      r = collDevWaitDone(comm, d, 1, w->ev[i], lim, "the work enqueued before this call on its CUDA stream");
    if (r != collSuccess) r = collDevFail(comm, r);
    else if (collDevOpsOnDevice(ops, nops) && (r = collDevReady(d)) != collSuccess) r = collDevFail(comm, r);
    else if (collDevOpsOnDevice(ops, nops)) r = collDevRunOps(comm, d, ops, nops);
    else r = collEngineRun(comm, ops, nops);
  }
  if (!w->failed) collDevLeave(saved);
  return r;
}

void collDevWorkFinish(collComm_t comm, collDevWork* w) {
  struct collDevComm* d = comm->dev;
  for (int i = 0; i < w->nev; i++) collDevPoolPut(d, w->ev[i]);
  if (w->gated) collDevGateOpen(d->gate, w->gate); /* also after a failure: the streams go on */
  free(w);
}

collResult_t collDevSyncLegacy(collComm_t comm, const collOp* ops, int nops) {
  struct collDevComm* d;
  collResult_t r = collDevFor(comm, ops, nops, &d);
  if (r != collSuccess) return r;
  CUcontext saved;
  if ((r = collDevEnter(d, &saved)) == collSuccess &&
      (r = collDevWaitDone(comm, d, 0, NULL, collDevLimitOf(ops[0].timeoutSec),
                           "the work enqueued before this call on the legacy default stream")) != collSuccess)
    r = collDevFail(comm, r); /* as a wait of the engine: a timeout fails the communicator */
  collDevLeave(saved);
  return r;
}

collResult_t collDevRunBlocking(collComm_t comm, const collOp* ops, int nops) {
  struct collDevComm* d;
  collResult_t r = collDevFor(comm, ops, nops, &d);
  if (r != collSuccess) return r;
  CUcontext saved;
  if ((r = collDevEnter(d, &saved)) != collSuccess || (r = collDevReady(d)) != collSuccess) {
    collDevLeave(saved);
    return r;
  }
  r = collDevWaitDone(comm, d, 0, NULL /* the legacy default stream */, collDevLimitOf(ops[0].timeoutSec),
                      "the work enqueued before this call on the legacy default stream");
  if (r != collSuccess) r = collDevFail(comm, r); /* as a wait of the engine: a timeout fails the communicator */
  else r = collDevRunOps(comm, d, ops, nops);
  collDevLeave(saved);
  return r;
}

void collDevCommFree(collComm_t comm) {
  struct collDevComm* d = comm->dev;
  if (!d) return;
  comm->dev = NULL;
  if (d->ready || d->npool || d->stage || d->nold) {
    CUcontext saved;
    if (collDevEnter(d, &saved) == collSuccess) {
      for (int i = 0; i < d->npool; i++) COLL_CU(cuEventDestroy)(d->pool[i]);
      if (d->ready) {
        for (int i = 0; i < COLL_DEV_PIPE_SLOTS; i++) {
          COLL_CU(cuEventDestroy)(d->in[i]);
          COLL_CU(cuEventDestroy)(d->out[i]);
        }
        COLL_CU(cuStreamDestroy)(d->copy);
        if (!d->wedged) collDevGateDestroy(d->gate);
        else collDevKeepForever(d->gate); /* a stream may still poll it */
      }
      if (d->wedged) { /* cuMemFreeHost synchronizes the device, which did not finish coll's work: kept */
        COLL_WARN(COLL_SUB_INIT, "CUDA: rank %d: the GPU did not finish coll's copies; %zu bytes of pinned host "
                                 "staging are not freed (freeing them would wait for the device)",
                  comm->rank, d->stageBytes);
      } else {
        if (d->stage) COLL_CU(cuMemFreeHost)(d->stage);
        for (int i = 0; i < d->nold; i++) COLL_CU(cuMemFreeHost)(d->old[i]);
      }
    }
    collDevLeave(saved);
  }
  free(d->pool);
  free(d->old);
  pthread_mutex_destroy(&d->lock);
  free(d);
}

collResult_t collStreamCreateCudaImpl(collComm_t comm, void* cudaStream, collStream_t* stream) {
  if (!stream) return collSetError(collInvalidArgument, "collStreamCreateCuda: stream is NULL");
  *stream = NULL;
  collResult_t r = collCommEnter(comm, "collStreamCreateCuda");
  if (r != collSuccess) return r;
  if ((r = collCudaLoad()) != collSuccess) {
    r = collSetError(r, "collStreamCreateCuda: %s", collLastErrorMessage());
    goto out;
  }
  CUdevice dev = 0;
  if (COLL_CU(cuCtxGetDevice)(&dev) != CUDA_SUCCESS) dev = 0; /* no current context: GPU 0, as the runtime */
  if ((r = collDevBind(comm, (int)dev, "collStreamCreateCuda", "the current device")) != collSuccess) goto out;
  CUcontext saved;
  if ((r = collDevEnter(comm->dev, &saved)) == collSuccess) r = collDevReady(comm->dev);
  collDevLeave(saved);
  if (r != collSuccess) {
    r = collSetError(r, "collStreamCreateCuda: %s", collLastErrorMessage());
    goto out;
  }
  collStream_t s;
  if ((r = collStreamCreateImpl(comm, &s)) != collSuccess) goto out;
  s->cuda = 1;
  s->cuStream = cudaStream;
  *stream = s;
out:
  collCommLeave(comm);
  return r;
}

#else /* no CUDA in this build: device memory cannot be seen, CUDA streams cannot be made */

struct collDevComm {
  int device;
};

collResult_t collDevBind(collComm_t comm, int device, const char* fn, const char* what) {
  (void)comm, (void)device, (void)what;
  collResult_t r = collCudaLoad();
  return collSetError(r, "%s: %s", fn, collLastErrorMessage());
}

collResult_t collDevWorkIssue(collComm_t comm, collStream_t const* streams, int n, const collOp* ops, int nops,
                              collDevWork** dw) {
  (void)comm, (void)streams, (void)n, (void)ops, (void)nops;
  *dw = NULL;
  return collCudaLoad();
}

collResult_t collDevWorkRun(collComm_t comm, collDevWork* dw, const collOp* ops, int nops) {
  (void)comm, (void)dw, (void)ops, (void)nops;
  return collCudaLoad();
}

void collDevWorkFinish(collComm_t comm, collDevWork* dw) { (void)comm, (void)dw; }

collResult_t collDevSyncLegacy(collComm_t comm, const collOp* ops, int nops) {
  (void)comm, (void)ops, (void)nops;
  return collCudaLoad();
}

collResult_t collDevRunBlocking(collComm_t comm, const collOp* ops, int nops) {
  (void)comm, (void)ops, (void)nops;
  return collCudaLoad();
}

unsigned long long collDevStagedCalls(collComm_t comm) {
  (void)comm;
  return 0;
}

void collDevCommFree(collComm_t comm) {
  free(comm->dev);
  comm->dev = NULL;
}

collResult_t collStreamCreateCudaImpl(collComm_t comm, void* cudaStream, collStream_t* stream) {
  (void)comm, (void)cudaStream;
  if (!stream) return collSetError(collInvalidArgument, "collStreamCreateCuda: stream is NULL");
  *stream = NULL;
  collResult_t r = collCudaLoad();
  return collSetError(r, "collStreamCreateCuda: %s", collLastErrorMessage());
}
#endif
