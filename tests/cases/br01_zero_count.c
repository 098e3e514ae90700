/*
 * BR-01 (parts 1 and 2): collectives and a grouped send/recv of zero
 * elements are no-ops that succeed at once (pytorch/pytorch#85234: Gloo's
 * all-gather of empty tensors died of an integer division by the count).
 *
 * 4 ranks. Every collective with count 0, once with valid 16-byte buffers
 * pre-filled with 0xAB and once with NULL buffers; then a grouped 0-element
 * send/recv between ranks 0 and 1 (both buffer kinds). Each call must return
 * collSuccess within 1 s and leave the 0xAB bytes untouched, as a blocking
 * call and again on a stream (then collStreamSynchronize). Afterwards a
 * 1-element all-reduce of rank+1 on the same communicator gives 10.
 * (Part 3, through the PyTorch shim, belongs to the shim's tests.)
 */
#include <stdio.h>
#include <string.h>

#include "helper_sem.h"
#include "../integration/mp_harness.h"

#define NBYTES 16
#define SENTINEL 0xAB
#define LIMIT_S 1.0

static int untouched(const unsigned char* b) {
  for (int i = 0; i < NBYTES; i++)
    if (b[i] != SENTINEL) return 0;
  return 1;
}

/* Runs one call with count 0 and checks result, time and sentinels. */
#define ZERO_CALL(name, call)                                                                         \
  do {                                                                                                \
    memset(sb, SENTINEL, NBYTES);                                                                     \
    memset(rb, SENTINEL, NBYTES);                                                                     \
    double t0 = semNow();                                                                             \
    SEM_OK(call);                                                                                     \
    if (st) SEM_OK(collStreamSynchronize(st));                                                        \
    double dt = semNow() - t0;                                                                        \
    SEM_CHECK(dt < LIMIT_S, "%s (%s) took %.3f s", name, how[mode], dt);                              \
    SEM_CHECK(untouched(sb) && untouched(rb), "%s (%s) wrote a sentinel byte", name, how[mode]);      \
  } while (0)

static int body(collComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  (void)nranks;
  int fails = 0;
  unsigned char sbuf[NBYTES], rbuf[NBYTES];
  unsigned char* sb = sbuf;
  unsigned char* rb = rbuf;
  static const char* how[] = {"valid buffers", "NULL buffers", "valid buffers, stream", "NULL buffers, stream"};
  collStream_t stream = NULL;
  if (!SEM_OK(collStreamCreate(comm, &stream))) return fails;
  for (int mode = 0; mode < 4; mode++) {
    int null = mode & 1;
    collStream_t st = mode >= 2 ? stream : NULL;
    void* s = null ? NULL : sbuf;
    void* r = null ? NULL : rbuf;
    ZERO_CALL("allgather", collAllGather(s, r, 0, collFloat32, comm, st));
    ZERO_CALL("allreduce", collAllReduce(s, r, 0, collFloat32, collSum, comm, st));
    ZERO_CALL("reduce_scatter", collReduceScatter(s, r, 0, collFloat32, collSum, comm, st));
    ZERO_CALL("broadcast", collBroadcast(s, r, 0, collFloat32, 0, comm, st));
    ZERO_CALL("reduce", collReduce(s, r, 0, collFloat32, collSum, 0, comm, st));
    if (rank <= 1) {
      int peer = 1 - rank;
      memset(sb, SENTINEL, NBYTES);
      memset(rb, SENTINEL, NBYTES);
      double t0 = semNow();
      SEM_OK(collGroupStart());
      SEM_OK(collSend(s, 0, collFloat32, peer, comm, st));
      SEM_OK(collRecv(r, 0, collFloat32, peer, comm, st));
      SEM_OK(collGroupEnd());
      if (st) SEM_OK(collStreamSynchronize(st));
      double dt = semNow() - t0;
      SEM_CHECK(dt < LIMIT_S, "grouped send/recv (%s) took %.3f s", how[mode], dt);
      SEM_CHECK(untouched(sb) && untouched(rb), "grouped send/recv (%s) wrote a sentinel byte", how[mode]);
    }
  }
  SEM_OK(collStreamDestroy(stream));
  float v = (float)(rank + 1), out = -1.0f;
  SEM_OK(collAllReduce(&v, &out, 1, collFloat32, collSum, comm, NULL));
  SEM_CHECK(out == 10.0f, "all-reduce after the zero-count calls gave %g, expected 10", (double)out);
  return fails;
}

int main(void) {
  int rc = collMpRun(4, 60, body, NULL);
  printf("BR-01 zero-count calls on 4 ranks: %s\n", rc ? "FAILED" : "passed");
  return rc;
}
