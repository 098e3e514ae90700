/*
 * reduce_math.h - coll's reduction math for every collDataType_t x
 * collRedOp_t, written once for the host (C11) and the GPU (CUDA C++, the
 * kernels of src/device/kernels.cu include this file). Everything is a
 * static inline function, so a host test runs exactly the code a kernel runs.
 *
 * Semantics (the host reduce.c has the same):
 *  - integers: sum/prod wrap modulo 2^bits (computed in unsigned types, no
 *    undefined behaviour), max/min compare as signed or unsigned; avg
 *    divides the sum by nranks truncating toward zero (C division);
 *  - float32/float64: sum/prod are IEEE (round to nearest even, no flush of
 *    subnormals: kernels are built without --use_fast_math and with
 *    --fmad=false); max/min propagate a NaN operand (quieted, the first
 *    operand's if both are NaN) and order -0.0 below +0.0 in either operand
 *    order (computed on the bits, so host and GPU give the same bits);
 *  - float16/bfloat16: each element is widened to float32 exactly, combined
 *    in float32 and rounded back to nearest even; max/min are picked on the
 *    16-bit patterns directly, which gives the same bits as widening,
 *    picking and rounding back (the widening is exact and monotonic, and a
 *    NaN comes back quieted with its payload in both);
 *  - the NaN produced by sum, prod or avg is a NaN whose sign and payload
 *    are not specified (x86 keeps an operand's payload, and the compiler may
 *    swap the operands of +; a GPU returns its canonical NaN); every other
 *    result is the same bit pattern on the host and on the GPU.
 * On the GPU the float16/bfloat16 conversions use the hardware's (exact for
 * every value but NaN payloads, which the rules above leave open); on the
 * host they are the integer-only code below (independent of the rounding
 * mode and of FTZ/DAZ), which gives the same bits as reduce.c's.
 *
 * Layout of a range function (what one GPU thread, or the host, runs):
 *   collRmRange_<op>_<type>(dst, a, b, n, w, nw): dst[i] = a[i] op b[i]
 * for the elements worker w of nw (0 <= w < nw) owns. When dst, a and b
 * share their offset modulo 16 bytes (and it is a multiple of the element
 * size) the body moves 16-byte packs (collRmPack): the leading elements up
 * to the first 16-byte boundary, then packs p = w, w + nw, ... (adjacent
 * workers touch adjacent packs: coalesced on a GPU), then the trailing
 * elements; otherwise it goes element by element. The nw workers together
 * cover every i < n exactly once, whatever nw is. dst may equal a or b
 * (each element is read before it is written, by the same worker); other
 * overlaps are not allowed.
 */
#ifndef COLL_REDUCE_MATH_H_
#define COLL_REDUCE_MATH_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "coll.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define COLL_RM_FN static __forceinline__ __host__ __device__
#define COLL_RM_ALIGN16 alignas(16)
#else
#define COLL_RM_FN static inline
#define COLL_RM_ALIGN16 _Alignas(16)
#endif

/* 16 bytes moved as one unit (one vector load/store on a GPU). */
typedef struct {
  COLL_RM_ALIGN16 uint64_t w[2];
} collRmPack;

#define COLL_RM_PACK_BYTES 16

/* ---- bit casts ------------------------------------------------------------ */

COLL_RM_FN uint32_t collRmF32Bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
COLL_RM_FN float collRmBitsF32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* ---- float16 / bfloat16 <-> float32 ------------------------------------- */

/* Exact float16 -> float32; a NaN comes back quiet with its payload. */
COLL_RM_FN float collRmH2F(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) /* inf, or NaN made quiet */
    return collRmBitsF32(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0));
  if (e != 0) return collRmBitsF32(sign | ((e + 112) << 23) | (m << 13));
  /* zero or subnormal: m * 2^-24, exact in float32 */
  return collRmBitsF32(sign | collRmF32Bits((float)m * 0x1p-24f));
#endif
}

/* float32 -> float16, round to nearest even (integer arithmetic on the
 * host); a NaN becomes a quiet NaN keeping the top 10 payload bits. */
COLL_RM_FN uint16_t collRmF2H(float f) {
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(f));
#else
  uint32_t x = collRmF32Bits(f), sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 -> inf */
  if (a >= 0x38800000u) { /* normal half: round the 13 dropped bits */
    a += 0xfffu + ((a >> 13) & 1u);
    return (uint16_t)(sign | ((a - 0x38000000u) >> 13));
  }
  uint32_t e = a >> 23;
  if (e < 102) return (uint16_t)sign; /* <= 2^-25 rounds to zero */
  uint32_t m = (a & 0x7fffffu) | 0x800000u, sh = 126 - e; /* 14..24 */
  uint32_t q = m >> sh, rem = m & ((1u << sh) - 1), half = 1u << (sh - 1);
  q += (rem > half || (rem == half && (q & 1u)));
  return (uint16_t)(sign | q); /* q == 0x400 is the smallest normal */
#endif
}

/* Exact bfloat16 -> float32 (a shift; NaN payload kept). */
COLL_RM_FN float collRmB2F(uint16_t b) { return collRmBitsF32((uint32_t)b << 16); }

/* float32 -> bfloat16, round to nearest even; a NaN becomes quiet. */
COLL_RM_FN uint16_t collRmF2B(float f) {
#if defined(__CUDA_ARCH__)
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
#else
  uint32_t x = collRmF32Bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
#endif
}

/* ---- element operations --------------------------------------------------- */
/* collRm_<op>_<type>(a, b) for op sum, prod, max, min; collRm_div_<type>(a,
 * n) for avg's final division. Types: i8 u8 i32 u32 i64 u64 f16 f32 f64
 * bf16 (collDataType_t order). */

/* Integer rows: sum/prod in the unsigned type U, max/min in T. */
#define COLL_RM_INT_OPS(TAG, T, U, D)                                                            \
  COLL_RM_FN T collRm_sum_##TAG(T a, T b) { return (T)(U)((U)a + (U)b); }                        \
  COLL_RM_FN T collRm_prod_##TAG(T a, T b) { return (T)(U)((U)a * (U)b); }                       \
  COLL_RM_FN T collRm_max_##TAG(T a, T b) { return a > b ? a : b; }                              \
  COLL_RM_FN T collRm_min_##TAG(T a, T b) { return a < b ? a : b; }                              \
  COLL_RM_FN T collRm_div_##TAG(T a, int n) { return (T)((D)a / (D)n); }
COLL_RM_INT_OPS(i8, int8_t, uint8_t, int)
COLL_RM_INT_OPS(u8, uint8_t, uint8_t, int)
COLL_RM_INT_OPS(i32, int32_t, uint32_t, int32_t)
COLL_RM_INT_OPS(u32, uint32_t, uint32_t, uint32_t)
COLL_RM_INT_OPS(i64, int64_t, uint64_t, int64_t)
COLL_RM_INT_OPS(u64, uint64_t, uint64_t, uint64_t)

/* NaN-propagating max/min on the bit patterns of a float format with sign
 * bit S: a key maps the bits to an unsigned integer in the format's order
 * (negative: ~x, else x | sign), so -0 < +0; a NaN operand gives that NaN
 * with QUIET set (the first operand's if both are NaN). No FP compare, so
 * the result does not depend on the hardware's NaN or signed-zero rules. */
#define COLL_RM_FPICK(NAME, U, S, INF, QUIET, CMP)                     \
  COLL_RM_FN U NAME(U a, U b) {                                        \
    U ka = (U)(a ^ (((U)0 - (U)(a >> S)) | ((U)1 << S)));              \
    U kb = (U)(b ^ (((U)0 - (U)(b >> S)) | ((U)1 << S)));              \
    U r = ka CMP kb ? a : b;                                           \
    r = (U)(b << 1) > (U)((U)INF << 1) ? (U)(b | QUIET) : r;           \
    r = (U)(a << 1) > (U)((U)INF << 1) ? (U)(a | QUIET) : r;           \
    return r;                                                          \
  }
COLL_RM_FPICK(collRmPickMax16h, uint16_t, 15, 0x7c00u, 0x200u, >)
COLL_RM_FPICK(collRmPickMin16h, uint16_t, 15, 0x7c00u, 0x200u, <)
COLL_RM_FPICK(collRmPickMax16b, uint16_t, 15, 0x7f80u, 0x40u, >)
COLL_RM_FPICK(collRmPickMin16b, uint16_t, 15, 0x7f80u, 0x40u, <)
COLL_RM_FPICK(collRmPickMax32, uint32_t, 31, 0x7f800000u, 0x400000u, >)
COLL_RM_FPICK(collRmPickMin32, uint32_t, 31, 0x7f800000u, 0x400000u, <)
COLL_RM_FPICK(collRmPickMax64, uint64_t, 63, 0x7ff0000000000000ull, 0x8000000000000ull, >)
COLL_RM_FPICK(collRmPickMin64, uint64_t, 63, 0x7ff0000000000000ull, 0x8000000000000ull, <)

/* float32 / float64 rows. */
#define COLL_RM_FLOAT_OPS(TAG, T, U, PMAX, PMIN)                                      \
  COLL_RM_FN T collRm_sum_##TAG(T a, T b) { return a + b; }                           \
  COLL_RM_FN T collRm_prod_##TAG(T a, T b) { return a * b; }                          \
  COLL_RM_FN T collRm_max_##TAG(T a, T b) {                                           \
    U x, y;                                                                           \
    memcpy(&x, &a, sizeof x);                                                         \
    memcpy(&y, &b, sizeof y);                                                         \
    x = PMAX(x, y);                                                                   \
    memcpy(&a, &x, sizeof a);                                                         \
    return a;                                                                         \
  }                                                                                   \
  COLL_RM_FN T collRm_min_##TAG(T a, T b) {                                           \
    U x, y;                                                                           \
    memcpy(&x, &a, sizeof x);                                                         \
    memcpy(&y, &b, sizeof y);                                                         \
    x = PMIN(x, y);                                                                   \
    memcpy(&a, &x, sizeof a);                                                         \
    return a;                                                                         \
  }                                                                                   \
  COLL_RM_FN T collRm_div_##TAG(T a, int n) { return a / (T)n; }
COLL_RM_FLOAT_OPS(f32, float, uint32_t, collRmPickMax32, collRmPickMin32)
COLL_RM_FLOAT_OPS(f64, double, uint64_t, collRmPickMax64, collRmPickMin64)

/* float16 / bfloat16 rows, on the 16-bit patterns. */
#define COLL_RM_HALF_OPS(TAG, TOF, FROMF, PMAX, PMIN)                                           \
  COLL_RM_FN uint16_t collRm_sum_##TAG(uint16_t a, uint16_t b) { return FROMF(TOF(a) + TOF(b)); } \
  COLL_RM_FN uint16_t collRm_prod_##TAG(uint16_t a, uint16_t b) { return FROMF(TOF(a) * TOF(b)); } \
  COLL_RM_FN uint16_t collRm_max_##TAG(uint16_t a, uint16_t b) { return PMAX(a, b); }            \
  COLL_RM_FN uint16_t collRm_min_##TAG(uint16_t a, uint16_t b) { return PMIN(a, b); }            \
  COLL_RM_FN uint16_t collRm_div_##TAG(uint16_t a, int n) { return FROMF(TOF(a) / (float)n); }
COLL_RM_HALF_OPS(f16, collRmH2F, collRmF2H, collRmPickMax16h, collRmPickMin16h)
COLL_RM_HALF_OPS(bf16, collRmB2F, collRmF2B, collRmPickMax16b, collRmPickMin16b)

/* ---- range bodies (one worker's share of an array) ------------------------ */

/* Elements before the first 16-byte boundary when every pointer of ptrs
 * has the same offset modulo 16 and it is a multiple of es (capped at n);
 * SIZE_MAX when they differ (then the caller goes element by element). */
COLL_RM_FN size_t collRmHead(const void* const* ptrs, int np, size_t es, size_t n) {
  uintptr_t mis = (uintptr_t)ptrs[0] % COLL_RM_PACK_BYTES;
  for (int k = 1; k < np; k++)
    if ((uintptr_t)ptrs[k] % COLL_RM_PACK_BYTES != mis) return SIZE_MAX;
  if (mis % es) return SIZE_MAX;
  size_t head = mis ? (COLL_RM_PACK_BYTES - mis) / es : 0;
  return head < n ? head : n;
}

/* collRmRange_<op>_<type>: see the header comment. */
#define COLL_RM_RANGE(OP, TAG, T)                                                              \
  COLL_RM_FN void collRmRange_##OP##_##TAG(void* dst, const void* a, const void* b, size_t n,  \
                                           size_t w, size_t nw) {                              \
    T* d = (T*)dst;                                                                            \
    const T* x = (const T*)a;                                                                  \
    const T* y = (const T*)b;                                                                  \
    const void* ptrs[3] = {dst, a, b};                                                         \
    size_t head = collRmHead(ptrs, 3, sizeof(T), n), i;                                        \
    if (head == SIZE_MAX) {                                                                    \
      for (i = w; i < n; i += nw) d[i] = collRm_##OP##_##TAG(x[i], y[i]);                      \
      return;                                                                                  \
    }                                                                                          \
    for (i = w; i < head; i += nw) d[i] = collRm_##OP##_##TAG(x[i], y[i]);                     \
    enum { EPP = COLL_RM_PACK_BYTES / sizeof(T) };                                             \
    size_t npacks = (n - head) / EPP;                                                          \
    collRmPack* pd = (collRmPack*)(d + head);                                                  \
    const collRmPack* px = (const collRmPack*)(x + head);                                      \
    const collRmPack* py = (const collRmPack*)(y + head);                                      \
    for (size_t p = w; p < npacks; p += nw) {                                                  \
      collRmPack va = px[p], vb = py[p];                                                       \
      T ea[EPP], eb[EPP];                                                                      \
      memcpy(ea, &va, sizeof ea);                                                              \
      memcpy(eb, &vb, sizeof eb);                                                              \
      for (int k = 0; k < EPP; k++) ea[k] = collRm_##OP##_##TAG(ea[k], eb[k]);                 \
      memcpy(&va, ea, sizeof ea);                                                              \
      pd[p] = va;                                                                              \
    }                                                                                          \
    for (i = head + npacks * EPP + w; i < n; i += nw) d[i] = collRm_##OP##_##TAG(x[i], y[i]);  \
  }

/* collRmAvgRange_<type>(buf, n, nranks, w, nw): buf[i] = buf[i] / nranks
 * (collRm_div_<type>) for worker w's share, packed as above. */
#define COLL_RM_AVG_RANGE(TAG, T)                                                              \
  COLL_RM_FN void collRmAvgRange_##TAG(void* buf, size_t n, int nranks, size_t w, size_t nw) { \
    T* d = (T*)buf;                                                                            \
    const void* ptrs[1] = {buf};                                                               \
    size_t head = collRmHead(ptrs, 1, sizeof(T), n), i;                                        \
    if (head == SIZE_MAX) head = n; /* misaligned for its type: element by element */          \
    for (i = w; i < head; i += nw) d[i] = collRm_div_##TAG(d[i], nranks);                      \
    enum { EPP = COLL_RM_PACK_BYTES / sizeof(T) };                                             \
    size_t npacks = (n - head) / EPP;                                                          \
    collRmPack* pd = (collRmPack*)(d + head);                                                  \
    for (size_t p = w; p < npacks; p += nw) {                                                  \
      collRmPack v = pd[p];                                                                    \
      T e[EPP];                                                                                \
      memcpy(e, &v, sizeof e);                                                                 \
      for (int k = 0; k < EPP; k++) e[k] = collRm_div_##TAG(e[k], nranks);                     \
      memcpy(&v, e, sizeof e);                                                                 \
      pd[p] = v;                                                                               \
    }                                                                                          \
    for (i = head + npacks * EPP + w; i < n; i += nw) d[i] = collRm_div_##TAG(d[i], nranks);   \
  }

/* Every (op, type) range function and every avg range function. */
#define COLL_RM_TYPE(TAG, T)   \
  COLL_RM_RANGE(sum, TAG, T)   \
  COLL_RM_RANGE(prod, TAG, T)  \
  COLL_RM_RANGE(max, TAG, T)   \
  COLL_RM_RANGE(min, TAG, T)   \
  COLL_RM_AVG_RANGE(TAG, T)
COLL_RM_TYPE(i8, int8_t)
COLL_RM_TYPE(u8, uint8_t)
COLL_RM_TYPE(i32, int32_t)
COLL_RM_TYPE(u32, uint32_t)
COLL_RM_TYPE(i64, int64_t)
COLL_RM_TYPE(u64, uint64_t)
COLL_RM_TYPE(f16, uint16_t)
COLL_RM_TYPE(f32, float)
COLL_RM_TYPE(f64, double)
COLL_RM_TYPE(bf16, uint16_t)

/* collRmCopyRange(dst, src, bytes, w, nw): dst[i] = src[i] for worker w's
 * share of the bytes, in 16-byte packs when dst and src share their offset
 * modulo 16. dst and src must not overlap (unless equal). */
COLL_RM_FN void collRmCopyRange(void* dst, const void* src, size_t bytes, size_t w, size_t nw) {
  unsigned char* d = (unsigned char*)dst;
  const unsigned char* s = (const unsigned char*)src;
  const void* ptrs[2] = {dst, src};
  size_t head = collRmHead(ptrs, 2, 1, bytes), i;
  if (head == SIZE_MAX) head = bytes;
  for (i = w; i < head; i += nw) d[i] = s[i];
  size_t npacks = (bytes - head) / COLL_RM_PACK_BYTES;
  collRmPack* pd = (collRmPack*)(d + head);
  const collRmPack* ps = (const collRmPack*)(s + head);
  for (size_t p = w; p < npacks; p += nw) pd[p] = ps[p];
  for (i = head + npacks * COLL_RM_PACK_BYTES + w; i < bytes; i += nw) d[i] = s[i];
}

/* ---- tables (host and device) --------------------------------------------- */

typedef void (*collRmRangeFn)(void* dst, const void* a, const void* b, size_t n, size_t w, size_t nw);
typedef void (*collRmAvgRangeFn)(void* buf, size_t n, int nranks, size_t w, size_t nw);

/* The stamp list in collDataType_t order, for tables: X(tag) per type. */
#define COLL_RM_FOR_TYPES(X) X(i8) X(u8) X(i32) X(u32) X(i64) X(u64) X(f16) X(f32) X(f64) X(bf16)

#if !defined(__CUDA_ARCH__)
/* Host: the range function of (t, op), avg -> sum; NULL for an invalid t or
 * op. (For tests and host executors; a kernel names its function directly.) */
static inline collRmRangeFn collRmGetRange(collDataType_t t, collRedOp_t op) {
#define COLL_RM_ROW(TAG) {collRmRange_sum_##TAG, collRmRange_prod_##TAG, collRmRange_max_##TAG, collRmRange_min_##TAG},
  static const collRmRangeFn tab[collNumTypes][4] = {COLL_RM_FOR_TYPES(COLL_RM_ROW)};
#undef COLL_RM_ROW
  if ((unsigned)t >= (unsigned)collNumTypes || (unsigned)op >= (unsigned)collNumOps) return NULL;
  return tab[t][op == collAvg ? collSum : op];
}

/* Host: avg's division for t; NULL for an invalid t. */
static inline collRmAvgRangeFn collRmGetAvgRange(collDataType_t t) {
#define COLL_RM_AROW(TAG) collRmAvgRange_##TAG,
  static const collRmAvgRangeFn tab[collNumTypes] = {COLL_RM_FOR_TYPES(COLL_RM_AROW)};
#undef COLL_RM_AROW
  return (unsigned)t < (unsigned)collNumTypes ? tab[t] : NULL;
}
#endif

#endif /* COLL_REDUCE_MATH_H_ */
