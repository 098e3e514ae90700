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
 * both. Without a GPU those checks are skipped with a message saying so.
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

/* A library named libcuda.so* that someone else loads is seen at once (the
 * dl_iterate_phdr counter), without coll loading anything. */
static void childSeesOthersLoad(void) {
  CHECK(collCudaDriverPresent() == 0, "present before");
  CHECK(collCudaDriverPresent() == 0, "present before (cached)");
  void* h = dlopen(stubPath(), RTLD_NOW | RTLD_LOCAL);
  CHECK(h != NULL, "dlopen of the stub: %s", dlerror());
  CHECK(collCudaDriverPresent() == 1, "a mapped libcuda.so not seen");
  CHECK(collCudaDriverPresent() == 1, "not sticky");
}

static void test_sees_other_load(void** st) {
  (void)st;
  NEED_STUB();
  runChild(NULL, childSeesOthersLoad);
}

/* The CUDA runtime next to coll: it answers no device here (then the device
 * checks are skipped, saying so); on a GPU machine, real memory types. */
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
    fprintf(stderr, "  skipped (no GPU): device, pinned and managed memory types; mixed-buffer refusal\n");
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
  CHECK(HAS(collLastErrorMessage(), "collAllReduce: recvbuff is host memory but sendbuff is device memory of GPU 0"),
        "message: %s", collLastErrorMessage());
  const void* both[2] = {d, (char*)d + 2048};
  CHECK(collMemCheckCall("collAllReduce", 2, both, names, &mi) == collSuccess && mi.kind == COLL_MEM_DEVICE,
        "two device buffers refused");
  cudaFree(d), cudaFreeHost(h), cudaFree(m);
}

static void test_runtime(void** st) {
  (void)st;
  runChild(NULL, childRuntime);
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
  assert_string_equal(collMemDescribe(&m, b, sizeof b), "device memory of GPU 3");
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
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
