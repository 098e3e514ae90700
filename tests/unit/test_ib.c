/*
 * test_ib.c - the ib transport on the fake verbs device (ibfake.h): the
 * shared transport checks (net_testlib.h), then the QP state machine and what
 * the peers exchange, round-robin over several QPs, messages split at the
 * port's maximum, error completions, async events, GID and HCA choice, the
 * registration cache, the wake-up fd, connection setup without accept, and
 * garbage on the listen socket. Every test ends with every QP, CQ and MR
 * released and no misuse of the verbs API seen by the fake.
 *
 * With COLL_TEST_IB_REAL=1 the same tests run on the machine's real device
 * instead (one port, named by COLL_TEST_IB_DEV, default rxe0: what
 * tests/rdma/guest_suite.sh does inside a Soft-RoCE guest); those that need
 * the fake's fault injection or bookkeeping are skipped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ibfake.h"
#include "misc/log.h"
#include "misc/socket.h"
#include "net_testlib.h"
#include "transports/ib/ib.h"
#include "transports/ib/ib_internal.h"

static const collNet_t* net = &collNetIb;
static int real; /* COLL_TEST_IB_REAL=1: the machine's device, no fake */
#define FAKE_ONLY() \
  do {              \
    if (real) skip(); \
  } while (0)

/* Installs devs, loads the config, lets tweak() change it, starts. */
static collResult_t startWith(const ibFakeDevSpec* devs, int n, void (*tweak)(collIbConfig*)) {
  if (!real) ibFakeInstall(devs, n);
  collIbConfigLoad(&collIbCfg);
  if (tweak) tweak(&collIbCfg);
  return collIbStart();
}
static void start1(void) {
  ibFakeDevSpec d = ibFakeRxe("fake0", 1, IBV_MTU_1024);
  assert_int_equal(startWith(&d, 1, NULL), collSuccess);
}
/* Closes the transport and checks that the fake saw every object released
 * and no misuse. */
static void stop(void) {
  assert_int_equal(net->fini(), collSuccess);
  if (real) return;
  ibFakeStats st;
  ibFakeGetStats(&st);
  assert_string_equal(st.violation, "");
  assert_int_equal(st.liveQps, 0);
  assert_int_equal(st.liveCqs, 0);
  assert_int_equal(st.liveMrs, 0);
  ibFakeUninstall();
}

static collIbComm* ibc(void* c) { return c; }

/* Sends n bytes from out and receives into in (posted cap bytes), both
 * waited for; returns the receiver's result. */
static collResult_t xfer(netPair_t* p, const void* out, size_t n, void* in, size_t cap, size_t* got) {
  void *s = NULL, *r = NULL;
  while (!r) assert_int_equal(net->irecv(p->recv, in, cap, 0, NULL, &r), collSuccess);
  while (!s) assert_int_equal(net->isend(p->send, out, n, 0, NULL, &s), collSuccess);
  int sd = 0, rd = 0;
  collResult_t rr = collSuccess;
  for (int i = 0; i < 10000000 && (!sd || !rd); i++) {
    if (!sd) assert_int_equal(net->test(s, &sd, NULL, NULL), collSuccess);
    if (!rd && (rr = net->test(r, &rd, got, NULL)) != collSuccess) break;
  }
  return rr;
}

/* ---- the shared checks ---------------------------------------------------- */

static void test_table(void** st) {
  (void)st;
  start1();
  collNetProperties_t p;
  const char* dev = getenv("COLL_TEST_IB_DEV");
  netCheckTable(net, "ib", real ? (dev ? dev : "rxe0") : "fake0", &p);
  assert_int_equal(p.port, 1);
  assert_true(p.speedGbps > 0);
  if (!real) {
    assert_true(p.speedGbps == 2.5);
    assert_true(p.guid == 0x0200000000000001ull);
    assert_string_equal(p.pciPath, "");
  }
  stop();
}

static void test_stubs(void** st) {
  (void)st;
  start1();
  netPair_t q;
  netMakePair(net, &q);
  netCheckStubs(net, &q);
  netClosePair(net, &q);
  stop();
}

static void test_many_in_flight(void** st) {
  (void)st;
  start1();
  netStreamOpts_t o = {200000, 0}; /* every 50th message ~200 KB: split into 64 KiB writes */
  netTestManyInFlight(net, &o);
  stop();
}

static void test_drives_earlier(void** st) {
  (void)st;
  start1();
  netTestTestDrivesEarlier(net);
  stop();
}

static void test_tags(void** st) {
  (void)st;
  start1();
  netTestTags(net, 100000);
  stop();
}

static void test_oversize(void** st) {
  (void)st;
  start1();
  netPair_t q;
  netMakePair(net, &q);
  netCheckOversize(net, &q); /* eager: sent before the receive was posted */
  netClosePair(net, &q);
  /* a large message into a smaller posted buffer: nothing written */
  netMakePair(net, &q);
  const size_t n = 10000, cap = 8000;
  uint8_t* out = malloc(n);
  uint8_t* in = malloc(cap + 64);
  netFill(out, n, 5);
  memset(in, 0xEE, cap + 64);
  size_t got = 0;
  assert_int_equal(xfer(&q, out, n, in, cap, &got), collRemoteError);
  assert_non_null(strstr(collGetLastError(NULL), "peer sent 10000 bytes, receiver posted 8000"));
  for (size_t i = 0; i < cap + 64; i++) assert_int_equal(in[i], 0xEE);
  free(out);
  free(in);
  netClosePair(net, &q);
  stop();
}

/* Eager messages that arrived before their receive was posted, while the
 * receiver polled for an earlier one, complete when posted. */
static void test_eager_before_post(void** st) {
  (void)st;
  start1();
  netPair_t q;
  netMakePair(net, &q);
  for (int k = 0; k < 3; k++) {
    void* s = NULL;
    char m[2] = {(char)('a' + k), 0};
    assert_int_equal(net->isend(q.send, m, 2, (uint64_t)k, NULL, &s), collSuccess);
    assert_int_equal(netWaitReq(net, s, NULL), collSuccess);
  }
  for (int k = 0; k < 3; k++) {
    char b[8] = {0};
    void* r = NULL;
    assert_int_equal(net->irecv(q.recv, b, sizeof b, 0, NULL, &r), collSuccess);
    int done = 0;
    size_t got = 0;
    uint64_t tag = 99;
    for (int i = 0; i < 1000 && !done; i++) assert_int_equal(net->test(r, &done, &got, &tag), collSuccess);
    assert_int_equal(done, 1);
    assert_int_equal(got, 2);
    assert_int_equal(tag, k);
    assert_int_equal(b[0], 'a' + k);
  }
  netClosePair(net, &q);
  stop();
}

/* An eager send is done as soon as it is written out, before its write ran
 * (held in the fake) or was acknowledged: waiting for the acknowledgement
 * added a round trip to every small send (2.2 ms between two Soft-RoCE
 * guests). Its bytes were copied: the sender may change its buffer at once.
 * Closing the send comm right after lets the write finish first. */
static void test_eager_done_before_ack(void** st) {
  (void)st;
  FAKE_ONLY();
  start1();
  netPair_t q;
  netMakePair(net, &q);
  char buf[64];
  size_t got = 0;
  assert_int_equal(xfer(&q, "a", 1, buf, sizeof buf, &got), collSuccess); /* connected */
  ibFakeHold(1);
  char m[16] = "eager-copy";
  void* s = NULL;
  assert_int_equal(net->isend(q.send, m, 11, 5, NULL, &s), collSuccess);
  int done = 0;
  assert_int_equal(net->test(s, &done, NULL, NULL), collSuccess);
  assert_int_equal(done, 1);
  ibFakeStats fs;
  ibFakeGetStats(&fs);
  uint64_t writes = fs.writes;
  memset(m, 'X', sizeof m);
  ibFakeHold(0);
  assert_int_equal(net->closeSend(q.send), collSuccess); /* the queued write runs first */
  q.send = NULL;
  ibFakeGetStats(&fs);
  /* the record (unsignaled) and the signaled zero-byte marker that the
   * close posted to learn that it completed */
  assert_int_equal(fs.writes, writes + 2);
  void* r = NULL;
  memset(buf, 0, sizeof buf);
  uint64_t tag = 0;
  assert_int_equal(net->irecv(q.recv, buf, sizeof buf, 5, NULL, &r), collSuccess);
  done = 0;
  for (int i = 0; i < 100000 && !done; i++) assert_int_equal(net->test(r, &done, &got, &tag), collSuccess);
  assert_int_equal(done, 1);
  assert_int_equal(got, 11);
  assert_int_equal(tag, 5);
  assert_string_equal(buf, "eager-copy");
  netClosePair(net, &q);
  stop();
}

/* A message larger than a small posted buffer: the receiver sends no
 * clear-to-send for small buffers, so the sender's request-to-send tells it,
 * and it fails at once with both sizes; nothing is written. test reports the
 * sender's tag (the engine names the mismatched call from it). */
static void test_small_posted_large_sent(void** st) {
  (void)st;
  start1();
  netPair_t q;
  netMakePair(net, &q);
  uint8_t in[64 + 16];
  memset(in, 0xEE, sizeof in);
  const size_t n = 20000;
  uint8_t* out = malloc(n);
  netFill(out, n, 1);
  void *r = NULL, *s = NULL;
  assert_int_equal(net->irecv(q.recv, in, 64, 0, NULL, &r), collSuccess);
  const uint64_t tag = 0x5EC0000000000ABCull;
  assert_int_equal(net->isend(q.send, out, n, tag, NULL, &s), collSuccess);
  double t0 = collTimeNow();
  collResult_t rr = collSuccess;
  int rd = 0, sd = 0;
  uint64_t rtag = 0;
  while (rr == collSuccess && !rd && collTimeNow() - t0 < 5) {
    rr = net->test(r, &rd, NULL, &rtag);
    if (!sd) assert_int_equal(net->test(s, &sd, NULL, NULL), collSuccess);
  }
  assert_int_equal(rr, collRemoteError);
  assert_true(collTimeNow() - t0 < 1.0);
  assert_non_null(strstr(collGetLastError(NULL), "peer sent 20000 bytes, receiver posted 64"));
  assert_int_equal(rtag, tag);
  for (size_t i = 0; i < sizeof in; i++) assert_int_equal(in[i], 0xEE);
  free(out);
  netClosePair(net, &q); /* the send is still waiting */
  stop();
}

/* Small receives send no clear-to-send; the receiver renews the sender's
 * eager credit with a zero-byte write each half window: 200 messages of 8
 * bytes, one after the other, take 6 (at 32, 64, ... 192 consumed), and all
 * arrive. */
static void test_small_messages_credit(void** st) {
  (void)st;
  start1();
  netPair_t q;
  netMakePair(net, &q);
  ibFakeStats fs0, fs1;
  ibFakeGetStats(&fs0);
  for (int k = 0; k < 200; k++) {
    uint64_t v = 0x1000u + (uint64_t)k, got = 0;
    size_t n = 0;
    assert_int_equal(xfer(&q, &v, sizeof v, &got, sizeof got, &n), collSuccess);
    assert_int_equal(n, 8);
    assert_true(got == v);
  }
  if (!real) {
    ibFakeQpInfo qi;
    assert_int_equal(ibFakeGetQp(ibc(q.recv)->qp[0]->qp_num, &qi), 0);
    assert_int_equal(qi.records, 6);
    assert_int_equal(ibFakeGetQp(ibc(q.send)->qp[0]->qp_num, &qi), 0);
    assert_int_equal(qi.records, 200); /* one write per message */
    /* eager records and credits are unsignaled but every IB_SIG_EVERY-th
     * (32) of a QP: the sender's 32nd, 64th, ..., 192nd; none of the
     * receiver's 6 credit writes (every record used to be signaled: 206) */
    ibFakeGetStats(&fs1);
    assert_int_equal(fs1.sendCqes - fs0.sendCqes, 6);
  }
  netClosePair(net, &q);
  stop();
}

/* Clear-to-send entries the sender finds stale must not starve it of eager
 * credit: messages 1..63 go eager, each while its (large) receive writes a
 * CTS entry that arrives after it (held in the fake, then run in order);
 * then message 64, which needs credit, goes to a small receive (which
 * writes no CTS): the receiver's credit write lets it through. */
static void test_stale_cts_credit(void** st) {
  (void)st;
  FAKE_ONLY();
  start1();
  netPair_t q;
  netMakePair(net, &q);
  char b0[8];
  size_t got;
  assert_int_equal(xfer(&q, "c", 1, b0, sizeof b0, &got), collSuccess); /* message 0: connected */
  static uint8_t msg[64][100], big[64][20000];
  void *s[65], *r[65];
  for (int k = 1; k <= 63; k++) { /* one by one: each CTS carries consumed = k, and arrives stale */
    memset(msg[k - 1], k, 100);
    ibFakeHold(1);
    s[k] = netPostOk(net, q.send, 1, msg[k - 1], 100);
    r[k] = netPostOk(net, q.recv, 0, big[k], sizeof big[k]);
    ibFakeHold(0);
    assert_int_equal(netWaitReq(net, r[k], &got), collSuccess);
    assert_int_equal(got, 100);
    assert_int_equal(big[k][99], k);
    assert_int_equal(netWaitReq(net, s[k], NULL), collSuccess);
  }
  memset(msg[63], 64, 100);
  s[64] = netPostOk(net, q.send, 1, msg[63], 100);
  uint8_t small[100] = {0};
  r[64] = netPostOk(net, q.recv, 0, small, sizeof small);
  int sd = 0, rd = 0;
  for (int i = 0; i < 100000 && (!sd || !rd); i++) {
    if (!sd) assert_int_equal(net->test(s[64], &sd, NULL, NULL), collSuccess);
    if (!rd) assert_int_equal(net->test(r[64], &rd, &got, NULL), collSuccess);
  }
  assert_int_equal(sd, 1);
  assert_int_equal(rd, 1);
  assert_int_equal(small[0], 64);
  netClosePair(net, &q);
  stop();
}

static void test_peer_close_send(void** st) {
  (void)st;
  start1();
  netTestPeerCloseSend(net, 0, "ib:");
  netTestPeerCloseSend(net, 3000, "ib:");
  stop();
}

static void test_peer_close_recv(void** st) {
  (void)st;
  start1();
  netPair_t q;
  netMakePair(net, &q);
  char buf[64];
  size_t got;
  assert_int_equal(xfer(&q, "hello", 5, buf, sizeof buf, &got), collSuccess);
  assert_int_equal(got, 5);
  void* r = NULL;
  assert_int_equal(net->irecv(q.recv, buf, sizeof buf, 0, NULL, &r), collSuccess);
  assert_non_null(r);
  int done = 0;
  assert_int_equal(net->test(r, &done, NULL, NULL), collSuccess); /* the clear-to-send goes out */
  assert_int_equal(done, 0);
  assert_int_equal(net->closeSend(q.send), collSuccess);
  double t0 = collTimeNow();
  assert_int_equal(netWaitReq(net, r, &got), collRemoteError);
  assert_true(collTimeNow() - t0 < 2.0);
  assert_non_null(strstr(collGetLastError(NULL), "closed its side channel"));
  assert_int_equal(net->closeRecv(q.recv), collSuccess);
  assert_int_equal(net->closeListen(q.listen), collSuccess);
  stop();
}

static void test_request_pool(void** st) {
  (void)st;
  start1();
  netPair_t q;
  netMakePair(net, &q);
  void* r[COLL_IB_MAX_REQUESTS];
  netFillRequestPool(net, q.send, r, COLL_IB_MAX_REQUESTS);
  netClosePair(net, &q); /* with every request still outstanding */
  stop();
}

/* ---- QP states and what the peers exchange --------------------------------- */

static void tweakQp(collIbConfig* c) {
  c->tc = 0x68; /* DSCP 26 */
  c->sl = 3;
  c->timeout = 14;
  c->retryCnt = 5;
}

static void checkQp(collIbComm* me, collIbComm* peer, int i, enum ibv_mtu mtu, const ibFakeDevSpec* peerDev) {
  ibFakeQpInfo qi;
  assert_int_equal(ibFakeGetQp(me->qp[i]->qp_num, &qi), 0);
  assert_int_equal(qi.state, IBV_QPS_RTS);
  assert_int_equal(qi.port, 1);
  assert_int_equal(qi.rtr.path_mtu, mtu);
  assert_int_equal(qi.rtr.dest_qp_num, peer->qp[i]->qp_num);
  assert_int_equal(qi.rtr.rq_psn, peer->mine.psn);
  assert_int_equal(qi.rts.sq_psn, me->mine.psn);
  assert_int_equal(qi.rtr.max_dest_rd_atomic, 1);
  assert_int_equal(qi.rtr.min_rnr_timer, 12);
  assert_int_equal(qi.rts.timeout, 14);
  assert_int_equal(qi.rts.retry_cnt, 5);
  assert_int_equal(qi.rts.rnr_retry, 7);
  assert_int_equal(qi.rtr.ah_attr.sl, 3);
  if (peerDev->ports[0].linkLayer == IBV_LINK_LAYER_ETHERNET) {
    assert_int_equal(qi.rtr.ah_attr.is_global, 1);
    assert_int_equal(qi.rtr.ah_attr.grh.sgid_index, 1); /* the IPv4 RoCE v2 GID */
    assert_int_equal(qi.rtr.ah_attr.grh.traffic_class, 0x68);
    assert_int_equal(qi.rtr.ah_attr.grh.hop_limit, 255);
    assert_memory_equal(qi.rtr.ah_attr.grh.dgid.raw, peerDev->ports[0].gids[1].raw, 16);
  } else {
    assert_int_equal(qi.rtr.ah_attr.is_global, 0);
    assert_int_equal(qi.rtr.ah_attr.dlid, peerDev->ports[0].lid);
  }
  assert_int_equal(qi.maxSendWr, IB_SQ_DEPTH);
  assert_int_equal(qi.maxRecvWr, IB_RQ_DEPTH);
}

/* Two HCAs (one per "node"), MTU 4096 and 1024: listen on dev 0, connect
 * from dev 1; the path MTU is the smaller. */
static void test_qp_states_roce(void** st) {
  (void)st;
  FAKE_ONLY();
  ibFakeDevSpec d[2] = {ibFakeRxe("fake0", 1, IBV_MTU_4096), ibFakeRxe("fake1", 2, IBV_MTU_1024)};
  assert_int_equal(startWith(d, 2, tweakQp), collSuccess);
  netPair_t q;
  char handle[COLL_NET_HANDLE_BYTES];
  assert_int_equal(net->listen(0, handle, &q.listen), collSuccess);
  assert_int_equal(net->connect(1, handle, &q.send), collSuccess);
  assert_int_equal(ibc(q.send)->state, IB_CONNECTING); /* before the listener answered */
  q.recv = netAcceptOne(net, q.listen);
  assert_non_null(q.recv);
  char buf[16];
  size_t got;
  assert_int_equal(xfer(&q, "x", 1, buf, sizeof buf, &got), collSuccess);
  checkQp(ibc(q.send), ibc(q.recv), 0, IBV_MTU_1024, &d[0]);
  checkQp(ibc(q.recv), ibc(q.send), 0, IBV_MTU_1024, &d[1]);
  assert_int_equal(ibc(q.recv)->dev->port, 1);
  assert_string_equal(ibc(q.recv)->dev->name, "fake0");
  assert_string_equal(ibc(q.send)->dev->name, "fake1");
  netClosePair(net, &q);
  stop();
}

static void test_qp_states_ib(void** st) {
  (void)st;
  FAKE_ONLY();
  ibFakeDevSpec d[2];
  memset(d, 0, sizeof d);
  d[0].name = "mlx5_0";
  d[0].nports = 1;
  d[0].ports[0] = ibFakeIbPort(5, IBV_MTU_4096);
  d[0].pci = "/sys/devices/pci0000:00/0000:00:02.0/0000:41:00.0";
  d[1] = d[0];
  d[1].name = "mlx5_1";
  d[1].ports[0] = ibFakeIbPort(9, IBV_MTU_2048);
  assert_int_equal(startWith(d, 2, tweakQp), collSuccess);
  collNetProperties_t p;
  assert_int_equal(net->getProperties(1, &p), collSuccess);
  assert_string_equal(p.name, "mlx5_1");
  assert_true(p.speedGbps == 100.0); /* 4x EDR */
  assert_string_equal(p.pciPath, d[0].pci);
  netPair_t q;
  char handle[COLL_NET_HANDLE_BYTES];
  assert_int_equal(net->listen(1, handle, &q.listen), collSuccess);
  assert_int_equal(net->connect(0, handle, &q.send), collSuccess);
  q.recv = netAcceptOne(net, q.listen);
  char buf[16];
  size_t got;
  assert_int_equal(xfer(&q, "x", 1, buf, sizeof buf, &got), collSuccess);
  checkQp(ibc(q.send), ibc(q.recv), 0, IBV_MTU_2048, &d[1]);
  checkQp(ibc(q.recv), ibc(q.send), 0, IBV_MTU_2048, &d[0]);
  netClosePair(net, &q);
  stop();
}

/* A RoCE port and an InfiniBand port cannot talk: the handshake says so. */
static void test_link_layer_mismatch(void** st) {
  (void)st;
  FAKE_ONLY();
  ibFakeDevSpec d[2] = {ibFakeRxe("fake0", 1, IBV_MTU_1024), ibFakeRxe("fake1", 2, IBV_MTU_1024)};
  d[1].ports[0] = ibFakeIbPort(3, IBV_MTU_1024);
  assert_int_equal(startWith(d, 2, NULL), collSuccess);
  char handle[COLL_NET_HANDLE_BYTES];
  void *l, *s, *r = NULL;
  assert_int_equal(net->listen(0, handle, &l), collSuccess);
  assert_int_equal(net->connect(1, handle, &s), collSuccess);
  for (int i = 0; i < 200 && !r; i++) {
    assert_int_equal(net->accept(l, &r), collSuccess);
    usleep(1000);
  }
  assert_null(r); /* the listener refused it */
  void* req = NULL;
  assert_int_equal(net->isend(s, "x", 1, 0, NULL, &req), collSuccess);
  assert_int_equal(netWaitReq(net, req, NULL), collRemoteError);
  assert_non_null(strstr(collGetLastError(NULL), "closed the connection during the handshake"));
  assert_int_equal(net->closeSend(s), collSuccess);
  assert_int_equal(net->closeListen(l), collSuccess);
  stop();
}

/* ---- several QPs, split messages ------------------------------------------- */

static void tweak3(collIbConfig* c) { c->nqps = 3; }

static void test_qps_round_robin(void** st) {
  (void)st;
  ibFakeDevSpec d = ibFakeRxe("fake0", 1, IBV_MTU_1024);
  assert_int_equal(startWith(&d, 1, tweak3), collSuccess);
  netPair_t q;
  netMakePair(net, &q);
  static const size_t sizes[9] = {1, 70000, 3, 5000, 4096, 200000, 0, 9000, 100};
  uint8_t* out = malloc(200000);
  uint8_t* in = malloc(200000);
  for (int k = 0; k < 9; k++) {
    netFill(out, sizes[k], (unsigned)k);
    size_t got = 1;
    assert_int_equal(xfer(&q, out, sizes[k], in, 200000, &got), collSuccess);
    assert_int_equal(got, sizes[k]);
    assert_true(netCheck(in, sizes[k], (unsigned)k));
  }
  assert_int_equal(ibc(q.send)->nqps, 3);
  assert_int_equal(ibc(q.recv)->nqps, 3);
  for (int i = 0; i < 3 && !real; i++) {
    ibFakeQpInfo s, r;
    assert_int_equal(ibFakeGetQp(ibc(q.send)->qp[i]->qp_num, &s), 0);
    assert_int_equal(ibFakeGetQp(ibc(q.recv)->qp[i]->qp_num, &r), 0);
    assert_int_equal(s.records, 3); /* message k on QP k % 3 */
    /* a clear-to-send for each message but the first, which arrived (eager)
     * before the receiver heard that the sender is ready for them */
    assert_int_equal(r.records, i == 0 ? 2 : 3);
  }
  free(out);
  free(in);
  netClosePair(net, &q);
  stop();
}

static void test_split(void** st) {
  (void)st;
  start1(); /* the fake port's max_msg_sz is 64 KiB, rxe's 8 MiB */
  netPair_t q;
  netMakePair(net, &q);
  const size_t n = real ? (9u << 20) + 3 : (1u << 20) + 3;
  uint8_t* out = malloc(n);
  uint8_t* in = malloc(n + 8);
  netFill(out, n, 9);
  memset(in, 0xEE, n + 8);
  size_t got = 0;
  assert_int_equal(xfer(&q, out, n, in, n, &got), collSuccess);
  assert_int_equal(got, n);
  assert_true(netCheck(in, n, 9));
  for (int g = 0; g < 8; g++) assert_int_equal(in[n + (size_t)g], 0xEE);
  if (real) {
    assert_true(ibc(q.send)->dev->maxMsg < n); /* it was split */
    free(out);
    free(in);
    netClosePair(net, &q);
    stop();
    return;
  }
  ibFakeStats s;
  ibFakeGetStats(&s);
  assert_int_equal(s.maxWrite, 65536);
  ibFakeQpInfo qi;
  assert_int_equal(ibFakeGetQp(ibc(q.send)->qp[0]->qp_num, &qi), 0);
  assert_int_equal(qi.writes, 17 + 1); /* 16 full pieces, 3 bytes, the record */
  assert_int_equal(qi.records, 1);
  free(out);
  free(in);
  netClosePair(net, &q);
  stop();
}

/* ---- errors ------------------------------------------------------------------ */

/* Posts one more byte on a send comm whose earlier write failed (or will):
 * the error that isend or test returns. */
static collResult_t nextSendFails(void* send) {
  void* s = NULL;
  collResult_t e = net->isend(send, "y", 1, 0, NULL, &s);
  if (e == collSuccess && s) e = netWaitReq(net, s, NULL);
  return e;
}

static void test_error_completion(void** st) {
  (void)st;
  FAKE_ONLY();
  start1();
  netPair_t q;
  netMakePair(net, &q);
  char buf[128];
  size_t got;
  assert_int_equal(xfer(&q, "a", 1, buf, sizeof buf, &got), collSuccess);
  ibFakeFailSends(IBV_WC_RETRY_EXC_ERR, 1);
  void* s = NULL;
  assert_int_equal(net->isend(q.send, buf, 100, 0, NULL, &s), collSuccess);
  /* an eager send is done once written out; its write's failure fails what follows */
  assert_int_equal(netWaitReq(net, s, NULL), collSuccess);
  assert_int_equal(nextSendFails(q.send), collRemoteError);
  const char* m = collGetLastError(NULL);
  char qpn[32];
  snprintf(qpn, sizeof qpn, "QP %u", ibc(q.send)->qp[0]->qp_num);
  assert_non_null(strstr(m, "record write of message 1 to "));
  assert_non_null(strstr(m, qpn));
  assert_non_null(strstr(m, "(fake0:1)"));
  assert_non_null(strstr(m, "transport retry counter exceeded (status 12"));
  assert_non_null(strstr(m, "COLL_IB_GID_INDEX"));
  assert_non_null(strstr(m, collHostName()));
  /* sticky */
  s = NULL;
  assert_int_equal(net->isend(q.send, buf, 1, 0, NULL, &s), collRemoteError);
  assert_null(s);
  netClosePair(net, &q);
  stop();
}

static void tweakGid0(collIbConfig* c) { c->gidIndex = 0; }
static void tweakGid5(collIbConfig* c) { c->gidIndex = 5; }

/* The link-local GID does not route between the "nodes": forced, the first
 * write never arrives; the automatic choice (IPv4) works. */
static void test_gid_choice_routes(void** st) {
  (void)st;
  FAKE_ONLY();
  ibFakeDevSpec d = ibFakeRxe("fake0", 1, IBV_MTU_1024);
  d.ports[0].gids[0].unroutable = 1;
  assert_int_equal(startWith(&d, 1, tweakGid0), collSuccess);
  netPair_t q;
  netMakePair(net, &q);
  char buf[16];
  size_t got;
  void* s = NULL;
  assert_int_equal(net->isend(q.send, "x", 1, 0, NULL, &s), collSuccess);
  assert_int_equal(netWaitReq(net, s, NULL), collSuccess); /* eager: done once written out */
  assert_int_equal(nextSendFails(q.send), collRemoteError);
  assert_non_null(strstr(collGetLastError(NULL), "transport retry counter exceeded"));
  netClosePair(net, &q);
  stop();
  assert_int_equal(startWith(&d, 1, NULL), collSuccess);
  assert_int_equal(collIb.devs[0].gidIndex, 1);
  netMakePair(net, &q);
  assert_int_equal(xfer(&q, "x", 1, buf, sizeof buf, &got), collSuccess);
  netClosePair(net, &q);
  stop();
  ibFakeInstall(&d, 1);
  collIbConfigLoad(&collIbCfg);
  tweakGid5(&collIbCfg);
  assert_int_equal(collIbStart(), collInvalidArgument);
  assert_non_null(strstr(collGetLastError(NULL), "COLL_IB_GID_INDEX=5 is beyond the GID table (2 entries)"));
  ibFakeUninstall();
}

static const char* hcaSpec;
static void tweakHca(collIbConfig* c) { c->hca = hcaSpec; }

static void test_hca_selection(void** st) {
  (void)st;
  FAKE_ONLY();
  ibFakeDevSpec d[3] = {ibFakeRxe("fake0", 1, IBV_MTU_1024), ibFakeRxe("fake1", 2, IBV_MTU_1024),
                        ibFakeRxe("fake10", 3, IBV_MTU_1024)};
  d[1].ports[0].state = IBV_PORT_DOWN; /* not ACTIVE: never used */
  d[1].nports = 2;
  d[1].ports[1] = ibFakeRocePort(4, IBV_MTU_1024);
  struct { const char* spec; int n; const char* names; } cases[] = {
      {NULL, 3, "fake0:1 fake1:2 fake10:1"},
      {"fake1", 2, "fake1:2 fake10:1"},
      {"=fake1", 1, "fake1:2"},
      {"^fake1", 1, "fake0:1"},
      {"^=fake1", 2, "fake0:1 fake10:1"},
      {"fake0:1,fake10", 2, "fake0:1 fake10:1"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    hcaSpec = cases[k].spec;
    assert_int_equal(startWith(d, 3, tweakHca), collSuccess);
    int n = 0;
    assert_int_equal(net->devices(&n), collSuccess);
    assert_int_equal(n, cases[k].n);
    char names[128] = "";
    for (int i = 0; i < n; i++) {
      collNetProperties_t p;
      assert_int_equal(net->getProperties(i, &p), collSuccess);
      snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s:%d", i ? " " : "", p.name, p.port);
    }
    assert_string_equal(names, cases[k].names);
    stop();
  }
  hcaSpec = "=fake1:1"; /* fake1:1 would also select fake10:1 (prefix) */
  ibFakeInstall(d, 3);
  collIbConfigLoad(&collIbCfg);
  tweakHca(&collIbCfg);
  assert_int_equal(collIbStart(), collSystemError);
  assert_non_null(strstr(collGetLastError(NULL), "no usable port"));
  assert_non_null(strstr(collGetLastError(NULL), "COLL_IB_HCA==fake1:1"));
  ibFakeUninstall();
}

static void test_async_events(void** st) {
  (void)st;
  FAKE_ONLY();
  start1();
  netPair_t q, q2;
  netMakePair(net, &q);
  netMakePair(net, &q2);
  char buf[16];
  size_t got;
  assert_int_equal(xfer(&q, "x", 1, buf, sizeof buf, &got), collSuccess);
  assert_int_equal(xfer(&q2, "x", 1, buf, sizeof buf, &got), collSuccess);
  uint32_t qpn = ibc(q.send)->qp[0]->qp_num;
  ibFakeAsyncEvent(0, IBV_EVENT_QP_FATAL, qpn, 0);
  int fd;
  assert_int_equal(net->getPollFd(q.recv, &fd), collSuccess); /* serves the event */
  void* s = NULL;
  assert_int_equal(net->isend(q.send, "y", 1, 0, NULL, &s), collRemoteError);
  char want[96];
  snprintf(want, sizeof want, "async event 'local work queue catastrophic error' on QP %u", qpn);
  assert_non_null(strstr(collGetLastError(NULL), want));
  /* the other connection is unaffected, until the port goes down */
  assert_int_equal(xfer(&q2, "z", 1, buf, sizeof buf, &got), collSuccess);
  ibFakeAsyncEvent(0, IBV_EVENT_PORT_ERR, 0, 1);
  assert_int_equal(net->getPollFd(q2.recv, &fd), collSuccess);
  s = NULL;
  assert_int_equal(net->isend(q2.send, "y", 1, 0, NULL, &s), collRemoteError);
  assert_non_null(strstr(collGetLastError(NULL), "port went down (fake0:1)"));
  netClosePair(net, &q);
  netClosePair(net, &q2);
  stop();
}

/* ---- registrations --------------------------------------------------------- */

static void bigRounds(netPair_t* q, uint8_t* out, uint8_t* in, size_t n, int rounds) {
  for (int k = 0; k < rounds; k++) {
    netFill(out, n, (unsigned)k);
    size_t got = 0;
    assert_int_equal(xfer(q, out, n, in, n, &got), collSuccess);
    assert_true(netCheck(in, n, (unsigned)k));
  }
}

static void tweakNoCache(collIbConfig* c) { c->regCache = 0; }
static void tweakCache(collIbConfig* c) { c->regCache = 16; }

static void test_registration(void** st) {
  (void)st;
  FAKE_ONLY();
  const size_t n = 300000;
  uint8_t* out = malloc(n);
  uint8_t* in = malloc(n);
  ibFakeDevSpec d = ibFakeRxe("fake0", 1, IBV_MTU_1024);
  assert_int_equal(startWith(&d, 1, tweakCache), collSuccess);
  netPair_t q;
  netMakePair(net, &q);
  ibFakeStats s0, s1;
  ibFakeGetStats(&s0);
  bigRounds(&q, out, in, n, 4);
  ibFakeGetStats(&s1);
  assert_int_equal(s1.regs - s0.regs, 2); /* the send buffer and the receive buffer, once each */
  assert_int_equal(s1.deregs - s0.deregs, 0);
  /* regMr (the engine's registrations) never goes through that cache: the
   * engine caches and checks them itself (COLL_REG_CACHE); a hit on ib's
   * cache would bypass its page-frame check */
  for (int k = 0; k < 2; k++) {
    void* mh = NULL;
    ibFakeGetStats(&s0);
    assert_int_equal(net->regMr(q.send, out, n, COLL_PTR_HOST, &mh), collSuccess);
    assert_int_equal(net->deregMr(q.send, mh), collSuccess);
    ibFakeGetStats(&s1);
    assert_int_equal(s1.regs - s0.regs, 1);
    assert_int_equal(s1.deregs - s0.deregs, 1);
  }
  netClosePair(net, &q);
  stop(); /* the cache is released with the device: no MR left */

  start1(); /* the default: no cache */
  assert_int_equal(collIbCfg.regCache, 0);
  netMakePair(net, &q);
  ibFakeGetStats(&s0);
  bigRounds(&q, out, in, n, 4);
  ibFakeGetStats(&s1);
  assert_int_equal(s1.regs - s0.regs, 8); /* per message */
  assert_int_equal(s1.deregs - s0.deregs, 8);
  netClosePair(net, &q);
  stop();
  free(out);
  free(in);
}

/* Buffers unmapped and mapped again at the same address between messages
 * (what test_collectives does per case) get their data: registrations are
 * per message by default. On Soft-RoCE with COLL_IB_REG_CACHE=1024 this
 * failed (the cached registration kept the old pages). */
static void test_remap(void** st) {
  (void)st;
  start1();
  (void)tweakNoCache;
  netPair_t q;
  netMakePair(net, &q);
  const size_t n = 1u << 20;
  uint8_t* want = NULL;
  for (int k = 0; k < 4; k++) {
    uint8_t* out = mmap(want, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t* in = mmap(want ? want + n : NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(out != MAP_FAILED && in != MAP_FAILED);
    if (!want) want = out;
    netFill(out, n, (unsigned)k + 40);
    size_t got = 0;
    assert_int_equal(xfer(&q, out, n, in, n, &got), collSuccess);
    assert_int_equal(got, n);
    assert_true(netCheck(in, n, (unsigned)k + 40));
    munmap(out, n);
    munmap(in, n);
  }
  netClosePair(net, &q);
  stop();
}

/* ---- waiting -------------------------------------------------------------- */

typedef struct {
  void* send;
  int delayMs;
} sendArg;

static void* delayedSend(void* a) {
  sendArg* s = a;
  usleep((useconds_t)s->delayMs * 1000);
  static char msg[] = "wake";
  void* r = NULL;
  while (!r) net->isend(s->send, msg, 4, 7, NULL, &r);
  netWaitReq(net, r, NULL);
  /* the eager send is done before its write ran; the fake runs writes only
   * while a CQ is polled (an HCA needs nobody): poll as it would work */
  if (!real) collIbDrain(s->send, 2.0);
  return NULL;
}

static void test_poll_wakeup(void** st) {
  (void)st;
  start1();
  netPair_t q;
  netMakePair(net, &q);
  char buf[16];
  size_t got;
  assert_int_equal(xfer(&q, "x", 1, buf, sizeof buf, &got), collSuccess);
  int fd = 0;
  assert_int_equal(net->getPollFd(q.send, &fd), collSuccess);
  assert_int_equal(fd, -1);
  /* a message that arrives while the receiver sleeps wakes it */
  for (int round = 0; round < 5; round++) {
    void* r = NULL;
    assert_int_equal(net->irecv(q.recv, buf, sizeof buf, 0, NULL, &r), collSuccess);
    sendArg a = {q.send, 30};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, delayedSend, &a), 0);
    int done = 0, polls = 0, timeouts = 0;
    double t0 = collTimeNow();
    while (!done) {
      assert_int_equal(net->test(r, &done, &got, NULL), collSuccess);
      if (done) break;
      assert_int_equal(net->getPollFd(q.recv, &fd), collSuccess);
      assert_true(fd >= 0);
      struct pollfd p = {fd, POLLIN, 0};
      if (poll(&p, 1, 2000) == 0) timeouts++;
      polls++;
    }
    assert_int_equal(timeouts, 0);
    assert_true(collTimeNow() - t0 < 1.5);
    assert_int_equal(got, 4);
    assert_memory_equal(buf, "wake", 4);
    pthread_join(t, NULL);
  }
  /* a message that arrived before the CQ was armed wakes at once */
  void *r = NULL, *s = NULL;
  assert_int_equal(net->irecv(q.recv, buf, sizeof buf, 0, NULL, &r), collSuccess);
  assert_int_equal(net->isend(q.send, "now", 3, 0, NULL, &s), collSuccess);
  assert_int_equal(netWaitReq(net, s, NULL), collSuccess);
  assert_int_equal(net->getPollFd(q.recv, &fd), collSuccess);
  struct pollfd p = {fd, POLLIN, 0};
  assert_int_equal(poll(&p, 1, 0), 1);
  assert_int_equal(netWaitReq(net, r, &got), collSuccess);
  assert_int_equal(got, 3);
  netClosePair(net, &q);
  stop();
}

/* Two ranks that connect to each other and wait for their first message
 * before either accepts (the engine's order) still finish. */
static void test_connect_before_accept(void** st) {
  (void)st;
  start1();
  char h1[COLL_NET_HANDLE_BYTES], h2[COLL_NET_HANDLE_BYTES];
  void *l1, *l2, *s1, *s2;
  assert_int_equal(net->listen(0, h1, &l1), collSuccess);
  assert_int_equal(net->listen(0, h2, &l2), collSuccess);
  assert_int_equal(net->connect(0, h2, &s1), collSuccess);
  assert_int_equal(net->connect(0, h1, &s2), collSuccess);
  void *r1 = NULL, *r2 = NULL;
  assert_int_equal(net->isend(s1, "from1", 5, 1, NULL, &r1), collSuccess);
  assert_int_equal(net->isend(s2, "from2", 5, 2, NULL, &r2), collSuccess);
  int d1 = 0, d2 = 0;
  double t0 = collTimeNow();
  while ((!d1 || !d2) && collTimeNow() - t0 < 5) {
    if (!d1) assert_int_equal(net->test(r1, &d1, NULL, NULL), collSuccess);
    if (!d2) assert_int_equal(net->test(r2, &d2, NULL, NULL), collSuccess);
  }
  assert_true(d1 && d2);
  void* a1 = netAcceptOne(net, l1);
  void* a2 = netAcceptOne(net, l2);
  assert_non_null(a1);
  assert_non_null(a2);
  char b1[8], b2[8];
  size_t n1 = 0, n2 = 0;
  void *q1 = NULL, *q2 = NULL;
  assert_int_equal(net->irecv(a1, b1, 8, 0, NULL, &q1), collSuccess);
  assert_int_equal(net->irecv(a2, b2, 8, 0, NULL, &q2), collSuccess);
  uint64_t t1 = 0, t2 = 0;
  int e1 = 0, e2 = 0;
  while (!e1) assert_int_equal(net->test(q1, &e1, &n1, &t1), collSuccess);
  while (!e2) assert_int_equal(net->test(q2, &e2, &n2, &t2), collSuccess);
  assert_int_equal(n1, 5);
  assert_memory_equal(b1, "from2", 5);
  assert_int_equal(t1, 2);
  assert_memory_equal(b2, "from1", 5);
  assert_int_equal(t2, 1);
  assert_int_equal(net->closeSend(s1), collSuccess);
  assert_int_equal(net->closeSend(s2), collSuccess);
  assert_int_equal(net->closeRecv(a1), collSuccess);
  assert_int_equal(net->closeRecv(a2), collSuccess);
  assert_int_equal(net->closeListen(l1), collSuccess);
  assert_int_equal(net->closeListen(l2), collSuccess);
  stop();
}

/* Garbage and silence on the listen socket are dropped; a real connection
 * behind them is accepted. */
static void test_garbage_on_listen(void** st) {
  (void)st;
  FAKE_ONLY();
  start1();
  char handle[COLL_NET_HANDLE_BYTES];
  void* l;
  assert_int_equal(net->listen(0, handle, &l), collSuccess);
  collIbHandle h;
  memcpy(&h, handle, sizeof h);
  int g1 = -1, g2 = -1;
  assert_int_equal(collSocketConnect(&h.addr, &g1, collTimeNow() + 5, NULL), collSuccess);
  collIbInfo junk;
  memset(&junk, 0x5a, sizeof junk);
  assert_int_equal(collSocketSendAll(g1, &junk, sizeof junk, collTimeNow() + 5, NULL), collSuccess);
  assert_int_equal(collSocketConnect(&h.addr, &g2, collTimeNow() + 5, NULL), collSuccess);
  assert_int_equal(collSocketSendAll(g2, "short", 5, collTimeNow() + 5, NULL), collSuccess);
  close(g2); /* closed before a whole info */
  void *s, *r = NULL;
  assert_int_equal(net->connect(0, handle, &s), collSuccess);
  r = netAcceptOne(net, l);
  assert_non_null(r);
  void* extra = (void*)1;
  assert_int_equal(net->accept(l, &extra), collSuccess);
  assert_null(extra); /* the garbage did not become a connection */
  netPair_t q = {l, s, r};
  char buf[8];
  size_t got;
  assert_int_equal(xfer(&q, "ok", 2, buf, sizeof buf, &got), collSuccess);
  close(g1);
  netClosePair(net, &q);
  stop();
}

int main(void) {
  setenv("COLL_SOCKET_IFNAME", "lo", 0);
  real = getenv("COLL_TEST_IB_REAL") && atoi(getenv("COLL_TEST_IB_REAL")) == 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table),
      cmocka_unit_test(test_stubs),
      cmocka_unit_test(test_many_in_flight),
      cmocka_unit_test(test_drives_earlier),
      cmocka_unit_test(test_tags),
      cmocka_unit_test(test_oversize),
      cmocka_unit_test(test_eager_before_post),
      cmocka_unit_test(test_eager_done_before_ack),
      cmocka_unit_test(test_small_posted_large_sent),
      cmocka_unit_test(test_small_messages_credit),
      cmocka_unit_test(test_stale_cts_credit),
      cmocka_unit_test(test_peer_close_send),
      cmocka_unit_test(test_peer_close_recv),
      cmocka_unit_test(test_request_pool),
      cmocka_unit_test(test_qp_states_roce),
      cmocka_unit_test(test_qp_states_ib),
      cmocka_unit_test(test_link_layer_mismatch),
      cmocka_unit_test(test_qps_round_robin),
      cmocka_unit_test(test_split),
      cmocka_unit_test(test_error_completion),
      cmocka_unit_test(test_gid_choice_routes),
      cmocka_unit_test(test_hca_selection),
      cmocka_unit_test(test_async_events),
      cmocka_unit_test(test_registration),
      cmocka_unit_test(test_remap),
      cmocka_unit_test(test_poll_wakeup),
      cmocka_unit_test(test_connect_before_accept),
      cmocka_unit_test(test_garbage_on_listen),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
