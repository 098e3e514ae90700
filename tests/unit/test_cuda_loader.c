/*
 * test_cuda_loader.c - the CUDA loader, memory-type queries, the device
 * executor and the stream gate on a machine without a GPU, against the real
 * libraries: the missing driver (libcuda.so.1 absent), the toolkit's stub
 * driver (COLL_CUDA_LIBRARY, cuInit says CUDA_ERROR_STUB_LIBRARY), a library
 * that is not a driver, and the CUDA runtime (libcudart), which answers "no
 * device" here. Each scenario runs in a fresh child process, because the
 * driver is loaded once per process.
 *
 * Where a GPU is present (cudaGetDeviceCount > 0) the device checks run
 * instead of the no-driver ones: cudaMalloc'ed memory is device memory of
 * GPU 0, cudaMallocHost'ed is pinned host memory, cudaMallocManaged'ed is
 * managed, and one call mixing host and device buffers is refused naming
 * both; collectives on device and managed buffers (stream NULL) give the
 * exact result, and run on pinned host memory. Without a GPU those checks are
 * skipped with a message saying so; collectives on host memory then run
 * next to the runtime and next to the mapped stub driver, exact results.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "device/cuda_loader.h"
#include "device/devexec.h"
#include "device/gate.h"
#include "device/memtype.h"
#include "misc/log.h"
#include "transports/p2p/p2p.h"

#ifdef COLL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* Child-side checks: print what failed and count it. */
static int childFails;
#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "  FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond);      \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, "\n");                                                   \
      childFails++;                                                            \
    }                                                                          \
  } while (0)
#define HAS(msg, sub) (strstr((msg), (sub)) != NULL)

#ifdef COLL_HAVE_CUDA
/* A one-rank communicator (NULL after a failure, counted). */
static collComm_t oneRank(const char* when) {
  collUniqueId id;
  collComm_t c = NULL;
  collResult_t r = collGetUniqueId(&id);
  if (r == collSuccess) r = collCommInitRank(&c, 1, id, 0);
  CHECK(r == collSuccess, "%s: one-rank init: %s", when, collGetLastError(NULL));
  return c;
}

/* A collective on host memory at (in, out), n ints: succeeds with the
 * exact result (the memory-type check lets host memory through). */
static void hostCallWorks(const char* when, int32_t* in, int32_t* out, int n) {
  collComm_t c = oneRank(when);
  if (!c) return;
  for (int i = 0; i < n; i++) in[i] = 3 * i - 7, out[i] = 0;
  collResult_t r = collAllReduce(in, out, (size_t)n, collInt32, collMax, c, NULL);
  CHECK(r == collSuccess, "%s: host allreduce: %s", when, collGetLastError(NULL));
  CHECK(memcmp(in, out, sizeof(int32_t) * (size_t)n) == 0, "%s: host allreduce result differs", when);
  collCommDestroy(c);
}

/* A call on device (or managed) memory is refused with `want` in the
 * message, before anything runs. */
static void deviceCallRefused(collResult_t got, const char* want) {
  CHECK(got == collInvalidArgument, "device call returned %d: %s", (int)got, collGetLastError(NULL));
  CHECK(HAS(collGetLastError(NULL), want), "message \"%s\" lacks \"%s\"", collGetLastError(NULL), want);
}
#endif

/* Runs fn in a child with COLL_CUDA_LIBRARY = lib (NULL: unset); the child's
 * exit status is its number of failed checks. */
static void runChild(const char* lib, void (*fn)(void)) {
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    if (lib) setenv("COLL_CUDA_LIBRARY", lib, 1);
    else unsetenv("COLL_CUDA_LIBRARY");
    childFails = 0;
    fn();
    fflush(NULL);
    _exit(childFails > 100 ? 100 : childFails);
  }
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

/* 1 when this machine has a loadable CUDA driver (then the no-driver
 * scenario does not apply). */
static int haveRealDriver(void) {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h) dlclose(h);
  return h != NULL;
}

/* The whole device API fails with err and a message containing `want`;
 * host memory stays host memory. */
static void expectEverythingFails(collResult_t err, const char* want) {
  collResult_t r = collCudaLoad();
  CHECK(r == err, "collCudaLoad returned %d, expected %d", (int)r, (int)err);
  const char* m = collLastErrorMessage();
  CHECK(HAS(m, want), "message \"%s\" lacks \"%s\"", m, want);
  char first[600];
  snprintf(first, sizeof first, "%s", m);
  collClearError();
  CHECK(collCudaLoad() == err, "second collCudaLoad differs");
  CHECK(strcmp(collLastErrorMessage(), first) == 0, "second message \"%s\" differs from \"%s\"",
        collLastErrorMessage(), first);
  CHECK(collCudaLoadQuiet() == err, "collCudaLoadQuiet differs");
  CHECK(strcmp(collCudaLoadMessage(), first) == 0, "collCudaLoadMessage differs");
  CHECK(collCudaDriverVersion() == 0, "driver version %d after a failed load", collCudaDriverVersion());
  CHECK(collDevCount() == 0, "collDevCount %d", collDevCount());
  int x = 5, y = 0;
  struct {
    const char* what;
    collResult_t r;
  } calls[] = {
      {"collDevSetCurrent", collDevSetCurrent(0)},
      {"collDevCopyAsync kernel", collDevCopyAsync(&y, &x, sizeof x, COLL_DEV_COPY_KERNEL, NULL)},
      {"collDevCopyAsync engine", collDevCopyAsync(&y, &x, sizeof x, COLL_DEV_COPY_ENGINE, NULL)},
      {"collDevReduceAsync", collDevReduceAsync(&y, &x, &x, 1, collInt32, collSum, NULL)},
      {"collDevAvgAsync", collDevAvgAsync(&y, 1, collInt32, 2, NULL)},
  };
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
    CHECK(calls[i].r == err, "%s returned %d", calls[i].what, (int)calls[i].r);
  }
  CHECK(y == 0, "a failed call wrote the destination");
  collDevGate* g = (collDevGate*)&x;
  CHECK(collDevGateCreate(&g) == err && g == NULL, "collDevGateCreate did not fail cleanly");
  CHECK(collDevReduceAsync(&y, &x, &x, 1, collNumTypes, collSum, NULL) ==
            (collCudaBuilt() ? collInvalidArgument : err),
        "invalid datatype not refused");
  /* memory types stay answerable: no device memory can exist */
  collMemInfo mi;
  CHECK(collMemQuery(&x, &mi) == collSuccess && mi.kind == COLL_MEM_HOST && mi.device == -1 && !mi.pinned,
        "stack memory is not plain host memory (kind %d device %d)", mi.kind, mi.device);
}

/* No driver on this machine (libcuda.so.1 absent) or no CUDA in the build. */
static void childNoDriver(void) {
  int x = 1;
  collMemInfo mi = {7, 7, 7};
  /* before anything: the driver is not mapped, queries load nothing */
  CHECK(collCudaDriverPresent() == 0, "driver reported present");
  CHECK(collMemQuery(&x, &mi) == collSuccess && mi.kind == COLL_MEM_HOST && mi.device == -1, "host query");
  CHECK(collMemQuery(NULL, &mi) == collSuccess && mi.kind == COLL_MEM_HOST, "NULL is host");
  CHECK(collMemQuery(&x, NULL) == collInvalidArgument, "NULL info accepted");
  CHECK(HAS(collLastErrorMessage(), "info is NULL"), "message: %s", collLastErrorMessage());
  const void* bufs[3] = {&x, NULL, &mi};
  const char* names[3] = {"sendbuff", "unused", "recvbuff"};
  CHECK(collMemCheckCall("collAllReduce", 3, bufs, names, &mi) == collSuccess && mi.kind == COLL_MEM_HOST,
        "host call refused: %s", collLastErrorMessage());
  CHECK(collCudaDriverPresent() == 0, "a query mapped the driver");
  if (collCudaBuilt()) {
    expectEverythingFails(collSystemError, "libcuda.so.1: cannot open shared object file");
    CHECK(HAS(collCudaLoadMessage(), "no NVIDIA driver on this machine"), "message: %s", collCudaLoadMessage());
  } else {
    expectEverythingFails(collInvalidUsage, "built without CUDA support");
  }
  CHECK(collCudaDriverPresent() == 0, "driver present after a failed load");
  /* the P2P transport says the same at init */
  collResult_t r = collNetP2p.init(NULL);
  CHECK(r == (collCudaBuilt() ? collSystemError : collInvalidUsage), "p2p init returned %d", (int)r);
  CHECK(HAS(collLastErrorMessage(), "p2p"), "p2p init message: %s", collLastErrorMessage());
  CHECK(strcmp(collNetP2p.name, "p2p") == 0 && collNetP2p.version == COLL_NET_VERSION, "p2p table");
  /* the cost of a host query while no driver is mapped (reported, not
   * asserted: the machine is shared) */
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < 100000; i++) collMemQuery(&x, &mi);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / 100000;
  fprintf(stderr, "  collMemQuery of host memory without a driver: %.0f ns per call\n", ns);
}

static void test_no_driver(void** st) {
  (void)st;
  if (collCudaBuilt() && haveRealDriver()) {
    print_message("skipped: this machine has a CUDA driver (libcuda.so.1 loads); the no-driver case needs none\n");
    skip();
  }
  runChild(NULL, childNoDriver);
}

#ifdef COLL_HAVE_CUDA
/* The toolkit's stub driver: COLL_TEST_CUDA_STUB, else the build's. */
static const char* stubPath(void) {
  const char* e = getenv("COLL_TEST_CUDA_STUB");
  return e && *e ? e : COLL_CUDA_STUB;
}
#define NEED_STUB()                                                                             \
  do {                                                                                          \
    if (access(stubPath(), R_OK) != 0) {                                                        \
      print_message("skipped: no stub driver at %s (set COLL_TEST_CUDA_STUB)\n", stubPath());   \
      skip();                                                                                   \
    }                                                                                           \
  } while (0)

/* The toolkit's stub libcuda: dlopen works, cuInit says STUB_LIBRARY; once
 * it is mapped, queries answer host memory (a driver that cannot start has
 * no device memory). */
static void childStub(void) {
  int x = 1;
  collMemInfo mi;
  CHECK(collCudaDriverPresent() == 0, "stub present before loading");
  CHECK(collMemQuery(&x, &mi) == collSuccess && mi.kind == COLL_MEM_HOST, "query before loading");
  expectEverythingFails(collSystemError, "cuInit failed: CUDA_ERROR_STUB_LIBRARY (CUDA driver is a stub library");
  CHECK(HAS(collCudaLoadMessage(), stubPath()), "message does not name the library: %s", collCudaLoadMessage());
  CHECK(collCudaDriverPresent() == 1, "the stub is mapped now but not seen");
  CHECK(collMemQuery(&x, &mi) == collSuccess && mi.kind == COLL_MEM_HOST && mi.device == -1,
        "query with an unusable driver mapped");
  CHECK(collNetP2p.init(NULL) == collSystemError && HAS(collLastErrorMessage(), "CUDA_ERROR_STUB_LIBRARY"),
        "p2p init: %s", collLastErrorMessage());
  /* collectives on host memory with an unusable driver mapped: queried, host */
  int32_t in[64], out[64];
  hostCallWorks("stub driver mapped", in, out, 64);
}

static void test_stub_driver(void** st) {
  (void)st;
  NEED_STUB();
  runChild(stubPath(), childStub);
}

/* A library that exists but is not a CUDA driver. */
static void childNotADriver(void) {
  expectEverythingFails(collSystemError, "has no cuGetProcAddress_v2: not a CUDA driver of version 12.0");
  CHECK(HAS(collCudaLoadMessage(), "libm.so.6"), "message: %s", collCudaLoadMessage());
}

static void test_not_a_driver(void** st) {
  (void)st;
  runChild("libm.so.6", childNotADriver);
}

/* A library named libcuda.so* that someone else loads is seen within a
 * tick of the coarse clock (the dl_iterate_phdr counter), without coll
 * loading anything. */
static void childSeesOthersLoad(void) {
  CHECK(collCudaDriverPresent() == 0, "present before");
  CHECK(collCudaDriverPresent() == 0, "present before (cached)");
  void* h = dlopen(stubPath(), RTLD_NOW | RTLD_LOCAL);
  CHECK(h != NULL, "dlopen of the stub: %s", dlerror());
  struct timespec t0, t1, res;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  double ms = 0;
  while (!collCudaDriverPresent() && ms < 1000) {
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6;
  }
  clock_getres(CLOCK_MONOTONIC_COARSE, &res);
  fprintf(stderr, "  a libcuda.so mapped by someone else was seen after %.2f ms (coarse clock tick %.1f ms)\n", ms,
          (double)res.tv_nsec * 1e-6);
  CHECK(collCudaDriverPresent() == 1, "a mapped libcuda.so not seen within 1 s");
  CHECK(collCudaDriverPresent() == 1, "not sticky");
}

static void test_sees_other_load(void** st) {
  (void)st;
  NEED_STUB();
  runChild(NULL, childSeesOthersLoad);
}

/* The CUDA runtime next to coll: it answers no device here (then the device
 * checks are skipped, saying so; host calls work and wrapping a CUDA stream
 * fails with a message); on a GPU machine, real memory types. */
static void childRuntime(void) {
  int n = -1;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n <= 0) {
    fprintf(stderr, "  the CUDA runtime says: %s (%s)\n", cudaGetErrorName(e), cudaGetErrorString(e));
    CHECK(e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorStubLibrary,
          "unexpected runtime answer %d", (int)e);
    int x = 0;
    collMemInfo mi;
    CHECK(collMemQuery(&x, &mi) == collSuccess && mi.kind == COLL_MEM_HOST, "host query next to the runtime");
    CHECK(collDevCount() == 0, "devices without a GPU");
    int32_t in[64], out[64];
    hostCallWorks("CUDA runtime without a GPU", in, out, 64);
    /* wrapping a CUDA stream: a clear error, no stream */
    collComm_t c = oneRank("CUDA runtime without a GPU");
    if (c) {
      collStream_t s = NULL;
      collResult_t r = collStreamCreateCuda(c, NULL, &s);
      CHECK(r == collSystemError && s == NULL, "collStreamCreateCuda without a GPU returned %d", (int)r);
      CHECK(HAS(collGetLastError(NULL), "collStreamCreateCuda: CUDA: ") &&
                HAS(collGetLastError(NULL), "coll runs host memory only here"),
            "message: %s", collGetLastError(NULL));
      collCommDestroy(c);
    }
    fprintf(stderr, "  skipped (no GPU): device, pinned and managed memory types; mixed-buffer refusal; "
                    "collectives on device and managed buffers\n");
    return;
  }
  void *d = NULL, *h = NULL, *m = NULL;
  CHECK(cudaMalloc(&d, 4096) == cudaSuccess, "cudaMalloc");
  CHECK(cudaMallocHost(&h, 4096) == cudaSuccess, "cudaMallocHost");
  CHECK(cudaMallocManaged(&m, 4096, cudaMemAttachGlobal) == cudaSuccess, "cudaMallocManaged");
  collMemInfo mi;
  CHECK(collCudaDriverPresent() == 1, "runtime initialized but the driver not seen");
  CHECK(collMemQuery((char*)d + 100, &mi) == collSuccess && mi.kind == COLL_MEM_DEVICE && mi.device == 0,
        "device memory: kind %d device %d", mi.kind, mi.device);
  CHECK(collMemQuery(h, &mi) == collSuccess && mi.kind == COLL_MEM_HOST && mi.pinned, "pinned host memory");
  CHECK(collMemQuery(m, &mi) == collSuccess && mi.kind == COLL_MEM_MANAGED && mi.device >= 0, "managed memory");
  int x = 0;
  const void* bufs[2] = {d, &x};
  const char* names[2] = {"sendbuff", "recvbuff"};
  CHECK(collMemCheckCall("collAllReduce", 2, bufs, names, NULL) == collInvalidArgument, "mixed call accepted");
  CHECK(HAS(collLastErrorMessage(), "collAllReduce: recvbuff is host memory but sendbuff is CUDA device memory of GPU 0"),
        "message: %s", collLastErrorMessage());
  const void* both[2] = {d, (char*)d + 2048};
  CHECK(collMemCheckCall("collAllReduce", 2, both, names, &mi) == collSuccess && mi.kind == COLL_MEM_DEVICE,
        "two device buffers refused");
  /* collectives on device and managed memory (stream NULL: done when the call returns), exact results */
  collComm_t c = oneRank("GPU");
  if (c) {
    int32_t hx[16], back[16];
    for (int i = 0; i < 16; i++) hx[i] = 3 * i - 7, back[i] = 0;
    CHECK(cudaMemcpy(d, hx, sizeof hx, cudaMemcpyHostToDevice) == cudaSuccess, "cudaMemcpy to the GPU");
    CHECK(collAllReduce(d, (char*)d + 2048, 16, collInt32, collSum, c, NULL) == collSuccess, "device all-reduce: %s",
          collGetLastError(NULL));
    CHECK(cudaMemcpy(back, (char*)d + 2048, sizeof back, cudaMemcpyDeviceToHost) == cudaSuccess, "cudaMemcpy back");
    CHECK(memcmp(back, hx, sizeof hx) == 0, "device all-reduce on one rank: the result differs from the input");
    deviceCallRefused(collAllReduce(d, hx, 16, collInt32, collSum, c, NULL),
                      "collAllReduce: recvbuff is host memory but sendbuff is CUDA device memory of GPU 0; all buffers");
    memcpy(m, hx, sizeof hx);
    memset((char*)m + 1024, 0, sizeof hx);
    CHECK(collBroadcast(m, (char*)m + 1024, 16, collInt32, 0, c, NULL) == collSuccess, "managed broadcast: %s",
          collGetLastError(NULL));
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "cudaDeviceSynchronize");
    CHECK(memcmp((char*)m + 1024, hx, sizeof hx) == 0, "managed broadcast on one rank: the result differs");
    collCommDestroy(c);
  }
  hostCallWorks("pinned host memory", (int32_t*)h, (int32_t*)h + 64, 64);
  cudaFree(d), cudaFreeHost(h), cudaFree(m);
}

static void test_runtime(void** st) {
  (void)st;
  runChild(NULL, childRuntime);
}

/* ---- the fake driver (tests/fakecuda): device memory without a GPU ------------- */
#include <signal.h>
#define NEED_FAKE()                                                                         \
  do {                                                                                      \
    if (access(COLL_FAKECUDA, R_OK) != 0) {                                                 \
      print_message("skipped: no fake driver at %s (build target collfakecuda)\n", COLL_FAKECUDA); \
      skip();                                                                               \
    }                                                                                       \
  } while (0)

/* Memory types on two fake GPUs: cuMemAlloc'ed memory is device memory of
 * its GPU, cuMemHostAlloc'ed pinned host memory, malloc'ed and stack memory
 * plain host memory; one call mixing them (or two GPUs) is refused naming
 * both buffers; the p2p transport names GPU 1 by its PCI path. */
static void childFakeMemTypes(void) {
  setenv("FAKECUDA_DEVICES", "2", 1);
  CHECK(collCudaLoad() == collSuccess, "fake driver did not load: %s", collLastErrorMessage());
  CHECK(collDevCount() == 2, "collDevCount %d", collDevCount());
  void *d0 = NULL, *d1 = NULL, *pinned = NULL;
  CHECK(collDevSetCurrent(1) == collSuccess && collDevAlloc(&d1, 4096) == collSuccess, "GPU 1 alloc");
  CHECK(collDevSetCurrent(0) == collSuccess && collDevAlloc(&d0, 4096) == collSuccess, "GPU 0 alloc");
  CHECK(COLL_CU(cuMemHostAlloc)(&pinned, 4096, CU_MEMHOSTALLOC_DEVICEMAP) == CUDA_SUCCESS, "cuMemHostAlloc");
  char* heap = malloc(64);
  int x = 0;
  collMemInfo mi;
  CHECK(collMemQuery((char*)d0 + 4095, &mi) == collSuccess && mi.kind == COLL_MEM_DEVICE && mi.device == 0,
        "GPU 0 memory: kind %d device %d", mi.kind, mi.device);
  CHECK(collMemQuery(d1, &mi) == collSuccess && mi.kind == COLL_MEM_DEVICE && mi.device == 1,
        "GPU 1 memory: kind %d device %d", mi.kind, mi.device);
  CHECK(collMemQuery(pinned, &mi) == collSuccess && mi.kind == COLL_MEM_HOST && mi.pinned == 1, "pinned: %d %d",
        mi.kind, mi.pinned);
  CHECK(collMemQuery(heap, &mi) == collSuccess && mi.kind == COLL_MEM_HOST && !mi.pinned && mi.device == -1,
        "malloc'ed memory: kind %d pinned %d device %d", mi.kind, mi.pinned, mi.device);
  CHECK(collMemQuery(&x, &mi) == collSuccess && mi.kind == COLL_MEM_HOST && !mi.pinned, "stack memory");
  CHECK(collMemQuery((char*)d0 + 4096, &mi) == collSuccess && mi.kind == COLL_MEM_HOST,
        "one byte past a 4096-byte allocation is not device memory (kind %d)", mi.kind);
  const char* names[2] = {"sendbuff", "recvbuff"};
  const void* mixed[2] = {d0, heap};
  CHECK(collMemCheckCall("collAllReduce", 2, mixed, names, NULL) == collInvalidArgument &&
            HAS(collLastErrorMessage(), "collAllReduce: recvbuff is host memory but sendbuff is CUDA device memory "
                                        "of GPU 0; all buffers of one call must be host memory or on one GPU"),
        "mixed: %s", collLastErrorMessage());
  const void* twoGpus[2] = {d0, d1};
  CHECK(collMemCheckCall("collAllGather", 2, twoGpus, names, NULL) == collInvalidArgument &&
            HAS(collLastErrorMessage(), "recvbuff is CUDA device memory of GPU 1 but sendbuff is CUDA device memory "
                                        "of GPU 0"),
        "two GPUs: %s", collLastErrorMessage());
  const void* same[2] = {d0, (char*)d0 + 2048};
  CHECK(collMemCheckCall("collAllReduce", 2, same, names, &mi) == collSuccess && mi.kind == COLL_MEM_DEVICE &&
            mi.device == 0,
        "one GPU refused: %s", collLastErrorMessage());
  const void* hosts[2] = {pinned, heap};
  CHECK(collMemCheckCall("collAllReduce", 2, hosts, names, &mi) == collSuccess && mi.kind == COLL_MEM_HOST,
        "pinned and plain host memory refused: %s", collLastErrorMessage());
  collNetProperties_t props;
  CHECK(collNetP2p.init(NULL) == collSuccess, "p2p init: %s", collLastErrorMessage());
  CHECK(collNetP2p.getProperties(1, &props) == collSuccess &&
            strcmp(props.pciPath, "/sys/bus/pci/devices/0000:2a:00.0") == 0,
        "GPU 1 pci path \"%s\"", props.pciPath);
  collDevFree(d0), collDevFree(d1), COLL_CU(cuMemFreeHost)(pinned), free(heap);
}

static void test_fake_memtypes(void** st) {
  (void)st;
  NEED_FAKE();
  runChild(COLL_FAKECUDA, childFakeMemTypes);
}

/* The loader's failures, each from the fake's knobs. */
static void childFakeNoDevice(void) {
  setenv("FAKECUDA_DEVICES", "0", 1);
  expectEverythingFails(collSystemError, "CUDA: cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected");
}
static void childFakeOldDriver(void) {
  setenv("FAKECUDA_VERSION", "12080", 1);
  char want[160];
  snprintf(want, sizeof want, "CUDA: the driver supports CUDA 12.8, but coll's kernels were built with CUDA %d.%d",
           CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
  expectEverythingFails(collSystemError, want);
}
static void childFakeMissingEntry(void) {
  setenv("FAKECUDA_MISSING", "cuMemMap", 1);
  expectEverythingFails(collSystemError, "has no cuMemMap for CUDA");
}
static void test_fake_load_errors(void** st) {
  (void)st;
  NEED_FAKE();
  runChild(COLL_FAKECUDA, childFakeNoDevice);
  runChild(COLL_FAKECUDA, childFakeOldDriver);
  runChild(COLL_FAKECUDA, childFakeMissingEntry);
}

/* Injected driver failures come back as collSystemError naming the call and
 * the CUDA error; the calls before and after work. */
static void childFakeInjected(void) {
  setenv("FAKECUDA_FAIL", "cuMemAlloc:2,cuLaunchKernel:1,cuMemHostAlloc:1,cuMemcpyAsync:1:1", 1);
  CHECK(collDevSetCurrent(0) == collSuccess, "set current: %s", collLastErrorMessage());
  void *a = NULL, *b = NULL, *c = NULL;
  CHECK(collDevAlloc(&a, 64) == collSuccess, "first alloc");
  CHECK(collDevAlloc(&b, 64) == collSystemError && b == NULL, "second alloc did not fail");
  CHECK(HAS(collLastErrorMessage(), "CUDA: cuMemAlloc of 64 bytes failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory, "
                                    "CUDA error 2)"),
        "alloc message: %s", collLastErrorMessage());
  CHECK(collDevAlloc(&c, 64) == collSuccess, "third alloc");
  CHECK(collDevCopyAsync(c, a, 64, COLL_DEV_COPY_KERNEL, NULL) == collSystemError &&
            HAS(collLastErrorMessage(), "CUDA: launching collDevCopy failed (kernels built for") &&
            HAS(collLastErrorMessage(), "CUDA_ERROR_LAUNCH_FAILED"),
        "launch: %s", collLastErrorMessage());
  CHECK(collDevCopyAsync(c, a, 64, COLL_DEV_COPY_KERNEL, NULL) == collSuccess, "second launch");
  CHECK(collDevCopyAsync(c, a, 64, COLL_DEV_COPY_ENGINE, NULL) == collSystemError &&
            HAS(collLastErrorMessage(), "CUDA: cuMemcpyAsync failed: CUDA_ERROR_INVALID_VALUE"),
        "copy engine: %s", collLastErrorMessage());
  collDevGate* g = NULL;
  CHECK(collDevGateCreate(&g) == collSystemError && g == NULL &&
            HAS(collLastErrorMessage(), "cuMemHostAlloc of a stream gate failed: CUDA_ERROR_OUT_OF_MEMORY"),
        "gate: %s", collLastErrorMessage());
  CHECK(collDevGateCreate(&g) == collSuccess, "second gate: %s", collLastErrorMessage());
  CHECK(COLL_CU(cuStreamSynchronize)(NULL) == CUDA_SUCCESS, "sync");
  collDevGateDestroy(g);
  collDevFree(a), collDevFree(c);
}
static void test_fake_injected_failures(void** st) {
  (void)st;
  NEED_FAKE();
  runChild(COLL_FAKECUDA, childFakeInjected);
}

/* What makes the fake worth running: the host cannot touch device memory
 * (a dereference faults at that address), and a kernel given host memory
 * faults on the stream (CUDA_ERROR_ILLEGAL_ADDRESS, sticky), as on a GPU. */
static volatile uintptr_t gFaultWant;
static void onSegv(int sig, siginfo_t* si, void* uc) {
  (void)sig, (void)uc;
  _exit((uintptr_t)si->si_addr == gFaultWant ? 42 : 43);
}
static void childFakeHostTouch(void) {
  void* d = NULL;
  if (collDevSetCurrent(0) != collSuccess || collDevAlloc(&d, 4096) != collSuccess) _exit(2);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = onSegv;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &sa, NULL);
  gFaultWant = (uintptr_t)d + 8;
  volatile char* p = (volatile char*)d + 8;
  *p = 1; /* faults */
  _exit(3);
}
static void childFakeKernelOnHost(void) {
  void* d = NULL;
  char host[256];
  memset(host, 7, sizeof host);
  CHECK(collDevSetCurrent(0) == collSuccess && collDevAlloc(&d, 256) == collSuccess, "alloc");
  CHECK(collDevCopyAsync(d, host, sizeof host, COLL_DEV_COPY_KERNEL, NULL) == collSuccess, "launch is accepted");
  CHECK(COLL_CU(cuStreamSynchronize)(NULL) == CUDA_ERROR_ILLEGAL_ADDRESS, "the kernel did not fault");
  void* e = NULL;
  CHECK(collDevAlloc(&e, 64) == collSystemError && HAS(collLastErrorMessage(), "CUDA_ERROR_ILLEGAL_ADDRESS"),
        "the fault is not sticky: %s", collLastErrorMessage());
}
static void test_fake_catches_host_access(void** st) {
  (void)st;
  NEED_FAKE();
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    setenv("COLL_CUDA_LIBRARY", COLL_FAKECUDA, 1);
    childFakeHostTouch();
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 42); /* SIGSEGV at the device address */
  runChild(COLL_FAKECUDA, childFakeKernelOnHost);
}
#endif

/* Error names: known codes by name (also without a driver), unknown ones
 * flagged; collCudaError formats both. */
static void test_error_names(void** st) {
  (void)st;
  assert_string_equal(collCudaErrorName(100), "CUDA_ERROR_NO_DEVICE");
  assert_string_equal(collCudaErrorString(34), "CUDA driver is a stub library");
  assert_string_equal(collCudaErrorName(123456), "CUDA_ERROR_?");
  assert_int_equal(collCudaError(2, "CUDA: cuMemAlloc of 4096 bytes failed"), collSystemError);
  assert_string_equal(collLastErrorMessage(),
                      "CUDA: cuMemAlloc of 4096 bytes failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory, CUDA error 2)");
  collMemInfo m = {COLL_MEM_DEVICE, 3, 0};
  char b[64];
  assert_string_equal(collMemDescribe(&m, b, sizeof b), "CUDA device memory of GPU 3");
  m.kind = COLL_MEM_HOST, m.pinned = 1;
  assert_string_equal(collMemDescribe(&m, b, sizeof b), "pinned host memory");
#ifdef COLL_HAVE_CUDA
  assert_true(collCudaBuilt());
  assert_true(strstr(collDevArchs(), "sm_90") != NULL);
#else
  assert_false(collCudaBuilt());
  assert_string_equal(collDevArchs(), "");
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_error_names), cmocka_unit_test(test_no_driver),
#ifdef COLL_HAVE_CUDA
      cmocka_unit_test(test_stub_driver), cmocka_unit_test(test_not_a_driver),
      cmocka_unit_test(test_sees_other_load), cmocka_unit_test(test_runtime),
      cmocka_unit_test(test_fake_memtypes), cmocka_unit_test(test_fake_load_errors),
      cmocka_unit_test(test_fake_injected_failures), cmocka_unit_test(test_fake_catches_host_access),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
