/*
 * cuda_loader.c - dlopen of the CUDA driver at first use (cuda_loader.h).
 *
 * Why the driver API behind dlopen, and not the CUDA runtime: linking
 * libcudart (even statically) makes libcoll's kernels register with the
 * runtime when the library loads, and a dynamic libcudart is one more
 * library a host-only machine must have. With the driver API loaded on
 * demand, libcoll.so has no CUDA dependency at all (readelf -d lists none),
 * host-only programs never initialize CUDA, and the kernels are an embedded
 * fatbin loaded with cuLibraryLoadData (context independent, CUDA 12+).
 * This is also how NCCL reaches the driver (cuGetProcAddress), and it lets
 * a test point COLL_CUDA_LIBRARY at the toolkit's stub to see each failure.
 */
#include "device/cuda_loader.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "misc/log.h"
#include "misc/param.h"

/* ---- is the driver library mapped? (no loading) --------------------------- */

static _Atomic unsigned long long collCudaSeenAdds = ~0ull; /* dlpi_adds at the last full scan */
static atomic_int collCudaMapped;                           /* found once: stays 1 */
/* CLOCK_MONOTONIC_COARSE (ns) when a look last found no driver: until the
 * clock ticks again (1-10 ms), the answer stays 0 without a look. Device
 * memory cannot appear that fast after the library is mapped: creating a
 * CUDA context alone takes tens of milliseconds. */
static _Atomic long long collCudaQuietTick = -1;

static int collCudaAddsCb(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  *(unsigned long long*)data = info->dlpi_adds;
  return 1; /* the first object is enough: every entry carries the counter */
}

/* The basename of the configured library, e.g. "libcuda.so.1". */
static const char* collCudaLibBase(void) {
  const char* lib = collParamStr(COLL_SPARAM_CUDA_LIBRARY);
  const char* slash = strrchr(lib, '/');
  return slash ? slash + 1 : lib;
}

static int collCudaFindCb(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  const char* name = info->dlpi_name;
  if (!name || !*name) return 0;
  const char* slash = strrchr(name, '/');
  const char* base = slash ? slash + 1 : name;
  if (strncmp(base, "libcuda.so", 10) == 0 || strcmp(base, collCudaLibBase()) == 0) {
    *(int*)data = 1;
    return 1;
  }
  return 0;
}

/* Looks at the loaded objects (only when something was loaded since the
 * last look): 1 when the driver library is among them. */
static int collCudaScan(void) {
  unsigned long long adds = 0;
  dl_iterate_phdr(collCudaAddsCb, &adds);
  if (adds == atomic_load_explicit(&collCudaSeenAdds, memory_order_relaxed)) return 0;
  /* something was loaded since the last scan: look at every object. The
   * counter read before the scan is stored, so a load during the scan is
   * seen by the next call. */
  int found = 0;
  dl_iterate_phdr(collCudaFindCb, &found);
  if (found) atomic_store_explicit(&collCudaMapped, 1, memory_order_release);
  atomic_store_explicit(&collCudaSeenAdds, adds, memory_order_relaxed);
  return found;
}

int collCudaDriverPresent(void) {
  if (atomic_load_explicit(&collCudaMapped, memory_order_acquire)) return 1;
  struct timespec ts;
  long long tick = clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) == 0 ? (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec
                                                                    : -1;
  if (tick >= 0 && tick == atomic_load_explicit(&collCudaQuietTick, memory_order_acquire)) return 0;
  int found = collCudaScan();
  if (!found && tick >= 0) atomic_store_explicit(&collCudaQuietTick, tick, memory_order_release);
  return found;
}

/* ---- error names ------------------------------------------------------------- */

/* The results a failing init, load or launch is most likely to give; the
 * stub library cannot name them itself. */
static const struct {
  int code;
  const char *name, *text;
} collCudaErrTab[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {35, "CUDA_ERROR_INSUFFICIENT_DRIVER", "CUDA driver version is insufficient for CUDA runtime version"},
    {46, "CUDA_ERROR_DEVICE_UNAVAILABLE", "CUDA-capable device(s) is/are busy or unavailable"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
    {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the provided PTX was compiled with an unsupported toolchain"},
    {304, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on this OS"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "system has unsupported display driver / cuda driver combination"},
    {804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", "forward compatibility was attempted on non supported HW"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

#ifdef COLL_HAVE_CUDA
static atomic_int collCudaReady; /* 1 after a successful load */
#endif

const char* collCudaErrorName(int r) {
#ifdef COLL_HAVE_CUDA
  const char* s = NULL;
  if (atomic_load(&collCudaReady) && COLL_CU(cuGetErrorName)((CUresult)r, &s) == CUDA_SUCCESS && s) return s;
#endif
  for (size_t i = 0; i < sizeof collCudaErrTab / sizeof collCudaErrTab[0]; i++)
    if (collCudaErrTab[i].code == r) return collCudaErrTab[i].name;
  return "CUDA_ERROR_?";
}

const char* collCudaErrorString(int r) {
#ifdef COLL_HAVE_CUDA
  const char* s = NULL;
  if (atomic_load(&collCudaReady) && COLL_CU(cuGetErrorString)((CUresult)r, &s) == CUDA_SUCCESS && s) return s;
#endif
  for (size_t i = 0; i < sizeof collCudaErrTab / sizeof collCudaErrTab[0]; i++)
    if (collCudaErrTab[i].code == r) return collCudaErrTab[i].text;
  return "unrecognized CUDA error code";
}

collResult_t collCudaError(int r, const char* what) {
  return collSetError(collSystemError, "%s: %s (%s, CUDA error %d)", what, collCudaErrorName(r),
                      collCudaErrorString(r), r);
}

/* ---- loading ----------------------------------------------------------------- */

static pthread_once_t collCudaOnce = PTHREAD_ONCE_INIT;
static collResult_t collCudaLoadErr = collInternalError;
static char collCudaLoadMsg[600];
static int collCudaVersion;

#ifdef COLL_HAVE_CUDA
collCudaTable collCudaFns;

/* Records why loading failed; the message is replayed on every later call. */
__attribute__((format(printf, 2, 3))) static void collCudaFail(collResult_t code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(collCudaLoadMsg, sizeof collCudaLoadMsg, fmt, ap);
  va_end(ap);
  collCudaLoadErr = code;
}

typedef CUresult (*collCuGetProc)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
typedef CUresult (*collCuInitFn)(unsigned int);
typedef CUresult (*collCuVersionFn)(int*);

static void collCudaLoadOnce(void) {
  const char* lib = collParamStr(COLL_SPARAM_CUDA_LIBRARY);
  void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    collCudaFail(collSystemError,
                 "CUDA: cannot load the driver library: %s (no NVIDIA driver on this machine; COLL_CUDA_LIBRARY "
                 "names another path); coll runs host memory only here",
                 dlerror());
    return;
  }
  /* the handle stays open: a CUDA driver cannot be unloaded safely */
  atomic_store_explicit(&collCudaMapped, 1, memory_order_release);
  collCuGetProc getProc = (collCuGetProc)dlsym(h, "cuGetProcAddress_v2");
  collCuInitFn init = (collCuInitFn)dlsym(h, "cuInit");
  collCuVersionFn version = (collCuVersionFn)dlsym(h, "cuDriverGetVersion");
  if (!getProc || !init || !version) {
    collCudaFail(collSystemError, "CUDA: %s has no %s: not a CUDA driver of version 12.0 or newer", lib,
                 !getProc ? "cuGetProcAddress_v2" : !init ? "cuInit" : "cuDriverGetVersion");
    return;
  }
  CUresult r = init(0);
  if (r != CUDA_SUCCESS) {
    collCudaFail(collSystemError, "CUDA: cuInit failed: %s (%s, CUDA error %d) with the driver library %s",
                 collCudaErrorName(r), collCudaErrorString(r), (int)r, lib);
    return;
  }
  int v = 0;
  if ((r = version(&v)) != CUDA_SUCCESS) {
    collCudaFail(collSystemError, "CUDA: cuDriverGetVersion failed: %s", collCudaErrorName(r));
    return;
  }
  if (v / 1000 < CUDA_VERSION / 1000) {
    collCudaFail(collSystemError,
                 "CUDA: the driver supports CUDA %d.%d, but coll's kernels were built with CUDA %d.%d: install a "
                 "driver for CUDA %d or newer",
                 v / 1000, v % 1000 / 10, CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10, CUDA_VERSION / 1000);
    return;
  }
#define COLL_CUDA_GET(name)                                                                                \
  {                                                                                                        \
    void* p = NULL;                                                                                        \
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                              \
    r = getProc(#name, &p, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &st);                                \
    if (r != CUDA_SUCCESS || !p || st != CU_GET_PROC_ADDRESS_SUCCESS) {                                    \
      collCudaFail(collSystemError, "CUDA: the driver (CUDA %d.%d) has no %s for CUDA %d.%d (%s, status %d)", \
                   v / 1000, v % 1000 / 10, #name, CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10,          \
                   collCudaErrorName(r), (int)st);                                                          \
      return;                                                                                              \
    }                                                                                                      \
    memcpy(&collCudaFns.pfn_##name, &p, sizeof p);                                                         \
  }
  COLL_CUDA_SYMBOLS(COLL_CUDA_GET)
#undef COLL_CUDA_GET
#define COLL_CUDA_GET_OPTIONAL(name)                                                                  \
  {                                                                                                  \
    void* p = NULL;                                                                                  \
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                        \
    r = getProc(#name, &p, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &st);                          \
    if (r != CUDA_SUCCESS || st != CU_GET_PROC_ADDRESS_SUCCESS) p = NULL;                            \
    if (!p) COLL_INFO(COLL_SUB_INIT, "CUDA: the driver has no %s (optional; its feature is off)", #name); \
    memcpy(&collCudaFns.pfn_##name, &p, sizeof p);                                                   \
  }
  COLL_CUDA_OPTIONAL_SYMBOLS(COLL_CUDA_GET_OPTIONAL)
#undef COLL_CUDA_GET_OPTIONAL
  collCudaVersion = v;
  atomic_store(&collCudaReady, 1);
  collCudaLoadErr = collSuccess;
  atomic_store_explicit(&collCudaMapped, 1, memory_order_release);
  int n = 0;
  COLL_CU(cuDeviceGetCount)(&n);
  COLL_INFO(COLL_SUB_INIT, "CUDA driver %d.%d loaded from %s, %d device(s)", v / 1000, v % 1000 / 10, lib, n);
}
#else
static void collCudaLoadOnce(void) {
  snprintf(collCudaLoadMsg, sizeof collCudaLoadMsg,
           "CUDA: libcoll was built without CUDA support (COLL_CUDA=OFF or no toolkit at build time); it runs "
           "host memory only");
  collCudaLoadErr = collInvalidUsage;
}
#endif

int collCudaBuilt(void) {
#ifdef COLL_HAVE_CUDA
  return 1;
#else
  return 0;
#endif
}

collResult_t collCudaLoad(void) {
  pthread_once(&collCudaOnce, collCudaLoadOnce);
  if (collCudaLoadErr == collSuccess) return collSuccess;
  return collSetError(collCudaLoadErr, "%s", collCudaLoadMsg);
}

collResult_t collCudaLoadQuiet(void) {
  pthread_once(&collCudaOnce, collCudaLoadOnce);
  return collCudaLoadErr;
}

const char* collCudaLoadMessage(void) {
  pthread_once(&collCudaOnce, collCudaLoadOnce);
  return collCudaLoadMsg;
}

int collCudaDriverVersion(void) {
  pthread_once(&collCudaOnce, collCudaLoadOnce);
  return collCudaVersion;
}
