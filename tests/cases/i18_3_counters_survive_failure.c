/*
 * i18_3_counters_survive_failure.c - issue 18, tests: counters survive a
 * failed communicator. 3 processes on shared memory run 5 all-reduces of
 * 1 KiB (the mailbox) and 2 of 256 KiB (schedules); then rank 2 exits
 * without a word and ranks 0 and 1 call one more all-reduce, which fails.
 * On the failed communicator the counters still read, and what was counted
 * before the failure is kept: every byte and message count is at least its
 * value before, the rows of the earlier calls are unchanged, one operation
 * is counted as failed, the mailbox traffic is exact (5 calls x 1024 bytes
 * to and from each peer), and the COLL_STATS_FILE written at destroy says
 * the same and that the communicator failed. The flight recorder keeps the
 * failed call as its last entry.
 * Before issue 18 there were no counters (the test did not build).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll.h"
#include "../integration/mp_harness.h"

#define N 3
#define SMALL 256      /* floats: 1 KiB, the mailbox */
#define LARGE 65536    /* floats: 256 KiB */

static char dir[64];

static int expect(int rank, const char* what, int ok) {
  if (!ok) printf("rank %d: FAILED: %s\n", rank, what);
  return !ok;
}

static int body(collComm_t comm, int rank, int n, void* arg) {
  (void)arg;
  static float in[LARGE], out[LARGE];
  for (int i = 0; i < 5; i++)
    if (collAllReduce(in, out, SMALL, collFloat, collSum, comm, NULL) != collSuccess) return 1;
  for (int i = 0; i < 2; i++)
    if (collAllReduce(in, out, LARGE, collFloat, collSum, comm, NULL) != collSuccess) return 1;
  collStats_t s0;
  collPeerStats_t p0[N];
  collCollStats_t r0[8];
  int n0 = 0;
  if (collCommGetStats(comm, &s0) || collCommGetPeerStats(comm, p0, n) || collCommGetCollStats(comm, r0, 8, &n0))
    return 1;
  int fails = 0;
  fails += expect(rank, "7 operations before the failure", s0.ops == 7 && s0.failedOps == 0);
  for (int p = 0; p < n; p++)
    if (p != rank) fails += expect(rank, "mailbox bytes per peer = 5 x 1024", p0[p].mailboxBytes == 5 * 1024);
  int mb = -1;
  for (int l = 0; l < s0.nlinks; l++)
    if (strcmp(s0.links[l].name, "mailbox") == 0) mb = l;
  fails += expect(rank, "link class mailbox: 5 x 1024 bytes to each of 2 peers",
                  mb >= 0 && s0.links[mb].bytesSent == 2 * 5 * 1024 && s0.links[mb].msgsSent == 2 * 5);
  if (collCommWriteStats(comm, NULL) != collSuccess) fails++; /* on demand, before the failure */
  if (rank == 2) {
    fflush(stdout);
    _exit(fails ? 1 : 0); /* leaves without destroying: its peers' next call fails */
  }
  collCommSetCallTimeout(comm, 20000);
  collResult_t r = collAllReduce(in, out, LARGE, collFloat, collSum, comm, NULL);
  fails += expect(rank, "the call after rank 2 left fails", r == collRemoteError || r == collTimeout);
  collStats_t s1;
  collPeerStats_t p1[N];
  collCollStats_t r1[8];
  int n1 = 0;
  fails += expect(rank, "collCommGetStats works on the failed communicator", collCommGetStats(comm, &s1) == collSuccess);
  fails += expect(rank, "collCommGetPeerStats works", collCommGetPeerStats(comm, p1, n) == collSuccess);
  fails += expect(rank, "collCommGetCollStats works", collCommGetCollStats(comm, r1, 8, &n1) == collSuccess);
  fails += expect(rank, "8 operations, 1 failed", s1.ops == 8 && s1.failedOps == 1);
  fails += expect(rank, "bytes kept", s1.bytesSent >= s0.bytesSent && s1.bytesRecv >= s0.bytesRecv);
  for (int p = 0; p < n; p++)
    fails += expect(rank, "per-peer counters kept",
                    p1[p].bytesSent >= p0[p].bytesSent && p1[p].bytesRecv >= p0[p].bytesRecv &&
                        p1[p].msgsSent >= p0[p].msgsSent && p1[p].mailboxBytes == p0[p].mailboxBytes);
  int failedRows = 0;
  for (int i = 0; i < n1 && i < 8; i++) {
    failedRows += (int)r1[i].failed;
    for (int j = 0; j < n0; j++)
      if (!strcmp(r1[i].coll, r0[j].coll) && !strcmp(r1[i].algo, r0[j].algo))
        fails += expect(rank, "rows of the earlier calls kept", r1[i].calls >= r0[j].calls && r1[i].bytes >= r0[j].bytes);
  }
  fails += expect(rank, "one row counts the failed call", failedRows == 1);
  collCallRecord_t rec[4];
  int nrec = 0;
  fails += expect(rank, "flight recorder readable", collCommGetCallRecords(comm, rec, 4, &nrec) == collSuccess);
  fails += expect(rank, "its last entry is the failed all-reduce, collective #7",
                  nrec == 4 && !strcmp(rec[3].state, "failed") && !strcmp(rec[3].coll, "all-reduce") &&
                      rec[3].seq == 7 && rec[3].count == LARGE && !strcmp(rec[2].state, "completed"));
  return fails; /* the harness destroys comm: COLL_STATS_FILE is written then */
}

static int fileHas(const char* path, const char* what) {
  FILE* f = fopen(path, "r");
  if (!f) return 0;
  static char buf[1 << 16];
  size_t k = fread(buf, 1, sizeof buf - 1, f);
  buf[k] = 0;
  fclose(f);
  return strstr(buf, what) != NULL;
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/coll_i18_3.%d", (int)getpid());
  char cmd[160], spec[128], path[160];
  snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
  if (system(cmd) != 0) return 1;
  snprintf(spec, sizeof spec, "%s/stats.%%r.json", dir);
  setenv("COLL_STATS_FILE", spec, 1);
  setenv("COLL_MAILBOX_BYTES", "4096", 1);
  int r = collMpRun(N, 120, body, NULL);
  /* rank 2 exits with its on-demand file; ranks 0, 1 rewrite theirs at destroy */
  int fails = r != 0;
  for (int k = 0; k < 2; k++) {
    snprintf(path, sizeof path, "%s/stats.%d.json", dir, k);
    if (!fileHas(path, "\"failed\":true") || !fileHas(path, "\"mailboxBytes\":5120") ||
        !fileHas(path, "\"failedOps\":1")) {
      printf("%s: does not say failed / mailbox bytes 5120 / failedOps 1\n", path);
      fails++;
    }
  }
  snprintf(path, sizeof path, "%s/stats.2.json", dir);
  if (!fileHas(path, "\"reason\":\"api\"") || !fileHas(path, "\"failed\":false")) {
    printf("%s: the on-demand file of rank 2 is missing or wrong\n", path);
    fails++;
  }
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fails++;
  printf("%s\n", fails ? "FAIL" : "PASS");
  return fails != 0;
}
