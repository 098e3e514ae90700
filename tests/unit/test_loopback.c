/*
 * test_loopback.c - the in-process loopback transport: first its operations
 * table directly (FIFO matching, sizes, eager and rendezvous, retry when the
 * ring is full, close semantics, poll fds, foreign handles, two threads), then
 * every collective through the real engine with N ranks as threads of this
 * process (N = 1, 2, 3, 5, 8; counts 0, 1, 13, 100003), then injected faults
 * (a connection dropped mid-collective, delayed messages) and an oversize
 * receive.
 *
 * main sets COLL_NET=loopback and COLL_SOCKET_IFNAME=lo (the bootstrap still
 * uses TCP on lo; only the data path is in-process), COLL_SHM_DISABLE=1 (all
 * ranks share a node, so shared memory would otherwise carry the data) and
 * COLL_CHUNKSIZE=4096, so 100003 elements span many slices; parameters are
 * cached on first use, hence before any coll call. alarm() bounds the run.
 *
 * Rank r contributes (r+1)*(i%97+1) to element i (i%4 for bfloat16, so every
 * partial sum is exact; prod uses +-1/2 for floats), results are compared
 * exactly, and receive buffers carry guard bytes that must stay untouched.
 * Rank threads never call cmocka asserts: they record the first API failure
 * (then abort their comm so peers do not wait) and the first wrong value;
 * the main thread asserts on those.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll.h"
#include "misc/socket.h"
#include "reduce/reduce.h"
#include "transports/loopback/loopback.h"
#include "net_testlib.h"

static const collNet_t* N = &collNetLoopback;
/* Live loopback objects when the current test started: a test that failed
 * half-way may leak its pair without failing the tests after it. */
static int gBase;
static int setBase(void** st) {
  (void)st;
  collLoopbackSetEagerLimit(COLL_LB_EAGER_DEFAULT);
  collLoopbackSetFault(COLL_LB_FAULT_NONE, 0);
  gBase = collLoopbackLiveObjects();
  return 0;
}
#define LIVE(n) assert_int_equal(collLoopbackLiveObjects(), gBase + (n))
#define GUARD 64
#define GUARD_BYTE 0xA5
#define JUNK_BYTE 0x5A

/* ---- transport helpers ---------------------------------------------------- */
/* Stricter than netMakePair: accept reports nothing before the connect. */
static void makePair(netPair_t* p) {
  char handle[COLL_NET_HANDLE_BYTES];
  assert_int_equal(N->listen(0, handle, &p->listen), collSuccess);
  p->recv = (void*)1;
  assert_int_equal(N->accept(p->listen, &p->recv), collSuccess);
  assert_null(p->recv); /* nothing pending yet */
  assert_int_equal(N->connect(0, handle, &p->send), collSuccess);
  assert_non_null(p->send);
  assert_int_equal(N->accept(p->listen, &p->recv), collSuccess);
  assert_non_null(p->recv);
}

static void* post(void* comm, int isSend, void* buf, size_t n) {
  void* req = NULL;
  collResult_t r = isSend ? N->isend(comm, buf, n, 0, NULL, &req) : N->irecv(comm, buf, n, 0, NULL, &req);
  assert_int_equal(r, collSuccess);
  assert_non_null(req);
  return req;
}

/* Tests req until it finishes or fails (bounded). */
static collResult_t waitReq(void* req, size_t* size) {
  int done = 0;
  for (long i = 0; i < 100000000L; i++) {
    collResult_t r = N->test(req, &done, size, NULL);
    if (r != collSuccess || done) return r;
  }
  return collInternalError;
}

static int testOnce(void* req, size_t* size) {
  int done = -1;
  assert_int_equal(N->test(req, &done, size, NULL), collSuccess);
  return done;
}

static int readable(void* comm, short ev) {
  int fd = -1;
  assert_int_equal(N->getPollFd(comm, &fd), collSuccess);
  assert_true(fd >= 0);
  struct pollfd p = {fd, ev, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & ev);
}

/* ---- transport tests -------------------------------------------------------- */
static void test_table(void** st) {
  (void)st;
  assert_string_equal(N->name, "loopback");
  assert_int_equal(N->size, sizeof(collNet_t));
  assert_int_equal(N->version, COLL_NET_VERSION);
#define NONNULL(f) assert_true(N->f != NULL)
  NONNULL(init); NONNULL(devices); NONNULL(getProperties); NONNULL(listen); NONNULL(connect);
  NONNULL(accept); NONNULL(regMr); NONNULL(deregMr); NONNULL(isend); NONNULL(irecv); NONNULL(test);
  NONNULL(iput); NONNULL(iflush); NONNULL(getPollFd); NONNULL(closeSend); NONNULL(closeRecv);
  NONNULL(closeListen); NONNULL(fini);
  int nd = 0;
  assert_int_equal(N->devices(&nd), collSuccess);
  assert_int_equal(nd, 1);
  collNetProperties_t pr;
  assert_int_equal(N->getProperties(0, &pr), collSuccess);
  assert_string_equal(pr.name, "loopback");
  assert_int_equal(pr.ptrSupport, COLL_PTR_HOST);
  assert_int_equal(pr.hasPut, 0);
  assert_int_equal(N->getProperties(1, &pr), collInvalidArgument);
  void* mh = NULL;
  assert_int_equal(N->regMr(NULL, &nd, 4, COLL_PTR_HOST, &mh), collSuccess);
  assert_int_equal(N->regMr(NULL, &nd, 4, COLL_PTR_CUDA, &mh), collInvalidArgument);
  void* req = (void*)1;
  assert_int_equal(N->iput(NULL, &nd, 4, NULL, 0, 0, &req), collInvalidUsage);
  assert_null(req);
  req = (void*)1;
  assert_int_equal(N->iflush(NULL, &nd, 4, NULL, &req), collSuccess);
  assert_null(req);
  LIVE(0);
}

/* Tags travel with eager and rendezvous messages. */
static void test_tags(void** st) {
  (void)st;
  netTestTags(N, 1u << 20);
}

/* FIFO order, sizes (0 and partial), eager copy semantics, rendezvous. */
static void test_fifo(void** st) {
  (void)st;
  netPair_t p;
  makePair(&p);
  enum { K = 6 };
  static const size_t sz[K] = {10, 0, 5000, 1, 70000, 300};
  char* sbuf[K];
  char* rbuf[K];
  void *sreq[K], *rreq[K];
  for (int k = 0; k < K; k++) { /* half the receives are posted before the sends */
    sbuf[k] = malloc(sz[k] + 1);
    rbuf[k] = malloc(sz[k] + 8 + GUARD);
    memset(rbuf[k], GUARD_BYTE, sz[k] + 8 + GUARD);
    for (size_t i = 0; i < sz[k]; i++) sbuf[k][i] = (char)(i * 7 + (size_t)k);
    if (k < 3) rreq[k] = post(p.recv, 0, rbuf[k], sz[k] + 8);
  }
  for (int k = 0; k < K; k++) sreq[k] = post(p.send, 1, sbuf[k], sz[k]);
  for (int k = 3; k < K; k++) rreq[k] = post(p.recv, 0, rbuf[k], sz[k] + 8);
  size_t n;
  assert_int_equal(testOnce(sreq[0], &n), 1); /* eager: complete at once */
  assert_int_equal(n, 10);
  memset(sbuf[3], 'x', 1); /* after completion the sender may reuse its buffer */
  for (int k = 0; k < K; k++) {
    n = 99;
    assert_int_equal(waitReq(rreq[k], &n), collSuccess);
    assert_int_equal(n, sz[k]);
    for (size_t i = 0; i < sz[k]; i++) assert_int_equal(rbuf[k][i], (char)(i * 7 + (size_t)k));
    for (size_t i = sz[k]; i < sz[k] + 8 + GUARD; i++) assert_int_equal((uint8_t)rbuf[k][i], GUARD_BYTE);
    if (k) assert_int_equal(waitReq(sreq[k], &n), collSuccess);
  }
  /* released request */
  int done;
  assert_int_equal(N->test(rreq[0], &done, &n, NULL), collInvalidArgument);
  /* rendezvous: the send completes only once the receiver copied it */
  collLoopbackSetEagerLimit(100);
  char big[1000], got[1000];
  memset(big, 'b', sizeof big);
  void* s = post(p.send, 1, big, sizeof big);
  assert_int_equal(testOnce(s, &n), 0);
  assert_int_equal(testOnce(s, &n), 0);
  void* r = post(p.recv, 0, got, sizeof got);
  assert_int_equal(waitReq(s, &n), collSuccess);
  assert_int_equal(n, sizeof big);
  assert_int_equal(waitReq(r, &n), collSuccess);
  assert_memory_equal(big, got, sizeof big);
  collLoopbackSetEagerLimit(COLL_LB_EAGER_DEFAULT);
  /* wrong direction */
  void* q = NULL;
  assert_int_equal(N->isend(p.recv, big, 1, 0, NULL, &q), collInvalidUsage);
  assert_int_equal(N->irecv(p.send, big, 1, 0, NULL, &q), collInvalidUsage);
  for (int k = 0; k < K; k++) { free(sbuf[k]); free(rbuf[k]); }
  netClosePair(N, &p);
  LIVE(0);
}

/* A message larger than the posted receive: collRemoteError, nothing written,
 * the connection stays broken for both ends. Eager and rendezvous. */
static void test_oversize_transport(void** st) {
  (void)st;
  for (int rdv = 0; rdv < 2; rdv++) {
    collLoopbackSetEagerLimit(rdv ? 64 : COLL_LB_EAGER_DEFAULT);
    netPair_t p;
    makePair(&p);
    char src[100], dst[64 + GUARD];
    memset(src, 's', sizeof src);
    memset(dst, GUARD_BYTE, sizeof dst);
    void* s = post(p.send, 1, src, sizeof src);
    void* r = post(p.recv, 0, dst, 64);
    size_t n;
    assert_int_equal(waitReq(r, &n), collRemoteError);
    assert_non_null(strstr(collGetLastError(NULL), "sent 100 bytes, receiver posted 64"));
    for (size_t i = 0; i < sizeof dst; i++) assert_int_equal((uint8_t)dst[i], GUARD_BYTE);
    assert_int_equal(waitReq(s, &n), rdv ? collRemoteError : collSuccess); /* eager: done at isend */
    void* q = NULL;
    assert_int_equal(N->isend(p.send, src, 1, 0, NULL, &q), collRemoteError);
    assert_int_equal(N->irecv(p.recv, dst, 64, 0, NULL, &q), collRemoteError);
    netClosePair(N, &p);
  }
  collLoopbackSetEagerLimit(COLL_LB_EAGER_DEFAULT);
  LIVE(0);
}

/* Beyond COLL_LB_MAX_REQUESTS unmatched sends isend asks to retry. */
static void test_retry_when_full(void** st) {
  (void)st;
  netPair_t p;
  makePair(&p);
  int v[COLL_LB_MAX_REQUESTS + 1], got = -1;
  size_t n;
  for (int k = 0; k < COLL_LB_MAX_REQUESTS; k++) {
    v[k] = k;
    assert_int_equal(waitReq(post(p.send, 1, &v[k], sizeof v[k]), &n), collSuccess);
  }
  void* q = (void*)1;
  v[COLL_LB_MAX_REQUESTS] = COLL_LB_MAX_REQUESTS;
  assert_int_equal(N->isend(p.send, &v[COLL_LB_MAX_REQUESTS], sizeof(int), 0, NULL, &q), collSuccess);
  assert_null(q);
  assert_int_equal(waitReq(post(p.recv, 0, &got, sizeof got), &n), collSuccess);
  assert_int_equal(got, 0);
  assert_int_equal(waitReq(post(p.send, 1, &v[COLL_LB_MAX_REQUESTS], sizeof(int)), &n), collSuccess);
  for (int k = 1; k <= COLL_LB_MAX_REQUESTS; k++) {
    assert_int_equal(waitReq(post(p.recv, 0, &got, sizeof got), &n), collSuccess);
    assert_int_equal(got, k);
  }
  netClosePair(N, &p);
  LIVE(0);
}

/* closeSend keeps eager messages deliverable, then receives fail; closeRecv
 * fails the sender's unfinished and later requests. */
static void test_close(void** st) {
  (void)st;
  netPair_t p;
  makePair(&p);
  int a = 1, b = 2, got = 0;
  size_t n;
  assert_int_equal(waitReq(post(p.send, 1, &a, sizeof a), &n), collSuccess);
  assert_int_equal(waitReq(post(p.send, 1, &b, sizeof b), &n), collSuccess);
  void* early = post(p.recv, 0, &got, sizeof got);
  assert_int_equal(N->closeSend(p.send), collSuccess);
  assert_int_equal(waitReq(early, &n), collSuccess);
  assert_int_equal(got, 1);
  assert_int_equal(waitReq(post(p.recv, 0, &got, sizeof got), &n), collSuccess);
  assert_int_equal(got, 2);
  void* q = NULL;
  collResult_t r = N->irecv(p.recv, &got, sizeof got, 0, NULL, &q);
  if (r == collSuccess) r = waitReq(q, &n);
  assert_int_equal(r, collRemoteError);
  assert_non_null(strstr(collGetLastError(NULL), "closed"));
  LIVE(2); /* endpoint + half-closed connection */
  assert_int_equal(N->closeRecv(p.recv), collSuccess);
  LIVE(1);
  assert_int_equal(N->closeListen(p.listen), collSuccess);
  LIVE(0);
  /* the receiver closes while a rendezvous send waits */
  collLoopbackSetEagerLimit(64);
  char big[200];
  makePair(&p);
  void* sr = post(p.send, 1, big, sizeof big);
  assert_int_equal(testOnce(sr, &n), 0);
  assert_int_equal(N->closeRecv(p.recv), collSuccess);
  assert_int_equal(waitReq(sr, &n), collRemoteError);
  assert_non_null(strstr(collGetLastError(NULL), "receiver closed"));
  assert_int_equal(N->isend(p.send, big, 1, 0, NULL, &q), collRemoteError);
  assert_int_equal(N->closeSend(p.send), collSuccess);
  assert_int_equal(N->closeListen(p.listen), collSuccess);
  collLoopbackSetEagerLimit(COLL_LB_EAGER_DEFAULT);
  LIVE(0);
}

/* Handles: another process, bad magic, closed endpoint, never accepted. */
static void test_handles(void** st) {
  (void)st;
  char h[COLL_NET_HANDLE_BYTES], bad[COLL_NET_HANDLE_BYTES];
  void *l, *s = (void*)1, *s2;
  assert_int_equal(N->listen(0, h, &l), collSuccess);
  memcpy(bad, h, sizeof h);
  bad[16] ^= 0x40; /* the pid field: {magic, id, pid} */
  assert_int_equal(N->connect(0, bad, &s), collInvalidUsage);
  assert_null(s);
  assert_non_null(strstr(collGetLastError(NULL), "threads of one process"));
  memcpy(bad, h, sizeof h);
  bad[0] ^= 1;
  assert_int_equal(N->connect(0, bad, &s), collInvalidArgument);
  /* a connection never accepted: closeListen fails its sender */
  assert_int_equal(N->connect(0, h, &s2), collSuccess);
  LIVE(2);
  assert_int_equal(N->closeListen(l), collSuccess);
  void* q = NULL;
  int v = 5;
  assert_int_equal(N->isend(s2, &v, sizeof v, 0, NULL, &q), collRemoteError);
  assert_non_null(strstr(collGetLastError(NULL), "before accepting"));
  assert_int_equal(N->closeSend(s2), collSuccess);
  /* a closed endpoint */
  assert_int_equal(N->connect(0, h, &s), collRemoteError);
  assert_non_null(strstr(collGetLastError(NULL), "is closed"));
  LIVE(0);
}

/* Poll fds: endpoint POLLIN while a connection is pending; recv end POLLIN
 * once a message landed; send end POLLOUT once a rendezvous send finished. */
static void test_pollfd(void** st) {
  (void)st;
  char h[COLL_NET_HANDLE_BYTES];
  netPair_t p;
  assert_int_equal(N->listen(0, h, &p.listen), collSuccess);
  assert_false(readable(p.listen, POLLIN));
  assert_int_equal(N->connect(0, h, &p.send), collSuccess);
  assert_true(readable(p.listen, POLLIN));
  assert_int_equal(N->accept(p.listen, &p.recv), collSuccess);
  assert_non_null(p.recv);
  assert_false(readable(p.listen, POLLIN));
  int v = 7, got = 0;
  size_t n;
  void* r = post(p.recv, 0, &got, sizeof got);
  assert_int_equal(testOnce(r, &n), 0);
  assert_false(readable(p.recv, POLLIN));
  post(p.send, 1, &v, sizeof v);
  assert_true(readable(p.recv, POLLIN));
  assert_int_equal(testOnce(r, &n), 1);
  assert_int_equal(got, 7);
  collLoopbackSetEagerLimit(64);
  char big[100] = {1}, dst[100];
  void* s = post(p.send, 1, big, sizeof big);
  assert_int_equal(testOnce(s, &n), 0);
  assert_false(readable(p.send, POLLOUT));
  r = post(p.recv, 0, dst, sizeof dst);
  assert_true(readable(p.send, POLLOUT));
  assert_int_equal(testOnce(s, &n), 1);
  assert_int_equal(testOnce(r, &n), 1);
  collLoopbackSetEagerLimit(COLL_LB_EAGER_DEFAULT);
  netClosePair(N, &p);
  LIVE(0);
}

/* Two threads, many messages of mixed sizes (eager and rendezvous), up to 64
 * in flight; both sides sleep in poll() on their fd whenever a request is not
 * done. A lost wake-up shows as a poll that times out (2 s) and fails. */
enum { ST_MSGS = 4000, ST_W = 64 };
typedef struct { void* comm; int ok, pollTimeouts; } streamArg;
static size_t stSize(int k) { return k % 100 == 99 ? 20000 + (size_t)k : ((size_t)k * 37u) % 3000u; }
static uint8_t stByte(int k, size_t i) { return (uint8_t)(i * 131u + (unsigned)k * 7u); }

static int stWait(streamArg* a, void* req, size_t* n, short ev) {
  int done = 0, fd = -1;
  N->getPollFd(a->comm, &fd);
  for (;;) {
    if (N->test(req, &done, n, NULL) != collSuccess) return 0;
    if (done) return 1;
    struct pollfd p = {fd, ev, 0};
    if (poll(&p, 1, 2000) == 0) a->pollTimeouts++;
  }
}

static void* stSender(void* arg) {
  streamArg* a = arg;
  void* reqs[ST_W];
  uint8_t* bufs[ST_W];
  size_t n;
  a->ok = 1;
  for (int k = 0, head = 0; head < ST_MSGS;) {
    if (k < ST_MSGS && k - head < ST_W) {
      size_t sz = stSize(k);
      bufs[k % ST_W] = malloc(sz + 1);
      for (size_t i = 0; i < sz; i++) bufs[k % ST_W][i] = stByte(k, i);
      reqs[k % ST_W] = NULL;
      if (N->isend(a->comm, bufs[k % ST_W], sz, 0, NULL, &reqs[k % ST_W]) != collSuccess) a->ok = 0;
      if (!reqs[k % ST_W]) { free(bufs[k % ST_W]); continue; }
      k++;
      continue;
    }
    if (!stWait(a, reqs[head % ST_W], &n, POLLOUT) || n != stSize(head)) a->ok = 0;
    free(bufs[head % ST_W]);
    head++;
  }
  return NULL;
}

static void test_two_threads(void** st) {
  (void)st;
  collLoopbackSetEagerLimit(1024);
  netPair_t p;
  makePair(&p);
  streamArg tx = {p.send, 0, 0}, rx = {p.recv, 1, 0};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, stSender, &tx), 0);
  void* reqs[ST_W];
  uint8_t* bufs[ST_W];
  int bad = 0;
  for (int k = 0, head = 0; head < ST_MSGS;) {
    if (k < ST_MSGS && k - head < ST_W) {
      bufs[k % ST_W] = malloc(stSize(k) + 1);
      reqs[k % ST_W] = post(p.recv, 0, bufs[k % ST_W], stSize(k));
      k++;
      continue;
    }
    size_t n = 0;
    if (!stWait(&rx, reqs[head % ST_W], &n, POLLIN) || n != stSize(head)) bad++;
    for (size_t i = 0; i < n && !bad; i++) bad += bufs[head % ST_W][i] != stByte(head, i);
    free(bufs[head % ST_W]);
    head++;
  }
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(bad, 0);
  assert_int_equal(tx.ok, 1);
  assert_int_equal(tx.pollTimeouts + rx.pollTimeouts, 0);
  netClosePair(N, &p);
  collLoopbackSetEagerLimit(COLL_LB_EAGER_DEFAULT);
  LIVE(0);
}

/* ---- collectives through the engine, ranks as threads ------------------------ */
#define MAXR 8
typedef struct team team_t;
typedef struct {
  team_t* t;
  collComm_t comm;
  int rank;
  collResult_t err; /* first API failure */
  char errMsg[600];
  long wrong;       /* wrong values seen */
  char firstWrong[300];
  double secs;      /* fault tests: duration of the failing call */
} rank_t;
typedef int (*rankFn)(rank_t*);
struct team {
  int n;
  rank_t r[MAXR];
  rankFn fn;
  int arrived; /* barrier check (atomic) */
};

static void apiFail(rank_t* k, collResult_t r, const char* what) {
  if (k->err != collSuccess) return;
  k->err = r;
  snprintf(k->errMsg, sizeof k->errMsg, "rank %d: %s -> %s: %s", k->rank, what, collGetErrorString(r),
           collGetLastError(NULL));
}
#define CALL(k, expr)                                   \
  do {                                                  \
    collResult_t r_ = (expr);                           \
    if (r_ != collSuccess) { apiFail(k, r_, #expr); return -1; } \
  } while (0)

__attribute__((format(printf, 2, 3))) static void wrong(rank_t* k, const char* fmt, ...) {
  if (k->wrong++) return;
  va_list ap;
  va_start(ap, fmt);
  int m = snprintf(k->firstWrong, sizeof k->firstWrong, "rank %d: ", k->rank);
  vsnprintf(k->firstWrong + m, sizeof k->firstWrong - (size_t)m, fmt, ap);
  va_end(ap);
}

static size_t tsize(collDataType_t t) { return t == collBfloat16 ? 2 : 4; }
static const char* tname(collDataType_t t) { return t == collInt32 ? "int32" : t == collFloat ? "float" : "bf16"; }

/* Input of rank r at element i for (op, type): exact in every type. */
static double inVal(collRedOp_t op, collDataType_t t, int r, size_t i) {
  if (op == collProd && t != collInt32) return (double)((i + (size_t)r) % 4 == 0 ? 2 : 1) * (r % 2 ? -1 : 1);
  return (double)(r + 1) * (double)(i % (t == collBfloat16 ? 4 : 97) + 1);
}

/* Expected op over ranks 0..n-1 of inVal(op, t, r, i). */
static double expectVal(collRedOp_t op, collDataType_t t, int n, size_t i) {
  double acc = inVal(op, t, 0, i);
  uint32_t prod = (uint32_t)(int64_t)acc;
  for (int r = 1; r < n; r++) {
    double v = inVal(op, t, r, i);
    if (op == collSum || op == collAvg) acc += v;
    if (op == collProd) { acc *= v; prod *= (uint32_t)(int64_t)v; }
    if (op == collMax && v > acc) acc = v;
    if (op == collMin && v < acc) acc = v;
  }
  if (op == collProd && t == collInt32) return (double)(int32_t)prod; /* wraps mod 2^32 */
  if (op == collAvg) {
    if (t == collInt32) return (double)((int64_t)acc / n);
    float f = (float)acc / (float)n;
    return t == collBfloat16 ? (double)collBf16ToFloat(collFloatToBf16(f)) : (double)f;
  }
  return acc;
}

static void store(void* b, collDataType_t t, size_t i, double v) {
  if (t == collInt32) ((int32_t*)b)[i] = (int32_t)(int64_t)v;
  else if (t == collFloat) ((float*)b)[i] = (float)v;
  else ((uint16_t*)b)[i] = collFloatToBf16((float)v);
}
static double load(const void* b, collDataType_t t, size_t i) {
  if (t == collInt32) return ((const int32_t*)b)[i];
  if (t == collFloat) return ((const float*)b)[i];
  return collBf16ToFloat(((const uint16_t*)b)[i]);
}

/* A buffer of `elems` elements followed by GUARD guard bytes; contents junk. */
static char* gbuf(size_t elems, collDataType_t t) {
  size_t b = elems * tsize(t);
  char* p = malloc(b + GUARD);
  memset(p, JUNK_BYTE, b);
  memset(p + b, GUARD_BYTE, GUARD);
  return p;
}
static void checkGuard(rank_t* k, const char* p, size_t elems, collDataType_t t, const char* what) {
  for (size_t i = 0; i < GUARD; i++)
    if ((uint8_t)p[elems * tsize(t) + i] != GUARD_BYTE) { wrong(k, "%s: guard byte %zu overwritten", what, i); return; }
}

static const collRedOp_t kOps[] = {collSum, collProd, collMax, collMin, collAvg};
static const char* kOpNames[] = {"sum", "prod", "max", "min", "avg"};
static const collDataType_t kTypes[] = {collInt32, collFloat, collBfloat16};

static int doAllReduce(rank_t* k, size_t cnt, collDataType_t t, collRedOp_t op, int inPlace) {
  int n = k->t->n;
  char* s = gbuf(cnt, t);
  char* d = inPlace ? s : gbuf(cnt, t);
  for (size_t i = 0; i < cnt; i++) store(s, t, i, inVal(op, t, k->rank, i));
  collResult_t r = collAllReduce(s, d, cnt, t, op, k->comm, NULL);
  for (size_t i = 0; r == collSuccess && i < cnt; i++)
    if (load(d, t, i) != expectVal(op, t, n, i)) {
      wrong(k, "allreduce %s %s n=%d count=%zu%s: [%zu] = %g, want %g", kOpNames[op], tname(t), n, cnt,
            inPlace ? " in place" : "", i, load(d, t, i), expectVal(op, t, n, i));
      break;
    }
  for (size_t i = 0; r == collSuccess && !inPlace && i < cnt; i++)
    if (load(s, t, i) != inVal(op, t, k->rank, i)) { wrong(k, "allreduce changed sendbuff[%zu]", i); break; }
  checkGuard(k, d, cnt, t, "allreduce");
  free(s);
  if (!inPlace) free(d);
  CALL(k, r);
  return 0;
}

static int doAllGather(rank_t* k, size_t cnt, collDataType_t t, int inPlace) {
  int n = k->t->n;
  char* d = gbuf(cnt * (size_t)n, t);
  char* s = inPlace ? d + (size_t)k->rank * cnt * tsize(t) : gbuf(cnt, t);
  for (size_t i = 0; i < cnt; i++) store(s, t, i, inVal(collSum, t, k->rank, i));
  collResult_t r = collAllGather(s, d, cnt, t, k->comm, NULL);
  for (int q = 0; r == collSuccess && q < n; q++)
    for (size_t i = 0; i < cnt; i++)
      if (load(d, t, (size_t)q * cnt + i) != inVal(collSum, t, q, i)) {
        wrong(k, "allgather %s n=%d count=%zu: block %d [%zu] = %g, want %g", tname(t), n, cnt, q, i,
              load(d, t, (size_t)q * cnt + i), inVal(collSum, t, q, i));
        q = n;
        break;
      }
  checkGuard(k, d, cnt * (size_t)n, t, "allgather");
  free(d);
  if (!inPlace) free(s);
  CALL(k, r);
  return 0;
}

static int doReduceScatter(rank_t* k, size_t cnt, collDataType_t t, collRedOp_t op, int inPlace) {
  int n = k->t->n;
  char* s = gbuf(cnt * (size_t)n, t);
  char* d = inPlace ? s + (size_t)k->rank * cnt * tsize(t) : gbuf(cnt, t);
  for (size_t i = 0; i < cnt * (size_t)n; i++) store(s, t, i, inVal(op, t, k->rank, i));
  collResult_t r = collReduceScatter(s, d, cnt, t, op, k->comm, NULL);
  size_t base = (size_t)k->rank * cnt;
  for (size_t i = 0; r == collSuccess && i < cnt; i++)
    if (load(d, t, i) != expectVal(op, t, n, base + i)) {
      wrong(k, "reducescatter %s %s n=%d count=%zu: [%zu] = %g, want %g", kOpNames[op], tname(t), n, cnt, i,
            load(d, t, i), expectVal(op, t, n, base + i));
      break;
    }
  if (!inPlace) checkGuard(k, d, cnt, t, "reducescatter");
  checkGuard(k, s, cnt * (size_t)n, t, "reducescatter");
  free(s);
  if (!inPlace) free(d);
  CALL(k, r);
  return 0;
}

/* Broadcast from root (non-roots pass sendbuff NULL). */
static int doBroadcast(rank_t* k, size_t cnt, int root, int inPlace) {
  collDataType_t t = collInt32;
  char* d = gbuf(cnt, t);
  char* s = NULL;
  if (k->rank == root) {
    s = inPlace ? d : gbuf(cnt, t);
    for (size_t i = 0; i < cnt; i++) store(s, t, i, inVal(collSum, t, root, i) + 1000 * root);
  }
  collResult_t r = collBroadcast(s, d, cnt, t, root, k->comm, NULL);
  for (size_t i = 0; r == collSuccess && i < cnt; i++)
    if (load(d, t, i) != inVal(collSum, t, root, i) + 1000 * root) {
      wrong(k, "broadcast n=%d count=%zu root %d: [%zu] = %g", k->t->n, cnt, root, i, load(d, t, i));
      break;
    }
  checkGuard(k, d, cnt, t, "broadcast");
  if (s != d) free(s);
  free(d);
  CALL(k, r);
  return 0;
}

/* Reduce to root (non-roots pass recvbuff NULL). */
static int doReduce(rank_t* k, size_t cnt, int root, collDataType_t t, collRedOp_t op) {
  char* s = gbuf(cnt, t);
  char* d = k->rank == root ? gbuf(cnt, t) : NULL;
  for (size_t i = 0; i < cnt; i++) store(s, t, i, inVal(op, t, k->rank, i));
  collResult_t r = collReduce(s, d, cnt, t, op, root, k->comm, NULL);
  for (size_t i = 0; r == collSuccess && d && i < cnt; i++)
    if (load(d, t, i) != expectVal(op, t, k->t->n, i)) {
      wrong(k, "reduce %s %s n=%d count=%zu root %d: [%zu] = %g, want %g", kOpNames[op], tname(t), k->t->n, cnt,
            root, i, load(d, t, i), expectVal(op, t, k->t->n, i));
      break;
    }
  if (d) checkGuard(k, d, cnt, t, "reduce");
  free(s);
  free(d);
  CALL(k, r);
  return 0;
}

/* All-to-all as one group of collSend/collRecv, self included. */
static int64_t a2aVal(int from, int to, size_t i) { return (int64_t)from * 1000003 + to * 1009 + (int64_t)i; }
static int doAllToAll(rank_t* k, size_t cnt) {
  int n = k->t->n;
  int32_t* s = malloc(cnt * (size_t)n * 4 + 4);
  int32_t* d = (int32_t*)gbuf(cnt * (size_t)n, collInt32);
  for (int p = 0; p < n; p++)
    for (size_t i = 0; i < cnt; i++) s[(size_t)p * cnt + i] = (int32_t)a2aVal(k->rank, p, i);
  collResult_t r = collGroupStart();
  for (int p = 0; p < n && r == collSuccess; p++) {
    r = collSend(s + (size_t)p * cnt, cnt, collInt32, p, k->comm, NULL);
    if (r == collSuccess) r = collRecv(d + (size_t)p * cnt, cnt, collInt32, p, k->comm, NULL);
  }
  collResult_t e = collGroupEnd();
  if (r == collSuccess) r = e;
  for (int p = 0; r == collSuccess && p < n; p++)
    for (size_t i = 0; i < cnt; i++)
      if (d[(size_t)p * cnt + i] != (int32_t)a2aVal(p, k->rank, i)) {
        wrong(k, "alltoall n=%d count=%zu: from %d [%zu] = %d", n, cnt, p, i, d[(size_t)p * cnt + i]);
        p = n;
        break;
      }
  checkGuard(k, (char*)d, cnt * (size_t)n, collInt32, "alltoall");
  free(s);
  free(d);
  CALL(k, r);
  return 0;
}

/* Barrier: nobody leaves round j before all n arrived in it. */
static int doBarriers(rank_t* k) {
  for (int j = 0; j < 3; j++) {
    __atomic_add_fetch(&k->t->arrived, 1, __ATOMIC_SEQ_CST);
    CALL(k, collBarrier(k->comm, NULL));
    int a = __atomic_load_n(&k->t->arrived, __ATOMIC_SEQ_CST);
    if (a < k->t->n * (j + 1)) wrong(k, "barrier round %d left with %d arrivals", j, a);
    CALL(k, collBarrier(k->comm, NULL)); /* nobody enters round j+1 before all checked */
  }
  return 0;
}

/* Two calls queued on a stream (the comm's progress thread runs them). */
static int doStream(rank_t* k) {
  enum { C = 100003 };
  int n = k->t->n;
  collStream_t st = NULL;
  CALL(k, collStreamCreate(k->comm, &st));
  int32_t* a = malloc(C * sizeof(int32_t));
  int32_t* g = malloc((size_t)n * 13 * sizeof(int32_t));
  for (size_t i = 0; i < C; i++) a[i] = (int32_t)inVal(collSum, collInt32, k->rank, i);
  int32_t mine[13];
  for (size_t i = 0; i < 13; i++) mine[i] = (int32_t)(k->rank * 100 + (int)i);
  collResult_t r = collAllReduce(a, a, C, collInt32, collSum, k->comm, st);
  if (r == collSuccess) r = collAllGather(mine, g, 13, collInt32, k->comm, st);
  collResult_t e = collStreamSynchronize(st);
  if (r == collSuccess) r = e;
  for (size_t i = 0; r == collSuccess && i < C; i++)
    if (a[i] != (int32_t)expectVal(collSum, collInt32, n, i)) { wrong(k, "stream allreduce [%zu] = %d", i, a[i]); break; }
  for (size_t i = 0; r == collSuccess && i < (size_t)n * 13; i++)
    if (g[i] != (int32_t)((int)(i / 13) * 100 + (int)(i % 13))) { wrong(k, "stream allgather [%zu] = %d", i, g[i]); break; }
  free(a);
  free(g);
  e = collStreamDestroy(st);
  CALL(k, r);
  CALL(k, e);
  return 0;
}

static const size_t kCounts[] = {0, 1, 13, 100003};

/* Every collective, type and op for every count of kCounts[from..]. */
static int matrix(rank_t* k, int from) {
  int n = k->t->n;
  for (size_t c = (size_t)from; c < sizeof kCounts / sizeof kCounts[0]; c++) {
    size_t cnt = kCounts[c];
    for (int ti = 0; ti < 3; ti++)
      for (int oi = 0; oi < 5; oi++)
        if (doAllReduce(k, cnt, kTypes[ti], kOps[oi], 0)) return -1;
    if (doAllReduce(k, cnt, collFloat, collSum, 1)) return -1;
    for (int ti = 0; ti < 3; ti++)
      if (doAllGather(k, cnt, kTypes[ti], 0)) return -1;
    if (doAllGather(k, cnt, collInt32, 1)) return -1;
    for (int oi = 0; oi < 5; oi++)
      if (doReduceScatter(k, cnt, collInt32, kOps[oi], 0)) return -1;
    if (doReduceScatter(k, cnt, collBfloat16, collSum, 0) || doReduceScatter(k, cnt, collFloat, collMax, 1))
      return -1;
    for (int root = 0; root < n; root++)
      if (doBroadcast(k, cnt, root, root == 0) || doReduce(k, cnt, root, collInt32, kOps[root % 5]) ||
          doReduce(k, cnt, root, collFloat, collSum))
        return -1;
    if (doAllToAll(k, cnt)) return -1;
  }
  return doStream(k) ? -1 : doBarriers(k);
}
static int matrixAll(rank_t* k) { return matrix(k, 0); }
static int matrixNonEmpty(rank_t* k) { return matrix(k, 1); }

static void* rankMain(void* p) {
  rank_t* k = p;
  if (k->t->fn(k) != 0 && k->comm) { /* like a dying process: peers see it gone */
    collCommAbort(k->comm);
    k->comm = NULL;
  }
  return NULL;
}

static void teamInit(team_t* t, int n) {
  memset(t, 0, sizeof *t);
  t->n = n;
  collComm_t comms[MAXR];
  assert_int_equal(collCommInitAll(comms, n, NULL), collSuccess);
  LIVE(n); /* one loopback endpoint per rank: the data path is ours */
  for (int i = 0; i < n; i++) {
    t->r[i].t = t;
    t->r[i].rank = i;
    t->r[i].comm = comms[i];
    int rk = -1;
    assert_int_equal(collCommUserRank(comms[i], &rk), collSuccess);
    assert_int_equal(rk, i);
  }
}

/* Runs fn on every rank (one thread each); returns when all finished. */
static void teamRun(team_t* t, rankFn fn) {
  pthread_t th[MAXR];
  t->fn = fn;
  for (int i = 0; i < t->n; i++) assert_int_equal(pthread_create(&th[i], NULL, rankMain, &t->r[i]), 0);
  for (int i = 0; i < t->n; i++) assert_int_equal(pthread_join(th[i], NULL), 0);
}

/* Fails the test on any recorded error or wrong value. */
static void teamCheck(team_t* t) {
  for (int i = 0; i < t->n; i++) {
    if (t->r[i].err != collSuccess) fail_msg("%s", t->r[i].errMsg);
    if (t->r[i].wrong) fail_msg("%ld wrong values, first: %s", t->r[i].wrong, t->r[i].firstWrong);
  }
}

static void teamDestroy(team_t* t) {
  for (int i = 0; i < t->n; i++)
    if (t->r[i].comm) assert_int_equal(collCommDestroy(t->r[i].comm), collSuccess);
  LIVE(0);
}

static void runMatrix(int n, rankFn fn) {
  team_t t;
  teamInit(&t, n);
  teamRun(&t, fn);
  teamCheck(&t);
  if (n > 1) assert_true(collLoopbackLiveObjects() > gBase + n); /* data moved over loopback connections */
  teamDestroy(&t);
}

static void test_coll_n1(void** st) { (void)st; runMatrix(1, matrixAll); }
static void test_coll_n2(void** st) { (void)st; runMatrix(2, matrixAll); }
static void test_coll_n3(void** st) { (void)st; runMatrix(3, matrixAll); }
static void test_coll_n5(void** st) { (void)st; runMatrix(5, matrixAll); }
static void test_coll_n8(void** st) { (void)st; runMatrix(8, matrixAll); }

/* Every data message rendezvous (eager limit 64 < chunk 4096). */
static void test_coll_rendezvous_n3(void** st) {
  (void)st;
  collLoopbackSetEagerLimit(64);
  runMatrix(3, matrixNonEmpty);
  collLoopbackSetEagerLimit(COLL_LB_EAGER_DEFAULT);
}
static void test_coll_rendezvous_n8(void** st) {
  (void)st;
  collLoopbackSetEagerLimit(64);
  runMatrix(8, matrixNonEmpty);
  collLoopbackSetEagerLimit(COLL_LB_EAGER_DEFAULT);
}

/* ---- faults ------------------------------------------------------------------ */
enum { BIG = 100003 };

/* A big all-reduce that must fail: records the result, its duration and its
 * message; then aborts the comm at once, as a dying process would. */
static int faultyAllReduce(rank_t* k) {
  int32_t* b = malloc(BIG * sizeof(int32_t));
  for (size_t i = 0; i < BIG; i++) b[i] = (int32_t)inVal(collSum, collInt32, k->rank, i);
  double t0 = collTimeNow();
  k->err = collAllReduce(b, b, BIG, collInt32, collSum, k->comm, NULL);
  k->secs = collTimeNow() - t0;
  snprintf(k->errMsg, sizeof k->errMsg, "%s", collGetLastError(NULL));
  free(b);
  return k->err == collSuccess ? 0 : -1;
}
static int bigAllReduce(rank_t* k) { return doAllReduce(k, BIG, collInt32, collSum, 1); }

/* N=3: a connection dies mid all-reduce; every rank must fail with
 * collRemoteError within seconds (default timeout is 1800 s), not hang. */
static void test_fault_drop(void** st) {
  (void)st;
  team_t t;
  teamInit(&t, 3);
  teamRun(&t, bigAllReduce); /* all connections exist before the fault */
  teamCheck(&t);
  collLoopbackSetFault(COLL_LB_FAULT_DROP, 25);
  teamRun(&t, faultyAllReduce);
  collLoopbackSetFault(COLL_LB_FAULT_NONE, 0);
  for (int i = 0; i < 3; i++) {
    print_message("rank %d: %s after %.3f s: %s\n", i, collGetErrorString(t.r[i].err), t.r[i].secs, t.r[i].errMsg);
    assert_int_equal(t.r[i].err, collRemoteError);
    assert_true(t.r[i].secs < 5.0);
    assert_null(t.r[i].comm); /* aborted by its thread */
  }
  LIVE(0);
}

/* Delayed messages: still exact, and a ping-pong really waits. */
static int pingPong(rank_t* k) {
  int32_t v = 41;
  double t0 = collTimeNow();
  if (k->rank == 0) {
    CALL(k, collSend(&v, 1, collInt32, 1, k->comm, NULL));
    CALL(k, collRecv(&v, 1, collInt32, 1, k->comm, NULL));
    if (v != 43) wrong(k, "ping-pong got %d, want 43", v);
  } else if (k->rank == 1) {
    CALL(k, collRecv(&v, 1, collInt32, 0, k->comm, NULL));
    v += 2;
    CALL(k, collSend(&v, 1, collInt32, 0, k->comm, NULL));
  }
  k->secs = collTimeNow() - t0;
  return 0;
}

static void test_fault_delay(void** st) {
  (void)st;
  team_t t;
  teamInit(&t, 3);
  teamRun(&t, pingPong); /* connect without delay */
  teamCheck(&t);
  collLoopbackSetFault(COLL_LB_FAULT_DELAY, 30000); /* 30 ms */
  teamRun(&t, pingPong);
  teamCheck(&t);
  assert_true(t.r[0].secs >= 0.059); /* two messages, one after the other */
  assert_true(t.r[0].secs < 5.0);
  collLoopbackSetFault(COLL_LB_FAULT_DELAY, 200);
  teamRun(&t, bigAllReduce);
  collLoopbackSetFault(COLL_LB_FAULT_NONE, 0);
  teamCheck(&t);
  teamDestroy(&t);
}

/* Oversize receive through the engine, comms made per thread with a 2 s
 * timeout: rank 0 sends 100 elements, rank 1 receives 64: a mismatched call
 * on the receiver (collInvalidUsage naming both counts), nothing written. */
typedef struct {
  collUniqueId id;
  int rank;
  collResult_t init, res;
  char msg[600];
  int32_t buf[64 + 16];
} ovArg;

static void* ovThread(void* p) {
  ovArg* a = p;
  collConfig_t cfg = COLL_CONFIG_INITIALIZER;
  cfg.timeoutSec = 2;
  collComm_t comm = NULL;
  if ((a->init = collCommInitRankConfig(&comm, 2, a->id, a->rank, &cfg)) != collSuccess) return NULL;
  if (a->rank == 0) {
    int32_t src[100];
    for (int i = 0; i < 100; i++) src[i] = i;
    a->res = collSend(src, 100, collInt32, 1, comm, NULL);
  } else {
    a->res = collRecv(a->buf, 64, collInt32, 0, comm, NULL);
  }
  snprintf(a->msg, sizeof a->msg, "%s", collGetLastError(NULL));
  collCommDestroy(comm);
  return NULL;
}

static void test_oversize_recv(void** st) {
  (void)st;
  for (int rdv = 0; rdv < 2; rdv++) {
    collLoopbackSetEagerLimit(rdv ? 64 : COLL_LB_EAGER_DEFAULT);
    ovArg a[2];
    memset(a, 0, sizeof a);
    assert_int_equal(collGetUniqueId(&a[0].id), collSuccess);
    a[1].id = a[0].id;
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
      a[i].rank = i;
      memset(a[i].buf, 0x77, sizeof a[i].buf);
      assert_int_equal(pthread_create(&th[i], NULL, ovThread, &a[i]), 0);
    }
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_join(th[i], NULL), 0);
    print_message("%s: rank 0 %s (%s); rank 1 %s (%s)\n", rdv ? "rendezvous" : "eager",
                  collGetErrorString(a[0].res), a[0].msg, collGetErrorString(a[1].res), a[1].msg);
    assert_int_equal(a[0].init, collSuccess);
    assert_int_equal(a[1].init, collSuccess);
    /* the receiver names both transfers (the tag of the refused message) */
    assert_int_equal(a[1].res, collInvalidUsage);
    assert_non_null(strstr(a[1].msg, "sent 100 x int32, this rank's receive from rank 0 expects 64 x int32"));
    for (size_t i = 0; i < sizeof a[1].buf; i++) assert_int_equal(((uint8_t*)a[1].buf)[i], 0x77);
    /* eager: the send completed before the receiver looked; rendezvous: the
     * receiver's rejection fails it */
    if (rdv) assert_int_equal(a[0].res, collRemoteError);
    else assert_true(a[0].res == collSuccess || a[0].res == collRemoteError || a[0].res == collTimeout);
  }
  collLoopbackSetEagerLimit(COLL_LB_EAGER_DEFAULT);
  LIVE(0);
}

int main(void) {
  setenv("COLL_NET", "loopback", 1);
  setenv("COLL_SOCKET_IFNAME", "lo", 1);
  setenv("COLL_CHUNKSIZE", "4096", 1);
  setenv("COLL_SHM_DISABLE", "1", 1); /* ranks share a node: keep shm off the data path */
  alarm(120); /* watchdog: a hang fails the run */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_table, setBase),
      cmocka_unit_test_setup(test_fifo, setBase),
      cmocka_unit_test_setup(test_tags, setBase),
      cmocka_unit_test_setup(test_oversize_transport, setBase),
      cmocka_unit_test_setup(test_retry_when_full, setBase),
      cmocka_unit_test_setup(test_close, setBase),
      cmocka_unit_test_setup(test_handles, setBase),
      cmocka_unit_test_setup(test_pollfd, setBase),
      cmocka_unit_test_setup(test_two_threads, setBase),
      cmocka_unit_test_setup(test_coll_n1, setBase),
      cmocka_unit_test_setup(test_coll_n2, setBase),
      cmocka_unit_test_setup(test_coll_n3, setBase),
      cmocka_unit_test_setup(test_coll_n5, setBase),
      cmocka_unit_test_setup(test_coll_n8, setBase),
      cmocka_unit_test_setup(test_coll_rendezvous_n3, setBase),
      cmocka_unit_test_setup(test_coll_rendezvous_n8, setBase),
      cmocka_unit_test_setup(test_fault_drop, setBase),
      cmocka_unit_test_setup(test_fault_delay, setBase),
      cmocka_unit_test_setup(test_oversize_recv, setBase),
  };
  return cmocka_run_group_tests_name("loopback", tests, NULL, NULL);
}
