/*
 * devmem.c - device buffers for the benchmarks (devmem.h): the few CUDA
 * driver calls they need, through dlopen. Entry points come from
 * cuGetProcAddress_v2 for the CUDA 12 ABI when the driver has it (as libcoll
 * loads them), else from dlsym of the versioned names; no CUDA header is
 * needed, the handful of types is declared here with the driver's ABI.
 *
 * SPDX-License-Identifier: BSD-3-Clause
 */
#include "devmem.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void* CUcontext;
typedef void* CUstream;

#define CU_OK 0
#define CU_NO_DEVICE 100

/* X(name, dlsym name, required, return type, arguments): a subset of what
 * libcoll's loader takes (so a driver that serves libcoll serves these
 * programs too, the fake one of tests/fakecuda included); copies use
 * cuMemcpy with unified addressing (host pointers are host memory). */
#define BENCH_CU_FNS(X)                                                                            \
  X(cuInit, "cuInit", 1, CUresult, (unsigned))                                                     \
  X(cuGetErrorName, "cuGetErrorName", 0, CUresult, (CUresult, const char**))                       \
  X(cuGetErrorString, "cuGetErrorString", 0, CUresult, (CUresult, const char**))                   \
  X(cuDeviceGetCount, "cuDeviceGetCount", 1, CUresult, (int*))                                     \
  X(cuDeviceGet, "cuDeviceGet", 1, CUresult, (CUdevice*, int))                                     \
  X(cuDeviceGetName, "cuDeviceGetName", 0, CUresult, (char*, int, CUdevice))                       \
  X(cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId", 0, CUresult, (char*, int, CUdevice))               \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 1, CUresult, (CUcontext*, CUdevice))     \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", 1, CUresult, (CUcontext))                                  \
  X(cuMemAlloc, "cuMemAlloc_v2", 1, CUresult, (CUdeviceptr*, size_t))                              \
  X(cuMemFree, "cuMemFree_v2", 1, CUresult, (CUdeviceptr))                                         \
  X(cuMemsetD8Async, "cuMemsetD8Async", 1, CUresult, (CUdeviceptr, unsigned char, size_t, CUstream)) \
  X(cuMemcpy, "cuMemcpy", 1, CUresult, (CUdeviceptr, CUdeviceptr, size_t))                         \
  X(cuStreamCreate, "cuStreamCreate", 1, CUresult, (CUstream*, unsigned))                          \
  X(cuStreamSynchronize, "cuStreamSynchronize", 1, CUresult, (CUstream))                           \
  X(cuStreamDestroy, "cuStreamDestroy_v2", 1, CUresult, (CUstream))

#define BENCH_CU_PFN(name, sym, req, ret, args) ret(*name) args;
static struct {
  BENCH_CU_FNS(BENCH_CU_PFN)
} cu;
#undef BENCH_CU_PFN

static pthread_once_t loadOnce = PTHREAD_ONCE_INIT;
static int loadRc = -1, devCount;
static char loadMsg[512];
static _Thread_local char errMsg[512];

const char* benchDevError(void) { return errMsg; }

__attribute__((format(printf, 1, 2))) static int fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(errMsg, sizeof errMsg, fmt, ap);
  va_end(ap);
  return -1;
}

/* "what: CUDA_ERROR_X (text)" for a failed call. */
static int cuFail(CUresult r, const char* what) {
  const char *name = NULL, *text = NULL;
  if (cu.cuGetErrorName) cu.cuGetErrorName(r, &name);
  if (cu.cuGetErrorString) cu.cuGetErrorString(r, &text);
  if (!name && r == CU_NO_DEVICE) name = "CUDA_ERROR_NO_DEVICE", text = "no CUDA-capable device is detected";
  if (!name && r == 34) name = "CUDA_ERROR_STUB_LIBRARY", text = "CUDA driver is a stub library";
  return fail("%s: %s (%s, CUDA error %d)", what, name ? name : "CUDA_ERROR_?", text ? text : "no description", r);
}

#define CUCHECK(call, what)             \
  do {                                  \
    CUresult r_ = (call);               \
    if (r_ != CU_OK) return cuFail(r_, what); \
  } while (0)

static void loadDriver(void) {
  const char* var = "COLL_TESTS_CUDA_LIBRARY"; /* the benchmarks' own, for tests */
  const char* lib = getenv(var);
  if (!lib || !*lib) lib = getenv(var = "COLL_CUDA_LIBRARY");
  if (!lib || !*lib) lib = "libcuda.so.1", var = "the default; COLL_CUDA_LIBRARY names another";
  void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fail("cannot load the CUDA driver (%s, %s): %s", lib, var, dlerror());
    goto out;
  }
  typedef CUresult (*getProc_t)(const char*, void**, int, unsigned long long, int*);
  getProc_t getProc = (getProc_t)dlsym(h, "cuGetProcAddress_v2");
#define BENCH_CU_RESOLVE(name, sym, req, ret, args)                                            \
  {                                                                                             \
    void* p = NULL;                                                                             \
    int st = 0;                                                                                 \
    if (!getProc || getProc(#name, &p, 12000, 0, &st) != CU_OK) p = NULL;                       \
    if (!p) p = dlsym(h, sym);                                                                  \
    if (!p && req) {                                                                            \
      fail("the CUDA driver %s lacks %s", lib, sym);                                            \
      goto out;                                                                                 \
    }                                                                                           \
    memcpy(&cu.name, &p, sizeof p);                                                             \
  }
  BENCH_CU_FNS(BENCH_CU_RESOLVE)
#undef BENCH_CU_RESOLVE
  CUresult r = cu.cuInit(0);
  if (r != CU_OK) {
    cuFail(r, "cuInit");
    goto out;
  }
  if ((r = cu.cuDeviceGetCount(&devCount)) != CU_OK) {
    cuFail(r, "cuDeviceGetCount");
    goto out;
  }
  if (devCount <= 0) {
    cuFail(CU_NO_DEVICE, "cuDeviceGetCount");
    goto out;
  }
  loadRc = 0;
out:
  if (loadRc != 0) snprintf(loadMsg, sizeof loadMsg, "%s", errMsg);
}

int benchDevLoad(int* count) {
  pthread_once(&loadOnce, loadDriver);
  if (loadRc != 0) return fail("%s", loadMsg);
  *count = devCount;
  return 0;
}

int benchDevProbeForked(void) {
  int fds[2];
  if (pipe(fds) != 0) return fail("--device cuda: pipe: %s", strerror(errno));
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return fail("--device cuda: fork: %s", strerror(errno));
  }
  if (pid == 0) {
    close(fds[0]);
    int n = 0;
    int rc = benchDevLoad(&n);
    if (rc != 0 && write(fds[1], errMsg, strlen(errMsg)) < 0) rc = -1;
    _exit(rc == 0 ? 0 : 1);
  }
  close(fds[1]);
  char msg[sizeof errMsg] = "";
  size_t got = 0;
  for (ssize_t k; got + 1 < sizeof msg && (k = read(fds[0], msg + got, sizeof msg - 1 - got)) > 0;) got += (size_t)k;
  msg[got] = '\0';
  close(fds[0]);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
  return fail("%s", got ? msg : "the CUDA probe process died");
}

int benchDevUse(int device, char* desc, size_t descLen, char* bus, size_t busLen) {
  int n = 0;
  if (benchDevLoad(&n)) return -1;
  if (device < 0 || device >= n) return fail("GPU %d does not exist (%d GPUs)", device, n);
  CUdevice d;
  CUcontext ctx;
  CUCHECK(cu.cuDeviceGet(&d, device), "cuDeviceGet");
  CUCHECK(cu.cuDevicePrimaryCtxRetain(&ctx, d), "cuDevicePrimaryCtxRetain");
  CUCHECK(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  if (desc && (!cu.cuDeviceGetName || cu.cuDeviceGetName(desc, (int)descLen, d) != CU_OK))
    snprintf(desc, descLen, "GPU %d", device);
  if (bus && (!cu.cuDeviceGetPCIBusId || cu.cuDeviceGetPCIBusId(bus, (int)busLen, d) != CU_OK))
    snprintf(bus, busLen, "?");
  return 0;
}

int benchDevAlloc(void** p, size_t bytes) {
  CUdeviceptr d = 0;
  char what[96];
  snprintf(what, sizeof what, "cuMemAlloc of %zu bytes", bytes);
  CUCHECK(cu.cuMemAlloc(&d, bytes), what);
  CUresult r = cu.cuMemsetD8Async(d, 0, bytes, NULL);
  if (r == CU_OK) r = cu.cuStreamSynchronize(NULL);
  if (r != CU_OK) {
    cu.cuMemFree(d);
    return cuFail(r, "cuMemsetD8Async");
  }
  *p = (void*)(uintptr_t)d;
  return 0;
}

void benchDevFree(void* p) {
  if (p && cu.cuMemFree) cu.cuMemFree((CUdeviceptr)(uintptr_t)p);
}

int benchDevToDevice(void* dst, const void* src, size_t bytes) {
  CUCHECK(cu.cuMemcpy((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, bytes), "cuMemcpy to the GPU");
  /* from pageable memory the copy may return before its DMA ends: the
   * collective's first read must see every byte (the copy runs on the
   * legacy default stream) */
  CUCHECK(cu.cuStreamSynchronize(NULL), "cuStreamSynchronize (legacy stream)");
  return 0;
}

int benchDevToHost(void* dst, const void* src, size_t bytes) {
  CUCHECK(cu.cuMemcpy((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, bytes), "cuMemcpy to the host");
  return 0;
}

int benchDevStreamCreate(void** stream) {
  CUstream s = NULL;
  /* non-blocking, as nccl-tests': the copies of the checks run on the legacy
   * stream, which would otherwise wait for every rank thread's stream, and
   * those wait for this rank's next call (ranks as threads deadlocked) */
  CUCHECK(cu.cuStreamCreate(&s, 1 /* CU_STREAM_NON_BLOCKING */), "cuStreamCreate");
  *stream = s;
  return 0;
}

int benchDevStreamSync(void* stream) {
  CUCHECK(cu.cuStreamSynchronize(stream), "cuStreamSynchronize");
  return 0;
}

void benchDevStreamDestroy(void* stream) {
  if (stream && cu.cuStreamDestroy) cu.cuStreamDestroy(stream);
}
