/*
 * BR-21: an all-to-all built from grouped send/recv where many pairs
 * exchange zero elements keeps working for thousands of iterations
 * (NVIDIA/nccl#695: it hung after a few thousand, a size miscalculation for
 * zero-byte send/recv).
 *
 * 4 ranks, int32, 3000 iterations k. Each iteration one group: for every
 * peer j including self, rank i sends c(i,j,k) = ((i + 2j + k) mod 4) * 1024
 * elements to j and receives c(j,i,k) from j. Rank i's block for j holds
 * 1000i + 10j + (k mod 10); receive regions start at -1.
 *  A: send/recv are called even when the count is 0;
 *  B: zero-count calls are skipped (both sides skip the same pairs).
 * Expected: all 3000 iterations of both variants complete (under 120 s in
 * all); the block from j holds exactly c(j,i,k) elements, all 1000j + 10i +
 * (k mod 10); the rest of its region (all of it for a zero count) stays -1.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../integration/mp_harness.h"
#include "helper_sem.h"

#define NR 4
#define ITERS 3000
#define BLOCK (3 * 1024) /* the largest count */
#define LIMIT_S 120.0

static size_t countOf(int i, int j, int k) { return (size_t)((i + 2 * j + k) % 4) * 1024; }

static int body(collComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  int fails = 0;
  if (nranks != NR) return 1;
  int32_t* sendb = malloc(sizeof(int32_t) * NR * BLOCK);
  int32_t* recvb = malloc(sizeof(int32_t) * NR * BLOCK);
  if (!sendb || !recvb) {
    free(sendb);
    free(recvb);
    return 1;
  }
  double t0 = semNow();
  for (int variant = 0; variant < 2 && !fails; variant++) {
    double tv = semNow();
    for (int k = 0; k < ITERS && !fails; k++) {
      for (int j = 0; j < NR; j++) {
        int32_t v = 1000 * rank + 10 * j + k % 10;
        size_t c = countOf(rank, j, k);
        for (size_t e = 0; e < c; e++) sendb[j * BLOCK + e] = v;
      }
      for (size_t e = 0; e < (size_t)NR * BLOCK; e++) recvb[e] = -1;
      SEM_OK(collGroupStart());
      for (int j = 0; j < NR; j++) {
        size_t cs = countOf(rank, j, k), cr = countOf(j, rank, k);
        if (variant == 0 || cs) SEM_OK(collSend(sendb + j * BLOCK, cs, collInt32, j, comm, NULL));
        if (variant == 0 || cr) SEM_OK(collRecv(recvb + j * BLOCK, cr, collInt32, j, comm, NULL));
      }
      SEM_OK(collGroupEnd());
      for (int j = 0; j < NR; j++) {
        size_t cr = countOf(j, rank, k);
        int32_t v = 1000 * j + 10 * rank + k % 10;
        size_t bad = 0, past = 0;
        for (size_t e = 0; e < cr; e++) bad += recvb[j * BLOCK + e] != v;
        for (size_t e = cr; e < BLOCK; e++) past += recvb[j * BLOCK + e] != -1;
        SEM_CHECK(bad == 0, "variant %c iteration %d: %zu of %zu elements from rank %d wrong (first %d, expected %d)",
                  'A' + variant, k, bad, cr, j, cr ? recvb[j * BLOCK] : 0, v);
        SEM_CHECK(past == 0, "variant %c iteration %d: %zu elements written past the %zu from rank %d", 'A' + variant,
                  k, past, cr, j);
      }
      if (semNow() - t0 > LIMIT_S) {
        SEM_CHECK(0, "variant %c: %d iterations took more than %.0f s", 'A' + variant, k + 1, LIMIT_S);
        break;
      }
    }
    if (rank == 0) printf("variant %c: %d iterations in %.2f s\n", 'A' + variant, ITERS, semNow() - tv);
  }
  free(sendb);
  free(recvb);
  return fails;
}

int main(void) {
  int rc = collMpRun(NR, 200, body, NULL);
  printf("BR-21 all-to-all with zero-count pairs, 4 ranks x 3000 iterations x 2 variants: %s\n",
         rc ? "FAILED" : "passed");
  return rc;
}
