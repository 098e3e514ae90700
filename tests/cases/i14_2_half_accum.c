/*
 * Issue 14.2: float16/bfloat16 sums and averages lose nothing but their
 * final rounding when the exact result is representable, and an average
 * cannot overflow.
 *
 * exact   4 ranks; element i of rank r holds v[p_i(r)], p_i the (i mod 24)-th
 *         permutation of 4 and v = {1, e, e, -1} (e = 2^-11 for float16,
 *         2^-8 for bfloat16: 1 + e is a tie that rounds back to 1). Every
 *         order of summation meets a partial sum that the type cannot hold;
 *         the exact sum 2e and average e/2 are representable. all-reduce
 *         (out-of-place and in-place), reduce-scatter (every block) and
 *         reduce (root 0 and root 3); counts 960 (through the mailbox when
 *         it is on) and 24000 (the schedules). Expected: exactly 2e and e/2
 *         in every element, and the same bits on every rank.
 *   native: COLL_HALF_ACCUM=native rounds at every step (NCCL's bytes): the
 *         same calls give the same bits on every rank, and some element
 *         differs from the exact result.
 * avg     float16 all-reduce avg of 30000 on 3 and 4 ranks gives 30000 (the
 *         sum 90000 / 120000 overflows float16), in both modes; 2^-24 (the
 *         smallest subnormal) on 4 ranks gives 2^-24, and 0 in native mode
 *         (which pre-multiplies by 1/4, as NCCL does: documented); the sum of
 *         4 x 30000 is +inf.
 * One set of processes per mode (the mode is read once per process); the
 * 3-rank average runs on a split. i14_2_half_accum.cmake runs it with every
 * reducing algorithm forced, the mailbox off.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../integration/mp_harness.h"
#include "helper_data.h"
#include "reduce/reduce.h"

#define NR 4
static int perms[24][NR];

static void makePerms(void) {
  int k = 0;
  for (int a = 0; a < NR; a++)
    for (int b = 0; b < NR; b++)
      for (int c = 0; c < NR; c++)
        for (int d = 0; d < NR; d++)
          if (a != b && a != c && a != d && b != c && b != d && c != d) {
            perms[k][0] = a, perms[k][1] = b, perms[k][2] = c, perms[k][3] = d;
            k++;
          }
}

static uint16_t toT(collDataType_t t, float f) { return t == collFloat16 ? collFloatToHalf(f) : collFloatToBf16(f); }
static float fromT(collDataType_t t, uint16_t h) { return t == collFloat16 ? collHalfToFloat(h) : collBf16ToFloat(h); }

typedef struct {
  int native;
  dataShared* seen;
} exactArg;

/* value of global element g on rank r */
static uint16_t valueAt(collDataType_t t, size_t g, int r) {
  float e = t == collFloat16 ? 0x1p-11f : 0x1p-8f;
  const float v[NR] = {1.0f, e, e, -1.0f};
  return toT(t, v[perms[g % 24][r]]);
}

/* Checks n results against the exact value; counts inexact ones. */
static size_t inexact(collDataType_t t, const uint16_t* out, size_t n, float want) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += fromT(t, out[i]) != want;
  return bad;
}

static int exactBody(collComm_t comm, int rank, int nranks, void* p) {
  exactArg* a = p;
  int fails = 0;
  static const size_t counts[2] = {960, 24000};
  static const collDataType_t types[2] = {collFloat16, collBfloat16};
  static const collRedOp_t ops[2] = {collSum, collAvg};
  size_t maxc = 24000 * NR;
  uint16_t* send = malloc(maxc * 2);
  uint16_t* recv = malloc(maxc * 2);
  uint64_t digest = 1469598103934665603ull;
  size_t inexactTotal = 0;
  for (int ti = 0; ti < 2; ti++)
    for (int oi = 0; oi < 2; oi++)
      for (int ci = 0; ci < 2; ci++) {
        collDataType_t t = types[ti];
        collRedOp_t op = ops[oi];
        size_t n = counts[ci];
        float e = t == collFloat16 ? 0x1p-11f : 0x1p-8f, want = op == collSum ? 2 * e : e / 2;
        const char* tn = t == collFloat16 ? "float16" : "bfloat16";
        const char* on = op == collSum ? "sum" : "avg";
        for (int mode = 0; mode < 5; mode++) { /* AR out, AR in, RS, reduce root 0, reduce root 3 */
          size_t in = mode == 2 ? n * (size_t)nranks : n, outN = n;
          for (size_t g = 0; g < in; g++) send[g] = valueAt(t, g, rank);
          memset(recv, 0xff, maxc * 2);
          collResult_t r;
          const char* what;
          int root = mode == 4 ? nranks - 1 : 0, has = 1;
          if (mode == 0) {
            what = "all-reduce";
            r = collAllReduce(send, recv, n, t, op, comm, NULL);
          } else if (mode == 1) {
            what = "all-reduce in-place";
            memcpy(recv, send, n * 2);
            r = collAllReduce(recv, recv, n, t, op, comm, NULL);
          } else if (mode == 2) {
            what = "reduce-scatter";
            r = collReduceScatter(send, recv, n, t, op, comm, NULL);
          } else {
            what = "reduce";
            r = collReduce(send, recv, n, t, op, root, comm, NULL);
            has = rank == root;
          }
          DATA_CHECK(r == collSuccess, "%s %s %s n=%zu: %s", what, tn, on, n, collGetLastError(comm));
          if (!has || r != collSuccess) continue;
          size_t bad = inexact(t, recv, outN, want);
          inexactTotal += bad;
          if (mode < 2) digest = (digest ^ dataDigest(recv, outN * 2)) * 1099511628211ull;
          if (!a->native)
            DATA_CHECK(bad == 0, "%s %s %s n=%zu root %d: %zu of %zu elements are not exactly %g (first: %g)", what,
                       tn, on, n, root, bad, outN, (double)want, (double)fromT(t, recv[0]));
          DATA_CHECK(recv[outN] == 0xffff, "%s %s %s n=%zu: wrote past the result", what, tn, on, n);
        }
      }
  /* the digest covers the all-reduces: every rank must hold the same bits */
  a->seen->c[0].rank[rank].digest = digest;
  a->seen->c[0].rank[rank].res = (int)(inexactTotal > 0);
  free(send);
  free(recv);
  return fails;
}

typedef struct {
  float value, want, wantSum;
  int native;
} avgArg;

static int avgBody(collComm_t comm, int rank, int nranks, void* p) {
  avgArg* a = p;
  int fails = 0;
  enum { N = 1024 };
  static uint16_t send[N], recv[N + 1];
  for (int i = 0; i < N; i++) send[i] = collFloatToHalf(a->value);
  for (int inPlace = 0; inPlace < 2; inPlace++) {
    for (int rs = 0; rs < 2; rs++) {
      memset(recv, 0xff, sizeof recv);
      if (inPlace) memcpy(recv, send, sizeof send);
      collResult_t r = rs ? collReduceScatter(send, recv, N / (size_t)nranks, collFloat16, collAvg, comm, NULL)
                          : collAllReduce(inPlace ? recv : send, recv, N, collFloat16, collAvg, comm, NULL);
      DATA_CHECK(r == collSuccess, "avg: %s", collGetLastError(comm));
      size_t n = rs ? N / (size_t)nranks : N;
      for (size_t i = 0; i < n; i++)
        if (collHalfToFloat(recv[i]) != a->want) {
          DATA_CHECK(0, "rank %d %s avg of %g on %d ranks%s: element %zu is %g, expected %g", rank,
                     rs ? "reduce-scatter" : "all-reduce", (double)a->value, nranks, a->native ? " (native)" : "", i,
                     (double)collHalfToFloat(recv[i]), (double)a->want);
          break;
        }
      if (rs) break; /* reduce-scatter: out-of-place only */
    }
  }
  collResult_t r = collAllReduce(send, recv, N, collFloat16, collSum, comm, NULL);
  DATA_CHECK(r == collSuccess, "sum: %s", collGetLastError(comm));
  for (int i = 0; i < N; i++)
    if (!(collHalfToFloat(recv[i]) == a->wantSum || (isnan(a->wantSum) && isnan(collHalfToFloat(recv[i]))))) {
      DATA_CHECK(0, "rank %d sum of %g on %d ranks: element %d is %g, expected %g", rank, (double)a->value, nranks, i,
                 (double)collHalfToFloat(recv[i]), (double)a->wantSum);
      break;
    }
  return fails;
}

/* Everything of one mode in one set of processes: the exact sums and the
 * averages on the 4 ranks, then the average on a 3-rank split. */
static int modeBody(collComm_t comm, int rank, int nranks, void* p) {
  exactArg* ea = p;
  int native = ea->native, fails = exactBody(comm, rank, nranks, ea);
  const float sub = 0x1p-24f;
  avgArg four[2] = {{30000.0f, 30000.0f, INFINITY, native}, {sub, native ? 0.0f : sub, 4 * sub, native}};
  for (int k = 0; k < 2; k++) {
    int f = avgBody(comm, rank, nranks, &four[k]);
    DATA_CHECK(f == 0, "float16 avg of %g on 4 ranks%s", (double)four[k].value, native ? " (native)" : "");
    fails += f;
  }
  collComm_t three = NULL;
  DATA_CHECK(collCommSplit(comm, rank < 3 ? 0 : COLL_SPLIT_NOCOLOR, rank, &three, NULL) == collSuccess, "split: %s",
             collGetLastError(comm));
  if (three) {
    avgArg a3 = {30000.0f, 30000.0f, INFINITY, native};
    int f = avgBody(three, rank, 3, &a3);
    DATA_CHECK(f == 0, "float16 avg of 30000 on 3 ranks%s", native ? " (native)" : "");
    fails += f;
    DATA_CHECK(collCommDestroy(three) == collSuccess, "destroy: %s", collGetLastError(NULL));
  }
  return fails;
}

int main(void) {
  makePerms();
  dataShared* seen = dataSharedMap();
  int fails = 0;
  double t0 = dataNow();
  for (int native = 0; native < 2; native++) { /* COLL_HALF_ACCUM is read once per process */
    if (native) setenv("COLL_HALF_ACCUM", "native", 1);
    else unsetenv("COLL_HALF_ACCUM");
    const char* mode = native ? "COLL_HALF_ACCUM=native" : "default (float)";
    memset(seen, 0, sizeof *seen);
    exactArg ea = {native, seen};
    int f0 = fails;
    DATA_CHECK(collMpRun(NR, 240, modeBody, &ea) == 0, "%s: a rank failed", mode);
    for (int r = 1; r < NR; r++)
      DATA_CHECK(seen->c[0].rank[r].digest == seen->c[0].rank[0].digest,
                 "%s: rank %d's all-reduce results differ from rank 0's bits", mode, r);
    if (native)
      DATA_CHECK(seen->c[0].rank[0].res == 1, "native: every element exact: the knob did not round per step");
    printf("float16/bfloat16 exact sums and averages, float16 avg of 30000 and 2^-24, %s: %s\n", mode,
           fails > f0 ? "FAILED" : "passed");
  }
  printf("issue 14.2 half-precision accumulation (%.1f s): %s\n", dataNow() - t0, fails ? "FAILED" : "passed");
  return fails ? 1 : 0;
}
