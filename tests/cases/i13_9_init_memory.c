/*
 * i13_9_init_memory.c - issue 13 point 9: memory at init grows at most
 * linearly per rank with the peers it talks to.
 *
 *  1. The tuner's cost model, which every rank runs for the first call of
 *     each size: pricing every all-reduce, all-gather and reduce-scatter
 *     algorithm on one node of 256, 512, 1024 and 2048 ranks must raise this
 *     process's peak RSS (VmHWM) by less than 24 MB in all. It used to hold
 *     every rank's schedule at once: 7 MB at 256 ranks, 30 MB at 512, 120 MB
 *     at 1024 per rank (and per rank again for each rank of the node). The
 *     hierarchical rows are left out as the tuner leaves them out on one node
 *     (their reduce-scatter builder alone makes O(n^2) steps for one rank).
 *  2. 64 ranks on this host (-np style, shared memory, the mailbox): init
 *     and a 1-element all-reduce; every rank's VmHWM stays under 48 MB and
 *     the sum is right (the 256- and 512-rank runs are in the report).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "coll.h"
#include "tests/integration/mp_harness.h"
#include "tuner/cost.h"

static long hwmKb(void) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "VmHWM:", 6) == 0) kb = atol(line + 6);
  if (f) fclose(f);
  return kb;
}

static int costModel(void) {
  collTuneModel m = {{0, 0.5, 5, 10}, {0, 8, 2, 1}, 4, 8, 0.3, 4.0, 20};
  const collFunc fns[] = {COLL_FN_ALLREDUCE, COLL_FN_ALLGATHER, COLL_FN_REDUCESCATTER};
  long h0 = hwmKb();
  int bad = 0;
  for (int n = 256; n <= 2048; n *= 2) {
    collTuneLayout l = {n, NULL, 1, 1, 1};
    int priced = 0;
    for (const collAlgo* a = collAlgoTable; a->name; a++)
      for (int f = 0; f < 3; f++) {
        /* as the tuner: the hierarchical rows only for several nodes */
        if (!(a->funcMask & (1u << (unsigned)fns[f])) || strncmp(a->name, "hier", 4) == 0) continue;
        collSliceCost c = collCostSlice(&m, &l, a->build, fns[f], fns[f] == COLL_FN_ALLREDUCE ? 131072 : 2048, 4);
        if (c.ok && !(c.makespanUs > 0)) bad = 1;
        priced += c.ok;
      }
    printf("n=%4d: %d (algorithm, collective) pairs priced; VmHWM +%ld KiB so far\n", n, priced, hwmKb() - h0);
    if (!priced) bad = 1;
  }
  long grew = hwmKb() - h0, limitMb = getenv("I13_9_LIMIT_MB") ? atol(getenv("I13_9_LIMIT_MB")) : 24;
  if (grew > limitMb * 1024) {
    printf("the cost model raised the peak RSS by %ld KiB (limit %ld MiB)\n", grew, limitMb);
    bad = 1;
  }
  return bad;
}

static int body(collComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  float x = (float)(rank + 1), y = 0;
  collResult_t r = collAllReduce(&x, &y, 1, collFloat, collSum, comm, NULL);
  long kb = hwmKb();
  long limitKb = getenv("I13_9_RANK_LIMIT_MB") ? atol(getenv("I13_9_RANK_LIMIT_MB")) * 1024 : 48 * 1024;
  int bad = r != collSuccess || y != (float)(nranks * (nranks + 1) / 2) || (limitKb > 0 && kb > limitKb);
  if (bad || rank == 0 || rank == nranks - 1) printf("rank %d: sum %g, VmHWM %ld KiB\n", rank, y, kb);
  return bad;
}

int main(void) {
  /* the ranks first: forked after the cost model, each would inherit (and
   * under ASan copy) this process's heap */
  int n = getenv("I13_9_RANKS") ? atoi(getenv("I13_9_RANKS")) : 64;
  int f2 = collMpRun(n, 240, body, NULL) != 0;
  printf("%d ranks: %s\n", n, f2 ? "FAIL" : "ok");
  int f1 = costModel();
  printf("cost model at 256..2048 ranks: %s\n", f1 ? "FAIL" : "ok");
  printf("%d passed, %d failed\n", 2 - f1 - f2, f1 + f2);
  return f1 || f2;
}
