/*
 * test_p2p.c - the CUDA P2P transport (transports/p2p) through its table.
 *
 * Needs a GPU: without one (CI here), init fails with the loader's message
 * and every case is skipped, saying why. With one (tests/gpu/run.sh), two
 * threads of this process run the transport suite shared with tcp/shm
 * (helper_net.c) on host buffers (cuMemcpyAsync reads and writes them), then
 * device buffers of every size class through the ring (0, 1, a slot, a slot
 * + 1, many slots) with guard bytes behind each, and two processes (this
 * program re-executed, since a child forked after CUDA started cannot use
 * it) exchange device buffers both ways; a receiver that is killed fails the
 * sender within 2 s. The re-executed peer reports through its exit code.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "device/cuda_loader.h"
#include "device/devexec.h"
#include "misc/log.h"
#include "misc/socket.h"
#include "net_testlib.h"
#include "transports/p2p/p2p.h"

static const collNet_t* N = &collNetP2p;
static const netStreamOpts_t kOpts = {600000, 0}; /* big messages span 2 slots of 512 KiB; no poll fds */
static char gSelf[4096];
static char gWhy[700];
static int gReady = -1; /* 1: a GPU and the transport work here */

static int ready(void) {
  if (gReady < 0) {
    gReady = N->init(NULL) == collSuccess;
    if (!gReady) snprintf(gWhy, sizeof gWhy, "%s", collGetLastError(NULL));
  }
  return gReady;
}
#define NEED_GPU()                                                              \
  do {                                                                          \
    if (!ready()) {                                                             \
      print_message("skipped: the p2p transport needs a GPU here: %s\n", gWhy); \
      skip();                                                                   \
    }                                                                           \
  } while (0)

static const size_t kSizes[] = {0, 1, 4095, 65536, (1u << 20) + 3, 16u << 20, 7, 300000};
#define NSIZES ((int)(sizeof kSizes / sizeof kSizes[0]))

static void test_table(void** st) {
  (void)st;
  assert_int_equal(N->version, COLL_NET_VERSION);
  assert_int_equal(N->size, sizeof(collNet_t));
  assert_string_equal(N->name, "p2p");
  void* const* fns = (void* const*)&N->init;
  for (size_t i = 0; i < (sizeof(collNet_t) - offsetof(collNet_t, init)) / sizeof(void*); i++)
    assert_non_null(fns[i]);
  NEED_GPU();
  int ndev = 0;
  assert_int_equal(N->devices(&ndev), collSuccess);
  assert_true(ndev >= 1);
  collNetProperties_t p;
  assert_int_equal(N->getProperties(0, &p), collSuccess);
  assert_string_equal(p.name, "cuda0");
  assert_int_equal(p.ptrSupport, COLL_PTR_CUDA);
  assert_int_equal(p.hasPut, 0);
  assert_non_null(strstr(p.pciPath, "/sys/bus/pci/devices/"));
  assert_int_equal(N->getProperties(ndev, &p), collInvalidArgument);
  netPair_t q;
  netMakePair(N, &q);
  void* mh = NULL;
  char buf[8];
  assert_int_equal(N->regMr(q.send, buf, 8, COLL_PTR_CUDA, &mh), collSuccess);
  assert_int_equal(N->regMr(q.send, buf, 8, COLL_PTR_HOST, &mh), collInvalidArgument);
  void* req = (void*)1;
  assert_int_equal(N->iput(q.send, buf, 8, mh, 0, 0, &req), collInvalidUsage);
  assert_null(req);
  req = (void*)1;
  assert_int_equal(N->iflush(q.recv, buf, 8, mh, &req), collSuccess);
  assert_null(req);
  assert_int_equal(N->isend(q.recv, buf, 8, 0, NULL, &req), collInvalidUsage);
  int fd = 0;
  assert_int_equal(N->getPollFd(q.send, &fd), collSuccess);
  assert_int_equal(fd, -1);
  collP2pStats s;
  collP2pGetStats(q.send, &s);
  assert_int_equal(s.sameProcess, 1);
  assert_int_equal(s.device, 0);
  assert_true(s.slotBytes >= 65536);
  netClosePair(N, &q);
}

/* The shared suite on host buffers. */
static void test_sizes_threads(void** st) {
  (void)st;
  NEED_GPU();
  netPair_t q;
  netMakePair(N, &q);
  netRunStream(N, &kOpts, &q, NSIZES, kSizes, 10);
  netRunStream(N, &kOpts, &q, 300, NULL, 20);
  netClosePair(N, &q);
}
static void test_many_in_flight(void** st) {
  (void)st;
  NEED_GPU();
  netTestManyInFlight(N, &kOpts);
}
static void test_test_drives_earlier(void** st) {
  (void)st;
  NEED_GPU();
  netTestTestDrivesEarlier(N);
}
static void test_tags(void** st) {
  (void)st;
  NEED_GPU();
  netTestTags(N, 3u << 20);
}
static void test_pool_and_oversize(void** st) {
  (void)st;
  NEED_GPU();
  netPair_t q;
  netMakePair(N, &q);
  void* r[COLL_P2P_MAX_REQUESTS];
  netFillRequestPool(N, q.send, r, COLL_P2P_MAX_REQUESTS);
  netClosePair(N, &q);
  netMakePair(N, &q);
  netCheckOversize(N, &q);
  netClosePair(N, &q);
}
static void test_peer_close_send(void** st) {
  (void)st;
  NEED_GPU();
  netTestPeerCloseSend(N, 100, "closed the connection or exited");
}

/* ---- device buffers --------------------------------------------------------- */

#define GUARDB 64
static const size_t kDevSizes[] = {0, 1, 1000, 512u << 10, (512u << 10) + 1, 24u << 20};
#define NDEV ((int)(sizeof kDevSizes / sizeof kDevSizes[0]))
#define DEV_MAX (24u << 20)

#ifdef COLL_HAVE_CUDA
/* Sends kDevSizes from device memory over send comm s (the receiver may be
 * another thread or process). Returns 1 on any failure. */
static int devSendOn(int dev, void* s, unsigned seed) {
  if (collDevSetCurrent(dev) != collSuccess) return 1;
  CUdeviceptr d = 0;
  uint8_t* h = malloc(DEV_MAX);
  int bad = !h || COLL_CU(cuMemAlloc)(&d, DEV_MAX) != CUDA_SUCCESS;
  for (int k = 0; k < NDEV && !bad; k++) {
    netFill(h, kDevSizes[k], seed + (unsigned)k);
    bad |= COLL_CU(cuMemcpy)(d, (CUdeviceptr)(uintptr_t)h, kDevSizes[k] ? kDevSizes[k] : 1) != CUDA_SUCCESS;
    size_t n = 0;
    void* req = netPost(N, s, 1, (void*)(uintptr_t)d, kDevSizes[k]);
    bad |= !req || netWaitReq(N, req, &n) != collSuccess || n != kDevSizes[k];
  }
  if (d) COLL_CU(cuMemFree)(d);
  free(h);
  return bad;
}

/* Receives kDevSizes into device memory over recv comm r and checks every
 * byte and the guard behind it. Returns 1 on any failure. */
static int devRecvOn(int dev, void* r, unsigned seed) {
  if (collDevSetCurrent(dev) != collSuccess) return 1;
  CUdeviceptr d = 0;
  uint8_t* h = malloc(DEV_MAX + GUARDB);
  int bad = !h || COLL_CU(cuMemAlloc)(&d, DEV_MAX + GUARDB) != CUDA_SUCCESS;
  for (int k = 0; k < NDEV && !bad; k++) {
    size_t len = kDevSizes[k];
    bad |= COLL_CU(cuMemsetD8Async)(d, 0xEE, DEV_MAX + GUARDB, NULL) != CUDA_SUCCESS;
    bad |= COLL_CU(cuStreamSynchronize)(NULL) != CUDA_SUCCESS;
    size_t n = 0;
    void* req = netPost(N, r, 0, (void*)(uintptr_t)d, DEV_MAX);
    bad |= !req || netWaitReq(N, req, &n) != collSuccess || n != len;
    bad |= COLL_CU(cuMemcpy)((CUdeviceptr)(uintptr_t)h, d, len + GUARDB) != CUDA_SUCCESS;
    if (!bad && !netCheck(h, len, seed + (unsigned)k)) {
      fprintf(stderr, "device message %d (%zu bytes) differs\n", k, len);
      bad = 1;
    }
    for (size_t i = len; i < len + GUARDB && !bad; i++)
      if (h[i] != 0xEE) {
        fprintf(stderr, "guard byte %zu behind a %zu-byte message written\n", i - len, len);
        bad = 1;
      }
  }
  if (d) COLL_CU(cuMemFree)(d);
  free(h);
  return bad;
}

#else
static int devSendOn(int dev, void* s, unsigned seed) { return (void)dev, (void)s, (void)seed, 1; }
static int devRecvOn(int dev, void* r, unsigned seed) { return (void)dev, (void)r, (void)seed, 1; }
#endif
static int devSend(void* s, unsigned seed) { return devSendOn(0, s, seed); }
static int devRecv(void* r, unsigned seed) { return devRecvOn(0, r, seed); }

typedef struct {
  void* comm;
  unsigned seed;
  int bad;
  int dev;
} devArg;
static void* devSendThread(void* a) {
  devArg* x = a;
  x->bad = devSendOn(x->dev, x->comm, x->seed);
  return NULL;
}

static void test_device_buffers_threads(void** st) {
  (void)st;
  NEED_GPU();
  netPair_t q;
  netMakePair(N, &q);
  devArg a = {q.send, 100, 1, 0};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, devSendThread, &a), 0);
  int bad = devRecv(q.recv, 100);
  pthread_join(t, NULL);
  assert_int_equal(a.bad, 0);
  assert_int_equal(bad, 0);
  collP2pStats s;
  collP2pGetStats(q.recv, &s);
  assert_int_equal(s.msgs, NDEV);
  size_t total = 0;
  for (int k = 0; k < NDEV; k++) total += kDevSizes[k];
  assert_int_equal(s.bytes, total);
  netClosePair(N, &q);
}

/* Two GPUs (the fake driver's FAKECUDA_DEVICES=2 in CI): a sender on GPU 0
 * and a receiver on GPU 1 in two threads; the receiver maps the ring of
 * GPU 0 for GPU 1. Where GPU 1 cannot reach GPU 0 (cuDeviceCanAccessPeer
 * 0), accept fails instead with a message naming both GPUs. */
static void test_two_gpus(void** st) {
  (void)st;
  NEED_GPU();
  if (collDevCount() < 2) {
    print_message("skipped: needs 2 GPUs (this process sees %d)\n", collDevCount());
    skip();
  }
#ifdef COLL_HAVE_CUDA
  int can = -1;
  assert_int_equal(COLL_CU(cuDeviceCanAccessPeer)(&can, 1, 0), CUDA_SUCCESS);
  char h[COLL_NET_HANDLE_BYTES];
  void *l = NULL, *s = NULL, *r = NULL;
  assert_int_equal(N->listen(1, h, &l), collSuccess);
  assert_int_equal(N->connect(0, h, &s), collSuccess);
  collResult_t rc = collSuccess;
  for (int i = 0; i < 5000 && !r && rc == collSuccess; i++)
    if ((rc = N->accept(l, &r)) == collSuccess && !r) usleep(1000);
  if (!can) {
    assert_int_equal(rc, collSystemError);
    assert_null(r);
    assert_non_null(strstr(collGetLastError(NULL), "p2p accept: GPU 1 cannot read the ring on GPU 0 (peer access not possible)"));
  } else {
    assert_int_equal(rc, collSuccess);
    assert_non_null(r);
    collP2pStats ss;
    collP2pGetStats(r, &ss);
    assert_int_equal(ss.device, 1);
    devArg a = {s, 400, 1, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, devSendThread, &a), 0);
    int bad = devRecvOn(1, r, 400);
    pthread_join(t, NULL);
    assert_int_equal(a.bad, 0);
    assert_int_equal(bad, 0);
    assert_int_equal(N->closeRecv(r), collSuccess);
  }
  assert_int_equal(N->closeSend(s), collSuccess);
  assert_int_equal(N->closeListen(l), collSuccess);
#endif
}

/* ---- another process ----------------------------------------------------------- */

/* The re-executed peer: mode "recv" listens and receives (handle written to
 * fd wr), "send" connects to the hex handle and sends, "sink" accepts and
 * then waits to be killed. Exit status: 0 pass, else the failing step. */
static int peerMain(const char* mode, const char* arg, int wr) {
  alarm(120);
  if (N->init(NULL) != collSuccess) return 2;
  char handle[COLL_NET_HANDLE_BYTES];
  if (strcmp(mode, "send") == 0) {
    for (int i = 0; i < COLL_NET_HANDLE_BYTES; i++) {
      unsigned v;
      if (sscanf(arg + 2 * i, "%2x", &v) != 1) return 3;
      handle[i] = (char)v;
    }
    void* s = NULL;
    if (N->connect(0, handle, &s) != collSuccess || !s) return 4;
    int bad = devSend(s, 300);
    N->closeSend(s);
    return bad ? 5 : 0;
  }
  void *l = NULL, *r = NULL;
  if (N->listen(0, handle, &l) != collSuccess) return 6;
  if (write(wr, handle, sizeof handle) != (ssize_t)sizeof handle) return 7;
  if (!(r = netAcceptOne(N, l))) return 8;
  if (strcmp(mode, "sink") == 0) {
    if (write(wr, "a", 1) != 1) return 9;
    for (;;) pause();
  }
  collP2pStats s;
  collP2pGetStats(r, &s);
  if (s.sameProcess) return 10;
  int bad = devRecv(r, 200);
  N->closeRecv(r);
  N->closeListen(l);
  return bad ? 11 : 0;
}

/* Starts this program as a peer; its stdout is the pipe's write end. */
static pid_t spawnPeer(const char* mode, const char* arg, int* rd) {
  int p[2] = {-1, -1};
  if (rd) assert_int_equal(pipe(p), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    if (rd) { /* the read end first: it may be fd 3 itself */
      close(p[0]);
      if (p[1] != 3) {
        dup2(p[1], 3);
        close(p[1]);
      }
    }
    execl(gSelf, gSelf, "--p2p-peer", mode, arg ? arg : "-", (char*)NULL);
    _exit(127);
  }
  if (rd) {
    close(p[1]);
    *rd = p[0];
  }
  return pid;
}

static int reap(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

static void readHandle(int rd, char* h) {
  size_t got = 0;
  while (got < COLL_NET_HANDLE_BYTES) {
    ssize_t n = read(rd, h + got, COLL_NET_HANDLE_BYTES - got);
    assert_true(n > 0);
    got += (size_t)n;
  }
}

static void test_device_buffers_processes(void** st) {
  (void)st;
  NEED_GPU();
  /* this process sends to a receiving peer */
  int rd;
  pid_t pid = spawnPeer("recv", NULL, &rd);
  char h[COLL_NET_HANDLE_BYTES];
  readHandle(rd, h);
  void* s = NULL;
  assert_int_equal(N->connect(0, h, &s), collSuccess);
  collP2pStats ss;
  collP2pGetStats(s, &ss);
  assert_int_equal(ss.sameProcess, 0);
  assert_int_equal(devSend(s, 200), 0);
  assert_int_equal(reap(pid), 0);
  assert_int_equal(N->closeSend(s), collSuccess);
  close(rd);
  /* a sending peer sends to this process */
  void* l = NULL;
  assert_int_equal(N->listen(0, h, &l), collSuccess);
  char hex[2 * COLL_NET_HANDLE_BYTES + 1];
  for (int i = 0; i < COLL_NET_HANDLE_BYTES; i++) snprintf(hex + 2 * i, 3, "%02x", (unsigned char)h[i]);
  pid = spawnPeer("send", hex, NULL);
  void* r = netAcceptOne(N, l);
  assert_non_null(r);
  assert_int_equal(devRecv(r, 300), 0);
  assert_int_equal(reap(pid), 0);
  assert_int_equal(N->closeRecv(r), collSuccess);
  assert_int_equal(N->closeListen(l), collSuccess);
}

/* The receiving process is killed while the ring is full: the sender fails
 * with collRemoteError naming it within 2 s. */
static void test_killed_receiver(void** st) {
  (void)st;
  NEED_GPU();
  int rd;
  pid_t pid = spawnPeer("sink", NULL, &rd);
  char h[COLL_NET_HANDLE_BYTES];
  readHandle(rd, h);
  void* s = NULL;
  assert_int_equal(N->connect(0, h, &s), collSuccess);
  char c;
  assert_int_equal(read(rd, &c, 1), 1);
  close(rd);
#ifdef COLL_HAVE_CUDA
  CUdeviceptr d = 0;
  assert_int_equal(collDevSetCurrent(0), collSuccess);
  assert_int_equal(COLL_CU(cuMemAlloc)(&d, 4096), CUDA_SUCCESS);
#else
  uintptr_t d = 0;
#endif
  void* req[COLL_P2P_NSLOTS + 1];
  for (int k = 0; k <= COLL_P2P_NSLOTS; k++) assert_non_null(req[k] = netPost(N, s, 1, (void*)(uintptr_t)d, 4096));
  kill(pid, SIGKILL);
  double t0 = collTimeNow();
  size_t n;
  collResult_t r = collSuccess;
  for (int k = 0; k <= COLL_P2P_NSLOTS && r == collSuccess; k++) r = netWaitReq(N, req[k], &n);
  assert_int_equal(r, collRemoteError);
  assert_true(collTimeNow() - t0 < 2.0);
  char pidStr[48];
  snprintf(pidStr, sizeof pidStr, "receiving process %d", (int)pid);
  assert_non_null(strstr(collGetLastError(NULL), pidStr));
  assert_int_equal(reap(pid), 100 + SIGKILL);
#ifdef COLL_HAVE_CUDA
  COLL_CU(cuMemFree)(d);
#endif
  assert_int_equal(N->closeSend(s), collSuccess);
}

int main(int argc, char** argv) {
  if (argc >= 4 && strcmp(argv[1], "--p2p-peer") == 0) return peerMain(argv[2], argv[3], 3);
  const char* filter = getenv("COLL_TEST_FILTER"); /* cmocka pattern, e.g. test_two_gpus (ctest fakecuda.*) */
  if (filter && *filter) cmocka_set_test_filter(filter);
  ssize_t n = readlink("/proc/self/exe", gSelf, sizeof gSelf - 1);
  if (n > 0) gSelf[n] = 0;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table),
      cmocka_unit_test(test_sizes_threads),
      cmocka_unit_test(test_many_in_flight),
      cmocka_unit_test(test_test_drives_earlier),
      cmocka_unit_test(test_tags),
      cmocka_unit_test(test_pool_and_oversize),
      cmocka_unit_test(test_peer_close_send),
      cmocka_unit_test(test_device_buffers_threads),
      cmocka_unit_test(test_two_gpus),
      cmocka_unit_test(test_device_buffers_processes),
      cmocka_unit_test(test_killed_receiver),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
