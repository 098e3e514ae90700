/*
 * test_shm.c - the shared-memory transport's operations table, between two
 * threads of this process and between this process and fork()ed children
 * (so single copy really goes through process_vm_readv).
 *
 * Every transfer checks each byte plus 8 guard bytes behind the posted size.
 * Waits go through getPollFd + poll() with a 1 s timeout: a lost wake-up
 * would show as a poll that ran into its timeout, which the streams count.
 * Cases: sizes 0..16 MiB, 600 messages in flight, FIFO completion, request
 * pool exhaustion, oversize (copy and single-copy), close by either side,
 * peer killed with SIGKILL (either side), wake-ups of a sleeping receiver and
 * sender, single copy refused by the kernel (EPERM: the child drops
 * CAP_SYS_PTRACE and the parent turns non-dumpable) falling back to copying,
 * COLL_SHM_CMA_THRESHOLD=0 and unset (calibrated) in re-executed children
 * (parameters are cached per process; the main run forces 262144), connect
 * failures, garbage on the listen socket, and no file of this process in
 * /dev/shm (mapped, open or named after its pid: other processes' entries
 * do not count) nor leaked descriptor at the end. alarm() bounds the run.
 * Children never call cmocka asserts: they report through their exit code.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <linux/capability.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "misc/log.h"
#include "misc/socket.h"
#include "transports/shm/shm.h"
#include "transports/shm/shm_internal.h"
#include "net_testlib.h"

static const collNet_t* N = &collNetShm;
static int gDevShmBefore = -1, gFdsBefore = -1;

/* Entries of a directory (without . and ..), -1 if it cannot be read. */
static int countDir(const char* path) {
  DIR* d = opendir(path);
  if (!d) return -1;
  int n = 0;
  struct dirent* e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

static int countFds(void) { return countDir("/proc/self/fd") - 1; /* the DIR's own */ }

/* What this process holds of /dev/shm: mappings and descriptors of files
 * there, and entries named after its pid. Other processes' entries (a
 * concurrent job's) do not count. */
static int ownDevShm(void) {
  int n = 0;
  char line[4096], link[4096], self[32];
  FILE* f = fopen("/proc/self/maps", "r");
  while (f && fgets(line, sizeof line, f))
    n += strstr(line, " /dev/shm/") != NULL;
  if (f) fclose(f);
  DIR* d = opendir("/proc/self/fd");
  for (struct dirent* e; d && (e = readdir(d));) {
    char path[300];
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    ssize_t k = readlink(path, link, sizeof link - 1);
    if (k > 0 && (link[k] = 0, strncmp(link, "/dev/shm/", 9) == 0)) n++;
  }
  if (d) closedir(d);
  snprintf(self, sizeof self, "%d", (int)getpid());
  d = opendir("/dev/shm");
  for (struct dirent* e; d && (e = readdir(d));) {
    const char* p = strstr(e->d_name, self);
    if (p && (p == e->d_name || p[-1] < '0' || p[-1] > '9') && (p[strlen(self)] < '0' || p[strlen(self)] > '9')) n++;
  }
  if (d) closedir(d);
  return n;
}

/* Waits sleep in poll() and count lost wake-ups; messages k % 50 == 49 of
 * the mix (300000 + k bytes) go by single copy. */
static const netStreamOpts_t kOpts = {300000, 1};

/* A stream over comm with this file's options (usable in children). */
static netStream_t shmStream(void* comm, int count, const size_t* sizes, unsigned seed) {
  return netStreamInit(N, &kOpts, comm, count, sizes, seed);
}

static const size_t kSizes[] = {0, 1, 4095, 65536, (1u << 20) + 3, 16u << 20, 7, 300000};
#define NSIZES ((int)(sizeof kSizes / sizeof kSizes[0]))

/* ---- fork helpers ------------------------------------------------------- */

/* Forks; the child runs fn(arg, fd) with the write end of a pipe and exits
 * with its result. Returns the pid; *rd gets the pipe's read end. */
static pid_t forkChild(int (*fn)(void*, int), void* arg, int* rd) {
  int p[2];
  assert_int_equal(pipe(p), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(p[0]);
    alarm(120);
    _exit(fn(arg, p[1]));
  }
  close(p[1]);
  *rd = p[0];
  return pid;
}

/* Reads exactly n bytes from fd (blocking); 0 on success. */
static int readAll(int fd, void* buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, (char*)buf + got, n - got);
    if (r <= 0) return -1;
    got += (size_t)r;
  }
  return 0;
}

/* Waits for child pid and returns its exit status (-1 if it did not exit). */
static int reap(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* ---- transport basics --------------------------------------------------- */

static void test_properties_and_stubs(void** st) {
  (void)st;
  collNetProperties_t p;
  netCheckTable(N, "shm", "shm", &p);
  assert_true(p.speedGbps > 0);
  assert_true(p.latencyUs > 0);
  netPair_t q;
  netMakePair(N, &q);
  int fd = -1;
  assert_int_equal(N->getPollFd(q.listen, &fd), collSuccess);
  assert_true(fd >= 0);
  fd = -1;
  assert_int_equal(N->getPollFd(q.send, &fd), collSuccess);
  assert_true(fd >= 0);
  fd = -1;
  assert_int_equal(N->getPollFd(q.recv, &fd), collSuccess);
  assert_true(fd >= 0);
  netCheckStubs(N, &q);
  char buf[8];
  void* req = (void*)1;
  assert_int_equal(N->irecv(q.send, buf, 8, 0, NULL, &req), collInvalidUsage);
  assert_int_equal(N->isend(q.listen, buf, 8, 0, NULL, &req), collInvalidArgument); /* not a data comm */
  collShmStats s;
  collShmGetStats(q.recv, &s);
  assert_int_equal(s.peerPid, getpid());
  netClosePair(N, &q);
  assert_int_equal(N->fini(), collSuccess);
}

static void test_sizes_threads(void** st) {
  (void)st;
  netPair_t q;
  netMakePair(N, &q);
  netRunStream(N, &kOpts, &q, NSIZES, kSizes, 10);
  collShmStats s;
  collShmGetStats(q.recv, &s);
  assert_int_equal(s.cmaMsgs, 3); /* 1 MiB+3, 16 MiB, 300000 (plain copy within one process) */
  assert_int_equal(s.copyMsgs, NSIZES - 3);
  netClosePair(N, &q);
}

static void test_many_in_flight(void** st) {
  (void)st;
  netTestManyInFlight(N, &kOpts);
}

static void test_test_drives_earlier(void** st) {
  (void)st;
  netTestTestDrivesEarlier(N);
}

static void test_tags(void** st) {
  (void)st;
  netTestTags(N, 1u << 20);
}

/* Waits for n send requests (a thread, so the receiver can run meanwhile). */
typedef struct { void** reqs; int n; int errors; } waiter_t;
static void* waitAllThread(void* arg) {
  waiter_t* w = arg;
  for (int k = 0; k < w->n; k++) {
    size_t n = 99;
    if (netWaitReq(N, w->reqs[k], &n) != collSuccess || n != 0) w->errors++;
  }
  return NULL;
}

/* 64 requests in flight: the 65th post returns NULL (retry) until one is
 * tested done. The ring holds 8 messages, so most sends stay pending. */
static void test_pool_exhaustion(void** st) {
  (void)st;
  netPair_t q;
  netMakePair(N, &q);
  void* r[COLL_SHM_MAX_REQUESTS + 1];
  netFillRequestPool(N, q.send, r, COLL_SHM_MAX_REQUESTS);
  int done = 1;
  size_t n = 5;
  assert_int_equal(N->test(r[COLL_SHM_NSLOTS], &done, &n, NULL), collSuccess); /* ring full */
  assert_int_equal(done, 0);
  assert_int_equal(netWaitReq(N, r[0], &n), collSuccess);
  assert_int_equal(n, 0);
  assert_int_equal(N->isend(q.send, NULL, 0, 0, NULL, &r[COLL_SHM_MAX_REQUESTS]), collSuccess);
  assert_non_null(r[COLL_SHM_MAX_REQUESTS]);
  waiter_t w = {r + 1, COLL_SHM_MAX_REQUESTS, 0};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, waitAllThread, &w), 0);
  void* rr[COLL_SHM_MAX_REQUESTS + 1];
  for (int k = 0; k <= COLL_SHM_MAX_REQUESTS; k++) {
    if (k == COLL_SHM_MAX_REQUESTS) assert_int_equal(netWaitReq(N, rr[0], &n), collSuccess); /* frees a slot */
    void* none = (void*)1;
    if (k == COLL_SHM_MAX_REQUESTS) {
      assert_int_equal(N->irecv(q.recv, NULL, 0, 0, NULL, &none), collSuccess);
      assert_non_null(none);
      rr[k] = none;
      continue;
    }
    rr[k] = netPost(N, q.recv, 0, NULL, 0);
    assert_non_null(rr[k]);
  }
  for (int k = 1; k <= COLL_SHM_MAX_REQUESTS; k++) {
    n = 5;
    assert_int_equal(netWaitReq(N, rr[k], &n), collSuccess);
    assert_int_equal(n, 0);
  }
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(w.errors, 0);
  netClosePair(N, &q);
}

/* Copy path: 100 bytes sent, 64 posted: collRemoteError, nothing written. */
static void test_oversize_copy(void** st) {
  (void)st;
  netPair_t q;
  netMakePair(N, &q);
  netCheckOversize(N, &q);
  uint8_t out[10];
  netFill(out, sizeof out, 3);
  size_t n;
  /* the sender learns that the receiver failed */
  void* s = netPost(N, q.send, 1, out, 10);
  if (s) assert_int_equal(netWaitReq(N, s, &n), collRemoteError);
  netClosePair(N, &q);
}

/* Single-copy path: 1 MiB sent, 512 KiB posted: both sides fail, the
 * receive buffer and its guard stay untouched. */
static void test_oversize_cma(void** st) {
  (void)st;
  netPair_t q;
  netMakePair(N, &q);
  const size_t big = 1u << 20, small = 512u << 10;
  uint8_t* out = malloc(big);
  uint8_t* in = malloc(small + 64);
  netFill(out, big, 4);
  memset(in, 0xEE, small + 64);
  void* s = netPost(N, q.send, 1, out, big);
  void* r = netPost(N, q.recv, 0, in, small);
  size_t n;
  assert_int_equal(netWaitReq(N, r, &n), collRemoteError);
  assert_non_null(strstr(collGetLastError(NULL), "peer sent 1048576 bytes, receiver posted 524288"));
  for (size_t i = 0; i < small + 64; i++) assert_int_equal(in[i], 0xEE);
  assert_int_equal(netWaitReq(N, s, &n), collRemoteError);
  assert_non_null(strstr(collGetLastError(NULL), "posted a 524288-byte receive for a 1048576-byte message"));
  free(out);
  free(in);
  netClosePair(N, &q);
}

/* Sender closes: messages sent before are still delivered, then the pending
 * receive fails with collRemoteError. */
static void test_peer_close_recv(void** st) {
  (void)st;
  netPair_t q;
  netMakePair(N, &q);
  uint8_t out[3][100], in[16];
  size_t n;
  for (int k = 0; k < 3; k++) {
    netFill(out[k], 100, (unsigned)k + 50);
    assert_int_equal(netWaitReq(N, netPost(N, q.send, 1, out[k], 100), &n), collSuccess);
  }
  assert_int_equal(N->closeSend(q.send), collSuccess);
  for (int k = 0; k < 3; k++) {
    uint8_t b[100];
    assert_int_equal(netWaitReq(N, netPost(N, q.recv, 0, b, 100), &n), collSuccess);
    assert_true(netCheck(b, 100, (unsigned)k + 50));
  }
  void* r = netPost(N, q.recv, 0, in, sizeof in);
  int lost = 0;
  assert_int_equal(netWaitPoll(N, q.recv, r, &n, 0, &lost), collRemoteError);
  assert_int_equal(lost, 0);
  assert_non_null(strstr(collGetLastError(NULL), "closed the shared-memory connection"));
  assert_int_equal(N->closeRecv(q.recv), collSuccess);
  assert_int_equal(N->closeListen(q.listen), collSuccess);
}

/* Receiver closes: the next sends (100 bytes and 1 MiB in turn) fail with
 * collRemoteError (no SIGPIPE). */
static void test_peer_close_send(void** st) {
  (void)st;
  netTestPeerCloseSend(N, 100, "closed the shared-memory connection");
}

/* ---- wake-ups ------------------------------------------------------------ */

typedef struct {
  void* comm;
  void* req;
  int isSend;
  double waited; /* seconds from start to done */
  collResult_t r;
  int countLost; /* 1: lost wake-ups go to lost; 0: one fails the wait (r) */
  int lost;
} sleeper_t;

/* Waits for one request only through poll() on the comm's fd. */
static void* sleeperThread(void* arg) {
  sleeper_t* s = arg;
  double t0 = collTimeNow();
  int lost = 0;
  size_t n;
  s->r = netWaitPoll(N, s->comm, s->req, &n, s->isSend, &lost);
  s->waited = collTimeNow() - t0;
  s->lost = lost;
  if (lost && !s->countLost) s->r = collInternalError;
  return NULL;
}

/* A receiver asleep in poll wakes when data arrives; a sender asleep on a
 * full ring wakes when a slot is freed; a single-copy sender wakes on the
 * receiver's ack. Each peer acts 100 ms after the sleeper went to sleep. */
static void test_wakeups(void** st) {
  (void)st;
  netPair_t q;
  netMakePair(N, &q);
  uint8_t buf[64] = {0};
  pthread_t t;
  size_t n;
  /* receiver sleeps */
  sleeper_t s = {q.recv, netPost(N, q.recv, 0, buf, sizeof buf), 0, 0, collInternalError, 0, 0};
  assert_int_equal(pthread_create(&t, NULL, sleeperThread, &s), 0);
  usleep(100000);
  assert_int_equal(netWaitReq(N, netPost(N, q.send, 1, buf, 8), &n), collSuccess);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(s.r, collSuccess);
  assert_true(s.waited < 0.9);
  /* sender sleeps on a full ring */
  void* sent[COLL_SHM_NSLOTS];
  for (int k = 0; k < COLL_SHM_NSLOTS; k++) assert_int_equal(netWaitReq(N, sent[k] = netPost(N, q.send, 1, buf, 8), &n), collSuccess);
  s = (sleeper_t){q.send, netPost(N, q.send, 1, buf, 8), 1, 0, collInternalError, 0, 0};
  assert_int_equal(pthread_create(&t, NULL, sleeperThread, &s), 0);
  usleep(100000);
  assert_int_equal(netWaitReq(N, netPost(N, q.recv, 0, buf, sizeof buf), &n), collSuccess);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(s.r, collSuccess);
  assert_true(s.waited < 0.9);
  for (int k = 0; k < COLL_SHM_NSLOTS; k++) assert_int_equal(netWaitReq(N, netPost(N, q.recv, 0, buf, sizeof buf), &n), collSuccess);
  /* single-copy sender sleeps until the receiver read the message */
  const size_t big = 1u << 20;
  uint8_t* out = malloc(big);
  uint8_t* in = malloc(big);
  netFill(out, big, 9);
  s = (sleeper_t){q.send, netPost(N, q.send, 1, out, big), 1, 0, collInternalError, 0, 0};
  assert_int_equal(pthread_create(&t, NULL, sleeperThread, &s), 0);
  usleep(100000);
  assert_int_equal(netWaitReq(N, netPost(N, q.recv, 0, in, big), &n), collSuccess);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(s.r, collSuccess);
  assert_true(s.waited < 0.9);
  assert_true(netCheck(in, big, 9));
  free(out);
  free(in);
  netClosePair(N, &q);
}

/* netWaitPoll's lost wake-up count (the streams here fail on any): a peer
 * that does not run for 1.5 s (a loaded machine) is no lost wake-up; a peer
 * that moves without waking the sleeper (its sleeping flag cleared behind
 * the transport's back) is one. */
typedef struct {
  void* comm;
  double delay;
} lateSend_t;

static void* lateSend(void* arg) {
  lateSend_t* a = arg;
  usleep((useconds_t)(a->delay * 1e6));
  uint8_t b[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  size_t n;
  if (netWaitReq(N, netPost(N, a->comm, 1, b, sizeof b), &n) != collSuccess) return (void*)1;
  return NULL;
}

static void test_lost_wakeup_count(void** st) {
  (void)st;
  netPair_t q;
  netMakePair(N, &q);
  uint8_t buf[64];
  size_t n = 0;
  int lost = 0;
  pthread_t t;
  void* tr = NULL;
  /* a sender that is late by 1.5 s: the wait's poll times out once, nothing is lost */
  lateSend_t a = {q.send, 1.5};
  assert_int_equal(pthread_create(&t, NULL, lateSend, &a), 0);
  assert_int_equal(netWaitPoll(N, q.recv, netPost(N, q.recv, 0, buf, sizeof buf), &n, 0, &lost), collSuccess);
  assert_int_equal(pthread_join(t, &tr), 0);
  assert_null(tr);
  assert_int_equal(n, 8);
  assert_int_equal(lost, 0);
  /* a wake-up that is really lost: once the receiver sleeps (its flag set
   * by the arm, and 100 ms more: it is in poll), the flag is cleared, so the
   * sender publishes without writing the eventfd. (A receiver preempted
   * between its arm and its poll for those 100 ms sees the message at once:
   * tried again, up to 3 times.) */
  shmComm* rc = q.recv;
  sleeper_t w;
  for (int attempt = 0; attempt < 3; attempt++) {
    w = (sleeper_t){q.recv, netPost(N, q.recv, 0, buf, sizeof buf), 0, 0, collInternalError, 1, 0};
    assert_int_equal(pthread_create(&t, NULL, sleeperThread, &w), 0);
    for (int i = 0; i < 5000 && !atomic_load(&rc->hdr->recvSleeping); i++) usleep(1000);
    usleep(100000);
    atomic_store(&rc->hdr->recvSleeping, 0);
    a.delay = 0;
    assert_null(lateSend(&a));
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(w.r, collSuccess);
    if (w.lost) break;
  }
  assert_int_equal(w.lost, 1);
  netClosePair(N, &q);
}

/* ---- between processes --------------------------------------------------- */

typedef struct {
  char handle[COLL_NET_HANDLE_BYTES]; /* the parent's listen handle */
  int expectCma;                      /* 1: single copy must be used; 0: must not; -1: either */
} xargs_t;

/* Child of test_fork_exchange: sends the size list and a 300-message mix to
 * the parent, then receives both from the parent over its own listener. */
static int exchangeChild(void* arg, int wr) {
  xargs_t* x = arg;
  char mine[COLL_NET_HANDLE_BYTES];
  void *l = NULL, *s = NULL, *r = NULL;
  if (N->listen(0, mine, &l) != collSuccess || write(wr, mine, sizeof mine) != (ssize_t)sizeof mine) return 2;
  if (N->connect(0, x->handle, &s) != collSuccess) return 3;
  if (!(r = netAcceptOne(N, l))) return 4;
  netStream_t tx = shmStream(s, NSIZES, kSizes, 100), tx2 = shmStream(s, 300, NULL, 200);
  netStream_t rx = shmStream(r, NSIZES, kSizes, 300), rx2 = shmStream(r, 300, NULL, 400);
  netSendStream(&tx);
  netSendStream(&tx2);
  netRecvStream(&rx);
  netRecvStream(&rx2);
  if (tx.errors || tx2.errors || rx.errors || rx2.errors) return 5;
  if (tx.lostWakeups + tx2.lostWakeups + rx.lostWakeups + rx2.lostWakeups) return 6;
  collShmStats st;
  collShmGetStats(r, &st);
  if (x->expectCma == 1 && (st.cmaMsgs != 3 + 6 || !st.cmaEnabled)) return 7;
  if (x->expectCma == 0 && st.cmaMsgs != 0) return 7;
  if (st.peerPid != (int)getppid()) return 8;
  N->closeSend(s);
  N->closeRecv(r);
  N->closeListen(l);
  return 0;
}

/* Both directions between this process and a child, while this process
 * runs its side on two threads (receive from the child here, send to it
 * from a thread). */
static void forkExchange(int expectCma) {
  xargs_t x = {{0}, expectCma};
  void* l = NULL;
  assert_int_equal(N->listen(0, x.handle, &l), collSuccess);
  int rd;
  pid_t pid = forkChild(exchangeChild, &x, &rd);
  char childHandle[COLL_NET_HANDLE_BYTES];
  assert_int_equal(readAll(rd, childHandle, sizeof childHandle), 0);
  close(rd);
  void* s = NULL;
  assert_int_equal(N->connect(0, childHandle, &s), collSuccess);
  void* r = netAcceptOne(N, l);
  assert_non_null(r);
  netStream_t tx = shmStream(s, NSIZES, kSizes, 300), tx2 = shmStream(s, 300, NULL, 400);
  netStream_t rx = shmStream(r, NSIZES, kSizes, 100), rx2 = shmStream(r, 300, NULL, 200);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, netSendStream, &tx), 0);
  netRecvStream(&rx);
  netRecvStream(&rx2);
  assert_int_equal(pthread_join(t, NULL), 0);
  netSendStream(&tx2);
  assert_int_equal(tx.errors + tx2.errors + rx.errors + rx2.errors, 0);
  assert_int_equal(tx.lostWakeups + tx2.lostWakeups + rx.lostWakeups + rx2.lostWakeups, 0);
  assert_int_equal(reap(pid), 0);
  collShmStats st;
  collShmGetStats(r, &st);
  assert_int_equal(st.peerPid, pid);
  if (expectCma == 1) {
    assert_int_equal(st.cmaMsgs, 3 + 6); /* 1 MiB+3, 16 MiB, 300000; 6 of the mix */
    assert_int_equal(st.cmaEnabled, 1);
  } else if (expectCma == 0) {
    assert_int_equal(st.cmaMsgs, 0);
  }
  assert_int_equal(st.cmaMsgs + st.copyMsgs, NSIZES + 300);
  collShmGetStats(s, &st);
  if (expectCma >= 0) assert_int_equal(st.cmaMsgs, expectCma ? 3 + 6 : 0);
  assert_int_equal(N->closeSend(s), collSuccess);
  assert_int_equal(N->closeRecv(r), collSuccess);
  assert_int_equal(N->closeListen(l), collSuccess);
}

static void test_fork_exchange(void** st) {
  (void)st;
  forkExchange(1);
}

/* Three single-copy-sized messages in a row, then small ones behind them. */
static const size_t kEpermSizes[] = {(1u << 20) + 3, 16u << 20, 300000, 7, 0, 65536, 2u << 20};
#define NEPERM ((int)(sizeof kEpermSizes / sizeof kEpermSizes[0]))

/* Child of test_cma_eperm: drops CAP_SYS_PTRACE, then (once the parent has
 * posted every send, so several CMA descriptors wait in the ring) receives
 * from the parent, which made itself non-dumpable: process_vm_readv fails
 * with EPERM and everything must arrive by copy, in order. */
static int epermChild(void* arg, int wr) {
  int go = *(int*)arg;
  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct d[2];
  if (syscall(SYS_capget, &h, d) == 0) {
    for (int i = 0; i < 2; i++) d[i].effective = d[i].permitted = d[i].inheritable = 0;
    if (syscall(SYS_capset, &h, d) != 0) return 2;
  }
  char mine[COLL_NET_HANDLE_BYTES];
  void *l = NULL, *r = NULL;
  if (N->listen(0, mine, &l) != collSuccess || write(wr, mine, sizeof mine) != (ssize_t)sizeof mine) return 3;
  if (!(r = netAcceptOne(N, l))) return 4;
  char c;
  if (read(go, &c, 1) != 1) return 5;
  netStream_t rx = shmStream(r, NEPERM, kEpermSizes, 500);
  netRecvStream(&rx);
  if (rx.errors) return 6;
  collShmStats st;
  collShmGetStats(r, &st);
  if (st.cmaMsgs != 0 || st.cmaEnabled || st.copyMsgs != (unsigned long long)NEPERM) return 7;
  N->closeRecv(r);
  N->closeListen(l);
  return 0;
}

static void test_cma_eperm_fallback(void** st) {
  (void)st;
  int go[2], rd;
  assert_int_equal(pipe(go), 0);
  pid_t pid = forkChild(epermChild, &go[0], &rd);
  close(go[0]);
  assert_int_equal(prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), 0);
  char childHandle[COLL_NET_HANDLE_BYTES];
  assert_int_equal(readAll(rd, childHandle, sizeof childHandle), 0);
  close(rd);
  void* s = NULL;
  assert_int_equal(N->connect(0, childHandle, &s), collSuccess);
  uint8_t* bufs[NEPERM];
  void* reqs[NEPERM];
  for (int k = 0; k < NEPERM; k++) {
    bufs[k] = malloc(kEpermSizes[k] + 1);
    netFill(bufs[k], kEpermSizes[k], 500u + (unsigned)k);
    reqs[k] = netPost(N, s, 1, bufs[k], kEpermSizes[k]);
  }
  assert_int_equal(write(go[1], "g", 1), 1);
  close(go[1]);
  int errors = 0, lost = 0;
  for (int k = 0; k < NEPERM; k++) {
    size_t n = 0;
    if (!reqs[k] || netWaitPoll(N, s, reqs[k], &n, 1, &lost) != collSuccess || n != kEpermSizes[k]) errors++;
    free(bufs[k]);
  }
  int rc = reap(pid);
  assert_int_equal(prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), 0);
  assert_int_equal(errors, 0);
  assert_int_equal(lost, 0);
  assert_int_equal(rc, 0);
  collShmStats sst;
  collShmGetStats(s, &sst);
  assert_int_equal(sst.cmaEnabled, 0);
  assert_int_equal(sst.cmaMsgs, 0);
  assert_int_equal(sst.copyMsgs, NEPERM);
  assert_int_equal(N->closeSend(s), collSuccess);
}

/* Child of test_killed_sender: connects, sends one message, then waits to
 * be killed. */
static int killedSenderChild(void* arg, int wr) {
  const char* handle = arg;
  void* s = NULL;
  uint8_t b[32];
  netFill(b, sizeof b, 77);
  size_t n;
  if (N->connect(0, handle, &s) != collSuccess || netWaitReq(N, netPost(N, s, 1, b, sizeof b), &n) != collSuccess) return 2;
  if (write(wr, "k", 1) != 1) return 3;
  for (;;) pause();
}

/* The sender process dies (SIGKILL) while this side waits for its next
 * message: collRemoteError within a couple of seconds. */
static void test_killed_sender(void** st) {
  (void)st;
  char handle[COLL_NET_HANDLE_BYTES];
  void* l = NULL;
  assert_int_equal(N->listen(0, handle, &l), collSuccess);
  int rd;
  pid_t pid = forkChild(killedSenderChild, handle, &rd);
  void* r = netAcceptOne(N, l);
  assert_non_null(r);
  char c;
  assert_int_equal(read(rd, &c, 1), 1);
  close(rd);
  uint8_t b[64];
  size_t n;
  assert_int_equal(netWaitReq(N, netPost(N, r, 0, b, sizeof b), &n), collSuccess);
  assert_true(netCheck(b, 32, 77));
  void* req = netPost(N, r, 0, b, sizeof b);
  assert_non_null(req);
  kill(pid, SIGKILL);
  double t0 = collTimeNow();
  assert_int_equal(netWaitPoll(N, r, req, &n, 0, NULL), collRemoteError);
  assert_true(collTimeNow() - t0 < 2.0);
  char pidStr[32];
  snprintf(pidStr, sizeof pidStr, "process %d", (int)pid);
  assert_non_null(strstr(collGetLastError(NULL), pidStr));
  assert_int_equal(reap(pid), 100 + SIGKILL);
  assert_int_equal(N->closeRecv(r), collSuccess);
  assert_int_equal(N->closeListen(l), collSuccess);
}

/* Child of test_killed_receiver: listens, accepts, never receives. */
static int killedReceiverChild(void* arg, int wr) {
  (void)arg;
  char mine[COLL_NET_HANDLE_BYTES];
  void *l = NULL, *r = NULL;
  if (N->listen(0, mine, &l) != collSuccess || write(wr, mine, sizeof mine) != (ssize_t)sizeof mine) return 2;
  if (!(r = netAcceptOne(N, l))) return 3;
  if (write(wr, "a", 1) != 1) return 4;
  for (;;) pause();
}

/* The receiver process dies while this side waits: for the ack of a single
 * copy message, and (second child) for space in a full ring. */
static void killedReceiver(size_t msg, int count) {
  int rd;
  pid_t pid = forkChild(killedReceiverChild, NULL, &rd);
  char childHandle[COLL_NET_HANDLE_BYTES];
  assert_int_equal(readAll(rd, childHandle, sizeof childHandle), 0);
  void* s = NULL;
  assert_int_equal(N->connect(0, childHandle, &s), collSuccess);
  char c;
  assert_int_equal(read(rd, &c, 1), 1);
  close(rd);
  uint8_t* buf = calloc(1, msg);
  void* req[16];
  for (int k = 0; k < count; k++) assert_non_null(req[k] = netPost(N, s, 1, buf, msg));
  int done = 1;
  size_t n;
  assert_int_equal(N->test(req[count - 1], &done, &n, NULL), collSuccess);
  assert_int_equal(done, 0);
  kill(pid, SIGKILL);
  double t0 = collTimeNow();
  assert_int_equal(netWaitPoll(N, s, req[count - 1], &n, 1, NULL), collRemoteError);
  assert_true(collTimeNow() - t0 < 2.0);
  assert_non_null(strstr(collGetLastError(NULL), "shared-memory connection"));
  assert_int_equal(reap(pid), 100 + SIGKILL);
  free(buf);
  assert_int_equal(N->closeSend(s), collSuccess);
}

static void test_killed_receiver(void** st) {
  (void)st;
  killedReceiver(1u << 20, 1);            /* single copy: waits for the ack */
  killedReceiver(1000, COLL_SHM_NSLOTS + 1); /* ring full */
}

/* ---- setup failures ------------------------------------------------------ */

static void test_connect_errors(void** st) {
  (void)st;
  char handle[COLL_NET_HANDLE_BYTES];
  void *l = NULL, *s = (void*)1;
  int fds0 = countFds();
  memset(handle, 0, sizeof handle);
  assert_int_equal(N->connect(0, handle, &s), collInvalidArgument); /* not a shm handle */
  assert_null(s);
  /* a listener that is gone */
  assert_int_equal(N->listen(0, handle, &l), collSuccess);
  assert_int_equal(N->closeListen(l), collSuccess);
  double t0 = collTimeNow();
  assert_int_equal(N->connect(0, handle, &s), collRemoteError);
  assert_true(collTimeNow() - t0 < 1.0);
  assert_null(s);
  assert_int_equal(countFds(), fds0);
  /* no memory for the segment (emulated: the file size limit makes ftruncate fail) */
  assert_int_equal(N->listen(0, handle, &l), collSuccess);
  struct rlimit old, lim;
  assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
  lim = old;
  lim.rlim_cur = 1u << 20;
  void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
  collResult_t r = N->connect(0, handle, &s);
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
  signal(SIGXFSZ, prev);
  assert_int_equal(r, collSystemError);
  assert_null(s);
  assert_non_null(strstr(collGetLastError(NULL), "COLL_SHM_BUFFSIZE"));
  assert_non_null(strstr(collGetLastError(NULL), "4198400 bytes")); /* 8 x 512 KiB + 4 KiB header */
  void* rc = (void*)1;
  assert_int_equal(N->accept(l, &rc), collSuccess); /* nothing arrived */
  assert_null(rc);
  assert_int_equal(N->closeListen(l), collSuccess);
  assert_int_equal(countFds(), fds0);
}

/* Garbage on the listen socket (no descriptors, a short hello, a closed
 * socket) is dropped; a real connection behind it is accepted. */
static void test_accept_drops_garbage(void** st) {
  (void)st;
  char handle[COLL_NET_HANDLE_BYTES];
  void* l = NULL;
  assert_int_equal(N->listen(0, handle, &l), collSuccess);
  uint32_t nameLen;
  memcpy(&nameLen, handle + 12, 4); /* handle: magic, pid, name length, name */
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  memcpy(a.sun_path + 1, handle + 16, nameLen);
  socklen_t al = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + nameLen);
  int g[3];
  for (int i = 0; i < 3; i++) {
    g[i] = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(g[i] >= 0);
    assert_int_equal(connect(g[i], (struct sockaddr*)&a, al), 0);
  }
  char junk[64];
  memset(junk, 0x5a, sizeof junk);
  assert_int_equal(write(g[0], junk, sizeof junk), (ssize_t)sizeof junk); /* no descriptors */
  assert_int_equal(write(g[1], junk, 3), 3);                                /* short, then EOF */
  shutdown(g[1], SHUT_WR);
  close(g[2]); /* nothing at all */
  void* s = NULL;
  assert_int_equal(N->connect(0, handle, &s), collSuccess);
  void* r = netAcceptOne(N, l);
  assert_non_null(r);
  uint8_t out[10], in[10];
  netFill(out, 10, 1);
  size_t n;
  assert_int_equal(netWaitReq(N, netPost(N, s, 1, out, 10), &n), collSuccess);
  assert_int_equal(netWaitReq(N, netPost(N, r, 0, in, 10), &n), collSuccess);
  assert_true(netCheck(in, 10, 1));
  close(g[0]);
  close(g[1]);
  assert_int_equal(N->closeSend(s), collSuccess);
  assert_int_equal(N->closeRecv(r), collSuccess);
  assert_int_equal(N->closeListen(l), collSuccess);
}

/* Runs last: nothing of ours appeared in /dev/shm and no descriptor leaked. */
static void test_no_leftovers(void** st) {
  (void)st;
  assert_int_equal(ownDevShm(), gDevShmBefore);
  assert_int_equal(countFds(), gFdsBefore);
}

/* ---- COLL_SHM_CMA_THRESHOLD=0 (re-executed child) ------------------------ */

static void test_cma_off_child(void** st) {
  (void)st;
  netPair_t q;
  netMakePair(N, &q);
  netRunStream(N, &kOpts, &q, NSIZES, kSizes, 30);
  netRunStream(N, &kOpts, &q, 200, NULL, 40);
  collShmStats s;
  collShmGetStats(q.recv, &s);
  assert_int_equal(s.cmaMsgs, 0);
  assert_int_equal(s.copyMsgs, NSIZES + 200);
  netClosePair(N, &q);
  forkExchange(0);
}

/* COLL_SHM_CMA_THRESHOLD unset: the calibrated choice (either) still
 * delivers everything. */
static void test_cma_auto_child(void** st) {
  (void)st;
  assert_int_equal(N->init(NULL), collSuccess);
  netPair_t q;
  netMakePair(N, &q);
  netRunStream(N, &kOpts, &q, NSIZES, kSizes, 50);
  netClosePair(N, &q);
  forkExchange(-1);
}

/* Re-executes this test binary with COLL_SHM_CMA_THRESHOLD set to value
 * (NULL: unset) running the group named by flag. */
static void reexec(const char* flag, const char* value) {
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    if (value) setenv("COLL_SHM_CMA_THRESHOLD", value, 1);
    else unsetenv("COLL_SHM_CMA_THRESHOLD");
    execl("/proc/self/exe", "test_shm", flag, (char*)NULL);
    _exit(127);
  }
  assert_int_equal(reap(pid), 0);
}

static void test_cma_off(void** st) {
  (void)st;
  reexec("--cma-off-child", "0");
}

static void test_cma_auto(void** st) {
  (void)st;
  reexec("--cma-auto-child", NULL);
}

int main(int argc, char** argv) {
  alarm(240); /* watchdog: every test is bounded */
  unsetenv("COLL_SHM_BUFFSIZE");
  if (argc > 1 && strcmp(argv[1], "--cma-off-child") == 0) {
    const struct CMUnitTest child[] = {cmocka_unit_test(test_cma_off_child)};
    return cmocka_run_group_tests_name("shm_cma_off", child, NULL, NULL);
  }
  if (argc > 1 && strcmp(argv[1], "--cma-auto-child") == 0) {
    const struct CMUnitTest child[] = {cmocka_unit_test(test_cma_auto_child)};
    return cmocka_run_group_tests_name("shm_cma_auto", child, NULL, NULL);
  }
  setenv("COLL_SHM_CMA_THRESHOLD", "262144", 1); /* single copy on, whatever this machine's calibration says */
  gDevShmBefore = ownDevShm();
  gFdsBefore = countFds();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_properties_and_stubs),
      cmocka_unit_test(test_sizes_threads),
      cmocka_unit_test(test_many_in_flight),
      cmocka_unit_test(test_test_drives_earlier),
      cmocka_unit_test(test_tags),
      cmocka_unit_test(test_pool_exhaustion),
      cmocka_unit_test(test_oversize_copy),
      cmocka_unit_test(test_oversize_cma),
      cmocka_unit_test(test_peer_close_recv),
      cmocka_unit_test(test_peer_close_send),
      cmocka_unit_test(test_wakeups),
      cmocka_unit_test(test_lost_wakeup_count),
      cmocka_unit_test(test_fork_exchange),
      cmocka_unit_test(test_cma_eperm_fallback),
      cmocka_unit_test(test_killed_sender),
      cmocka_unit_test(test_killed_receiver),
      cmocka_unit_test(test_connect_errors),
      cmocka_unit_test(test_accept_drops_garbage),
      cmocka_unit_test(test_cma_off),
      cmocka_unit_test(test_cma_auto),
      cmocka_unit_test(test_no_leftovers),
  };
  return cmocka_run_group_tests_name("shm", tests, NULL, NULL);
}
