/*
 * i13_2_stopped_named - issue 13 point 2: a frozen peer (SIGSTOP) must be
 * named by every survivor, not only the live neighbour each one waited on.
 *
 * Recipe: 4 ranks started as torchrun starts them (collCommInitFromEnv),
 * timeout 2 s, all-reduces of 1 .. 65536 floats in a loop; SIGSTOP rank 1
 * (then, in a second job with the shared-memory mailbox off, so that every
 * call runs a ring and each rank waits on a neighbour, rank 3).
 * Expected: every survivor fails within timeout + 2 s; its message names the
 * rank it waited for and "rank V (pid P on host) is stopped"; its memory
 * stays flat (peak RSS within 10 % of before), fds are back after destroy.
 * Before the fix the messages blamed only live neighbours ("waiting on rank
 * 3", "waiting on rank 0").
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "helper_fail.h"

int main(void) {
  failJob* job = failShared(sizeof *job);
  if (!job) return 1;
  int fails = 0;
  const int victims[] = {1, 3};
  for (int v = 0; v < 2; v++) {
    job->timeoutSec = 2;
    if (v == 1) setenv("COLL_MAILBOX_BYTES", "0", 1);
    double worst;
    int f = failJobTrial(job, 4, victims[v], SIGSTOP, 0.2, 4.0, "is stopped", &worst, 1);
    printf("SIGSTOP rank %d: %s, slowest survivor %.2f s after the stop\n", victims[v], f ? "FAILED" : "ok", worst);
    fails += f;
  }
  printf("%s\n", fails ? "FAILED" : "PASSED");
  return fails ? 1 : 0;
}
