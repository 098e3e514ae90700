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
 * harness checks it). br35_p2p_mismatch.cmake runs it over TCP too.
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
  dataShared* seen;
} p2pCase;

static int body(collComm_t comm, int rank, int nranks, void* arg) {
  (void)nranks;
  p2pCase* c = arg;
  dataSeen* me = &c->seen->rank[rank];
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
  if (rank == 1 && me->nextRes == collSuccess) DATA_CHECK(v == 42.0f, "%s: the count-1 exchange delivered %g", c->name, (double)v);
  free(buf);
  return fails;
}

int main(void) {
  dataShared* seen = dataSharedMap();
  if (!seen) return 1;
  setenv("COLL_TIMEOUT", "10", 0);
  static const struct {
    const char* name;
    size_t s, r;
  } cs[] = {{"A", 3, 4}, {"B", 3, 5}, {"C", 5, 3}, {"D", 1000000, 1000001}, {"E", 1000001, 1000000}};
  int fails = 0;
  double t0 = dataNow();
  for (int grouped = 0; grouped < 2; grouped++)
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
      p2pCase c = {cs[k].name, cs[k].s, cs[k].r, grouped, seen};
      memset(seen, 0, sizeof *seen);
      double t1 = dataNow();
      int f0 = fails;
      DATA_CHECK(collMpRun(2, 60, body, &c) == 0, "case %s%s: a rank failed or hung", c.name,
                 grouped ? " (grouped)" : "");
      for (int r = 0; r < 2; r++)
        printf("  %s%s %zu/%zu rank %d: %s in %.3f s%s%s; count-1 exchange: %s%s%s\n", c.name, grouped ? " grouped" : "",
               c.sendCount, c.recvCount, r, collGetErrorString((collResult_t)seen->rank[r].res), seen->rank[r].took,
               seen->rank[r].msg[0] ? ": " : "", seen->rank[r].msg,
               collGetErrorString((collResult_t)seen->rank[r].nextRes), seen->rank[r].nextMsg[0] ? ": " : "",
               seen->rank[r].nextMsg);
      dataSeen* rv = &seen->rank[1];
      char want[2][96];
      snprintf(want[0], sizeof want[0], "sent %zu x float32", c.sendCount);
      snprintf(want[1], sizeof want[1], "receive from rank 0 expects %zu x float32", c.recvCount);
      DATA_CHECK(rv->res != collSuccess, "case %s: the receive of %zu returned success for a send of %zu", c.name,
                 c.recvCount, c.sendCount);
      DATA_CHECK(strstr(rv->msg, want[0]) && strstr(rv->msg, want[1]), "case %s: the receiver's error does not say "
                 "\"%s\" and \"%s\"", c.name, want[0], want[1]);
      for (int r = 0; r < 2; r++)
        DATA_CHECK(seen->rank[r].took < 10.0 && seen->rank[r].nextTook < 10.0, "case %s rank %d: %.1f s + %.1f s",
                   c.name, r, seen->rank[r].took, seen->rank[r].nextTook);
      printf("%s case %s%s (%.2f s)\n", fails > f0 ? "FAILED" : "passed", c.name, grouped ? " grouped" : "",
             dataNow() - t1);
    }
  printf("BR-35 send/recv count mismatches (%.1f s): %s\n", dataNow() - t0, fails ? "FAILED" : "passed");
  return fails ? 1 : 0;
}
