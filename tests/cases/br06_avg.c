/*
 * BR-06: AVG divides by the number of ranks, never by the element count,
 * is never a plain SUM, and works on integers (torchcomms#287, pytorch#162338,
 * InfiniCCL#37).
 *
 * 4 ranks, op avg:
 *  1. float32, count 3, rank r = [r+1, 2(r+1), 4(r+1)]: all-reduce
 *     out-of-place and in-place, reduce to root 0, reduce-scatter with
 *     recvcount 3 (each of the 4 send blocks holds the same pattern).
 *     Expected [2.5, 5, 10] (root only for reduce; every rank's block).
 *  2. int32, count 5, rank r = [r+1, 10(r+1), -(r+1), 7, 0]: all-reduce.
 *     Expected [2, 25, -2, 7, 0] (sum, then division truncating toward 0).
 *  3. uint8, count 2, rank r = [r, 60+r]: all-reduce. Expected [1, 61].
 * Extension: the same patterns repeated to 100000 elements (past the
 * shared-memory mailbox: the schedules and their slicing), element i holding
 * pattern element i % count.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../integration/mp_harness.h"
#include "helper_data.h"

#define BIG 100000

static int checkF(const float* got, size_t n, const float* want, size_t period, const char* what, int rank) {
  int fails = 0;
  for (size_t i = 0; i < n; i++)
    if (got[i] != want[i % period]) {
      DATA_CHECK(0, "rank %d %s n=%zu: element %zu is %.9g, expected %.9g", rank, what, n, i, (double)got[i],
                 (double)want[i % period]);
      break;
    }
  return fails;
}

static int body(collComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  int fails = 0;
  float* fs = malloc(sizeof(float) * BIG * 4);
  float* fr = malloc(sizeof(float) * (BIG * 4 + 1));
  int32_t* is = malloc(sizeof(int32_t) * BIG);
  int32_t* ir = malloc(sizeof(int32_t) * (BIG + 1));
  uint8_t* us = malloc(BIG);
  uint8_t* ur = malloc(BIG + 1);
  const float fwant[3] = {2.5f, 5.0f, 10.0f};
  const int32_t iwant[5] = {2, 25, -2, 7, 0};
  const uint8_t uwant[2] = {1, 61};
  for (int big = 0; big < 2; big++) {
    /* 1. float32 */
    size_t n = big ? BIG : 3;
    for (size_t i = 0; i < 4 * n; i++) fs[i] = (float)((rank + 1) << (i % 3));
    fr[n] = -7.0f;
    DATA_CHECK(collAllReduce(fs, fr, n, collFloat32, collAvg, comm, NULL) == collSuccess, "all-reduce: %s",
               collGetLastError(comm));
    fails += checkF(fr, n, fwant, 3, "float32 all-reduce avg", rank);
    memcpy(fr, fs, n * sizeof(float));
    DATA_CHECK(collAllReduce(fr, fr, n, collFloat32, collAvg, comm, NULL) == collSuccess, "in-place: %s",
               collGetLastError(comm));
    fails += checkF(fr, n, fwant, 3, "float32 all-reduce avg in-place", rank);
    for (size_t i = 0; i < n; i++) fr[i] = -7.0f;
    DATA_CHECK(collReduce(fs, fr, n, collFloat32, collAvg, 0, comm, NULL) == collSuccess, "reduce: %s",
               collGetLastError(comm));
    if (rank == 0) fails += checkF(fr, n, fwant, 3, "float32 reduce avg (root 0)", rank);
    else DATA_CHECK(fr[0] == -7.0f, "rank %d: reduce wrote into a non-root's receive buffer", rank);
    /* reduce-scatter: every send block repeats the pattern from its start */
    for (int b = 0; b < nranks; b++)
      for (size_t i = 0; i < n; i++) fs[(size_t)b * n + i] = (float)((rank + 1) << (i % 3));
    DATA_CHECK(collReduceScatter(fs, fr, n, collFloat32, collAvg, comm, NULL) == collSuccess, "reduce-scatter: %s",
               collGetLastError(comm));
    fails += checkF(fr, n, fwant, 3, "float32 reduce-scatter avg", rank);
    DATA_CHECK(fr[n] == -7.0f, "rank %d: wrote past the receive count", rank);
    /* 2. int32 */
    n = big ? BIG : 5;
    const int32_t ipat[5] = {rank + 1, 10 * (rank + 1), -(rank + 1), 7, 0};
    for (size_t i = 0; i < n; i++) is[i] = ipat[i % 5];
    ir[n] = -99;
    DATA_CHECK(collAllReduce(is, ir, n, collInt32, collAvg, comm, NULL) == collSuccess, "int32: %s",
               collGetLastError(comm));
    for (size_t i = 0; i < n; i++)
      if (ir[i] != iwant[i % 5]) {
        DATA_CHECK(0, "rank %d int32 all-reduce avg n=%zu: element %zu is %d, expected %d", rank, n, i, ir[i],
                   iwant[i % 5]);
        break;
      }
    DATA_CHECK(ir[n] == -99, "rank %d: int32 wrote past the count", rank);
    /* 3. uint8 */
    n = big ? BIG : 2;
    for (size_t i = 0; i < n; i++) us[i] = (uint8_t)(i % 2 ? 60 + rank : rank);
    ur[n] = 0xEE;
    DATA_CHECK(collAllReduce(us, ur, n, collUint8, collAvg, comm, NULL) == collSuccess, "uint8: %s",
               collGetLastError(comm));
    for (size_t i = 0; i < n; i++)
      if (ur[i] != uwant[i % 2]) {
        DATA_CHECK(0, "rank %d uint8 all-reduce avg n=%zu: element %zu is %u, expected %u", rank, n, i, ur[i],
                   uwant[i % 2]);
        break;
      }
    DATA_CHECK(ur[n] == 0xEE, "rank %d: uint8 wrote past the count", rank);
  }
  free(fs);
  free(fr);
  free(is);
  free(ir);
  free(us);
  free(ur);
  return fails;
}

int main(void) {
  double t0 = dataNow();
  int rc = collMpRun(4, 120, body, NULL);
  printf("BR-06 avg on float32, int32 and uint8, 4 ranks (%.1f s): %s\n", dataNow() - t0, rc ? "FAILED" : "passed");
  return rc;
}
