/*
 * test_sched.c - the ring and chain schedule builders and the registry,
 * checked with the in-process schedule simulator (sched_sim.h): every
 * collective for 1..33 ranks, every root (sampled beyond 12 ranks), counts
 * around the block boundaries, out of place, in place and mixed. Negative
 * tests feed deliberately broken schedules to prove the checker fails them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "sched_sim.h"

#define MAX_RANKS 33

static const collSimPlace kPlaces[] = {COLL_SIM_OUT_OF_PLACE, COLL_SIM_IN_PLACE,
                                       COLL_SIM_IN_PLACE_ODD};

static size_t ceilDiv(size_t a, size_t b) { return (a + b - 1) / b; }

/* Counts for n ranks: empty, tiny, around n, and one larger odd count. */
static int makeCounts(int n, size_t out[6]) {
  const size_t un = (size_t)n;
  out[0] = 0;
  out[1] = 1;
  out[2] = un - 1;
  out[3] = un + 1;
  out[4] = 2 * un + 3;
  out[5] = n <= 2 ? 1000003 : n <= 8 ? 10007 : 257;
  return 6;
}

static collSchedBuildFn defaultBuilder(collFunc fn) {
  const collAlgo* a = collAlgoFind(fn, NULL);
  assert_non_null(a);
  return a->build;
}

static void runOk(collFunc fn, int n, int root, size_t count,
                  collSimPlace place, int eager, collSchedBuildFn build,
                  collSimResult* res) {
  collSimConfig cfg = {fn, n, root, count, place, eager, NULL, 1};
  if (!collSimRun(&cfg, build, res))
    fail_msg("%s nranks=%d root=%d count=%zu place=%d eager=%d: %s",
             collSimFnName(fn), n, root, count, (int)place, eager, res->msg);
}

static void runBad(collFunc fn, int n, int root, size_t count,
                   collSimPlace place, int eager, collSchedBuildFn build,
                   const char* expect) {
  collSimConfig cfg = {fn, n, root, count, place, eager, NULL, 1};
  collSimResult res;
  if (collSimRun(&cfg, build, &res))
    fail_msg("broken %s schedule (nranks=%d count=%zu) passed the checker",
             collSimFnName(fn), n, count);
  if (expect && !strstr(res.msg, expect))
    fail_msg("expected a failure mentioning \"%s\", got: %s", expect, res.msg);
}

/* Checks the wire volume and schedule shape of a passing run. */
static void checkCost(collFunc fn, int n, size_t c, const collSimResult* r) {
  const size_t un = (size_t)n, hops = un - 1;
  switch (fn) {
    case COLL_FN_ALLREDUCE:
      assert_int_equal(r->totalSentElems, 2 * hops * c);
      assert_true(r->maxSentElems <= 2 * hops * ceilDiv(c, un));
      assert_true(r->maxPhases <= (n > 1 ? 2 * n - 2 : 1));
      assert_int_equal(r->maxScratchBlocks, 0);
      break;
    case COLL_FN_ALLGATHER:
    case COLL_FN_REDUCESCATTER:
      assert_int_equal(r->totalSentElems, un * hops * c);
      assert_int_equal(r->maxSentElems, hops * c);
      assert_true(r->maxPhases <= (n > 1 ? n - 1 : 1));
      assert_true(r->maxScratchBlocks <= (fn == COLL_FN_ALLGATHER ? 0 : 2));
      break;
    default: /* chain broadcast / reduce */
      assert_int_equal(r->totalSentElems, hops * c);
      assert_int_equal(r->maxSentElems, n > 1 ? c : 0);
      assert_true(r->maxPhases <= 2);
      assert_true(r->maxSteps <= 2);
      assert_true(r->maxScratchBlocks <= (fn == COLL_FN_REDUCE ? 1 : 0));
      break;
  }
}

static void sweep(collFunc fn) {
  const int rooted = fn == COLL_FN_BROADCAST || fn == COLL_FN_REDUCE;
  collSchedBuildFn build = defaultBuilder(fn);
  for (int n = 1; n <= MAX_RANKS; n++) {
    size_t counts[6];
    int ncounts = makeCounts(n, counts);
    int roots[MAX_RANKS], nroots = 0;
    if (!rooted) {
      roots[nroots++] = 0;
    } else if (n <= 12) {
      for (int r = 0; r < n; r++) roots[nroots++] = r;
    } else {
      roots[nroots++] = 0;
      roots[nroots++] = n / 2;
      roots[nroots++] = n - 1;
    }
    for (int ri = 0; ri < nroots; ri++)
      for (int ci = 0; ci < ncounts; ci++)
        for (size_t pi = 0; pi < sizeof(kPlaces) / sizeof(kPlaces[0]); pi++) {
          collSimResult res;
          runOk(fn, n, roots[ri], counts[ci], kPlaces[pi], 0, build, &res);
          checkCost(fn, n, counts[ci], &res);
        }
  }
}

static void test_allreduce(void** state) { (void)state; sweep(COLL_FN_ALLREDUCE); }
static void test_allgather(void** state) { (void)state; sweep(COLL_FN_ALLGATHER); }
static void test_reducescatter(void** state) {
  (void)state;
  sweep(COLL_FN_REDUCESCATTER);
}
static void test_broadcast(void** state) { (void)state; sweep(COLL_FN_BROADCAST); }
static void test_reduce(void** state) { (void)state; sweep(COLL_FN_REDUCE); }

/* Schedules valid under rendezvous also pass with eager sends. */
static void test_eager(void** state) {
  (void)state;
  for (int fn = COLL_FN_ALLREDUCE; fn <= COLL_FN_REDUCE; fn++)
    for (int n = 1; n <= 9; n++)
      for (size_t pi = 0; pi < 3; pi++) {
        collSimResult res;
        runOk((collFunc)fn, n, n - 1, 2 * (size_t)n + 3, kPlaces[pi], 1,
              defaultBuilder((collFunc)fn), &res);
      }
}

static void test_registry(void** state) {
  (void)state;
  static const struct {
    collFunc fn;
    const char* name;
  } want[] = {{COLL_FN_ALLREDUCE, "ring"},
              {COLL_FN_ALLGATHER, "ring"},
              {COLL_FN_REDUCESCATTER, "ring"},
              {COLL_FN_BROADCAST, "chain"},
              {COLL_FN_REDUCE, "chain"}};
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
    const collAlgo* a = collAlgoFind(want[i].fn, NULL);
    assert_non_null(a);
    assert_string_equal(a->name, want[i].name);
    assert_ptr_equal(collAlgoFind(want[i].fn, want[i].name), a);
    assert_ptr_equal(collAlgoFind(want[i].fn, ""), a);
    assert_true(a->funcMask & (1u << want[i].fn));
  }
  assert_true(collAlgoFind(COLL_FN_ALLREDUCE, NULL)->build == collRingBuild);
  assert_true(collAlgoFind(COLL_FN_BROADCAST, NULL)->build == collChainBuild);
  assert_ptr_equal(collAlgoFind(COLL_FN_ALLREDUCE, "RING"),
                   collAlgoFind(COLL_FN_ALLREDUCE, "ring"));
  assert_null(collAlgoFind(COLL_FN_ALLREDUCE, "chain"));
  assert_null(collAlgoFind(COLL_FN_BROADCAST, "ring"));
  assert_null(collAlgoFind(COLL_FN_ALLREDUCE, "binomial"));
  assert_null(collAlgoFind(COLL_FN_BROADCAST, "tree"));
  assert_null(collAlgoFind(COLL_FN_ALLREDUCE, "nosuch"));
  assert_null(collAlgoFind(COLL_FN_SEND, NULL));
  assert_null(collAlgoFind(COLL_FN_RECV, NULL));
  assert_null(collAlgoFind(COLL_FN_COUNT, NULL));
  assert_null(collAlgoFind((collFunc)-1, NULL));
  int rows = 0;
  while (collAlgoTable[rows].name) rows++;
  assert_int_equal(rows, 20); /* the last: zerocopy (src/engine/zerocopy.c; a ring schedule when it cannot run) */
  assert_string_equal(collAlgoTable[rows - 1].name, "zerocopy");
  assert_ptr_equal(collAlgoFind(COLL_FN_REDUCESCATTER, "zerocopy"), &collAlgoTable[rows - 1]);
  /* all-gather: src/engine/cmagather.c, the same fallback */
  assert_ptr_equal(collAlgoFind(COLL_FN_ALLGATHER, "zerocopy"), &collAlgoTable[rows - 1]);
  assert_null(collAlgoTable[rows].build);
}

static void test_builder_args(void** state) {
  (void)state;
  collSched s = {0};
  collSchedArgs a = {COLL_FN_BROADCAST, 4, 0, 4, 8, 0, NULL, 1}; /* root 4: bad */
  assert_int_equal(collChainBuild(&a, &s), collInvalidArgument);
  a.root = -1;
  assert_int_equal(collChainBuild(&a, &s), collInvalidArgument);
  a.root = 0;
  a.fn = COLL_FN_ALLREDUCE;
  assert_int_equal(collChainBuild(&a, &s), collInvalidArgument);
  assert_int_equal(collRingBuild(&a, &s), collSuccess);
  collSchedReset(&s);
  a.fn = COLL_FN_BROADCAST;
  assert_int_equal(collRingBuild(&a, &s), collInvalidArgument);
  a.fn = COLL_FN_ALLREDUCE;
  a.rank = 4;
  assert_int_equal(collRingBuild(&a, &s), collInvalidArgument);
  a.rank = 0;
  a.nranks = 0;
  assert_int_equal(collRingBuild(&a, &s), collInvalidArgument);
  /* Ring all-reduce needs 2(n-1) phases: more than 16 bits above 32768. */
  collSchedReset(&s);
  a.nranks = 40000;
  a.count = 40000;
  assert_int_equal(collRingBuild(&a, &s), collInvalidArgument);
  collSchedReset(&s); /* tiny counts need few phases and still work */
  a.count = 3;
  assert_int_equal(collRingBuild(&a, &s), collSuccess);
  assert_true(s.nphases <= 6);
  collSchedFree(&s);
}

/* ---- negative tests: broken builders the checker must reject ---------- */

enum {
  MUT_DROP_LAST,      /* rank's last step removed */
  MUT_WRONG_BLOCK,    /* 2nd SEND sends a different block of equal size */
  MUT_WRITE_SEND,     /* a reduction lands in SEND */
  MUT_OUT_OF_BOUNDS,  /* 1st SEND starts past the buffer */
  MUT_ONE_PHASE,      /* every step in phase 0: concurrent steps race */
  MUT_SHORT_RECV,     /* last receive posts one element less */
  MUT_DOUBLE_COUNT,   /* extra local REDUCE of own input into RECV */
  MUT_EXTRA_SEND,     /* extra SEND nobody receives */
  MUT_NONROOT_RECV,   /* chain reduce middle rank reduces into RECV */
  MUT_NONROOT_SEND,   /* chain broadcast forwards from SEND */
  MUT_SCRATCH_TO_RECV,/* reduce-scatter partials in RECV (not SCRATCH) */
  MUT_WRONG_SCRATCH,  /* reduce-scatter sends the scratch block it writes */
  MUT_UNWRITTEN,      /* all-gather sends a block not yet received */
  MUT_NO_COPY,        /* all-gather out of place forgets the local COPY */
  MUT_PHASE_ORDER,    /* two steps of different phases swapped */
  MUT_SELF_PEER,      /* a SEND to itself */
  MUT_BUILD_ERROR     /* builder reports failure */
};
static int gMut, gMutRank;

static collStep* nthStep(collSched* s, int kind, int nth) {
  for (int i = 0; i < s->nsteps; i++)
    if (s->steps[i].kind == kind && nth-- == 0) return &s->steps[i];
  return NULL;
}

static collResult_t mutBuild(const collSchedArgs* a, collSched* s) {
  collResult_t rc = defaultBuilder(a->fn)(a, s);
  if (rc != collSuccess) return rc;
  if (gMut == MUT_SCRATCH_TO_RECV) { /* every rank */
    for (int i = 0; i < s->nsteps; i++) {
      collRegion* g[2] = {&s->steps[i].src, &s->steps[i].dst};
      for (int k = 0; k < 2; k++)
        if (g[k]->buf == COLL_BUF_SCRATCH && g[k]->blk == 0)
          *g[k] = collRegionMake(COLL_BUF_RECV, 0, 0, g[k]->count);
    }
    return rc;
  }
  if (a->rank != gMutRank) return rc;
  collStep* st;
  switch (gMut) {
    case MUT_DROP_LAST: s->nsteps--; break;
    case MUT_WRONG_BLOCK:
      st = nthStep(s, COLL_STEP_SEND, 1);
      st->src.off = (st->src.off + st->src.count) % a->count;
      break;
    case MUT_WRITE_SEND: nthStep(s, COLL_STEP_RECV_REDUCE, 0)->dst.buf = COLL_BUF_SEND; break;
    case MUT_OUT_OF_BOUNDS: nthStep(s, COLL_STEP_SEND, 0)->src.off = a->count; break;
    case MUT_ONE_PHASE:
      for (int i = 0; i < s->nsteps; i++) s->steps[i].phase = 0;
      break;
    case MUT_SHORT_RECV:
      st = &s->steps[s->nsteps - 1];
      st->dst.count--;
      if (st->kind == COLL_STEP_RECV_REDUCE) st->src.count--;
      break;
    case MUT_DOUBLE_COUNT: {
      collStep x = {COLL_STEP_REDUCE, (uint16_t)s->nphases, -1,
                    collRegionMake(COLL_BUF_SEND, 0, 0, 1),
                    collRegionMake(COLL_BUF_RECV, 0, 0, 1)};
      assert_int_equal(collSchedAdd(s, x), 0);
      break;
    }
    case MUT_EXTRA_SEND: {
      collStep x = {COLL_STEP_SEND, (uint16_t)s->nphases,
                    (a->rank + 1) % a->nranks,
                    collRegionMake(COLL_BUF_RECV, 0, 0, 1), collRegionNone()};
      assert_int_equal(collSchedAdd(s, x), 0);
      break;
    }
    case MUT_NONROOT_RECV:
      nthStep(s, COLL_STEP_RECV_REDUCE, 0)->dst =
          collRegionMake(COLL_BUF_RECV, 0, 0, a->count);
      break;
    case MUT_NONROOT_SEND: nthStep(s, COLL_STEP_SEND, 0)->src.buf = COLL_BUF_SEND; break;
    case MUT_WRONG_SCRATCH: nthStep(s, COLL_STEP_SEND, 1)->src.blk = 1; break;
    case MUT_UNWRITTEN:
      nthStep(s, COLL_STEP_SEND, 1)->src.blk = (uint32_t)((a->rank + 1) % a->nranks);
      break;
    case MUT_NO_COPY:
      st = nthStep(s, COLL_STEP_COPY, 0);
      memmove(st, st + 1, (size_t)(s->nsteps - 1 - (st - s->steps)) * sizeof(*st));
      s->nsteps--;
      break;
    case MUT_PHASE_ORDER: {
      collStep t = s->steps[0];
      s->steps[0] = s->steps[2];
      s->steps[2] = t;
      break;
    }
    case MUT_SELF_PEER: nthStep(s, COLL_STEP_SEND, 0)->peer = a->rank; break;
    case MUT_BUILD_ERROR: return collInternalError;
    default: break;
  }
  return rc;
}

static void bad(int mut, int rank, collFunc fn, int n, int root, size_t count,
                collSimPlace place, int eager, const char* expect) {
  gMut = mut;
  gMutRank = rank;
  runBad(fn, n, root, count, place, eager, mutBuild, expect);
}

static void test_checker_rejects(void** state) {
  (void)state;
  const collFunc AR = COLL_FN_ALLREDUCE, AG = COLL_FN_ALLGATHER,
                 RS = COLL_FN_REDUCESCATTER, BC = COLL_FN_BROADCAST,
                 RD = COLL_FN_REDUCE;
  const collSimPlace OOP = COLL_SIM_OUT_OF_PLACE, IP = COLL_SIM_IN_PLACE;
  bad(MUT_DROP_LAST, 0, AR, 4, 0, 10, OOP, 0, "deadlock");
  bad(MUT_DROP_LAST, 0, AR, 4, 0, 10, OOP, 1, NULL);
  bad(MUT_DROP_LAST, 2, AG, 5, 0, 7, IP, 1, NULL);
  bad(MUT_WRONG_BLOCK, 1, AR, 4, 0, 16, OOP, 0, "never written");
  bad(MUT_WRONG_BLOCK, 1, AR, 4, 0, 16, IP, 0, "reduces tag");
  bad(MUT_WRONG_BLOCK, 3, AR, 4, 0, 17, OOP, 0, NULL); /* unequal blocks */
  bad(MUT_WRITE_SEND, 0, AR, 3, 0, 9, OOP, 0, "writes COLL_BUF_SEND");
  bad(MUT_WRITE_SEND, 2, RD, 4, 0, 9, OOP, 0, "writes COLL_BUF_SEND");
  bad(MUT_OUT_OF_BOUNDS, 2, AG, 3, 0, 5, OOP, 0, "out of bounds");
  bad(MUT_OUT_OF_BOUNDS, 0, RS, 3, 0, 5, IP, 0, "out of bounds");
  bad(MUT_ONE_PHASE, 0, AR, 3, 0, 9, OOP, 0, "race");
  bad(MUT_ONE_PHASE, 1, RS, 4, 0, 9, OOP, 0, "race");
  bad(MUT_SHORT_RECV, 1, AG, 4, 0, 6, OOP, 0, "size mismatch");
  bad(MUT_SHORT_RECV, 2, AR, 4, 0, 12, OOP, 0, "size mismatch");
  bad(MUT_DOUBLE_COUNT, 1, AR, 3, 0, 6, OOP, 0, "contributions per rank [121]");
  bad(MUT_EXTRA_SEND, 0, AR, 3, 0, 6, OOP, 1, "unmatched message");
  bad(MUT_EXTRA_SEND, 0, AR, 3, 0, 6, OOP, 0, "deadlock");
  bad(MUT_NONROOT_RECV, 3, RD, 5, 1, 8, OOP, 0, "absent");
  bad(MUT_NONROOT_SEND, 2, BC, 5, 1, 8, OOP, 0, "absent");
  bad(MUT_WRONG_SCRATCH, 0, RS, 5, 0, 4, OOP, 0, "race");
  bad(MUT_UNWRITTEN, 0, AG, 5, 0, 4, IP, 0, "never written");
  bad(MUT_NO_COPY, 1, AG, 3, 0, 4, OOP, 0, "expected tag");
  bad(MUT_PHASE_ORDER, 0, AR, 3, 0, 9, OOP, 0, "phase order");
  bad(MUT_SELF_PEER, 0, BC, 3, 0, 9, OOP, 0, "bad peer");
  bad(MUT_BUILD_ERROR, 1, RD, 3, 0, 9, OOP, 0, "builder failed");
  /* Partial sums in RECV are fine out of place but clobber the input block
   * that RECV aliases in place: aliasing in the simulator is real. */
  collSimResult res;
  gMut = MUT_SCRATCH_TO_RECV;
  runOk(RS, 4, 0, 5, OOP, 0, mutBuild, &res);
  bad(MUT_SCRATCH_TO_RECV, 0, RS, 4, 0, 5, IP, 0, "reduces tag");
}

/* All-gather that sends in phase 2k and receives in phase 2k+1: fine with
 * eager sends, deadlocks when a send needs its receiver (rendezvous). */
static collResult_t sendThenRecvAllGather(const collSchedArgs* a, collSched* s) {
  const int n = a->nranks, r = a->rank;
  const size_t c = a->count;
  if (!a->inPlace) {
    collStep cp = {COLL_STEP_COPY, 0, -1, collRegionMake(COLL_BUF_SEND, 0, 0, c),
                   collRegionMake(COLL_BUF_RECV, (uint32_t)r, 0, c)};
    if (collSchedAdd(s, cp)) return collInternalError;
  }
  for (int k = 0; k < n - 1; k++) {
    collStep snd = {COLL_STEP_SEND, (uint16_t)(2 * k + 1), (r + 1) % n,
                    collRegionMake(COLL_BUF_RECV, (uint32_t)((r - k + n) % n), 0, c),
                    collRegionNone()};
    collStep rcv = {COLL_STEP_RECV, (uint16_t)(2 * k + 2), (r + n - 1) % n,
                    collRegionNone(),
                    collRegionMake(COLL_BUF_RECV, (uint32_t)((r - k - 1 + n) % n), 0, c)};
    if (collSchedAdd(s, snd) || collSchedAdd(s, rcv)) return collInternalError;
  }
  return collSuccess;
}

static void test_checker_rendezvous(void** state) {
  (void)state;
  collSimResult res;
  for (int n = 2; n <= 6; n++) {
    runOk(COLL_FN_ALLGATHER, n, 0, 5, COLL_SIM_IN_PLACE_ODD, 1,
          sendThenRecvAllGather, &res);
    runBad(COLL_FN_ALLGATHER, n, 0, 5, COLL_SIM_IN_PLACE_ODD, 0,
           sendThenRecvAllGather, "deadlock");
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_registry),
      cmocka_unit_test(test_builder_args),
      cmocka_unit_test(test_checker_rejects),
      cmocka_unit_test(test_checker_rendezvous),
      cmocka_unit_test(test_eager),
      cmocka_unit_test(test_allreduce),
      cmocka_unit_test(test_allgather),
      cmocka_unit_test(test_reducescatter),
      cmocka_unit_test(test_broadcast),
      cmocka_unit_test(test_reduce),
  };
  return cmocka_run_group_tests_name("sched", tests, NULL, NULL);
}
