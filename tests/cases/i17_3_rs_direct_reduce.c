/*
 * i17_3_rs_direct_reduce.c - issue 17 point 3: a reduce-scatter (and the
 * ring all-reduce's reduce-scatter half) over shm reduces what a peer sends
 * as it reads it, from the ring's slots or, single copy, from the peer's
 * buffer a 64 KiB piece at a time (collShmIrecvReduce), instead of landing
 * the message in a staging copy of the whole slice and reducing from that
 * (5 bytes of memory traffic per result byte where 3 do).
 *
 * Run with COLL_ALGO=ring and COLL_MAILBOX_BYTES=0 (every call, even of one
 * element, runs the ring schedule over shm), once with single copy forced on
 * from 4 KiB (COLL_SHM_CMA_THRESHOLD=4096: the large messages are read with
 * process_vm_readv) and once off (=0: everything through the ring's slots).
 * 2, 3 and 4 ranks; every type and op (sum, prod, max, min, avg);
 * reduce-scatter and all-reduce, out of place and in place; counts 1, 7,
 * 1031 and (float16, float32, float64, int8) 100003. Element i of rank r is
 * a small integer chosen so that every result is exact in every type.
 * Expected: every element equal to the reduction computed here, nothing
 * written outside the result; afterwards no channel of the communicator
 * holds a staging buffer (before: one slice of it per channel, up to the
 * chunk size), the receives over shm counted as reduced in place
 * (reduceMsgs > 0) and, with single copy on, messages read by single copy.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../integration/mp_harness.h"
#include "core/comm.h"
#include "reduce/reduce.h"
#include "transports/shm/shm.h"

#include "helper_check.h"
#include "helper_exact.h"
#define BIG 100003

static int bigType(collDataType_t t) {
  return t == collFloat16 || t == collFloat32 || t == collFloat64 || t == collInt8;
}

static int body(collComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  static const size_t kCounts[] = {1, 7, 1031, BIG};
  int fails = 0;
  size_t maxBytes = (size_t)nranks * BIG * 8;
  char* send = malloc(maxBytes);
  char* recv = malloc(maxBytes);
  if (!send || !recv) return 1;
  for (size_t ti = 0; ti < sizeof kTypes / sizeof kTypes[0]; ti++)
    for (size_t oi = 0; oi < sizeof kOps / sizeof kOps[0]; oi++)
      for (int rs = 0; rs < 2; rs++)
        for (int inPlace = 0; inPlace < 2; inPlace++)
          for (size_t ci = 0; ci < sizeof kCounts / sizeof kCounts[0]; ci++) {
            collDataType_t t = kTypes[ti];
            collRedOp_t op = kOps[oi];
            size_t count = kCounts[ci], es = collTypeSize(t), blocks = rs ? (size_t)nranks : 1;
            if (count == BIG && !bigType(t)) continue;
            char* in = inPlace ? recv : send;
            char* out = inPlace && rs ? recv + (size_t)rank * count * es : recv;
            memset(recv, 0xee, maxBytes);
            for (size_t b = 0; b < blocks; b++)
              for (size_t i = 0; i < count; i++) put(t, in, b * count + i, val(op, rank, b * count + i, nranks));
            collResult_t r = rs ? collReduceScatter(in, out, count, t, op, comm, NULL)
                                : collAllReduce(in, out, count, t, op, comm, NULL);
            CHECK_RANKED(r == collSuccess, "%s %s %s count %zu: %s", rs ? "reduce-scatter" : "all-reduce", kTypeNames[ti],
                  kOpNames[oi], count, collGetLastError(comm));
            if (r != collSuccess) return fails;
            size_t wrong = 0, first = 0;
            for (size_t i = 0; i < count; i++) {
              size_t gi = (rs ? (size_t)rank * count : 0) + i;
              if (get(t, out, i) != (double)expect(op, gi, nranks) && wrong++ == 0) first = i;
            }
            CHECK_RANKED(wrong == 0, "%s %s %s %s count %zu: %zu wrong, first [%zu] = %g, want %lld",
                  rs ? "reduce-scatter" : "all-reduce", kTypeNames[ti], kOpNames[oi],
                  inPlace ? "in place" : "out of place", count, wrong, first, get(t, out, first),
                  (long long)expect(op, (rs ? (size_t)rank * count : 0) + first, nranks));
            if (!inPlace) { /* out of place: nothing written past the result */
              size_t past = 0;
              for (size_t k = count * es; k < maxBytes; k++) past += (unsigned char)recv[k] != 0xee;
              CHECK_RANKED(past == 0, "%s %s count %zu: %zu bytes written past the result",
                    rs ? "reduce-scatter" : "all-reduce", kTypeNames[ti], count, past);
            }
          }
  size_t staging = 0;
  unsigned long long reduced = 0, cma = 0;
  for (int c = 0; c < comm->maxChannels; c++) staging += comm->channels[c].stagingBytes;
  for (int i = 0; i < comm->maxChannels * nranks; i++) {
    if (!comm->conns[i].recvComm) continue;
    collShmStats st;
    collShmGetStats(comm->conns[i].recvComm, &st);
    reduced += st.reduceMsgs;
    cma += st.cmaMsgs;
  }
  CHECK_RANKED(staging == 0, "the channels hold %zu bytes of staging (RECV_REDUCE landed in a copy)", staging);
  CHECK_RANKED(reduced > 0, "no receive over shm was reduced in place");
  const char* th = getenv("COLL_SHM_CMA_THRESHOLD");
  if (th && strcmp(th, "0") != 0) CHECK_RANKED(cma > 0, "single copy forced on, but no message was read by single copy");
  if (rank == 0) printf("%d ranks: %llu receives reduced in place, %llu by single copy\n", nranks, reduced, cma);
  free(send);
  free(recv);
  return fails;
}

int main(void) {
  int rc = 0;
  for (int n = 2; n <= 4 && rc == 0; n++) rc = collMpRun(n, 150, body, NULL);
  printf("i17_3_rs_direct_reduce (COLL_SHM_CMA_THRESHOLD=%s): %s\n",
         getenv("COLL_SHM_CMA_THRESHOLD") ? getenv("COLL_SHM_CMA_THRESHOLD") : "unset", rc ? "FAILED" : "passed");
  return rc;
}
