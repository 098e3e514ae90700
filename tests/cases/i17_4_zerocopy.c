/*
 * i17_4_zerocopy.c - issue 17 point 4: all-reduce and reduce-scatter on
 * collMemAlloc buffers read the peers' inputs in place (engine/zerocopy.c),
 * with exact results.
 *
 * `exact` (run with COLL_ALGO=zerocopy: every such call takes the path,
 * whatever its size): 1..8 ranks; every type and op (sum, prod, max, min,
 * avg); all-reduce and reduce-scatter; out of place and in place; counts 1,
 * 5 and 1003 (fewer elements than ranks: empty slices). Element i of rank r
 * is a small integer chosen so that every result is exact in every type
 * (avg: 2((i + r) mod n), whose sum n(n-1) divides by n; prod: 1 or 2, at
 * most 3 twos). Expected: every element equal to the sum / product / max /
 * min / average computed here; on 2+ ranks the communicator's counters show
 * every call under "zerocopy" (on 1 rank there is nothing to share).
 *
 * `bits` (COLL_ALGO=direct,zerocopy, COLL_NCHANNELS=1: the tuner picks
 * zerocopy from 1 MiB up, and direct on one channel folds in rank order;
 * with more, channel c renumbers the ranks): 2, 3 and 4 ranks; float,
 * float16, bfloat16 and double sum and avg of pseudo-random data in [-1, 1),
 * 524291 elements per rank (reduce-scatter: per block): the result on
 * collMemAlloc buffers must equal, bit for bit, the same call on malloc'd
 * buffers (which runs direct, the existing path that reduces in rank order,
 * float16/bfloat16 in float32). Then the same with rank 0's buffers
 * malloc'd: every rank falls back (counters: no new zerocopy call), same
 * bits.
 *
 * `reuse` (bodyReuse): buffers used again, swapped, at offsets, new, freed
 * and allocated again, after a fallback: exact sums (round 2's skip).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../integration/mp_harness.h"
#include "helper_zc.h"
#include "reduce/reduce.h"

#include "helper_check.h"
#include "helper_exact.h"

static int bodyExact(collComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  static const size_t kCounts[] = {1, 5, 1003};
  int fails = 0;
  size_t maxBytes = (size_t)nranks * 1003 * 8;
  char *send = NULL, *recv = NULL;
  if (collMemAlloc((void**)&send, maxBytes) != collSuccess || collMemAlloc((void**)&recv, maxBytes) != collSuccess) {
    printf("rank %d: collMemAlloc: %s\n", rank, collGetLastError(NULL));
    return 1;
  }
  uint64_t calls = 0;
  for (size_t ti = 0; ti < sizeof kTypes / sizeof kTypes[0]; ti++)
    for (size_t oi = 0; oi < sizeof kOps / sizeof kOps[0]; oi++)
      for (int rs = 0; rs < 2; rs++)
        for (int inPlace = 0; inPlace < 2; inPlace++)
          for (size_t ci = 0; ci < 3; ci++) {
            collDataType_t t = kTypes[ti];
            collRedOp_t op = kOps[oi];
            size_t count = kCounts[ci], es = collTypeSize(t), blocks = rs ? (size_t)nranks : 1;
            /* in place: one buffer; reduce-scatter's result is block `rank` of it */
            char* in = inPlace ? recv : send;
            char* out = inPlace && rs ? recv + (size_t)rank * count * es : recv;
            memset(recv, 0xee, maxBytes);
            for (size_t b = 0; b < blocks; b++)
              for (size_t i = 0; i < count; i++) put(t, in, b * count + i, val(op, rank, b * count + i, nranks));
            collResult_t r = rs ? collReduceScatter(in, out, count, t, op, comm, NULL)
                                : collAllReduce(in, out, count, t, op, comm, NULL);
            calls++;
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
            if (!rs && !inPlace) { /* nothing written past the result */
              size_t past = 0;
              for (size_t k = count * es; k < maxBytes; k++) past += (unsigned char)recv[k] != 0xee;
              CHECK_RANKED(past == 0, "all-reduce %s count %zu: %zu bytes written past the result", kTypeNames[ti], count,
                    past);
            }
          }
  if (nranks > 1) CHECK_RANKED(zcCalls(comm) == calls, "%llu of %llu calls ran zerocopy", (unsigned long long)zcCalls(comm),
                        (unsigned long long)calls);
  collMemFree(send);
  collMemFree(recv);
  return fails;
}

static uint64_t xorshift(uint64_t* s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

static void fillRandom(collDataType_t t, void* b, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) {
    double v = (double)(xorshift(&seed) >> 11) / 9007199254740992.0 * 2 - 1;
    if (t == collFloat64) ((double*)b)[i] = v;
    else if (t == collFloat32) ((float*)b)[i] = (float)v;
    else {
      float f = (float)v;
      collReduceNarrow((char*)b + 2 * i, &f, 1, t, 1);
    }
  }
}

static int bodyBits(collComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  static const collDataType_t types[] = {collFloat32, collFloat16, collBfloat16, collFloat64};
  static const char* names[] = {"float32", "float16", "bfloat16", "float64"};
  static const collRedOp_t ops[] = {collSum, collAvg};
  const size_t count = 524291; /* float16: 1 MiB per rank, where the tuner starts to pick zerocopy */
  int fails = 0;
  size_t bytes = (size_t)nranks * count * 8;
  char *zs = NULL, *zr = NULL, *ms = malloc(bytes), *mr = malloc(bytes + 64);
  if (!ms || !mr || collMemAlloc((void**)&zs, bytes) != collSuccess || collMemAlloc((void**)&zr, bytes) != collSuccess) {
    printf("rank %d: allocation failed: %s\n", rank, collGetLastError(NULL));
    return 1;
  }
  for (int mixed = 0; mixed < 2; mixed++)
    for (size_t ti = 0; ti < 4; ti++)
      for (int oi = 0; oi < 2; oi++)
        for (int rs = 0; rs < 2; rs++) {
          collDataType_t t = types[ti];
          size_t es = collTypeSize(t), n = rs ? (size_t)nranks * count : count;
          fillRandom(t, ms, n, 1234 + (uint64_t)rank * 77 + ti * 5 + (uint64_t)oi);
          memcpy(zs, ms, n * es);
          /* mixed: rank 0 uses malloc'd buffers for the "zero-copy" call too */
          char* s = mixed && rank == 0 ? ms : zs;
          /* past the first call's result (count x 8 bytes at most), 16-byte aligned */
          char* d = mixed && rank == 0 ? mr + ((count * 8 + 15) & ~(size_t)15) : zr;
          uint64_t before = zcCalls(comm);
          collResult_t r1 = rs ? collReduceScatter(ms, mr, count, t, ops[oi], comm, NULL)
                               : collAllReduce(ms, mr, count, t, ops[oi], comm, NULL);
          uint64_t mid = zcCalls(comm);
          collResult_t r2 = rs ? collReduceScatter(s, d, count, t, ops[oi], comm, NULL)
                               : collAllReduce(s, d, count, t, ops[oi], comm, NULL);
          uint64_t after = zcCalls(comm);
          CHECK_RANKED(r1 == collSuccess && r2 == collSuccess, "%s: %s", names[ti], collGetLastError(comm));
          if (r1 != collSuccess || r2 != collSuccess) return fails;
          CHECK_RANKED(mid == before, "%s %s on malloc'd buffers ran zerocopy", names[ti], rs ? "reduce-scatter" : "all-reduce");
          CHECK_RANKED(after == mid + (mixed ? 0 : 1), "%s %s%s: zerocopy calls %llu -> %llu", names[ti],
                rs ? "reduce-scatter" : "all-reduce", mixed ? " (rank 0 malloc'd)" : "", (unsigned long long)mid,
                (unsigned long long)after);
          size_t diff = 0;
          for (size_t k = 0; k < count * es; k++) diff += mr[k] != d[k];
          CHECK_RANKED(diff == 0, "%s %s %s%s: %zu bytes differ from the malloc'd call", names[ti], oi ? "avg" : "sum",
                rs ? "reduce-scatter" : "all-reduce", mixed ? " (rank 0 malloc'd)" : "", diff);
        }
  collMemFree(zs);
  collMemFree(zr);
  free(ms);
  free(mr);
  return fails;
}

/* One all-reduce of float sums from send to recv (count elements) and its
 * check: element i is the sum over ranks q of (q + 1) (i % 7 + k), exact. */
static int reuseCall(collComm_t comm, int rank, int nranks, float* send, float* recv, size_t count, int k,
                     const char* what) {
  int fails = 0;
  for (size_t i = 0; i < count; i++) send[i] = (float)((rank + 1) * (int)(i % 7 + (size_t)k));
  collResult_t r = collAllReduce(send, recv, count, collFloat32, collSum, comm, NULL);
  CHECK_RANKED(r == collSuccess, "%s: %s", what, collGetLastError(comm));
  if (r != collSuccess) return fails;
  size_t wrong = 0;
  for (size_t i = 0; i < count; i++)
    wrong += recv[i] != (float)(nranks * (nranks + 1) / 2 * (int)(i % 7 + (size_t)k));
  CHECK_RANKED(wrong == 0, "%s: %zu of %zu elements wrong", what, wrong, count);
  return fails;
}

/* `reuse` (COLL_ALGO=direct,zerocopy: from 1 MiB zerocopy, a fallback runs
 * direct and counts there): a call whose allocations every rank mapped
 * in the last call skips the round that checks the mappings
 * (zerocopy.h); the calls that may skip it (the same buffers, swapped, at
 * another offset) and those that may not (a new allocation; one freed and
 * allocated again; after a call that fell back to the usual path) all give
 * exact sums and run zerocopy (the fallback: not). */
static int bodyReuse(collComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  const size_t count = 300007, bytes = count * sizeof(float) + 4096; /* 1.2 MiB: zerocopy (the tuner) */
  int fails = 0;
  float *a = NULL, *b = NULL, *c = NULL, *m = malloc(bytes);
  if (!m || collMemAlloc((void**)&a, bytes) != collSuccess || collMemAlloc((void**)&b, bytes) != collSuccess ||
      collMemAlloc((void**)&c, bytes) != collSuccess) {
    printf("rank %d: allocation failed: %s\n", rank, collGetLastError(NULL));
    return 1;
  }
  uint64_t z0 = zcCalls(comm);
  fails += reuseCall(comm, rank, nranks, a, b, count, 1, "a -> b (first)");
  fails += reuseCall(comm, rank, nranks, a, b, count, 2, "a -> b (again)");
  fails += reuseCall(comm, rank, nranks, b, a, count, 3, "b -> a (swapped)");
  fails += reuseCall(comm, rank, nranks, a + 1000, b + 3, count - 1000, 4, "a + 1000 -> b + 3 (offsets)");
  fails += reuseCall(comm, rank, nranks, c, b, count, 5, "c -> b (a new allocation)");
  fails += reuseCall(comm, rank, nranks, a, b, count, 6, "a -> b (a known before c)");
  collMemFree(a);
  a = NULL;
  if (collMemAlloc((void**)&a, bytes) != collSuccess) {
    printf("rank %d: collMemAlloc: %s\n", rank, collGetLastError(NULL));
    return fails + 1;
  }
  fails += reuseCall(comm, rank, nranks, a, b, count, 7, "a' -> b (freed and allocated again)");
  uint64_t z1 = zcCalls(comm);
  /* rank 0 on malloc'd memory: every rank falls back */
  fails += reuseCall(comm, rank, nranks, rank == 0 ? m : a, b, count, 8, "rank 0 malloc'd -> b");
  uint64_t z2 = zcCalls(comm);
  fails += reuseCall(comm, rank, nranks, a, b, count, 9, "a' -> b (after the fallback)");
  fails += reuseCall(comm, rank, nranks, b, c, count, 10, "b -> c");
  uint64_t z3 = zcCalls(comm);
  if (nranks > 1)
    CHECK_RANKED(z1 - z0 == 7 && z2 == z1 && z3 - z2 == 2, "zerocopy calls %llu, %llu, %llu (want 7, 0, 2)",
                 (unsigned long long)(z1 - z0), (unsigned long long)(z2 - z1), (unsigned long long)(z3 - z2));
  collMemFree(a);
  collMemFree(b);
  collMemFree(c);
  free(m);
  return fails;
}

int main(int argc, char** argv) {
  int bits = argc > 1 && strcmp(argv[1], "bits") == 0;
  int reuse = argc > 1 && strcmp(argv[1], "reuse") == 0;
  int rc = 0;
  if (reuse) {
    for (int n = 2; n <= 4 && rc == 0; n++) rc = collMpRun(n, 120, bodyReuse, NULL);
    printf("i17_4_zerocopy reuse: %s\n", rc ? "FAILED" : "passed");
    return rc;
  }
  if (bits) {
    for (int n = 2; n <= 4 && rc == 0; n++) rc = collMpRun(n, 120, bodyBits, NULL);
  } else {
    for (int n = 1; n <= 8 && rc == 0; n++) rc = collMpRun(n, 120, bodyExact, NULL);
  }
  printf("i17_4_zerocopy %s: %s\n", bits ? "bits" : "exact", rc ? "FAILED" : "passed");
  return rc;
}
