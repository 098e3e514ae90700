/*
 * BR-05: a reduce writes its result on the root only and never touches a
 * non-root rank's input (pytorch/pytorch#76527: Gloo's reduce to rank 0
 * left partial sums in rank 1's input tensor).
 *
 * 2 and 4 ranks, int64 sum, count 4, root 0 and root 1. 2 ranks: rank 0 =
 * [1, 2, 3, 4], rank 1 = [4, 5, 6, 7]; 4 ranks: rank r = [1+3r, ..., 4+3r].
 *  A: in place on every rank (sendbuff == recvbuff);
 *  B: out of place, non-root recvbuff pre-filled with -1.
 * Expected: root gets [5, 7, 9, 11] (4 ranks: [22, 26, 30, 34]); every
 * non-root input is bit-for-bit unchanged; in B the non-root recvbuff is
 * still all -1 and the root's sendbuff unchanged.
 * Extension: the same with count 262147 (2 MiB + 24 B: several slices over
 * several channels), element i of rank r = i + 1 + 3r, and root 3 on 4
 * ranks. ctest also runs it with each reduce algorithm forced
 * (br05_reduce_nonroot.cmake).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../integration/mp_harness.h"
#include "helper_sem.h"

#define BIG 262147

static int64_t input(int nranks, int rank, size_t i) {
  if (nranks == 2 && i < 4) return rank == 0 ? (int64_t)i + 1 : (int64_t)i + 4;
  return (int64_t)i + 1 + 3 * rank;
}

static int body(collComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  int fails = 0;
  static const size_t counts[] = {4, BIG};
  int64_t* in = malloc(sizeof(int64_t) * BIG);
  int64_t* keep = malloc(sizeof(int64_t) * BIG);
  int64_t* out = malloc(sizeof(int64_t) * BIG);
  if (!in || !keep || !out) {
    fprintf(stderr, "rank %d: out of memory\n", rank);
    free(in), free(keep), free(out);
    return 1;
  }
  int roots[3] = {0, 1, nranks - 1};
  int nroots = nranks > 2 ? 3 : 2;
  for (int ri = 0; ri < nroots; ri++) {
    int root = roots[ri];
    for (int ci = 0; ci < 2; ci++) {
      size_t n = counts[ci];
      for (int variant = 0; variant < 2; variant++) {
        const char* vn = variant == 0 ? "A (in place)" : "B (out of place)";
        for (size_t i = 0; i < n; i++) in[i] = input(nranks, rank, i);
        memcpy(keep, in, n * sizeof(int64_t));
        for (size_t i = 0; i < n; i++) out[i] = -1;
        int64_t* recv = variant == 0 ? in : out;
        SEM_OK(collReduce(in, recv, n, collInt64, collSum, root, comm, NULL));
        if (rank == root) {
          int bad = 0;
          for (size_t i = 0; i < n; i++) {
            int64_t exp = 0;
            for (int r = 0; r < nranks; r++) exp += input(nranks, r, i);
            if (recv[i] != exp && bad++ < 3)
              SEM_CHECK(0, "%s root %d count %zu: element %zu = %" PRId64 ", expected %" PRId64, vn, root, n, i,
                        recv[i], exp);
          }
          SEM_CHECK(bad == 0, "%s root %d count %zu: %d wrong elements on the root", vn, root, n, bad);
          if (n == 4 && nranks == 2)
            SEM_CHECK(recv[0] == 5 && recv[1] == 7 && recv[2] == 9 && recv[3] == 11,
                      "root got [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]", recv[0], recv[1], recv[2],
                      recv[3]);
          if (variant == 1)
            SEM_CHECK(memcmp(in, keep, n * sizeof(int64_t)) == 0, "%s root %d count %zu: root's sendbuff changed",
                      vn, root, n);
        } else {
          SEM_CHECK(memcmp(in, keep, n * sizeof(int64_t)) == 0,
                    "%s root %d count %zu: non-root input changed (first element %" PRId64 ", was %" PRId64 ")", vn,
                    root, n, in[0], keep[0]);
          if (variant == 1) {
            size_t i = 0;
            while (i < n && out[i] == -1) i++;
            SEM_CHECK(i == n, "%s root %d count %zu: non-root recvbuff written at element %zu", vn, root, n, i);
          }
        }
      }
    }
  }
  free(in);
  free(keep);
  free(out);
  return fails;
}

int main(void) {
  int rc = 0;
  for (int n = 2; n <= 4; n += 2) {
    int r = collMpRun(n, 120, body, NULL);
    printf("BR-05 reduce leaves non-root buffers alone, %d ranks: %s\n", n, r ? "FAILED" : "passed");
    rc |= r;
  }
  return rc;
}
