/*
 * BR-32: integer sums and products wrap modulo 2^n (two's complement),
 * identically on every rank and in place or not, without undefined
 * behaviour (NVIDIA/nccl#422).
 *
 * 2 ranks, out-of-place and in-place, counts 1 and 1,000,003 (every element
 * the same), all-reduce:
 *   int8 sum 120 + 100 = -36; uint8 sum 200 + 100 = 44; int32 sum
 *   2147483647 + 1 = -2147483648; uint32 sum 4294967295 + 2 = 1; int64 sum
 *   INT64_MAX + 1 = INT64_MIN; uint64 sum 2^64-1 + 1 = 0; int32 prod
 *   65536 * 65536 = 0; int8 prod 16 * 16 = 0 and -128 * -1 = -128.
 * 4 ranks: int8 sum of 100 on every rank = -112; int32 sum of 2^30 = 0.
 * Never saturated or widened. ctest runs it in the ASan+UBSan build too,
 * where any signed overflow in the library aborts (-fno-sanitize-recover).
 * Beyond the recipe: reduce-scatter and reduce (root 0) of the same sums.
 * One set of 4 processes: the 2-rank part runs on a split of ranks 0-1.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../integration/mp_harness.h"
#include "helper_data.h"
#include "reduce/reduce.h"

#define BIG 1000003

typedef struct {
  collDataType_t t;
  collRedOp_t op;
  int64_t v[4]; /* value on rank r (as the type's bits) */
  int64_t want;
  const char* what;
} wrapCase;

static void fill(void* buf, collDataType_t t, size_t n, int64_t v) {
  for (size_t i = 0; i < n; i++) switch (t) {
      case collInt8: ((int8_t*)buf)[i] = (int8_t)v; break;
      case collUint8: ((uint8_t*)buf)[i] = (uint8_t)v; break;
      case collInt32: ((int32_t*)buf)[i] = (int32_t)v; break;
      case collUint32: ((uint32_t*)buf)[i] = (uint32_t)v; break;
      default: ((int64_t*)buf)[i] = v; break;
    }
}

/* Index of the first element that differs from want, or n. */
static size_t firstBad(const void* buf, collDataType_t t, size_t n, int64_t want) {
  size_t es = collTypeSize(t);
  unsigned char w[8];
  fill(w, t, 1, want);
  for (size_t i = 0; i < n; i++)
    if (memcmp((const char*)buf + i * es, w, es) != 0) return i;
  return n;
}

static int64_t elem(const void* buf, collDataType_t t, size_t i) {
  switch (t) {
    case collInt8: return ((const int8_t*)buf)[i];
    case collUint8: return ((const uint8_t*)buf)[i];
    case collInt32: return ((const int32_t*)buf)[i];
    case collUint32: return ((const uint32_t*)buf)[i];
    default: return ((const int64_t*)buf)[i];
  }
}

typedef struct {
  const wrapCase* cases;
  int ncases;
} wrapSet;

static int body(collComm_t comm, int rank, int nranks, void* arg) {
  const wrapSet* set = arg;
  int fails = 0;
  size_t cap = (size_t)BIG * 8 * (size_t)nranks + 8;
  char* send = malloc(cap);
  char* recv = malloc(cap);
  for (int k = 0; k < set->ncases; k++) {
    const wrapCase* c = &set->cases[k];
    size_t es = collTypeSize(c->t);
    for (int big = 0; big < 2; big++) {
      size_t n = big ? BIG : 1;
      for (int mode = 0; mode < 4; mode++) { /* out-of-place, in-place, reduce-scatter, reduce */
        size_t in = mode == 2 ? n * (size_t)nranks : n;
        fill(send, c->t, in, c->v[rank]);
        memset(recv, 0x5a, cap);
        collResult_t r;
        if (mode == 0) r = collAllReduce(send, recv, n, c->t, c->op, comm, NULL);
        else if (mode == 1) {
          memcpy(recv, send, n * es);
          r = collAllReduce(recv, recv, n, c->t, c->op, comm, NULL);
        } else if (mode == 2) r = collReduceScatter(send, recv, n, c->t, c->op, comm, NULL);
        else r = collReduce(send, recv, n, c->t, c->op, 0, comm, NULL);
        static const char* modes[] = {"all-reduce", "all-reduce in-place", "reduce-scatter", "reduce"};
        DATA_CHECK(r == collSuccess, "%s %s n=%zu: %s", c->what, modes[mode], n, collGetLastError(comm));
        if (r != collSuccess || (mode == 3 && rank != 0)) continue;
        size_t bad = firstBad(recv, c->t, n, c->want);
        DATA_CHECK(bad == n, "rank %d %s %s n=%zu: element %zu is %lld, expected %lld", rank, c->what, modes[mode], n,
                   bad, (long long)(bad < n ? elem(recv, c->t, bad) : 0), (long long)c->want);
        DATA_CHECK((unsigned char)recv[n * es] == 0x5a, "rank %d %s %s n=%zu: wrote past the count", rank, c->what,
                   modes[mode], n);
      }
    }
  }
  free(send);
  free(recv);
  return fails;
}

static const wrapCase two[] = {
    {collInt8, collSum, {120, 100}, -36, "int8 sum 120 + 100"},
    {collUint8, collSum, {200, 100}, 44, "uint8 sum 200 + 100"},
    {collInt32, collSum, {INT32_MAX, 1}, INT32_MIN, "int32 sum INT32_MAX + 1"},
    {collUint32, collSum, {UINT32_MAX, 2}, 1, "uint32 sum 4294967295 + 2"},
    {collInt64, collSum, {INT64_MAX, 1}, INT64_MIN, "int64 sum INT64_MAX + 1"},
    {collUint64, collSum, {-1, 1}, 0, "uint64 sum 2^64-1 + 1"},
    {collInt32, collProd, {65536, 65536}, 0, "int32 prod 65536 * 65536"},
    {collInt8, collProd, {16, 16}, 0, "int8 prod 16 * 16"},
    {collInt8, collProd, {-128, -1}, -128, "int8 prod -128 * -1"},
    {collInt64, collProd, {INT64_MIN, -1}, INT64_MIN, "int64 prod INT64_MIN * -1 (extension)"},
    {collUint32, collProd, {UINT32_MAX, UINT32_MAX}, 1, "uint32 prod (2^32-1)^2 (extension)"},
};
static const wrapCase four[] = {
    {collInt8, collSum, {100, 100, 100, 100}, -112, "int8 sum 4 x 100"},
    {collInt32, collSum, {1 << 30, 1 << 30, 1 << 30, 1 << 30}, 0, "int32 sum 4 x 2^30"},
};

static int all(collComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  int fails = 0;
  collComm_t pair = NULL;
  DATA_CHECK(collCommSplit(comm, rank < 2 ? 0 : COLL_SPLIT_NOCOLOR, rank, &pair, NULL) == collSuccess, "split: %s",
             collGetLastError(comm));
  if (pair) {
    wrapSet s2 = {two, (int)(sizeof two / sizeof two[0])};
    int f = body(pair, rank, 2, &s2);
    printf("rank %d: BR-32 wraparound on 2 ranks: %s\n", rank, f ? "FAILED" : "passed");
    fails += f;
    DATA_CHECK(collCommDestroy(pair) == collSuccess, "destroy: %s", collGetLastError(NULL));
  }
  wrapSet s4 = {four, 2};
  int f = body(comm, rank, nranks, &s4);
  printf("rank %d: BR-32 wraparound on 4 ranks: %s\n", rank, f ? "FAILED" : "passed");
  return fails + f;
}

int main(void) {
  double t0 = dataNow();
  int rc = collMpRun(4, 240, all, NULL);
  printf("BR-32 (%.1f s): %s\n", dataNow() - t0, rc ? "FAILED" : "passed");
  return rc;
}
