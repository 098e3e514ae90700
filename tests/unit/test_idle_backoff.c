/*
 * test_idle_backoff.c - when a long yield starts the busy backoff
 * (engine/progress.c). A yield that lasted over 200 us means the core was
 * held by someone. Only when the machine runs more tasks than this rank and
 * its runnable peers on this kernel (or the count is unknown) may that be
 * another task: then the next waits of the communicator sleep for 10 ms
 * without yielding. Otherwise it was one of our own ranks (a peer's copy,
 * reduction or page faults): this wait sleeps, the next one yields again.
 * Before, every long yield started the backoff, so 4 ranks on 2 cores ran
 * their small all-reduces through futex sleeps, 26 us instead of 2-3 us,
 * for 10 ms after a peer's buffer setup.
 *
 * The test supplies the kernel's runnable count and the peers' states
 * (collSysRunnable, collTaskRunnable: engine/runnable.c) and sched_yield
 * (long or instant), called by the library's progress.c linked statically
 * into this executable.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sched.h>
#include <string.h>
#include <time.h>

#include "core/comm.h"
#include "engine/progress.h"
#include "engine/runnable.h"

#define NR 4
static int fakeRunnable;     /* what collSysRunnable returns */
static int peerState[NR];    /* what collTaskRunnable returns for rank i's pid (100 + i) */
static int runnableAsked, peersAsked, yields;
static long yieldNs; /* how long a sched_yield lasts */

int collSysRunnable(void) {
  runnableAsked++;
  return fakeRunnable;
}

int collTaskRunnable(int pid) {
  peersAsked++;
  assert_true(pid > 100 && pid < 100 + NR); /* a peer, never this rank (0) */
  return peerState[pid - 100];
}

int sched_yield(void) {
  yields++;
  struct timespec ts = {0, yieldNs};
  if (yieldNs) nanosleep(&ts, NULL);
  return 0;
}

static struct collComm C;
static collPeerInfo peers[NR];

/* Rank 0 of 4 on this kernel, more than its cores: waits yield at once.
 * Peers 1-3 runnable (state[i] 1), not (0) or unknown (-1). */
static void setup(int runnable, int s1, int s2, int s3) {
  memset(&C, 0, sizeof C);
  memset(peers, 0, sizeof peers);
  for (int i = 0; i < NR; i++) {
    peers[i].pid = 100 + i;
    peers[i].kernelHash = 7;
  }
  C.peers = peers;
  C.nranks = NR;
  C.localRanks = C.kernelRanks = NR;
  C.yieldWait = 1;
  C.spinUs = 1000;
  fakeRunnable = runnable;
  peerState[1] = s1;
  peerState[2] = s2;
  peerState[3] = s3;
  runnableAsked = peersAsked = yields = 0;
}

/* One idle step of a new wait whose yields last yieldUs; returns its state. */
static collIdle idleStep(long yieldUs) {
  collIdle w;
  yieldNs = yieldUs * 1000;
  collIdleInit(&C, &w);
  assert_int_equal(collIdleStep(&C, &w, 0, "test", 1), collSuccess);
  return w;
}

/* The runnable tasks are this rank and its 3 runnable peers: the long
 * yield went to one of them. This wait sleeps; no backoff, the next wait
 * yields. */
static void test_long_yield_to_own_rank_no_backoff(void** st) {
  (void)st;
  setup(4, 1, 1, 1);
  collIdle w = idleStep(400);
  assert_int_equal(yields, 1);
  assert_int_equal(runnableAsked, 1);
  assert_int_equal(peersAsked, 3);
  assert_int_equal(w.sleeping, 1);
  assert_true(C.waitBusyBackoff == 0);
  assert_true(C.waitBusyUntil == 0);
  w = idleStep(0);
  assert_int_equal(yields, 2);
  assert_int_equal(w.yield, 1);
  assert_true(C.waitBusyUntil == 0);
}

/* Long yields right after one found only our own ranks read no /proc file
 * (two ranks on one core: every yield is long, six syscalls per wait
 * before); once that verdict is 10 ms old the next long yield asks again. */
static void test_own_verdict_kept_10ms(void** st) {
  (void)st;
  setup(4, 1, 1, 1);
  idleStep(400);
  assert_int_equal(runnableAsked, 1);
  assert_int_equal(peersAsked, 3);
  fakeRunnable = 5; /* would start a backoff if asked */
  collIdle w = idleStep(400);
  assert_int_equal(yields, 2);
  assert_int_equal(w.sleeping, 1);
  assert_int_equal(runnableAsked, 1);
  assert_int_equal(peersAsked, 3);
  assert_true(C.waitBusyUntil == 0);
  struct timespec ts = {0, 11 * 1000 * 1000};
  nanosleep(&ts, NULL);
  idleStep(400);
  assert_int_equal(runnableAsked, 2);
  assert_true(C.waitBusyBackoff == 10e-3);
}

/* One task more than our ranks: another task may hold the core, no peer's
 * state is read. 10 ms of backoff: the next wait sleeps without a yield. */
static void test_long_yield_with_foreign_task_backs_off(void** st) {
  (void)st;
  setup(5, 1, 1, 1);
  double t0 = collTimeNow();
  collIdle w = idleStep(400);
  assert_int_equal(yields, 1);
  assert_int_equal(runnableAsked, 1);
  assert_int_equal(peersAsked, 0);
  assert_int_equal(w.sleeping, 1);
  assert_true(C.waitBusyBackoff == 10e-3);
  assert_true(C.waitBusyUntil >= t0 + 10e-3 && C.waitBusyUntil <= collTimeNow() + 10e-3);
  w = idleStep(0);
  assert_int_equal(w.yield, 0);
  assert_int_equal(w.sleeping, 1);
}

/* 3 runnable: this rank and 2 runnable peers (the third sleeps): ours. */
static void test_long_yield_runnable_peers_count(void** st) {
  (void)st;
  setup(3, 1, 0, 1);
  idleStep(400);
  assert_int_equal(peersAsked, 3);
  assert_true(C.waitBusyBackoff == 0);
  assert_true(C.waitBusyUntil == 0);
}

/* 3 runnable but only 1 peer is (one sleeps, one unknown): a third task
 * is not ours (2 ranks and a CPU-bound process, one rank asleep). */
static void test_long_yield_sleeping_peers_foreign(void** st) {
  (void)st;
  setup(3, 0, 1, -1);
  idleStep(400);
  assert_int_equal(peersAsked, 3);
  assert_true(C.waitBusyBackoff == 10e-3);
}

/* A peer on another kernel (an emulated node elsewhere) is not ours even
 * when its pid here is runnable: not asked. */
static void test_peer_on_other_kernel_not_counted(void** st) {
  (void)st;
  setup(4, 1, 1, 1);
  peers[3].kernelHash = 8;
  C.kernelRanks = 3;
  idleStep(400);
  assert_int_equal(peersAsked, 0); /* 4 runnable > 3 ranks on this kernel */
  assert_true(C.waitBusyBackoff == 10e-3);
  setup(3, 1, 1, 1);
  peers[3].kernelHash = 8;
  C.kernelRanks = 3;
  idleStep(400);
  assert_int_equal(peersAsked, 2);
  assert_true(C.waitBusyBackoff == 0);
}

/* The count unknown (no /proc): backoff, as before. */
static void test_long_yield_unknown_count_backs_off(void** st) {
  (void)st;
  setup(-1, 1, 1, 1);
  idleStep(400);
  assert_int_equal(runnableAsked, 1);
  assert_int_equal(peersAsked, 0);
  assert_true(C.waitBusyBackoff == 10e-3);
}

/* A short yield asks nothing (no /proc read on the fast path). */
static void test_short_yield_asks_nothing(void** st) {
  (void)st;
  setup(5, 1, 1, 1);
  collIdle w = idleStep(0);
  assert_int_equal(yields, 1);
  assert_int_equal(w.yield, 1);
  if (!w.sleeping) { /* not preempted for 200 us between the clock reads */
    assert_int_equal(runnableAsked, 0);
    assert_int_equal(peersAsked, 0);
    assert_true(C.waitBusyBackoff == 0);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_long_yield_to_own_rank_no_backoff),
      cmocka_unit_test(test_long_yield_with_foreign_task_backs_off),
      cmocka_unit_test(test_own_verdict_kept_10ms),
      cmocka_unit_test(test_long_yield_runnable_peers_count),
      cmocka_unit_test(test_long_yield_sleeping_peers_foreign),
      cmocka_unit_test(test_peer_on_other_kernel_not_counted),
      cmocka_unit_test(test_long_yield_unknown_count_backs_off),
      cmocka_unit_test(test_short_yield_asks_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
