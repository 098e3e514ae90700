/*
 * test_tcp.c - socket helpers and the tcp transport over loopback only.
 *
 * COLL_SOCKET_IFNAME=lo is set first thing in main. Parameters are cached
 * once per process, so the COLL_NSOCKS_PERTHREAD=4 (striping) cases run in a
 * re-executed child (/proc/self/exe --stripe-child) with that variable set.
 * alarm() bounds the whole run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "misc/log.h"
#include "misc/socket.h"
#include "transports/tcp/tcp.h"

static const collNet_v1_t* N = &collNetTcp;

/* Byte i of message `seed`. */
static uint8_t pat(size_t i, unsigned seed) { return (uint8_t)(i * 131u + seed * 7u + (i >> 9)); }

static void fill(uint8_t* b, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) b[i] = pat(i, seed);
}

static int check(const uint8_t* b, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    if (b[i] != pat(i, seed)) return 0;
  return 1;
}

typedef struct {
  void* listen;
  void* send;
  void* recv;
} pair_t;

/* listen + connect + accept (accept polled until the connection shows up). */
static void makePair(pair_t* p) {
  char handle[COLL_NET_HANDLE_BYTES];
  assert_int_equal(N->listen(0, handle, &p->listen), collSuccess);
  assert_non_null(p->listen);
  assert_int_equal(N->connect(0, handle, &p->send), collSuccess);
  assert_non_null(p->send);
  p->recv = NULL;
  for (int i = 0; i < 5000 && !p->recv; i++) {
    assert_int_equal(N->accept(p->listen, &p->recv), collSuccess);
    if (!p->recv) usleep(1000);
  }
  assert_non_null(p->recv);
}

static void closePair(pair_t* p) {
  assert_int_equal(N->closeSend(p->send), collSuccess);
  assert_int_equal(N->closeRecv(p->recv), collSuccess);
  assert_int_equal(N->closeListen(p->listen), collSuccess);
}

/* Tests req until done; returns the final result (size into *size). */
static collResult_t waitReq(void* req, size_t* size) {
  int done = 0;
  for (;;) {
    collResult_t r = N->test(req, &done, size);
    if (r != collSuccess || done) return r;
  }
}

/* Posts with retry while the pool is exhausted. */
static void* post(void* comm, int isSend, void* buf, size_t n) {
  void* req = NULL;
  while (!req) {
    collResult_t r = isSend ? N->isend(comm, buf, n, NULL, &req) : N->irecv(comm, buf, n, NULL, &req);
    assert_int_equal(r, collSuccess);
  }
  return req;
}

/* A stream of messages: size of message k and whether to keep many in flight. */
typedef struct {
  void* comm;
  int count;
  const size_t* sizes; /* NULL: sizeFn */
  unsigned seed0;
  int ok;
} stream_t;

static size_t streamSize(const stream_t* s, int k) {
  if (s->sizes) return s->sizes[k];
  if (k % 50 == 49) return 200000 + (size_t)k; /* striped when nsocks > 1 */
  return ((size_t)k * 37u) % 5000u;
}

/* Sender: up to 64 messages in flight, completion tested in FIFO order. */
static void* senderThread(void* arg) {
  stream_t* s = arg;
  enum { W = 64 };
  void* reqs[W];
  uint8_t* bufs[W];
  int head = 0;
  s->ok = 1;
  for (int k = 0; k < s->count; k++) {
    if (k - head == W) {
      size_t n = 0;
      if (waitReq(reqs[head % W], &n) != collSuccess || n != streamSize(s, head)) s->ok = 0;
      free(bufs[head % W]);
      head++;
    }
    size_t n = streamSize(s, k);
    bufs[k % W] = malloc(n ? n : 1);
    fill(bufs[k % W], n, s->seed0 + (unsigned)k);
    reqs[k % W] = NULL;
    while (!reqs[k % W])
      if (N->isend(s->comm, bufs[k % W], n, NULL, &reqs[k % W]) != collSuccess) { s->ok = 0; return NULL; }
  }
  for (; head < s->count; head++) {
    size_t n = 0;
    if (waitReq(reqs[head % W], &n) != collSuccess || n != streamSize(s, head)) s->ok = 0;
    free(bufs[head % W]);
  }
  return NULL;
}

/* Waits for received message k of stream s and checks every byte plus the
 * 8 guard bytes behind the posted size. */
static void finishRecv(stream_t* s, void* req, uint8_t* buf, int k) {
  size_t n = 99, want = streamSize(s, k);
  assert_int_equal(waitReq(req, &n), collSuccess);
  assert_int_equal(n, want);
  assert_true(check(buf, want, s->seed0 + (unsigned)k));
  for (int g = 0; g < 8; g++) assert_int_equal(buf[want + (size_t)g], 0xEE);
  free(buf);
}

/* Receiver side of a stream on the calling thread, up to 64 posted. */
static void receiveStream(stream_t* s) {
  enum { W = 64 };
  void* reqs[W];
  uint8_t* bufs[W];
  int head = 0;
  for (int k = 0; k < s->count; k++) {
    if (k - head == W) { finishRecv(s, reqs[head % W], bufs[head % W], head); head++; }
    size_t n = streamSize(s, k);
    bufs[k % W] = malloc(n + 8);
    memset(bufs[k % W], 0xEE, n + 8);
    reqs[k % W] = post(s->comm, 0, bufs[k % W], n);
  }
  for (; head < s->count; head++) finishRecv(s, reqs[head % W], bufs[head % W], head);
}

/* Runs a sender thread and the receiver here over pair p. */
static void runStream(pair_t* p, int count, const size_t* sizes, unsigned seed) {
  stream_t tx = {p->send, count, sizes, seed, 0}, rx = {p->recv, count, sizes, seed, 0};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, senderThread, &tx), 0);
  receiveStream(&rx);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(tx.ok, 1);
}

/* ---- socket helpers ---------------------------------------------------- */

static void test_ifmatch(void** st) {
  (void)st;
  assert_int_equal(collSocketIfMatch("eth", "eth0"), 1);
  assert_int_equal(collSocketIfMatch("eth", "ens0"), 0);
  assert_int_equal(collSocketIfMatch("^docker", "docker0"), 0);
  assert_int_equal(collSocketIfMatch("^docker", "eth0"), 1);
  assert_int_equal(collSocketIfMatch("=eth0", "eth0"), 1);
  assert_int_equal(collSocketIfMatch("=eth0", "eth01"), 0);
  assert_int_equal(collSocketIfMatch("=eth0", "eth"), 0);
  assert_int_equal(collSocketIfMatch("eth,ib", "ib0"), 1);
  assert_int_equal(collSocketIfMatch("eth,ib", "lo"), 0);
  assert_int_equal(collSocketIfMatch("^docker,lo", "lo"), 0);
  assert_int_equal(collSocketIfMatch("^docker,lo", "eth1"), 1);
  assert_int_equal(collSocketIfMatch("=eth0,lo", "lo"), 1);
  assert_int_equal(collSocketIfMatch("=eth0,lo", "lo1"), 0);
  assert_int_equal(collSocketIfMatch("^=eth0", "eth0"), 0);
  assert_int_equal(collSocketIfMatch("^=eth0", "eth01"), 1);
}

static void test_parse_addr(void** st) {
  (void)st;
  collSockAddr a;
  char s[80];
  assert_int_equal(collSocketParseAddr("127.0.0.1:1234", &a), collSuccess);
  assert_int_equal(a.sa.sa_family, AF_INET);
  assert_int_equal(ntohl(a.sin.sin_addr.s_addr), 0x7f000001u);
  assert_int_equal(ntohs(a.sin.sin_port), 1234);
  assert_string_equal(collSockAddrStr(&a, s, sizeof s), "127.0.0.1:1234");
  assert_int_equal(collSockAddrLen(&a), sizeof(struct sockaddr_in));
  assert_int_equal(collSocketParseAddr("[::1]:80", &a), collSuccess);
  assert_int_equal(a.sa.sa_family, AF_INET6);
  assert_true(IN6_IS_ADDR_LOOPBACK(&a.sin6.sin6_addr));
  assert_int_equal(ntohs(a.sin6.sin6_port), 80);
  assert_string_equal(collSockAddrStr(&a, s, sizeof s), "[::1]:80");
  assert_int_equal(collSockAddrLen(&a), sizeof(struct sockaddr_in6));
  assert_int_equal(collSocketParseAddr("localhost:5", &a), collSuccess); /* IPv4 preferred */
  assert_string_equal(collSockAddrStr(&a, s, sizeof s), "127.0.0.1:5");
  const char* bad[] = {"127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "::1:80",
                       "[::1]80", "[::1]", ":80", "127.0.0.1:8x"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_equal(collSocketParseAddr(bad[i], &a), collInvalidArgument);
  assert_int_equal(collSocketParseAddr(NULL, &a), collInvalidArgument);
}

static void test_find_interface_lo(void** st) {
  (void)st;
  collSockAddr a;
  char name[32];
  assert_int_equal(collSocketFindInterface(&a, name, sizeof name), collSuccess);
  assert_string_equal(name, "lo");
  char s[80];
  assert_string_equal(collSockAddrStr(&a, s, sizeof s), "127.0.0.1:0");
}

/* listen/connect/accept with the helpers, both-sides-send exchange, timeout,
 * abort flag and peer close. */
typedef struct { int fd; uint8_t* out; uint8_t* in; size_t n; collResult_t r; } xchg_t;
static void* xchgThread(void* arg) {
  xchg_t* x = arg;
  x->r = collSocketSendRecv(x->fd, x->out, x->n, x->fd, x->in, x->n, collTimeNow() + 30, NULL);
  return NULL;
}

static void test_socket_helpers(void** st) {
  (void)st;
  collSockAddr a;
  int lfd, cfd, afd;
  assert_int_equal(collSocketParseAddr("127.0.0.1:0", &a), collSuccess);
  assert_int_equal(collSocketListen(&a, &lfd), collSuccess);
  assert_int_not_equal(ntohs(a.sin.sin_port), 0);
  assert_int_equal(collSocketConnect(&a, &cfd, collTimeNow() + 5, NULL), collSuccess);
  assert_int_equal(collSocketAccept(lfd, &afd, collTimeNow() + 5, NULL), collSuccess);
  const size_t n = 4u << 20; /* larger than the socket buffers: needs concurrency */
  xchg_t x1 = {cfd, malloc(n), malloc(n), n, collInternalError};
  xchg_t x2 = {afd, malloc(n), malloc(n), n, collInternalError};
  fill(x1.out, n, 1);
  fill(x2.out, n, 2);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, xchgThread, &x1), 0);
  xchgThread(&x2);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(x1.r, collSuccess);
  assert_int_equal(x2.r, collSuccess);
  assert_true(check(x1.in, n, 2));
  assert_true(check(x2.in, n, 1));
  uint8_t b[4];
  double t0 = collTimeNow();
  assert_int_equal(collSocketRecvAll(afd, b, 4, t0 + 0.2, NULL), collTimeout);
  assert_true(collTimeNow() - t0 >= 0.19);
  volatile int abortFlag = 1;
  assert_int_equal(collSocketRecvAll(afd, b, 4, 0, &abortFlag), collRemoteError);
  assert_int_equal(collSocketSendAll(cfd, "abcd", 4, collTimeNow() + 5, NULL), collSuccess);
  assert_int_equal(collSocketRecvAll(afd, b, 4, collTimeNow() + 5, NULL), collSuccess);
  assert_memory_equal(b, "abcd", 4);
  close(cfd);
  assert_int_equal(collSocketRecvAll(afd, b, 4, collTimeNow() + 5, NULL), collRemoteError);
  assert_non_null(strstr(collGetLastError(NULL), "closed by peer"));
  assert_non_null(strstr(collGetLastError(NULL), "127.0.0.1:"));
  close(afd);
  close(lfd);
  free(x1.out); free(x1.in); free(x2.out); free(x2.in);
}

/* A refused connection is retried until the deadline, then collTimeout. */
static void test_connect_refused_deadline(void** st) {
  (void)st;
  collSockAddr a;
  int lfd, fd = -1;
  assert_int_equal(collSocketParseAddr("127.0.0.1:0", &a), collSuccess);
  assert_int_equal(collSocketListen(&a, &lfd), collSuccess);
  close(lfd); /* the port is now closed */
  double t0 = collTimeNow();
  assert_int_equal(collSocketConnect(&a, &fd, t0 + 0.3, NULL), collTimeout);
  double dt = collTimeNow() - t0;
  assert_true(dt >= 0.29 && dt < 2.0);
  assert_int_equal(fd, -1);
  assert_non_null(strstr(collGetLastError(NULL), "Connection refused"));
}

/* ---- transport --------------------------------------------------------- */

static void test_properties_and_stubs(void** st) {
  (void)st;
  int ndev = 0;
  collNetProperties_t p;
  assert_int_equal(N->version, COLL_NET_VERSION);
  assert_int_equal(N->size, sizeof(collNet_v1_t));
  assert_string_equal(N->name, "tcp");
  assert_int_equal(N->init(NULL), collSuccess);
  assert_int_equal(N->devices(&ndev), collSuccess);
  assert_int_equal(ndev, 1);
  assert_int_equal(N->getProperties(0, &p), collSuccess);
  assert_string_equal(p.name, "lo");
  assert_true(p.speedGbps == 100.0); /* lo has no readable sysfs speed */
  assert_int_equal(p.ptrSupport, COLL_PTR_HOST);
  assert_int_equal(p.hasPut, 0);
  assert_true(p.maxMessage == SIZE_MAX);
  assert_int_equal(N->getProperties(1, &p), collInvalidArgument);
  pair_t q;
  makePair(&q);
  int fd = -1;
  assert_int_equal(N->getPollFd(q.send, &fd), collSuccess);
  assert_true(fd >= 0);
  void* mh = NULL;
  char buf[8];
  assert_int_equal(N->regMr(q.send, buf, 8, COLL_PTR_HOST, &mh), collSuccess);
  assert_non_null(mh);
  assert_int_equal(N->regMr(q.send, buf, 8, COLL_PTR_CUDA, &mh), collInvalidArgument);
  assert_int_equal(N->deregMr(q.send, mh), collSuccess);
  void* req = (void*)1;
  assert_int_equal(N->iput(q.send, buf, 8, mh, 0, 0, &req), collInvalidUsage);
  req = (void*)1;
  assert_int_equal(N->iflush(q.recv, buf, 8, mh, &req), collSuccess);
  assert_null(req); /* nothing to wait for */
  assert_int_equal(N->isend(q.recv, buf, 8, NULL, &req), collInvalidUsage); /* wrong side */
  closePair(&q);
  assert_int_equal(N->fini(), collSuccess);
}

static void test_sizes(void** st) {
  (void)st;
  static const size_t sizes[] = {0, 1, 8, 65535, (1u << 20) + 3, 65536, 7};
  pair_t q;
  makePair(&q);
  runStream(&q, 7, sizes, 10);
  closePair(&q);
}

static void test_many_in_flight(void** st) {
  (void)st;
  pair_t q;
  makePair(&q);
  runStream(&q, 600, NULL, 1000);
  closePair(&q);
}

/* Testing the last of 8 requests drives the earlier ones; receiving into a
 * larger buffer reports the sent size. */
static void test_test_drives_earlier(void** st) {
  (void)st;
  pair_t q;
  makePair(&q);
  enum { K = 8 };
  uint8_t out[K][3000], in[K][4000];
  void *sr[K], *rr[K];
  for (int k = 0; k < K; k++) {
    fill(out[k], sizeof out[k], (unsigned)k);
    memset(in[k], 0xEE, sizeof in[k]);
    rr[k] = post(q.recv, 0, in[k], sizeof in[k]);
  }
  for (int k = 0; k < K; k++) sr[k] = post(q.send, 1, out[k], 1000 + (size_t)k * 100);
  size_t n = 0;
  assert_int_equal(waitReq(sr[K - 1], &n), collSuccess);
  assert_int_equal(n, 1700);
  assert_int_equal(waitReq(rr[K - 1], &n), collSuccess);
  assert_int_equal(n, 1700);
  for (int k = 0; k < K - 1; k++) {
    int done = 0;
    assert_int_equal(N->test(sr[k], &done, &n), collSuccess);
    assert_int_equal(done, 1);
    assert_int_equal(N->test(rr[k], &done, &n), collSuccess);
    assert_int_equal(done, 1);
    assert_int_equal(n, 1000 + (size_t)k * 100);
  }
  for (int k = 0; k < K; k++) {
    size_t len = 1000 + (size_t)k * 100;
    assert_true(check(in[k], len, (unsigned)k));
    assert_int_equal(in[k][len], 0xEE);
  }
  closePair(&q);
}

/* 64 requests in flight: the 65th isend returns NULL (retry) until one is
 * tested done. */
static void test_pool_exhaustion(void** st) {
  (void)st;
  pair_t q;
  makePair(&q);
  void* r[COLL_TCP_MAX_REQUESTS];
  for (int k = 0; k < COLL_TCP_MAX_REQUESTS; k++) {
    r[k] = NULL;
    assert_int_equal(N->isend(q.send, NULL, 0, NULL, &r[k]), collSuccess);
    assert_non_null(r[k]);
  }
  void* extra = (void*)1;
  assert_int_equal(N->isend(q.send, NULL, 0, NULL, &extra), collSuccess);
  assert_null(extra);
  size_t n = 5;
  assert_int_equal(waitReq(r[0], &n), collSuccess);
  assert_int_equal(n, 0);
  assert_int_equal(N->isend(q.send, NULL, 0, NULL, &extra), collSuccess);
  assert_non_null(extra);
  assert_int_equal(waitReq(extra, &n), collSuccess);
  for (int k = 1; k < COLL_TCP_MAX_REQUESTS; k++) assert_int_equal(waitReq(r[k], &n), collSuccess);
  for (int k = 0; k <= COLL_TCP_MAX_REQUESTS; k++) {
    n = 5;
    assert_int_equal(waitReq(post(q.recv, 0, NULL, 0), &n), collSuccess);
    assert_int_equal(n, 0);
  }
  closePair(&q);
}

/* Sender sends 100 bytes, receiver posted 64: collRemoteError, nothing
 * written into the buffer or the guard bytes behind it. */
static void test_oversize(void** st) {
  (void)st;
  pair_t q;
  makePair(&q);
  uint8_t out[100], in[64 + 16];
  fill(out, sizeof out, 3);
  memset(in, 0xEE, sizeof in);
  void* s = post(q.send, 1, out, sizeof out);
  size_t n = 0;
  assert_int_equal(waitReq(s, &n), collSuccess);
  assert_int_equal(n, 100);
  void* r = post(q.recv, 0, in, 64);
  assert_int_equal(waitReq(r, &n), collRemoteError);
  assert_non_null(strstr(collGetLastError(NULL), "peer sent 100 bytes, receiver posted 64"));
  for (size_t i = 0; i < sizeof in; i++) assert_int_equal(in[i], 0xEE);
  void* again = NULL;
  assert_int_equal(N->irecv(q.recv, in, 64, NULL, &again), collRemoteError); /* sticky */
  assert_null(again);
  closePair(&q);
}

/* Sender closes: the receiver's pending request fails with collRemoteError. */
static void test_peer_close_recv(void** st) {
  (void)st;
  pair_t q;
  makePair(&q);
  uint8_t in[16];
  void* r = post(q.recv, 0, in, sizeof in);
  assert_int_equal(N->closeSend(q.send), collSuccess);
  size_t n;
  assert_int_equal(waitReq(r, &n), collRemoteError);
  assert_non_null(strstr(collGetLastError(NULL), "closed by peer"));
  assert_non_null(strstr(collGetLastError(NULL), "127.0.0.1:"));
  assert_int_equal(N->closeRecv(q.recv), collSuccess);
  assert_int_equal(N->closeListen(q.listen), collSuccess);
}

/* Receiver closes: large sends fail with collRemoteError (no SIGPIPE). */
static void test_peer_close_send(void** st) {
  (void)st;
  pair_t q;
  makePair(&q);
  assert_int_equal(N->closeRecv(q.recv), collSuccess);
  const size_t n = 1u << 20;
  uint8_t* buf = calloc(1, n);
  collResult_t r = collSuccess;
  for (int i = 0; i < 64 && r == collSuccess; i++) {
    size_t sz;
    void* req = NULL;
    r = N->isend(q.send, buf, n, NULL, &req);
    if (r == collSuccess) r = waitReq(req, &sz);
  }
  assert_int_equal(r, collRemoteError);
  free(buf);
  assert_int_equal(N->closeSend(q.send), collSuccess);
  assert_int_equal(N->closeListen(q.listen), collSuccess);
}

/* ---- striping (child process with COLL_NSOCKS_PERTHREAD=4) ------------- */

/* Writes the socket fds of this process into fds (max 64); returns count. */
static int listSockets(int* fds) {
  DIR* d = opendir("/proc/self/fd");
  assert_non_null(d);
  int n = 0;
  struct dirent* e;
  char path[300], target[64];
  while ((e = readdir(d))) {
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    ssize_t l = readlink(path, target, sizeof target - 1);
    if (l > 0 && n < 64) {
      target[l] = 0;
      if (strncmp(target, "socket:", 7) == 0) fds[n++] = atoi(e->d_name);
    }
  }
  closedir(d);
  return n;
}

/* Bytes queued for reading on every socket fd of this process, largest
 * first, into q (zeros dropped); returns how many sockets have data. */
static int queuedBytes(int* q) {
  int fds[64], n = listSockets(fds), m = 0;
  for (int i = 0; i < n; i++) {
    int v = 0;
    if (ioctl(fds[i], FIONREAD, &v) == 0 && v > 0) q[m++] = v;
  }
  for (int i = 0; i < m; i++) /* insertion sort, descending */
    for (int j = i; j > 0 && q[j] > q[j - 1]; j--) { int t = q[j]; q[j] = q[j - 1]; q[j - 1] = t; }
  return m;
}

static void test_stripe_child(void** st) {
  (void)st;
  int fds[64], qb[64];
  int before = listSockets(fds);
  pair_t q;
  makePair(&q);
  assert_int_equal(listSockets(fds), before + 1 + 2 * 4); /* listen + 4 per side */
  /* 160000 bytes >= 64 KiB: 40000 on each socket, plus the header on socket 0 */
  uint8_t* big = malloc(160000);
  fill(big, 160000, 42);
  size_t n = 0;
  assert_int_equal(waitReq(post(q.send, 1, big, 160000), &n), collSuccess);
  int m = 0;
  for (int i = 0; i < 5000; i++) {
    m = queuedBytes(qb);
    int sum = 0;
    for (int j = 0; j < m; j++) sum += qb[j];
    if (sum == 160008) break;
    usleep(1000);
  }
  assert_int_equal(m, 4);
  assert_int_equal(qb[0], 40008);
  assert_int_equal(qb[1], 40000);
  assert_int_equal(qb[2], 40000);
  assert_int_equal(qb[3], 40000);
  memset(big, 0, 160000);
  assert_int_equal(waitReq(post(q.recv, 0, big, 160000), &n), collSuccess);
  assert_int_equal(n, 160000);
  assert_true(check(big, 160000, 42));
  free(big);
  static const size_t sizes[] = {0, 1, 65535, 65536, 65537, (1u << 20) + 3, (4u << 20) + 1, 9};
  runStream(&q, 8, sizes, 20);
  runStream(&q, 300, NULL, 5000);
  /* two connections arriving before either is accepted are grouped apart */
  char handle[COLL_NET_HANDLE_BYTES];
  void *l, *s1, *s2, *r1 = NULL, *r2 = NULL;
  assert_int_equal(N->listen(0, handle, &l), collSuccess);
  assert_int_equal(N->connect(0, handle, &s1), collSuccess);
  assert_int_equal(N->connect(0, handle, &s2), collSuccess);
  for (int i = 0; i < 5000 && !r2; i++) {
    assert_int_equal(N->accept(l, r1 ? &r2 : &r1), collSuccess);
    if (!r2) usleep(1000);
  }
  assert_non_null(r1);
  assert_non_null(r2);
  static const size_t one[] = {300000};
  pair_t a = {l, s1, r1}, b = {NULL, s2, r2};
  runStream(&a, 1, one, 77);
  runStream(&b, 1, one, 88);
  assert_int_equal(N->closeSend(s2), collSuccess);
  assert_int_equal(N->closeRecv(r2), collSuccess);
  closePair(&a);
  closePair(&q);
}

static void test_striping(void** st) {
  (void)st;
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    setenv("COLL_NSOCKS_PERTHREAD", "4", 1);
    execl("/proc/self/exe", "test_tcp", "--stripe-child", (char*)NULL);
    _exit(127);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

int main(int argc, char** argv) {
  setenv("COLL_SOCKET_IFNAME", "lo", 1);
  unsetenv("COLL_SOCKET_FAMILY");
  alarm(240); /* watchdog: every test is bounded */
  if (argc > 1 && strcmp(argv[1], "--stripe-child") == 0) {
    const struct CMUnitTest child[] = {cmocka_unit_test(test_stripe_child)};
    return cmocka_run_group_tests_name("tcp_stripe_nsocks4", child, NULL, NULL);
  }
  unsetenv("COLL_NSOCKS_PERTHREAD");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ifmatch),
      cmocka_unit_test(test_parse_addr),
      cmocka_unit_test(test_find_interface_lo),
      cmocka_unit_test(test_socket_helpers),
      cmocka_unit_test(test_connect_refused_deadline),
      cmocka_unit_test(test_properties_and_stubs),
      cmocka_unit_test(test_sizes),
      cmocka_unit_test(test_many_in_flight),
      cmocka_unit_test(test_test_drives_earlier),
      cmocka_unit_test(test_pool_exhaustion),
      cmocka_unit_test(test_oversize),
      cmocka_unit_test(test_peer_close_recv),
      cmocka_unit_test(test_peer_close_send),
      cmocka_unit_test(test_striping),
  };
  return cmocka_run_group_tests_name("tcp", tests, NULL, NULL);
}
