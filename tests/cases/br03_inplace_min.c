/*
 * BR-03: an in-place all-reduce gives the same result as an out-of-place
 * one (open-mpi/ompi#259: in-place MIN over three ranks returned 0).
 *
 * 3 ranks, float64; rank 0 = 10.0, rank 1 = -300.0, rank 2 = -150.0; ops
 * min, max, sum, prod; in-place and out-of-place; counts 1 and 1000 (every
 * element the rank's value). Expected on every rank and element: min -300,
 * max 10, sum -440, prod 450000 (all exact in float64), and the in-place
 * result bitwise identical to the out-of-place one.
 * ctest also runs it with the mailbox off and each all-reduce algorithm
 * forced (br03_inplace_min.cmake).
 */
#include <stdio.h>
#include <string.h>

#include "../integration/mp_harness.h"
#include "helper_sem.h"

#define MAXN 1000

static int body(collComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  (void)nranks;
  int fails = 0;
  static const double value[3] = {10.0, -300.0, -150.0};
  static const collRedOp_t ops[] = {collMin, collMax, collSum, collProd};
  static const char* names[] = {"min", "max", "sum", "prod"};
  static const double expect[] = {-300.0, 10.0, -440.0, 450000.0};
  static const size_t counts[] = {1, MAXN};
  static double send[MAXN], outOfPlace[MAXN + 1], inPlace[MAXN + 1];
  for (int o = 0; o < 4; o++) {
    for (int ci = 0; ci < 2; ci++) {
      size_t n = counts[ci];
      for (size_t i = 0; i < n; i++) send[i] = value[rank];
      for (size_t i = 0; i <= n; i++) outOfPlace[i] = -1.0;
      SEM_OK(collAllReduce(send, outOfPlace, n, collFloat64, ops[o], comm, NULL));
      for (size_t i = 0; i < n; i++) inPlace[i] = value[rank];
      inPlace[n] = -1.0;
      SEM_OK(collAllReduce(inPlace, inPlace, n, collFloat64, ops[o], comm, NULL));
      int bad = 0;
      for (size_t i = 0; i < n; i++) {
        if (outOfPlace[i] != expect[o] || inPlace[i] != expect[o]) {
          if (bad++ < 3)
            SEM_CHECK(0, "%s count %zu element %zu: out-of-place %.17g, in-place %.17g, expected %.17g", names[o],
                      n, i, outOfPlace[i], inPlace[i], expect[o]);
        }
      }
      SEM_CHECK(bad == 0, "%s count %zu: %d wrong elements", names[o], n, bad);
      SEM_CHECK(memcmp(outOfPlace, inPlace, n * sizeof(double)) == 0,
                "%s count %zu: in-place and out-of-place results differ bitwise", names[o], n);
      SEM_CHECK(outOfPlace[n] == -1.0 && inPlace[n] == -1.0, "%s count %zu wrote past the count", names[o], n);
      for (size_t i = 0; i < n; i++)
        if (send[i] != value[rank]) {
          SEM_CHECK(0, "%s count %zu: out-of-place changed the send buffer at %zu", names[o], n, i);
          break;
        }
    }
  }
  return fails;
}

int main(void) {
  int rc = collMpRun(3, 60, body, NULL);
  printf("BR-03 in-place and out-of-place min/max/sum/prod on 3 ranks: %s\n", rc ? "FAILED" : "passed");
  return rc;
}
