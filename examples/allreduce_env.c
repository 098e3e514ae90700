/*
 * allreduce_env.c - the smallest coll program: run it under a launcher
 * (torchrun-style RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, mpirun, srun).
 * Every rank contributes rank+1 to each of 1024 floats; each element of the
 * result must equal nranks*(nranks+1)/2.
 */
#include <coll.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
  collComm_t comm;
  collResult_t r = collCommInitFromEnv(&comm, NULL);
  if (r != collSuccess) {
    fprintf(stderr, "init: %s: %s\n", collGetErrorString(r), collGetLastError(NULL));
    return 1;
  }
  int rank, nranks;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &nranks);
  enum { N = 1024 };
  float* x = malloc(N * sizeof *x);
  for (int i = 0; i < N; i++) x[i] = (float)(rank + 1);
  r = collAllReduce(x, x, N, collFloat, collSum, comm, NULL); /* in place */
  int wrong = 0;
  for (int i = 0; i < N; i++) wrong += x[i] != (float)(nranks * (nranks + 1) / 2);
  if (r != collSuccess) fprintf(stderr, "allreduce: %s\n", collGetLastError(comm));
  else printf("rank %d of %d: sum %.0f, %d wrong\n", rank, nranks, x[0], wrong);
  collCommDestroy(comm);
  free(x);
  return r != collSuccess || wrong;
}
