/*
 * test_ib_dmabuf.c - GPU memory registered with the ib transport as a
 * dma-buf (regMrDmaBuf, COLL_PTR_DMABUF), on the in-memory verbs device
 * (ibfake.c, whose ibv_reg_dmabuf_mr maps the fd) and the fake CUDA driver
 * (tests/fakecuda, whose dma-bufs are dups of an allocation's memfd):
 *  - collCudaDmaBufFd exports an allocation (fd, offset) and refuses what is
 *    no CUDA allocation;
 *  - the probe: supported (EBADF for fd -1), unsupported (EOPNOTSUPP),
 *    ibv_reg_dmabuf_mr absent; getProperties' ptrSupport follows it;
 *  - a message from GPU memory into GPU memory, both registered from
 *    dma-bufs whose fds were closed after registering, above and at most
 *    IB_EAGER (GPU memory never goes eager): the bytes read back through
 *    cuMemcpy are exact; iflush of the GPU receive calls
 *    cuFlushGPUDirectRDMAWrites once (the fake counts it) with the thread's
 *    context kept, iflush of host memory does not; 5 receives into one
 *    registration make 5 flushes and no cuPointerGetAttributes or
 *    cuCtxSetCurrent (decided at registration); GPU memory at one end and a
 *    small host buffer at the other fails on the receiver with a message;
 *  - errors with their messages: bad fd, a fd that is no dma-buf, host
 *    memory type, COLL_IB_DMABUF=0, unsupported HCA, no ibv_reg_dmabuf_mr;
 *  - in child processes: a driver without dma-buf (FAKECUDA_NO_DMABUF), one
 *    without cuMemGetHandleForAddressRange (it still loads), one without
 *    cuFlushGPUDirectRDMAWrites on a GPU that needs it (no dma-buf path),
 *    one whose GPU orders NIC writes itself (dma-buf, 5 receives make no
 *    flush and no driver query), and a host-only process whose getProperties loads no CUDA
 *    driver.
 * Without CUDA in the build only the host-only checks run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "coll.h"
#include "device/cuda_loader.h"
#include "device/devexec.h"
#include "device/dmabuf.h"
#include "ibfake.h"
#include "net_testlib.h"
#include "transports/ib/ib.h"
#include "transports/ib/ib_internal.h"

static const collNet_t* net = &collNetIb;
#define HAS(s, sub) (strstr((s), (sub)) != NULL)

static void start(int dmabufMode, int knob) {
  ibFakeDevSpec d = ibFakeRxe("fake0", 1, IBV_MTU_1024);
  ibFakeInstall(&d, 1);
  ibFakeDmaBuf(dmabufMode);
  collIbConfigLoad(&collIbCfg);
  collIbCfg.dmabuf = knob;
  assert_int_equal(collIbStart(), collSuccess);
}
static void stop(void) {
  assert_int_equal(net->fini(), collSuccess);
  ibFakeStats st;
  ibFakeGetStats(&st);
  assert_string_equal(st.violation, "");
  assert_int_equal(st.liveQps, 0);
  assert_int_equal(st.liveMrs, 0);
  ibFakeUninstall();
}
static int ptrSupport(void) {
  collNetProperties_t p;
  assert_int_equal(net->getProperties(0, &p), collSuccess);
  return p.ptrSupport;
}
/* regMrDmaBuf on a fresh pair's recv comm must fail with code and want. */
static void expectRegFails(void* data, int type, int fd, collResult_t code, const char* want) {
  netPair_t q;
  netMakePair(net, &q);
  void* mh = (void*)1;
  collResult_t r = net->regMrDmaBuf(q.recv, data, 4096, type, 0, fd, &mh);
  if (r != code || !HAS(collGetLastError(NULL), want))
    fail_msg("regMrDmaBuf: %d \"%s\", want %d \"%s\"", (int)r, collGetLastError(NULL), (int)code, want);
  assert_ptr_equal(mh, (void*)1);
  netClosePair(net, &q);
}

#ifdef COLL_HAVE_CUDA
enum { N = 100000, OFF = 4096 + 24 };

static int haveFake(void) { return access(COLL_FAKECUDA, R_OK) == 0; }
#define NEED_FAKE()                                                      \
  do {                                                                   \
    if (!haveFake()) {                                                   \
      print_message("skipped: no fake driver at %s\n", COLL_FAKECUDA);   \
      skip();                                                            \
    }                                                                    \
  } while (0)

static void* devAlloc(size_t n) {
  void* p = NULL;
  assert_int_equal(collDevSetCurrent(0), collSuccess);
  assert_int_equal(collDevAlloc(&p, n), collSuccess);
  return p;
}
/* The fake driver's count of cuFlushGPUDirectRDMAWrites calls. */
static long flushes(void) {
  void* h = dlopen(COLL_FAKECUDA, RTLD_NOW | RTLD_NOLOAD);
  long (*f)(void) = NULL;
  if (h) *(void**)&f = dlsym(h, "fakecudaFlushes");
  assert_non_null(f);
  long n = f();
  dlclose(h);
  return n;
}
/* The fake driver's count of calls of entry point `name`. */
static long driverCalls(const char* name) {
  void* h = dlopen(COLL_FAKECUDA, RTLD_NOW | RTLD_NOLOAD);
  long (*f)(const char*) = NULL;
  if (h) *(void**)&f = dlsym(h, "fakecudaCalls");
  assert_non_null(f);
  long n = f(name);
  dlclose(h);
  assert_true(n >= 0);
  return n;
}
/* iflush of [data, +n) on recv comm rc with mhandle mh; the flushes it made. */
static long iflushCount(void* rc, void* data, size_t n, void* mh) {
  long f0 = flushes();
  CUcontext c0 = NULL, c1 = NULL;
  assert_int_equal(COLL_CU(cuCtxGetCurrent)(&c0), CUDA_SUCCESS);
  void* req = (void*)1;
  assert_int_equal(net->iflush(rc, data, n, mh, &req), collSuccess);
  assert_null(req);
  assert_int_equal(COLL_CU(cuCtxGetCurrent)(&c1), CUDA_SUCCESS);
  assert_ptr_equal(c0, c1); /* the thread's context is kept */
  return flushes() - f0;
}
static void cuCopy(void* dst, const void* src, size_t n) {
  assert_int_equal(COLL_CU(cuMemcpy)((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, n), CUDA_SUCCESS);
}

static void test_export(void** st) {
  (void)st;
  NEED_FAKE();
  assert_int_equal(collCudaLoad(), collSuccess);
  assert_int_equal(collCudaDmaBufSupported(), 1);
  char* d = devAlloc(OFF + N);
  int fd = -7;
  uint64_t off = 99;
  assert_int_equal(collCudaDmaBufFd(d + OFF, N, &fd, &off), collSuccess);
  assert_true(fd >= 0);
  assert_int_equal(off, OFF);
  assert_int_equal(close(fd), 0);
  /* not inside one allocation: host memory, and a range past the end */
  char host[64];
  fd = -7;
  assert_int_equal(collCudaDmaBufFd(host, sizeof host, &fd, &off), collInvalidArgument);
  assert_true(HAS(collGetLastError(NULL), "not inside one CUDA allocation"));
  assert_int_equal(collCudaDmaBufFd(d + OFF, N + 1, &fd, &off), collInvalidArgument);
  assert_true(HAS(collGetLastError(NULL), "runs past its end"));
  assert_int_equal(collCudaDmaBufFd(d, 0, &fd, &off), collInvalidArgument);
  assert_int_equal(collCudaDmaBufFd(d, N, NULL, &off), collInvalidArgument);
  assert_int_equal(fd, -7);
  collCudaRdmaFlush fl = {(void*)1, 7, 7, 7};
  assert_int_equal(collCudaRdmaFlushOf(host, &fl), collInvalidArgument);
  assert_true(HAS(collGetLastError(NULL), "not GPU memory"));
  assert_int_equal(fl.dev, 7); /* untouched */
  assert_int_equal(collCudaRdmaFlushOf(d, &fl), collSuccess);
  assert_int_equal(fl.dev, 0);
  assert_int_equal(fl.flush, 1); /* the fake's default GPU does not order NIC writes */
  assert_non_null(fl.ctx);
  collCudaRdmaFlushRelease(&fl);
  assert_int_equal(off, OFF);
  collDevFree(d);
}

/* One message of n bytes from src (registration smh) on q's send comm into
 * dst (rmh) on its receive comm; both ends complete with n bytes. */
static void transfer(netPair_t* q, void* src, void* dst, size_t n, void* smh, void* rmh) {
  void *s = NULL, *r = NULL;
  while (!r) assert_int_equal(net->irecv(q->recv, dst, n, 5, rmh, &r), collSuccess);
  while (!s) assert_int_equal(net->isend(q->send, src, n, 5, smh, &s), collSuccess);
  int sd = 0, rd = 0;
  size_t got = 0;
  for (int i = 0; i < 10000000 && (!sd || !rd); i++) {
    if (!sd) assert_int_equal(net->test(s, &sd, NULL, NULL), collSuccess);
    if (!rd) assert_int_equal(net->test(r, &rd, &got, NULL), collSuccess);
  }
  assert_true(sd && rd);
  assert_int_equal(got, n);
}

/* Registers [src, +n) on q's send comm and [dst, +n) on its receive comm
 * from dma-bufs (*smh, *rmh). The fds stay the caller's (still open: ib
 * closed neither); closed here, the registrations hold. */
static void regBoth(netPair_t* q, char* src, char* dst, size_t n, void** smh, void** rmh) {
  int sfd = -1, rfd = -1;
  uint64_t soff = 0, roff = 0;
  assert_int_equal(collCudaDmaBufFd(src, n, &sfd, &soff), collSuccess);
  assert_int_equal(collCudaDmaBufFd(dst, n, &rfd, &roff), collSuccess);
  assert_int_equal(net->regMrDmaBuf(q->send, src, n, COLL_PTR_CUDA, soff, sfd, smh), collSuccess);
  assert_int_equal(net->regMrDmaBuf(q->recv, dst, n, COLL_PTR_CUDA, roff, rfd, rmh), collSuccess);
  assert_true(fcntl(sfd, F_GETFD) >= 0 && fcntl(rfd, F_GETFD) >= 0);
  close(sfd), close(rfd);
}
/* Undoes regBoth, closes q, stops ib (stop's checks) and frees the GPU
 * buffers src and dst. */
static void unregBoth(netPair_t* q, void* smh, void* rmh, void* src, void* dst) {
  assert_int_equal(net->deregMr(q->send, smh), collSuccess);
  assert_int_equal(net->deregMr(q->recv, rmh), collSuccess);
  netClosePair(net, q);
  stop();
  collDevFree(src), collDevFree(dst);
}

/* `rounds` messages of n bytes from one GPU buffer into another, each
 * registered once from a dma-buf, every receive followed by iflush and its
 * bytes checked: the flushes the iflushes made. *queries: the driver's
 * cuPointerGetAttributes and cuCtxSetCurrent calls after the registrations
 * (the thread's context is the buffers' own: nothing to switch). */
static long receiveRounds(int rounds, size_t n, long* queries) {
  start(IBFAKE_DMABUF_SUPPORTED, 1);
  char* src = devAlloc(n);
  char* dst = devAlloc(n);
  unsigned char* pat = malloc(n);
  unsigned char* back = malloc(n);
  assert_true(pat && back);
  netPair_t q;
  netMakePair(net, &q);
  void *smh = NULL, *rmh = NULL;
  regBoth(&q, src, dst, n, &smh, &rmh);
  long q0 = driverCalls("cuPointerGetAttributes") + driverCalls("cuCtxSetCurrent"), f = 0;
  for (int k = 0; k < rounds; k++) {
    for (size_t i = 0; i < n; i++) pat[i] = (unsigned char)(i * 13 + (size_t)k * 101 + 1);
    cuCopy(src, pat, n);
    transfer(&q, src, dst, n, smh, rmh);
    f += iflushCount(q.recv, dst, n, rmh);
    cuCopy(back, dst, n);
    assert_memory_equal(back, pat, n);
  }
  *queries = driverCalls("cuPointerGetAttributes") + driverCalls("cuCtxSetCurrent") - q0;
  unregBoth(&q, smh, rmh, src, dst);
  free(pat), free(back);
  return f;
}

/* A GPU that needs flushes: 5 receives into one registration make exactly
 * 5 flushes and ask the driver nothing about the pointer (the registration
 * asked once). Before the registration kept it, every iflush called
 * cuPointerGetAttributes. */
static void test_iflush_asks_once(void** st) {
  (void)st;
  NEED_FAKE();
  assert_int_equal(collCudaLoad(), collSuccess);
  long queries = -1;
  assert_int_equal(receiveRounds(5, 100000, &queries), 5);
  assert_int_equal(queries, 0);
}

/* GPU buffer -> GPU buffer of n bytes, both registered from dma-bufs;
 * exact bytes. At most IB_EAGER too: GPU memory never goes eager (the fake
 * CUDA driver's memory is PROT_NONE where the process sees it, so a host
 * copy through the eager slots would crash). */
static void gpuToGpu(size_t n) {
  NEED_FAKE();
  assert_int_equal(collCudaLoad(), collSuccess);
  start(IBFAKE_DMABUF_SUPPORTED, 1);
  assert_int_equal(ptrSupport(), COLL_PTR_HOST | COLL_PTR_CUDA | COLL_PTR_DMABUF);
  char* src = devAlloc(OFF + n);
  char* dst = devAlloc(OFF + n);
  unsigned char* pat = malloc(n);
  unsigned char* back = malloc(OFF + n);
  for (size_t i = 0; i < n; i++) pat[i] = (unsigned char)(i * 7 + 3);
  memset(back, 0xEE, OFF + n);
  cuCopy(dst, back, OFF + n); /* the receive buffer's guard bytes */
  cuCopy(src + OFF, pat, n);
  netPair_t q;
  netMakePair(net, &q);
  void *smh = NULL, *rmh = NULL;
  regBoth(&q, src + OFF, dst + OFF, n, &smh, &rmh);
  ibFakeStats st0;
  ibFakeGetStats(&st0);
  transfer(&q, src + OFF, dst + OFF, n, smh, rmh);
  ibFakeStats st1;
  ibFakeGetStats(&st1);
  assert_int_equal(st1.regs, st0.regs); /* nothing registered behind our back */
  assert_int_equal(iflushCount(q.recv, dst + OFF, n, rmh), 1);
  assert_int_equal(iflushCount(q.recv, back, n, NULL), 0); /* host memory: nothing to flush */
  cuCopy(back, dst, OFF + n);
  assert_memory_equal(back + OFF, pat, n);
  for (size_t i = 0; i < OFF; i++) assert_int_equal(back[i], 0xEE); /* nothing before the buffer */
  unregBoth(&q, smh, rmh, src, dst);
  free(pat), free(back);
}
static void test_gpu_to_gpu(void** st) {
  (void)st;
  gpuToGpu(100000); /* above IB_EAGER: RDMA write into the receive buffer */
  gpuToGpu(IB_EAGER);
  gpuToGpu(1);
}

/* One end GPU memory, the other a small host buffer: the receiver fails with
 * a message (no host copy touches GPU memory, no hang). gpuSends: the sender
 * has GPU memory (its request-to-send reaches a host receive that sends no
 * CTS); else a host sender's eager message reaches a GPU receive. */
static void mismatch(int gpuSends, const char* want) {
  NEED_FAKE();
  assert_int_equal(collCudaLoad(), collSuccess);
  start(IBFAKE_DMABUF_SUPPORTED, 1);
  enum { M = 256 };
  char* d = devAlloc(M);
  char host[M];
  memset(host, 1, sizeof host);
  netPair_t q;
  netMakePair(net, &q);
  int fd = -1;
  uint64_t off = 0;
  assert_int_equal(collCudaDmaBufFd(d, M, &fd, &off), collSuccess);
  void* mh = NULL;
  assert_int_equal(net->regMrDmaBuf(gpuSends ? q.send : q.recv, d, M, COLL_PTR_CUDA, off, fd, &mh), collSuccess);
  close(fd);
  void *s = NULL, *r = NULL;
  while (!r) assert_int_equal(net->irecv(q.recv, gpuSends ? host : d, M, 5, gpuSends ? NULL : mh, &r), collSuccess);
  while (!s) assert_int_equal(net->isend(q.send, gpuSends ? d : host, M, 5, gpuSends ? mh : NULL, &s), collSuccess);
  int sd = 0, rd = 0;
  collResult_t rr = collSuccess;
  for (int i = 0; i < 10000000 && rr == collSuccess && !rd; i++) {
    if (!sd) assert_int_equal(net->test(s, &sd, NULL, NULL), collSuccess);
    rr = net->test(r, &rd, NULL, NULL);
  }
  assert_int_equal(rr, collRemoteError);
  if (!HAS(collGetLastError(NULL), want)) fail_msg("receiver: \"%s\", want \"%s\"", collGetLastError(NULL), want);
  assert_int_equal(net->deregMr(gpuSends ? q.send : q.recv, mh), collSuccess);
  netClosePair(net, &q);
  stop();
  collDevFree(d);
}
static void test_gpu_host_mismatch(void** st) {
  (void)st;
  mismatch(1, "256 bytes of GPU memory (dma-buf) for a host buffer of 256 bytes");
  mismatch(0, "256 bytes of host memory came eagerly for a GPU buffer (dma-buf)");
}

static void test_errors(void** st) {
  (void)st;
  NEED_FAKE();
  assert_int_equal(collCudaLoad(), collSuccess);
  char* d = devAlloc(N);
  int fd = -1;
  uint64_t off = 0;
  assert_int_equal(collCudaDmaBufFd(d, N, &fd, &off), collSuccess);
  int p[2];
  assert_int_equal(pipe(p), 0);
  start(IBFAKE_DMABUF_SUPPORTED, 1);
  expectRegFails(d, COLL_PTR_CUDA, -1, collInvalidArgument, "ib regMrDmaBuf: bad dma-buf fd -1");
  expectRegFails(d, COLL_PTR_CUDA, p[0], collInvalidArgument,
                 "on fake0 failed: Bad file descriptor (errno 9): fd is not a dma-buf");
  expectRegFails(d, COLL_PTR_HOST, fd, collInvalidArgument,
                 "memory type 1; dma-bufs are GPU memory (COLL_PTR_CUDA)");
  stop();
  /* COLL_IB_DMABUF=0: no property, and refused */
  start(IBFAKE_DMABUF_SUPPORTED, 0);
  assert_int_equal(ptrSupport(), COLL_PTR_HOST);
  expectRegFails(d, COLL_PTR_CUDA, fd, collInvalidUsage,
                 "regMrDmaBuf not supported: dma-buf registration is off (COLL_IB_DMABUF=0)");
  stop();
  /* the HCA's kernel driver lacks dma-buf (the probe's EOPNOTSUPP) */
  start(IBFAKE_DMABUF_UNSUPPORTED, 1);
  assert_int_equal(ptrSupport(), COLL_PTR_HOST);
  expectRegFails(d, COLL_PTR_CUDA, fd, collInvalidUsage,
                 "regMrDmaBuf not supported on fake0: its kernel driver does not take dma-bufs (EOPNOTSUPP)");
  stop();
  /* libibverbs without ibv_reg_dmabuf_mr */
  start(IBFAKE_DMABUF_ABSENT, 1);
  assert_int_equal(ptrSupport(), COLL_PTR_HOST);
  expectRegFails(d, COLL_PTR_CUDA, fd, collInvalidUsage,
                 "regMrDmaBuf not supported on fake0: libibverbs has no ibv_reg_dmabuf_mr");
  stop();
  close(p[0]), close(p[1]), close(fd);
  collDevFree(d);
}

/* ---- children: one driver configuration each ---------------------------- */

static int childNoDmaBuf(void) {
  setenv("FAKECUDA_NO_DMABUF", "1", 1);
  if (collCudaLoad() != collSuccess || collCudaDmaBufSupported()) return 1;
  void* d = NULL;
  if (collDevSetCurrent(0) != collSuccess || collDevAlloc(&d, N) != collSuccess) return 2;
  int fd = -7;
  uint64_t off = 0;
  if (collCudaDmaBufFd(d, N, &fd, &off) != collInvalidUsage || fd != -7 ||
      !HAS(collGetLastError(NULL), "the CUDA driver does not support it (CUDA_ERROR_NOT_SUPPORTED")) {
    fprintf(stderr, "export: %s\n", collGetLastError(NULL));
    return 3;
  }
  start(IBFAKE_DMABUF_SUPPORTED, 1);
  if (ptrSupport() != COLL_PTR_HOST) return 4;
  expectRegFails(d, COLL_PTR_CUDA, 0, collInvalidUsage, "the CUDA driver exports no dma-bufs in this process");
  stop();
  collDevFree(d);
  return 0;
}
static int childNoEntry(void) {
  setenv("FAKECUDA_MISSING", "cuMemGetHandleForAddressRange", 1);
  if (collCudaLoad() != collSuccess) { /* an optional entry point: the driver still loads */
    fprintf(stderr, "load: %s\n", collGetLastError(NULL));
    return 1;
  }
  if (collCudaDmaBufSupported()) return 2;
  int x = 0, fd = -7;
  uint64_t off = 0;
  if (collCudaDmaBufFd(&x, 4, &fd, &off) != collInvalidUsage ||
      !HAS(collGetLastError(NULL), "has no cuMemGetHandleForAddressRange")) {
    fprintf(stderr, "export: %s\n", collGetLastError(NULL));
    return 3;
  }
  return 0;
}
/* A GPU that needs flushes, on a driver without cuFlushGPUDirectRDMAWrites:
 * no dma-buf path (staged), and the flush refuses. */
static int childNoFlush(void) {
  setenv("FAKECUDA_MISSING", "cuFlushGPUDirectRDMAWrites", 1);
  if (collCudaLoad() != collSuccess || collCudaDmaBufSupported()) return 1;
  int x = 0;
  collCudaRdmaFlush fl;
  if (collCudaRdmaFlushOf(&x, &fl) != collInvalidUsage || !HAS(collGetLastError(NULL), "no dma-buf path")) {
    fprintf(stderr, "flush: %s\n", collGetLastError(NULL));
    return 2;
  }
  start(IBFAKE_DMABUF_SUPPORTED, 1);
  if (ptrSupport() != COLL_PTR_HOST) return 3;
  stop();
  return 0;
}
/* A GPU that orders NIC writes itself (ORDERING = OWNER): dma-buf, and
 * 5 receives into one registration make no flush and no driver query. */
static int childOrdered(void) {
  setenv("FAKECUDA_RDMA_ORDERING", "100", 1);
  if (collCudaLoad() != collSuccess || !collCudaDmaBufSupported()) return 1;
  long queries = -1, f = receiveRounds(5, N, &queries);
  if (f != 0 || queries != 0) {
    fprintf(stderr, "ordered GPU: %ld flushes, %ld driver queries after registering, want 0 and 0\n", f, queries);
    return 2;
  }
  return 0;
}
#endif

/* A host-only process: getProperties says host, and loads no CUDA driver. */
static int childHostOnly(void) {
  start(IBFAKE_DMABUF_SUPPORTED, 1);
  if (ptrSupport() != COLL_PTR_HOST) return 1;
  char buf[4096];
  expectRegFails(buf, COLL_PTR_CUDA, 0, collInvalidUsage, "regMrDmaBuf not supported on fake0");
  stop();
  return collCudaDriverPresent() ? 2 : 0;
}

static void runChild(const char* mode) {
  fflush(stdout);
  pid_t p = fork();
  assert_true(p >= 0);
  if (p == 0) {
    execl("/proc/self/exe", "test_ib_dmabuf", "--child", mode, (char*)NULL);
    _exit(127);
  }
  int s = 0;
  assert_int_equal(waitpid(p, &s, 0), p);
  assert_true(WIFEXITED(s));
  if (WEXITSTATUS(s) != 0) fail_msg("child %s exited with %d", mode, WEXITSTATUS(s));
}

static void test_host_only(void** st) {
  (void)st;
  runChild("host-only");
}
#ifdef COLL_HAVE_CUDA
static void test_driver_without_dmabuf(void** st) {
  (void)st;
  NEED_FAKE();
  runChild("no-dmabuf");
  runChild("no-entry");
  runChild("no-flush");
  runChild("ordered");
}
#endif

int main(int argc, char** argv) {
  setenv("COLL_SOCKET_IFNAME", "lo", 0);
#ifdef COLL_HAVE_CUDA
  setenv("COLL_CUDA_LIBRARY", COLL_FAKECUDA, 1);
#endif
  if (argc == 3 && strcmp(argv[1], "--child") == 0) {
    int rc = 100;
    if (strcmp(argv[2], "host-only") == 0) rc = childHostOnly();
#ifdef COLL_HAVE_CUDA
    if (strcmp(argv[2], "no-dmabuf") == 0) rc = childNoDmaBuf();
    if (strcmp(argv[2], "no-entry") == 0) rc = childNoEntry();
    if (strcmp(argv[2], "no-flush") == 0) rc = childNoFlush();
    if (strcmp(argv[2], "ordered") == 0) rc = childOrdered();
#endif
    return rc;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_host_only),
#ifdef COLL_HAVE_CUDA
      cmocka_unit_test(test_export),
      cmocka_unit_test(test_gpu_to_gpu),
      cmocka_unit_test(test_iflush_asks_once),
      cmocka_unit_test(test_gpu_host_mismatch),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_driver_without_dmabuf),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
