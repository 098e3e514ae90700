/*
 * Issue 14.3: mismatched calls are errors without COLL_CHECK.
 *
 * 2 ranks, float32, every case on a fresh communicator:
 *   sum_max    all-reduce sum on rank 0, max on rank 1
 *   count      all-reduce of 2n elements on rank 0, n on rank 1 (n = 2M: the
 *              issue's 4M against 2M, which made one rank succeed and the
 *              other wait for the timeout)
 *   edge       2n = 1500 against n = 750: one side fits the shared-memory
 *              mailbox, the other runs its schedule
 *   bcast_root broadcast from root 0 with count 2n on the root, n on rank 1
 *              (it succeeded on the root)
 *   ar_bcast   all-reduce on rank 0, broadcast from root 0 on rank 1 ("waiting
 *              for rank 1 to connect" until the timeout)
 *   skip       rank 1 makes an extra collective call (an all-reduce of count
 *              0, which moves no data), then both broadcast: only the call
 *              number in the signature tells the calls apart
 *   p2p_coll   rank 0 sends n elements to rank 1, which calls an all-reduce
 * Every case runs on its own communicator, one after the other in the same
 * two processes (a failed rank stays alive, as in an application).
 * Expected, in every environment of i14_3_mismatch.cmake (shared memory and
 * TCP): the mismatched call fails on every rank that
 * receives data of the other call, with a message that names both calls
 * ("rank 0 (host) called all-reduce sum of 256 x float32, this rank all-reduce
 * max of 256 x float32"); a rank whose call returned success (a broadcast
 * root only sends) fails its next call (an all-reduce of one element); all of
 * it within 10 s (COLL_TIMEOUT is 20 s, so no timeout can pass for a
 * detection), and nothing is written past any receive buffer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../integration/mp_harness.h"
#include "helper_data.h"

#define GUARD 256

enum { SUM_MAX, COUNT, EDGE, BCAST_ROOT, AR_BCAST, SKIP, P2P_COLL };

typedef struct {
  const char* name;
  int kind;
  size_t n;
  char want[2][160]; /* some rank's message names both */
} mmCase;

static mmCase cases[DATA_MAX_CASES];
static int ncases;
static dataShared* seen;

/* One rank's part of a case on its own communicator: the mismatched call
 * (res), then an all-reduce of one element if the first one succeeded. */
static int runOne(collComm_t comm, int rank, mmCase* c, dataSeen* me) {
  size_t n = c->n, cap = 2 * n + 16;
  float* send = malloc(cap * sizeof(float));
  unsigned char* recv = malloc(cap * sizeof(float) + GUARD);
  for (size_t i = 0; i < cap; i++) send[i] = (float)(rank + 1);
  memset(recv, 0, cap * sizeof(float));
  memset(recv + cap * sizeof(float), 0xA5, GUARD);
  collResult_t r = collSuccess;
  double t0 = dataNow();
  switch (c->kind) {
    case SUM_MAX:
      r = collAllReduce(send, recv, n, collFloat32, rank == 0 ? collSum : collMax, comm, NULL);
      break;
    case COUNT:
    case EDGE:
      r = collAllReduce(send, recv, rank == 0 ? 2 * n : n, collFloat32, collSum, comm, NULL);
      break;
    case BCAST_ROOT:
      r = collBroadcast(send, recv, rank == 0 ? 2 * n : n, collFloat32, 0, comm, NULL);
      break;
    case AR_BCAST:
      r = rank == 0 ? collAllReduce(send, recv, n, collFloat32, collSum, comm, NULL)
                    : collBroadcast(send, recv, n, collFloat32, 0, comm, NULL);
      break;
    case SKIP:
      if (rank == 0) (void)collBroadcast(send, recv, n, collFloat32, 0, comm, NULL);
      else (void)collAllReduce(send, recv, 0, collFloat32, collSum, comm, NULL);
      t0 = dataNow();
      r = collBroadcast(send, recv, n, collFloat32, 0, comm, NULL);
      break;
    case P2P_COLL:
      r = rank == 0 ? collSend(send, n, collFloat32, 1, comm, NULL)
                    : collAllReduce(send, recv, n, collFloat32, collSum, comm, NULL);
      break;
  }
  me->took = dataNow() - t0;
  me->res = r;
  snprintf(me->msg, sizeof me->msg, "%s", r == collSuccess ? "" : collGetLastError(comm));
  me->nextRes = -1;
  if (r == collSuccess) {
    float one = 1.0f, out = 0.0f;
    t0 = dataNow();
    me->nextRes = collAllReduce(&one, &out, 1, collFloat32, collSum, comm, NULL);
    me->nextTook = dataNow() - t0;
    snprintf(me->nextMsg, sizeof me->nextMsg, "%s", me->nextRes == collSuccess ? "" : collGetLastError(comm));
  }
  int fails = 0;
  for (int i = 0; i < GUARD; i++) fails += recv[cap * sizeof(float) + (size_t)i] != 0xA5;
  DATA_CHECK(fails == 0, "%s rank %d: guard bytes after the receive buffer overwritten", c->name, rank);
  free(send);
  free(recv);
  return fails;
}

static int oneCase(collComm_t comm, int rank, int nranks, int k, dataSeen* me) {
  (void)nranks;
  return runOne(comm, rank, &cases[k], me);
}

/* Every case on a fresh communicator (COLL_TIMEOUT 20 s), in turn. */
static int body(collComm_t ctl, int rank, int nranks, void* arg) {
  (void)arg;
  return dataRunCases(ctl, rank, nranks, ncases, 20, seen, oneCase);
}

static int checkCase(int k) {
  mmCase* c = &cases[k];
  int fails = 0, named = 0;
  for (int r = 0; r < 2; r++) {
    dataSeen* s = &seen->c[k].rank[r];
    printf("  %s n=%zu rank %d: %s in %.3f s%s%s", c->name, c->n, r, collGetErrorString((collResult_t)s->res), s->took,
           s->msg[0] ? ": " : "", s->msg);
    if (s->nextRes >= 0)
      printf("; next call: %s in %.3f s%s%s", collGetErrorString((collResult_t)s->nextRes), s->nextTook,
             s->nextMsg[0] ? ": " : "", s->nextMsg);
    printf("\n");
    DATA_CHECK(s->res != collSuccess || (s->nextRes > 0), "%s rank %d: the mismatched call and the next succeeded",
               c->name, r);
    DATA_CHECK(s->took < 10.0 && s->nextTook < 10.0, "%s rank %d: took %.1f s + %.1f s (the limit is 10 s)", c->name,
               r, s->took, s->nextTook);
    for (int which = 0; which < 2; which++) {
      const char* m = which ? s->nextMsg : s->msg;
      named |= strstr(m, c->want[0]) && strstr(m, c->want[1]);
    }
  }
  DATA_CHECK(named, "%s: no rank's error names both \"%s\" and \"%s\"", c->name, c->want[0], c->want[1]);
  printf("%s %s (n=%zu, %.2f s)\n", fails ? "FAILED" : "passed", c->name, c->n,
         (double)seen->c[k].rank[0].digest * 1e-6);
  return fails;
}

int main(void) {
  seen = dataSharedMap();
  if (!seen) return 1;
  setenv("COLL_TIMEOUT", DATA_CONTROL_TIMEOUT, 1); /* the cases' communicators: 20 s */
  int nc = 0;
  static const size_t sizes[2] = {256, 65536}; /* mailbox-sized, and beyond it */
  for (int si = 0; si < 2; si++) {
    size_t n = sizes[si];
    mmCase* c = &cases[nc++];
    *c = (mmCase){"sum_max", SUM_MAX, n, {"", ""}};
    snprintf(c->want[0], sizeof c->want[0], "all-reduce sum of %zu x float32", n);
    snprintf(c->want[1], sizeof c->want[1], "all-reduce max of %zu x float32", n);
    c = &cases[nc++];
    *c = (mmCase){"count", COUNT, n, {"", ""}};
    snprintf(c->want[0], sizeof c->want[0], "all-reduce sum of %zu x float32", 2 * n);
    snprintf(c->want[1], sizeof c->want[1], "all-reduce sum of %zu x float32", n);
    c = &cases[nc++];
    *c = (mmCase){"bcast_root", BCAST_ROOT, n, {"", ""}};
    snprintf(c->want[0], sizeof c->want[0], "broadcast of %zu x float32 from root 0", 2 * n);
    snprintf(c->want[1], sizeof c->want[1], "broadcast of %zu x float32 from root 0", n);
    c = &cases[nc++];
    *c = (mmCase){"ar_bcast", AR_BCAST, n, {"", ""}};
    snprintf(c->want[0], sizeof c->want[0], "all-reduce sum of %zu x float32", n);
    snprintf(c->want[1], sizeof c->want[1], "broadcast of %zu x float32 from root 0", n);
    c = &cases[nc++];
    *c = (mmCase){"skip", SKIP, n, {"is 1 collective call(s) behind this rank", ""}};
    snprintf(c->want[1], sizeof c->want[1], "both calls broadcast of %zu x float32 from root 0", n);
  }
  mmCase* c = &cases[nc++];
  *c = (mmCase){"edge", EDGE, 750, {"all-reduce sum of 1500 x float32", "all-reduce sum of 750 x float32"}};
  c = &cases[nc++];
  /* with the mailbox, a rank waiting in it does not read its connections:
   * the large count keeps both ranks on their schedules */
  *c = (mmCase){"p2p_coll", P2P_COLL, 65536, {"sent 65536 x float32 (send/recv)", "all-reduce sum of 65536 x float32"}};
  c = &cases[nc++];
  *c = (mmCase){"count", COUNT, 2u << 20, {"all-reduce sum of 4194304 x float32", "all-reduce sum of 2097152 x float32"}};
  ncases = nc;
  int fails = 0;
  double t0 = dataNow();
  DATA_CHECK(collMpRun(2, 300, body, NULL) == 0, "a rank failed or hung");
  for (int i = 0; i < nc; i++) fails += checkCase(i);
  printf("issue 14.3 mismatched calls (%d cases, %.1f s): %s\n", nc, dataNow() - t0, fails ? "FAILED" : "passed");
  return fails ? 1 : 0;
}
