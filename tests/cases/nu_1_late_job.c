/*
 * nu_1_late_job.c - new user's finding 1: a second job (or a retried pod)
 * that joins a running job's rendezvous (the same MASTER_ADDR:MASTER_PORT, no
 * job id) is refused with a clear error, and the running job is untouched.
 *
 * Job A (2 ranks) forms its communicator and runs all-reduces for 5 s; 1.5 s
 * after both of A's ranks said that init returned, job B (2 ranks, same port,
 * no job id) starts. Expected:
 *  - every B rank fails its init within 4 s with "serves a running
 *    communicator" naming the address (MASTER_PORT+1);
 *  - every A rank sees only correct sums and no error, and its destroy takes
 *    under 2 s (the root has nothing to linger for).
 * Before the fix A's communicator was failed ("rank 0 joined twice") and its
 * rank 0's destroy took 5 s.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"
#include "helper_launch.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void setup(int rank, int nranks, void* arg) {
  (void)rank;
  (void)nranks;
  (void)arg;
  setenv("COLL_INIT_TIMEOUT", "20", 1);
  setenv("COLL_TIMEOUT", "10", 1);
  static const char* ids[] = {"TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid",
                              "PMI_ID", "COLL_COMM_ID"};
  for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) unsetenv(ids[i]);
}

static int bodyA(int rank, int nranks, void* arg) {
  (void)arg;
  collComm_t comm;
  if (collCommInitFromEnv(&comm, NULL) != collSuccess) {
    printf("A rank %d: init: %s\n", rank, collGetLastError(NULL));
    return 1;
  }
  printf("A rank %d: formed\n", rank);
  fflush(stdout);
  int bad = 0;
  long it = 0;
  double end = now() + 5.0;
  for (int stop = 0; !stop && !bad;) {
    /* x[1]: this rank's clock ran out; all ranks stop at the same call */
    float x[2] = {(float)(rank + 1), now() < end ? 0.0f : 1.0f}, y[2] = {0, 0};
    if (collAllReduce(x, y, 2, collFloat, collSum, comm, NULL) != collSuccess) {
      printf("A rank %d iter %ld: %s\n", rank, it, collGetLastError(comm));
      bad = 1;
    } else if ((stop = y[1] > 0), y[0] != (float)(nranks * (nranks + 1) / 2)) {
      printf("A rank %d iter %ld: sum %g\n", rank, it, (double)y[0]);
      bad = 1;
    }
    it++;
    usleep(1000);
  }
  double t0 = now();
  collResult_t r = collCommDestroy(comm);
  double dt = now() - t0;
  printf("A rank %d: %ld iterations, destroy %s in %.2f s\n", rank, it, collGetErrorString(r), dt);
  if (r != collSuccess) bad = 1;
  if (dt > 2.0) bad = 1;
  return bad;
}

static int bodyB(int rank, int nranks, void* arg) {
  (void)arg;
  (void)nranks;
  double t0 = now();
  collComm_t comm;
  collResult_t r = collCommInitFromEnv(&comm, NULL);
  if (r == collSuccess) {
    printf("B rank %d: init succeeded on a running job's address\n", rank);
    collCommDestroy(comm);
    return 2;
  }
  printf("B rank %d: init failed after %.2f s: %s\n", rank, now() - t0, collGetLastError(NULL));
  return 1;
}

int main(void) {
  int port = collLaunchFreePort();
  collLaunchSpec sa = {.nranks = 2, .masterPort = port, .timeoutSec = 40, .capture = 1, .body = bodyA,
                       .setup = setup};
  collLaunchSpec sb = sa;
  sb.body = bodyB;
  collLaunch* A = collLaunchStart(&sa);
  if (!A) return 1;
  int formed = 0;
  for (int i = 0; i < 2000 && formed < 2; i++) {
    usleep(10 * 1000);
    formed = 0;
    for (int r = 0; r < 2; r++) formed += strstr(collLaunchOutput(A, r), "formed") != NULL;
    if (collLaunchPoll(A) < 2) break;
  }
  if (formed < 2) {
    fprintf(stderr, "job A did not form\n");
    collLaunchReport(A);
    collLaunchFree(A);
    return 1;
  }
  usleep(1500 * 1000);
  collLaunch* B = collLaunchStart(&sb);
  if (!B) {
    collLaunchFree(A);
    return 1;
  }
  for (int i = 0; i < 40 * 100; i++) {
    int ra = collLaunchPoll(A), rb = collLaunchPoll(B);
    if (!ra && !rb) break;
    usleep(10 * 1000);
  }
  collLaunchWait(A, 1);
  collLaunchWait(B, 1);
  char addr[32];
  snprintf(addr, sizeof addr, ":%d", port + 1);
  int bad = 0;
  for (int r = 0; r < 2; r++) {
    const char* o = collLaunchOutput(A, r);
    printf("  %s", o);
    if (collLaunchExitCode(A, r) != 0) bad = 1;
  }
  for (int r = 0; r < 2; r++) {
    const char* o = collLaunchOutput(B, r);
    printf("  %s (B rank %d exit %d after %.2f s)\n", o, r, collLaunchExitCode(B, r), collLaunchExitTime(B, r));
    if (collLaunchExitCode(B, r) != 1 || !strstr(o, "serves a running communicator") || !strstr(o, addr) ||
        collLaunchExitTime(B, r) > 4.0)
      bad = 1;
  }
  collLaunchFree(A);
  collLaunchFree(B);
  printf("%s\n", bad ? "FAIL" : "ok: the late job is refused, the running job goes on");
  return bad;
}
