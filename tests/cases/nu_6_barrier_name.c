/*
 * nu_6_barrier_name.c - new user's finding 6: collBarrier is named "barrier"
 * in mismatch messages. Rank 0 calls collAllReduce of 1 float32 (sum), rank 1
 * collBarrier: both calls fail, and the messages name "barrier" and the
 * all-reduce, never "all-reduce max of 1 x uint8" (the barrier's
 * implementation). Before the fix: "rank 0 (vm) called all-reduce sum of 1 x
 * float32, this rank all-reduce max of 1 x uint8". Also: a barrier against
 * a user's all-reduce max of 1 x uint8 is a mismatch too (same data, other
 * call). Shared memory (mailbox) and TCP (nu_6_barrier_name.cmake).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../integration/mp_harness.h"

static int check(int rank, const char* what, collResult_t r, const char* other) {
  const char* e = collGetLastError(NULL);
  int ok = r == collInvalidUsage && strstr(e, "barrier") && strstr(e, other);
  printf("rank %d %s: %s: %s %s\n", rank, what, collGetErrorString(r), e, ok ? "ok" : "FAILED");
  return !ok;
}

static int body(collComm_t comm, int rank, int nranks, void* arg) {
  (void)nranks;
  const char* which = arg;
  float x = 1, y = 0;
  unsigned char u = 1, v = 0;
  collResult_t r;
  if (strcmp(which, "float") == 0) {
    r = rank == 0 ? collAllReduce(&x, &y, 1, collFloat32, collSum, comm, NULL) : collBarrier(comm, NULL);
    return check(rank, "all-reduce sum of 1 x float32 vs barrier", r, "all-reduce sum of 1 x float32");
  }
  r = rank == 0 ? collAllReduce(&u, &v, 1, collUint8, collMax, comm, NULL) : collBarrier(comm, NULL);
  return check(rank, "all-reduce max of 1 x uint8 vs barrier", r, "all-reduce max of 1 x uint8");
}

int main(void) {
  setenv("COLL_TIMEOUT", "20", 1);
  int f = collMpRun(2, 60, body, "float");
  f |= collMpRun(2, 60, body, "uint8");
  printf("%s\n", f ? "FAIL" : "ok");
  return f;
}
