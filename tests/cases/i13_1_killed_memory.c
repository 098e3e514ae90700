/*
 * i13_1_killed_memory - issue 13 point 1: a killed peer must not make the
 * survivors eat the machine.
 *
 * Recipe: 4 ranks of `allreduce_perf -b 64M -e 64M -n 1000 -c 0` started as
 * torchrun starts them (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT per process,
 * no -np); once they run their timed loop, `kill -9` rank 1.
 * Expected: every survivor fails within 5 s (the queued all-reduces fail at
 * once with the communicator's error, nothing connects again), its peak RSS
 * after the kill stays within 10 % of its RSS at the kill, and its message
 * names rank 1 and its pid. Before the fix each survivor grew by hundreds of
 * MB per second (a new 4 MiB memfd ring per queued operation, never freed).
 */
#include <signal.h>
#include <stdio.h>

#include "helper_fail.h"

int main(void) {
  int fails = failPerfKill(COLL_BENCH_DIR "/allreduce_perf", 4, "64M", 1000, 1, SIGKILL, 5.0);
  printf("%s\n", fails ? "FAILED" : "PASSED");
  return fails ? 1 : 0;
}
