/*
 * devexec.c - enqueues coll's kernels (kernels.cu, embedded as a fatbin) and
 * copy-engine copies on CUDA streams (devexec.h).
 *
 * The fatbin is loaded once per process with cuLibraryLoadData, which is
 * context independent: the driver loads the module into each context the
 * first time a kernel of it runs there, so one table of CUkernel handles
 * serves every GPU.
 */
#include "device/devexec.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "device/cuda_loader.h"
#include "device/kernel_names.h"
#include "misc/log.h"
#include "reduce/reduce.h"

#ifndef COLL_CUDA_ARCHS_STR
#define COLL_CUDA_ARCHS_STR ""
#endif

const char* collDevArchs(void) { return COLL_CUDA_ARCHS_STR; }

#ifdef COLL_HAVE_CUDA

#define COLL_DEV_MAX 64 /* devices with a cached context / SM count */

extern const unsigned char collDevFatbin[]; /* fatbin_data.c */

static pthread_mutex_t collDevLock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext collDevCtx[COLL_DEV_MAX];    /* retained primary contexts */
static atomic_int collDevSms[COLL_DEV_MAX];   /* multiprocessors, 0 = not read yet */

static pthread_once_t collDevKernOnce = PTHREAD_ONCE_INIT;
static collResult_t collDevKernErr = collInternalError;
static char collDevKernMsg[400];
static CUlibrary collDevLib;
static CUfunction collDevCopyFn;
static CUfunction collDevRedFn[collNumTypes][4];
static CUfunction collDevAvgFn[collNumTypes];

int collDevCount(void) {
  if (collCudaLoadQuiet() != collSuccess) return 0;
  int n = 0;
  return COLL_CU(cuDeviceGetCount)(&n) == CUDA_SUCCESS ? n : 0;
}

collResult_t collDevSetCurrent(int device) {
  collResult_t r = collCudaLoad();
  if (r != collSuccess) return r;
  int n = 0;
  COLL_CU_CHECK(COLL_CU(cuDeviceGetCount)(&n), "CUDA: cuDeviceGetCount failed");
  if (device < 0 || device >= n || device >= COLL_DEV_MAX)
    return collSetError(collInvalidArgument, "CUDA: device %d does not exist (this process sees %d)", device, n);
  pthread_mutex_lock(&collDevLock);
  CUcontext ctx = collDevCtx[device];
  CUresult cr = CUDA_SUCCESS;
  if (!ctx) {
    CUdevice dev;
    if ((cr = COLL_CU(cuDeviceGet)(&dev, device)) == CUDA_SUCCESS &&
        (cr = COLL_CU(cuDevicePrimaryCtxRetain)(&ctx, dev)) == CUDA_SUCCESS)
      collDevCtx[device] = ctx;
  }
  pthread_mutex_unlock(&collDevLock);
  if (cr != CUDA_SUCCESS) return collCudaError(cr, "CUDA: retaining the device's primary context failed");
  COLL_CU_CHECK(COLL_CU(cuCtxSetCurrent)(ctx), "CUDA: cuCtxSetCurrent failed");
  return collSuccess;
}

/* Loads the fatbin and looks up every kernel; the error is replayed. */
static void collDevLoadKernels(void) {
  static const char* const types[] = COLL_DEV_TYPE_TAGS;
  static const char* const ops[] = COLL_DEV_OP_TAGS;
  CUresult r = COLL_CU(cuLibraryLoadData)(&collDevLib, collDevFatbin, NULL, NULL, 0, NULL, NULL, 0);
  if (r != CUDA_SUCCESS) {
    snprintf(collDevKernMsg, sizeof collDevKernMsg, "CUDA: loading coll's kernels (built for %s) failed: %s (%s)",
             COLL_CUDA_ARCHS_STR, collCudaErrorName(r), collCudaErrorString(r));
    collDevKernErr = collSystemError;
    return;
  }
  char name[64];
  CUkernel k;
#define COLL_DEV_GET(fnp, ...)                                                                              \
  do {                                                                                                      \
    snprintf(name, sizeof name, __VA_ARGS__);                                                               \
    if ((r = COLL_CU(cuLibraryGetKernel)(&k, collDevLib, name)) != CUDA_SUCCESS) {                          \
      snprintf(collDevKernMsg, sizeof collDevKernMsg, "CUDA: kernel %s missing from coll's fatbin: %s", name, \
               collCudaErrorName(r));                                                                       \
      collDevKernErr = collInternalError;                                                                   \
      return;                                                                                               \
    }                                                                                                       \
    *(fnp) = (CUfunction)k; /* a CUkernel is launched as a CUfunction */                                    \
  } while (0)
  COLL_DEV_GET(&collDevCopyFn, "collDevCopy");
  for (int t = 0; t < collNumTypes; t++) {
    for (int o = 0; o < 4; o++) COLL_DEV_GET(&collDevRedFn[t][o], "collDevReduce_%s_%s", ops[o], types[t]);
    COLL_DEV_GET(&collDevAvgFn[t], "collDevAvg_%s", types[t]);
  }
#undef COLL_DEV_GET
  collDevKernErr = collSuccess;
  COLL_INFO(COLL_SUB_INIT, "CUDA: coll's kernels loaded (built for %s)", COLL_CUDA_ARCHS_STR);
}

static collResult_t collDevKernels(void) {
  collResult_t r = collCudaLoad();
  if (r != collSuccess) return r;
  pthread_once(&collDevKernOnce, collDevLoadKernels);
  if (collDevKernErr != collSuccess) return collSetError(collDevKernErr, "%s", collDevKernMsg);
  return collSuccess;
}

/* Multiprocessors of the current context's device (cached), 1 if unknown. */
static int collDevSmCount(void) {
  CUdevice dev;
  if (COLL_CU(cuCtxGetDevice)(&dev) != CUDA_SUCCESS || dev < 0 || dev >= COLL_DEV_MAX) return 1;
  int n = atomic_load_explicit(&collDevSms[dev], memory_order_relaxed);
  if (n == 0) {
    if (COLL_CU(cuDeviceGetAttribute)(&n, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) != CUDA_SUCCESS || n < 1)
      n = 1;
    atomic_store_explicit(&collDevSms[dev], n, memory_order_relaxed);
  }
  return n;
}

unsigned collDevGridFor(size_t bytes) {
  size_t packs = (bytes + 15) / 16;
  size_t blocks = (packs + COLL_DEV_THREADS - 1) / COLL_DEV_THREADS;
  size_t cap = collCudaLoadQuiet() == collSuccess ? (size_t)collDevSmCount() * 4 : 1;
  if (blocks > cap) blocks = cap;
  return blocks ? (unsigned)blocks : 1u;
}

static collResult_t collDevLaunch(CUfunction f, const char* what, size_t bytes, void* stream, void** args) {
  CUresult r = COLL_CU(cuLaunchKernel)(f, collDevGridFor(bytes), 1, 1, COLL_DEV_THREADS, 1, 1, 0, (CUstream)stream,
                                       args, NULL);
  if (r != CUDA_SUCCESS) {
    char msg[160];
    snprintf(msg, sizeof msg, "CUDA: launching %s failed (kernels built for %s)", what, COLL_CUDA_ARCHS_STR);
    return collCudaError(r, msg);
  }
  return collSuccess;
}

collResult_t collDevCopyAsync(void* dst, const void* src, size_t bytes, int how, void* stream) {
  if (bytes == 0 || dst == src) return collCudaLoad();
  if (how == COLL_DEV_COPY_ENGINE) {
    collResult_t r = collCudaLoad();
    if (r != collSuccess) return r;
    COLL_CU_CHECK(COLL_CU(cuMemcpyAsync)((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, bytes,
                                         (CUstream)stream),
                  "CUDA: cuMemcpyAsync failed");
    return collSuccess;
  }
  collResult_t r = collDevKernels();
  if (r != collSuccess) return r;
  void* args[] = {&dst, &src, &bytes};
  return collDevLaunch(collDevCopyFn, "collDevCopy", bytes, stream, args);
}

collResult_t collDevReduceAsync(void* dst, const void* a, const void* b, size_t n, collDataType_t t,
                                collRedOp_t op, void* stream) {
  if ((unsigned)t >= (unsigned)collNumTypes || (unsigned)op >= (unsigned)collNumOps)
    return collSetError(collInvalidArgument, "collDevReduceAsync: datatype %d or op %d is invalid", (int)t, (int)op);
  collResult_t r = collDevKernels();
  if (r != collSuccess || n == 0) return r;
  void* args[] = {&dst, &a, &b, &n};
  int o = op == collAvg ? collSum : (int)op;
  return collDevLaunch(collDevRedFn[t][o], "a reduction kernel", n * collTypeSize(t), stream, args);
}

collResult_t collDevAvgAsync(void* buf, size_t n, collDataType_t t, int nranks, void* stream) {
  if ((unsigned)t >= (unsigned)collNumTypes)
    return collSetError(collInvalidArgument, "collDevAvgAsync: datatype %d is invalid", (int)t);
  collResult_t r = collDevKernels();
  if (r != collSuccess || n == 0 || nranks <= 1) return r;
  void* args[] = {&buf, &n, &nranks};
  return collDevLaunch(collDevAvgFn[t], "the avg kernel", n * collTypeSize(t), stream, args);
}

collResult_t collDevAlloc(void** p, size_t bytes) {
  if (!p || bytes == 0) return collSetError(collInvalidArgument, "collDevAlloc: p is NULL or bytes is 0");
  *p = NULL;
  collResult_t r = collCudaLoad();
  if (r != collSuccess) return r;
  CUdeviceptr d = 0;
  CUresult cr = COLL_CU(cuMemAlloc)(&d, bytes);
  if (cr != CUDA_SUCCESS) {
    char what[80];
    snprintf(what, sizeof what, "CUDA: cuMemAlloc of %zu bytes failed", bytes);
    return collCudaError(cr, what);
  }
  *p = (void*)(uintptr_t)d;
  return collSuccess;
}

void collDevFree(void* p) {
  if (p && collCudaLoadQuiet() == collSuccess) COLL_CU(cuMemFree)((CUdeviceptr)(uintptr_t)p);
}

int collDevStreamIdle(void* stream) {
  CUresult cr = COLL_CU(cuStreamQuery)((CUstream)stream);
  if (cr == CUDA_SUCCESS) return 1;
  if (cr == CUDA_ERROR_NOT_READY) return 0;
  collCudaError(cr, "CUDA: a copy or reduction kernel of this call failed (cuStreamQuery)");
  return -1;
}

collResult_t collDevStreamSync(void* stream) {
  CUresult cr = COLL_CU(cuStreamSynchronize)((CUstream)stream);
  return cr == CUDA_SUCCESS ? collSuccess
                            : collCudaError(cr, "CUDA: a copy or reduction kernel of this call failed "
                                                "(cuStreamSynchronize)");
}

#else /* !COLL_HAVE_CUDA: every entry point says why */

int collDevCount(void) { return 0; }
collResult_t collDevSetCurrent(int device) {
  (void)device;
  return collCudaLoad();
}
unsigned collDevGridFor(size_t bytes) {
  (void)bytes;
  return 1;
}
collResult_t collDevCopyAsync(void* dst, const void* src, size_t bytes, int how, void* stream) {
  (void)dst, (void)src, (void)bytes, (void)how, (void)stream;
  return collCudaLoad();
}
collResult_t collDevReduceAsync(void* dst, const void* a, const void* b, size_t n, collDataType_t t,
                                collRedOp_t op, void* stream) {
  (void)dst, (void)a, (void)b, (void)n, (void)t, (void)op, (void)stream;
  return collCudaLoad();
}
collResult_t collDevAvgAsync(void* buf, size_t n, collDataType_t t, int nranks, void* stream) {
  (void)buf, (void)n, (void)t, (void)nranks, (void)stream;
  return collCudaLoad();
}
collResult_t collDevAlloc(void** p, size_t bytes) {
  if (p) *p = NULL;
  (void)bytes;
  return collCudaLoad();
}
void collDevFree(void* p) { (void)p; }
int collDevStreamIdle(void* stream) {
  (void)stream;
  collCudaLoad();
  return -1;
}
collResult_t collDevStreamSync(void* stream) {
  (void)stream;
  return collCudaLoad();
}
#endif
