/*
 * test_ib_pairs.c - the ordered transport list and the transport of each
 * pair of ranks (core/net.h): which transports a communicator lists with and
 * without a usable HCA (the fake verbs device, unit/ibfake.c), COLL_NET
 * forcing, the first-fit choice per pair, that both ranks of every pair
 * choose the same transport, the INFO text, and the error of a pair with no
 * transport in common.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/net.h"
#include "ibfake.h"
#include "misc/log.h"
#include "transports/ib/ib.h"
#include "transports/shm/shm.h"
#include "transports/tcp/tcp.h"

static ibFakeDevSpec rxeLike(const char* name, int host) {
  ibFakeDevSpec d;
  memset(&d, 0, sizeof d);
  d.name = name;
  d.guid = 0x0200000000000000ull | (uint64_t)host;
  d.nports = 1;
  d.ports[0] = ibFakeRocePort(host, IBV_MTU_1024);
  return d;
}

static void forget(void) {
  assert_int_equal(collNetIb.fini(), collSuccess);
  ibFakeUninstall();
  collNetForgetIb();
}

/* With a usable port the default list is shm, ib, tcp; COLL_NET=tcp drops ib. */
static void test_list_with_hca(void** st) {
  (void)st;
  ibFakeDevSpec d = rxeLike("fake0", 1);
  ibFakeInstall(&d, 1);
  collNetList l;
  assert_int_equal(collNetGetList(NULL, &l), collSuccess);
  assert_ptr_equal(l.nets[0], &collNetShm);
  assert_ptr_equal(l.nets[1], &collNetIb);
  assert_ptr_equal(l.nets[2], &collNetTcp);
  assert_null(l.nets[3]);
  assert_int_equal(l.forced, 0);
  assert_int_equal(collNetGetList("tcp", &l), collSuccess);
  assert_ptr_equal(l.nets[0], &collNetShm);
  assert_ptr_equal(l.nets[1], &collNetTcp);
  assert_null(l.nets[2]);
  assert_int_equal(l.forced, 1);
  assert_int_equal(collNetGetList("ib", &l), collSuccess);
  assert_ptr_equal(l.nets[1], &collNetIb);
  assert_null(l.nets[2]);
  forget();
}

/* Without a usable port: tcp alone between nodes; COLL_NET=ib is an error
 * that says why. A port that is down does not count. */
static void test_list_without_hca(void** st) {
  (void)st;
  ibFakeInstall(NULL, 0);
  collNetList l;
  assert_int_equal(collNetGetList(NULL, &l), collSuccess);
  assert_ptr_equal(l.nets[0], &collNetShm);
  assert_ptr_equal(l.nets[1], &collNetTcp);
  assert_null(l.nets[2]);
  collResult_t r = collNetGetList("ib", &l);
  assert_int_equal(r, collSystemError);
  assert_non_null(strstr(collLastErrorMessage(), "ib: no usable port: 0 device(s), none with an ACTIVE "
                                                 "InfiniBand/RoCE port (ibv_devinfo lists them; COLL_NET=tcp uses "
                                                 "sockets)"));
  ibFakeUninstall();
  collNetForgetIb();

  ibFakeDevSpec d = rxeLike("fake0", 1);
  d.ports[0].state = IBV_PORT_DOWN;
  ibFakeInstall(&d, 1);
  assert_int_equal(collNetGetList(NULL, &l), collSuccess);
  assert_ptr_equal(l.nets[1], &collNetTcp);
  assert_null(l.nets[2]);
  ibFakeUninstall();
  collNetForgetIb();
}

/* ---- the choice per pair, on published infos -------------------------------- */
static int sameNodeOnly(const collPeerInfo* a, const collPeerInfo* b, int sameNode) {
  (void)a;
  (void)b;
  return sameNode;
}
static int anyPair(const collPeerInfo* a, const collPeerInfo* b, int sameNode) {
  (void)a;
  (void)b;
  (void)sameNode;
  return 1;
}

static const collNet_t tA = {.name = "A"}, tB = {.name = "B"}, tC = {.name = "C"};

/* A rank's list and what it published: names in order, "" = unused slot. */
static void publish(collNetList* l, collPeerInfo* p, const char* const names[COLL_NET_SLOTS]) {
  memset(l, 0, sizeof *l);
  memset(p->netId, 0, sizeof p->netId);
  for (int s = 0; s < COLL_NET_SLOTS; s++) {
    if (!names[s] || !names[s][0]) continue;
    const collNet_t* t = names[s][0] == 'A' ? &tA : names[s][0] == 'B' ? &tB : &tC;
    l->nets[s] = t;
    l->canConnect[s] = t == &tA ? sameNodeOnly : anyPair;
    p->netId[s] = collNetId(t->name);
  }
}

static const char* chosen(const collNetList* l, int slot) { return slot < 0 ? "-" : l->nets[slot]->name; }

static void test_pair_first_fit(void** st) {
  (void)st;
  collPeerInfo p[4];
  collNetList l[4];
  memset(p, 0, sizeof p);
  const char* const full[COLL_NET_SLOTS] = {"A", "B", "C", ""};
  const char* const noB[COLL_NET_SLOTS] = {"A", "", "C", ""};
  const char* const onlyB[COLL_NET_SLOTS] = {"", "B", "", ""};
  publish(&l[0], &p[0], full);
  publish(&l[1], &p[1], full);
  publish(&l[2], &p[2], noB);
  publish(&l[3], &p[3], onlyB);
  /* same node: A; other node: B when both have it, else C */
  assert_string_equal(chosen(&l[0], collNetPairSlot(&l[0], p, 0, 1, 1)), "A");
  assert_string_equal(chosen(&l[0], collNetPairSlot(&l[0], p, 0, 1, 0)), "B");
  assert_string_equal(chosen(&l[0], collNetPairSlot(&l[0], p, 0, 2, 0)), "C");
  assert_string_equal(chosen(&l[2], collNetPairSlot(&l[2], p, 2, 0, 0)), "C");
  assert_string_equal(chosen(&l[0], collNetPairSlot(&l[0], p, 0, 0, 1)), "A"); /* itself */
  /* same node but one side has no A: the next common one */
  assert_string_equal(chosen(&l[3], collNetPairSlot(&l[3], p, 3, 1, 1)), "B");
  /* nothing in common */
  assert_int_equal(collNetPairSlot(&l[2], p, 2, 3, 0), -1);
  assert_int_equal(collNetPairSlot(&l[3], p, 3, 2, 0), -1);
}

/* Lists in different orders: the lower rank's order decides, on both sides. */
static void test_pair_both_sides_agree(void** st) {
  (void)st;
  const char* const orders[][COLL_NET_SLOTS] = {
      {"A", "B", "C", ""}, {"A", "C", "B", ""}, {"", "C", "B", ""}, {"", "B", "", ""},
      {"A", "", "C", ""},  {"", "", "B", "C"},  {"A", "B", "", ""},  {"", "C", "", ""}};
  const int norders = (int)(sizeof orders / sizeof orders[0]);
  enum { N = 8 };
  collPeerInfo p[N];
  collNetList l[N];
  memset(p, 0, sizeof p);
  int checked = 0, none = 0;
  for (int round = 0; round < 200; round++) {
    srand((unsigned)round);
    int node[N];
    for (int i = 0; i < N; i++) {
      publish(&l[i], &p[i], orders[rand() % norders]);
      node[i] = rand() % 3;
    }
    for (int a = 0; a < N; a++)
      for (int b = 0; b < N; b++) {
        int sa = collNetPairSlot(&l[a], p, a, b, node[a] == node[b]);
        int sb = collNetPairSlot(&l[b], p, b, a, node[a] == node[b]);
        assert_string_equal(chosen(&l[a], sa), chosen(&l[b], sb));
        if (sa >= 0 && node[a] != node[b]) assert_ptr_not_equal(l[a].nets[sa], &tA);
        checked++;
        none += sa < 0;
      }
  }
  assert_int_equal(checked, 200 * N * N);
  assert_true(none > 0 && none < checked / 2); /* both outcomes were exercised */
}

/* collNetPickPairs on a communicator of 6 ranks on 3 nodes, as rank 0 and as
 * rank 4 (whose node has no HCA): the slots, the text, the interSlot. */
static void test_pick_pairs(void** st) {
  (void)st;
  ibFakeDevSpec d = rxeLike("fake0", 1);
  ibFakeInstall(&d, 1);
  collNetList full, noIb;
  assert_int_equal(collNetGetList(NULL, &full), collSuccess);
  assert_int_equal(collNetGetList("tcp", &noIb), collSuccess);
  enum { N = 6 };
  collPeerInfo peers[N];
  int rankNode[N] = {0, 0, 1, 1, 2, 2};
  uint8_t kind[N];
  memset(peers, 0, sizeof peers);
  for (int i = 0; i < N; i++) {
    const collNetList* l = i < 4 ? &full : &noIb;
    for (int s = 0; s < COLL_NET_SLOTS; s++) peers[i].netId[s] = l->nets[s] ? collNetId(l->nets[s]->name) : 0;
    snprintf(peers[i].host, sizeof peers[i].host, "node%d", rankNode[i]);
  }
  struct collComm c;
  memset(&c, 0, sizeof c);
  c.nranks = N;
  c.peers = peers;
  c.rankNode = rankNode;
  c.peerKind = kind;
  char text[512], want[512], tcpName[80] = "";
  collNetProperties_t tp;
  if (collNetTcp.getProperties(0, &tp) == collSuccess && strcmp(tp.name, "tcp") != 0)
    snprintf(tcpName, sizeof tcpName, " (%s)", tp.name);

  c.rank = 0;
  c.node = 0;
  memcpy(c.nets, full.nets, sizeof c.nets);
  assert_int_equal(collNetPickPairs(&c, &full), collSuccess);
  const uint8_t want0[N] = {0, 0, 1, 1, 2, 2};
  assert_memory_equal(kind, want0, N);
  assert_int_equal(c.interSlot, 1); /* ib: 2 pairs, tcp: 2 pairs, the first wins */
  collNetPairsText(&c, text, sizeof text);
  snprintf(want, sizeof want, "shm to ranks 0-1; ib (fake0) to ranks 2-3; tcp%s to ranks 4-5", tcpName);
  assert_string_equal(text, want);

  c.rank = 4;
  c.node = 2;
  memcpy(c.nets, noIb.nets, sizeof c.nets);
  assert_int_equal(collNetPickPairs(&c, &noIb), collSuccess);
  const uint8_t want4[N] = {1, 1, 1, 1, 0, 0};
  assert_memory_equal(kind, want4, N);
  assert_int_equal(c.interSlot, 1);
  collNetPairsText(&c, text, sizeof text);
  snprintf(want, sizeof want, "shm to ranks 4-5; tcp%s to ranks 0-3", tcpName);
  assert_string_equal(text, want);

  /* rank 5 publishes shm only (its network listener failed): no transport to rank 0 */
  memset(peers[5].netId + 1, 0, sizeof peers[5].netId - sizeof peers[5].netId[0]);
  c.rank = 0;
  c.node = 0;
  memcpy(c.nets, full.nets, sizeof c.nets);
  assert_int_equal(collNetPickPairs(&c, &full), collSystemError);
  assert_string_equal(collLastErrorMessage(),
                      "rank 0: no transport connects it with rank 5 (node2): this rank has shm, ib, tcp, rank 5 has "
                      "shm (COLL_NET, COLL_SHM_DISABLE, COLL_NET_PLUGIN must allow a common one)");
  forget();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_list_with_hca),   cmocka_unit_test(test_list_without_hca),
      cmocka_unit_test(test_pair_first_fit),  cmocka_unit_test(test_pair_both_sides_agree),
      cmocka_unit_test(test_pick_pairs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
