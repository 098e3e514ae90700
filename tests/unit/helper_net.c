/*
 * helper_net.c - shared transport-test helpers (see net_testlib.h). Linked
 * into every unit test; depends only on coll_net.h, cmocka, libc, pthreads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "net_testlib.h"

/* ---- byte patterns ------------------------------------------------------ */

uint8_t netPat(size_t i, unsigned seed) { return (uint8_t)(i * 131u + seed * 7u + (i >> 9)); }

void netFill(uint8_t* b, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) b[i] = netPat(i, seed);
}

int netCheck(const uint8_t* b, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    if (b[i] != netPat(i, seed)) return 0;
  return 1;
}

/* ---- one connection ----------------------------------------------------- */

void* netAcceptOne(const collNet_t* net, void* l) {
  void* rc = NULL;
  for (int i = 0; i < 5000 && !rc; i++) {
    if (net->accept(l, &rc) != collSuccess) return NULL;
    if (!rc) usleep(1000);
  }
  return rc;
}

void netMakePair(const collNet_t* net, netPair_t* p) {
  char handle[COLL_NET_HANDLE_BYTES];
  assert_int_equal(net->listen(0, handle, &p->listen), collSuccess);
  assert_non_null(p->listen);
  assert_int_equal(net->connect(0, handle, &p->send), collSuccess);
  assert_non_null(p->send);
  p->recv = netAcceptOne(net, p->listen);
  assert_non_null(p->recv);
}

void netClosePair(const collNet_t* net, netPair_t* p) {
  assert_int_equal(net->closeSend(p->send), collSuccess);
  assert_int_equal(net->closeRecv(p->recv), collSuccess);
  assert_int_equal(net->closeListen(p->listen), collSuccess);
}

collResult_t netWaitReq(const collNet_t* net, void* req, size_t* size) {
  int done = 0;
  for (;;) {
    collResult_t r = net->test(req, &done, size, NULL);
    if (r != collSuccess || done) return r;
  }
}

collResult_t netWaitPoll(const collNet_t* net, void* comm, void* req, size_t* size, int isSend,
                         int* lostWakeups) {
  int done = 0;
  for (;;) {
    collResult_t r = net->test(req, &done, size, NULL);
    if (r != collSuccess || done) return r;
    int fd = -1;
    if (net->getPollFd(comm, &fd) != collSuccess || fd < 0) return collInternalError;
    struct pollfd p = {fd, isSend ? POLLOUT : POLLIN, 0};
    /* A lost wake-up leaves the fd quiet: poll times out (the transport's
     * periodic dead-peer check needs the timeout). A poll that was woken but
     * returned late (a loaded or sanitized run) is not one, and neither is a
     * peer that did not run for a second (a loaded machine): it is lost only
     * if the peer moved meanwhile. Arming the fd again shows that: it wakes
     * itself at once when the peer's counters differ from the last ones seen
     * (shm's shmArm; a socket is readable/writable then). */
    if (poll(&p, 1, 1000) == 0 && lostWakeups) {
      if (net->getPollFd(comm, &fd) != collSuccess || fd < 0) return collInternalError;
      struct pollfd q = {fd, isSend ? POLLOUT : POLLIN, 0};
      if (poll(&q, 1, 0) > 0) (*lostWakeups)++;
    }
  }
}

void* netPost(const collNet_t* net, void* comm, int isSend, void* buf, size_t n) {
  void* req = NULL;
  while (!req) {
    collResult_t r = isSend ? net->isend(comm, buf, n, 0, NULL, &req) : net->irecv(comm, buf, n, 0, NULL, &req);
    if (r != collSuccess) return NULL;
  }
  return req;
}

void* netPostOk(const collNet_t* net, void* comm, int isSend, void* buf, size_t n) {
  void* req = netPost(net, comm, isSend, buf, n);
  assert_non_null(req);
  return req;
}

/* ---- streams ------------------------------------------------------------ */

netStream_t netStreamInit(const collNet_t* net, const netStreamOpts_t* opts, void* comm, int count,
                          const size_t* sizes, unsigned seed) {
  netStream_t s = {net, *opts, comm, count, sizes, seed, 0, 0};
  return s;
}

size_t netStreamSize(const netStream_t* s, int k) {
  if (s->sizes) return s->sizes[k];
  if (k % 50 == 49) return s->opts.bigBase + (size_t)k;
  return ((size_t)k * 37u) % 5000u;
}

static collResult_t streamWait(netStream_t* s, void* req, size_t* n, int isSend) {
  if (s->opts.usePoll) return netWaitPoll(s->net, s->comm, req, n, isSend, &s->lostWakeups);
  return netWaitReq(s->net, req, n);
}

void* netSendStream(void* arg) {
  netStream_t* s = arg;
  enum { W = 64 };
  void* reqs[W];
  uint8_t* bufs[W];
  int head = 0;
  for (int k = 0; k < s->count; k++) {
    if (k - head == W) {
      size_t n = 0;
      if (streamWait(s, reqs[head % W], &n, 1) != collSuccess || n != netStreamSize(s, head)) s->errors++;
      free(bufs[head % W]);
      head++;
    }
    size_t n = netStreamSize(s, k);
    bufs[k % W] = malloc(n ? n : 1);
    netFill(bufs[k % W], n, s->seed0 + (unsigned)k);
    reqs[k % W] = netPost(s->net, s->comm, 1, bufs[k % W], n);
    if (!reqs[k % W]) {
      s->errors++;
      free(bufs[k % W]);
      for (; head < k; head++) free(bufs[head % W]);
      return NULL;
    }
  }
  for (; head < s->count; head++) {
    size_t n = 0;
    if (streamWait(s, reqs[head % W], &n, 1) != collSuccess || n != netStreamSize(s, head)) s->errors++;
    free(bufs[head % W]);
  }
  return NULL;
}

/* Waits for received message k and checks its bytes and 8 guard bytes. */
static void finishRecv(netStream_t* s, void* req, uint8_t* buf, int k) {
  size_t n = 99, want = netStreamSize(s, k);
  if (streamWait(s, req, &n, 0) != collSuccess || n != want || !netCheck(buf, want, s->seed0 + (unsigned)k))
    s->errors++;
  for (int g = 0; g < 8; g++)
    if (buf[want + (size_t)g] != 0xEE) s->errors++;
  free(buf);
}

void* netRecvStream(void* arg) {
  netStream_t* s = arg;
  enum { W = 64 };
  void* reqs[W];
  uint8_t* bufs[W];
  int head = 0;
  for (int k = 0; k < s->count; k++) {
    if (k - head == W) { finishRecv(s, reqs[head % W], bufs[head % W], head); head++; }
    size_t n = netStreamSize(s, k);
    bufs[k % W] = malloc(n + 8);
    memset(bufs[k % W], 0xEE, n + 8);
    reqs[k % W] = netPost(s->net, s->comm, 0, bufs[k % W], n);
    if (!reqs[k % W]) {
      s->errors++;
      free(bufs[k % W]);
      for (; head < k; head++) free(bufs[head % W]);
      return NULL;
    }
  }
  for (; head < s->count; head++) finishRecv(s, reqs[head % W], bufs[head % W], head);
  return NULL;
}

void netRunStream(const collNet_t* net, const netStreamOpts_t* opts, netPair_t* p, int count,
                  const size_t* sizes, unsigned seed) {
  netStream_t tx = netStreamInit(net, opts, p->send, count, sizes, seed);
  netStream_t rx = netStreamInit(net, opts, p->recv, count, sizes, seed);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, netSendStream, &tx), 0);
  netRecvStream(&rx);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(tx.errors, 0);
  assert_int_equal(rx.errors, 0);
  assert_int_equal(tx.lostWakeups + rx.lostWakeups, 0);
}

/* ---- shared checks and test bodies -------------------------------------- */

void netCheckTable(const collNet_t* net, const char* name, const char* devName,
                   collNetProperties_t* p) {
  int ndev = 0;
  assert_int_equal(net->version, COLL_NET_VERSION);
  assert_int_equal(net->size, sizeof(collNet_t));
  assert_string_equal(net->name, name);
  void* const* fns = (void* const*)&net->init; /* every operation is present */
  for (size_t i = 0; i < (sizeof(collNet_t) - offsetof(collNet_t, init)) / sizeof(void*); i++)
    assert_non_null(fns[i]);
  assert_int_equal(net->init(NULL), collSuccess);
  assert_int_equal(net->devices(&ndev), collSuccess);
  assert_int_equal(ndev, 1);
  assert_int_equal(net->getProperties(0, p), collSuccess);
  assert_string_equal(p->name, devName);
  assert_int_equal(p->ptrSupport, COLL_PTR_HOST);
  assert_int_equal(p->hasPut, 0);
  assert_true(p->maxMessage == SIZE_MAX);
  collNetProperties_t other;
  assert_int_equal(net->getProperties(1, &other), collInvalidArgument);
}

void netCheckStubs(const collNet_t* net, netPair_t* q) {
  void* mh = NULL;
  char buf[8];
  assert_int_equal(net->regMr(q->send, buf, 8, COLL_PTR_HOST, &mh), collSuccess);
  assert_non_null(mh);
  assert_int_equal(net->regMr(q->send, buf, 8, COLL_PTR_CUDA, &mh), collInvalidArgument);
  void* dmh = (void*)1; /* host transports take no dma-buf; the handle stays untouched */
  assert_int_equal(net->regMrDmaBuf(q->send, buf, 8, COLL_PTR_CUDA, 0, 0, &dmh), collInvalidUsage);
  assert_non_null(strstr(collGetLastError(NULL), "regMrDmaBuf not supported"));
  assert_ptr_equal(dmh, (void*)1);
  void* req = (void*)1;
  assert_int_equal(net->iput(q->send, buf, 8, mh, 0, 0, &req), collInvalidUsage);
  assert_null(req);
  req = (void*)1;
  assert_int_equal(net->iflush(q->recv, buf, 8, mh, &req), collSuccess);
  assert_null(req); /* nothing to wait for */
  assert_int_equal(net->deregMr(q->send, mh), collSuccess); /* after its last use above */
  assert_int_equal(net->isend(q->recv, buf, 8, 0, NULL, &req), collInvalidUsage); /* wrong side */
}

void netTestManyInFlight(const collNet_t* net, const netStreamOpts_t* opts) {
  netPair_t q;
  netMakePair(net, &q);
  netRunStream(net, opts, &q, 600, NULL, 1000);
  netClosePair(net, &q);
}

void netTestTestDrivesEarlier(const collNet_t* net) {
  netPair_t q;
  netMakePair(net, &q);
  enum { K = 8 };
  uint8_t out[K][3000], in[K][4000];
  void *sr[K], *rr[K];
  for (int k = 0; k < K; k++) {
    netFill(out[k], sizeof out[k], (unsigned)k);
    memset(in[k], 0xEE, sizeof in[k]);
    rr[k] = netPostOk(net, q.recv, 0, in[k], sizeof in[k]);
  }
  for (int k = 0; k < K; k++) sr[k] = netPostOk(net, q.send, 1, out[k], 1000 + (size_t)k * 100);
  size_t n = 0;
  assert_int_equal(netWaitReq(net, sr[K - 1], &n), collSuccess);
  assert_int_equal(n, 1700);
  assert_int_equal(netWaitReq(net, rr[K - 1], &n), collSuccess);
  assert_int_equal(n, 1700);
  for (int k = 0; k < K - 1; k++) {
    int done = 0;
    assert_int_equal(net->test(sr[k], &done, &n, NULL), collSuccess);
    assert_int_equal(done, 1);
    assert_int_equal(net->test(rr[k], &done, &n, NULL), collSuccess);
    assert_int_equal(done, 1);
    assert_int_equal(n, 1000 + (size_t)k * 100);
  }
  for (int k = 0; k < K; k++) {
    size_t len = 1000 + (size_t)k * 100;
    assert_true(netCheck(in[k], len, (unsigned)k));
    assert_int_equal(in[k][len], 0xEE);
  }
  netClosePair(net, &q);
}

void netFillRequestPool(const collNet_t* net, void* comm, void** r, int maxRequests) {
  for (int k = 0; k < maxRequests; k++) {
    r[k] = NULL;
    assert_int_equal(net->isend(comm, NULL, 0, 0, NULL, &r[k]), collSuccess);
    assert_non_null(r[k]);
  }
  void* extra = (void*)1;
  assert_int_equal(net->isend(comm, NULL, 0, 0, NULL, &extra), collSuccess);
  assert_null(extra);
}

void netCheckOversize(const collNet_t* net, netPair_t* q) {
  uint8_t out[100], in[64 + 16];
  netFill(out, sizeof out, 3);
  memset(in, 0xEE, sizeof in);
  size_t n = 0;
  assert_int_equal(netWaitReq(net, netPostOk(net, q->send, 1, out, sizeof out), &n), collSuccess);
  assert_int_equal(n, 100);
  void* r = netPostOk(net, q->recv, 0, in, 64);
  assert_int_equal(netWaitReq(net, r, &n), collRemoteError);
  assert_non_null(strstr(collGetLastError(NULL), "peer sent 100 bytes, receiver posted 64"));
  for (size_t i = 0; i < sizeof in; i++) assert_int_equal(in[i], 0xEE);
  void* again = NULL;
  assert_int_equal(net->irecv(q->recv, in, 64, 0, NULL, &again), collRemoteError); /* sticky */
  assert_null(again);
}

void netTestPeerCloseSend(const collNet_t* net, size_t evenSize, const char* errSubstr) {
  netPair_t q;
  netMakePair(net, &q);
  assert_int_equal(net->closeRecv(q.recv), collSuccess);
  const size_t n = 1u << 20;
  uint8_t* buf = calloc(1, n);
  collResult_t r = collSuccess;
  for (int i = 0; i < 64 && r == collSuccess; i++) {
    size_t sz;
    void* req = NULL;
    r = net->isend(q.send, buf, i % 2 ? n : evenSize, 0, NULL, &req);
    if (r == collSuccess) r = netWaitReq(net, req, &sz);
  }
  assert_int_equal(r, collRemoteError);
  if (errSubstr) assert_non_null(strstr(collGetLastError(NULL), errSubstr));
  free(buf);
  assert_int_equal(net->closeSend(q.send), collSuccess);
  assert_int_equal(net->closeListen(q.listen), collSuccess);
}

void netTestTags(const collNet_t* net, size_t bigSize) {
  netPair_t q;
  netMakePair(net, &q);
  static const uint64_t tags[] = {0, ~0ull, 0x0123456789abcdefull};
  const size_t sizes[] = {0, 5, bigSize};
  uint8_t* out = malloc(bigSize + 1);
  uint8_t* in = malloc(bigSize + 1);
  assert_non_null(out);
  assert_non_null(in);
  for (int k = 0; k < 3; k++) {
    netFill(out, sizes[k], (unsigned)k);
    void *s = NULL, *r = NULL;
    while (!s) assert_int_equal(net->isend(q.send, out, sizes[k], tags[k], NULL, &s), collSuccess);
    while (!r) assert_int_equal(net->irecv(q.recv, in, bigSize, 0x5555, NULL, &r), collSuccess);
    int sd = 0, rd = 0;
    size_t sn = 0, rn = 0;
    uint64_t st = 1, rt = 1;
    while (!sd || !rd) {
      if (!sd) assert_int_equal(net->test(s, &sd, &sn, &st), collSuccess);
      if (!rd) assert_int_equal(net->test(r, &rd, &rn, &rt), collSuccess);
    }
    assert_int_equal(sn, sizes[k]);
    assert_int_equal(rn, sizes[k]);
    assert_true(st == tags[k]);
    assert_true(rt == tags[k]);
    assert_true(netCheck(in, sizes[k], (unsigned)k));
  }
  free(out);
  free(in);
  netClosePair(net, &q);
}
