/*
 * test_reduce_math.c - the reduction math of the GPU kernels
 * (src/reduce/reduce_math.h), run on the host, against the host reference
 * (src/reduce/reduce.c): every type x op, avg's division, the copy body.
 *
 * The range bodies are run exactly as kernel threads run them: worker w of
 * nw for every w, with nw = 1, 3, 7, 64 and 512 (a grid), on buffers whose
 * offsets modulo 16 bytes agree (the 16-byte pack path with a head and a
 * tail) or differ (element by element), and in place. The inputs mix random
 * bit patterns with the special values of each type (signed zeros,
 * infinities, quiet and signalling NaNs with payloads, subnormals, integer
 * extremes). Results must equal the reference bit for bit, except that a
 * NaN from sum, prod or avg only has to be a NaN (reduce_math.h: its payload
 * is not specified). Elements past the end must stay untouched.
 * The conversions are compared with reduce.c's on every float16/bfloat16
 * pattern and on every rounding case of a float32 sweep, and the 16-bit
 * max/min picks with widening through float32 on every pattern against
 * every special value.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reduce/reduce.h"
#include "reduce/reduce_math.h"

#define N_MAX 4099
#define GUARD 64 /* bytes after the end that must stay untouched */
#define PAD 64   /* room to shift buffers by up to 3 elements + misalign */

static uint64_t rnd(uint64_t* s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 0x2545F4914F6CDD1Dull;
}

static const char* const kTags[collNumTypes] = {"i8", "u8", "i32", "u32", "i64", "u64", "f16", "f32", "f64", "bf16"};
static const char* const kOps[collNumOps] = {"sum", "prod", "max", "min", "avg"};

/* 1 if element i of type t (bits) is a NaN. */
static int isNanBits(collDataType_t t, const unsigned char* p) {
  uint16_t h;
  uint32_t f;
  uint64_t d;
  switch (t) {
    case collFloat16: memcpy(&h, p, 2); return (h & 0x7fff) > 0x7c00;
    case collBfloat16: memcpy(&h, p, 2); return (h & 0x7fff) > 0x7f80;
    case collFloat32: memcpy(&f, p, 4); return (f & 0x7fffffffu) > 0x7f800000u;
    case collFloat64: memcpy(&d, p, 8); return (d & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
    default: return 0;
  }
}

/* Special values of type t as bit patterns. */
static int specials(collDataType_t t, uint64_t* v) {
  static const uint64_t h[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01, 0x7d55, 0xfdff, 0x0001,
                               0x8001, 0x03ff, 0x0400, 0x7bff, 0xfbff, 0x3c00, 0xbc00, 0x3555};
  static const uint64_t b[] = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xffc0, 0x7f81, 0x7fa5, 0xffbf, 0x0001,
                               0x8001, 0x007f, 0x0080, 0x7f7f, 0xff7f, 0x3f80, 0xbf80, 0x3eab};
  static const uint64_t f[] = {0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000,
                               0x7f800001, 0x7fa5a5a5, 0xffbfffff, 0x00000001, 0x80000001, 0x007fffff,
                               0x00800000, 0x7f7fffff, 0xff7fffff, 0x3f800000, 0xbf800000, 0x3eaaaaab};
  static const uint64_t d[] = {0, 0x8000000000000000ull, 0x7ff0000000000000ull, 0xfff0000000000000ull,
                               0x7ff8000000000000ull, 0xfff8000000000000ull, 0x7ff0000000000001ull,
                               0x7ff4a5a5a5a5a5a5ull, 1, 0x8000000000000001ull, 0x000fffffffffffffull,
                               0x7fefffffffffffffull, 0x3ff0000000000000ull, 0xbff0000000000000ull};
  static const uint64_t i[] = {0, 1, 2, 0x7f, 0x80, 0xff, 0x7fffffff, 0x80000000u, 0xffffffffu,
                               0x7fffffffffffffffull, 0x8000000000000000ull, ~0ull, 3, 0x10001};
  const uint64_t* src;
  int n;
  switch (t) {
    case collFloat16: src = h, n = (int)(sizeof h / sizeof *h); break;
    case collBfloat16: src = b, n = (int)(sizeof b / sizeof *b); break;
    case collFloat32: src = f, n = (int)(sizeof f / sizeof *f); break;
    case collFloat64: src = d, n = (int)(sizeof d / sizeof *d); break;
    default: src = i, n = (int)(sizeof i / sizeof *i);
  }
  memcpy(v, src, sizeof *v * (size_t)n);
  return n;
}

/* n elements of type t: 1 in 4 a special value, else random bits. */
static void fill(collDataType_t t, unsigned char* p, size_t n, uint64_t* seed) {
  uint64_t sp[32];
  int ns = specials(t, sp);
  size_t es = collTypeSize(t);
  for (size_t i = 0; i < n; i++) {
    uint64_t r = rnd(seed);
    uint64_t v = (r & 3) == 0 ? sp[(r >> 8) % (uint64_t)ns] : rnd(seed);
    memcpy(p + i * es, &v, es); /* little endian: the low bytes */
  }
}

/* got vs exp, n elements of t: bits equal, or both NaN when nanLoose. */
static void expectSame(const char* what, collDataType_t t, const unsigned char* exp, const unsigned char* got, size_t n,
                       int nanLoose) {
  size_t es = collTypeSize(t);
  for (size_t i = 0; i < n; i++) {
    const unsigned char* e = exp + i * es;
    const unsigned char* g = got + i * es;
    if (memcmp(e, g, es) == 0) continue;
    if (nanLoose && isNanBits(t, e) && isNanBits(t, g)) continue;
    uint64_t ev = 0, gv = 0;
    memcpy(&ev, e, es);
    memcpy(&gv, g, es);
    print_error("%s: element %zu of %zu: expected 0x%llx got 0x%llx\n", what, i, n, (unsigned long long)ev,
                (unsigned long long)gv);
    fail();
  }
}

static void expectGuard(const char* what, const unsigned char* p) {
  for (int i = 0; i < GUARD; i++)
    if (p[i] != 0xa5) {
      print_error("%s: byte %d past the end was written (0x%02x)\n", what, i, p[i]);
      fail();
    }
}

static const size_t kWorkers[] = {1, 3, 7, 64, 512};
static const size_t kCounts[] = {0, 1, 2, 7, 8, 15, 16, 17, 33, 100, 1023, N_MAX};

/* Runs the range body of (t, op) as nw workers over n elements. */
static void runRange(collRmRangeFn fn, void* d, const void* a, const void* b, size_t n, size_t nw) {
  for (size_t w = 0; w < nw; w++) fn(d, a, b, n, w, nw);
}

/* Every (type, op) for sum/prod/max/min (avg = sum here): out of place with
 * equal and with different misalignments, in place on a and on b. */
static void test_every_type_op(void** state) {
  (void)state;
  uint64_t seed = 0x1234567887654321ull;
  size_t bytes = N_MAX * 8 + PAD + GUARD;
  unsigned char *A = malloc(bytes), *B = malloc(bytes), *R = malloc(bytes), *D = malloc(bytes);
  assert_non_null(A), assert_non_null(B), assert_non_null(R), assert_non_null(D);
  unsigned long long checked = 0;
  for (int t = 0; t < collNumTypes; t++) {
    size_t es = collTypeSize((collDataType_t)t);
    for (int op = 0; op < collNumOps; op++) {
      collRmRangeFn fn = collRmGetRange((collDataType_t)t, (collRedOp_t)op);
      collReduceFn ref = collReduceGetFn((collDataType_t)t, (collRedOp_t)op);
      assert_non_null(fn);
      assert_non_null(ref);
      int loose = (op == collSum || op == collProd || op == collAvg);
      for (size_t ci = 0; ci < sizeof kCounts / sizeof *kCounts; ci++) {
        size_t n = kCounts[ci];
        /* offsets in elements of (d, a, b): equal (packs, with a head when
         * nonzero) and different (element by element) */
        static const int offs[][3] = {{0, 0, 0}, {1, 1, 1}, {3, 3, 3}, {0, 1, 2}, {2, 0, 1}};
        for (size_t oi = 0; oi < sizeof offs / sizeof *offs; oi++) {
          unsigned char *a = A + (size_t)offs[oi][1] * es, *b = B + (size_t)offs[oi][2] * es;
          unsigned char *d = D + (size_t)offs[oi][0] * es, *r = R;
          fill((collDataType_t)t, a, n, &seed);
          fill((collDataType_t)t, b, n, &seed);
          ref(r, a, b, n);
          for (size_t wi = 0; wi < sizeof kWorkers / sizeof *kWorkers; wi++) {
            char what[128];
            snprintf(what, sizeof what, "%s %s n=%zu offsets %d,%d,%d nw=%zu", kTags[t], kOps[op], n, offs[oi][0],
                     offs[oi][1], offs[oi][2], kWorkers[wi]);
            memset(d, 0xa5, n * es + GUARD);
            runRange(fn, d, a, b, n, kWorkers[wi]);
            expectSame(what, (collDataType_t)t, r, d, n, loose);
            expectGuard(what, d + n * es);
            checked += n;
          }
          /* in place: dst == a, then dst == b */
          memcpy(d, a, n * es);
          memset(d + n * es, 0xa5, GUARD);
          runRange(fn, d, d, b, n, 64);
          expectSame("in place (dst == a)", (collDataType_t)t, r, d, n, loose);
          expectGuard("in place (dst == a)", d + n * es);
          memcpy(d, b, n * es);
          runRange(fn, d, a, d, n, 7);
          expectSame("in place (dst == b)", (collDataType_t)t, r, d, n, loose);
        }
      }
    }
  }
  print_message("checked %llu elements over %d types x %d ops\n", checked, collNumTypes, collNumOps);
  free(A), free(B), free(R), free(D);
}

/* avg's division against collReduceAvgFinish, every type, several nranks. */
static void test_avg_division(void** state) {
  (void)state;
  uint64_t seed = 42;
  size_t bytes = N_MAX * 8 + PAD + GUARD;
  unsigned char *R = malloc(bytes), *E = malloc(bytes), *D = malloc(bytes);
  assert_non_null(R), assert_non_null(E), assert_non_null(D);
  static const int nranks[] = {1, 2, 3, 4, 7, 8, 1000, 65536};
  for (int t = 0; t < collNumTypes; t++) {
    collRmAvgRangeFn fn = collRmGetAvgRange((collDataType_t)t);
    assert_non_null(fn);
    size_t es = collTypeSize((collDataType_t)t);
    for (size_t ci = 0; ci < sizeof kCounts / sizeof *kCounts; ci++)
      for (size_t ki = 0; ki < sizeof nranks / sizeof *nranks; ki++)
        for (int off = 0; off < 3; off++) {
          size_t n = kCounts[ci];
          unsigned char* d = D + (size_t)off * es;
          fill((collDataType_t)t, R, n, &seed);
          memcpy(E, R, n * es);
          collReduceAvgFinish(E, n, (collDataType_t)t, nranks[ki]); /* the reference */
          for (size_t wi = 0; wi < sizeof kWorkers / sizeof *kWorkers; wi++) {
            memcpy(d, R, n * es);
            memset(d + n * es, 0xa5, GUARD);
            for (size_t w = 0; w < kWorkers[wi]; w++) fn(d, n, nranks[ki], w, kWorkers[wi]);
            char what[96];
            snprintf(what, sizeof what, "avg %s n=%zu nranks=%d offset %d nw=%zu", kTags[t], n, nranks[ki], off,
                     kWorkers[wi]);
            expectSame(what, (collDataType_t)t, E, d, n, 1);
            expectGuard(what, d + n * es);
          }
        }
  }
  free(R), free(E), free(D);
}

/* The copy body against memcpy: every size up to 200 bytes and a large one,
 * source/destination offsets 0..17, several worker counts. */
static void test_copy(void** state) {
  (void)state;
  uint64_t seed = 7;
  enum { BIG = 70001 };
  unsigned char *S = malloc(BIG + PAD), *D = malloc(BIG + PAD + GUARD);
  assert_non_null(S), assert_non_null(D);
  for (size_t i = 0; i < BIG + PAD; i++) S[i] = (unsigned char)rnd(&seed);
  size_t sizes[212];
  int nsizes = 0;
  for (size_t b = 0; b <= 200; b++) sizes[nsizes++] = b;
  sizes[nsizes++] = 4096, sizes[nsizes++] = 65543, sizes[nsizes++] = BIG;
  for (int si = 0; si < nsizes; si++)
    for (int so = 0; so < 18; so += (sizes[si] > 200 ? 5 : 1))
      for (int dof = 0; dof < 18; dof += (sizes[si] > 200 ? 5 : 1))
        for (size_t wi = 0; wi < sizeof kWorkers / sizeof *kWorkers; wi++) {
          memset(D, 0xa5, BIG + PAD + GUARD);
          size_t bytes = sizes[si];
          for (size_t w = 0; w < kWorkers[wi]; w++) collRmCopyRange(D + dof, S + so, bytes, w, kWorkers[wi]);
          if (memcmp(D + dof, S + so, bytes) != 0) {
            print_error("copy of %zu bytes, offsets %d -> %d, nw=%zu differs\n", bytes, so, dof, kWorkers[wi]);
            fail();
          }
          for (int i = 0; i < dof; i++) assert_int_equal(D[i], 0xa5);
          expectGuard("copy", D + dof + bytes);
        }
  free(S), free(D);
}

/* Conversions equal reduce.c's: every 16-bit pattern, and a float32 sweep
 * through every exponent with rounding edges and random mantissas. */
static void test_conversions(void** state) {
  (void)state;
  for (uint32_t h = 0; h < 65536; h++) {
    float a = collRmH2F((uint16_t)h), b = collHalfToFloat((uint16_t)h);
    assert_int_equal(collRmF32Bits(a), collRmF32Bits(b));
    assert_int_equal(collRmF32Bits(collRmB2F((uint16_t)h)), collRmF32Bits(collBf16ToFloat((uint16_t)h)));
    assert_int_equal(collRmF2H(a), collFloatToHalf(a));
    assert_int_equal(collRmF2B(collRmB2F((uint16_t)h)), collFloatToBf16(collBf16ToFloat((uint16_t)h)));
  }
  uint64_t seed = 99;
  for (uint32_t e = 0; e < 256; e++)
    for (int k = 0; k < 4096; k++) {
      uint32_t m = k < 32 ? (uint32_t)(k & 1 ? 0x1000u * (uint32_t)k - 1 : 0x1000u * (uint32_t)k) /* half rounding edges */
                          : (uint32_t)rnd(&seed);
      for (uint32_t s = 0; s < 2; s++) {
        uint32_t u = (s << 31) | (e << 23) | (m & 0x7fffffu);
        float f = collRmBitsF32(u);
        if (collRmF2H(f) != collFloatToHalf(f) || collRmF2B(f) != collFloatToBf16(f)) {
          print_error("float 0x%08x: f16 0x%04x vs 0x%04x, bf16 0x%04x vs 0x%04x\n", u, collRmF2H(f),
                      collFloatToHalf(f), collRmF2B(f), collFloatToBf16(f));
          fail();
        }
      }
    }
}

/* max/min picked on 16-bit patterns == widen, pick in float32, round back
 * (what reduce.c does), for every pattern against every special value. */
static void test_half_picks(void** state) {
  (void)state;
  uint64_t sp[32];
  for (int bf = 0; bf < 2; bf++) {
    collDataType_t t = bf ? collBfloat16 : collFloat16;
    int ns = specials(t, sp);
    for (uint32_t h = 0; h < 65536; h++)
      for (int j = 0; j < ns; j++)
        for (int order = 0; order < 2; order++) {
          uint16_t a = order ? (uint16_t)sp[j] : (uint16_t)h, b = order ? (uint16_t)h : (uint16_t)sp[j];
          float fa = bf ? collRmB2F(a) : collRmH2F(a), fb = bf ? collRmB2F(b) : collRmH2F(b);
          uint16_t wmax = bf ? collRmF2B(collRm_max_f32(fa, fb)) : collRmF2H(collRm_max_f32(fa, fb));
          uint16_t wmin = bf ? collRmF2B(collRm_min_f32(fa, fb)) : collRmF2H(collRm_min_f32(fa, fb));
          uint16_t pmax = bf ? collRm_max_bf16(a, b) : collRm_max_f16(a, b);
          uint16_t pmin = bf ? collRm_min_bf16(a, b) : collRm_min_f16(a, b);
          if (wmax != pmax || wmin != pmin) {
            print_error("%s a=0x%04x b=0x%04x: max 0x%04x vs widened 0x%04x, min 0x%04x vs 0x%04x\n", kTags[t], a, b,
                        pmax, wmax, pmin, wmin);
            fail();
          }
        }
  }
}

/* The table: NULL for invalid type or op, avg is sum, every entry set. */
static void test_tables(void** state) {
  (void)state;
  assert_null(collRmGetRange(collNumTypes, collSum));
  assert_null(collRmGetRange((collDataType_t)-1, collSum));
  assert_null(collRmGetRange(collFloat32, collNumOps));
  assert_null(collRmGetAvgRange(collNumTypes));
  for (int t = 0; t < collNumTypes; t++) {
    assert_ptr_equal(collRmGetRange((collDataType_t)t, collAvg), collRmGetRange((collDataType_t)t, collSum));
    assert_non_null(collRmGetAvgRange((collDataType_t)t));
  }
  /* -0.0 and +0.0 in either order, NaN first operand wins (quieted) */
  assert_int_equal(collRmF32Bits(collRm_max_f32(-0.0f, 0.0f)), 0x00000000u);
  assert_int_equal(collRmF32Bits(collRm_max_f32(0.0f, -0.0f)), 0x00000000u);
  assert_int_equal(collRmF32Bits(collRm_min_f32(0.0f, -0.0f)), 0x80000000u);
  assert_int_equal(collRmF32Bits(collRm_max_f32(collRmBitsF32(0x7f800001u), collRmBitsF32(0xffc00005u))),
                   0x7fc00001u);
  assert_int_equal(collRm_sum_i8(127, 1), -128);
  assert_int_equal(collRm_prod_u8(16, 16), 0);
  assert_int_equal(collRm_div_i32(-7, 2), -3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tables),       cmocka_unit_test(test_every_type_op), cmocka_unit_test(test_avg_division),
      cmocka_unit_test(test_copy),         cmocka_unit_test(test_conversions),   cmocka_unit_test(test_half_picks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
