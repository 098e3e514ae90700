/*
 * test_hier_leader.c - the leader family of hierarchical all-reduce
 * (algorithms/hier_leader.c: hier_<chain|binomial>_<ring|tree|rhd|direct>),
 * exact expectations on fixed layouts, checked by walking the schedules and
 * with the in-process schedule simulator (sched_sim.h). test_algos.c sweeps
 * every row over ranks, layouts, counts and placements; this file checks
 * what the family promises:
 *  - only leaders (the lowest rank of each node) send or receive across
 *    nodes, and a leader sends exactly what the inner all-reduce builder
 *    sends at virtual rank = node index on K ranks (ring: 2(K-1) c in all);
 *  - each node moves 2 (M_j-1) c elements inside the node (reduce + bcast);
 *  - out of place, a non-leader never reads RECV and writes it only with
 *    plain RECVs (the broadcast); a node of one rank reads SEND directly;
 *  - K == 1, N == 1, count 0, the registry rows and their arguments;
 *  - broken schedules (dropped broadcast, RECV read early, scratch too
 *    small) are rejected.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "sched_sim.h"

#define MAX_N 16
#define NFAMILY 8

typedef struct {
  const char* name;
  collSchedBuildFn build, inter; /* inter: the all-reduce between leaders */
  int chain;                     /* intra builder: 1 chain, 0 binomial */
} familyRow;

static const familyRow kFamily[NFAMILY] = {
    {"hier_chain_ring", collHierChainRingBuild, collRingBuild, 1},
    {"hier_chain_tree", collHierChainTreeBuild, collTreeBuild, 1},
    {"hier_chain_rhd", collHierChainRhdBuild, collRhdBuild, 1},
    {"hier_chain_direct", collHierChainDirectBuild, collDirectBuild, 1},
    {"hier_binomial_ring", collHierBinomialRingBuild, collRingBuild, 0},
    {"hier_binomial_tree", collHierBinomialTreeBuild, collTreeBuild, 0},
    {"hier_binomial_rhd", collHierBinomialRhdBuild, collRhdBuild, 0},
    {"hier_binomial_direct", collHierBinomialDirectBuild, collDirectBuild, 0},
};

typedef struct {
  int n, nnodes;
  int node[MAX_N];
} layout;

/* Contiguous nodes of the given sizes. */
static layout makeSizes(int k, const int* sizes) {
  layout L;
  memset(&L, 0, sizeof L);
  L.nnodes = k;
  for (int i = 0; i < k; i++)
    for (int r = 0; r < sizes[i]; r++) L.node[L.n++] = i;
  return L;
}

static int leaderOf(const layout* L, int nd) {
  for (int r = 0; r < L->n; r++)
    if (L->node[r] == nd) return r;
  return -1;
}

static int nodeSize(const layout* L, int nd) {
  int m = 0;
  for (int r = 0; r < L->n; r++) m += L->node[r] == nd;
  return m;
}

/* Elements rank r of L sends across nodes, within its node, and receives
 * across nodes (RECV and RECV_REDUCE). */
typedef struct {
  size_t crossSent, intraSent, crossRecv;
} rankTraffic;

static rankTraffic traffic(collSchedBuildFn build, const layout* L, int r, size_t count, int inPlace) {
  rankTraffic t = {0, 0, 0};
  collSched s = {0};
  collSchedArgs a = {COLL_FN_ALLREDUCE, L->n, r, 0, count, inPlace, L->node, L->nnodes};
  assert_int_equal(build(&a, &s), collSuccess);
  for (int i = 0; i < s.nsteps; i++) {
    const collStep* st = &s.steps[i];
    const int cross = st->peer >= 0 && L->node[st->peer] != L->node[r];
    if (st->kind == COLL_STEP_SEND) *(cross ? &t.crossSent : &t.intraSent) += st->src.count;
    if (cross && (st->kind == COLL_STEP_RECV || st->kind == COLL_STEP_RECV_REDUCE)) t.crossRecv += st->dst.count;
  }
  collSchedFree(&s);
  return t;
}

/* Elements the flat builder sends at rank r of n (no layout). */
static size_t flatSent(collSchedBuildFn build, int n, int r, size_t count, int inPlace) {
  layout one;
  memset(&one, 0, sizeof one);
  one.n = n;
  one.nnodes = 1;
  return traffic(build, &one, r, count, inPlace).intraSent;
}

static void runOk(const familyRow* f, const layout* L, size_t count, collSimPlace place, int eager,
                  collSimResult* res) {
  collSimConfig cfg = {COLL_FN_ALLREDUCE, L->n, 0, count, place, eager, L->node, L->nnodes};
  if (!collSimRun(&cfg, f->build, res))
    fail_msg("%s n=%d nodes=%d count=%zu place=%d eager=%d: %s", f->name, L->n, L->nnodes, count, (int)place,
             eager, res->msg);
}

static layout layoutK2M2(void) {
  static const int sizes[] = {2, 2};
  return makeSizes(2, sizes);
}

/* The layouts of the traffic checks: 2 x 2 (netns k2m2), uneven 1,3,2 (a
 * node of one rank), 4 x 3, and 5,2. */
static int trafficLayouts(layout out[4]) {
  static const int u[] = {1, 3, 2}, e43[] = {3, 3, 3, 3}, s52[] = {5, 2};
  out[0] = layoutK2M2();
  out[1] = makeSizes(3, u);
  out[2] = makeSizes(4, e43);
  out[3] = makeSizes(2, s52);
  return 4;
}

static void test_inter_node_traffic(void** state) {
  (void)state;
  layout Ls[4];
  const int nl = trafficLayouts(Ls);
  for (int fi = 0; fi < NFAMILY; fi++)
    for (int li = 0; li < nl; li++) {
      const familyRow* f = &kFamily[fi];
      const layout* L = &Ls[li];
      const int K = L->nnodes;
      const size_t counts[] = {1, 7, 1001};
      for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        const size_t c = counts[ci];
        size_t total = 0, intra[MAX_N] = {0};
        for (int r = 0; r < L->n; r++) {
          const rankTraffic t = traffic(f->build, L, r, c, 0);
          const int nd = L->node[r], leader = leaderOf(L, nd) == r;
          if (!leader && (t.crossSent || t.crossRecv))
            fail_msg("%s count=%zu: rank %d is no leader and moves %zu/%zu elements across nodes", f->name, c, r,
                     t.crossSent, t.crossRecv);
          /* a leader: the inner all-reduce at virtual rank nd of K (in
           * place unless its node has one rank) */
          const size_t want = leader ? flatSent(f->inter, K, nd, c, nodeSize(L, nd) > 1) : 0;
          if (t.crossSent != want)
            fail_msg("%s count=%zu: rank %d sends %zu elements across nodes, the inner all-reduce %zu", f->name, c,
                     r, t.crossSent, want);
          total += t.crossSent;
          intra[nd] += t.intraSent;
          if (f->chain) { /* chain: reduce sends c from every non-leader, bcast from all but the last */
            const int m = nodeSize(L, nd), x = r - leaderOf(L, nd);
            const size_t chainWant = m == 1 ? 0 : (size_t)((x > 0) + (x < m - 1)) * c;
            assert_int_equal(t.intraSent, chainWant);
          }
        }
        if (f->inter == collRingBuild) assert_int_equal(total, 2 * (size_t)(K - 1) * c);
        for (int nd = 0; nd < K; nd++) assert_int_equal(intra[nd], 2 * (size_t)(nodeSize(L, nd) - 1) * c);
      }
    }
}

/* Ring between leaders, 2 x 2: each leader sends 2(K-1)/K * c = c. */
static void test_k2m2_ring_exact(void** state) {
  (void)state;
  const layout L = layoutK2M2();
  for (size_t c = 0; c <= 9; c++) {
    assert_int_equal(traffic(collHierChainRingBuild, &L, 0, c, 0).crossSent, c);
    assert_int_equal(traffic(collHierChainRingBuild, &L, 2, c, 1).crossSent, c);
    assert_int_equal(traffic(collHierChainRingBuild, &L, 1, c, 0).crossSent, 0);
    assert_int_equal(traffic(collHierBinomialRingBuild, &L, 3, c, 0).crossSent, 0);
    /* direct between 2 leaders: each sends its node sum once */
    assert_int_equal(traffic(collHierBinomialDirectBuild, &L, 2, c, 0).crossSent, c);
  }
}

/* Interleaved nodes: rankNode {0,1,0,1,1,0}: node 0 = ranks 0 2 5, node 1 =
 * ranks 1 3 4; the leaders are the lowest ranks, 0 and 1, not the first
 * rank of a node's list in any other order. */
static void test_leader_is_lowest_rank(void** state) {
  (void)state;
  layout L;
  memset(&L, 0, sizeof L);
  static const int nodes[] = {0, 1, 0, 1, 1, 0};
  L.n = 6;
  L.nnodes = 2;
  memcpy(L.node, nodes, sizeof nodes);
  for (int fi = 0; fi < NFAMILY; fi++) {
    collSimResult res;
    runOk(&kFamily[fi], &L, 33, COLL_SIM_IN_PLACE_ODD, 0, &res);
    for (int r = 0; r < L.n; r++) {
      const rankTraffic t = traffic(kFamily[fi].build, &L, r, 33, 0);
      if ((t.crossSent > 0) != (r <= 1) || (t.crossRecv > 0) != (r <= 1))
        fail_msg("%s: rank %d crosses nodes: sends %zu, receives %zu", kFamily[fi].name, r, t.crossSent,
                 t.crossRecv);
    }
  }
}

/* Out of place: non-leaders never read RECV and write it only with RECV
 * steps; a leader alone on its node (rank 0 of 1,3,2) runs exactly the
 * inner all-reduce, out of place (it reads SEND directly, no extra COPY). */
static void test_buffers(void** state) {
  (void)state;
  static const int u[] = {1, 3, 2};
  const layout L = makeSizes(3, u);
  const int leaders[] = {0, 1, 4};
  for (int fi = 0; fi < NFAMILY; fi++)
    for (int r = 0; r < L.n; r++) {
      collSched s = {0}, inner = {0};
      collSchedArgs a = {COLL_FN_ALLREDUCE, L.n, r, 0, 100, 0, L.node, L.nnodes};
      assert_int_equal(kFamily[fi].build(&a, &s), collSuccess);
      const int leader = leaderOf(&L, L.node[r]) == r;
      int readsSend = 0, firstWrite = -1; /* phase of the first write of RECV */
      for (int i = 0; i < s.nsteps; i++) {
        const collStep* st = &s.steps[i];
        readsSend |= st->kind != COLL_STEP_RECV && st->src.buf == COLL_BUF_SEND;
        if (leader) continue;
        if (st->kind != COLL_STEP_RECV && st->src.buf == COLL_BUF_RECV && (firstWrite < 0 || st->phase <= firstWrite))
          fail_msg("%s rank %d step %d reads RECV before the broadcast wrote it", kFamily[fi].name, r, i);
        if (st->dst.buf == COLL_BUF_RECV) {
          assert_int_equal(st->kind, COLL_STEP_RECV);
          if (firstWrite < 0) firstWrite = st->phase;
        }
      }
      assert_true(readsSend);
      if (r == 0) {
        collSchedArgs ia = {COLL_FN_ALLREDUCE, 3, 0, 0, 100, 0, NULL, 1};
        assert_int_equal(kFamily[fi].inter(&ia, &inner), collSuccess);
        assert_int_equal(s.nsteps, inner.nsteps);
        for (int i = 0; i < s.nsteps; i++) {
          assert_int_equal(s.steps[i].kind, inner.steps[i].kind);
          assert_int_equal(s.steps[i].phase, inner.steps[i].phase);
          assert_int_equal(s.steps[i].peer, inner.steps[i].peer < 0 ? -1 : leaders[inner.steps[i].peer]);
          assert_int_equal(s.steps[i].src.buf, inner.steps[i].src.buf);
          assert_int_equal(s.steps[i].dst.buf, inner.steps[i].dst.buf);
        }
      }
      collSchedFree(&inner);
      collSchedFree(&s);
    }
}

/* K == 1 (rankNode NULL or one node): reduce + broadcast, 2(N-1) c on the
 * wire; N == 1: one COPY out of place, nothing in place; count 0: nothing. */
static void test_single_node(void** state) {
  (void)state;
  for (int fi = 0; fi < NFAMILY; fi++)
    for (int n = 1; n <= 9; n++) {
      int zeros[9] = {0};
      collSimConfig cfg = {COLL_FN_ALLREDUCE, n, 0, 29, COLL_SIM_IN_PLACE_ODD, 0, NULL, 0};
      collSimResult res;
      if (!collSimRun(&cfg, kFamily[fi].build, &res)) fail_msg("%s n=%d: %s", kFamily[fi].name, n, res.msg);
      assert_int_equal(res.totalSentElems, 2 * (size_t)(n - 1) * 29);
      cfg.rankNode = zeros;
      cfg.nnodes = 1;
      cfg.eager = 1;
      if (!collSimRun(&cfg, kFamily[fi].build, &res)) fail_msg("%s n=%d: %s", kFamily[fi].name, n, res.msg);
      assert_int_equal(res.totalSentElems, 2 * (size_t)(n - 1) * 29);
    }
  collSched s = {0};
  collSchedArgs a = {COLL_FN_ALLREDUCE, 1, 0, 0, 5, 0, NULL, 0};
  assert_int_equal(collHierChainRingBuild(&a, &s), collSuccess);
  assert_int_equal(s.nsteps, 1);
  assert_int_equal(s.steps[0].kind, COLL_STEP_COPY);
  collSchedReset(&s);
  a.inPlace = 1;
  assert_int_equal(collHierBinomialDirectBuild(&a, &s), collSuccess);
  assert_int_equal(s.nsteps, 0);
  int nodes[4] = {0, 0, 1, 1};
  collSchedArgs z = {COLL_FN_ALLREDUCE, 4, 0, 0, 0, 0, nodes, 2};
  for (int fi = 0; fi < NFAMILY; fi++) {
    collSchedReset(&s);
    assert_int_equal(kFamily[fi].build(&z, &s), collSuccess);
    assert_int_equal(s.nsteps, 0);
  }
  collSchedFree(&s);
}

/* Eager and rendezvous on uneven layouts, every placement. */
static void test_layouts(void** state) {
  (void)state;
  static const int s1[] = {3, 1, 4, 1, 5}, s2[] = {1, 1, 3}, s3[] = {2, 2, 1, 3};
  const layout Ls[] = {makeSizes(5, s1), makeSizes(3, s2), makeSizes(4, s3), layoutK2M2()};
  static const collSimPlace places[] = {COLL_SIM_OUT_OF_PLACE, COLL_SIM_IN_PLACE, COLL_SIM_IN_PLACE_ODD};
  for (int fi = 0; fi < NFAMILY; fi++)
    for (size_t li = 0; li < sizeof Ls / sizeof Ls[0]; li++)
      for (int pi = 0; pi < 3; pi++)
        for (int eager = 0; eager <= 1; eager++) {
          collSimResult res;
          runOk(&kFamily[fi], &Ls[li], 37, places[pi], eager, &res);
          runOk(&kFamily[fi], &Ls[li], 1, places[pi], eager, &res);
        }
}

static void test_registry(void** state) {
  (void)state;
  int rows = 0, first = -1;
  while (collAlgoTable[rows].name) rows++;
  for (int i = 0; i < rows && first < 0; i++)
    if (strcmp(collAlgoTable[i].name, kFamily[0].name) == 0) first = i;
  assert_true(first >= 0 && first + NFAMILY <= rows);
  for (int fi = 0; fi < NFAMILY; fi++) {
    const collAlgo* a = &collAlgoTable[first + fi]; /* consecutive rows, in this order */
    assert_string_equal(a->name, kFamily[fi].name);
    assert_true(a->build == kFamily[fi].build);
    assert_int_equal(a->nodeAware, 1);
    assert_int_equal(a->funcMask, 1u << COLL_FN_ALLREDUCE);
    assert_ptr_equal(collAlgoFind(COLL_FN_ALLREDUCE, kFamily[fi].name), a);
    for (int f = COLL_FN_ALLGATHER; f < COLL_FN_COUNT; f++) assert_null(collAlgoFind((collFunc)f, a->name));
  }
  assert_ptr_equal(collAlgoFind(COLL_FN_ALLREDUCE, "HIER_Binomial_Direct"), &collAlgoTable[first + NFAMILY - 1]);
  assert_string_equal(collAlgoFind(COLL_FN_ALLREDUCE, NULL)->name, "ring");
  assert_null(collAlgoFind(COLL_FN_ALLREDUCE, "hier_chain"));
  assert_null(collAlgoFind(COLL_FN_ALLREDUCE, "hier_ring_chain"));
}

static void test_builder_args(void** state) {
  (void)state;
  collSched s = {0};
  int nodes[4] = {0, 1, 0, 1};
  collSchedArgs a = {COLL_FN_ALLREDUCE, 4, 3, 0, 8, 0, nodes, 2};
  for (int fi = 0; fi < NFAMILY; fi++) {
    const collSchedBuildFn b = kFamily[fi].build;
    a.fn = COLL_FN_ALLREDUCE;
    collSchedReset(&s);
    assert_int_equal(b(&a, &s), collSuccess);
    a.fn = COLL_FN_BROADCAST;
    assert_int_equal(b(&a, &s), collInvalidArgument);
    a.fn = COLL_FN_ALLREDUCE;
    a.nnodes = 3; /* node 2 has no rank */
    assert_int_equal(b(&a, &s), collInvalidArgument);
    a.nnodes = 2;
    nodes[3] = 2; /* out of range */
    assert_int_equal(b(&a, &s), collInvalidArgument);
    nodes[3] = 1;
    a.rank = 4;
    assert_int_equal(b(&a, &s), collInvalidArgument);
    a.rank = 3;
    assert_int_equal(b(NULL, &s), collInvalidArgument);
  }
  collSchedFree(&s);
}

/* ---- negative tests: broken leader schedules the checker must reject ---- */

enum {
  MUT_DROP_BCAST,   /* the leader's last intra-node SEND removed */
  MUT_EARLY_RECV,   /* a non-leader's first reduce step reads RECV, not SEND */
  MUT_SMALL_SCRATCH /* a rank that accumulates in scratch claims none */
};
static int gMut, gMutRank;
static collSchedBuildFn gMutBase;

static collResult_t mutBuild(const collSchedArgs* a, collSched* s) {
  const collResult_t rc = gMutBase(a, s);
  if (rc != collSuccess || a->rank != gMutRank) return rc;
  switch (gMut) {
    case MUT_DROP_BCAST:
      for (int i = s->nsteps - 1; i >= 0; i--)
        if (s->steps[i].kind == COLL_STEP_SEND && a->rankNode[s->steps[i].peer] == a->rankNode[a->rank]) {
          memmove(&s->steps[i], &s->steps[i + 1], (size_t)(s->nsteps - i - 1) * sizeof(collStep));
          s->nsteps--;
          return rc;
        }
      fail_msg("no intra-node send");
      break;
    case MUT_EARLY_RECV:
      for (int i = 0; i < s->nsteps; i++)
        if (s->steps[i].src.buf == COLL_BUF_SEND) {
          s->steps[i].src.buf = COLL_BUF_RECV;
          return rc;
        }
      fail_msg("no step reads SEND");
      break;
    case MUT_SMALL_SCRATCH:
      assert_int_equal(s->scratchBlocks, 1);
      s->scratchBlocks = 0;
      break;
    default: break;
  }
  return rc;
}

static void bad(int mut, int rank, collSchedBuildFn base, const layout* L, size_t count, int eager,
                const char* expect) {
  gMut = mut;
  gMutRank = rank;
  gMutBase = base;
  collSimConfig cfg = {COLL_FN_ALLREDUCE, L->n, 0, count, COLL_SIM_OUT_OF_PLACE, eager, L->node, L->nnodes};
  collSimResult res;
  if (collSimRun(&cfg, mutBuild, &res)) fail_msg("broken schedule (mutation %d, rank %d) passed the checker", mut, rank);
  if (expect && !strstr(res.msg, expect))
    fail_msg("mutation %d: expected a failure mentioning \"%s\", got: %s", mut, expect, res.msg);
}

static void test_checker_rejects(void** state) {
  (void)state;
  static const int u[] = {1, 3, 2};
  const layout A = makeSizes(3, u), B = layoutK2M2();
  bad(MUT_DROP_BCAST, 1, collHierChainRingBuild, &A, 40, 0, "deadlock");
  bad(MUT_DROP_BCAST, 2, collHierBinomialDirectBuild, &B, 40, 1, NULL);
  bad(MUT_EARLY_RECV, 3, collHierChainTreeBuild, &A, 40, 0, NULL);
  bad(MUT_EARLY_RECV, 1, collHierBinomialRhdBuild, &B, 40, 0, NULL);
  /* chain reduce on node 1 of 1,3,2: 2 -> 3 -> 1 (leader); rank 3
   * accumulates in scratch */
  bad(MUT_SMALL_SCRATCH, 3, collHierChainRingBuild, &A, 40, 0, "SCRATCH");
  /* binomial reduce on node 0 of 5,2 (root 0): rank 2 (v 2) receives from
   * v 3, accumulates in scratch and sends to v 0 */
  static const int s52[] = {5, 2};
  const layout C = makeSizes(2, s52);
  bad(MUT_SMALL_SCRATCH, 2, collHierBinomialRingBuild, &C, 40, 0, "SCRATCH");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_registry),
      cmocka_unit_test(test_builder_args),
      cmocka_unit_test(test_k2m2_ring_exact),
      cmocka_unit_test(test_inter_node_traffic),
      cmocka_unit_test(test_leader_is_lowest_rank),
      cmocka_unit_test(test_buffers),
      cmocka_unit_test(test_single_node),
      cmocka_unit_test(test_layouts),
      cmocka_unit_test(test_checker_rejects),
  };
  return cmocka_run_group_tests_name("hier_leader", tests, NULL, NULL);
}
