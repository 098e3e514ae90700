/*
 * reduce.c - host reduction kernels: every collDataType_t x collRedOp_t.
 *
 * Semantics:
 *  - integer sum/prod wrap modulo 2^n (computed in unsigned arithmetic);
 *  - float max/min: NaN propagates (a NaN in either operand gives NaN, like
 *    CUDA's __hmax_nan, not fmaxf's "ignore the NaN"); max(-0.0, +0.0) = +0.0
 *    and min(-0.0, +0.0) = -0.0 in either operand order;
 *  - float16/bfloat16 are widened to float32 exactly, combined in float32 and
 *    rounded back to nearest-even once per element per call;
 *  - conversions to float16/bfloat16 turn a NaN into a quiet NaN of the same
 *    sign keeping the top payload bits (what x86 F16C does); float16 ->
 *    float32 quiets NaNs too, bfloat16 -> float32 is an exact bit shift.
 * Loops are plain so gcc -O3 vectorizes them; dst may alias a or b exactly.
 * On x86 float16 conversion uses F16C when the CPU has it (same bits as the
 * portable code); -DCOLL_NO_F16C forces the portable code.
 */
#include "reduce/reduce.h"
#include "reduce/reduce_math.h"

#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && \
    (defined(__GNUC__) || defined(__clang__)) && !defined(COLL_NO_F16C)
#include <cpuid.h>
#include <immintrin.h>
#include <stdatomic.h>
#define COLL_F16C 1
#endif

/* ---- portable conversions (the reference) -------------------------------- */
/* The integer-only code of reduce_math.h, which the GPU kernels' host tests
 * also run: one definition of the rounding rules. */

/* Exact float16 -> float32; NaNs come back quiet. */
float collHalfToFloat(uint16_t h) { return collRmH2F(h); }

/* float32 -> float16, round to nearest even (integer arithmetic only, so the
 * result does not depend on the FP rounding mode or FTZ/DAZ). */
uint16_t collFloatToHalf(float f) { return collRmF2H(f); }

/* Exact bfloat16 -> float32 (NaN payload kept bit for bit). */
float collBf16ToFloat(uint16_t b) { return collRmB2F(b); }

/* float32 -> bfloat16, round to nearest even; NaNs become quiet. */
uint16_t collFloatToBf16(float f) { return collRmF2B(f); }

/* elements per block of the 16-bit float loops (float32 temporaries on the stack) */
#define BLOCK 512

/* ---- F16C fast path ------------------------------------------------------ */

#ifdef COLL_F16C
/* 1 if this CPU has F16C and AVX (with OS support), probed once. clang 14's
 * __builtin_cpu_supports does not know "f16c", hence cpuid. */
static int hasF16C(void) {
  static atomic_int cached = -1;
  int v = atomic_load_explicit(&cached, memory_order_relaxed);
  if (v < 0) {
    unsigned a, b, c = 0, d;
    __builtin_cpu_init();
    v = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) &&
        __builtin_cpu_supports("avx");
    atomic_store_explicit(&cached, v, memory_order_relaxed);
  }
  return v;
}

/* float16 -> float32 with vcvtph2ps, 8 at a time; tail via a padded block. */
#define F16C_FN __attribute__((target("avx,f16c"))) static void
F16C_FN h2fF16C(float* d, const uint16_t* s, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i,
                     _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(s + i))));
  if (i < n) {
    uint16_t ti[8] = {0};
    float to[8];
    memcpy(ti, s + i, (n - i) * sizeof *s);
    _mm256_storeu_ps(to, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)ti)));
    memcpy(d + i, to, (n - i) * sizeof *d);
  }
}

/* float32 -> float16 with vcvtps2ph (round to nearest even). */
F16C_FN f2hF16C(uint16_t* d, const float* s, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i*)(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(s + i),
                                     _MM_FROUND_TO_NEAREST_INT));
  if (i < n) {
    float ti[8] = {0};
    uint16_t to[8];
    memcpy(ti, s + i, (n - i) * sizeof *s);
    _mm_storeu_si128((__m128i*)to, _mm256_cvtps_ph(_mm256_loadu_ps(ti),
                                                   _MM_FROUND_TO_NEAREST_INT));
    memcpy(d + i, to, (n - i) * sizeof *d);
  }
}
#else
/* No F16C path on this target. */
static int hasF16C(void) { return 0; }
#define h2fF16C(d, s, n) ((void)0)
#define f2hF16C(d, s, n) ((void)0)
#endif

/* Array float16 -> float32; F16C when fast and available. Returns 1 if the
 * F16C path ran, 0 if the portable one did. */
int collHalfToFloatArray(float* dst, const uint16_t* src, size_t n, int fast) {
  if (fast && hasF16C()) {
    h2fF16C(dst, src, n);
    return 1;
  }
  for (size_t i = 0; i < n; i++) dst[i] = collHalfToFloat(src[i]);
  return 0;
}

/* Array float32 -> float16; as collHalfToFloatArray. */
int collFloatToHalfArray(uint16_t* dst, const float* src, size_t n, int fast) {
  if (fast && hasF16C()) {
    f2hF16C(dst, src, n);
    return 1;
  }
  for (size_t i = 0; i < n; i++) dst[i] = collFloatToHalf(src[i]);
  return 0;
}

/* bfloat16 block conversions (plain loops; they vectorize; no fast path). */
static void b2fArray(float* d, const uint16_t* s, size_t n, int fast) {
  for (size_t i = 0; i < n; i++) d[i] = collBf16ToFloat(s[i]);
  (void)fast;
}
static void f2bArray(uint16_t* d, const float* s, size_t n, int fast) {
  for (size_t i = 0; i < n; i++) d[i] = collFloatToBf16(s[i]);
  (void)fast;
}

/* ---- float32 working copies of 16-bit floats ------------------------------ */

int collTypeIsHalf(collDataType_t t) { return t == collFloat16 || t == collBfloat16; }

void collReduceWiden(float* dst, const void* src, size_t n, collDataType_t t) {
  if (t == collFloat16) collHalfToFloatArray(dst, (const uint16_t*)src, n, 1);
  else if (t == collBfloat16) b2fArray(dst, (const uint16_t*)src, n, 1);
}

/* Rounds n floats into t (whole array: the F16C path runs 8 at a time). */
static void narrowRaw(uint16_t* d, const float* s, size_t n, collDataType_t t) {
  if (t == collFloat16) collFloatToHalfArray(d, s, n, 1);
  else if (t == collBfloat16) f2bArray(d, s, n, 1);
}

void collReduceNarrow(void* dst, const float* src, size_t n, collDataType_t t, int divisor) {
  uint16_t* d = (uint16_t*)dst;
  if (divisor <= 1) {
    narrowRaw(d, src, n, t);
    return;
  }
  float q[BLOCK], dv = (float)divisor;
  for (size_t i = 0; i < n; i += BLOCK) {
    size_t m = n - i < BLOCK ? n - i : BLOCK;
    for (size_t j = 0; j < m; j++) q[j] = src[i + j] / dv;
    narrowRaw(d + i, q, m, t);
  }
}

void collReducePreMul(void* dst, const void* src, size_t n, collDataType_t t, int nranks) {
  if (!collTypeIsHalf(t)) return;
  uint16_t* d = (uint16_t*)dst;
  const uint16_t* s = (const uint16_t*)src;
  uint16_t k16;
  float inv = 1.0f / (float)(nranks > 0 ? nranks : 1), k, f[BLOCK];
  narrowRaw(&k16, &inv, 1, t); /* the factor itself in t, as NCCL's scalar */
  collReduceWiden(&k, &k16, 1, t);
  for (size_t i = 0; i < n; i += BLOCK) {
    size_t m = n - i < BLOCK ? n - i : BLOCK;
    collReduceWiden(f, s + i, m, t);
    for (size_t j = 0; j < m; j++) f[j] *= k; /* exact in float32: 2 x 11 bits */
    narrowRaw(d + i, f, m, t);
  }
}

/* ---- element ops --------------------------------------------------------- */

#define OP_SUM(T, p, q) ((T)((p) + (q)))
#define OP_PROD(T, p, q) ((T)((p) * (q)))
#define OP_MAX(T, p, q) ((p) > (q) ? (p) : (q))
#define OP_MIN(T, p, q) ((p) < (q) ? (p) : (q))
#define OP_FMAX(T, p, q) fmax_##T(p, q)
#define OP_FMIN(T, p, q) fmin_##T(p, q)

/* NaN-propagating max/min with -0 < +0, done on the bits so that there is
 * no FP compare or branch and gcc -O3 vectorizes it (FP selects are not
 * if-converted under the default -ftrapping-math). The key maps the bits to
 * an unsigned integer in float order (negative: ~x, else x | sign), so that
 * -0 < +0. A NaN operand gives that NaN, quieted (a's if both are NaN). */
#define DEFINE_FPICK(NAME, T, U, S, INF, QUIET, CMP)                  \
  static inline T NAME(T p, T q) {                                    \
    U a, b, r;                                                        \
    memcpy(&a, &p, sizeof a);                                         \
    memcpy(&b, &q, sizeof b);                                         \
    U ka = a ^ (((U)0 - (a >> S)) | ((U)1 << S));                     \
    U kb = b ^ (((U)0 - (b >> S)) | ((U)1 << S));                     \
    r = ka CMP kb ? a : b;                                            \
    r = (U)(b << 1) > (U)((U)INF << 1) ? (b | QUIET) : r;             \
    r = (U)(a << 1) > (U)((U)INF << 1) ? (a | QUIET) : r;             \
    memcpy(&p, &r, sizeof p);                                         \
    return p;                                                         \
  }
DEFINE_FPICK(fmax_float, float, uint32_t, 31, 0x7f800000u, 0x400000u, >)
DEFINE_FPICK(fmin_float, float, uint32_t, 31, 0x7f800000u, 0x400000u, <)
DEFINE_FPICK(fmax_double, double, uint64_t, 63, 0x7ff0000000000000u,
             0x8000000000000u, >)
DEFINE_FPICK(fmin_double, double, uint64_t, 63, 0x7ff0000000000000u,
             0x8000000000000u, <)

/* ---- kernels ------------------------------------------------------------- */

/* dst[i] = OP(a[i], b[i]) over type T. */
#define KERNEL(NAME, T, OP)                                              \
  static void NAME(void* dst, const void* a, const void* b, size_t n) {  \
    T* d = (T*)dst;                                                      \
    const T* x = (const T*)a;                                            \
    const T* y = (const T*)b;                                            \
    for (size_t i = 0; i < n; i++) d[i] = OP(T, x[i], y[i]);             \
  }

/* 16-bit float kernel: widen a block of a and b, combine in float32, round
 * back. Whole blocks are read before dst is written, so aliasing is safe. */
#define KERNEL16(NAME, TOF, FROMF, OP)                                   \
  static void NAME(void* dst, const void* a, const void* b, size_t n) {  \
    uint16_t* d = (uint16_t*)dst;                                        \
    const uint16_t* x = (const uint16_t*)a;                              \
    const uint16_t* y = (const uint16_t*)b;                              \
    float fa[BLOCK], fb[BLOCK];                                          \
    int fast = n > 0 && hasF16C();                                       \
    for (size_t i = 0; i < n; i += BLOCK) {                              \
      size_t m = n - i < BLOCK ? n - i : BLOCK;                          \
      TOF(fa, x + i, m, fast);                                           \
      TOF(fb, y + i, m, fast);                                           \
      for (size_t j = 0; j < m; j++) fa[j] = OP(float, fa[j], fb[j]);    \
      FROMF(d + i, fa, m, fast);                                         \
    }                                                                    \
  }

/* Stamps sum/prod/max/min for an integer type (sum/prod in unsigned U). */
#define INT_KERNELS(S, T, U)              \
  KERNEL(sum_##S, U, OP_SUM)              \
  KERNEL(prod_##S, U, OP_PROD)            \
  KERNEL(max_##S, T, OP_MAX)              \
  KERNEL(min_##S, T, OP_MIN)
INT_KERNELS(i8, int8_t, uint8_t)
INT_KERNELS(u8, uint8_t, uint8_t)
INT_KERNELS(i32, int32_t, uint32_t)
INT_KERNELS(u32, uint32_t, uint32_t)
INT_KERNELS(i64, int64_t, uint64_t)
INT_KERNELS(u64, uint64_t, uint64_t)

/* Stamps sum/prod/max/min for float or double. */
#define FLOAT_KERNELS(T)                  \
  KERNEL(sum_##T, T, OP_SUM)              \
  KERNEL(prod_##T, T, OP_PROD)            \
  KERNEL(max_##T, T, OP_FMAX)             \
  KERNEL(min_##T, T, OP_FMIN)
FLOAT_KERNELS(float)
FLOAT_KERNELS(double)

/* Stamps sum/prod/max/min for a 16-bit float type. */
#define F16_KERNELS(S, TOF, FROMF)                 \
  KERNEL16(sum_##S, TOF, FROMF, OP_SUM)            \
  KERNEL16(prod_##S, TOF, FROMF, OP_PROD)          \
  KERNEL16(max_##S, TOF, FROMF, OP_FMAX)           \
  KERNEL16(min_##S, TOF, FROMF, OP_FMIN)
#define h2fArr(d, s, n, f) ((void)collHalfToFloatArray(d, s, n, f))
#define f2hArr(d, s, n, f) ((void)collFloatToHalfArray(d, s, n, f))
F16_KERNELS(f16, h2fArr, f2hArr)
F16_KERNELS(bf16, b2fArray, f2bArray)

/* ---- tables and lookups -------------------------------------------------- */

#define ROW(S) {sum_##S, prod_##S, max_##S, min_##S}
static const collReduceFn kFns[collNumTypes][4] = {
    ROW(i8),  ROW(u8),    ROW(i32),   ROW(u32),    ROW(i64),
    ROW(u64), ROW(f16),   ROW(float), ROW(double), ROW(bf16)};
static const size_t kSizes[collNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
static const char* const kTypeNames[collNumTypes] = {
    "int8", "uint8", "int32", "uint32", "int64",
    "uint64", "half", "float", "double", "bfloat16"};
static const char* const kOpNames[collNumOps] = {"sum", "prod", "max",
                                                 "min", "avg"};

/* 1 if t is a valid data type. */
static int validType(collDataType_t t) {
  return (unsigned)t < (unsigned)collNumTypes;
}

/* Element size in bytes, 0 if invalid. */
size_t collTypeSize(collDataType_t t) { return validType(t) ? kSizes[t] : 0; }

/* nccl-tests type name, "invalid" if invalid. */
const char* collTypeName(collDataType_t t) {
  return validType(t) ? kTypeNames[t] : "invalid";
}

/* Op name, "invalid" if invalid. */
const char* collOpName(collRedOp_t op) {
  return (unsigned)op < (unsigned)collNumOps ? kOpNames[op] : "invalid";
}

/* Kernel of (t, op), avg -> sum; NULL if either is invalid. */
collReduceFn collReduceGetFn(collDataType_t t, collRedOp_t op) {
  if (!validType(t) || (unsigned)op >= (unsigned)collNumOps) return NULL;
  return kFns[t][op == collAvg ? collSum : op];
}

/* ---- avg finish ---------------------------------------------------------- */

/* buf[i] /= n over type T with divisor type D, wide enough for any nranks
 * (C division: integers truncate toward zero). */
#define DIV_LOOP(T, D, buf, cnt, n)                                    \
  do {                                                                 \
    T* p_ = (T*)(buf);                                                 \
    D n_ = (D)(n);                                                     \
    for (size_t i_ = 0; i_ < (cnt); i_++) p_[i_] = (T)(p_[i_] / n_);   \
  } while (0)

/* 16-bit float avg: widen a block, divide in float32, round back. */
static void div16(uint16_t* p, size_t cnt, int nranks, int bf16) {
  float f[BLOCK], n = (float)nranks;
  int fast = !bf16 && cnt > 0 && hasF16C();
  for (size_t i = 0; i < cnt; i += BLOCK) {
    size_t m = cnt - i < BLOCK ? cnt - i : BLOCK;
    if (bf16) b2fArray(f, p + i, m, 0);
    else collHalfToFloatArray(f, p + i, m, fast);
    for (size_t j = 0; j < m; j++) f[j] /= n;
    if (bf16) f2bArray(p + i, f, m, 0);
    else collFloatToHalfArray(p + i, f, m, fast);
  }
}

/* Divides by nranks; a no-op for nranks <= 1 or an invalid type. */
void collReduceAvgFinish(void* buf, size_t n, collDataType_t t, int nranks) {
  if (nranks <= 1 || n == 0) return;
  switch (t) {
    case collInt8: DIV_LOOP(int8_t, int, buf, n, nranks); break;
    case collUint8: DIV_LOOP(uint8_t, int, buf, n, nranks); break;
    case collInt32: DIV_LOOP(int32_t, int32_t, buf, n, nranks); break;
    case collUint32: DIV_LOOP(uint32_t, uint32_t, buf, n, nranks); break;
    case collInt64: DIV_LOOP(int64_t, int64_t, buf, n, nranks); break;
    case collUint64: DIV_LOOP(uint64_t, uint64_t, buf, n, nranks); break;
    case collFloat16: div16((uint16_t*)buf, n, nranks, 0); break;
    case collFloat32: DIV_LOOP(float, float, buf, n, nranks); break;
    case collFloat64: DIV_LOOP(double, double, buf, n, nranks); break;
    case collBfloat16: div16((uint16_t*)buf, n, nranks, 1); break;
    default: break;
  }
}
