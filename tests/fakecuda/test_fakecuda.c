/*
 * test_fakecuda.c - the fake CUDA driver itself (tests/fakecuda), reached
 * as coll reaches a driver (collCudaLoad with COLL_CUDA_LIBRARY), so that
 * the device tests that run on it rest on checked behaviour: operations of
 * a stream run in order and after the call returned; the legacy stream
 * waits for blocking streams; events order streams and time them; stream
 * waits compare cyclically; host functions may not call the driver; ranges
 * past an allocation and host memory where device memory is needed are
 * refused; a kernel's grid runs as on a GPU; VMM memory exported as a file
 * descriptor is shared with another process; FAKECUDA_FAIL fails exactly
 * the k-th call, and fakecudaCalls counts every call of an entry point;
 * cuMemcpy2DAsync copies rows at their pitches and refuses what the driver
 * does.
 * Each scenario runs in a fresh child (the fake reads its
 * environment once per process).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "device/cuda_loader.h"
#include "device/devexec.h"
#include "device/kernel_names.h"

static int fails;
#define CHECK(cond, ...)                                                                    \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      fprintf(stderr, "  FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond);                   \
      fprintf(stderr, __VA_ARGS__);                                                         \
      fprintf(stderr, "\n");                                                                \
      fails++;                                                                              \
    }                                                                                       \
  } while (0)
#define CU COLL_CU

/* Runs fn in a child with the fake loaded and env "K=V" pairs set. */
static void runChild(void (*fn)(void), const char* env1, const char* env2) {
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    alarm(60);
    setenv("COLL_CUDA_LIBRARY", COLL_FAKECUDA, 1);
    if (env1) putenv((char*)env1);
    if (env2) putenv((char*)env2);
    fails = 0;
    if (collDevSetCurrent(0) != collSuccess) {
      fprintf(stderr, "  cannot start the fake: %s\n", collGetLastError(NULL));
      _exit(99);
    }
    fn();
    fflush(NULL);
    _exit(fails > 90 ? 90 : fails);
  }
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

static double nowS(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* FIFO, asynchronous: with every operation 100 ms late, the calls return at
 * once, the stream is busy, and the chain a -> b -> c -> host is in order. */
static void childOrder(void) {
  CUstream s;
  CHECK(CU(cuStreamCreate)(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS, "stream");
  CUdeviceptr a, b, c;
  CU(cuMemAlloc)(&a, 4096), CU(cuMemAlloc)(&b, 4096), CU(cuMemAlloc)(&c, 4096);
  unsigned char h[4096], out[4096];
  for (int i = 0; i < 4096; i++) h[i] = (unsigned char)(i * 7 + 1);
  memset(out, 0, sizeof out);
  double t0 = nowS();
  CU(cuMemcpyAsync)(a, (CUdeviceptr)(uintptr_t)h, 4096, s);
  CU(cuMemcpyAsync)(b, a, 4096, s);
  CU(cuMemcpyAsync)(c, b, 4096, s);
  CU(cuMemcpyAsync)((CUdeviceptr)(uintptr_t)out, c, 4096, s);
  double issue = nowS() - t0;
  CHECK(issue < 0.1, "four async copies took %.3f s to issue", issue);
  CHECK(CU(cuStreamQuery)(s) == CUDA_ERROR_NOT_READY, "stream idle right after issue");
  CHECK(out[0] == 0, "the copy ran before the call returned");
  CHECK(CU(cuStreamSynchronize)(s) == CUDA_SUCCESS, "sync");
  CHECK(nowS() - t0 >= 0.4, "4 operations of 100 ms each done after %.3f s", nowS() - t0);
  CHECK(memcmp(out, h, sizeof h) == 0, "chain out of order");
  CHECK(CU(cuStreamQuery)(s) == CUDA_SUCCESS, "idle after sync");
  /* the legacy stream waits for a blocking stream's earlier work */
  CUstream blk;
  CHECK(CU(cuStreamCreate)(&blk, 0) == CUDA_SUCCESS, "blocking stream");
  CU(cuMemsetD8Async)(a, 0x5a, 4096, blk);
  CHECK(CU(cuMemcpy)((CUdeviceptr)(uintptr_t)out, a, 4096) == CUDA_SUCCESS, "cuMemcpy");
  CHECK(out[0] == 0x5a && out[4095] == 0x5a, "legacy copy did not wait for the blocking stream (0x%02x)", out[0]);
  /* an event orders another stream */
  CUevent e0, e1;
  CU(cuEventCreate)(&e0, 0), CU(cuEventCreate)(&e1, 0);
  CU(cuEventRecord)(e0, s);
  CU(cuMemsetD8Async)(b, 0x33, 4096, s);
  CU(cuEventRecord)(e1, s);
  CHECK(CU(cuEventQuery)(e1) == CUDA_ERROR_NOT_READY, "event done before its stream ran");
  CHECK(CU(cuStreamWaitEvent)(blk, e1, 0) == CUDA_SUCCESS, "wait event");
  CU(cuMemcpyAsync)((CUdeviceptr)(uintptr_t)out, b, 4096, blk);
  CHECK(CU(cuStreamSynchronize)(blk) == CUDA_SUCCESS, "sync blk");
  CHECK(out[0] == 0x33, "stream did not wait for the event (0x%02x)", out[0]);
  float ms = -1;
  CHECK(CU(cuEventElapsedTime)(&ms, e0, e1) == CUDA_SUCCESS && ms >= 90.0f, "elapsed %.1f ms for a 100 ms memset",
        (double)ms);
  CU(cuEventDestroy)(e0), CU(cuEventDestroy)(e1);
  CU(cuStreamDestroy)(s), CU(cuStreamDestroy)(blk);
  CU(cuMemFree)(a), CU(cuMemFree)(b), CU(cuMemFree)(c);
}
static void test_order(void** st) {
  (void)st;
  runChild(childOrder, "FAKECUDA_DELAY_US=100000", NULL);
}

/* cuStreamWaitValue32 GEQ compares cyclically; WriteValue32 opens it. */
static void CUDA_CB hostCallsDriver(void* arg) {
  CUdeviceptr p;
  *(CUresult*)arg = CU(cuMemAlloc)(&p, 64);
}
static int freeDone;
static void* freeHostThread(void* p) {
  CUresult r = CU(cuMemFreeHost)(p);
  __atomic_store_n(&freeDone, r == CUDA_SUCCESS ? 1 : 2, __ATOMIC_RELEASE);
  return NULL;
}
static void childWaitValue(void) {
  uint32_t* w = NULL;
  CHECK(CU(cuMemHostAlloc)((void**)&w, 64, CU_MEMHOSTALLOC_DEVICEMAP) == CUDA_SUCCESS, "pinned");
  CUdeviceptr dw;
  CU(cuMemHostGetDevicePointer)(&dw, w, 0);
  CUstream s;
  CU(cuStreamCreate)(&s, CU_STREAM_NON_BLOCKING);
  w[0] = 0xfffffff0u; /* 5 is "later" than this value cyclically: wait */
  CHECK(CU(cuStreamWaitValue32)(s, dw, 5, CU_STREAM_WAIT_VALUE_GEQ) == CUDA_SUCCESS, "wait");
  CU(cuStreamWriteValue32)(s, dw + 4, 77, 0);
  struct timespec ts = {0, 100 * 1000 * 1000};
  nanosleep(&ts, NULL);
  CHECK(CU(cuStreamQuery)(s) == CUDA_ERROR_NOT_READY && w[1] == 0, "the stream ran past a closed wait");
  __atomic_store_n(&w[0], 6u, __ATOMIC_RELEASE);
  CHECK(CU(cuStreamSynchronize)(s) == CUDA_SUCCESS && w[1] == 77, "write after the wait: %u", w[1]);
  w[0] = 3; /* 0xfffffffe is older than 3 cyclically: passes at once */
  CU(cuStreamWaitValue32)(s, dw, 0xfffffffeu, CU_STREAM_WAIT_VALUE_GEQ);
  CHECK(CU(cuStreamSynchronize)(s) == CUDA_SUCCESS, "older value");
  /* cuMemFreeHost synchronizes the device, as the real one: it returns only
   * once the stream's closed wait is opened */
  void* other = NULL;
  CU(cuMemHostAlloc)(&other, 64, 0);
  w[0] = 0;
  CU(cuStreamWaitValue32)(s, dw, 1, CU_STREAM_WAIT_VALUE_GEQ);
  pthread_t t;
  freeDone = 0;
  CHECK(pthread_create(&t, NULL, freeHostThread, other) == 0, "thread");
  nanosleep(&ts, NULL);
  CHECK(__atomic_load_n(&freeDone, __ATOMIC_ACQUIRE) == 0, "cuMemFreeHost returned while the device was busy");
  __atomic_store_n(&w[0], 1u, __ATOMIC_RELEASE);
  pthread_join(t, NULL);
  CHECK(freeDone == 1, "cuMemFreeHost failed");
  /* a host function runs in order and may not call the driver */
  CUresult inside = CUDA_SUCCESS;
  CHECK(CU(cuLaunchHostFunc)(s, hostCallsDriver, &inside) == CUDA_SUCCESS, "host func");
  CU(cuStreamSynchronize)(s);
  CHECK(inside == CUDA_ERROR_NOT_PERMITTED, "driver call inside a host function returned %d", (int)inside);
  CU(cuStreamDestroy)(s);
  CU(cuMemFreeHost)(w);
}
static void test_wait_value(void** st) {
  (void)st;
  runChild(childWaitValue, NULL, NULL);
}
static void childNoMemOps(void) {
  uint32_t* w = NULL;
  CU(cuMemHostAlloc)((void**)&w, 64, 0);
  int v = -1;
  CHECK(CU(cuDeviceGetAttribute)(&v, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1, 0) == CUDA_SUCCESS && v == 0,
        "memops attribute %d", v);
  CHECK(CU(cuStreamWaitValue32)(NULL, (CUdeviceptr)(uintptr_t)w, 1, 0) == CUDA_ERROR_NOT_SUPPORTED, "wait accepted");
  CU(cuMemFreeHost)(w);
}
static void test_no_memops(void** st) {
  (void)st;
  runChild(childNoMemOps, "FAKECUDA_NO_MEMOPS=1", NULL);
}

/* Ranges and memory kinds. */
static void childMemory(void) {
  CUdeviceptr d;
  CHECK(CU(cuMemAlloc)(&d, 1000) == CUDA_SUCCESS, "alloc");
  char host[2000];
  memset(host, 1, sizeof host);
  CHECK(CU(cuMemcpy)(d, (CUdeviceptr)(uintptr_t)host, 1001) == CUDA_ERROR_INVALID_VALUE, "copy past the end");
  CHECK(CU(cuMemcpy)(d + 1, (CUdeviceptr)(uintptr_t)host, 999) == CUDA_SUCCESS, "copy to the end");
  CHECK(CU(cuMemcpy)(d + 10, d, 100) == CUDA_ERROR_INVALID_VALUE, "overlapping copy");
  CHECK(CU(cuMemsetD8Async)((CUdeviceptr)(uintptr_t)host, 0, 10, NULL) == CUDA_ERROR_INVALID_VALUE, "memset of host");
  CUdeviceptr base = 0;
  size_t size = 0;
  CHECK(CU(cuMemGetAddressRange)(&base, &size, d + 500) == CUDA_SUCCESS && base == d && size == 1000, "range");
  unsigned type = 9;
  int ord = 9;
  CUpointer_attribute at[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  void* data[2] = {&type, &ord};
  CHECK(CU(cuPointerGetAttributes)(2, at, data, (CUdeviceptr)(uintptr_t)host) == CUDA_SUCCESS && type == 0 && ord == -2,
        "unregistered: type %u ordinal %d", type, ord);
  CHECK(CU(cuPointerGetAttributes)(2, at, data, d + 999) == CUDA_SUCCESS && type == CU_MEMORYTYPE_DEVICE && ord == 0,
        "device: type %u ordinal %d", type, ord);
  CHECK(CU(cuMemFree)(d + 1) == CUDA_ERROR_INVALID_VALUE, "free inside an allocation");
  CHECK(CU(cuMemFree)(d) == CUDA_SUCCESS, "free");
}
static void test_memory(void** st) {
  (void)st;
  runChild(childMemory, NULL, NULL);
}

/* cuMemcpy2DAsync: 3 rows of 5 bytes from device memory at pitch 8 into
 * host memory at pitch 6 (unified addresses), the bytes between the rows
 * untouched; a width above a pitch, a pitch above 2^31 - 1 and a row that
 * starts in the allocation and runs past its end are refused, nothing
 * copied. */
static void childCopy2d(void) {
  unsigned char src[24], dst[32];
  for (int i = 0; i < 24; i++) src[i] = (unsigned char)(i + 1);
  memset(dst, 0xee, sizeof dst);
  CUdeviceptr d = 0;
  CHECK(CU(cuMemAlloc)(&d, sizeof src) == CUDA_SUCCESS, "alloc");
  CU(cuMemcpy)(d, (CUdeviceptr)(uintptr_t)src, sizeof src);
  CUDA_MEMCPY2D c;
  memset(&c, 0, sizeof c);
  c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
  c.srcDevice = d, c.srcPitch = 8;
  c.dstDevice = (CUdeviceptr)(uintptr_t)dst, c.dstPitch = 6;
  c.WidthInBytes = 5, c.Height = 3;
  CHECK(CU(cuMemcpy2DAsync)(&c, NULL) == CUDA_SUCCESS, "2-D copy");
  CHECK(CU(cuStreamSynchronize)(NULL) == CUDA_SUCCESS, "sync");
  int bad = 0;
  for (int r = 0; r < 3; r++)
    for (int i = 0; i < 6; i++) bad += dst[r * 6 + i] != (i < 5 ? src[r * 8 + i] : 0xee);
  CHECK(bad == 0, "%d bytes wrong after the 2-D copy", bad);
  memset(dst, 0xee, sizeof dst);
  c.WidthInBytes = 7;
  CHECK(CU(cuMemcpy2DAsync)(&c, NULL) == CUDA_ERROR_INVALID_VALUE, "width 7 above pitch 6");
  c.WidthInBytes = 5, c.srcPitch = (size_t)1 << 31;
  CHECK(CU(cuMemcpy2DAsync)(&c, NULL) == CUDA_ERROR_INVALID_VALUE, "pitch 2^31");
  c.srcPitch = c.dstPitch = 8, c.srcXInBytes = 1, c.WidthInBytes = 8; /* row 2 runs past the 24-byte allocation */
  CHECK(CU(cuMemcpy2DAsync)(&c, NULL) == CUDA_ERROR_INVALID_VALUE, "a row past the allocation");
  CHECK(CU(cuStreamSynchronize)(NULL) == CUDA_SUCCESS, "sync");
  bad = 0;
  for (int i = 0; i < 32; i++) bad += dst[i] != 0xee;
  CHECK(bad == 0, "%d bytes written by refused 2-D copies", bad);
  CU(cuMemFree)(d);
}
static void test_copy2d(void** st) {
  (void)st;
  runChild(childCopy2d, NULL, NULL);
}
/* The fake's count of calls of entry point name (fakecudaCalls). */
static long fakeCalls(const char* name) {
  void* h = dlopen(COLL_FAKECUDA, RTLD_NOW | RTLD_NOLOAD);
  long (*f)(const char*) = NULL;
  if (h) *(void**)&f = dlsym(h, "fakecudaCalls");
  long n = f ? f(name) : -2;
  if (h) dlclose(h);
  return n;
}
/* ... and fakecudaCalls counts every call of the entry, the failed one too,
 * and no other entry's; -1 for a name that is no entry point. */
static void childFailK(void) {
  CUdeviceptr x = 0, y = 0, z = 0;
  long a0 = fakeCalls("cuMemAlloc"), f0 = fakeCalls("cuMemFree");
  CHECK(CU(cuMemAlloc)(&x, 64) == CUDA_SUCCESS, "call 1");
  CHECK(CU(cuMemAlloc)(&y, 64) == CUDA_ERROR_INVALID_DEVICE && y == 0, "call 2 not failed with the given result");
  CHECK(CU(cuMemAlloc)(&z, 64) == CUDA_SUCCESS, "call 3");
  CHECK(fakeCalls("cuMemAlloc") - a0 == 3 && fakeCalls("cuMemFree") == f0,
        "calls counted: cuMemAlloc %ld, cuMemFree %ld", fakeCalls("cuMemAlloc") - a0, fakeCalls("cuMemFree") - f0);
  CHECK(fakeCalls("cuNoSuchEntry") == -1, "an unknown name counted %ld", fakeCalls("cuNoSuchEntry"));
  CU(cuMemFree)(x), CU(cuMemFree)(z);
  CHECK(fakeCalls("cuMemFree") - f0 == 2, "cuMemFree counted %ld times, want 2", fakeCalls("cuMemFree") - f0);
}
static void test_fail_kth(void** st) {
  (void)st;
  runChild(childFailK, "FAKECUDA_FAIL=cuMemAlloc:2:101", NULL);
}

/* A kernel's grid: gid < gridDim.x * blockDim.x covers every element once;
 * a grid with y = 2 runs each gid twice, as a GPU does (in place: b added
 * twice). */
static void childGrid(void) {
  CUlibrary lib;
  CUkernel k;
  extern const unsigned char collDevFatbin[];
  CHECK(CU(cuLibraryLoadData)(&lib, collDevFatbin, NULL, NULL, 0, NULL, NULL, 0) == CUDA_SUCCESS, "load");
  CHECK(CU(cuLibraryGetKernel)(&k, lib, "collDevReduce_sum_i32") == CUDA_SUCCESS, "kernel");
  CUkernel none;
  CHECK(CU(cuLibraryGetKernel)(&none, lib, "collDevReduce_sum_i33") == CUDA_ERROR_NOT_FOUND, "unknown name");
  enum { n = 1001 };
  int32_t a[n], b[n], out[n];
  for (int i = 0; i < n; i++) a[i] = i, b[i] = 1000 * i;
  CUdeviceptr da, db;
  CU(cuMemAlloc)(&da, sizeof a), CU(cuMemAlloc)(&db, sizeof b);
  CU(cuMemcpy)(da, (CUdeviceptr)(uintptr_t)a, sizeof a);
  CU(cuMemcpy)(db, (CUdeviceptr)(uintptr_t)b, sizeof b);
  size_t cnt = n;
  void* args[] = {&da, &da, &db, &cnt};
  CHECK(CU(cuLaunchKernel)((CUfunction)k, 3, 1, 1, 7, 1, 1, 0, NULL, args, NULL) == CUDA_SUCCESS, "launch");
  CU(cuMemcpy)((CUdeviceptr)(uintptr_t)out, da, sizeof out);
  int bad = 0;
  for (int i = 0; i < n; i++) bad += out[i] != 1001 * i;
  CHECK(bad == 0, "%d elements differ after a 3x7 grid", bad);
  CHECK(CU(cuLaunchKernel)((CUfunction)k, 2, 2, 1, 5, 1, 1, 0, NULL, args, NULL) == CUDA_SUCCESS, "launch y=2");
  CU(cuMemcpy)((CUdeviceptr)(uintptr_t)out, da, sizeof out);
  bad = 0;
  for (int i = 0; i < n; i++) bad += out[i] != 3001 * i;
  CHECK(bad == 0, "%d elements differ after a 2x2 grid (each gid twice)", bad);
  CHECK(CU(cuLaunchKernel)((CUfunction)k, 1, 1, 1, COLL_DEV_THREADS + 1, 1, 1, 0, NULL, args, NULL) ==
            CUDA_ERROR_INVALID_VALUE,
        "block above the launch bounds accepted");
  CU(cuMemFree)(da), CU(cuMemFree)(db);
}
static void test_grid(void** st) {
  (void)st;
  runChild(childGrid, NULL, NULL);
}

/* VMM across processes: the parent's allocation, exported as an fd and
 * passed over a unix socket, is read and written by the child. */
static int sendFd(int sock, int fd) {
  char c = 'f', cbuf[CMSG_SPACE(sizeof(int))];
  struct iovec iov = {&c, 1};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
  struct cmsghdr* cm = CMSG_FIRSTHDR(&m);
  cm->cmsg_level = SOL_SOCKET, cm->cmsg_type = SCM_RIGHTS, cm->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(cm), &fd, sizeof fd);
  return sendmsg(sock, &m, 0) == 1 ? 0 : -1;
}
static int recvFd(int sock) {
  char c, cbuf[CMSG_SPACE(sizeof(int))];
  struct iovec iov = {&c, 1};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
  if (recvmsg(sock, &m, 0) != 1) return -1;
  int fd;
  memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof fd);
  return fd;
}
static int gSock = -1;
static void mapShared(CUmemGenericAllocationHandle h, size_t size, CUdeviceptr* p) {
  CHECK(CU(cuMemAddressReserve)(p, size, 0, 0, 0) == CUDA_SUCCESS, "reserve");
  CHECK(CU(cuMemMap)(*p, size, 0, h, 0) == CUDA_SUCCESS, "map");
  CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  CHECK(CU(cuMemSetAccess)(*p, size, &acc, 1) == CUDA_SUCCESS, "access");
}
static void childVmmPeer(void) {
  int fd = recvFd(gSock);
  CUmemGenericAllocationHandle h;
  CHECK(CU(cuMemImportFromShareableHandle)(&h, (void*)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) ==
            CUDA_SUCCESS,
        "import");
  close(fd);
  CUdeviceptr p;
  mapShared(h, 2u << 20, &p);
  CU(cuMemRelease)(h);
  unsigned char got[256], mine[256];
  CU(cuMemcpy)((CUdeviceptr)(uintptr_t)got, p, sizeof got);
  int bad = 0;
  for (int i = 0; i < 256; i++) bad += got[i] != (unsigned char)(255 - i), mine[i] = (unsigned char)(i ^ 0x5a);
  CHECK(bad == 0, "the peer sees %d wrong bytes", bad);
  CU(cuMemcpy)(p + 4096, (CUdeviceptr)(uintptr_t)mine, sizeof mine);
  char c = 'd';
  CHECK(write(gSock, &c, 1) == 1, "reply");
  CU(cuMemUnmap)(p, 2u << 20), CU(cuMemAddressFree)(p, 2u << 20);
}
static void test_vmm_processes(void** st) {
  (void)st;
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  fflush(NULL);
  pid_t pid = fork(); /* the peer, before this process loads anything */
  assert_true(pid >= 0);
  if (pid == 0) {
    close(sv[0]);
    gSock = sv[1];
    alarm(60);
    setenv("COLL_CUDA_LIBRARY", COLL_FAKECUDA, 1);
    fails = 0;
    if (collDevSetCurrent(0) != collSuccess) _exit(99);
    childVmmPeer();
    _exit(fails);
  }
  close(sv[1]);
  /* this side runs in a child too, so the test process stays driver-free */
  gSock = sv[0];
  fflush(NULL);
  pid_t me = fork();
  assert_true(me >= 0);
  if (me == 0) {
    setenv("COLL_CUDA_LIBRARY", COLL_FAKECUDA, 1);
    fails = 0;
    alarm(60);
    if (collDevSetCurrent(0) != collSuccess) _exit(99);
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CUmemGenericAllocationHandle h;
    CHECK(CU(cuMemCreate)(&h, 2u << 20, &prop, 0) == CUDA_SUCCESS, "create");
    CHECK(CU(cuMemCreate)(&h, 4096, &prop, 0) == CUDA_ERROR_INVALID_VALUE, "size below the granularity");
    CHECK(CU(cuMemCreate)(&h, 2u << 20, &prop, 0) == CUDA_SUCCESS, "create");
    CUdeviceptr p;
    mapShared(h, 2u << 20, &p);
    unsigned char v[256];
    for (int i = 0; i < 256; i++) v[i] = (unsigned char)(255 - i);
    CU(cuMemcpy)(p, (CUdeviceptr)(uintptr_t)v, sizeof v);
    int fd = -1;
    CHECK(CU(cuMemExportToShareableHandle)(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) == CUDA_SUCCESS &&
              fd >= 0,
          "export");
    CHECK(sendFd(gSock, fd) == 0, "send fd");
    close(fd);
    char c;
    CHECK(read(gSock, &c, 1) == 1, "peer reply");
    CU(cuMemcpy)((CUdeviceptr)(uintptr_t)v, p + 4096, sizeof v);
    int bad = 0;
    for (int i = 0; i < 256; i++) bad += v[i] != (unsigned char)(i ^ 0x5a);
    CHECK(bad == 0, "%d bytes the peer wrote are wrong here", bad);
    CHECK(CU(cuMemUnmap)(p, 2u << 20) == CUDA_SUCCESS && CU(cuMemAddressFree)(p, 2u << 20) == CUDA_SUCCESS, "unmap");
    CU(cuMemRelease)(h);
    _exit(fails);
  }
  close(sv[0]);
  int s1 = 0, s2 = 0;
  assert_int_equal(waitpid(me, &s1, 0), me);
  assert_int_equal(waitpid(pid, &s2, 0), pid);
  assert_true(WIFEXITED(s1) && WIFEXITED(s2));
  assert_int_equal(WEXITSTATUS(s1), 0);
  assert_int_equal(WEXITSTATUS(s2), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_order),   cmocka_unit_test(test_wait_value), cmocka_unit_test(test_no_memops),
      cmocka_unit_test(test_memory),  cmocka_unit_test(test_fail_kth),   cmocka_unit_test(test_grid),
      cmocka_unit_test(test_vmm_processes), cmocka_unit_test(test_copy2d),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
