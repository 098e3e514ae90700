/*
 * verify.c - verifiable inputs and their exact expected outputs.
 *
 * Input element i of rank r is a small integer chosen so that every
 * reduction is exact in every type, including half (|sums| <= 2048) and
 * bfloat16 (<= 256), for up to ~64 ranks:
 *   sum/max/min  values in [-V, V] (unsigned: [0, V]) with n*V <= limit;
 *   prod         values in {1, 2} (and a sign for signed types), at most
 *                `prodTwos` twos per element, so products are powers of two;
 *   avg          rank pairs hold k+d and k-d, so the sum is exactly n*k and
 *                the average is k for every type;
 *   copies       values in [-limit, limit] (allgather, broadcast, ...).
 * Expected values are computed in int64 from the same formula and compared
 * exactly (bitwise for integers, == for floats). The one exception is avg
 * of floating types on a non-power-of-two rank count, where 1/n is not
 * representable: there the result may differ by a few ulps.
 *
 * The half and bfloat16 conversions are the benchmark's own, an oracle
 * independent of the library's.
 *
 * SPDX-License-Identifier: BSD-3-Clause
 */
#include <string.h>

#include "bench.h"

const typeInfo_t kTypes[] = {
    {"int8", collInt8, 1, 0, 1, 120, 6, 0},
    {"uint8", collUint8, 1, 0, 0, 120, 6, 0},
    {"int32", collInt32, 4, 0, 1, 1 << 20, 30, 0},
    {"uint32", collUint32, 4, 0, 0, 1 << 20, 31, 0},
    {"int64", collInt64, 8, 0, 1, 1 << 20, 62, 0},
    {"uint64", collUint64, 8, 0, 0, 1 << 20, 62, 0},
    {"half", collFloat16, 2, 1, 1, 2048, 15, 0x1p-11},
    {"float", collFloat32, 4, 1, 1, 1 << 20, 62, 0x1p-24},
    {"double", collFloat64, 8, 1, 1, 1 << 20, 62, 0x1p-53},
    {"bfloat16", collBfloat16, 2, 1, 1, 256, 62, 0x1p-8},
};
const int kNumTypes = (int)(sizeof(kTypes) / sizeof(kTypes[0]));

static const struct { const char* name; int index; } kTypeAliases[] = {
    {"char", 0}, {"int", 2}, {"float16", 6}, {"float32", 7},
    {"float64", 8}, {"bf16", 9}};

const opInfo_t kOps[] = {
    {"sum", collSum}, {"prod", collProd}, {"max", collMax},
    {"min", collMin}, {"avg", collAvg}};
const int kNumOps = (int)(sizeof(kOps) / sizeof(kOps[0]));

int benchTypeIndex(const char* s) {
  if (strcmp(s, "all") == 0) return -1;
  for (int i = 0; i < kNumTypes; i++)
    if (strcmp(s, kTypes[i].name) == 0) return i;
  for (size_t i = 0; i < sizeof(kTypeAliases) / sizeof(kTypeAliases[0]); i++)
    if (strcmp(s, kTypeAliases[i].name) == 0) return kTypeAliases[i].index;
  return -2;
}

int benchOpIndex(const char* s) {
  if (strcmp(s, "all") == 0) return -1;
  for (int i = 0; i < kNumOps; i++)
    if (strcmp(s, kOps[i].name) == 0) return i;
  return -2;
}

const char* benchOpName(int op) {
  for (int i = 0; i < kNumOps; i++)
    if ((int)kOps[i].op == op) return kOps[i].name;
  return "none";
}

/* ------------------------------------------------------------------------ */
/* half and bfloat16                                                        */

/* float -> IEEE half, round to nearest even. */
static uint16_t f32ToF16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = x & 0x80000000u;
  x ^= sign;
  uint16_t o;
  if (x >= 0x47800000u) {         /* >= 2^16: inf, or NaN */
    o = x > 0x7f800000u ? 0x7e00 : 0x7c00;
  } else if (x < 0x38800000u) {   /* < 2^-14: subnormal or zero */
    const uint32_t magicBits = (uint32_t)(127 - 15 + 23 - 10 + 1) << 23;
    float magic, fx;
    memcpy(&magic, &magicBits, 4);
    memcpy(&fx, &x, 4);
    fx += magic;                  /* the FPU rounds the mantissa for us */
    uint32_t r;
    memcpy(&r, &fx, 4);
    o = (uint16_t)(r - magicBits);
  } else {                        /* normal: rebias, round half to even */
    uint32_t odd = (x >> 13) & 1;
    x += ((uint32_t)(15 - 127) << 23) + 0xfff + odd;
    o = (uint16_t)(x >> 13);
  }
  return (uint16_t)(o | (sign >> 16));
}

/* IEEE half -> float (exact). */
static float f16ToF32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    float v = (float)mant * 5.9604644775390625e-8f; /* mant * 2^-24 */
    memcpy(&bits, &v, 4);
    bits |= sign;
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

/* float -> bfloat16, round to nearest even. */
static uint16_t f32ToBf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

/* bfloat16 -> float (exact). */
static float bf16ToF32(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

/* ------------------------------------------------------------------------ */
/* Verifiable data                                                          */

/* Input element i of rank r (of n) for check round `seed`; op is a collRedOp_t
 * or OP_COPY. Always a small integer, exact in every type (see top). */
int64_t benchGenValue(const typeInfo_t* t, int op, int n, int r, size_t i,
                        uint64_t seed) {
  uint64_t ui = (uint64_t)i, ur = (uint64_t)r;
  if (op == collProd) {
    uint64_t period = ((uint64_t)n + (uint64_t)t->prodTwos - 1) / (uint64_t)t->prodTwos;
    int64_t v = (ui + ur + seed) % period == 0 ? 2 : 1;
    return t->isSigned && (ui * 3 + ur * 5 + seed) % 7 == 0 ? -v : v;
  }
  if (op == collAvg) {
    int64_t bound = t->limit / (2 * (int64_t)n);
    uint64_t k1 = (uint64_t)(bound > 0 ? bound : 1);
    int64_t k = t->isSigned ? (int64_t)((ui + seed) % (2 * k1 + 1)) - (int64_t)k1
                            : (int64_t)((ui + seed) % (k1 + 1));
    uint64_t absk = (uint64_t)(k < 0 ? -k : k);
    int64_t d = (int64_t)((ui * 3 + seed) % (absk + 1)); /* |k +- d| <= 2|k| */
    if (r % 2 == 1) return k - d;
    return r + 1 < n ? k + d : k;
  }
  int64_t bound = op == OP_COPY ? t->limit : t->limit / n;
  uint64_t vmax = (uint64_t)(bound > 0 ? bound : 1);
  uint64_t h = ui * 7 + ur * 13 + seed * 3;
  return t->isSigned ? (int64_t)(h % (2 * vmax + 1)) - (int64_t)vmax
                     : (int64_t)(h % (vmax + 1));
}

/* The exact reduction by op over all n ranks of their element idx. */
int64_t benchReduceAll(const typeInfo_t* t, int op, int n, size_t idx,
                         uint64_t seed) {
  int64_t acc = benchGenValue(t, op, n, 0, idx, seed);
  for (int p = 1; p < n; p++) {
    int64_t v = benchGenValue(t, op, n, p, idx, seed);
    switch (op) {
      case collProd: acc *= v; break;
      case collMax: acc = v > acc ? v : acc; break;
      case collMin: acc = v < acc ? v : acc; break;
      default: acc += v; break; /* sum, avg */
    }
  }
  return op == collAvg ? acc / n : acc; /* exact: acc is n*k */
}

/* Stores integer value v as element j of buf. */
void benchWriteElem(const typeInfo_t* t, void* buf, size_t j, int64_t v) {
  switch (t->type) {
    case collInt8: ((int8_t*)buf)[j] = (int8_t)v; break;
    case collUint8: ((uint8_t*)buf)[j] = (uint8_t)v; break;
    case collInt32: ((int32_t*)buf)[j] = (int32_t)v; break;
    case collUint32: ((uint32_t*)buf)[j] = (uint32_t)v; break;
    case collInt64: ((int64_t*)buf)[j] = v; break;
    case collUint64: ((uint64_t*)buf)[j] = (uint64_t)v; break;
    case collFloat16: ((uint16_t*)buf)[j] = f32ToF16((float)v); break;
    case collFloat32: ((float*)buf)[j] = (float)v; break;
    case collFloat64: ((double*)buf)[j] = (double)v; break;
    case collBfloat16: ((uint16_t*)buf)[j] = f32ToBf16((float)v); break;
    default: break;
  }
}

/* Element j of an integer buffer, sign/zero-extended to int64. */
static int64_t readInt(const typeInfo_t* t, const void* buf, size_t j) {
  switch (t->type) {
    case collInt8: return ((const int8_t*)buf)[j];
    case collUint8: return ((const uint8_t*)buf)[j];
    case collInt32: return ((const int32_t*)buf)[j];
    case collUint32: return ((const uint32_t*)buf)[j];
    case collInt64: return ((const int64_t*)buf)[j];
    default: return (int64_t)((const uint64_t*)buf)[j];
  }
}

/* Element j of a floating-point buffer as a double (exact). */
static double readFloat(const typeInfo_t* t, const void* buf, size_t j) {
  switch (t->type) {
    case collFloat16: return f16ToF32(((const uint16_t*)buf)[j]);
    case collFloat32: return ((const float*)buf)[j];
    case collBfloat16: return bf16ToF32(((const uint16_t*)buf)[j]);
    default: return ((const double*)buf)[j];
  }
}

/* Expected integer value v as the type stores it (wraps like the type). */
static int64_t asStored(const typeInfo_t* t, int64_t v) {
  char tmp[8];
  benchWriteElem(t, tmp, 0, v);
  return readInt(t, tmp, 0);
}

/* 1 if element j of buf matches the exact value v; looseAvg > 0 is the rank
 * count of an avg whose 1/n is inexact (see typeInfo_t.eps). */
int benchMatches(const typeInfo_t* t, const void* buf, size_t j, int64_t v,
                   int looseAvg) {
  if (!t->isFloat) return readInt(t, buf, j) == asStored(t, v);
  double got = readFloat(t, buf, j), want = (double)v;
  if (got == want) return 1;
  double diff = got > want ? got - want : want - got;
  return looseAvg && diff <= (want < 0 ? -want : want) * 4 * looseAvg * t->eps;
}
