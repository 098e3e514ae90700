/*
 * BR-02: collectives on fewer elements than ranks (Xilinx/ACCL#73: an
 * all-reduce of one element froze because the buffer could not be cut into
 * one non-empty segment per rank), and a one-rank communicator
 * (pytorch/gloo#154: world size 1 was rejected).
 *
 * 3, 4 and 8 ranks, float32 sum, out-of-place and in-place:
 *  - all-reduce of counts 1, 2, 3, 5, 7 (and 9 on 8 ranks), element k on
 *    rank r = k + r + 1: expected n*k + n(n+1)/2;
 *  - reduce-scatter of recvcount 1, send element j on rank r = 10r + j: rank
 *    j gets 10*n(n-1)/2 + n*j;
 *  - all-gather of sendcount 1, rank r sends r: [0, 1, ..., n-1];
 *  - broadcast of 1 element from root n-1 (value 42).
 * Every call must return within 5 s. Then 1 rank: every collective and op
 * returns a copy of its input [1, 2, 3].
 * ctest runs this with the default choices and again with the mailbox off
 * and each algorithm forced (br02_single_element.cmake), so every schedule
 * builder meets counts below the rank count.
 * Usage: case_br02_single_element [NRANKS...] (default 3 4 8 1).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../integration/mp_harness.h"
#include "helper_sem.h"

#define LIMIT_S 5.0
#define MAXC 9

/* Times one call: it must succeed within LIMIT_S. */
#define TIMED(what, call)                                                           \
  do {                                                                              \
    double t0_ = semNow();                                                          \
    SEM_OK(call);                                                                   \
    double dt_ = semNow() - t0_;                                                    \
    SEM_CHECK(dt_ < LIMIT_S, "%s took %.2f s (limit %.0f s)", what, dt_, LIMIT_S); \
  } while (0)

static int manyRanks(collComm_t comm, int rank, int n, void* arg) {
  (void)arg;
  int fails = 0;
  char what[96];
  static const size_t counts[] = {1, 2, 3, 5, 7, 9};
  int ncounts = n == 8 ? 6 : 5;
  float send[8 * MAXC], recv[8 * MAXC];
  for (int inPlace = 0; inPlace < 2; inPlace++) {
    const char* mode = inPlace ? "in-place" : "out-of-place";
    for (int ci = 0; ci < ncounts; ci++) {
      size_t c = counts[ci];
      for (size_t k = 0; k < c; k++) send[k] = (float)(k + (size_t)rank + 1);
      for (size_t k = 0; k <= MAXC; k++) recv[k] = -1.0f;
      if (inPlace) memcpy(recv, send, c * sizeof(float));
      snprintf(what, sizeof what, "allreduce count %zu %s", c, mode);
      TIMED(what, collAllReduce(inPlace ? recv : send, recv, c, collFloat32, collSum, comm, NULL));
      for (size_t k = 0; k < c; k++) {
        float exp = (float)(n * (int)k + n * (n + 1) / 2);
        SEM_CHECK(recv[k] == exp, "%s: element %zu = %g, expected %g", what, k, (double)recv[k], (double)exp);
      }
      SEM_CHECK(recv[c] == -1.0f, "%s wrote past the count (element %zu = %g)", what, c, (double)recv[c]);
    }
    /* reduce-scatter, recvcount 1 */
    for (int j = 0; j < n; j++) send[j] = (float)(10 * rank + j);
    float out = -1.0f;
    float* rsSend = send;
    float* rsRecv = &out;
    if (inPlace) rsRecv = send + rank; /* recv == send + rank*recvcount */
    snprintf(what, sizeof what, "reduce_scatter recvcount 1 %s", mode);
    TIMED(what, collReduceScatter(rsSend, rsRecv, 1, collFloat32, collSum, comm, NULL));
    float expRs = (float)(10 * n * (n - 1) / 2 + n * rank);
    SEM_CHECK(*rsRecv == expRs, "%s: got %g, expected %g", what, (double)*rsRecv, (double)expRs);
    /* all-gather, sendcount 1 */
    for (int j = 0; j < n + 1; j++) recv[j] = -1.0f;
    float mine = (float)rank;
    if (inPlace) recv[rank] = mine;
    snprintf(what, sizeof what, "allgather sendcount 1 %s", mode);
    TIMED(what, collAllGather(inPlace ? recv + rank : &mine, recv, 1, collFloat32, comm, NULL));
    for (int j = 0; j < n; j++)
      SEM_CHECK(recv[j] == (float)j, "%s: element %d = %g, expected %d", what, j, (double)recv[j], j);
    SEM_CHECK(recv[n] == -1.0f, "%s wrote past nranks elements", what);
    /* broadcast of 1 element from root n-1 */
    float b = rank == n - 1 ? 42.0f : -1.0f, bout = -1.0f;
    snprintf(what, sizeof what, "broadcast count 1 root %d %s", n - 1, mode);
    TIMED(what, collBroadcast(&b, inPlace ? &b : &bout, 1, collFloat32, n - 1, comm, NULL));
    float got = inPlace ? b : bout;
    SEM_CHECK(got == 42.0f, "%s: got %g, expected 42", what, (double)got);
  }
  return fails;
}

/* One rank: every collective copies [1, 2, 3] (reductions over one rank are
 * the identity for every op, avg included). */
static int oneRank(collComm_t comm, int rank, int n, void* arg) {
  (void)arg;
  int fails = 0;
  SEM_CHECK(n == 1, "expected a 1-rank communicator, got %d ranks", n);
  const float in[3] = {1.0f, 2.0f, 3.0f};
  float out[4];
  char what[64];
#define CHECK_COPY()                                                                                \
  do {                                                                                              \
    for (int k = 0; k < 3; k++)                                                                     \
      SEM_CHECK(out[k] == in[k], "%s: element %d = %g, expected %g", what, k, (double)out[k],      \
                (double)in[k]);                                                                     \
    SEM_CHECK(out[3] == -1.0f, "%s wrote past the count", what);                                    \
  } while (0)
  static const collRedOp_t ops[] = {collSum, collProd, collMax, collMin, collAvg};
  for (int o = 0; o < 5; o++) {
    for (int k = 0; k < 4; k++) out[k] = -1.0f;
    snprintf(what, sizeof what, "1 rank: allreduce op %d", (int)ops[o]);
    TIMED(what, collAllReduce(in, out, 3, collFloat32, ops[o], comm, NULL));
    CHECK_COPY();
    for (int k = 0; k < 4; k++) out[k] = k < 3 ? in[k] : -1.0f;
    snprintf(what, sizeof what, "1 rank: allreduce in-place op %d", (int)ops[o]);
    TIMED(what, collAllReduce(out, out, 3, collFloat32, ops[o], comm, NULL));
    CHECK_COPY();
    for (int k = 0; k < 4; k++) out[k] = -1.0f;
    snprintf(what, sizeof what, "1 rank: reduce op %d", (int)ops[o]);
    TIMED(what, collReduce(in, out, 3, collFloat32, ops[o], 0, comm, NULL));
    CHECK_COPY();
    for (int k = 0; k < 4; k++) out[k] = -1.0f;
    snprintf(what, sizeof what, "1 rank: reduce_scatter op %d", (int)ops[o]);
    TIMED(what, collReduceScatter(in, out, 3, collFloat32, ops[o], comm, NULL));
    CHECK_COPY();
  }
  for (int k = 0; k < 4; k++) out[k] = -1.0f;
  snprintf(what, sizeof what, "1 rank: allgather");
  TIMED(what, collAllGather(in, out, 3, collFloat32, comm, NULL));
  CHECK_COPY();
  for (int k = 0; k < 4; k++) out[k] = -1.0f;
  snprintf(what, sizeof what, "1 rank: broadcast");
  TIMED(what, collBroadcast(in, out, 3, collFloat32, 0, comm, NULL));
  CHECK_COPY();
  for (int k = 0; k < 4; k++) out[k] = -1.0f;
  snprintf(what, sizeof what, "1 rank: send/recv to self");
  SEM_OK(collGroupStart());
  SEM_OK(collSend(in, 3, collFloat32, 0, comm, NULL));
  SEM_OK(collRecv(out, 3, collFloat32, 0, comm, NULL));
  SEM_OK(collGroupEnd());
  CHECK_COPY();
  TIMED("1 rank: barrier", collBarrier(comm, NULL));
#undef CHECK_COPY
  return fails;
}

int main(int argc, char** argv) {
  int sizes[8] = {3, 4, 8, 1}, nsizes = 4;
  if (argc > 1) {
    nsizes = 0;
    for (int i = 1; i < argc && nsizes < 8; i++) sizes[nsizes++] = atoi(argv[i]);
  }
  int rc = 0;
  for (int i = 0; i < nsizes; i++) {
    int n = sizes[i];
    int r = collMpRun(n, 120, n == 1 ? oneRank : manyRanks, NULL);
    printf("BR-02 on %d rank(s): %s\n", n, r ? "FAILED" : "passed");
    rc |= r;
  }
  return rc;
}
