/*
 * br44_recover_after_abort - BR-44 (pytorch/pytorch#151159): after a rank
 * died, the survivors abort (or destroy) the world and a split of it, then
 * build a fresh communicator among themselves and go on in-process.
 *
 * Recipe: 4 ranks started as torchrun starts them, timeout 10 s. A = world,
 * B = collCommSplit(A, color 0); five all-reduces on each. Rank 2 then
 * exits (variant: is stopped). Ranks 0, 1, 3: an all-reduce on A fails;
 * then collCommAbort(B) and collCommAbort(A) (variant: collCommDestroy).
 * Rank 0 makes a fresh unique id and hands it out through shared memory;
 * the survivors create C with ranks 0, 1, 2 (old 0, 1, 3) and run 100
 * all-reduces of 1,048,576 floats of value old rank + 1; then destroy C.
 * Variant: a replacement process for old rank 2 joins and all four form C.
 * Expected: each abort (destroy) returns within 5 s; C's init succeeds within
 * 10 s; every element of every all-reduce on C is 7.0 (replacement: 10.0);
 * after C is destroyed, fd and thread counts are back within 8 of those
 * before A was created. COLL_CASE_QUICK=1 (the sanitizer build) skips the
 * destroy and stop variants.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helper_fail.h"

#define COUNT (1 << 20)

typedef struct {
  int stop, destroy, replace;
  int idReady;
  collUniqueId id;
} shared;

/* Forms C as rank `crank` of `cn` and checks 100 all-reduces of `value`. */
static int runC(shared* sh, int crank, int cn, float value, float want, int oldRank) {
  while (!__atomic_load_n(&sh->idReady, __ATOMIC_ACQUIRE)) usleep(1000);
  collComm_t C;
  double t0 = failNow();
  collResult_t r = collCommInitRank(&C, cn, sh->id, crank);
  double initSec = failNow() - t0;
  if (r != collSuccess) {
    printf("  old rank %d: C's init failed after %.2f s: %s\n", oldRank, initSec, collGetLastError(NULL));
    return 1;
  }
  float* in = malloc(COUNT * sizeof(float));
  float* out = malloc(COUNT * sizeof(float));
  for (size_t i = 0; i < COUNT; i++) in[i] = value;
  long wrong = 0;
  int failedCalls = 0;
  for (int it = 0; it < 100; it++) {
    memset(out, 0, COUNT * sizeof(float));
    if (collAllReduce(in, out, COUNT, collFloat, collSum, C, NULL) != collSuccess) {
      failedCalls++;
      break;
    }
    for (size_t i = 0; i < COUNT; i++) wrong += out[i] != want;
  }
  free(in);
  free(out);
  int d = collCommDestroy(C) != collSuccess;
  printf("  old rank %d: C init %.2f s, 100 all-reduces: %d failed, %ld wrong elements (want %g)\n", oldRank,
         initSec, failedCalls, wrong, (double)want);
  return (initSec > 10) + failedCalls + (wrong != 0) + d;
}

static int body(int rank, int nranks, void* arg) {
  (void)nranks;
  shared* sh = arg;
  int fds0 = failCountFds(), thr0 = failCountThreads();
  collComm_t A, B;
  if (collCommInitFromEnv(&A, NULL) != collSuccess || collCommSplit(A, 0, rank, &B, NULL) != collSuccess) return 2;
  float x = 1, y;
  for (int i = 0; i < 5; i++)
    if (collAllReduce(&x, &y, 1, collFloat, collSum, A, NULL) != collSuccess ||
        collAllReduce(&x, &y, 1, collFloat, collSum, B, NULL) != collSuccess)
      return 2;
  if (rank == 2) {
    if (sh->stop) raise(SIGSTOP);
    _exit(0);
  }
  int fails = 0;
  double t0 = failNow();
  collResult_t r = collAllReduce(&x, &y, 1, collFloat, collSum, A, NULL);
  printf("  rank %d: all-reduce on A: %s after %.2f s\n", rank, collGetErrorString(r), failNow() - t0);
  fails += r == collSuccess;
  for (int k = 0; k < 2; k++) {
    collComm_t c = k == 0 ? B : A;
    t0 = failNow();
    r = sh->destroy ? collCommDestroy(c) : collCommAbort(c);
    double took = failNow() - t0;
    printf("  rank %d: %s(%c) took %.3f s\n", rank, sh->destroy ? "collCommDestroy" : "collCommAbort", k ? 'A' : 'B',
           took);
    fails += took > 5 || (!sh->destroy && r != collSuccess);
  }
  if (rank == 0) {
    if (collGetUniqueId(&sh->id) != collSuccess) return 2;
    __atomic_store_n(&sh->idReady, 1, __ATOMIC_RELEASE);
  }
  int crank = sh->replace ? rank : (rank == 3 ? 2 : rank);
  fails += runC(sh, crank, sh->replace ? 4 : 3, (float)(rank + 1), sh->replace ? 10.0f : 7.0f, rank);
  usleep(100 * 1000); /* the root thread of C's id ends after answering */
  int fds1 = failCountFds(), thr1 = failCountThreads();
  printf("  rank %d: fds %d -> %d, threads %d -> %d\n", rank, fds0, fds1, thr0, thr1);
  fails += fds1 > fds0 + 8 || thr1 > thr0 + 8;
  return fails ? 1 : 0;
}

static int replacement(int rank, int nranks, void* arg) {
  (void)rank, (void)nranks;
  return runC(arg, 2, 4, 3.0f, 10.0f, 2) ? 1 : 0;
}

static void setup(int rank, int nranks, void* arg) {
  (void)rank, (void)nranks, (void)arg;
  setenv("COLL_TIMEOUT", "10", 1);
}

int main(void) {
  static const int variants[][3] = {{0, 0, 0}, {0, 1, 0}, {1, 0, 0}, {0, 0, 1}}; /* stop, destroy, replace */
  shared* sh = failShared(sizeof *sh);
  int fails = 0;
  int quick = getenv("COLL_CASE_QUICK") != NULL;
  for (int v = 0; v < 4; v++) {
    if (quick && (v == 1 || v == 2)) continue;
    memset(sh, 0, sizeof *sh);
    sh->stop = variants[v][0];
    sh->destroy = variants[v][1];
    sh->replace = variants[v][2];
    printf("rank 2 %s; %s; %s\n", sh->stop ? "stopped" : "exits", sh->destroy ? "destroy" : "abort",
           sh->replace ? "a replacement joins C" : "C of the survivors");
    fflush(stdout);
    collLaunchSpec spec = {.nranks = 4, .timeoutSec = 90, .body = body, .setup = setup, .arg = sh};
    collLaunch* L = collLaunchStart(&spec);
    collLaunch* R = NULL;
    if (!L) return 1;
    if (sh->replace) {
      while (!__atomic_load_n(&sh->idReady, __ATOMIC_ACQUIRE) && collLaunchPoll(L) > 0) usleep(1000);
      collLaunchSpec rs = {.nranks = 1, .timeoutSec = 60, .body = replacement, .setup = setup, .arg = sh};
      R = collLaunchStart(&rs);
    }
    double t0 = failNow();
    int bad = 0;
    for (int k = 0; k < 4; k++) {
      if (k == 2) continue;
      while (collLaunchStatus(L, k) < 0 && failNow() - t0 < 80) {
        usleep(5000);
        collLaunchPoll(L);
      }
    }
    collLaunchKill(L, 2, SIGKILL);
    collLaunchWait(L, 5);
    for (int k = 0; k < 4; k++) bad += k != 2 && collLaunchExitCode(L, k) != 0;
    if (R) bad += collLaunchWait(R, 30);
    if (bad) {
      collLaunchReport(L);
      if (R) collLaunchReport(R);
    }
    printf("  %s\n", bad ? "FAILED" : "ok");
    collLaunchFree(L);
    collLaunchFree(R);
    fails += bad;
  }
  printf("%s\n", fails ? "FAILED" : "PASSED");
  return fails ? 1 : 0;
}
