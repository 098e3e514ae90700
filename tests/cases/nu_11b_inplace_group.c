/*
 * A group whose send and receive use the very same range (an in-place
 * all-to-all: the send to peer p and the receive from p at one offset; a
 * swap between two ranks) delivers the peer's data exactly. Before, the
 * receive overwrote bytes its send had not read yet: 2 ranks swapping
 * 8 M floats got 2.9 M and 3.1 M wrong elements, silently. The engine now
 * sends such ranges from a copy (src/engine/p2p.c); partial overlaps stay
 * refused (cases.nu_11_overlap).
 *
 * 3 ranks; A: each rank swaps 8 M float32 with its neighbour in place;
 * B: an in-place all-to-all of 3 x 1 M float32 (chunk p goes to and comes
 * from rank p). Every element is checked. Run over shm and (.cmake) tcp.
 */
#include <stdio.h>
#include <stdlib.h>

#include "../integration/mp_harness.h"

#define SWAP_N (8u << 20)
#define A2A_N (1u << 20)

static float val(int from, int to, size_t i) { return (float)(from * 4 + to) * 1048576.0f + (float)(i % 1048576); }

static int body(collComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  int fails = 0;
  float* b = malloc(sizeof(float) * (size_t)SWAP_N * 3);
  if (!b) return 1;
  /* A: rank r swaps with r ^ 1 (rank 2 sits out when nranks is odd) */
  int peer = rank ^ 1;
  if (peer < nranks) {
    for (size_t i = 0; i < SWAP_N; i++) b[i] = val(rank, peer, i);
    collGroupStart();
    collSend(b, SWAP_N, collFloat32, peer, comm, NULL);
    collRecv(b, SWAP_N, collFloat32, peer, comm, NULL);
    collResult_t r = collGroupEnd();
    if (r != collSuccess) {
      fprintf(stderr, "rank %d: swap: %s\n", rank, collGetLastError(comm));
      fails++;
    } else {
      size_t bad = 0;
      for (size_t i = 0; i < SWAP_N; i++) bad += b[i] != val(peer, rank, i);
      if (bad) fprintf(stderr, "FAIL rank %d: swap with rank %d: %zu of %u elements wrong\n", rank, peer, bad, SWAP_N);
      fails += bad != 0;
    }
  }
  /* B: in-place all-to-all */
  for (int p = 0; p < nranks; p++)
    for (size_t i = 0; i < A2A_N; i++) b[(size_t)p * A2A_N + i] = val(rank, p, i);
  collGroupStart();
  for (int p = 0; p < nranks; p++) {
    collSend(b + (size_t)p * A2A_N, A2A_N, collFloat32, p, comm, NULL);
    collRecv(b + (size_t)p * A2A_N, A2A_N, collFloat32, p, comm, NULL);
  }
  collResult_t r = collGroupEnd();
  if (r != collSuccess) {
    fprintf(stderr, "rank %d: all-to-all: %s\n", rank, collGetLastError(comm));
    fails++;
  } else {
    size_t bad = 0;
    for (int p = 0; p < nranks; p++)
      for (size_t i = 0; i < A2A_N; i++) bad += b[(size_t)p * A2A_N + i] != val(p, rank, i);
    if (bad) fprintf(stderr, "FAIL rank %d: in-place all-to-all: %zu elements wrong\n", rank, bad);
    fails += bad != 0;
  }
  free(b);
  return fails;
}

int main(void) {
  int r = collMpRun(3, 120, body, NULL);
  printf("nu_11b_inplace_group: %s\n", r == 0 ? "passed" : "FAILED");
  return r == 0 ? 0 : 1;
}
