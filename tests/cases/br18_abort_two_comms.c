/*
 * br18_abort_two_comms - BR-18 (NVIDIA/nccl#1013): with two communicators
 * per process, after one rank left, aborting both on the survivors must
 * cancel the stuck operations instead of hanging.
 *
 * Recipe: 4 ranks started as torchrun starts them (COLL_TIMEOUT 60 s). A =
 * world, B = collCommSplit(A, color 0). A 1-element all-reduce on each.
 * Rank 2 then leaves without destroying anything: it _exit()s, or (second
 * set) stays alive without ever calling again, so that nothing but the abort
 * can end the calls. Ranks 0, 1, 3 issue an all-reduce on B (float32, count
 * 6) and a broadcast on A (count 1, root 3), each on its own stream, and wait
 * in collStreamSynchronize; after 3 s (the recipe's 5 s, shortened for CI) a
 * watchdog thread calls
 * collCommAbort(B) then collCommAbort(A); then the opposite order; then
 * collCommDestroy(B), collCommDestroy(A).
 * Expected: each abort/destroy returns within 10 s; each operation still
 * running at the abort returns an error (not success) within 10 s of it (a
 * broadcast can finish without rank 2 when the chain reaches rank 2 last:
 * it then succeeds before the abort); the orphaned streams are
 * destroyed with collSuccess; the survivors exit 0; each run under 30 s.
 * COLL_CASE_QUICK=1 (the sanitizer build) runs the second set only.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helper_fail.h"

typedef struct {
  int order;    /* 0: abort B, A; 1: abort A, B; 2: destroy B, A */
  int idle;     /* rank 2 stays alive instead of exiting */
  int release;  /* rank 2 may go */
} shared;

typedef struct {
  collComm_t first, second;
  int destroy;
  double at[2], took[2];
  collResult_t r[2];
} watchdog;

static void* watch(void* p) {
  watchdog* w = p;
  usleep(3 * 1000 * 1000);
  collComm_t c[2] = {w->first, w->second};
  for (int i = 0; i < 2; i++) {
    w->at[i] = failNow();
    w->r[i] = w->destroy ? collCommDestroy(c[i]) : collCommAbort(c[i]);
    w->took[i] = failNow() - w->at[i];
  }
  return NULL;
}

static int body(int rank, int nranks, void* arg) {
  (void)nranks;
  shared* sh = arg;
  collComm_t A, B;
  if (collCommInitFromEnv(&A, NULL) != collSuccess || collCommSplit(A, 0, rank, &B, NULL) != collSuccess) {
    fprintf(stderr, "rank %d: init: %s\n", rank, collGetLastError(NULL));
    return 1;
  }
  float x = 1, y = 0, v[6] = {1, 2, 3, 4, 5, 6}, w6[6];
  if (collAllReduce(&x, &y, 1, collFloat, collSum, A, NULL) != collSuccess || y != 4 ||
      collAllReduce(&x, &y, 1, collFloat, collSum, B, NULL) != collSuccess || y != 4) {
    fprintf(stderr, "rank %d: warm-up failed: %s\n", rank, collGetLastError(NULL));
    return 1;
  }
  if (rank == 2) {
    while (sh->idle && !__atomic_load_n(&sh->release, __ATOMIC_ACQUIRE)) usleep(1000);
    _exit(0); /* nothing destroyed */
  }
  collStream_t sA, sB;
  int fails = 0;
  if (collStreamCreate(A, &sA) != collSuccess || collStreamCreate(B, &sB) != collSuccess ||
      collAllReduce(v, w6, 6, collFloat, collSum, B, sB) != collSuccess ||
      collBroadcast(&x, &y, 1, collFloat, 3, A, sA) != collSuccess) {
    fprintf(stderr, "rank %d: issuing failed: %s\n", rank, collGetLastError(NULL));
    return 1;
  }
  watchdog wd = {sh->order == 1 ? A : B, sh->order == 1 ? B : A, sh->order == 2, {0, 0}, {0, 0}, {0, 0}};
  pthread_t th;
  pthread_create(&th, NULL, watch, &wd);
  double t0 = failNow();
  /* an operation can finish without rank 2 (a broadcast whose chain reaches
   * rank 2 last only sends to it): that one is not stuck and may succeed */
  collResult_t qA = collInProgress, qB = collInProgress;
  while (failNow() - t0 < 2.5 && (qA == collInProgress || qB == collInProgress)) {
    usleep(10000);
    if (qA == collInProgress) qA = collStreamQuery(sA);
    if (qB == collInProgress) qB = collStreamQuery(sB);
  }
  collResult_t rB = collStreamSynchronize(sB);
  double endB = failNow();
  collResult_t rA = collStreamSynchronize(sA);
  double endA = failNow();
  pthread_join(th, NULL);
  int iB = sh->order == 1 ? 1 : 0, iA = 1 - iB;
  double lateB = endB - wd.at[iB], lateA = endA - wd.at[iA];
  const char* doneB = qB == collSuccess ? " (done before)" : "";
  const char* doneA = qA == collSuccess ? " (done before)" : "";
  printf("rank %d: B's all-reduce: %s%s after %.2f s (%+.2f s from its %s), A's broadcast: %s%s after %.2f s "
         "(%+.2f s); %s took %.3f s and %.3f s\n", rank, collGetErrorString(rB), doneB, endB - t0, lateB,
         sh->order == 2 ? "destroy" : "abort", collGetErrorString(rA), doneA, endA - t0, lateA,
         sh->order == 2 ? "destroys" : "aborts", wd.took[0], wd.took[1]);
  int stuckB = qB != collSuccess, stuckA = qA != collSuccess;
  if ((stuckB && (rB == collSuccess || lateB > 10)) || (stuckA && (rA == collSuccess || lateA > 10))) fails++;
  /* an operation that failed before the abort reports that error (or, once freed, "destroyed") */
  if (qB != collInProgress && qB != collSuccess && rB != collInvalidUsage && rB != qB) fails++;
  for (int i = 0; i < 2; i++)
    if (wd.r[i] != collSuccess || wd.took[i] > 10) fails++;
  if (collStreamDestroy(sA) != collSuccess || collStreamDestroy(sB) != collSuccess) fails++;
  if (rank == 0) __atomic_store_n(&sh->release, 1, __ATOMIC_RELEASE);
  if (fails) printf("rank %d: FAILED\n", rank);
  return fails ? 1 : 0;
}

static void setup(int rank, int nranks, void* arg) {
  (void)rank, (void)nranks, (void)arg;
  setenv("COLL_TIMEOUT", "60", 1);
}

int main(void) {
  static const char* orders[] = {"abort B then A", "abort A then B", "destroy B then A"};
  shared* sh = failShared(sizeof *sh);
  int fails = 0;
  for (int idle = getenv("COLL_CASE_QUICK") ? 1 : 0; idle < 2; idle++)
    for (int order = 0; order < 3; order++) {
      memset(sh, 0, sizeof *sh);
      sh->order = order;
      sh->idle = idle;
      printf("rank 2 %s; %s\n", idle ? "stays alive, never calls" : "exits", orders[order]);
      fflush(stdout);
      double t0 = failNow();
      collLaunchSpec spec = {.nranks = 4, .timeoutSec = 30, .body = body, .setup = setup, .arg = sh};
      int bad = collLaunchRun(&spec);
      printf("  %s in %.1f s\n", bad ? "FAILED" : "ok", failNow() - t0);
      fails += bad;
    }
  printf("%s\n", fails ? "FAILED" : "PASSED");
  return fails ? 1 : 0;
}
