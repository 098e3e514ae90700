/*
 * test_tuner.c - the cost model (exact times for hand-computable schedules),
 * the per-call choice (identical on every rank, latency-bound sizes avoid the
 * ring on 8 ranks, COLL_ALGO-style forcing), and tuner plugins (the example
 * plugin in plugins/tuner_example.c overrides the choice; a broken plugin
 * path fails init).
 */
#include <dlfcn.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "coll.h"
#include "tuner/cost.h"
#include "tuner/tuner.h"

static collTuneModel unitModel(void) {
  collTuneModel m;
  memset(&m, 0, sizeof m);
  for (int p = 0; p < COLL_PATH_COUNT; p++) {
    m.latUs[p] = 1.0;
    m.bwGBs[p] = 1.0; /* 1000 bytes per us */
  }
  m.reduceGBs = m.copyGBs = 1e9; /* negligible */
  m.cpuShare = 1.0;
  return m;
}

/* Ring all-reduce, 4 ranks on 4 nodes, 4000 floats per slice: 2(n-1) = 6
 * phases, each one 4000-byte transfer each way over full-duplex links:
 * 1 us + 4 us = 5 us -> 30 us. On one node (shm) the rank's CPU copies both
 * the 4000 bytes it sends and those it receives: 8 us a phase -> 48 us. */
static void test_cost_ring_exact(void** state) {
  (void)state;
  collTuneModel m = unitModel();
  int nodes[4] = {0, 1, 2, 3};
  collTuneLayout l = {4, nodes, 4, 1, 1};
  collSliceCost c = collCostSlice(&m, &l, collAlgoFind(COLL_FN_ALLREDUCE, "ring")->build, COLL_FN_ALLREDUCE, 4000, 4);
  assert_true(c.ok);
  assert_true(fabs(c.makespanUs - 30.0) < 1e-3);
  assert_true(fabs(c.bwUs - 24.0) < 1e-3);  /* 6 x 4 us */
  assert_true(fabs(c.latUs - 6.0) < 1e-3);  /* 6 x 1 us */
  /* a call of 10 slices on 2 channels: period max(24, 30 / 2) = 24 */
  assert_true(fabs(collCostCall(&c, 10, 2) - (30.0 + 9 * 24.0)) < 1e-3);
  collTuneLayout one = {4, NULL, 1, 1, 1};
  collSliceCost shm = collCostSlice(&m, &one, collAlgoFind(COLL_FN_ALLREDUCE, "ring")->build, COLL_FN_ALLREDUCE, 4000, 4);
  assert_true(shm.ok);
  assert_true(fabs(shm.makespanUs - 48.0) < 1e-3);
  assert_true(fabs(shm.bwUs - 48.0) < 1e-3);
  /* latency-bound slices overlap over channels: W = 0 -> period L / channels */
  collSliceCost lat = {10.0, 0.0, 8.0, 1};
  assert_true(fabs(collCostCall(&lat, 5, 4) - (10.0 + 4 * 2.0)) < 1e-9);
}

/* Chain broadcast over 5 ranks, one slice: 4 hops in sequence. The step
 * overhead adds to every transfer; the other node's path is priced apart. */
static void test_cost_chain_paths(void** state) {
  (void)state;
  collTuneModel m = unitModel();
  m.stepUs = 0.5;
  collTuneLayout l = {5, NULL, 1, 1, 1};
  collSchedBuildFn chain = collAlgoFind(COLL_FN_BROADCAST, "chain")->build;
  collSliceCost c = collCostSlice(&m, &l, chain, COLL_FN_BROADCAST, 1000, 1);
  assert_true(c.ok);
  assert_true(fabs(c.makespanUs - 4 * (1.0 + 0.5 + 1.0)) < 1e-3);
  /* ranks 0,1 | 2,3,4 on two nodes: the 1->2 hop crosses the network */
  int nodes[5] = {0, 0, 1, 1, 1};
  collTuneLayout two = {5, nodes, 2, 1, 1};
  m.latUs[COLL_PATH_NET] = 20.0;
  c = collCostSlice(&m, &two, chain, COLL_FN_BROADCAST, 1000, 1);
  assert_true(fabs(c.makespanUs - (3 * 2.5 + 21.5)) < 1e-3);
  assert_int_equal(collCostPath(&two, 1, 2), COLL_PATH_NET);
  assert_int_equal(collCostPath(&two, 2, 4), COLL_PATH_SHM);
  assert_int_equal(collCostPath(&two, 3, 3), COLL_PATH_SELF);
}

/* Steps that move no data are no-ops in the engine: free in the model. On 8
 * ranks over 2 cores (cpuShare 4) the cores must run every transfer end:
 * a one-shot all-reduce of 2 floats has 14 ends per rank, so it takes
 * C = 14 x 4 x (wake / 2 + stepUs) = 14 x 4 x 11 = 616 us (wake = 20 us), although its
 * critical path M is one message: max(M, C) + min(M, C) / 2. */
static void test_cost_zero_and_oversubscribed(void** state) {
  (void)state;
  collTuneModel m = unitModel();
  collTuneLayout l = {8, NULL, 1, 1, 1};
  collSliceCost c = collCostSlice(&m, &l, collAlgoFind(COLL_FN_ALLREDUCE, "ring")->build, COLL_FN_ALLREDUCE, 0, 4);
  assert_true(c.ok);
  assert_true(fabs(c.makespanUs) < 1e-9);
  m.cpuShare = 4.0;
  m.wakeUs = 20.0 / 3.0; /* x (cpuShare - 1) = 20 us per message */
  m.stepUs = 1.0;
  c = collCostSlice(&m, &l, collAlgoFind(COLL_FN_ALLREDUCE, "direct")->build, COLL_FN_ALLREDUCE, 2, 4);
  assert_true(c.ok);
  /* plus half the critical path: one message, 1 + 4 x 1 + 20 = 25 us, and 8 bytes */
  assert_true(c.makespanUs > 616.0 + 12.5 - 1e-6 && c.makespanUs < 616.0 + 12.5 + 0.1);
  m.cpuShare = 1.0; /* not oversubscribed: one message (lat 1 + step 1) plus 8 bytes */
  c = collCostSlice(&m, &l, collAlgoFind(COLL_FN_ALLREDUCE, "direct")->build, COLL_FN_ALLREDUCE, 2, 4);
  assert_true(c.makespanUs < 10.0);
}

/* Broadcast of 4000 bytes on 8 ranks of one node. Alone on its core, the
 * binomial root's 3 sends (12 us) set its pace against 8 us (receive and
 * forward) for a chain rank. With 2 ranks per core (cpuShare 2) both move
 * 7 transfers x 2 ends x 4 us = 56 us of copies over 8 ranks: W = the mean
 * (7 us) x 2 = 14 us for both, above 12 (resp. 8) us x 2 / 2. */
static void test_cost_shared_cores_balance(void** state) {
  (void)state;
  collTuneModel m = unitModel();
  collTuneLayout l = {8, NULL, 1, 1, 1};
  collSchedBuildFn chain = collAlgoFind(COLL_FN_BROADCAST, "chain")->build;
  collSchedBuildFn binomial = collAlgoFind(COLL_FN_BROADCAST, "binomial")->build;
  collSliceCost c = collCostSlice(&m, &l, chain, COLL_FN_BROADCAST, 4000, 1);
  collSliceCost b = collCostSlice(&m, &l, binomial, COLL_FN_BROADCAST, 4000, 1);
  assert_true(c.ok && b.ok);
  assert_true(fabs(c.bwUs - 8.0) < 1e-3 && fabs(b.bwUs - 12.0) < 1e-3);
  m.cpuShare = 2.0;
  c = collCostSlice(&m, &l, chain, COLL_FN_BROADCAST, 4000, 1);
  b = collCostSlice(&m, &l, binomial, COLL_FN_BROADCAST, 4000, 1);
  assert_true(fabs(c.bwUs - 14.0) < 1e-3 && fabs(b.bwUs - 14.0) < 1e-3);
}

/* The tuner prices every registry row of a collective: none falls past its
 * candidate table. */
static void test_candidates_fit(void** state) {
  (void)state;
  for (int fn = 0; fn < COLL_FN_COUNT; fn++) {
    int rows = 0;
    for (const collAlgo* a = collAlgoTable; a->name; a++) rows += (a->funcMask >> fn) & 1u;
    assert_true(rows <= COLL_TUNER_MAX_CANDIDATES);
  }
}

/* A builder that fails is priced as infeasible, never chosen. */
static collResult_t failingBuild(const collSchedArgs* a, collSched* s) {
  (void)a;
  (void)s;
  return collInternalError;
}
static void test_cost_failing_builder(void** state) {
  (void)state;
  collTuneModel m = unitModel();
  collTuneLayout l = {3, NULL, 1, 1, 1};
  collSliceCost c = collCostSlice(&m, &l, failingBuild, COLL_FN_ALLREDUCE, 10, 4);
  assert_false(c.ok);
  assert_true(collCostCall(&c, 1, 1) > 1e20);
}

typedef struct {
  collComm_t comms[8];
  int n;
} commSet;

static void initComms(commSet* cs, int n) {
  cs->n = n;
  assert_int_equal(collCommInitAll(cs->comms, n, NULL), collSuccess);
}
static void freeComms(commSet* cs) {
  for (int i = 0; i < cs->n; i++) assert_int_equal(collCommDestroy(cs->comms[i]), collSuccess);
}

/* Every rank makes the same choice for every collective and size; on 8
 * ranks an 8-byte all-reduce is not run as a ring (2(n-1) latency steps). */
static void test_choice_identical_and_small(void** state) {
  (void)state;
  commSet cs;
  initComms(&cs, 8);
  for (int fn = COLL_FN_ALLREDUCE; fn <= COLL_FN_REDUCE; fn++)
    for (size_t count = 1; count <= ((size_t)64 << 20); count *= 16) {
      collTuneChoice c0;
      assert_int_equal(collTunerChoose(cs.comms[0], (collFunc)fn, count, collFloat, NULL, 0, &c0), collSuccess);
      assert_non_null(c0.algo);
      assert_true(c0.nchannels >= 1 && c0.chunkBytes >= 1024);
      for (int r = 1; r < cs.n; r++) {
        collTuneChoice c;
        assert_int_equal(collTunerChoose(cs.comms[r], (collFunc)fn, count, collFloat, NULL, 0, &c), collSuccess);
        assert_ptr_equal(c.algo, c0.algo);
        assert_true(c.chunkBytes == c0.chunkBytes && c.nchannels == c0.nchannels);
      }
    }
  collTuneChoice small;
  assert_int_equal(collTunerChoose(cs.comms[3], COLL_FN_ALLREDUCE, 2, collFloat, NULL, 0, &small), collSuccess);
  assert_string_not_equal(small.algo->name, "ring");
  /* forcing by name (what COLL_ALGO does), and an unknown name */
  assert_int_equal(collTunerChoose(cs.comms[0], COLL_FN_ALLREDUCE, 2, collFloat, "ring", 0, &small), collSuccess);
  assert_string_equal(small.algo->name, "ring");
  assert_int_equal(collTunerChoose(cs.comms[0], COLL_FN_ALLREDUCE, 2, collFloat, "nosuch", 0, &small),
                   collInvalidArgument);
  assert_int_equal(collTunerChoose(cs.comms[0], COLL_FN_BROADCAST, 2, collFloat, "ring", 0, &small),
                   collInvalidArgument);
  freeComms(&cs);
}

/* Same-node pairs without shm take the model of the transport that serves
 * them: loopback's own figures (1 us, 100 Gbit/s = 12.5 GB/s; it replaces
 * shm), where the old code kept tcp's 15 us and 1.5 GB/s for any transport.
 * (tcp's own case needs COLL_SHM_DISABLE=1, which a process reads once.) */
static void test_local_path_model(void** state) {
  (void)state;
  setenv("COLL_NET", "loopback", 1);
  commSet cs;
  initComms(&cs, 2);
  for (int r = 0; r < 2; r++) {
    double lat = -1.0;
    int calibrated = -1;
    double bw = collTunerPeerGBps(cs.comms[r], 1 - r, &lat, &calibrated);
    if (lat != 1.0 || bw != 12.5 || calibrated != 0)
      fail_msg("rank %d: %g us %g GB/s (calibrated %d), want 1 us 12.5 GB/s", r, lat, bw, calibrated);
  }
  freeComms(&cs);
  unsetenv("COLL_NET");
}

typedef struct {
  collComm_t comm;
  float* buf;
  size_t count;
  collResult_t r;
} arArg;
#include <pthread.h>
static void* arThread(void* p) {
  arArg* a = p;
  a->r = collAllReduce(a->buf, a->buf, a->count, collFloat, collSum, a->comm, NULL);
  return NULL;
}

/* The example plugin picks the all-reduce algorithm, chunk and channels;
 * answers are cached per size bucket; results stay exact. */
static void test_plugin_overrides(void** state) {
  (void)state;
  setenv("COLL_TUNER_PLUGIN", COLL_TUNER_EXAMPLE, 1);
  setenv("COLL_EXAMPLE_TUNER_ALGO", "ring", 1);
  commSet cs;
  initComms(&cs, 3);
  void* dl = dlopen(COLL_TUNER_EXAMPLE, RTLD_NOW | RTLD_NOLOAD);
  assert_non_null(dl);
  int (*queries)(void) = (int (*)(void))dlsym(dl, "collExampleTunerQueries");
  assert_non_null(queries);
  int q0 = queries();
  collTuneChoice c;
  assert_int_equal(collTunerChoose(cs.comms[1], COLL_FN_ALLREDUCE, 3, collFloat, NULL, 0, &c), collSuccess);
  assert_string_equal(c.algo->name, "ring");
  assert_int_equal(c.chunkBytes, 65536);
  assert_int_equal(c.nchannels, 1);
  int q1 = queries();
  assert_int_equal(q1, q0 + 1);
  assert_int_equal(collTunerChoose(cs.comms[1], COLL_FN_ALLREDUCE, 3, collFloat, NULL, 0, &c), collSuccess);
  assert_int_equal(queries(), q1); /* cached */
  /* a real all-reduce of 100000 floats runs with the plugin's choice */
  enum { N = 100000 };
  arArg args[3];
  pthread_t th[3];
  for (int r = 0; r < 3; r++) {
    args[r].comm = cs.comms[r];
    args[r].count = N;
    args[r].buf = malloc(N * sizeof(float));
    assert_non_null(args[r].buf);
    for (size_t i = 0; i < N; i++) args[r].buf[i] = (float)(r + 1) + (float)(i % 7);
    pthread_create(&th[r], NULL, arThread, &args[r]);
  }
  for (int r = 0; r < 3; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < 3; r++) {
    assert_int_equal(args[r].r, collSuccess);
    for (size_t i = 0; i < N; i++)
      if (args[r].buf[i] != 6.0f + 3.0f * (float)(i % 7)) fail_msg("rank %d element %zu = %g", r, i, args[r].buf[i]);
    free(args[r].buf);
  }
  freeComms(&cs);
  dlclose(dl);
  /* a path that does not load fails init, naming the path and the knob */
  setenv("COLL_TUNER_PLUGIN", "/nonexistent/tuner.so", 1);
  collComm_t bad[2] = {NULL, NULL};
  assert_int_equal(collCommInitAll(bad, 2, NULL), collInvalidArgument);
  const char* msg = collGetLastError(NULL);
  if (!strstr(msg, "COLL_TUNER_PLUGIN=/nonexistent/tuner.so cannot be loaded"))
    fail_msg("unexpected message: %s", msg);
  assert_null(bad[0]);
  assert_null(bad[1]);
  unsetenv("COLL_TUNER_PLUGIN");
  unsetenv("COLL_EXAMPLE_TUNER_ALGO");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cost_ring_exact),
      cmocka_unit_test(test_cost_chain_paths),
      cmocka_unit_test(test_cost_failing_builder),
      cmocka_unit_test(test_cost_zero_and_oversubscribed),
      cmocka_unit_test(test_cost_shared_cores_balance),
      cmocka_unit_test(test_candidates_fit),
      cmocka_unit_test(test_choice_identical_and_small),
      cmocka_unit_test(test_local_path_model),
      cmocka_unit_test(test_plugin_overrides),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
