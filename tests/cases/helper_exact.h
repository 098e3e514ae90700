/*
 * helper_exact.h - exact reference data for the reduction cases (i17_3,
 * i17_4): every type and op, inputs that are small integers (exact in
 * every type, float16 and bfloat16 included), their expected reduction over
 * n ranks, and typed put/get.
 */
#ifndef COLL_TEST_HELPER_EXACT_H_
#define COLL_TEST_HELPER_EXACT_H_

#include <stddef.h>
#include <stdint.h>

#include "coll.h"
#include "reduce/reduce.h"

static const collDataType_t kTypes[] = {collInt8,    collUint8,   collInt32,  collUint32, collInt64,
                                        collUint64,  collFloat16, collFloat32, collFloat64, collBfloat16};
static const char* kTypeNames[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                                   "float16", "float32", "float64", "bfloat16"};
static const collRedOp_t kOps[] = {collSum, collProd, collMax, collMin, collAvg};
static const char* kOpNames[] = {"sum", "prod", "max", "min", "avg"};

static inline int64_t val(collRedOp_t op, int r, size_t i, int n) {
  if (op == collProd) return 1 + ((r + i) % 3 == 0 && r < 9);
  if (op == collAvg) return 2 * (int64_t)((i + (size_t)r) % (size_t)n);
  return (int64_t)((3 * (size_t)r + i) % 7);
}

static inline void put(collDataType_t t, void* b, size_t i, int64_t v) {
  switch (t) {
    case collInt8: ((int8_t*)b)[i] = (int8_t)v; break;
    case collUint8: ((uint8_t*)b)[i] = (uint8_t)v; break;
    case collInt32: ((int32_t*)b)[i] = (int32_t)v; break;
    case collUint32: ((uint32_t*)b)[i] = (uint32_t)v; break;
    case collInt64: ((int64_t*)b)[i] = v; break;
    case collUint64: ((uint64_t*)b)[i] = (uint64_t)v; break;
    case collFloat32: ((float*)b)[i] = (float)v; break;
    case collFloat64: ((double*)b)[i] = (double)v; break;
    default: { /* float16 / bfloat16: small integers are exact */
      float f = (float)v;
      collReduceNarrow((char*)b + 2 * i, &f, 1, t, 1);
    }
  }
}

static inline double get(collDataType_t t, const void* b, size_t i) {
  switch (t) {
    case collInt8: return ((const int8_t*)b)[i];
    case collUint8: return ((const uint8_t*)b)[i];
    case collInt32: return ((const int32_t*)b)[i];
    case collUint32: return ((const uint32_t*)b)[i];
    case collInt64: return (double)((const int64_t*)b)[i];
    case collUint64: return (double)((const uint64_t*)b)[i];
    case collFloat32: return ((const float*)b)[i];
    case collFloat64: return ((const double*)b)[i];
    default: {
      float f;
      collReduceWiden(&f, (const char*)b + 2 * i, 1, t);
      return f;
    }
  }
}

static inline int64_t expect(collRedOp_t op, size_t i, int n) {
  int64_t acc = val(op, 0, i, n);
  for (int r = 1; r < n; r++) {
    int64_t x = val(op, r, i, n);
    if (op == collSum || op == collAvg) acc += x;
    if (op == collProd) acc *= x;
    if (op == collMax && x > acc) acc = x;
    if (op == collMin && x < acc) acc = x;
  }
  return op == collAvg ? acc / n : acc;
}


#endif
