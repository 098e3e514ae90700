/*
 * BR-15: collectives whose ranks pass different counts are an error on every
 * rank in bounded time, never a hang or a "success" with a wrong tail
 * (NVIDIA/nccl#1394, #1417).
 *
 * 4 ranks, float32, sum, every value 1.0, COLL_TIMEOUT=10:
 *   all-reduce  A: rank 0 count 256,000, ranks 1-3 512,000; B: 2560 against
 *               5120; C: ranks 0-2 count 1000, rank 3 1001 (both fit the
 *               shared-memory mailbox)
 *   all-gather  the same three shapes with rank 0's (A, B) or rank 3's (C)
 *               sendcount differing
 *   broadcast   root 0 passes the larger count of each shape (512,000, 5120,
 *               1001), the others the smaller one
 * Expected: every rank gets an error within 20 s and no process aborts;
 * afterwards a matched all-reduce of count 1 (value 1.0) gives 4.0 or the
 * communicator reports itself broken, and collCommDestroy succeeds (the
 * harness checks it).
 * Extension: no rank may wait for COLL_TIMEOUT to get there (with the
 * default timeout, 30 minutes, that is a hang): every rank has its error
 * within 5 s, the detected mismatch or a peer that failed because of it.
 * One deviation, by design: a broadcast root only sends, so when its data
 * fits the transport's buffers it returns before any receiver looked at it
 * (NCCL and MPI roots do the same; an acknowledgement would cost every
 * broadcast a round trip). The receivers fail at once, naming both calls,
 * and close their connections; the root's next call fails. So for a root
 * whose broadcast returned success, the count-1 all-reduce must fail - well
 * within the 20 s.
 * Every case runs on its own communicator, one after the other in the same
 * four processes (a failed rank stays alive, as in an application).
 * br15_count_mismatch.cmake runs it over TCP too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../integration/mp_harness.h"
#include "helper_data.h"

enum { AR, AG, BC };

typedef struct {
  int fn;
  const char* shape;
  size_t small, large;
  int oddRank;  /* the rank whose count differs */
  int oddLarge; /* it passes the larger count */
} mmCase;

static mmCase cases[9];
static dataShared* seen;

static int runOne(collComm_t comm, int rank, int nranks, const mmCase* c, dataSeen* me) {
  int fails = 0;
  int odd = rank == c->oddRank;
  size_t n = (odd == c->oddLarge) ? c->large : c->small;
  size_t cap = c->large * (size_t)nranks + 64;
  float* send = malloc(c->large * sizeof(float));
  float* recv = malloc(cap * sizeof(float));
  for (size_t i = 0; i < c->large; i++) send[i] = 1.0f;
  for (size_t i = 0; i < cap; i++) recv[i] = -1.0f;
  double t0 = dataNow();
  collResult_t r;
  size_t recvN = n;
  if (c->fn == AR) r = collAllReduce(send, recv, n, collFloat32, collSum, comm, NULL);
  else if (c->fn == AG) {
    r = collAllGather(send, recv, n, collFloat32, comm, NULL);
    recvN = n * (size_t)nranks;
  } else r = collBroadcast(send, recv, n, collFloat32, 0, comm, NULL);
  me->took = dataNow() - t0;
  me->res = r;
  snprintf(me->msg, sizeof me->msg, "%s", r == collSuccess ? "" : collGetLastError(comm));
  for (size_t i = recvN; i < cap; i++)
    if (recv[i] != -1.0f) {
      DATA_CHECK(0, "rank %d: element %zu past the receive count %zu was written", rank, i, recvN);
      break;
    }
  float one = 1.0f, out = 0.0f;
  t0 = dataNow();
  me->nextRes = collAllReduce(&one, &out, 1, collFloat32, collSum, comm, NULL);
  me->nextTook = dataNow() - t0;
  snprintf(me->nextMsg, sizeof me->nextMsg, "%s", me->nextRes == collSuccess ? "" : collGetLastError(comm));
  if (me->nextRes == collSuccess) DATA_CHECK(out == 4.0f, "rank %d: the count-1 all-reduce gave %g", rank, (double)out);
  free(send);
  free(recv);
  return fails;
}

static int oneCase(collComm_t comm, int rank, int nranks, int k, dataSeen* me) {
  (void)nranks;
  return runOne(comm, rank, nranks, &cases[k], me);
}

/* Every case on a fresh communicator (COLL_TIMEOUT 10 s), in turn. */
static int body(collComm_t ctl, int rank, int nranks, void* arg) {
  (void)arg;
  return dataRunCases(ctl, rank, nranks, 9, 10, seen, oneCase);
}

int main(void) {
  seen = dataSharedMap();
  if (!seen) return 1;
  setenv("COLL_TIMEOUT", DATA_CONTROL_TIMEOUT, 1); /* the cases' communicators: 10 s */
  static const char* fnames[] = {"all-reduce", "all-gather", "broadcast"};
  for (int fn = AR; fn <= BC; fn++) {
    mmCase* c = &cases[3 * fn];
    c[0] = (mmCase){fn, "A", 256000, 512000, 0, 0};
    c[1] = (mmCase){fn, "B", 2560, 5120, 0, 0};
    c[2] = (mmCase){fn, "C", 1000, 1001, 3, 1};
    if (fn == BC) /* the root (rank 0) passes the larger count, the others the smaller */
      for (int k = 0; k < 3; k++) c[k].oddRank = 0, c[k].oddLarge = 1;
  }
  int fails = 0;
  double t0 = dataNow();
  DATA_CHECK(collMpRun(4, 300, body, NULL) == 0, "a rank failed, crashed or hung");
  for (int k = 0; k < 9; k++) {
    mmCase* c = &cases[k];
    int fn = c->fn, f0 = fails;
    for (int r = 0; r < 4; r++) {
      dataSeen* s = &seen->c[k].rank[r];
      printf("  %s %s rank %d: %s in %.3f s%s%.160s; next: %s in %.3f s\n", fnames[fn], c->shape, r,
             collGetErrorString((collResult_t)s->res), s->took, s->msg[0] ? ": " : "", s->msg,
             collGetErrorString((collResult_t)s->nextRes), s->nextTook);
      int sendOnlyRoot = fn == BC && r == 0;
      if (sendOnlyRoot)
        DATA_CHECK(s->res != collSuccess || s->nextRes != collSuccess,
                   "%s %s: the root's broadcast and its next call both succeeded", fnames[fn], c->shape);
      else
        DATA_CHECK(s->res != collSuccess, "%s %s rank %d: the mismatched call returned success", fnames[fn],
                   c->shape, r);
      DATA_CHECK(s->took + s->nextTook < 20.0, "%s %s rank %d: %.1f s + %.1f s (limit 20 s)", fnames[fn], c->shape,
                 r, s->took, s->nextTook);
      DATA_CHECK(s->took + s->nextTook < 5.0,
                 "%s %s rank %d: %.1f s + %.1f s: waited (COLL_TIMEOUT is 10 s) instead of detecting the mismatch",
                 fnames[fn], c->shape, r, s->took, s->nextTook);
    }
    printf("%s %s %s (%.2f s)\n", fails > f0 ? "FAILED" : "passed", fnames[fn], c->shape,
           (double)seen->c[k].rank[0].digest * 1e-6);
  }
  printf("BR-15 count mismatches (%.1f s): %s\n", dataNow() - t0, fails ? "FAILED" : "passed");
  return fails ? 1 : 0;
}
