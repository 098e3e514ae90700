/*
 * i13_7_fork - issue 13 point 7: fork() after init.
 *
 * A communicator belongs to the process that created it. In a fork() child
 * every call on an inherited communicator is collInvalidUsage (naming
 * fork()) and touches nothing the parent uses; a child that never calls
 * coll (a DataLoader worker) is harmless.
 *
 * 2 ranks started as torchrun starts them. Rank 0, with its communicator
 * warmed up (shared-memory rings and mailbox in place):
 *  a) forks a worker that never touches coll and exits normally (exit(0))
 *     while both ranks run 50 all-reduces: every result is exact;
 *  b) forks a child that, while both parents run 50 all-reduces, calls
 *     collAllReduce, collBroadcast (stream NULL), collCommGetAsyncError,
 *     collStreamSynchronize on an inherited stream, collCommDestroy and
 *     collCommAbort on the inherited communicator: each returns
 *     collInvalidUsage within 1 s with a message naming fork(); the parents'
 *     results are exact. (Before: the child's all-reduce "succeeded" by
 *     taking the peer's next message.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helper_fail.h"

#define N 1024

static int run50(collComm_t comm, int rank, int round) {
  static float in[64 * N], out[64 * N];
  int bad = 0;
  for (int it = 0; it < 50; it++) {
    size_t n = it % 2 ? N : 64 * N; /* mailbox and ring */
    for (size_t i = 0; i < n; i++) in[i] = (float)((rank + 1) * (it + round + 1));
    collResult_t r = collAllReduce(in, out, n, collFloat, collSum, comm, NULL);
    float want = (float)(3 * (it + round + 1));
    if (r != collSuccess || out[0] != want || out[n - 1] != want) bad++;
  }
  return bad;
}

static int expectForkRefusal(collResult_t r, const char* what) {
  const char* msg = collGetLastError(NULL);
  int ok = r == collInvalidUsage && strstr(msg, "fork()");
  printf("  child %d: %s -> %s: %s\n", (int)getpid(), what, collGetErrorString(r), msg);
  return !ok;
}

/* The child of b): everything it tries on the inherited objects is refused. */
static int misusingChild(collComm_t comm, collStream_t s) {
  float x[N] = {0}, y[N];
  int bad = 0;
  double t0 = failNow();
  bad += expectForkRefusal(collAllReduce(x, y, N, collFloat, collSum, comm, NULL), "collAllReduce");
  bad += expectForkRefusal(collBroadcast(x, y, N, collFloat, 0, comm, NULL), "collBroadcast");
  collResult_t async = collSuccess;
  bad += expectForkRefusal(collCommGetAsyncError(comm, &async), "collCommGetAsyncError");
  bad += expectForkRefusal(collStreamSynchronize(s), "collStreamSynchronize");
  bad += expectForkRefusal(collCommDestroy(comm), "collCommDestroy");
  bad += expectForkRefusal(collCommAbort(comm), "collCommAbort");
  if (failNow() - t0 > 1.0) bad++;
  return bad;
}

static int body(int rank, int nranks, void* arg) {
  (void)nranks, (void)arg;
  collComm_t comm;
  if (collCommInitFromEnv(&comm, NULL) != collSuccess) {
    fprintf(stderr, "init: %s\n", collGetLastError(NULL));
    return 1;
  }
  collStream_t s;
  if (collStreamCreate(comm, &s) != collSuccess) return 1;
  int fails = run50(comm, rank, 0);
  for (int round = 1; round <= 2; round++) {
    pid_t child = 0;
    if (rank == 0) {
      fflush(stdout);
      child = fork();
      if (child == 0) {
        if (round == 1) {
          usleep(100 * 1000); /* a worker: does its own thing, never calls coll */
          exit(0);
        }
        int bad = misusingChild(comm, s);
        fflush(stdout);
        _exit(bad ? 1 : 0);
      }
    }
    int bad = run50(comm, rank, round * 100);
    printf("rank %d round %d: %d wrong or failed all-reduces while the child ran\n", rank, round, bad);
    fails += bad;
    if (rank == 0) {
      int st;
      waitpid(child, &st, 0);
      int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
      printf("rank 0 round %d: %s child %s\n", round, round == 1 ? "worker" : "misusing",
             ok ? "exited 0" : "FAILED");
      fails += !ok;
    }
  }
  fails += collStreamDestroy(s) != collSuccess;
  fails += collCommDestroy(comm) != collSuccess;
  return fails ? 1 : 0;
}

static void setup(int rank, int nranks, void* arg) {
  (void)rank, (void)nranks, (void)arg;
  setenv("COLL_TIMEOUT", "10", 1);
}

int main(void) {
  collLaunchSpec spec = {.nranks = 2, .timeoutSec = 60, .body = body, .setup = setup};
  int bad = collLaunchRun(&spec);
  printf("%s\n", bad ? "FAILED" : "PASSED");
  return bad ? 1 : 0;
}
