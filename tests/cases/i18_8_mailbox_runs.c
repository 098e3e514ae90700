/*
 * i18_8_mailbox_runs.c - issue 18: the counters' cheap path (equal mailbox
 * calls counted as one run, its record and counters written when it ends)
 * keeps every number exact. 2 processes on shared memory issue, through the
 * mailbox: 100 all-reduces of 2 floats, a barrier, 3 all-reduces of 1 uint8
 * with max (the barrier's own count, type and op), a barrier, 2 more of
 * those, 50 all-gathers of 2 floats, 10 all-reduces of 2 floats (167 calls).
 * Then: the rows per (collective, algorithm) count exactly those calls and
 * bytes (barriers apart from the equal all-reduces), the flight recorder
 * lists the 167 calls one by one in order (collective numbers 0..166, all
 * completed: none shown running while the rank is idle), and so does the
 * JSON dump. Then rank 1 exits without a word and rank 0 issues one more
 * all-reduce equal to the last ten (a call of the open run): it fails, and
 * is counted as failed, last in the flight recorder as "failed", #167.
 * Then the same on a communicator of one rank (its calls run the tuner's
 * schedule alone, counted as runs too): 300 all-reduces of 2 floats, 2
 * broadcasts of 3 ints, 10 all-reduces: the rows count 310 and 2 calls with
 * their bytes, the flight recorder's newest 256 are #56..#311 in order,
 * completed, with the algorithm of their row.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll.h"
#include "../integration/mp_harness.h"

#define N 2

static char dir[64];

static int expect(int rank, const char* what, int ok) {
  if (!ok) printf("rank %d: FAILED: %s\n", rank, what);
  return !ok;
}

static const collCollStats_t* row(const collCollStats_t* rows, int n, const char* coll, const char* algo) {
  for (int i = 0; i < n; i++)
    if (!strcmp(rows[i].coll, coll) && !strcmp(rows[i].algo, algo)) return &rows[i];
  return NULL;
}

/* The collective of call number i of the sequence. */
static const char* want(int i) {
  if (i < 100) return "all-reduce";
  if (i == 100 || i == 104) return "barrier";
  if (i < 107) return "all-reduce";
  if (i < 157) return "all-gather";
  return "all-reduce";
}

static int body(collComm_t comm, int rank, int n, void* arg) {
  (void)arg;
  (void)n;
  float f[2] = {1, 2}, g[4];
  uint8_t b = (uint8_t)rank, c = 0;
  int bad = 0;
  for (int i = 0; i < 100; i++) bad |= collAllReduce(f, g, 2, collFloat, collSum, comm, NULL);
  bad |= collBarrier(comm, NULL);
  for (int i = 0; i < 3; i++) bad |= collAllReduce(&b, &c, 1, collUint8, collMax, comm, NULL);
  bad |= collBarrier(comm, NULL);
  for (int i = 0; i < 2; i++) bad |= collAllReduce(&b, &c, 1, collUint8, collMax, comm, NULL);
  for (int i = 0; i < 50; i++) bad |= collAllGather(f, g, 2, collFloat, comm, NULL);
  for (int i = 0; i < 10; i++) bad |= collAllReduce(f, g, 2, collFloat, collSum, comm, NULL);
  if (bad) return 1;
  int fails = expect(rank, "results", g[0] == 2 && g[1] == 4 && c == 1);
  collStats_t s;
  collCollStats_t rows[16];
  int nrows = 0;
  if (collCommGetStats(comm, &s) || collCommGetCollStats(comm, rows, 16, &nrows)) return 1;
  fails += expect(rank, "167 operations, none failed", s.ops == 167 && s.failedOps == 0);
  const collCollStats_t* ar = row(rows, nrows, "all-reduce", "mailbox");
  const collCollStats_t* ba = row(rows, nrows, "barrier", "mailbox");
  const collCollStats_t* ag = row(rows, nrows, "all-gather", "mailbox");
  fails += expect(rank, "3 rows", nrows == 3);
  fails += expect(rank, "all-reduce: 115 calls, 885 bytes", ar && ar->calls == 115 && ar->bytes == 110 * 8 + 5);
  fails += expect(rank, "barrier: 2 calls, 2 bytes", ba && ba->calls == 2 && ba->bytes == 2);
  fails += expect(rank, "all-gather: 50 calls, 400 bytes", ag && ag->calls == 50 && ag->bytes == 400);
  fails += expect(rank, "timed calls: at least the first, at most one in 256 after it",
                  ar && ag && ba && ar->timedCalls + ag->timedCalls + ba->timedCalls >= 1 &&
                      ar->timedCalls + ag->timedCalls + ba->timedCalls <= 1 + 167 / 256);
  collPeerStats_t p[N];
  if (collCommGetPeerStats(comm, p, N)) return 1;
  fails += expect(rank, "mailbox bytes to the peer: 885 + 2 + 400",
                  p[1 - rank].mailboxBytes == 1287 && p[1 - rank].msgsSent == 167);
  static collCallRecord_t rec[300];
  int k = 0;
  if (collCommGetCallRecords(comm, rec, 300, &k)) return 1;
  fails += expect(rank, "167 records", k == 167);
  for (int i = 0; i < k && i < 167; i++) {
    int ok = rec[i].seq == (uint64_t)i && !strcmp(rec[i].coll, want(i)) && !strcmp(rec[i].algo, "mailbox") &&
             !strcmp(rec[i].state, "completed") && rec[i].peer == -1;
    if (ok && !strcmp(want(i), "all-reduce"))
      ok = (i >= 101 && i < 107) ? rec[i].count == 1 && rec[i].datatype == collUint8 && rec[i].op == collMax
                                 : rec[i].count == 2 && rec[i].datatype == collFloat && rec[i].op == collSum;
    if (!ok) {
      printf("rank %d: record %d: seq %llu %s %s %s count %zu\n", rank, i, (unsigned long long)rec[i].seq,
             rec[i].coll, rec[i].algo, rec[i].state, rec[i].count);
      fails++;
      break;
    }
  }
  int m = 0;
  if (collCommGetCallRecords(comm, rec, 5, &m)) return 1;
  fails += expect(rank, "the newest 5 of them", m == 5 && rec[0].seq == 162 && rec[4].seq == 166);
  char path[128];
  snprintf(path, sizeof path, "%s/fr.%d.json", dir, rank);
  fails += expect(rank, "dump", collCommDumpFlightRecorder(comm, path) == collSuccess);
  if (rank == 1) {
    fflush(stdout);
    _exit(fails ? 1 : 0); /* leaves without destroying: rank 0's next call fails */
  }
  collCommSetCallTimeout(comm, 20000);
  collResult_t r = collAllReduce(f, g, 2, collFloat, collSum, comm, NULL);
  fails += expect(rank, "the call after rank 1 left fails", r == collRemoteError || r == collTimeout);
  if (collCommGetStats(comm, &s) || collCommGetCollStats(comm, rows, 16, &nrows)) return 1;
  ar = row(rows, nrows, "all-reduce", "mailbox");
  fails += expect(rank, "168 operations, 1 failed", s.ops == 168 && s.failedOps == 1);
  fails += expect(rank, "all-reduce: 116 calls, 1 failed", ar && ar->calls == 116 && ar->failed == 1);
  if (collCommGetCallRecords(comm, rec, 300, &k)) return 1;
  fails += expect(rank, "168 records, the last failed (#167), the one before completed",
                  k == 168 && rec[167].seq == 167 && !strcmp(rec[167].state, "failed") &&
                      !strcmp(rec[167].coll, "all-reduce") && !strcmp(rec[166].state, "completed"));
  return fails;
}

static int solo(collComm_t comm, int rank, int n, void* arg) {
  (void)arg;
  (void)n;
  float f[2] = {1, 2}, g[2];
  int b[3] = {1, 2, 3}, c[3];
  int bad = 0;
  for (int i = 0; i < 300; i++) bad |= collAllReduce(f, g, 2, collFloat, collSum, comm, NULL);
  for (int i = 0; i < 2; i++) bad |= collBroadcast(b, c, 3, collInt32, 0, comm, NULL);
  for (int i = 0; i < 10; i++) bad |= collAllReduce(f, g, 2, collFloat, collSum, comm, NULL);
  if (bad) return 1;
  collCollStats_t rows[16];
  int nrows = 0;
  if (collCommGetCollStats(comm, rows, 16, &nrows)) return 1;
  int fails = expect(rank, "one rank: 2 rows", nrows == 2);
  const collCollStats_t* ar = NULL;
  const collCollStats_t* bc = NULL;
  for (int i = 0; i < nrows; i++) {
    if (!strcmp(rows[i].coll, "all-reduce")) ar = &rows[i];
    if (!strcmp(rows[i].coll, "broadcast")) bc = &rows[i];
  }
  fails += expect(rank, "one rank: all-reduce 310 calls, 2480 bytes", ar && ar->calls == 310 && ar->bytes == 2480);
  fails += expect(rank, "one rank: broadcast 2 calls, 24 bytes", bc && bc->calls == 2 && bc->bytes == 24);
  static collCallRecord_t rec[300];
  int k = 0;
  if (collCommGetCallRecords(comm, rec, 300, &k)) return 1;
  fails += expect(rank, "one rank: 256 records", k == 256);
  for (int i = 0; i < k && ar && bc; i++) {
    uint64_t seq = 56 + (uint64_t)i;
    const collCollStats_t* w = seq == 300 || seq == 301 ? bc : ar;
    if (rec[i].seq != seq || strcmp(rec[i].coll, w->coll) || strcmp(rec[i].algo, w->algo) ||
        strcmp(rec[i].state, "completed") || rec[i].peer != (w == bc ? 0 : -1)) {
      printf("one rank: record %d: seq %llu %s %s %s peer %d\n", i, (unsigned long long)rec[i].seq, rec[i].coll,
             rec[i].algo, rec[i].state, rec[i].peer);
      fails++;
      break;
    }
  }
  return fails;
}

static int count(const char* path, const char* what) {
  FILE* f = fopen(path, "r");
  if (!f) return -1;
  static char buf[1 << 17];
  size_t k = fread(buf, 1, sizeof buf - 1, f);
  buf[k] = 0;
  fclose(f);
  int n = 0;
  for (const char* p = buf; (p = strstr(p, what)); p++) n++;
  return n;
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/coll_i18_8.%d", (int)getpid());
  char cmd[160], path[160];
  snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
  if (system(cmd) != 0) return 1;
  int fails = collMpRun(N, 120, body, NULL) != 0;
  for (int r = 0; r < N; r++) {
    snprintf(path, sizeof path, "%s/fr.%d.json", dir, r);
    int done = count(path, "\"state\":\"completed\""), run = count(path, "\"state\":\"running\"");
    int bar = count(path, "\"coll\":\"barrier\""), ag = count(path, "\"coll\":\"all-gather\"");
    if (done != 167 || run != 0 || bar != 2 || ag != 50 || count(path, "\"collSeq\":167,") != 1) {
      printf("%s: %d completed (want 167), %d running (0), %d barriers (2), %d all-gathers (50)\n", path, done,
             run, bar, ag);
      fails++;
    }
  }
  fails += collMpRun(1, 60, solo, NULL) != 0;
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fails++;
  printf("%s\n", fails ? "FAIL" : "PASS");
  return fails != 0;
}
