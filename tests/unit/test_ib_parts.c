/*
 * test_ib_parts.c - the pure parts of the ib transport: COLL_IB_HCA matching,
 * RoCE GID choice, port speed, the registration cache, and the checks of
 * handles and connection info that come off the wire.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transports/ib/ib_internal.h"

static void test_hca_match(void** st) {
  (void)st;
  assert_int_equal(collIbHcaMatch(NULL, "mlx5_0", 1), 1);
  assert_int_equal(collIbHcaMatch("", "mlx5_0", 1), 1);
  /* prefixes: mlx5_1 also selects mlx5_10..19, as NCCL_IB_HCA */
  assert_int_equal(collIbHcaMatch("mlx5", "mlx5_3", 1), 1);
  assert_int_equal(collIbHcaMatch("mlx5_1", "mlx5_10", 1), 1);
  assert_int_equal(collIbHcaMatch("mlx5_1", "mlx5_2", 1), 0);
  assert_int_equal(collIbHcaMatch("=mlx5_1", "mlx5_10", 1), 0);
  assert_int_equal(collIbHcaMatch("=mlx5_1", "mlx5_1", 2), 1);
  /* ports */
  assert_int_equal(collIbHcaMatch("mlx5_0:1", "mlx5_0", 1), 1);
  assert_int_equal(collIbHcaMatch("mlx5_0:1", "mlx5_0", 2), 0);
  assert_int_equal(collIbHcaMatch("=mlx5_0:1,mlx5_1:2", "mlx5_1", 2), 1);
  assert_int_equal(collIbHcaMatch("=mlx5_0:1,mlx5_1:2", "mlx5_1", 1), 0);
  assert_int_equal(collIbHcaMatch("=mlx5_0::0:0", "mlx5_0", 2), 1); /* NCCL's rail fields: any port */
  /* exclusion */
  assert_int_equal(collIbHcaMatch("^mlx5_1", "mlx5_10", 1), 0);
  assert_int_equal(collIbHcaMatch("^mlx5_1", "mlx5_2", 1), 1);
  assert_int_equal(collIbHcaMatch("^=mlx5_1", "mlx5_10", 1), 1);
  assert_int_equal(collIbHcaMatch("^=mlx5_1", "mlx5_1", 1), 0);
  assert_int_equal(collIbHcaMatch("^rxe0:1", "rxe0", 2), 1);
  assert_int_equal(collIbHcaMatch("rxe", "mlx5_0", 1), 0);
}

static collIbGidEntry gid(const char* type, int v4, int linkLocal, uint8_t last) {
  collIbGidEntry g;
  memset(&g, 0, sizeof g);
  snprintf(g.type, sizeof g.type, "%s", type);
  if (v4) {
    g.raw[10] = g.raw[11] = 0xff;
    g.raw[12] = 10;
    g.raw[15] = last;
  } else if (linkLocal) {
    g.raw[0] = 0xfe;
    g.raw[1] = 0x80;
    g.raw[15] = last;
  } else if (last) {
    g.raw[0] = 0x20;
    g.raw[1] = 0x01;
    g.raw[15] = last;
  }
  return g;
}

static void test_gid_choice(void** st) {
  (void)st;
  char why[160];
  /* rxe: 0 = IPv6 link-local, 1 = IPv4-mapped, both RoCE v2 */
  collIbGidEntry rxe[2] = {gid("RoCE v2", 0, 1, 1), gid("RoCE v2", 1, 0, 1)};
  assert_int_equal(collIbChooseGid(rxe, 2, -1, why, sizeof why), 1);
  assert_non_null(strstr(why, "IPv4"));
  /* mlx5: v1 LL, v2 LL, v1 IPv4, v2 IPv4 -> 3 (the folklore NCCL_IB_GID_INDEX=3) */
  collIbGidEntry mlx[4] = {gid("IB/RoCE v1", 0, 1, 1), gid("RoCE v2", 0, 1, 1), gid("IB/RoCE v1", 1, 0, 2),
                           gid("RoCE v2", 1, 0, 2)};
  assert_int_equal(collIbChooseGid(mlx, 4, -1, why, sizeof why), 3);
  /* IPv6 only: the global one over the link-local one */
  collIbGidEntry v6[3] = {gid("RoCE v2", 0, 1, 1), gid("", 0, 0, 0), gid("RoCE v2", 0, 0, 7)};
  assert_int_equal(collIbChooseGid(v6, 3, -1, why, sizeof why), 2);
  /* link-local only */
  assert_int_equal(collIbChooseGid(v6, 1, -1, why, sizeof why), 0);
  /* no RoCE v2 at all */
  collIbGidEntry v1[2] = {gid("IB/RoCE v1", 0, 1, 1), gid("IB/RoCE v1", 1, 0, 2)};
  assert_int_equal(collIbChooseGid(v1, 2, -1, why, sizeof why), 0);
  assert_non_null(strstr(why, "no RoCE v2"));
  /* an IPv4 GID of type v1 is not taken over a v2 one */
  collIbGidEntry mixed[2] = {gid("IB/RoCE v1", 1, 0, 3), gid("RoCE v2", 0, 0, 9)};
  assert_int_equal(collIbChooseGid(mixed, 2, -1, why, sizeof why), 1);
  /* forced */
  assert_int_equal(collIbChooseGid(mlx, 4, 2, why, sizeof why), 2);
  assert_int_equal(collIbChooseGid(mlx, 4, 4, why, sizeof why), -1);
  assert_non_null(strstr(why, "COLL_IB_GID_INDEX=4"));
}

static void test_speed(void** st) {
  (void)st;
  assert_true(collIbPortGbps(1, 1) == 2.5);    /* 1x SDR: what rxe reports */
  assert_true(collIbPortGbps(2, 32) == 100.0); /* 4x EDR */
  assert_true(collIbPortGbps(2, 64) == 200.0); /* 4x HDR */
  assert_true(collIbPortGbps(2, 128) == 400.0); /* 4x NDR */
  assert_true(collIbPortGbps(16, 128) == 200.0); /* 2x NDR */
  assert_true(collIbPortGbps(8, 4) == 120.0);  /* 12x QDR */
  assert_true(collIbPortGbps(3, 4) == 0.0);    /* unknown width */
}

/* ---- registration cache with counting callbacks --------------------------- */

typedef struct {
  int regs, deregs, live;
  int failNext;
} regCtx;

static int fakeReg(void* ctx, void* addr, size_t len, int access, void** handle) {
  regCtx* c = ctx;
  (void)addr; (void)len; (void)access;
  if (c->failNext) {
    c->failNext = 0;
    return 12;
  }
  c->regs++;
  c->live++;
  *handle = malloc(1);
  return 0;
}
static void fakeDereg(void* ctx, void* handle) {
  regCtx* c = ctx;
  c->deregs++;
  c->live--;
  free(handle);
}

static void test_regcache(void** st) {
  (void)st;
  regCtx rc = {0};
  collRegCache* c = collRegCacheCreate(fakeReg, fakeDereg, &rc, 2);
  assert_non_null(c);
  char* big = aligned_alloc(4096, 5 * 4096);
  collRegEntry *a, *b, *x, *y;
  /* the first get registers whole pages */
  assert_int_equal(collRegCacheGet(c, big + 100, 5000, 1, &a), 0);
  assert_int_equal(rc.regs, 1);
  assert_true(a->start == (uintptr_t)big && a->end == (uintptr_t)big + 2 * 4096);
  /* anything inside those pages hits, with equal or fewer access bits */
  assert_int_equal(collRegCacheGet(c, big, 8192, 1, &b), 0);
  assert_ptr_equal(a, b);
  assert_int_equal(rc.regs, 1);
  /* more access bits than the entry has: a new registration */
  assert_int_equal(collRegCacheGet(c, big, 10, 3, &x), 0);
  assert_ptr_not_equal(x, a);
  assert_int_equal(rc.regs, 2);
  assert_int_equal(collRegCacheGet(c, big + 10, 10, 1, &y), 0); /* most recent covering entry (x) */
  assert_ptr_equal(y, x);
  collRegCachePut(c, y);
  /* beyond: a third entry; the cache holds 2, but every entry is referenced */
  collRegEntry* z;
  assert_int_equal(collRegCacheGet(c, big + 3 * 4096, 4096, 1, &z), 0);
  assert_int_equal(rc.regs, 3);
  assert_int_equal(rc.deregs, 0);
  /* releasing lets the least recently used unreferenced one go */
  collRegCachePut(c, a);
  collRegCachePut(c, b); /* a is now unreferenced and least recently used */
  assert_int_equal(rc.deregs, 1);
  collRegStats s;
  collRegCacheStats(c, &s);
  assert_int_equal(s.hits, 2);
  assert_int_equal(s.misses, 3);
  assert_int_equal(s.evictions, 1);
  assert_int_equal(s.live, 2);
  /* a failing registration is reported, nothing cached */
  rc.failNext = 1;
  collRegEntry* f = NULL;
  assert_int_equal(collRegCacheGet(c, big + 4 * 4096, 1, 1, &f), 12);
  collRegCachePut(c, x);
  collRegCachePut(c, z);
  collRegCacheDestroy(c);
  assert_int_equal(rc.live, 0);
  /* maxEntries 0: every get registers, the last put releases */
  memset(&rc, 0, sizeof rc);
  c = collRegCacheCreate(fakeReg, fakeDereg, &rc, 0);
  assert_int_equal(collRegCacheGet(c, big, 10, 1, &a), 0);
  assert_int_equal(collRegCacheGet(c, big, 10, 1, &b), 0);
  assert_ptr_not_equal(a, b);
  assert_int_equal(rc.regs, 2);
  collRegCachePut(c, a);
  assert_int_equal(rc.deregs, 1);
  collRegCachePut(c, b);
  assert_int_equal(rc.live, 0);
  collRegCacheDestroy(c);
  free(big);
}

/* ---- wire checks -------------------------------------------------------------- */

static collIbInfo goodInfo(void) {
  collIbInfo i;
  memset(&i, 0, sizeof i);
  i.magic = IB_INFO_MAGIC;
  i.version = IB_INFO_VERSION;
  i.linkLayer = IBV_LINK_LAYER_ETHERNET;
  i.mtu = IBV_MTU_1024;
  i.nqps = 2;
  i.psn = 0x123456;
  i.depth = IB_DEPTH;
  i.eager = IB_EAGER;
  i.addr = 0x7f0000001000ull;
  i.qpn[0] = 17;
  i.qpn[1] = 18;
  snprintf(i.host, sizeof i.host, "node1");
  return i;
}

static void test_info_parse(void** st) {
  (void)st;
  char why[128];
  collIbInfo in = goodInfo(), out;
  assert_int_equal(collIbInfoParse(&in, sizeof in, &out, why, sizeof why), 0);
  assert_int_equal(out.qpn[1], 18);
  assert_int_equal(collIbInfoParse(&in, sizeof in - 1, &out, why, sizeof why), -1);
  struct { const char* want; void (*bad)(collIbInfo*); } cases[] = {
      {"magic", NULL}, {"version", NULL}, {"link layer", NULL}, {"MTU", NULL},
      {"QP count", NULL}, {"depth", NULL}, {"PSN", NULL}, {"QP number", NULL}, {"address", NULL},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    collIbInfo b = goodInfo();
    switch (k) {
      case 0: b.magic ^= 1; break;
      case 1: b.version = 9; break;
      case 2: b.linkLayer = 7; break;
      case 3: b.mtu = 6; break;
      case 4: b.nqps = IB_MAX_QPS + 1; break;
      case 5: b.depth = IB_DEPTH * 2; break;
      case 6: b.psn = 1u << 24; break;
      case 7: b.qpn[1] = 0; break;
      case 8: b.addr = 0; break;
    }
    assert_int_equal(collIbInfoParse(&b, sizeof b, &out, why, sizeof why), -1);
    assert_non_null(strstr(why, cases[k].want));
  }
  /* the host name is cut and made printable */
  collIbInfo h = goodInfo();
  memset(h.host, '\n', sizeof h.host);
  assert_int_equal(collIbInfoParse(&h, sizeof h, &out, why, sizeof why), 0);
  assert_int_equal(strlen(out.host), sizeof out.host - 1);
  assert_int_equal(out.host[0], '?');

  collIbHandle hd, ho;
  memset(&hd, 0, sizeof hd);
  hd.magic = IB_HANDLE_MAGIC;
  hd.addr.sa.sa_family = AF_INET;
  char buf[COLL_NET_HANDLE_BYTES] = {0};
  memcpy(buf, &hd, sizeof hd);
  assert_int_equal(collIbHandleParse(buf, sizeof buf, &ho, why, sizeof why), 0);
  hd.addr.sa.sa_family = AF_UNIX;
  memcpy(buf, &hd, sizeof hd);
  assert_int_equal(collIbHandleParse(buf, sizeof buf, &ho, why, sizeof why), -1);
  buf[0] ^= 1;
  assert_int_equal(collIbHandleParse(buf, sizeof buf, &ho, why, sizeof why), -1);
  assert_non_null(strstr(why, "magic"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hca_match), cmocka_unit_test(test_gid_choice), cmocka_unit_test(test_speed),
      cmocka_unit_test(test_regcache), cmocka_unit_test(test_info_parse),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
