/*
 * test_hier.c - the hierarchical builder (algorithms/hier.c) and its node
 * layout helpers (algorithms/patterns/nodes.*), checked with the
 * in-process schedule simulator (sched_sim.h).
 *
 * Layouts: K nodes x M ranks (K 1..4, M 1..3, contiguous), uneven nodes
 * ({1,3,2}, {4,1}, {2,2,1,3}) and interleaved ones (rankNode {0,1,0,1,..});
 * every function (all-reduce, all-gather, reduce-scatter), counts 0, 1,
 * N-1, N+1, 2N+3, 1001, out of place / in place / mixed, rendezvous and
 * eager. Inter-node traffic is counted exactly by walking the schedules
 * (elements SENT to a rank of another node) and compared with the formula
 * and with the flat ring's. Negative tests: broken hier schedules the
 * checker must reject.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "algorithms/patterns/nodes.h"
#include "sched_sim.h"

#define MAX_N 16
#define MAX_K 8

typedef struct {
  char name[48];
  int n, nnodes;
  int node[MAX_N];
} layout;

static const collSimPlace kPlaces[] = {COLL_SIM_OUT_OF_PLACE, COLL_SIM_IN_PLACE,
                                       COLL_SIM_IN_PLACE_ODD};
static const collFunc kFns[] = {COLL_FN_ALLREDUCE, COLL_FN_ALLGATHER,
                                COLL_FN_REDUCESCATTER};

/* Contiguous nodes of the given sizes. */
static layout makeSizes(int k, const int* sizes) {
  layout L;
  memset(&L, 0, sizeof L);
  L.nnodes = k;
  int len = snprintf(L.name, sizeof L.name, "sizes");
  for (int i = 0; i < k; i++) {
    for (int r = 0; r < sizes[i]; r++) L.node[L.n++] = i;
    len += snprintf(L.name + len, sizeof L.name - (size_t)len, "%c%d",
                    i ? ',' : ' ', sizes[i]);
  }
  return L;
}

/* Explicit rankNode (nodes numbered by first rank). */
static layout makeNodes(int n, const int* node) {
  layout L;
  memset(&L, 0, sizeof L);
  L.n = n;
  int len = snprintf(L.name, sizeof L.name, "nodes");
  for (int r = 0; r < n; r++) {
    L.node[r] = node[r];
    if (node[r] + 1 > L.nnodes) L.nnodes = node[r] + 1;
    len += snprintf(L.name + len, sizeof L.name - (size_t)len, "%c%d",
                    r ? ',' : ' ', node[r]);
  }
  return L;
}

/* Every layout of the brief. */
static int allLayouts(layout* out) {
  int n = 0;
  for (int k = 1; k <= 4; k++)
    for (int m = 1; m <= 3; m++) {
      int sizes[4] = {m, m, m, m};
      out[n++] = makeSizes(k, sizes);
    }
  static const int u1[] = {1, 3, 2}, u2[] = {4, 1}, u3[] = {2, 2, 1, 3};
  out[n++] = makeSizes(3, u1);
  out[n++] = makeSizes(2, u2);
  out[n++] = makeSizes(4, u3);
  static const int i1[] = {0, 1, 0, 1}, i2[] = {0, 1, 0, 1, 0, 1},
                   i3[] = {0, 1, 2, 0, 1, 2, 0, 1},
                   i4[] = {0, 0, 1, 2, 1, 0, 2, 2, 1};
  out[n++] = makeNodes(4, i1);
  out[n++] = makeNodes(6, i2);
  out[n++] = makeNodes(8, i3);
  out[n++] = makeNodes(9, i4);
  return n;
}

static int nodeSize(const layout* L, int nd) {
  int m = 0;
  for (int r = 0; r < L->n; r++) m += L->node[r] == nd;
  return m;
}

static int maxNodeSize(const layout* L) {
  int m = 0;
  for (int i = 0; i < L->nnodes; i++)
    if (nodeSize(L, i) > m) m = nodeSize(L, i);
  return m;
}

static collSimConfig config(collFunc fn, const layout* L, size_t count,
                            collSimPlace place, int eager) {
  collSimConfig cfg = {fn, L->n, 0, count, place, eager, L->node, L->nnodes};
  return cfg;
}

static void runOk(collFunc fn, const layout* L, size_t count, collSimPlace place,
                  int eager, collSchedBuildFn build, collSimResult* res) {
  collSimConfig cfg = config(fn, L, count, place, eager);
  if (!collSimRun(&cfg, build, res))
    fail_msg("%s %s count=%zu place=%d eager=%d: %s", collSimFnName(fn),
             L->name, count, (int)place, eager, res->msg);
}

static void runBad(collFunc fn, const layout* L, size_t count,
                   collSimPlace place, int eager, collSchedBuildFn build,
                   const char* expect) {
  collSimConfig cfg = config(fn, L, count, place, eager);
  collSimResult res;
  if (collSimRun(&cfg, build, &res))
    fail_msg("broken %s schedule (%s count=%zu) passed the checker",
             collSimFnName(fn), L->name, count);
  if (expect && !strstr(res.msg, expect))
    fail_msg("expected a failure mentioning \"%s\", got: %s", expect, res.msg);
}

/* Elements sent to ranks of another node: in total, and per sending node. */
typedef struct {
  size_t total;
  size_t perNode[MAX_K];
  int maxPhases;
} crossStats;

static crossStats crossNode(collFunc fn, const layout* L, size_t count,
                            collSimPlace place, collSchedBuildFn build) {
  crossStats x;
  memset(&x, 0, sizeof x);
  collSched s = {0};
  for (int r = 0; r < L->n; r++) {
    int inPlace = place == COLL_SIM_IN_PLACE ||
                  (place == COLL_SIM_IN_PLACE_ODD && (r & 1));
    collSchedArgs a = {fn, L->n, r, 0, count, inPlace, L->node, L->nnodes};
    collSchedReset(&s);
    assert_int_equal(build(&a, &s), collSuccess);
    if (s.nphases > x.maxPhases) x.maxPhases = s.nphases;
    for (int i = 0; i < s.nsteps; i++)
      if (s.steps[i].kind == COLL_STEP_SEND &&
          L->node[s.steps[i].peer] != L->node[r]) {
        x.total += s.steps[i].src.count;
        x.perNode[L->node[r]] += s.steps[i].src.count;
      }
  }
  collSchedFree(&s);
  return x;
}

/* Exact inter-node volume of hier, node bounds, phases, and the comparison
 * with the flat ring on the same layout. */
static void checkTraffic(collFunc fn, const layout* L, size_t c,
                         collSimPlace place, const collSimResult* res) {
  const size_t K = (size_t)L->nnodes, N = (size_t)L->n;
  const int M = maxNodeSize(L), k = L->nnodes;
  crossStats h = crossNode(fn, L, c, place, collHierBuild);
  crossStats ring = crossNode(fn, L, c, place, collRingBuild);
  switch (fn) {
    case COLL_FN_ALLREDUCE:
      assert_int_equal(h.total, 2 * (K - 1) * c);
      /* node j: about 2(K-1)/K * c, off by < 2 per segment (<= N) */
      for (size_t j = 0; j < K; j++) {
        const size_t want = 2 * (K - 1) * c, got = K * h.perNode[j];
        if (got + 2 * K * N < want || got > want + 2 * K * N)
          fail_msg("%s count=%zu: node %zu sends %zu inter-node elements, "
                   "want ~2(K-1)/K*c = %zu/%zu",
                   L->name, c, j, h.perNode[j], want, K);
      }
      assert_true(h.maxPhases <= (N > 1 ? 2 * (M - 1) + 2 * (k - 1) : 1));
      assert_int_equal(res->maxScratchBlocks, 0);
      break;
    case COLL_FN_ALLGATHER:
    case COLL_FN_REDUCESCATTER:
      assert_int_equal(h.total, (K - 1) * N * c);
      for (int j = 0; j < k; j++) {
        const int other = fn == COLL_FN_ALLGATHER ? (j + 1) % k : j;
        assert_int_equal(h.perNode[j],
                         k == 1 ? 0 : (N - (size_t)nodeSize(L, other)) * c);
      }
      if (fn == COLL_FN_ALLGATHER)
        assert_true(h.maxPhases <= (k > 1 ? 2 * (M - 1) + k - 1 : M - 1) + 1);
      else
        assert_true(h.maxPhases <= (N > 1 ? M + k - 1 : 1));
      assert_true(res->maxScratchBlocks <=
                  (fn == COLL_FN_ALLGATHER ? 0 : (int)N));
      break;
    default: break;
  }
  if (N == K) { /* one rank per node: hier is the flat ring */
    assert_int_equal(h.total, ring.total);
  } else if (K > 1 && c == 1001) { /* strictly less than the flat ring */
    if (h.total >= ring.total)
      fail_msg("%s %s count=%zu: hier inter-node %zu >= ring %zu",
               collSimFnName(fn), L->name, c, h.total, ring.total);
  }
  /* tiny counts: the ring's few non-empty blocks may cross less often */
  assert_true(h.total <= ring.total || c < N * N);
}

static void sweep(collFunc fn) {
  layout Ls[32];
  const int nl = allLayouts(Ls);
  for (int li = 0; li < nl; li++) {
    const layout* L = &Ls[li];
    const size_t un = (size_t)L->n;
    const size_t counts[] = {0, 1, un - 1, un + 1, 2 * un + 3, 1001};
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
      for (size_t pi = 0; pi < 3; pi++) {
        collSimResult res;
        runOk(fn, L, counts[ci], kPlaces[pi], 0, collHierBuild, &res);
        if (pi == 0 || counts[ci] == 1001)
          checkTraffic(fn, L, counts[ci], kPlaces[pi], &res);
      }
  }
}

static void test_allreduce(void** state) { (void)state; sweep(COLL_FN_ALLREDUCE); }
static void test_allgather(void** state) { (void)state; sweep(COLL_FN_ALLGATHER); }
static void test_reducescatter(void** state) {
  (void)state;
  sweep(COLL_FN_REDUCESCATTER);
}

/* Eager sends, larger uneven layouts, and the single-node fallbacks. */
static void test_more_layouts(void** state) {
  (void)state;
  static const int s1[] = {3, 1, 4, 1, 5}, s2[] = {5, 2}, s3[] = {1, 1, 3};
  layout Ls[3] = {makeSizes(5, s1), makeSizes(2, s2), makeSizes(3, s3)};
  for (int li = 0; li < 3; li++)
    for (int f = 0; f < 3; f++)
      for (int eager = 0; eager <= 1; eager++) {
        collSimResult res;
        runOk(kFns[f], &Ls[li], 37, kPlaces[eager ? 2 : 1], eager,
              collHierBuild, &res);
        checkTraffic(kFns[f], &Ls[li], 37, kPlaces[eager ? 2 : 1], &res);
      }
  /* rankNode NULL, or nnodes 1: one node, same traffic as the ring */
  for (int f = 0; f < 3; f++)
    for (int n = 1; n <= 7; n++) {
      collSimConfig cfg = {kFns[f], n, 0, 29, COLL_SIM_IN_PLACE_ODD, 0, NULL, 0};
      collSimResult h, r;
      if (!collSimRun(&cfg, collHierBuild, &h)) fail_msg("%s", h.msg);
      assert_true(collSimRun(&cfg, collRingBuild, &r));
      /* reduce-scatter: + the final all-to-all, (N-1) c in all */
      const size_t extra =
          kFns[f] == COLL_FN_REDUCESCATTER ? (size_t)(n - 1) * 29 : 0;
      assert_int_equal(h.totalSentElems, r.totalSentElems + extra);
      cfg.nnodes = 1;
      int zeros[8] = {0};
      cfg.rankNode = zeros;
      if (!collSimRun(&cfg, collHierBuild, &h)) fail_msg("%s", h.msg);
    }
}

static void test_registry(void** state) {
  (void)state;
  for (int f = 0; f < 3; f++) {
    const collAlgo* a = collAlgoFind(kFns[f], "hier");
    assert_non_null(a);
    assert_string_equal(a->name, "hier");
    assert_true(a->build == collHierBuild);
    assert_ptr_equal(collAlgoFind(kFns[f], "HIER"), a);
    assert_string_equal(collAlgoFind(kFns[f], NULL)->name, "ring");
  }
  assert_null(collAlgoFind(COLL_FN_BROADCAST, "hier"));
  assert_null(collAlgoFind(COLL_FN_REDUCE, "hier"));
  int ring = -1, hier = -1;
  for (int i = 0; collAlgoTable[i].name; i++) {
    if (!strcmp(collAlgoTable[i].name, "ring")) ring = i;
    if (!strcmp(collAlgoTable[i].name, "hier")) hier = i;
  }
  assert_true(ring >= 0 && hier > ring);
}

static void test_builder_args(void** state) {
  (void)state;
  collSched s = {0};
  int nodes[4] = {0, 1, 0, 1};
  collSchedArgs a = {COLL_FN_ALLREDUCE, 4, 0, 0, 8, 0, nodes, 2};
  assert_int_equal(collHierBuild(&a, &s), collSuccess);
  collSchedReset(&s);
  a.fn = COLL_FN_BROADCAST;
  assert_int_equal(collHierBuild(&a, &s), collInvalidArgument);
  a.fn = COLL_FN_ALLGATHER;
  a.rank = 4;
  assert_int_equal(collHierBuild(&a, &s), collInvalidArgument);
  a.rank = 0;
  a.nnodes = 3; /* node 2 has no rank */
  assert_int_equal(collHierBuild(&a, &s), collInvalidArgument);
  a.nnodes = 2;
  nodes[3] = 2; /* out of range */
  assert_int_equal(collHierBuild(&a, &s), collInvalidArgument);
  nodes[3] = -1;
  assert_int_equal(collHierBuild(&a, &s), collInvalidArgument);
  a.rankNode = NULL; /* one node */
  collSchedReset(&s);
  assert_int_equal(collHierBuild(&a, &s), collSuccess);
  assert_int_equal(collHierBuild(NULL, &s), collInvalidArgument);
  collSchedFree(&s);
}

static void test_patterns(void** state) {
  (void)state;
  for (size_t c = 0; c <= 40; c++)
    for (int p = 1; p <= 7; p++)
      for (int x = 0; x < p; x++) {
        size_t off, cnt;
        collSplitEven(c, p, x, &off, &cnt);
        for (size_t e = off; e < off + cnt; e++)
          assert_int_equal(collSplitEvenFind(c, p, e), x);
      }
  assert_int_equal(collMod(-1, 3), 2);
  assert_int_equal(collMod(7, 3), 1);
  const int rn[] = {0, 1, 0, 2, 1, 0};
  collNodeLayout L;
  assert_int_equal(collNodeLayoutInit(&L, rn, 3, 6), 0);
  assert_int_equal(L.nnodes, 3);
  assert_int_equal(collNodeSize(&L, 0), 3);
  assert_int_equal(collNodeSize(&L, 1), 2);
  assert_int_equal(collNodeSize(&L, 2), 1);
  assert_int_equal(collNodeRank(&L, 0, 2), 5);
  assert_int_equal(collNodeRank(&L, 1, 1), 4);
  assert_int_equal(L.local[4], 1);
  collNodeLayoutFree(&L);
  assert_int_equal(collNodeLayoutInit(&L, NULL, 5, 6), 0);
  assert_int_equal(L.nnodes, 1);
  assert_int_equal(collNodeSize(&L, 0), 6);
  collNodeLayoutFree(&L);
  assert_int_equal(collNodeLayoutInit(&L, rn, 4, 6), -1);
}

/* ---- negative tests: broken hier schedules the checker must reject ----- */

enum {
  MUT_SWAP_SEGMENTS, /* two sends to one peer in one phase swapped */
  MUT_DROP_CROSS,    /* last inter-node SEND removed */
  MUT_WRONG_OWNER,   /* inter-node sends go to the same local index on the
                        next node (the equal-nodes shortcut, wrong here) */
  MUT_NO_REDUCE,     /* an inter-node RECV_REDUCE only receives */
  MUT_SMALL_SCRATCH, /* reduce-scatter claims one scratch block less */
  MUT_SKIP_LAST      /* the last phase (intra all-gather) left out */
};
static int gMut, gMutRank;

static collResult_t mutBuild(const collSchedArgs* a, collSched* s) {
  collResult_t rc = collHierBuild(a, s);
  if (rc != collSuccess || a->rank != gMutRank) return rc;
  const int* node = a->rankNode;
  switch (gMut) {
    case MUT_SWAP_SEGMENTS:
      for (int i = 0; i + 1 < s->nsteps; i++) {
        collStep* x = &s->steps[i];
        collStep* y = &s->steps[i + 1];
        if (x->kind == COLL_STEP_SEND && y->kind == COLL_STEP_SEND &&
            x->peer == y->peer && x->phase == y->phase &&
            (x->src.off != y->src.off || x->src.blk != y->src.blk)) {
          collStep t = *x;
          *x = *y;
          *y = t;
          return rc;
        }
      }
      fail_msg("no two sends to one peer in one phase");
      break;
    case MUT_DROP_CROSS:
      for (int i = s->nsteps - 1; i >= 0; i--)
        if (s->steps[i].kind == COLL_STEP_SEND &&
            node[s->steps[i].peer] != node[a->rank]) {
          memmove(&s->steps[i], &s->steps[i + 1],
                  (size_t)(s->nsteps - i - 1) * sizeof(collStep));
          s->nsteps--;
          return rc;
        }
      fail_msg("no inter-node send");
      break;
    case MUT_WRONG_OWNER: {
      collNodeLayout L;
      assert_int_equal(collNodeLayoutInit(&L, node, a->nnodes, a->nranks), 0);
      const int me = a->rank, nn = (node[me] + 1) % a->nnodes;
      const int want = collNodeRank(&L, nn, L.local[me] % collNodeSize(&L, nn));
      for (int i = 0; i < s->nsteps; i++)
        if (s->steps[i].kind == COLL_STEP_SEND && node[s->steps[i].peer] == nn)
          s->steps[i].peer = want;
      collNodeLayoutFree(&L);
      break;
    }
    case MUT_NO_REDUCE:
      for (int i = 0; i < s->nsteps; i++)
        if (s->steps[i].kind == COLL_STEP_RECV_REDUCE &&
            node[s->steps[i].peer] != node[a->rank]) {
          s->steps[i].kind = COLL_STEP_RECV;
          s->steps[i].src = collRegionNone();
          return rc;
        }
      fail_msg("no inter-node receive-reduce");
      break;
    case MUT_SMALL_SCRATCH: s->scratchBlocks--; break;
    case MUT_SKIP_LAST: {
      const int last = s->steps[s->nsteps - 1].phase;
      while (s->nsteps > 0 && s->steps[s->nsteps - 1].phase == last) s->nsteps--;
      s->nphases = last;
      break;
    }
    default: break;
  }
  return rc;
}

static void bad(int mut, int rank, collFunc fn, const layout* L, size_t count,
                collSimPlace place, int eager, const char* expect) {
  gMut = mut;
  gMutRank = rank;
  runBad(fn, L, count, place, eager, mutBuild, expect);
}

static void test_checker_rejects(void** state) {
  (void)state;
  static const int u1[] = {1, 3, 2}, e22[] = {2, 2}, u2[] = {4, 1};
  const layout A = makeSizes(3, u1), B = makeSizes(2, e22), C = makeSizes(2, u2);
  const collFunc AR = COLL_FN_ALLREDUCE, AG = COLL_FN_ALLGATHER,
                 RS = COLL_FN_REDUCESCATTER;
  const collSimPlace OOP = COLL_SIM_OUT_OF_PLACE, IP = COLL_SIM_IN_PLACE;
  /* rank 0 (node of 1) is in 4 inter rings; 2 of them go to rank 2 */
  bad(MUT_SWAP_SEGMENTS, 0, AR, &A, 1001, OOP, 0, NULL);
  bad(MUT_SWAP_SEGMENTS, 0, AG, &A, 1001, IP, 0, NULL);
  bad(MUT_SWAP_SEGMENTS, 0, RS, &A, 1001, OOP, 1, NULL);
  bad(MUT_DROP_CROSS, 1, AR, &B, 100, OOP, 0, "deadlock");
  bad(MUT_DROP_CROSS, 3, AG, &A, 100, OOP, 1, NULL);
  bad(MUT_DROP_CROSS, 4, RS, &C, 100, IP, 0, "deadlock");
  bad(MUT_WRONG_OWNER, 0, AR, &A, 1001, OOP, 1, NULL);
  bad(MUT_WRONG_OWNER, 3, AG, &A, 1001, OOP, 1, NULL);
  bad(MUT_WRONG_OWNER, 0, RS, &A, 1001, OOP, 0, NULL);
  bad(MUT_NO_REDUCE, 2, AR, &B, 64, OOP, 0, "contributions per rank");
  bad(MUT_NO_REDUCE, 5, RS, &A, 64, IP, 0, "contributions per rank");
  bad(MUT_SMALL_SCRATCH, 1, RS, &A, 20, OOP, 0, "out of bounds");
  bad(MUT_SKIP_LAST, 2, AR, &A, 30, OOP, 0, "deadlock");
  bad(MUT_SKIP_LAST, 0, AR, &B, 30, OOP, 1, NULL);
  bad(MUT_SKIP_LAST, 4, AG, &A, 30, IP, 1, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_patterns),
      cmocka_unit_test(test_registry),
      cmocka_unit_test(test_builder_args),
      cmocka_unit_test(test_checker_rejects),
      cmocka_unit_test(test_more_layouts),
      cmocka_unit_test(test_allreduce),
      cmocka_unit_test(test_allgather),
      cmocka_unit_test(test_reducescatter),
  };
  return cmocka_run_group_tests_name("hier", tests, NULL, NULL);
}
