/*
 * i13_soak_kill_stop - issue 13 "Done when": 4 ranks started as torchrun
 * starts them (collCommInitFromEnv) loop over all-reduces of 1 .. 65536
 * floats (mailbox and shared-memory rings); one rank, chosen at random, gets
 * SIGKILL at a random moment (0 - 300 ms into the loop), 50 trials; then
 * SIGSTOP with a 1 s timeout, 50 trials.
 * Expected in every trial, for every survivor: an error within 2 s of a kill
 * (timeout + 2 s of a stop) whose message names the failed rank ("rank V
 * (pid P on host) has exited" / "is stopped"), exact values before it,
 * collCommDestroy within 2 s, peak RSS after the signal within 10 % (+ 2 MiB)
 * of the RSS before it, fds back to the count before init, no coll memfd
 * left, no /dev/shm entry of the job's ranks left.
 * COLL_SOAK_TRIALS overrides the 50. gcc build only (see the .cmake).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "helper_fail.h"

int main(void) {
  const char* t = getenv("COLL_SOAK_TRIALS");
  int trials = t && atoi(t) > 0 ? atoi(t) : 50;
  failJob* job = failShared(sizeof *job);
  if (!job) return 1;
  srand((unsigned)(failNow() * 1e6));
  int fails = 0, fds0 = failCountFds();
  for (int kind = 0; kind < 2; kind++) {
    int sig = kind ? SIGSTOP : SIGKILL, bad = 0;
    double worst = 0, t0 = failNow();
    for (int i = 0; i < trials; i++) {
      int victim = rand() % 4;
      double delay = (rand() % 300) * 1e-3, w;
      job->timeoutSec = kind ? 1 : 60;
      int f = failJobTrial(job, 4, victim, sig, delay, kind ? 3.0 : 2.0, kind ? "is stopped" : "has exited", &w, 0);
      if (f) printf("  %s trial %d (victim %d after %.3f s) FAILED\n", kind ? "SIGSTOP" : "SIGKILL", i, victim, delay);
      bad += f != 0;
      if (w > worst) worst = w;
    }
    printf("%s: %d of %d trials failed; slowest survivor error %.3f s after the signal; %.1f s\n",
           kind ? "SIGSTOP (timeout 1 s)" : "SIGKILL", bad, trials, worst, failNow() - t0);
    fflush(stdout);
    fails += bad;
  }
  if (failCountFds() != fds0) {
    printf("the test's own fds: %d -> %d\n", fds0, failCountFds());
    fails++;
  }
  printf("%s\n", fails ? "FAILED" : "PASSED");
  return fails ? 1 : 0;
}
