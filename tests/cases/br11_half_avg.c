/*
 * BR-11: a float16 average does not overflow because of its intermediate
 * sum (horovod#1699).
 *
 * 4 ranks, float16, count 1024, every element 30000 (exact) on every rank:
 * all-reduce avg out-of-place and in-place gives exactly 30000 in every
 * element on every rank (no inf, no NaN); all-reduce sum gives +inf (IEEE
 * overflow is right for a sum). 8 ranks: every element 16000, avg 16000.
 * Extension (the underflow side): 4 ranks, every element 2^-24 (the
 * smallest float16 subnormal): avg gives 2^-24, not 0.
 * Beyond the recipe: reduce-scatter and reduce (root 0) avg as well, and
 * 100000 elements (past the shared-memory mailbox: the schedules).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../integration/mp_harness.h"
#include "helper_data.h"
#include "reduce/reduce.h"

typedef struct {
  float value, avg, sum;
} halfCase;

static int checkAll(const uint16_t* got, size_t n, float want, const char* what, int rank, int nranks, size_t count) {
  int fails = 0;
  for (size_t i = 0; i < n; i++) {
    float g = collHalfToFloat(got[i]);
    if (!(g == want)) {
      DATA_CHECK(0, "rank %d of %d: %s of %zu: element %zu is %g (0x%04x), expected %g", rank, nranks, what, count, i,
                 (double)g, got[i], (double)want);
      break;
    }
  }
  return fails;
}

static int body(collComm_t comm, int rank, int nranks, void* arg) {
  const halfCase* c = arg;
  int fails = 0;
  static const size_t counts[2] = {1024, 100000};
  size_t cap = 100000 * 8 + 1;
  uint16_t* send = malloc(cap * 2);
  uint16_t* recv = malloc(cap * 2);
  uint16_t h = collFloatToHalf(c->value);
  for (size_t i = 0; i < cap; i++) send[i] = h;
  for (int ci = 0; ci < 2; ci++) {
    size_t n = counts[ci];
    memset(recv, 0xff, cap * 2);
    DATA_CHECK(collAllReduce(send, recv, n, collFloat16, collAvg, comm, NULL) == collSuccess, "avg: %s",
               collGetLastError(comm));
    fails += checkAll(recv, n, c->avg, "all-reduce avg", rank, nranks, n);
    for (size_t i = 0; i < n; i++) recv[i] = h;
    DATA_CHECK(collAllReduce(recv, recv, n, collFloat16, collAvg, comm, NULL) == collSuccess, "in-place avg: %s",
               collGetLastError(comm));
    fails += checkAll(recv, n, c->avg, "all-reduce avg in-place", rank, nranks, n);
    DATA_CHECK(recv[n] == 0xffff, "rank %d: wrote past the count", rank);
    DATA_CHECK(collAllReduce(send, recv, n, collFloat16, collSum, comm, NULL) == collSuccess, "sum: %s",
               collGetLastError(comm));
    fails += checkAll(recv, n, c->sum, "all-reduce sum", rank, nranks, n);
    size_t per = n / (size_t)nranks;
    DATA_CHECK(collReduceScatter(send, recv, per, collFloat16, collAvg, comm, NULL) == collSuccess, "rs: %s",
               collGetLastError(comm));
    fails += checkAll(recv, per, c->avg, "reduce-scatter avg", rank, nranks, per);
    memset(recv, 0xff, cap * 2);
    DATA_CHECK(collReduce(send, recv, n, collFloat16, collAvg, 0, comm, NULL) == collSuccess, "reduce: %s",
               collGetLastError(comm));
    if (rank == 0) fails += checkAll(recv, n, c->avg, "reduce avg", rank, nranks, n);
  }
  free(send);
  free(recv);
  return fails;
}

/* 8 ranks: 16000 on all of them, then 30000 and 2^-24 on a split of ranks
 * 0-3 (one set of processes: each first communicator costs seconds under
 * the sanitizers). */
static int all(collComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  halfCase eight = {16000.0f, 16000.0f, INFINITY}, four = {30000.0f, 30000.0f, INFINITY};
  halfCase tiny = {0x1p-24f, 0x1p-24f, 0x1p-22f};
  int fails = body(comm, rank, nranks, &eight);
  printf("rank %d: float16 avg of 16000 on 8 ranks: %s\n", rank, fails ? "FAILED" : "passed");
  collComm_t sub = NULL;
  DATA_CHECK(collCommSplit(comm, rank < 4 ? 0 : COLL_SPLIT_NOCOLOR, rank, &sub, NULL) == collSuccess, "split: %s",
             collGetLastError(comm));
  if (sub) {
    int f = body(sub, rank, 4, &four);
    printf("rank %d: float16 avg of 30000 on 4 ranks: %s\n", rank, f ? "FAILED" : "passed");
    int g = body(sub, rank, 4, &tiny);
    printf("rank %d: float16 avg of 2^-24 on 4 ranks: %s\n", rank, g ? "FAILED" : "passed");
    fails += f + g;
    DATA_CHECK(collCommDestroy(sub) == collSuccess, "destroy: %s", collGetLastError(NULL));
  }
  return fails;
}

int main(void) {
  double t0 = dataNow();
  int rc = collMpRun(8, 240, all, NULL);
  printf("BR-11 float16 avg of 30000 (4 ranks), 16000 (8 ranks), 2^-24 (4 ranks) (%.1f s): %s\n", dataNow() - t0,
         rc ? "FAILED" : "passed");
  return rc;
}
