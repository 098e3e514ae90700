/*
 * i18_4_profiler_events.c - issue 18, tests: a profiler plugin
 * (COLL_PROFILER_PLUGIN, the example of tests/unit/plugins/profiler_example.c
 * with step events on) sees the events in order with the right sizes.
 * 2 processes run: an all-reduce of 1 KiB (the mailbox), one of 256 KiB (a
 * schedule), a group of a send and a receive of 1000 bytes, a barrier.
 * From each rank's log:
 *  - every event that starts stops, children start after and stop before
 *    their parent (group > coll / p2p > step);
 *  - launches: 4 groups with nops 1, 1, 2, 1; collectives numbered 0, 1, 2
 *    (all-reduce, all-reduce, barrier) with bytes 1024, 262144, 1;
 *  - the 1 KiB all-reduce runs as "mailbox", without transfers; the 256 KiB
 *    one as the algorithm the counters name (collCommGetCollStats), its send
 *    steps add up to 262144 bytes (2 ranks: each sends its whole buffer's
 *    worth: 2(n-1)/n x B), its receive steps too;
 *  - the send and the receive name the peer and 1000 bytes, and their steps
 *    add up to 1000 bytes each;
 *  - init saw the rank, 2 ranks, and finalize came last.
 * Before issue 18 there was no profiler plugin ABI (the test did not build).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll.h"
#include "../integration/mp_harness.h"

#define MAXEV 4096

static char algoSeen[2][32];

static int body(collComm_t comm, int rank, int n, void* arg) {
  (void)arg;
  static float in[65536], out[65536];
  static char sbuf[1000], rbuf[1000];
  if (collAllReduce(in, out, 256, collFloat, collSum, comm, NULL) != collSuccess) return 1;
  if (collAllReduce(in, out, 65536, collFloat, collSum, comm, NULL) != collSuccess) return 1;
  collGroupStart();
  collSend(sbuf, sizeof sbuf, collInt8, 1 - rank, comm, NULL);
  collRecv(rbuf, sizeof rbuf, collInt8, 1 - rank, comm, NULL);
  if (collGroupEnd() != collSuccess) return 1;
  if (collBarrier(comm, NULL) != collSuccess) return 1;
  /* the algorithm of the large call, for the check */
  collCollStats_t rows[8];
  int nrows = 0;
  collCommGetCollStats(comm, rows, 8, &nrows);
  char path[128];
  snprintf(path, sizeof path, "%s.algo.%d", getenv("COLL_EXAMPLE_PROFILER_LOG"), rank);
  FILE* f = fopen(path, "w");
  for (int i = 0; f && i < nrows && i < 8; i++)
    if (!strcmp(rows[i].coll, "all-reduce") && strcmp(rows[i].algo, "mailbox")) fprintf(f, "%s\n", rows[i].algo);
  if (f) fclose(f);
  (void)n;
  return 0;
}

typedef struct {
  char type[8];
  unsigned long id, parent;
  int started, stopped, startLine, stopLine;
  char line[256];
} ev_t;

static ev_t evs[MAXEV];

static const char* field(const char* line, const char* key, char* out, size_t len) {
  char k[32];
  snprintf(k, sizeof k, " %s=", key);
  const char* p = strstr(line, k);
  out[0] = 0;
  if (!p) return out;
  p += strlen(k);
  size_t i = 0;
  while (p[i] && p[i] != ' ' && p[i] != '\n' && i + 1 < len) {
    out[i] = p[i];
    i++;
  }
  out[i] = 0;
  return out;
}

static long num(const char* line, const char* key) {
  char b[64];
  return atol(field(line, key, b, sizeof b));
}

static int fails;
static void expect(int rank, const char* what, int ok) {
  if (!ok) {
    printf("rank %d: FAILED: %s\n", rank, what);
    fails++;
  }
}

static void checkRank(const char* base, int rank) {
  char path[160], line[256], b[64];
  snprintf(path, sizeof path, "%s.%d", base, rank);
  FILE* f = fopen(path, "r");
  expect(rank, "log exists", f != NULL);
  if (!f) return;
  memset(evs, 0, sizeof evs);
  int ln = 0, sawInit = 0, finalizeLast = 0;
  while (fgets(line, sizeof line, f)) {
    ln++;
    finalizeLast = strstr(line, " finalize") != NULL;
    if (strstr(line, " init ")) {
      sawInit = num(line, "rank") == rank && num(line, "nranks") == 2;
      continue;
    }
    unsigned long id = (unsigned long)num(line, "id");
    if (id == 0 || id >= MAXEV) continue;
    ev_t* e = &evs[id];
    if (strstr(line, " start ")) {
      sscanf(strstr(line, " start ") + 7, "%7s", e->type);
      e->id = id;
      e->parent = (unsigned long)num(line, "parent");
      e->started = 1;
      e->startLine = ln;
      snprintf(e->line, sizeof e->line, "%s", line);
    } else if (strstr(line, " stop ")) {
      e->stopped = 1;
      e->stopLine = ln;
    }
  }
  fclose(f);
  expect(rank, "init saw this rank of 2", sawInit);
  expect(rank, "finalize is the last line", finalizeLast);
  int groups = 0, colls = 0, p2ps = 0;
  long groupNops[8] = {0};
  long sendBytes[MAXEV] = {0}, recvBytes[MAXEV] = {0}, steps[MAXEV] = {0};
  unsigned long collIds[8] = {0}, p2pIds[4] = {0};
  for (int i = 1; i < MAXEV; i++) {
    ev_t* e = &evs[i];
    if (!e->started) continue;
    expect(rank, "every event stops after it starts", e->stopped && e->stopLine > e->startLine);
    if (e->parent) {
      ev_t* p = &evs[e->parent];
      expect(rank, "children nest in their parent",
             p->started && p->startLine < e->startLine && p->stopLine > e->stopLine);
    }
    if (!strcmp(e->type, "group")) {
      if (groups < 8) groupNops[groups] = num(e->line, "nops");
      groups++;
      expect(rank, "a group has no parent", e->parent == 0);
    } else if (!strcmp(e->type, "coll")) {
      expect(rank, "collectives numbered in order", num(e->line, "seq") == colls);
      expect(rank, "a collective's parent is a group", !strcmp(evs[e->parent].type, "group"));
      if (colls < 8) collIds[colls] = e->id;
      colls++;
    } else if (!strcmp(e->type, "p2p")) {
      expect(rank, "send/recv peer and bytes", num(e->line, "peer") == 1 - rank && num(e->line, "bytes") == 1000);
      if (p2ps < 4) p2pIds[p2ps] = e->id;
      p2ps++;
    } else if (!strcmp(e->type, "step")) {
      field(e->line, "kind", b, sizeof b);
      steps[e->parent]++;
      if (!strcmp(b, "send")) sendBytes[e->parent] += num(e->line, "bytes");
      else recvBytes[e->parent] += num(e->line, "bytes");
      expect(rank, "steps name the peer", num(e->line, "peer") == 1 - rank);
    }
  }
  expect(rank, "4 launches", groups == 4);
  expect(rank, "launch sizes 1, 1, 2, 1", groupNops[0] == 1 && groupNops[1] == 1 && groupNops[2] == 2 && groupNops[3] == 1);
  expect(rank, "3 collectives, 2 send/recv", colls == 3 && p2ps == 2);
  if (colls != 3 || p2ps != 2) return;
  const char* c0 = evs[collIds[0]].line;
  const char* c1 = evs[collIds[1]].line;
  const char* c2 = evs[collIds[2]].line;
  expect(rank, "1 KiB all-reduce through the mailbox, no transfers",
         !strcmp(field(c0, "func", b, sizeof b), "all-reduce") && num(c0, "bytes") == 1024 &&
             !strcmp(field(c0, "algo", b, sizeof b), "mailbox") && steps[collIds[0]] == 0);
  expect(rank, "256 KiB all-reduce: bytes and count", num(c1, "bytes") == 262144 && num(c1, "count") == 65536);
  expect(rank, "256 KiB all-reduce: the algorithm the counters name",
         !strcmp(field(c1, "algo", b, sizeof b), algoSeen[rank]));
  expect(rank, "256 KiB all-reduce: sends add up to 262144 bytes", sendBytes[collIds[1]] == 262144);
  expect(rank, "256 KiB all-reduce: receives add up to 262144 bytes", recvBytes[collIds[1]] == 262144);
  expect(rank, "barrier is collective #2, 1 byte", !strcmp(field(c2, "func", b, sizeof b), "barrier") && num(c2, "bytes") == 1);
  for (int k = 0; k < 2; k++) {
    const char* p = evs[p2pIds[k]].line;
    int isSend = !strcmp(field(p, "func", b, sizeof b), "send");
    long got = isSend ? sendBytes[p2pIds[k]] : recvBytes[p2pIds[k]];
    expect(rank, "send/recv steps add up to 1000 bytes", got == 1000);
  }
  if (fails == 0)
    printf("rank %d: %d events in order; all-reduce 256 KiB (%s): %ld bytes sent in %ld steps\n", rank,
           groups + colls + p2ps, algoSeen[rank], sendBytes[collIds[1]], steps[collIds[1]]);
}

int main(void) {
  char base[96], cmd[160];
  snprintf(base, sizeof base, "/tmp/coll_i18_4.%d/log", (int)getpid());
  snprintf(cmd, sizeof cmd, "mkdir -p /tmp/coll_i18_4.%d", (int)getpid());
  if (system(cmd) != 0) return 1;
  setenv("COLL_PROFILER_PLUGIN", COLL_PROFILER_EXAMPLE, 1);
  setenv("COLL_EXAMPLE_PROFILER_LOG", base, 1);
  setenv("COLL_EXAMPLE_PROFILER_STEPS", "1", 1);
  int r = collMpRun(2, 120, body, NULL);
  fails += r != 0;
  for (int rank = 0; rank < 2; rank++) {
    char path[160];
    snprintf(path, sizeof path, "%s.algo.%d", base, rank);
    FILE* f = fopen(path, "r");
    if (f && fscanf(f, "%31s", algoSeen[rank]) != 1) algoSeen[rank][0] = 0;
    if (f) fclose(f);
    checkRank(base, rank);
  }
  snprintf(cmd, sizeof cmd, "rm -rf /tmp/coll_i18_4.%d", (int)getpid());
  if (system(cmd) != 0) fails++;
  printf("%s\n", fails ? "FAIL" : "PASS");
  return fails != 0;
}
