/*
 * nu_11_overlap.c - new user's finding 11: partly overlapping send and
 * receive buffers (neither equal nor disjoint) are collInvalidArgument naming
 * both ranges, before any data moves; the documented in-place forms stay
 * allowed and give exact results:
 *   all-reduce, broadcast (root), reduce (root): sendbuff == recvbuff
 *   all-gather:      sendbuff == recvbuff + rank*sendcount
 *   reduce-scatter:  recvbuff == sendbuff + rank*recvcount
 * An all-to-all is a group of sends and receives: a receive that partly
 * overlaps a send of the group is refused at collGroupEnd.
 * 2 ranks for all-reduce, all-gather, reduce-scatter and all-to-all (in-place
 * offsets that differ per rank), a 1-rank communicator for broadcast and reduce (a
 * root whose call is refused would leave the other ranks waiting). Before the
 * fix every overlapping call returned collSuccess.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../integration/mp_harness.h"

static int expectOverlap(int rank, const char* what, collResult_t r) {
  const char* e = collGetLastError(NULL);
  int ok = r == collInvalidArgument && strstr(e, "partly overlap") &&
           ((strstr(e, "sendbuff [0x") && strstr(e, "recvbuff [0x")) || (strstr(e, "the send to rank") &&
                                                                           strstr(e, "the receive from rank")));
  printf("rank %d %-44s %s%s%s\n", rank, what, ok ? "ok" : "FAILED: ", ok ? "" : collGetErrorString(r),
         ok ? "" : e);
  if (ok && rank == 0 && strstr(what, "all-reduce(a, a+10")) printf("  message: %s\n", e);
  return !ok;
}

static int expectOk(int rank, const char* what, collResult_t r, int good) {
  int ok = r == collSuccess && good;
  printf("rank %d %-44s %s %s\n", rank, what, ok ? "ok" : "FAILED", r == collSuccess ? "" : collGetLastError(NULL));
  return !ok;
}

static int body(collComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  float a[256] = {0};
  int f = 0;
  size_t n = 10;
  f += expectOverlap(rank, "all-reduce(a, a+10, 100)", collAllReduce(a, a + 10, 100, collFloat, collSum, comm, NULL));
  f += expectOverlap(rank, "all-reduce(a+10, a, 100)", collAllReduce(a + 10, a, 100, collFloat, collSum, comm, NULL));
  f += expectOverlap(rank, "all-gather(a, a+5, 10)", collAllGather(a, a + 5, n, collFloat, comm, NULL));
  f += expectOverlap(rank, "all-gather(recv+3, recv, 10)", collAllGather(a + 3, a, n, collFloat, comm, NULL));
  f += expectOverlap(rank, "reduce-scatter(a, a+3, 10)", collReduceScatter(a, a + 3, n, collFloat, collSum, comm, NULL));
  f += expectOverlap(rank, "reduce-scatter(a+3, a, 10)", collReduceScatter(a + 3, a, n, collFloat, collSum, comm, NULL));
  /* the documented in-place forms */
  for (int i = 0; i < 100; i++) a[i] = (float)(rank + 1);
  collResult_t r = collAllReduce(a, a, 100, collFloat, collSum, comm, NULL);
  int good = 1;
  for (int i = 0; i < 100; i++) good &= a[i] == 3.0f;
  f += expectOk(rank, "all-reduce in place (a, a)", r, good);
  for (int i = 0; i < 2 * (int)n; i++) a[i] = -1;
  for (size_t i = 0; i < n; i++) a[(size_t)rank * n + i] = (float)(10 * rank + (int)i);
  r = collAllGather(a + (size_t)rank * n, a, n, collFloat, comm, NULL);
  good = 1;
  for (int q = 0; q < nranks; q++)
    for (size_t i = 0; i < n; i++) good &= a[(size_t)q * n + i] == (float)(10 * q + (int)i);
  f += expectOk(rank, "all-gather in place (recv + rank*count)", r, good);
  for (size_t i = 0; i < 2 * n; i++) a[i] = (float)(rank + 1) * (float)i;
  r = collReduceScatter(a, a + (size_t)rank * n, n, collFloat, collSum, comm, NULL);
  good = 1;
  for (size_t i = 0; i < n; i++) good &= a[(size_t)rank * n + i] == 3.0f * (float)((size_t)rank * n + i);
  f += expectOk(rank, "reduce-scatter in place (send + rank*count)", r, good);
  /* disjoint but adjacent is fine */
  for (int i = 0; i < 100; i++) a[i] = 1;
  r = collAllReduce(a, a + 100, 100, collFloat, collSum, comm, NULL);
  good = 1;
  for (int i = 0; i < 100; i++) good &= a[100 + i] == 2.0f;
  f += expectOk(rank, "all-reduce(a, a+100, 100): adjacent", r, good);
  /* all-to-all as a group: receives that partly overlap the sends */
  float* send = a + 120;
  collGroupStart();
  for (int q = 0; q < nranks; q++) {
    collSend(send + 4 * q, 4, collFloat, q, comm, NULL);
    collRecv(send + 3 + 4 * q, 4, collFloat, q, comm, NULL);
  }
  f += expectOverlap(rank, "all-to-all group, recvbuff = sendbuff+3", collGroupEnd());
  for (int i = 0; i < 8; i++) send[i] = (float)(100 * rank + i);
  float* recv = send + 8;
  collGroupStart();
  for (int q = 0; q < nranks; q++) {
    collSend(send + 4 * q, 4, collFloat, q, comm, NULL);
    collRecv(recv + 4 * q, 4, collFloat, q, comm, NULL);
  }
  r = collGroupEnd();
  good = 1;
  for (int q = 0; q < nranks; q++)
    for (int i = 0; i < 4; i++) good &= recv[4 * q + i] == (float)(100 * q + 4 * rank + i);
  f += expectOk(rank, "all-to-all group, adjacent buffers", r, good);
  return f;
}

int main(void) {
  setenv("COLL_TIMEOUT", "20", 1);
  int f = collMpRun(2, 60, body, NULL);
  collUniqueId id;
  collComm_t c = NULL;
  if (collGetUniqueId(&id) != collSuccess || collCommInitRank(&c, 1, id, 0) != collSuccess) {
    printf("1-rank init: %s\n", collGetLastError(NULL));
    return 1;
  }
  float a[256];
  for (int i = 0; i < 256; i++) a[i] = (float)i;
  f += expectOverlap(0, "broadcast(a, a+10, 100) on the root", collBroadcast(a, a + 10, 100, collFloat, 0, c, NULL));
  f += expectOverlap(0, "reduce(a, a+10, 100) on the root", collReduce(a, a + 10, 100, collFloat, collSum, 0, c, NULL));
  f += expectOverlap(0, "reduce(a+10, a, 100) on the root", collReduce(a + 10, a, 100, collFloat, collSum, 0, c, NULL));
  collResult_t r = collBroadcast(a, a, 100, collFloat, 0, c, NULL);
  f += expectOk(0, "broadcast in place", r, a[99] == 99.0f);
  r = collReduce(a, a, 100, collFloat, collSum, 0, c, NULL);
  f += expectOk(0, "reduce in place", r, a[99] == 99.0f);
  a[199] = -1;
  r = collBroadcast(a, a + 100, 100, collFloat, 0, c, NULL);
  f += expectOk(0, "broadcast(a, a+100, 100): adjacent", r, a[199] == 99.0f);
  collCommDestroy(c);
  printf("%s\n", f ? "FAIL" : "ok");
  return f != 0;
}
