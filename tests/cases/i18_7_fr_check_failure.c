/*
 * i18_7_fr_check_failure.c - issue 18, flight recorder and counters of a
 * collective that fails before its algorithm is chosen. The record of a
 * collective is written once its algorithm is known (the cheap mailbox
 * path writes it in one go); one that fails earlier, in the COLL_CHECK=1
 * signature check, must still be recorded and counted. Two ranks (threads,
 * collCommInitAll) run two good all-reduces of 4 floats (the mailbox), then
 * rank 0 calls one of 4 and rank 1 one of 8 floats: both fail. Each rank's
 * flight recorder must end with that call (all-reduce, its own count,
 * algorithm "none", state "failed", seq 2) after two completed mailbox
 * calls (seq 0, 1), and its counters must have the rows mailbox: 2 calls,
 * 32 bytes, 0 failed and none: 1 call, 1 failed.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"

#define NR 2

typedef struct {
  collComm_t comm;
  int rank;
  collResult_t good, bad;
} arg_t;

static void* run(void* p) {
  arg_t* a = p;
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8];
  a->good = collAllReduce(x, y, 4, collFloat, collSum, a->comm, NULL);
  if (a->good == collSuccess) a->good = collAllReduce(x, y, 4, collFloat, collSum, a->comm, NULL);
  a->bad = collAllReduce(x, y, a->rank == 0 ? 4 : 8, collFloat, collSum, a->comm, NULL);
  return NULL;
}

static int fails;
static void expect(int rank, const char* what, int ok) {
  if (ok) return;
  printf("rank %d: FAILED: %s\n", rank, what);
  fails++;
}

int main(void) {
  setenv("COLL_CHECK", "1", 1);
  collComm_t comms[NR];
  if (collCommInitAll(comms, NR, NULL) != collSuccess) {
    printf("FAILED: init: %s\n", collGetLastError(NULL));
    return 1;
  }
  arg_t a[NR];
  pthread_t th[NR];
  for (int r = 0; r < NR; r++) {
    a[r] = (arg_t){comms[r], r, collSuccess, collSuccess};
    pthread_create(&th[r], NULL, run, &a[r]);
  }
  for (int r = 0; r < NR; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < NR; r++) {
    expect(r, "the two matching all-reduces succeed", a[r].good == collSuccess);
    expect(r, "the mismatched all-reduce fails", a[r].bad != collSuccess);
    collCallRecord_t rec[8];
    int n = 0;
    collResult_t q = collCommGetCallRecords(comms[r], rec, 8, &n);
    expect(r, "collCommGetCallRecords succeeds", q == collSuccess);
    printf("rank %d: %d records:", r, n);
    for (int i = 0; i < n; i++)
      printf(" [seq %llu %s %s %s count %zu]", (unsigned long long)rec[i].seq, rec[i].coll, rec[i].algo, rec[i].state,
             rec[i].count);
    printf("\n");
    expect(r, "three records", n == 3);
    if (n == 3) {
      for (int i = 0; i < 2; i++) {
        expect(r, "a good call: seq 0, 1", rec[i].seq == (uint64_t)i);
        expect(r, "a good call: completed through the mailbox",
               !strcmp(rec[i].state, "completed") && !strcmp(rec[i].algo, "mailbox"));
        expect(r, "a good call: all-reduce of 4", !strcmp(rec[i].coll, "all-reduce") && rec[i].count == 4);
      }
      expect(r, "the failed call is the last record, seq 2", rec[2].seq == 2);
      expect(r, "the failed call: all-reduce of this rank's count",
             !strcmp(rec[2].coll, "all-reduce") && rec[2].count == (size_t)(r == 0 ? 4 : 8) &&
                 rec[2].datatype == collFloat && rec[2].op == collSum);
      expect(r, "the failed call: failed, no algorithm", !strcmp(rec[2].state, "failed") && !strcmp(rec[2].algo, "none"));
    }
    collCollStats_t rows[8];
    int nrows = 0;
    q = collCommGetCollStats(comms[r], rows, 8, &nrows);
    expect(r, "collCommGetCollStats succeeds", q == collSuccess);
    int mb = 0, none = 0;
    for (int i = 0; i < nrows && i < 8; i++) {
      printf("rank %d: row %s/%s calls %llu failed %llu bytes %llu\n", r, rows[i].coll, rows[i].algo,
             (unsigned long long)rows[i].calls, (unsigned long long)rows[i].failed, (unsigned long long)rows[i].bytes);
      if (!strcmp(rows[i].coll, "all-reduce") && !strcmp(rows[i].algo, "mailbox"))
        mb = rows[i].calls == 2 && rows[i].failed == 0 && rows[i].bytes == 32;
      if (!strcmp(rows[i].coll, "all-reduce") && !strcmp(rows[i].algo, "none"))
        none = rows[i].calls == 1 && rows[i].failed == 1 && rows[i].bytes == (uint64_t)(r == 0 ? 16 : 32);
    }
    expect(r, "row all-reduce/mailbox: 2 calls, 32 bytes, none failed", mb);
    expect(r, "row all-reduce/none: 1 call, failed, its bytes", none);
  }
  for (int r = 0; r < NR; r++) collCommDestroy(comms[r]);
  printf("%s\n", fails ? "FAILED" : "OK");
  return fails ? 1 : 0;
}
