/*
 * i13_4_two_jobs.c - issue 13 point 4: two jobs on the same
 * MASTER_ADDR:MASTER_PORT never form one communicator, with staggered starts.
 * Job A (2 ranks) starts first, its rank 1 two seconds late; job B (2 ranks,
 * same port) starts 0.5 s after A: B's rank 0 cannot listen (A's root holds
 * the port) and B's rank 1 reaches A's root first.
 *
 *  1. different job ids (TORCHELASTIC_RUN_ID): A succeeds (sum 3 in every
 *     iteration); both B ranks fail within 3 s with a message that names the
 *     port; nothing of B reaches A's communicator.
 *  2. the same identity (no job id): the jobs cannot be told apart, so the
 *     root must fail them loudly: no process may see a sum of the other job
 *     mixed into its own without the library returning an error (exit 2),
 *     B's rank 0 fails naming the port, and every process exits within 15 s.
 *  3. as 2, with B's rank 0 0.5 s after B's rank 1: A's root forms a
 *     communicator with A's rank 0 and B's rank 1, then hears B's rank 0
 *     (and A's rank 1) claim ranks of it: that communicator must fail on
 *     both of its processes (the first calls may already have mixed).
 *
 * Each rank runs 30 all-reduces 100 ms apart (values: A rank+1, B 10*(rank+1))
 * and exits 0 if every sum was its own job's, 1 if the library returned an
 * error, 2 if it saw a mixed sum but never an error (a silent merge).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"
#include "helper_launch.h"

typedef struct {
  int job;     /* 0 = A, 1 = B */
  int sameId;  /* scenarios 2 and 3 */
  int b0Late;  /* scenario 3: B's rank 0 starts 0.5 s after B's rank 1 */
} jobArg;

static void setup(int rank, int nranks, void* arg) {
  const jobArg* j = arg;
  (void)nranks;
  setenv("COLL_INIT_TIMEOUT", "20", 1);
  setenv("COLL_TIMEOUT", "5", 1);
  if (j->sameId) unsetenv("TORCHELASTIC_RUN_ID");
  else setenv("TORCHELASTIC_RUN_ID", j->job ? "job-B" : "job-A", 1);
  if (j->job == 1) usleep(500 * 1000);
  if (j->job == 1 && rank == 0 && j->b0Late) usleep(500 * 1000);
  if (j->job == 0 && rank == 1) sleep(2);
}

static int body(int rank, int nranks, void* arg) {
  const jobArg* j = arg;
  (void)nranks;
  collComm_t comm;
  collResult_t r = collCommInitFromEnv(&comm, NULL);
  if (r != collSuccess) {
    printf("job %c rank %d: init: %s\n", 'A' + j->job, rank, collGetLastError(NULL));
    return 1;
  }
  float mine = j->job ? 10.0f * (float)(rank + 1) : (float)(rank + 1), own = j->job ? 30.0f : 3.0f;
  int mixed = 0, err = 0;
  for (int i = 0; i < 30 && !err; i++) {
    float y = 0;
    r = collAllReduce(&mine, &y, 1, collFloat, collSum, comm, NULL);
    if (r != collSuccess) {
      printf("job %c rank %d: allreduce %d: %s\n", 'A' + j->job, rank, i, collGetLastError(comm));
      err = 1;
    } else if (y != own) {
      mixed = 1;
    }
    usleep(100 * 1000);
  }
  collCommDestroy(comm);
  if (mixed && !err) printf("job %c rank %d: SILENT MERGE: sums of the other job, no error\n", 'A' + j->job, rank);
  return err ? 1 : mixed ? 2 : 0;
}

static int scenario(int sameId, int b0Late) {
  int port = collLaunchFreePort();
  jobArg a = {0, sameId, b0Late}, b = {1, sameId, b0Late};
  collLaunchSpec sa = {.nranks = 2, .masterPort = port, .timeoutSec = 40, .capture = 1, .body = body,
                       .setup = setup, .arg = &a};
  collLaunchSpec sb = sa;
  sb.arg = &b;
  collLaunch* A = collLaunchStart(&sa);
  collLaunch* B = A ? collLaunchStart(&sb) : NULL;
  if (!A || !B) {
    collLaunchFree(A);
    collLaunchFree(B);
    return 1;
  }
  /* reap both jobs as they exit (exit times count from each launch) */
  for (int i = 0; i < 40 * 100; i++) {
    int ra = collLaunchPoll(A), rb = collLaunchPoll(B);
    if (!ra && !rb) break;
    usleep(10 * 1000);
  }
  collLaunchWait(A, 1);
  collLaunchWait(B, 1);
  char portStr[16];
  snprintf(portStr, sizeof portStr, ":%d", port + 1);
  int bad = 0;
  for (int jb = 0; jb < 2; jb++) {
    collLaunch* L = jb ? B : A;
    for (int r = 0; r < 2; r++) {
      int code = collLaunchExitCode(L, r);
      double t = collLaunchExitTime(L, r);
      const char* out = collLaunchOutput(L, r);
      printf("  job %c rank %d: exit %d after %.2f s\n", 'A' + jb, r, code, t);
      if (code == 2 || code < 0) bad = 1;
      if (sameId && t > 15) bad = 1;
      if (jb == 1) { /* B fails, fast, naming the port */
        if (code != 1 || ((r == 0 || !sameId) && !strstr(out, portStr))) bad = 1;
        if (!sameId && t > 3.5) bad = 1;
      }
      if (!sameId && jb == 0 && code != 0) bad = 1; /* A is not disturbed */
    }
  }
  for (int jb = 0; jb < 2; jb++)
    for (int r = 0; r < 2; r++) printf("    %s", collLaunchOutput(jb ? B : A, r));
  if (bad) {
    collLaunchReport(A);
    collLaunchReport(B);
  }
  collLaunchFree(A);
  collLaunchFree(B);
  return bad;
}

int main(void) {
  int f1 = scenario(0, 0);
  printf("different job ids: %s\n", f1 ? "FAIL" : "ok");
  int f2 = scenario(1, 0);
  printf("same identity: %s\n", f2 ? "FAIL" : "ok");
  int f3 = scenario(1, 1);
  printf("same identity, B's rank 1 first (A's root forms with it, then hears B's rank 0): %s\n", f3 ? "FAIL" : "ok");
  printf("%d passed, %d failed\n", 3 - f1 - f2 - f3, f1 + f2 + f3);
  return f1 || f2 || f3;
}
