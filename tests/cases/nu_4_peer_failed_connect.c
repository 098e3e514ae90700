/*
 * nu_4_peer_failed_connect.c - new user's finding 4: the survivor of a
 * mismatched call that fails while connecting to a peer ("Broken pipe", the
 * peer already failed and closed everything) says that the peer failed and
 * why, when the peer's reason can be known here: the peer's call, which the
 * node's mailbox announces. 3 ranks (shared memory):
 *   count  rank 0 all-reduce of 2000 floats (its schedule), ranks 1-2 of 1000
 *          (the mailbox)
 *   fn     rank 0 broadcast of 2000 floats from root 0, ranks 1-2 all-reduce
 * Every rank's call fails within 10 s (COLL_TIMEOUT 20 s); no message is only
 * a transport error: each names the mismatch ("mismatched calls" and the
 * other call), or a peer that failed and what it called. Run 5 times per case
 * (which rank connects first is a race). Before the fix rank 0 said:
 * "rank 0: cannot connect to rank 1 on vm (channel 0): shm connect: sending
 * the connection descriptors failed: Broken pipe".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../integration/mp_harness.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int body(collComm_t comm, int rank, int nranks, void* arg) {
  (void)nranks;
  int fn = *(int*)arg;
  float a[4000] = {0}, b[4000];
  double t0 = now();
  collResult_t r;
  if (rank == 0)
    r = fn ? collBroadcast(a, b, 2000, collFloat, 0, comm, NULL) : collAllReduce(a, b, 2000, collFloat, collSum, comm, NULL);
  else
    r = collAllReduce(a, b, 1000, collFloat, collSum, comm, NULL);
  if (r == collSuccess) r = collAllReduce(a, b, 1, collFloat, collSum, comm, NULL); /* a root that only sent */
  const char* e = collGetLastError(NULL);
  const char* other = rank == 0 ? "all-reduce sum of 1000 x float32" : fn ? "broadcast of 2000" : "all-reduce sum of 2000";
  const char* self = rank == 0 ? (fn ? "broadcast of 2000" : "all-reduce sum of 2000") : "all-reduce sum of 1000";
  int named = strstr(e, other) && strstr(e, self);
  /* or, when the ranks meet in the mailbox before rank 0's root call is seen
   * as mismatched, its next call's own mismatch (timing decides which comes
   * first; both name the peer's call, neither is a bare "Broken pipe") */
  int nextNamed = strstr(e, "mismatched calls") && strstr(e, other);
  /* or, on ranks 1-2, rank 0's next call: a broadcast root that only sent
   * may finish and call the all-reduce of 1 before they look at the mailbox */
  if (rank != 0 && fn)
    nextNamed |= strstr(e, "mismatched calls") && strstr(e, "all-reduce sum of 1 x float32") && strstr(e, self);
  int ok = r != collSuccess && now() - t0 < 10 && (named || nextNamed || strstr(e, "communicator failed earlier"));
  printf("rank %d (%.2f s): %s %s\n", rank, now() - t0, e, ok ? "ok" : "FAILED");
  return !ok;
}

int main(void) {
  setenv("COLL_TIMEOUT", "20", 1);
  int f = 0;
  for (int fn = 0; fn < 2; fn++)
    for (int i = 0; i < 5; i++) f |= collMpRun(3, 60, body, &fn);
  printf("%s\n", f ? "FAIL" : "ok");
  return f;
}
