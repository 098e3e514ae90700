/*
 * BR-33: one group holding point-to-point operations on seven
 * communicators, and seven messages to one peer on one communicator
 * (pytorch/pytorch#50092: with 100,000-element tensors on seven process
 * groups in one batch_isend_irecv, the receiver got wrong data).
 *
 * 2 ranks, float32, 10 iterations of each part, each under 10 s:
 *  A. communicators C0..C6 over the same two ranks; in one group rank 0
 *     sends buf_j (N elements, buf_j[i] = 1e6*j + i) on Cj for j = 0..6,
 *     and rank 1 posts the receives on Cj in the order j = 6..0, into
 *     buffers pre-filled with -1; N = 10, 100,000 and 1,000,000.
 *  B. one communicator; in one group rank 0 sends seven messages of counts
 *     10, 100000, 1, 0, 65537, 100000, 3 (message m: 1e6*m + i) and rank 1
 *     posts seven receives of the same counts in the same order.
 *  C. as B, with both ranks sending seven and receiving seven in one group.
 * Expected: no error; every element exact (all values are integers below
 * 2^24); message m lands in receive m (messages to one peer on one
 * communicator match in posting order); the zero-count receive leaves its
 * -1 sentinel alone, and no receive writes past its count.
 */
#include <stdio.h>
#include <stdlib.h>

#include "../integration/mp_harness.h"
#include "helper_sem.h"

#define NCOMM 7
#define ITERS 10
#define LIMIT_S 10.0
#define MAXN 1000000

static const size_t kCountsB[NCOMM] = {10, 100000, 1, 0, 65537, 100000, 3};

static void fill(float* b, size_t n, int m) {
  for (size_t i = 0; i < n; i++) b[i] = (float)(1e6 * m + (double)i);
}

/* Checks n elements of message m and the -1 sentinel after them. */
static int checkMsg(const float* b, size_t n, int m, int rank, const char* what) {
  int fails = 0;
  size_t bad = 0, first = n;
  for (size_t i = 0; i < n; i++)
    if (b[i] != (float)(1e6 * m + (double)i)) {
      if (!bad) first = i;
      bad++;
    }
  SEM_CHECK(bad == 0, "%s message %d: %zu of %zu elements wrong, first at %zu (%.1f, expected %.1f)", what, m, bad,
            n, first, first < n ? (double)b[first] : 0.0, first < n ? 1e6 * m + (double)first : 0.0);
  SEM_CHECK(b[n] == -1.0f, "%s message %d: element %zu past the count was written (%.1f)", what, m, n,
            (double)b[n]);
  return fails;
}

static int body(collComm_t world, int rank, int nranks, void* arg) {
  (void)arg;
  (void)nranks;
  int fails = 0, peer = 1 - rank;
  collComm_t c[NCOMM];
  float* sbuf[NCOMM];
  float* rbuf[NCOMM];
  for (int j = 0; j < NCOMM; j++) {
    if (!SEM_OK(collCommSplit(world, 0, rank, &c[j], NULL))) return fails;
    sbuf[j] = malloc(sizeof(float) * (MAXN + 1));
    rbuf[j] = malloc(sizeof(float) * (MAXN + 1));
    if (!sbuf[j] || !rbuf[j]) {
      fprintf(stderr, "rank %d: out of memory\n", rank);
      return fails + 1;
    }
  }
  /* A: seven communicators, receives posted in the opposite order */
  static const size_t kN[] = {10, 100000, MAXN};
  for (int ni = 0; ni < 3 && !fails; ni++) {
    size_t n = kN[ni];
    for (int j = 0; j < NCOMM; j++) fill(sbuf[j], n, j);
    double worst = 0;
    for (int it = 0; it < ITERS && !fails; it++) {
      for (int j = 0; j < NCOMM; j++)
        for (size_t i = 0; i <= n; i++) rbuf[j][i] = -1.0f;
      double t0 = semNow();
      SEM_OK(collGroupStart());
      for (int k = 0; k < NCOMM; k++) {
        if (rank == 0) SEM_OK(collSend(sbuf[k], n, collFloat32, 1, c[k], NULL));
        else SEM_OK(collRecv(rbuf[NCOMM - 1 - k], n, collFloat32, 0, c[NCOMM - 1 - k], NULL));
      }
      SEM_OK(collGroupEnd());
      double dt = semNow() - t0;
      if (dt > worst) worst = dt;
      SEM_CHECK(dt < LIMIT_S, "A N=%zu iteration %d took %.2f s", n, it, dt);
      if (rank == 1)
        for (int j = 0; j < NCOMM; j++) fails += checkMsg(rbuf[j], n, j, rank, "A");
    }
    if (rank == 0) printf("A: 7 communicators, N=%zu: %d iterations, slowest %.3f s\n", n, ITERS, worst);
  }
  /* B: seven messages of different counts from rank 0 to rank 1 on C0;
   * C: both directions at once. */
  for (int part = 0; part < 2 && !fails; part++) {
    const char* name = part == 0 ? "B" : "C";
    for (int m = 0; m < NCOMM; m++) fill(sbuf[m], kCountsB[m], m);
    double worst = 0;
    for (int it = 0; it < ITERS && !fails; it++) {
      for (int m = 0; m < NCOMM; m++)
        for (size_t i = 0; i <= kCountsB[m]; i++) rbuf[m][i] = -1.0f;
      double t0 = semNow();
      SEM_OK(collGroupStart());
      for (int m = 0; m < NCOMM; m++) {
        if (rank == 0 || part == 1) SEM_OK(collSend(sbuf[m], kCountsB[m], collFloat32, peer, world, NULL));
        if (rank == 1 || part == 1) SEM_OK(collRecv(rbuf[m], kCountsB[m], collFloat32, peer, world, NULL));
      }
      SEM_OK(collGroupEnd());
      double dt = semNow() - t0;
      if (dt > worst) worst = dt;
      SEM_CHECK(dt < LIMIT_S, "%s iteration %d took %.2f s", name, it, dt);
      if (rank == 1 || part == 1)
        for (int m = 0; m < NCOMM; m++) fails += checkMsg(rbuf[m], kCountsB[m], m, rank, name);
    }
    if (rank == 0) printf("%s: 7 messages on one communicator: %d iterations, slowest %.3f s\n", name, ITERS, worst);
  }
  for (int j = 0; j < NCOMM; j++) {
    SEM_OK(collCommDestroy(c[j]));
    free(sbuf[j]);
    free(rbuf[j]);
  }
  return fails;
}

int main(void) {
  int rc = collMpRun(2, 200, body, NULL);
  printf("BR-33 grouped send/recv over 7 communicators and 7 messages: %s\n", rc ? "FAILED" : "passed");
  return rc;
}
