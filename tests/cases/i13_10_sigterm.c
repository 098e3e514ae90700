/*
 * i13_10_sigterm - issue 13 point 10: SIGTERM or SIGINT to one rank (what a
 * launcher or Ctrl-C sends) is, for the survivors, a death like SIGKILL.
 *
 * Recipe: 4 ranks of `allreduce_perf -b 16M -e 16M -n 1000 -c 0` started as
 * torchrun starts them; in their timed loop, SIGTERM to rank 1; a second job
 * gets SIGINT to rank 2.
 * Expected: every survivor fails within 5 s naming the signalled rank, and
 * its peak RSS after the signal stays within 10 % of its RSS at the signal
 * (before the fix, memory grew first as in point 1).
 */
#include <signal.h>
#include <stdio.h>

#include "helper_fail.h"

int main(void) {
  int fails = 0;
  printf("SIGTERM to rank 1\n");
  fails += failPerfKill(COLL_BENCH_DIR "/allreduce_perf", 4, "16M", 1000, 1, SIGTERM, 5.0);
  printf("SIGINT to rank 2\n");
  fails += failPerfKill(COLL_BENCH_DIR "/allreduce_perf", 4, "16M", 1000, 2, SIGINT, 5.0);
  printf("%s\n", fails ? "FAILED" : "PASSED");
  return fails ? 1 : 0;
}
