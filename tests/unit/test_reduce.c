/*
 * test_reduce.c - unit tests of the host reduction kernels (src/reduce).
 *
 * Every (type x op) kernel is compared element by element with a reference
 * computed here from first principles (64-bit modular arithmetic for
 * integers, double arithmetic for float32, ldexp/frexp/rint conversions for
 * float16/bfloat16), for n = 0, 1, 7, 1023, 4099, with and without aliasing.
 * The conversions are checked exhaustively (all 65536 inputs, every rounding
 * midpoint) and on random floats, and the F16C path bit for bit against the
 * portable one.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reduce/reduce.h"

#define GUARD 16 /* elements after the end that must stay untouched */

/* Bits of a float. */
static uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* Float of given bits. */
static float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Bits of a double. */
static uint64_t d2u(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

/* xorshift64* pseudo-random generator (deterministic). */
static uint64_t rnd(uint64_t* s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 0x2545F4914F6CDD1Dull;
}

/* Fails with a message when exp != got (both bit patterns). */
#define EXPECT_BITS(what, in, exp, got)                                     \
  do {                                                                      \
    if ((uint64_t)(exp) != (uint64_t)(got)) {                               \
      print_error("%s: input 0x%llx expected 0x%llx got 0x%llx\n", what,    \
                  (unsigned long long)(in), (unsigned long long)(exp),      \
                  (unsigned long long)(got));                               \
      fail();                                                               \
    }                                                                       \
  } while (0)

/* ---- reference conversions (ldexp/frexp/rint, independent of reduce.c) -- */

/* Reference float16 -> float32 value (NaN: any NaN). */
static float ref_h2f(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  float v = e == 0x1f ? (m ? NAN : INFINITY)
            : e == 0  ? ldexpf((float)m, -24)
                      : ldexpf((float)(m + 1024), e - 25);
  return (h & 0x8000) ? -v : v;
}

/* Reference float32 -> float16, nearest even; NaN: quiet, top payload. */
static uint16_t ref_f2h(float f) {
  uint32_t u = f2u(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
  if (isnan(f)) return (uint16_t)(sign | 0x7e00 | ((u >> 13) & 0x3ff));
  double a = fabs((double)f);
  if (a >= 65520.0) return (uint16_t)(sign | 0x7c00);
  if (a < 0x1p-14) return (uint16_t)(sign | (uint16_t)rint(a * 0x1p24));
  int e;
  frexp(a, &e);
  int E = e - 1; /* a in [2^E, 2^(E+1)) */
  double q = rint(ldexp(a, 10 - E));
  if (q == 2048.0) q = 1024.0, E++;
  return (uint16_t)(sign | ((E + 15) << 10) | (uint16_t)(q - 1024.0));
}

/* Reference bfloat16 -> float32 value (NaN: any NaN). */
static float ref_b2f(uint16_t b) {
  int e = (b >> 7) & 0xff, m = b & 0x7f;
  float v = e == 0xff ? (m ? NAN : INFINITY)
            : e == 0  ? ldexpf((float)m, -133)
                      : ldexpf((float)(m + 128), e - 134);
  return (b & 0x8000) ? -v : v;
}

/* Reference float32 -> bfloat16, nearest even; NaN: quiet. */
static uint16_t ref_f2b(float f) {
  uint32_t u = f2u(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
  if (isnan(f)) return (uint16_t)((u >> 16) | 0x40);
  double a = fabs((double)f);
  if (a >= 0x1.ffp127) return (uint16_t)(sign | 0x7f80);
  if (a < 0x1p-126) return (uint16_t)(sign | (uint16_t)rint(ldexp(a, 133)));
  int e;
  frexp(a, &e);
  int E = e - 1;
  double q = rint(ldexp(a, 7 - E));
  if (q == 256.0) q = 128.0, E++;
  return (uint16_t)(sign | ((E + 127) << 7) | (uint16_t)(q - 128.0));
}

/* ---- names, sizes, lookups ----------------------------------------------- */

/* Sizes and nccl-tests names of every type/op; invalid values. */
static void test_names_sizes(void** state) {
  (void)state;
  static const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
  static const char* names[] = {"int8",   "uint8", "int32", "uint32",
                                "int64",  "uint64", "half", "float",
                                "double", "bfloat16"};
  static const char* ops[] = {"sum", "prod", "max", "min", "avg"};
  for (int t = 0; t < collNumTypes; t++) {
    assert_int_equal(collTypeSize((collDataType_t)t), sizes[t]);
    assert_string_equal(collTypeName((collDataType_t)t), names[t]);
  }
  for (int o = 0; o < collNumOps; o++)
    assert_string_equal(collOpName((collRedOp_t)o), ops[o]);
  assert_int_equal(collTypeSize(collNumTypes), 0);
  assert_int_equal(collTypeSize((collDataType_t)-1), 0);
  assert_int_equal(collTypeSize((collDataType_t)1000), 0);
  assert_string_equal(collTypeName(collNumTypes), "invalid");
  assert_string_equal(collOpName(collNumOps), "invalid");
  assert_string_equal(collOpName((collRedOp_t)-1), "invalid");
}

/* collReduceGetFn: NULL for invalid type/op, avg is sum, distinct kernels. */
static void test_get_fn(void** state) {
  (void)state;
  assert_null(collReduceGetFn(collNumTypes, collSum));
  assert_null(collReduceGetFn((collDataType_t)-1, collSum));
  assert_null(collReduceGetFn(collFloat32, collNumOps));
  assert_null(collReduceGetFn(collFloat32, (collRedOp_t)-1));
  assert_null(collReduceGetFn((collDataType_t)99, (collRedOp_t)99));
  for (int t = 0; t < collNumTypes; t++) {
    collDataType_t dt = (collDataType_t)t;
    for (int o = 0; o < collNumOps; o++)
      assert_non_null(collReduceGetFn(dt, (collRedOp_t)o));
    assert_ptr_equal(collReduceGetFn(dt, collAvg), collReduceGetFn(dt, collSum));
    assert_ptr_not_equal(collReduceGetFn(dt, collMax),
                         collReduceGetFn(dt, collMin));
  }
}

/* ---- conversions ------------------------------------------------------------ */

/* All 65536 halves: exact widening, identity round trip (NaN: quieted). */
static void test_half_exhaustive(void** state) {
  (void)state;
  for (uint32_t h = 0; h < 65536; h++) {
    float f = collHalfToFloat((uint16_t)h);
    int nan = (h & 0x7fff) > 0x7c00;
    uint32_t want = nan ? (((h & 0x8000u) << 16) | 0x7fc00000u |
                           ((h & 0x3ffu) << 13))
                        : f2u(ref_h2f((uint16_t)h));
    EXPECT_BITS("half->float", h, want, f2u(f));
    EXPECT_BITS("half round trip", h, nan ? (h | 0x200) : h,
                collFloatToHalf(f));
  }
}

/* Every rounding boundary between adjacent halves of both signs: the exact
 * midpoint goes to the even one, one float ulp either side to the nearer. */
static void test_half_midpoints(void** state) {
  (void)state;
  for (uint32_t s = 0; s <= 0x8000; s += 0x8000)
    for (uint32_t h = 0; h <= 0x7bff; h++) {
      float lo = ref_h2f((uint16_t)h);
      float hi = h == 0x7bff ? 65536.0f : ref_h2f((uint16_t)(h + 1));
      float mid = (lo + hi) * 0.5f, sg = s ? -1.0f : 1.0f;
      uint32_t even = (h & 1) ? h + 1 : h;
      EXPECT_BITS("half mid", h, s | even, collFloatToHalf(sg * mid));
      EXPECT_BITS("half below", h, s | h,
                  collFloatToHalf(sg * nextafterf(mid, 0.0f)));
      EXPECT_BITS("half above", h, s | (h + 1),
                  collFloatToHalf(sg * nextafterf(mid, INFINITY)));
    }
  /* hand-picked: ties, overflow, underflow, -0 */
  assert_int_equal(collFloatToHalf(1.0f + 0x1p-11f), 0x3c00);
  assert_int_equal(collFloatToHalf(1.0f + 0x3p-11f), 0x3c02);
  assert_int_equal(collFloatToHalf(65519.0f), 0x7bff);
  assert_int_equal(collFloatToHalf(65520.0f), 0x7c00);
  assert_int_equal(collFloatToHalf(-1e10f), 0xfc00);
  assert_int_equal(collFloatToHalf(0x1p-25f), 0x0000);
  assert_int_equal(collFloatToHalf(0x3p-25f), 0x0002);
  assert_int_equal(collFloatToHalf(-0x1p-30f), 0x8000);
  assert_int_equal(collFloatToHalf(-0.0f), 0x8000);
  assert_int_equal(collFloatToHalf(0x1p-14f), 0x0400);
  assert_int_equal(collFloatToHalf(0x1.ffcp-15f), 0x0400); /* tie to even */
  assert_int_equal(collFloatToHalf(u2f(0x7f800001u)), 0x7e00);
}

/* Random floats (all bit patterns, and the half range): portable == reference,
 * and the F16C array path == portable bit for bit, both directions. */
static void test_half_random_and_f16c(void** state) {
  (void)state;
  enum { N = 4099, ROUNDS = 512 };
  static float in[N];
  static uint16_t fast[N], slow[N];
  uint64_t s = 0x9e3779b97f4a7c15ull;
  int usedFast = 0;
  for (int r = 0; r < ROUNDS; r++) {
    for (int i = 0; i < N; i++) {
      uint32_t u = (uint32_t)rnd(&s);
      if (r & 1) /* exponents 100..146: subnormal..overflow of half */
        u = (u & 0x807fffffu) | ((100u + (u >> 8) % 47u) << 23);
      in[i] = u2f(u);
    }
    usedFast |= collFloatToHalfArray(fast, in, N, 1);
    assert_int_equal(collFloatToHalfArray(slow, in, N, 0), 0);
    for (int i = 0; i < N; i++) {
      EXPECT_BITS("float->half ref", f2u(in[i]), ref_f2h(in[i]), slow[i]);
      EXPECT_BITS("float->half f16c", f2u(in[i]), slow[i], fast[i]);
      EXPECT_BITS("float->half scalar", f2u(in[i]), slow[i],
                  collFloatToHalf(in[i]));
    }
  }
  /* all 65536 halves through both widening paths and back, odd lengths
   * for the tails */
  static uint16_t all[65536], rt[65536];
  static float wf[65536], ws[65536];
  for (uint32_t h = 0; h < 65536; h++) all[h] = (uint16_t)h;
  for (size_t n = 65536; n >= 65529; n -= 7) {
    memset(wf, 0xa5, sizeof wf);
    memset(rt, 0xa5, sizeof rt);
    collHalfToFloatArray(wf, all, n, 1);
    assert_int_equal(collHalfToFloatArray(ws, all, n, 0), 0);
    collFloatToHalfArray(rt, wf, n, 1);
    for (size_t i = 0; i < n; i++) {
      EXPECT_BITS("half->float f16c", i, f2u(ws[i]), f2u(wf[i]));
      EXPECT_BITS("half rt f16c", i, collFloatToHalf(ws[i]), rt[i]);
    }
    for (size_t i = n; i < 65536; i++) /* nothing written past the end */
      assert_true(f2u(wf[i]) == 0xa5a5a5a5u && rt[i] == 0xa5a5);
  }
  print_message("F16C path %s\n", usedFast ? "tested" : "not available");
}

/* All 65536 bfloat16: exact widening (bit shift) and round trip. */
static void test_bf16_exhaustive(void** state) {
  (void)state;
  for (uint32_t b = 0; b < 65536; b++) {
    float f = collBf16ToFloat((uint16_t)b);
    int nan = (b & 0x7fff) > 0x7f80;
    EXPECT_BITS("bf16->float", b, nan ? b << 16 : f2u(ref_b2f((uint16_t)b)),
                f2u(f));
    EXPECT_BITS("bf16 round trip", b, nan ? (b | 0x40) : b,
                collFloatToBf16(f));
  }
}

/* Every rounding boundary between adjacent bfloat16 values, both signs. */
static void test_bf16_midpoints(void** state) {
  (void)state;
  for (uint32_t s = 0; s <= 0x8000; s += 0x8000)
    for (uint32_t b = 0; b <= 0x7f7f; b++) {
      double lo = ref_b2f((uint16_t)b);
      double hi = b == 0x7f7f ? 0x1p128 : ref_b2f((uint16_t)(b + 1));
      float mid = (float)((lo + hi) * 0.5), sg = s ? -1.0f : 1.0f;
      uint32_t even = (b & 1) ? b + 1 : b;
      EXPECT_BITS("bf16 mid", b, s | even, collFloatToBf16(sg * mid));
      EXPECT_BITS("bf16 below", b, s | b,
                  collFloatToBf16(sg * nextafterf(mid, 0.0f)));
      EXPECT_BITS("bf16 above", b, s | (b + 1),
                  collFloatToBf16(sg * nextafterf(mid, INFINITY)));
    }
  assert_int_equal(collFloatToBf16(1.0f + 0x1p-8f), 0x3f80);
  assert_int_equal(collFloatToBf16(1.0f + 0x3p-8f), 0x3f82);
  assert_int_equal(collFloatToBf16(u2f(0x7f7fffffu)), 0x7f80);
  assert_int_equal(collFloatToBf16(u2f(0xff800001u)), 0xffc0);
  uint64_t s = 12345;
  for (int i = 0; i < 1 << 21; i++) {
    float f = u2f((uint32_t)rnd(&s));
    EXPECT_BITS("float->bf16 random", f2u(f), ref_f2b(f), collFloatToBf16(f));
  }
}

/* ---- kernels against the reference ------------------------------------------- */

/* Reference max/min: NaN propagates; -0 < +0. */
static double ref_max(double x, double y) {
  if (isnan(x) || isnan(y)) return NAN;
  if (x == 0 && y == 0) return (signbit(x) && signbit(y)) ? -0.0 : 0.0;
  return x > y ? x : y;
}
static double ref_min(double x, double y) {
  if (isnan(x) || isnan(y)) return NAN;
  if (x == 0 && y == 0) return (signbit(x) || signbit(y)) ? -0.0 : 0.0;
  return x < y ? x : y;
}

/* Reference float32 op; double arithmetic is exact enough for one rounding. */
static float ref_f32(collRedOp_t op, float x, float y) {
  switch (op) {
    case collProd: return (float)((double)x * (double)y);
    case collMax: return (float)ref_max(x, y);
    case collMin: return (float)ref_min(x, y);
    default: return (float)((double)x + (double)y);
  }
}

/* Integer reference: sum/prod modulo 2^64, then truncated to the width. */
#define REF_INT(T, UT)                                              \
  do {                                                              \
    T x, y;                                                         \
    UT r;                                                           \
    memcpy(&x, px, sizeof x);                                       \
    memcpy(&y, py, sizeof y);                                       \
    if (op == collSum) r = (UT)((uint64_t)x + (uint64_t)y);         \
    else if (op == collProd) r = (UT)((uint64_t)x * (uint64_t)y);   \
    else if (op == collMax) r = (UT)(x > y ? x : y);                \
    else r = (UT)(x < y ? x : y);                                   \
    memcpy(out, &r, sizeof r);                                      \
  } while (0)

/* out = reference of x op y for one element of type t. */
static void ref_elem(collDataType_t t, collRedOp_t op, const void* px,
                     const void* py, void* out) {
  if (op == collAvg) op = collSum;
  uint16_t hx, hy, hr;
  float fx, fy, fr;
  double dx, dy, dr;
  switch (t) {
    case collInt8: REF_INT(int8_t, uint8_t); break;
    case collUint8: REF_INT(uint8_t, uint8_t); break;
    case collInt32: REF_INT(int32_t, uint32_t); break;
    case collUint32: REF_INT(uint32_t, uint32_t); break;
    case collInt64: REF_INT(int64_t, uint64_t); break;
    case collUint64: REF_INT(uint64_t, uint64_t); break;
    case collFloat16:
    case collBfloat16:
      memcpy(&hx, px, 2);
      memcpy(&hy, py, 2);
      fx = t == collFloat16 ? ref_h2f(hx) : ref_b2f(hx);
      fy = t == collFloat16 ? ref_h2f(hy) : ref_b2f(hy);
      fr = ref_f32(op, fx, fy);
      hr = t == collFloat16 ? ref_f2h(fr) : ref_f2b(fr);
      memcpy(out, &hr, 2);
      break;
    case collFloat32:
      memcpy(&fx, px, 4);
      memcpy(&fy, py, 4);
      fr = ref_f32(op, fx, fy);
      memcpy(out, &fr, 4);
      break;
    default:
      memcpy(&dx, px, 8);
      memcpy(&dy, py, 8);
      dr = op == collSum ? dx + dy : op == collProd ? dx * dy
           : op == collMax ? ref_max(dx, dy) : ref_min(dx, dy);
      memcpy(out, &dr, 8);
      break;
  }
}

/* 1 if element e (of type t) is a NaN. */
static int elem_is_nan(collDataType_t t, const unsigned char* e) {
  uint16_t h;
  float f;
  double d;
  switch (t) {
    case collFloat16: memcpy(&h, e, 2); return (h & 0x7fff) > 0x7c00;
    case collBfloat16: memcpy(&h, e, 2); return (h & 0x7fff) > 0x7f80;
    case collFloat32: memcpy(&f, e, 4); return isnan(f);
    case collFloat64: memcpy(&d, e, 8); return isnan(d);
    default: return 0;
  }
}

/* Asserts got[0..n) == want (NaN matches any NaN, else bit-exact) and that
 * the GUARD elements after got[n] still hold the 0xa5 fill. */
static void check_elems(collDataType_t t, collRedOp_t op, size_t n,
                        const unsigned char* want, const unsigned char* got,
                        const char* how) {
  size_t sz = collTypeSize(t);
  for (size_t i = 0; i < n; i++) {
    const unsigned char *w = want + i * sz, *g = got + i * sz;
    int ok = elem_is_nan(t, w) ? elem_is_nan(t, g) : !memcmp(w, g, sz);
    if (!ok) {
      uint64_t wv = 0, gv = 0;
      memcpy(&wv, w, sz);
      memcpy(&gv, g, sz);
      print_error("%s %s %s n=%zu i=%zu: want 0x%llx got 0x%llx\n",
                  collTypeName(t), collOpName(op), how, n, i,
                  (unsigned long long)wv, (unsigned long long)gv);
      fail();
    }
  }
  for (size_t i = n * sz; i < (n + GUARD) * sz; i++)
    if (got[i] != 0xa5) fail_msg("%s %s %s n=%zu: wrote past the end",
                                 collTypeName(t), collOpName(op), how, n);
}

/* Random element: raw bits, or (1 in 4) a special value of the type. */
static void gen_elem(collDataType_t t, unsigned char* e, uint64_t* s) {
  static const uint64_t sp8[] = {0, 1, 0x7f, 0x80, 0xff, 0xfe};
  static const uint64_t sp32[] = {0, 1, 0x7fffffff, 0x80000000u, 0xffffffffu,
                                  0x80000001u};
  static const uint64_t sp64[] = {0, 1, 0x7fffffffffffffffull,
                                  0x8000000000000000ull, ~0ull, 2};
  static const uint64_t sph[] = {0, 0x8000, 0x7c00, 0xfc00, 0x7e00,
                                 0x3c00, 0x0001, 0x7bff, 0x7d01, 0x3c01};
  static const uint64_t spb[] = {0, 0x8000, 0x7f80, 0xff80, 0x7fc0,
                                 0x3f80, 0x0001, 0x7f7f, 0x7f81, 0x3f81};
  static const uint64_t spf[] = {0, 0x80000000u, 0x7f800000u, 0xff800000u,
                                 0x7fc00000u, 0x3f800000u, 1, 0x7f7fffffu,
                                 0x7f800001u, 0xbf800001u};
  static const uint64_t spd[] = {0, 0x8000000000000000ull,
                                 0x7ff0000000000000ull, 0xfff0000000000000ull,
                                 0x7ff8000000000000ull, 0x3ff0000000000000ull,
                                 1, 0x7fefffffffffffffull,
                                 0x7ff0000000000001ull, 0xbff0000000000001ull};
  const uint64_t* sp[] = {sp8, sp8, sp32, sp32, sp64, sp64, sph, spf, spd, spb};
  const size_t nsp[] = {6, 6, 6, 6, 6, 6, 10, 10, 10, 10};
  uint64_t r = rnd(s), v = rnd(s);
  if ((r & 3) == 0) v = sp[t][(r >> 2) % nsp[t]];
  memcpy(e, &v, collTypeSize(t)); /* little-endian low bytes */
}

/* One (type, op, n): plain, dst == a, dst == b, dst == a == b; n == 0 with
 * NULL buffers too. */
static void run_case(collDataType_t t, collRedOp_t op, size_t n, uint64_t* s) {
  size_t sz = collTypeSize(t), bytes = (n + GUARD) * sz;
  unsigned char *a = malloc(bytes), *b = malloc(bytes), *want = malloc(bytes),
                *want2 = malloc(bytes), *d = malloc(bytes);
  assert_true(a && b && want && want2 && d);
  collReduceFn fn = collReduceGetFn(t, op);
  assert_non_null(fn);
  for (size_t i = 0; i < n; i++) {
    gen_elem(t, a + i * sz, s);
    uint64_t r = rnd(s);
    if ((r & 7) == 0) memcpy(b + i * sz, a + i * sz, sz); /* equal */
    else gen_elem(t, b + i * sz, s);
    if ((r & 7) == 1) b[i * sz + sz - 1] ^= 0x80; /* sign flipped */
    ref_elem(t, op, a + i * sz, b + i * sz, want + i * sz);
    ref_elem(t, op, a + i * sz, a + i * sz, want2 + i * sz);
  }
  memset(d, 0xa5, bytes);
  fn(d, a, b, n);
  check_elems(t, op, n, want, d, "plain");
  memcpy(d, a, n * sz);
  fn(d, d, b, n);
  check_elems(t, op, n, want, d, "dst==a");
  memcpy(d, b, n * sz);
  fn(d, a, d, n);
  check_elems(t, op, n, want, d, "dst==b");
  memcpy(d, a, n * sz);
  fn(d, d, d, n);
  check_elems(t, op, n, want2, d, "dst==a==b");
  if (n == 0) fn(NULL, NULL, NULL, 0);
  free(a), free(b), free(want), free(want2), free(d);
}

/* All ops and sizes for one type. */
static void kernels_for(collDataType_t t) {
  static const size_t ns[] = {0, 1, 7, 1023, 4099};
  uint64_t s = 0x1234567ull + (uint64_t)t;
  for (int o = 0; o < collNumOps; o++)
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
      run_case(t, (collRedOp_t)o, ns[k], &s);
}

#define KERNEL_TEST(NAME, T) \
  static void NAME(void** state) { (void)state; kernels_for(T); }
KERNEL_TEST(test_kernels_int8, collInt8)
KERNEL_TEST(test_kernels_uint8, collUint8)
KERNEL_TEST(test_kernels_int32, collInt32)
KERNEL_TEST(test_kernels_uint32, collUint32)
KERNEL_TEST(test_kernels_int64, collInt64)
KERNEL_TEST(test_kernels_uint64, collUint64)
KERNEL_TEST(test_kernels_half, collFloat16)
KERNEL_TEST(test_kernels_float, collFloat32)
KERNEL_TEST(test_kernels_double, collFloat64)
KERNEL_TEST(test_kernels_bf16, collBfloat16)

/* ---- hand-written exact cases ------------------------------------------------ */

/* Integer wrap-around and signed/unsigned comparisons, literal values. */
static void test_int_exact(void** state) {
  (void)state;
  int8_t a8[] = {127, -128, -128, 16, -1}, b8[] = {1, -1, -1, 16, 1}, r8[5];
  collReduceGetFn(collInt8, collSum)(r8, a8, b8, 2);
  assert_int_equal(r8[0], -128);
  assert_int_equal(r8[1], 127);
  collReduceGetFn(collInt8, collProd)(r8, a8, b8, 5);
  assert_int_equal(r8[2], -128);
  assert_int_equal(r8[3], 0);
  collReduceGetFn(collInt8, collMax)(r8, a8, b8, 5);
  assert_int_equal(r8[4], 1);
  uint8_t u8a[] = {255, 16, 255}, u8b[] = {1, 17, 1}, u8r[3];
  collReduceGetFn(collUint8, collSum)(u8r, u8a, u8b, 3);
  assert_int_equal(u8r[0], 0);
  collReduceGetFn(collUint8, collProd)(u8r, u8a, u8b, 3);
  assert_int_equal(u8r[1], 16);
  collReduceGetFn(collUint8, collMax)(u8r, u8a, u8b, 3);
  assert_int_equal(u8r[2], 255);
  int32_t a32[] = {INT32_MAX, 65536, -1}, b32[] = {1, 65536, 1}, r32[3];
  collReduceGetFn(collInt32, collSum)(r32, a32, b32, 1);
  assert_int_equal(r32[0], INT32_MIN);
  collReduceGetFn(collInt32, collProd)(r32, a32, b32, 3);
  assert_int_equal(r32[1], 0);
  assert_int_equal(r32[2], -1);
  collReduceGetFn(collInt32, collMin)(r32, a32, b32, 3);
  assert_int_equal(r32[2], -1);
  uint32_t u32a[] = {0x80000000u}, u32b[] = {1}, u32r[1];
  collReduceGetFn(collUint32, collMax)(u32r, u32a, u32b, 1);
  assert_int_equal(u32r[0], 0x80000000u);
  int64_t a64[] = {INT64_MAX, -1}, b64[] = {1, 1}, r64[2];
  collReduceGetFn(collInt64, collSum)(r64, a64, b64, 2);
  assert_true(r64[0] == INT64_MIN && r64[1] == 0);
  collReduceGetFn(collInt64, collMin)(r64, a64, b64, 2);
  assert_true(r64[0] == 1 && r64[1] == -1);
  uint64_t u64a[] = {UINT64_MAX, 1ull << 32}, u64b[] = {1, 1ull << 32}, u64r[2];
  collReduceGetFn(collUint64, collMax)(u64r, u64a, u64b, 2);
  assert_true(u64r[0] == UINT64_MAX);
  collReduceGetFn(collUint64, collProd)(u64r, u64a, u64b, 2);
  assert_true(u64r[0] == UINT64_MAX && u64r[1] == 0);
  collReduceGetFn(collUint64, collMin)(u64r, u64a, u64b, 1);
  assert_true(u64r[0] == 1);
}

/* NaN propagation and signed zeros in max/min, for all float types. Pairs:
 * (NaN,1) (1,NaN) (-0,+0) (+0,-0) (-0,-0) (+0,+0) (-inf,NaN) (3,-5) (NaN,NaN)
 * (sNaN,1) with NaN = quiet NaN, sNaN signalling. */
#define NPAIRS 10
static const int kMaxZero[NPAIRS] = {0, 0, 0, 0, 1, 0, 0, 0, 0, 0};
static const int kMinZero[NPAIRS] = {0, 0, 1, 1, 1, 0, 0, 0, 0, 0};

/* Checks one float type given its encodings of the values used above. */
static void minmax_special(collDataType_t t, uint64_t nan, uint64_t snan,
                           uint64_t one, uint64_t pz, uint64_t nz,
                           uint64_t ninf, uint64_t three, uint64_t m5) {
  uint64_t a[NPAIRS] = {nan, one, nz, pz, nz, pz, ninf, three, nan, snan};
  uint64_t b[NPAIRS] = {one, nan, pz, nz, nz, pz, nan, m5, nan, one};
  size_t sz = collTypeSize(t);
  unsigned char ea[NPAIRS * 8], eb[NPAIRS * 8], r[NPAIRS * 8];
  for (int i = 0; i < NPAIRS; i++) {
    memcpy(ea + i * sz, &a[i], sz);
    memcpy(eb + i * sz, &b[i], sz);
  }
  for (int mx = 0; mx < 2; mx++) {
    collReduceGetFn(t, mx ? collMax : collMin)(r, ea, eb, NPAIRS);
    for (int i = 0; i < NPAIRS; i++) {
      uint64_t v = 0;
      memcpy(&v, r + i * sz, sz);
      if (i < 2 || i == 6 || i == 8 || i == 9) {
        if (!elem_is_nan(t, r + i * sz))
          fail_msg("%s %s pair %d: 0x%llx is not NaN", collTypeName(t),
                   mx ? "max" : "min", i, (unsigned long long)v);
      } else if (i == 7) {
        EXPECT_BITS(collTypeName(t), i, mx ? three : m5, v);
      } else {
        EXPECT_BITS(collTypeName(t), i,
                    (mx ? kMaxZero[i] : kMinZero[i]) ? nz : pz, v);
      }
    }
  }
}

/* max(-0,+0) = +0, min(-0,+0) = -0, NaN propagates, every float type. */
static void test_minmax_nan_zero(void** state) {
  (void)state;
  minmax_special(collFloat32, 0x7fc00000u, 0x7f800001u, 0x3f800000u, 0,
                 0x80000000u, 0xff800000u, 0x40400000u, 0xc0a00000u);
  minmax_special(collFloat64, 0x7ff8000000000000ull, 0x7ff0000000000001ull,
                 0x3ff0000000000000ull, 0, 0x8000000000000000ull,
                 0xfff0000000000000ull, 0x4008000000000000ull,
                 0xc014000000000000ull);
  minmax_special(collFloat16, 0x7e00, 0x7c01, 0x3c00, 0, 0x8000, 0xfc00,
                 0x4200, 0xc500);
  minmax_special(collBfloat16, 0x7fc0, 0x7f81, 0x3f80, 0, 0x8000, 0xff80,
                 0x4040, 0xc0a0);
}

/* 16-bit sums round once from the float32 result: 1 + 2^-11 ties to 1. */
static void test_f16_sum_rounding(void** state) {
  (void)state;
  uint16_t a[] = {0x3c00, 0x3c01, 0x7bff, 0x0001}, b[] = {0x1000, 0x1000,
                                                           0x5000, 0x8001};
  uint16_t r[4]; /* 0x1000 = 2^-11 ; 0x5000 = 32 */
  collReduceGetFn(collFloat16, collSum)(r, a, b, 4);
  assert_int_equal(r[0], 0x3c00); /* tie -> even */
  assert_int_equal(r[1], 0x3c02); /* tie -> even (up) */
  assert_int_equal(r[2], 0x7c00); /* 65504 + 32 = 65536 -> inf */
  assert_int_equal(r[3], 0x0000); /* x + -x = +0 */
  uint16_t c[] = {0x3f80, 0x3f81}, d[] = {0x3b80, 0x3b80}; /* 2^-8 */
  collReduceGetFn(collBfloat16, collSum)(r, c, d, 2);
  assert_int_equal(r[0], 0x3f80);
  assert_int_equal(r[1], 0x3f82);
}

/* ---- avg finish ------------------------------------------------------------------ */

/* Integer avg truncates toward zero; unsigned types divide unsigned; nranks
 * wider than the element type; nranks <= 1 is a no-op. */
static void test_avg_int(void** state) {
  (void)state;
  int8_t i8[] = {-7, 7, -128, 127, -1, 1, 0};
  const int8_t i8want[] = {-3, 3, -64, 63, 0, 0, 0};
  collReduceAvgFinish(i8, 7, collInt8, 2);
  assert_memory_equal(i8, i8want, sizeof i8);
  int8_t i8b[] = {-128, 127, -7};
  collReduceAvgFinish(i8b, 3, collInt8, 300);
  assert_true(i8b[0] == 0 && i8b[1] == 0 && i8b[2] == 0);
  int8_t i8c[] = {-7};
  collReduceAvgFinish(i8c, 1, collInt8, 3);
  assert_int_equal(i8c[0], -2);
  uint8_t u8[] = {255, 254, 1};
  collReduceAvgFinish(u8, 3, collUint8, 2);
  assert_true(u8[0] == 127 && u8[1] == 127 && u8[2] == 0);
  int32_t i32[] = {-7, INT32_MIN, 7, -1};
  collReduceAvgFinish(i32, 4, collInt32, 2);
  assert_true(i32[0] == -3 && i32[1] == -1073741824 && i32[2] == 3 &&
              i32[3] == 0);
  uint32_t u32[] = {0xffffffffu, 7};
  collReduceAvgFinish(u32, 2, collUint32, 2);
  assert_true(u32[0] == 0x7fffffffu && u32[1] == 3);
  int64_t i64[] = {-7, INT64_MIN, -5000000000ll};
  collReduceAvgFinish(i64, 3, collInt64, 3);
  assert_true(i64[0] == -2 && i64[1] == -3074457345618258602ll &&
              i64[2] == -1666666666ll);
  uint64_t u64[] = {UINT64_MAX};
  collReduceAvgFinish(u64, 1, collUint64, 3);
  assert_true(u64[0] == 0x5555555555555555ull);
  int32_t keep[] = {-7, 9};
  collReduceAvgFinish(keep, 2, collInt32, 1);
  collReduceAvgFinish(keep, 2, collInt32, 0);
  collReduceAvgFinish(keep, 2, collNumTypes, 2);
  assert_true(keep[0] == -7 && keep[1] == 9);
  collReduceAvgFinish(NULL, 0, collInt32, 2);
}

/* Float avg is plain division; 16-bit types divide in float32 and round to
 * nearest even, checked on every input for several nranks. */
static void test_avg_float(void** state) {
  (void)state;
  float f[] = {1.0f, -0.0f, INFINITY, NAN, 7.0f};
  collReduceAvgFinish(f, 5, collFloat32, 3);
  assert_int_equal(f2u(f[0]), f2u(0x1.555556p-2f));
  assert_int_equal(f2u(f[1]), 0x80000000u);
  assert_true(isinf(f[2]) && f[2] > 0 && isnan(f[3]));
  assert_int_equal(f2u(f[4]), f2u(0x1.2aaaaap+1f));
  double d[] = {1.0, -7.0};
  collReduceAvgFinish(d, 2, collFloat64, 3);
  assert_true(d2u(d[0]) == d2u(0x1.5555555555555p-2));
  assert_true(d2u(d[1]) == d2u(-0x1.2aaaaaaaaaaabp+1));
  uint16_t h[] = {0x3c00, 0x0001, 0x0003, 0x3f80};
  collReduceAvgFinish(h, 3, collFloat16, 2);
  assert_true(h[0] == 0x3800 && h[1] == 0x0000 && h[2] == 0x0002);
  collReduceAvgFinish(h + 3, 1, collBfloat16, 3);
  assert_int_equal(h[3], 0x3eab); /* 1/3 = 0x3eaaaaab rounds up */
  static const int nr[] = {2, 3, 7, 65536};
  static uint16_t all[65536];
  for (int k = 0; k < 4; k++)
    for (int bf = 0; bf < 2; bf++) {
      for (uint32_t i = 0; i < 65536; i++) all[i] = (uint16_t)i;
      collReduceAvgFinish(all, 65536, bf ? collBfloat16 : collFloat16, nr[k]);
      for (uint32_t i = 0; i < 65536; i++) {
        float x = bf ? ref_b2f((uint16_t)i) : ref_h2f((uint16_t)i);
        float q = x / (float)nr[k];
        uint16_t want = bf ? ref_f2b(q) : ref_f2h(q);
        if (isnan(q)) {
          if (!elem_is_nan(bf ? collBfloat16 : collFloat16,
                           (const unsigned char*)&all[i]))
            fail_msg("avg %d nan 0x%x", bf, i);
        } else {
          EXPECT_BITS(bf ? "bf16 avg" : "half avg", i, want, all[i]);
        }
      }
    }
}

/* ---- float32 working copies (COLL_HALF_ACCUM) ------------------------------ */

/* Widen is exact and Narrow rounds to nearest even once, dividing first:
 * every float16 and bfloat16 value, divisors 1, 3 and 4, against the
 * reference conversions. */
static void test_widen_narrow(void** state) {
  (void)state;
  static uint16_t in[65536], out[65536];
  static float w[65536];
  for (int bf = 0; bf < 2; bf++) {
    collDataType_t t = bf ? collBfloat16 : collFloat16;
    for (uint32_t i = 0; i < 65536; i++) in[i] = (uint16_t)i;
    collReduceWiden(w, in, 65536, t);
    for (uint32_t i = 0; i < 65536; i++) {
      float x = bf ? ref_b2f((uint16_t)i) : ref_h2f((uint16_t)i);
      if (isnan(x)) assert_true(isnan(w[i]));
      else assert_int_equal(f2u(w[i]), f2u(x));
    }
    static const int div[] = {1, 3, 4};
    for (int k = 0; k < 3; k++) {
      collReduceNarrow(out, w, 65536, t, div[k]);
      for (uint32_t i = 0; i < 65536; i++) {
        float q = w[i] / (float)div[k];
        if (isnan(q)) {
          if (!elem_is_nan(t, (const unsigned char*)&out[i])) fail_msg("narrow %d nan 0x%x", bf, i);
        } else {
          EXPECT_BITS(bf ? "bf16 narrow" : "half narrow", i, bf ? ref_f2b(q) : ref_f2h(q), out[i]);
        }
      }
    }
  }
  /* the sum NCCL's per-step rounding loses: 1 + 2^-11 + 2^-11 in float32 */
  float acc[1] = {1.0f + 0x1p-11f + 0x1p-11f};
  uint16_t h;
  collReduceNarrow(&h, acc, 1, collFloat16, 1);
  assert_int_equal(h, 0x3c01); /* 1 + 2^-10 */
  /* avg of 4 x 30000 in float32 does not overflow float16 */
  acc[0] = 120000.0f;
  collReduceNarrow(&h, acc, 1, collFloat16, 4);
  assert_int_equal(h, collFloatToHalf(30000.0f));
  /* other types: a no-op */
  uint16_t keep = 0x1234;
  collReduceNarrow(&keep, acc, 1, collFloat32, 1);
  collReducePreMul(&keep, &keep, 1, collInt32, 4);
  assert_int_equal(keep, 0x1234);
  assert_true(collTypeIsHalf(collFloat16) && collTypeIsHalf(collBfloat16) && !collTypeIsHalf(collFloat32));
}

/* PreMul is NCCL's float16 average: x * round(1/n), rounded once (the
 * product of two float16 values is exact in float32). */
static void test_premul(void** state) {
  (void)state;
  uint16_t x[4] = {collFloatToHalf(30000.0f), collFloatToHalf(0x1p-24f), collFloatToHalf(-3.0f), 0x7c00};
  uint16_t y[4];
  collReducePreMul(y, x, 4, collFloat16, 3);
  /* 1/3 in float16 is 0.333251953125; 30000 x that = 9997.56 -> 10000 */
  assert_int_equal(y[0], collFloatToHalf(10000.0f));
  assert_int_equal(y[1], 0x0000); /* 2^-24 / 3 underflows, as in NCCL */
  assert_int_equal(y[2], collFloatToHalf(-3.0f * 0.333251953125f));
  assert_int_equal(y[3], 0x7c00);
  collReducePreMul(y, x, 1, collFloat16, 4);
  assert_int_equal(y[0], collFloatToHalf(7500.0f));
  uint16_t b = collFloatToBf16(3.0f), c;
  collReducePreMul(&c, &b, 1, collBfloat16, 3); /* 1/3 in bfloat16 = 0.333984375 */
  assert_int_equal(c, collFloatToBf16(3.0f * 0.333984375f));
  static uint16_t all[65536], got[65536];
  for (uint32_t i = 0; i < 65536; i++) all[i] = (uint16_t)i;
  collReducePreMul(got, all, 65536, collFloat16, 7);
  float k = ref_h2f(ref_f2h(1.0f / 7.0f));
  for (uint32_t i = 0; i < 65536; i++) {
    float q = ref_h2f((uint16_t)i) * k;
    if (isnan(q)) {
      if (!elem_is_nan(collFloat16, (const unsigned char*)&got[i])) fail_msg("premul nan 0x%x", i);
    } else {
      EXPECT_BITS("half premul", i, ref_f2h(q), got[i]);
    }
  }
}

/* Runs every test. */
int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names_sizes),
      cmocka_unit_test(test_get_fn),
      cmocka_unit_test(test_half_exhaustive),
      cmocka_unit_test(test_half_midpoints),
      cmocka_unit_test(test_half_random_and_f16c),
      cmocka_unit_test(test_bf16_exhaustive),
      cmocka_unit_test(test_bf16_midpoints),
      cmocka_unit_test(test_kernels_int8),
      cmocka_unit_test(test_kernels_uint8),
      cmocka_unit_test(test_kernels_int32),
      cmocka_unit_test(test_kernels_uint32),
      cmocka_unit_test(test_kernels_int64),
      cmocka_unit_test(test_kernels_uint64),
      cmocka_unit_test(test_kernels_half),
      cmocka_unit_test(test_kernels_float),
      cmocka_unit_test(test_kernels_double),
      cmocka_unit_test(test_kernels_bf16),
      cmocka_unit_test(test_int_exact),
      cmocka_unit_test(test_minmax_nan_zero),
      cmocka_unit_test(test_f16_sum_rounding),
      cmocka_unit_test(test_avg_int),
      cmocka_unit_test(test_avg_float),
      cmocka_unit_test(test_widen_narrow),
      cmocka_unit_test(test_premul),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
