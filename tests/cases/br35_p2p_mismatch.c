/*
 * BR-35: a send and a receive whose counts differ are an error on the
 * receiver, never a silent success, a hang or a write past the receive
 * buffer (pytorch#113376, NVIDIA/nccl#1938).
 *
 * 2 ranks, float32, COLL_TIMEOUT=10; rank 0 sends, rank 1 receives into a
 * buffer filled with -1 followed by a 64-byte guard zone. Cases (send count /
 * receive count): A 3/4, B 3/5, C 5/3, D 1,000,000/1,000,001, E 1,000,001/
 * 1,000,000; each with blocking send/recv and again inside
 * collGroupStart/End. Afterwards a count-1 send/recv of 42.
 * Expected: the receiver gets an error within 20 s (here: 10 s) that names
 * both transfers ("rank 0 (host) sent 3 x float32, this rank's receive from
 * rank 0 expects 4 x float32"); the guard zone is intact; the sender may
 * succeed (it cannot know) but then fails or succeeds cleanly later. The
 * count-1 exchange then delivers 42 or fails (the receiver's communicator
 * reports itself broken) without hanging, and collCommDestroy succeeds (the
 * harness checks it). Every case runs on its own communicator, one after the
 * other in the same two processes. br35_p2p_mismatch.cmake runs it over TCP
 * too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../integration/mp_harness.h"
#include "helper_data.h"

#define GUARD 64

typedef struct {
  const char* name;
  size_t sendCount, recvCount;
  int grouped;
} p2pCase;

static p2pCase cases[10];
static dataShared* seen;

static int runOne(collComm_t comm, int rank, const p2pCase* c, dataSeen* me) {
  int fails = 0;
  size_t cap = c->recvCount > c->sendCount ? c->recvCount : c->sendCount;
  float* buf = malloc(cap * sizeof(float) + GUARD);
  unsigned char* guard = (unsigned char*)(buf + c->recvCount);
  for (size_t i = 0; i < cap; i++) buf[i] = rank == 0 ? (float)(i % 1000) : -1.0f;
  if (rank == 1) memset(guard, 0xA5, GUARD);
  double t0 = dataNow();
  collResult_t r;
  if (c->grouped) collGroupStart();
  r = rank == 0 ? collSend(buf, c->sendCount, collFloat32, 1, comm, NULL)
                : collRecv(buf, c->recvCount, collFloat32, 0, comm, NULL);
  if (c->grouped) {
    collResult_t g = collGroupEnd();
    if (r == collSuccess) r = g;
  }
  me->took = dataNow() - t0;
  me->res = r;
  snprintf(me->msg, sizeof me->msg, "%s", r == collSuccess ? "" : collGetLastError(comm));
  if (rank == 1) {
    int bad = 0;
    for (int i = 0; i < GUARD; i++) bad += guard[i] != 0xA5;
    DATA_CHECK(bad == 0, "%s: %d guard bytes after the receive buffer were overwritten", c->name, bad);
  }
  /* the count-1 exchange: 42, or an error (broken) - never a hang */
  float v = rank == 0 ? 42.0f : -1.0f;
  t0 = dataNow();
  me->nextRes = rank == 0 ? collSend(&v, 1, collFloat32, 1, comm, NULL) : collRecv(&v, 1, collFloat32, 0, comm, NULL);
  me->nextTook = dataNow() - t0;
  snprintf(me->nextMsg, sizeof me->nextMsg, "%s", me->nextRes == collSuccess ? "" : collGetLastError(comm));
  if (rank == 1 && me->nextRes == collSuccess)
    DATA_CHECK(v == 42.0f, "%s: the count-1 exchange delivered %g", c->name, (double)v);
  free(buf);
  return fails;
}

static int oneCase(collComm_t comm, int rank, int nranks, int k, dataSeen* me) {
  (void)nranks;
  return runOne(comm, rank, &cases[k], me);
}

/* Every case on a fresh communicator (COLL_TIMEOUT 10 s), in turn. */
static int body(collComm_t ctl, int rank, int nranks, void* arg) {
  (void)arg;
  return dataRunCases(ctl, rank, nranks, 10, 10, seen, oneCase);
}

int main(void) {
  seen = dataSharedMap();
  if (!seen) return 1;
  setenv("COLL_TIMEOUT", DATA_CONTROL_TIMEOUT, 1); /* the cases' communicators: 10 s */
  static const struct {
    const char* name;
    size_t s, r;
  } cs[] = {{"A", 3, 4}, {"B", 3, 5}, {"C", 5, 3}, {"D", 1000000, 1000001}, {"E", 1000001, 1000000}};
  for (int k = 0; k < 10; k++) cases[k] = (p2pCase){cs[k % 5].name, cs[k % 5].s, cs[k % 5].r, k >= 5};
  int fails = 0;
  double t0 = dataNow();
  DATA_CHECK(collMpRun(2, 300, body, NULL) == 0, "a rank failed or hung");
  for (int k = 0; k < 10; k++) {
    p2pCase* c = &cases[k];
    int f0 = fails;
    for (int r = 0; r < 2; r++) {
      dataSeen* s = &seen->c[k].rank[r];
      printf("  %s%s %zu/%zu rank %d: %s in %.3f s%s%s; count-1 exchange: %s%s%s\n", c->name,
             c->grouped ? " grouped" : "", c->sendCount, c->recvCount, r, collGetErrorString((collResult_t)s->res),
             s->took, s->msg[0] ? ": " : "", s->msg, collGetErrorString((collResult_t)s->nextRes),
             s->nextMsg[0] ? ": " : "", s->nextMsg);
      DATA_CHECK(s->took < 10.0 && s->nextTook < 10.0, "case %s rank %d: %.1f s + %.1f s", c->name, r, s->took,
                 s->nextTook);
    }
    dataSeen* rv = &seen->c[k].rank[1];
    char want[2][96];
    snprintf(want[0], sizeof want[0], "sent %zu x float32", c->sendCount);
    snprintf(want[1], sizeof want[1], "receive from rank 0 expects %zu x float32", c->recvCount);
    DATA_CHECK(rv->res != collSuccess, "case %s: the receive of %zu returned success for a send of %zu", c->name,
               c->recvCount, c->sendCount);
    DATA_CHECK(strstr(rv->msg, want[0]) && strstr(rv->msg, want[1]),
               "case %s: the receiver's error does not say \"%s\" and \"%s\"", c->name, want[0], want[1]);
    printf("%s case %s%s (%.2f s)\n", fails > f0 ? "FAILED" : "passed", c->name, c->grouped ? " grouped" : "",
           (double)seen->c[k].rank[0].digest * 1e-6);
  }
  printf("BR-35 send/recv count mismatches (%.1f s): %s\n", dataNow() - t0, fails ? "FAILED" : "passed");
  return fails ? 1 : 0;
}
