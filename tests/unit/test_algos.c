/*
 * test_algos.c - every row of the algorithm registry, for every collective it
 * builds, checked with the in-process schedule simulator (sched_sim.h):
 * 1..33, 40, 47, 48, 63 and 64 virtual ranks, every root up to 12 ranks (0, 1, n/2, n-1 beyond),
 * counts 0, 1, n-1, n+1 and a large odd count, out of place, in place and
 * mixed, with rendezvous sends (a schedule that needs transport buffering
 * deadlocks and fails). A second pass with eager sends covers 1..17 ranks.
 * Rows that do not read the node layout are also run as channels 1..3 run
 * them in the engine (ranks renumbered by perm_c, patterns/renumber.h):
 * 1..17, 24, 32 and 64 ranks, the same roots and placements, counts 0, 1,
 * n-1, n+1, 3n+7. test_rank_perm checks perm_c and its inverse against the
 * formula for 1..64 ranks and channels 0..7.
 * The composed hierarchical rows (hier_*: hier.c's inter-node variants and
 * hier_leader.c's family) also run on the node layouts of makeLayout, 2..24
 * ranks, every count and placement, rendezvous sends.
 * COLL_TEST_ALGOS_MAX_RANKS lowers the 64 (the sanitizer build uses 12).
 * One cmocka test per algorithm, so a failure names it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "algorithms/patterns/renumber.h"
#include "sched_sim.h"

#define MAX_RANKS 64

static const collSimPlace kPlaces[] = {COLL_SIM_OUT_OF_PLACE, COLL_SIM_IN_PLACE, COLL_SIM_IN_PLACE_ODD};

static int makeCounts(int n, size_t out[5]) {
  const size_t un = (size_t)n;
  out[0] = 0;
  out[1] = 1;
  out[2] = un - 1;
  out[3] = un + 1;
  out[4] = n <= 4 ? 100003 : n <= 16 ? 4099 : 3 * un + 7;
  return 5;
}

static int makeRoots(collFunc fn, int n, int roots[MAX_RANKS]) {
  int k = 0;
  if (fn != COLL_FN_BROADCAST && fn != COLL_FN_REDUCE) {
    roots[k++] = 0;
  } else if (n <= 12) {
    for (int r = 0; r < n; r++) roots[k++] = r;
  } else {
    roots[k++] = 0;
    roots[k++] = 1;
    roots[k++] = n / 2;
    roots[k++] = n - 1;
  }
  return k;
}

/* Node layouts for the hierarchical rows: kind 0 nodes of 2 ranks, 1 nodes
 * of 3, 2 ranks dealt round-robin over 3 nodes, 3 node sizes 1,3,2,1,3,2...
 * Returns the node count. */
static int makeLayout(int n, int kind, int* rankNode) {
  static const int uneven[] = {1, 3, 2};
  int node = 0, left = kind == 3 ? uneven[0] : 0;
  for (int r = 0; r < n; r++) {
    if (kind == 0) rankNode[r] = r / 2;
    else if (kind == 1) rankNode[r] = r / 3;
    else if (kind == 2) rankNode[r] = n >= 3 ? r % 3 : r;
    else {
      if (left == 0) left = uneven[++node % 3];
      rankNode[r] = node;
      left--;
    }
  }
  int k = 0;
  for (int r = 0; r < n; r++) k = rankNode[r] + 1 > k ? rankNode[r] + 1 : k;
  return k;
}

static void sweepLayouts(const collAlgo* a, int maxN) {
  int rankNode[MAX_RANKS];
  for (int n = 2; n <= maxN; n++)
    for (int kind = 0; kind < 4; kind++) {
      int nnodes = makeLayout(n, kind, rankNode);
      size_t counts[5];
      int nc = makeCounts(n, counts);
      for (int ci = 0; ci < nc; ci++)
        for (size_t pi = 0; pi < sizeof kPlaces / sizeof kPlaces[0]; pi++)
          for (int fn = COLL_FN_ALLREDUCE; fn <= COLL_FN_REDUCESCATTER; fn++) {
            if (!(a->funcMask & (1u << (unsigned)fn))) continue;
            collSimConfig cfg = {(collFunc)fn, n, 0, counts[ci], kPlaces[pi], 0, rankNode, nnodes};
            collSimResult res;
            if (!collSimRun(&cfg, a->build, &res))
              fail_msg("%s %s nranks=%d layout=%d nodes=%d count=%zu place=%d: %s", a->name,
                       collSimFnName((collFunc)fn), n, kind, nnodes, counts[ci], (int)kPlaces[pi], res.msg);
          }
    }
}

/* The builder the simulator runs for channel gChannel: the engine's own
 * per-channel build (renumbered ranks, steps mapped back to real ranks). */
static collSchedBuildFn gChannelBase;
static int gChannel;
static collResult_t channelBuild(const collSchedArgs* a, collSched* s) {
  return collSchedBuildChannel(gChannelBase, a, gChannel, s);
}

/* Channels 1..3 of row a: rendezvous sends, rank counts kChannelRanks up to
 * maxN, the roots, counts and placements of the channel-0 sweep, except that
 * the large count is 3n+7 for every n (the renumbering does not depend on
 * the count; 100003 and 4099 on few ranks would double the run time). */
static const int kChannelRanks[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 24, 32, 64};

static void sweepChannels(const collAlgo* a, int maxN) {
  gChannelBase = a->build;
  for (gChannel = 1; gChannel <= 3; gChannel++)
    for (int fn = COLL_FN_ALLREDUCE; fn <= COLL_FN_REDUCE; fn++) {
      if (!(a->funcMask & (1u << (unsigned)fn))) continue;
      for (size_t ni = 0; ni < sizeof kChannelRanks / sizeof kChannelRanks[0]; ni++) {
        int n = kChannelRanks[ni];
        if (n > maxN) break;
        size_t counts[5];
        int roots[MAX_RANKS];
        int nc = makeCounts(n, counts), nr = makeRoots((collFunc)fn, n, roots);
        counts[nc - 1] = 3 * (size_t)n + 7;
        for (int ri = 0; ri < nr; ri++)
          for (int ci = 0; ci < nc; ci++)
            for (size_t pi = 0; pi < sizeof kPlaces / sizeof kPlaces[0]; pi++) {
              collSimConfig cfg = {(collFunc)fn, n, roots[ri], counts[ci], kPlaces[pi], 0, NULL, 1};
              collSimResult res;
              if (!collSimRun(&cfg, channelBuild, &res))
                fail_msg("%s %s channel=%d nranks=%d root=%d count=%zu place=%d: %s", a->name,
                         collSimFnName((collFunc)fn), gChannel, n, roots[ri], counts[ci], (int)kPlaces[pi], res.msg);
            }
      }
    }
}

/* Rank counts of the channel-0 sweep: every count up to 33, then the ones
 * around the next powers of two and an odd one between (the sweep's cost
 * grows with n^2: all of 34..64 would triple the run for no new shape). */
static int sweepNext(int n) {
  static const int kBig[] = {40, 47, 48, 63, 64};
  if (n < 33) return n + 1;
  for (size_t i = 0; i < sizeof kBig / sizeof kBig[0]; i++)
    if (kBig[i] > n) return kBig[i];
  return MAX_RANKS + 1;
}

static void sweepAlgo(const char* name, int maxRanks, int eager) {
  int found = 0;
  for (const collAlgo* a = collAlgoTable; a->name != NULL; a++) {
    if (strcmp(a->name, name) != 0) continue;
    found = 1;
    for (int fn = COLL_FN_ALLREDUCE; fn <= COLL_FN_REDUCE; fn++) {
      if (!(a->funcMask & (1u << (unsigned)fn))) continue;
      for (int n = 1; n <= maxRanks; n = sweepNext(n)) {
        size_t counts[5];
        int roots[MAX_RANKS];
        int nc = makeCounts(n, counts), nr = makeRoots((collFunc)fn, n, roots);
        for (int ri = 0; ri < nr; ri++)
          for (int ci = 0; ci < nc; ci++)
            for (size_t pi = 0; pi < sizeof kPlaces / sizeof kPlaces[0]; pi++) {
              collSimConfig cfg = {(collFunc)fn, n, roots[ri], counts[ci], kPlaces[pi], eager, NULL, 1};
              collSimResult res;
              if (!collSimRun(&cfg, a->build, &res))
                fail_msg("%s %s nranks=%d root=%d count=%zu place=%d eager=%d: %s", a->name,
                         collSimFnName((collFunc)fn), n, roots[ri], counts[ci], (int)kPlaces[pi], eager, res.msg);
            }
      }
    }
    if (!eager && !a->nodeAware) sweepChannels(a, maxRanks);
  }
  if (!found) fail_msg("no algorithm named %s in the registry", name);
  /* the composed hierarchical rows on multi-node layouts (plain hier has
   * its own layout tests in test_hier.c) */
  if (strncmp(name, "hier_", 5) == 0 && !eager)
    for (const collAlgo* a = collAlgoTable; a->name != NULL; a++)
      if (strcmp(a->name, name) == 0) sweepLayouts(a, maxRanks < 24 ? maxRanks : 24);
}

static int maxRanks(void) {
  const char* s = getenv("COLL_TEST_ALGOS_MAX_RANKS");
  int n = s ? atoi(s) : MAX_RANKS;
  return n >= 1 && n <= MAX_RANKS ? n : MAX_RANKS;
}

#define ALGO_TEST(nm)                         \
  static void test_##nm(void** state) {      \
    (void)state;                              \
    sweepAlgo(#nm, maxRanks(), 0);            \
    sweepAlgo(#nm, 17, 1);                    \
  }
ALGO_TEST(ring)
ALGO_TEST(chain)
ALGO_TEST(hier)
ALGO_TEST(tree)
ALGO_TEST(binomial)
ALGO_TEST(rhd)
ALGO_TEST(bruck)
ALGO_TEST(direct)
ALGO_TEST(hier_tree)
ALGO_TEST(hier_rhd)
ALGO_TEST(hier_direct)
ALGO_TEST(hier_chain_ring)
ALGO_TEST(hier_chain_tree)
ALGO_TEST(hier_chain_rhd)
ALGO_TEST(hier_chain_direct)
ALGO_TEST(hier_binomial_ring)
ALGO_TEST(hier_binomial_tree)
ALGO_TEST(hier_binomial_rhd)
ALGO_TEST(hier_binomial_direct)

/* Every registry row is covered by a test above, except zerocopy: it is no
 * schedule (src/engine/zerocopy.c reads collMemAlloc buffers in place,
 * src/engine/cmagather.c all-gathers by process_vm_readv; its schedule row
 * is ring's, for the fallback) and cases.i17_4_zerocopy*,
 * cases.i17_3_allgather_cma test it. */
static void test_all_rows_listed(void** state) {
  (void)state;
  static const char* listed[] = {"ring", "chain", "hier", "tree", "binomial", "rhd", "bruck", "direct",
                                 "hier_tree", "hier_rhd", "hier_direct", "hier_chain_ring", "hier_chain_tree",
                                 "hier_chain_rhd", "hier_chain_direct", "hier_binomial_ring", "hier_binomial_tree",
                                 "hier_binomial_rhd", "hier_binomial_direct", "zerocopy"};
  for (const collAlgo* a = collAlgoTable; a->name != NULL; a++) {
    int ok = 0;
    for (size_t i = 0; i < sizeof listed / sizeof listed[0]; i++) ok |= strcmp(listed[i], a->name) == 0;
    if (!ok) fail_msg("registry row %s has no test in test_algos.c", a->name);
  }
}

/* perm_c of renumber.h against its formula, a bijection of 0..n-1, and
 * perm_c^-1 its inverse, for 1..64 ranks and channels 0..7; out-of-range
 * ranks (an unused root) pass unchanged. */
static void test_rank_perm(void** state) {
  (void)state;
  for (int n = 1; n <= MAX_RANKS; n++)
    for (int c = 0; c < 8; c++) {
      int seen[MAX_RANKS] = {0};
      for (int r = 0; r < n; r++) {
        int rev = c % 2 ? (n - r) % n : r;
        int want = (rev + (c / 2) * (n / 2)) % n;
        int v = collRankPerm(c, n, r);
        if (v != want) fail_msg("perm c=%d n=%d r=%d: got %d, want %d", c, n, r, v, want);
        if (seen[v]++) fail_msg("perm c=%d n=%d: %d is the image of two ranks", c, n, v);
        if (collRankPermInv(c, n, v) != r)
          fail_msg("perm^-1 c=%d n=%d: perm^-1(perm(%d)) = %d", c, n, r, collRankPermInv(c, n, v));
        if (collRankPerm(c, n, collRankPermInv(c, n, r)) != r)
          fail_msg("perm c=%d n=%d: perm(perm^-1(%d)) = %d", c, n, r, collRankPerm(c, n, collRankPermInv(c, n, r)));
      }
      assert_int_equal(collRankPerm(c, n, -1), -1);
      assert_int_equal(collRankPermInv(c, n, n), n);
    }
}

/* argv[1]: optional cmocka test filter, e.g. test_tree. */
int main(int argc, char** argv) {
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  /* The simulator allocates its memory per run; keep freed memory in the
   * heap so each run does not page-fault it in again (slow on some VMs). */
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_rows_listed), cmocka_unit_test(test_ring),     cmocka_unit_test(test_chain),
      cmocka_unit_test(test_hier),            cmocka_unit_test(test_tree),     cmocka_unit_test(test_binomial),
      cmocka_unit_test(test_rhd),             cmocka_unit_test(test_bruck),    cmocka_unit_test(test_direct),
      cmocka_unit_test(test_hier_tree),       cmocka_unit_test(test_hier_rhd), cmocka_unit_test(test_hier_direct),
      cmocka_unit_test(test_hier_chain_ring), cmocka_unit_test(test_hier_chain_tree),
      cmocka_unit_test(test_hier_chain_rhd), cmocka_unit_test(test_hier_chain_direct),
      cmocka_unit_test(test_hier_binomial_ring), cmocka_unit_test(test_hier_binomial_tree),
      cmocka_unit_test(test_hier_binomial_rhd), cmocka_unit_test(test_hier_binomial_direct),
      cmocka_unit_test(test_rank_perm),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
