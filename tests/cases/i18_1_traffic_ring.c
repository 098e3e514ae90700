/*
 * i18_1_traffic_ring.c - issue 18, tests: the traffic counters equal the
 * schedule's own arithmetic. Ring (COLL_ALGO, one channel, 4 processes on
 * shared memory):
 *  - all-reduce of B bytes: each rank sends 2(n-1)/n x B to its successor,
 *    in 2(n-1) messages, receives as much from its predecessor, and nothing
 *    to or from the other ranks;
 *  - all-gather of B bytes per rank: (n-1) x B to the successor;
 *  - reduce-scatter of B bytes per rank: (n-1) x B to the successor;
 * and the per (collective, algorithm) rows count each call and its bytes.
 * Before issue 18 there were no counters (collCommGetPeerStats did not
 * exist): the test did not build.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "../integration/mp_harness.h"

#define N 4
#define COUNT (N * 3000) /* floats: 48000 bytes, one slice, past the mailbox */

static int check(int rank, const char* what, unsigned long long got, unsigned long long want) {
  if (got == want) return 0;
  printf("rank %d: %s = %llu, want %llu\n", rank, what, got, want);
  return 1;
}

/* The peer counters of this rank against the expected bytes to the
 * successor (and from the predecessor), zero elsewhere. */
static int checkRing(collComm_t comm, int rank, int n, const collPeerStats_t* before, unsigned long long bytes,
                     unsigned long long msgs, const char* what) {
  collPeerStats_t now[N];
  int fails = 0;
  if (collCommGetPeerStats(comm, now, n) != collSuccess) return 1;
  int succ = (rank + 1) % n, pred = (rank + n - 1) % n;
  char buf[160];
  for (int p = 0; p < n; p++) {
    unsigned long long sent = now[p].bytesSent - before[p].bytesSent, recv = now[p].bytesRecv - before[p].bytesRecv;
    unsigned long long ms = now[p].msgsSent - before[p].msgsSent, mr = now[p].msgsRecv - before[p].msgsRecv;
    snprintf(buf, sizeof buf, "%s: bytes sent to rank %d", what, p);
    fails += check(rank, buf, sent, p == succ ? bytes : 0);
    snprintf(buf, sizeof buf, "%s: bytes received from rank %d", what, p);
    fails += check(rank, buf, recv, p == pred ? bytes : 0);
    snprintf(buf, sizeof buf, "%s: messages sent to rank %d", what, p);
    fails += check(rank, buf, ms, p == succ ? msgs : 0);
    snprintf(buf, sizeof buf, "%s: messages received from rank %d", what, p);
    fails += check(rank, buf, mr, p == pred ? msgs : 0);
  }
  if (strcmp(now[succ].link, "shm") != 0) {
    printf("rank %d: link to rank %d is \"%s\", want shm\n", rank, succ, now[succ].link);
    fails++;
  }
  if (rank == 0 && fails == 0)
    printf("%s: %llu bytes to the successor in %llu messages, as the schedule says\n", what, bytes, msgs);
  return fails;
}

static int body(collComm_t comm, int rank, int n, void* arg) {
  (void)arg;
  float* in = calloc((size_t)COUNT * n, sizeof(float));
  float* out = calloc((size_t)COUNT * n, sizeof(float));
  collPeerStats_t before[N];
  int fails = 0;
  const unsigned long long B = COUNT * sizeof(float);
  if (!in || !out) return 1;
  collCommGetPeerStats(comm, before, n);
  if (collAllReduce(in, out, COUNT, collFloat, collSum, comm, NULL) != collSuccess) return 1;
  fails += checkRing(comm, rank, n, before, 2ull * (n - 1) * B / n, 2ull * (n - 1), "all-reduce");
  collCommGetPeerStats(comm, before, n);
  if (collAllGather(in, out, COUNT, collFloat, comm, NULL) != collSuccess) return 1;
  fails += checkRing(comm, rank, n, before, (n - 1) * B, n - 1, "all-gather");
  collCommGetPeerStats(comm, before, n);
  if (collReduceScatter(in, out, COUNT, collFloat, collSum, comm, NULL) != collSuccess) return 1;
  fails += checkRing(comm, rank, n, before, (n - 1) * B, n - 1, "reduce-scatter");
  /* the rows: one call each, bytes as passed, timed */
  collCollStats_t rows[16];
  int nrows = 0;
  if (collCommGetCollStats(comm, rows, 16, &nrows) != collSuccess) return 1;
  fails += check(rank, "rows", (unsigned long long)nrows, 3);
  for (int i = 0; i < nrows && i < 16; i++) {
    fails += check(rank, "row algorithm is ring", strcmp(rows[i].algo, "ring") == 0, 1);
    fails += check(rank, "row calls", rows[i].calls, 1);
    fails += check(rank, "row timed calls", rows[i].timedCalls, 1);
    fails += check(rank, "row bytes", rows[i].bytes, B);
    fails += check(rank, "row has a duration", rows[i].timeNs > 0, 1);
  }
  collStats_t s;
  if (collCommGetStats(comm, &s) != collSuccess) return 1;
  fails += check(rank, "ops", s.ops, 3);
  fails += check(rank, "total bytes sent", s.bytesSent, 2ull * (n - 1) * B / n + 2 * (n - 1) * B);
  fails += check(rank, "links", (unsigned long long)s.nlinks, 1);
  fails += check(rank, "link shm bytes sent", s.links[0].bytesSent, s.bytesSent);
  free(in);
  free(out);
  return fails;
}

int main(void) {
  setenv("COLL_ALGO", "allreduce:ring;allgather:ring;reducescatter:ring", 1);
  setenv("COLL_NCHANNELS", "1", 1);
  int r = collMpRun(N, 120, body, NULL);
  printf("%s\n", r == 0 ? "PASS" : "FAIL");
  return r;
}
