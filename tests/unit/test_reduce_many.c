/*
 * test_reduce_many.c - unit tests of the n-input kernels (reduce_many.c,
 * collReduceManyFn), which the zero-copy all-reduce and reduce-scatter run.
 *
 * The reference is reduce.c's two-input kernel applied in rank order
 * (((in[0] op in[1]) op in[2]) ...) and then collReduceAvgFinish for avg:
 * every output must have exactly its bits. Every type with a kernel x
 * sum, prod, max, min, avg; n = 2, 3, 4, 7; counts around the 64-byte line
 * (0, 1, one line less one, one line, one line plus one, 1023, 4099);
 * inputs and outputs at an element offset that breaks 16-byte alignment
 * (plain stores then) and aligned; two outputs (one streamed, one not) and
 * in place (output 0 is input 0). Integers are random bits (sums and
 * products wrap, avg truncates); floats are random finite values, and for
 * max/min also NaNs, infinities and signed zeros (whose bits the rules fix;
 * a NaN from sum or prod has unspecified bits). The elements after count
 * must stay untouched. float16/bfloat16 and invalid arguments have none.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "reduce/reduce.h"

#define MAXN 7
#define MAXCOUNT 4099
#define GUARD 16     /* elements after the end that must stay untouched */
#define POISON 0xa5  /* the guard's bytes */

static uint64_t rnd(uint64_t* s) { /* xorshift64* */
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 0x2545F4914F6CDD1Dull;
}

/* Element i of an input: random bits; floats finite in [-4, 4) except that
 * max/min (specials) also get NaN, +-inf and +-0 now and then. */
static void fillElem(char* p, collDataType_t t, int specials, uint64_t* s) {
  uint64_t v = rnd(s);
  if (t == collFloat32 || t == collFloat64) {
    double d = (double)(int64_t)(v >> 11) / (double)(1ull << 50); /* [-4, 4) */
    unsigned k = (unsigned)(v & 31);
    if (specials && k < 5) {
      static const double kSpecial[5] = {0.0, -0.0, 1.0 / 0.0, -1.0 / 0.0, 0.0 / 0.0};
      d = kSpecial[k];
    }
    if (t == collFloat32) {
      float f = (float)d;
      memcpy(p, &f, sizeof f);
    } else {
      memcpy(p, &d, sizeof d);
    }
    return;
  }
  memcpy(p, &v, collTypeSize(t));
}

static void checkOne(collDataType_t t, collRedOp_t op, int n, size_t count, size_t skew, int inPlace) {
  size_t es = collTypeSize(t), bytes = ((count + GUARD) * es + 64 + 63) / 64 * 64; /* aligned_alloc: a multiple of 64 */
  collReduceManyFn many = collReduceGetManyFn(t, op);
  collReduceFn two = collReduceGetFn(t, op);
  assert_non_null(many);
  assert_non_null(two);
  char* inBuf[MAXN];
  const char* in[MAXN];
  uint64_t seed = 0x9e3779b97f4a7c15ull ^ ((uint64_t)t << 40) ^ ((uint64_t)op << 32) ^ ((uint64_t)n << 24) ^ count;
  int specials = op == collMax || op == collMin;
  for (int r = 0; r < n; r++) {
    inBuf[r] = aligned_alloc(64, bytes);
    assert_non_null(inBuf[r]);
    memset(inBuf[r], POISON, bytes);
    for (size_t i = 0; i < count; i++) fillElem(inBuf[r] + (skew + i) * es, t, specials, &seed);
    in[r] = inBuf[r] + skew * es;
  }
  char* want = malloc(bytes);
  assert_non_null(want);
  if (count) {
    two(want, in[0], in[1], count);
    for (int r = 2; r < n; r++) two(want, want, in[r], count);
    if (op == collAvg) collReduceAvgFinish(want, count, t, n);
  }
  char* outBuf[2];
  char* out[2];
  int stream[2] = {1, 0};
  for (int o = 0; o < 2; o++) {
    outBuf[o] = aligned_alloc(64, bytes);
    assert_non_null(outBuf[o]);
    memset(outBuf[o], POISON, bytes);
    out[o] = outBuf[o] + skew * es;
  }
  if (inPlace) { /* output 0 is input 0 (not streamed: the caller only streams into outputs that are no input) */
    out[0] = inBuf[0] + skew * es;
    stream[0] = 0;
  }
  many(out, stream, 2, in, n, count, op == collAvg ? n : 1);
  for (int o = 0; o < 2; o++) {
    if (memcmp(out[o], want, count * es) != 0) {
      size_t i = 0;
      while (memcmp(out[o] + i * es, want + i * es, es) == 0) i++;
      uint64_t g = 0, w = 0;
      memcpy(&g, out[o] + i * es, es);
      memcpy(&w, want + i * es, es);
      print_error("%s %s n %d count %zu skew %zu %s output %d: element %zu is 0x%llx, want 0x%llx\n",
                  collTypeName(t), collOpName(op), n, count, skew, inPlace ? "in place" : "out of place", o, i,
                  (unsigned long long)g, (unsigned long long)w);
      fail();
    }
    for (size_t b = 0; b < GUARD * es; b++)
      if ((unsigned char)out[o][count * es + b] != POISON) {
        print_error("%s %s n %d count %zu: output %d written past the end (byte %zu)\n", collTypeName(t),
                    collOpName(op), n, count, o, b);
        fail();
      }
  }
  for (int r = 0; r < n; r++) free(inBuf[r]);
  for (int o = 0; o < 2; o++) free(outBuf[o]);
  free(want);
}

static void test_many_matches_pairwise(void** state) {
  (void)state;
  static const collDataType_t kTypes[] = {collInt8,  collUint8,  collInt32,  collUint32,
                                          collInt64, collUint64, collFloat32, collFloat64};
  static const collRedOp_t kOps[] = {collSum, collProd, collMax, collMin, collAvg};
  static const int kN[] = {2, 3, 4, 7};
  for (size_t ti = 0; ti < sizeof kTypes / sizeof kTypes[0]; ti++) {
    size_t line = 64 / collTypeSize(kTypes[ti]);
    size_t counts[] = {0, 1, line - 1, line, line + 1, 1023, MAXCOUNT};
    for (size_t oi = 0; oi < sizeof kOps / sizeof kOps[0]; oi++)
      for (size_t ni = 0; ni < sizeof kN / sizeof kN[0]; ni++)
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
          for (size_t skew = 0; skew < 2; skew++)
            for (int inPlace = 0; inPlace < 2; inPlace++)
              checkOne(kTypes[ti], kOps[oi], kN[ni], counts[ci], skew, inPlace);
  }
}

/* A NaN operand of max/min: the result is that NaN quieted, the first
 * one's (in rank order) when several are NaN, as the pairwise kernel. */
static void test_many_nan_order(void** state) {
  (void)state;
  uint32_t a = 0x7f800001u, b = 0xffc00002u, c = 0x3f800000u; /* signalling NaN, negative quiet NaN, 1.0 */
  float x[3][16], r[16];
  for (int j = 0; j < 16; j++) {
    memcpy(&x[0][j], &c, 4);
    memcpy(&x[1][j], j & 1 ? &a : &c, 4);
    memcpy(&x[2][j], &b, 4);
  }
  const char* in[3] = {(const char*)x[0], (const char*)x[1], (const char*)x[2]};
  char* out[1] = {(char*)r};
  int stream[1] = {0};
  collReduceGetManyFn(collFloat32, collMax)(out, stream, 1, in, 3, 16, 1);
  for (int j = 0; j < 16; j++) {
    uint32_t g;
    memcpy(&g, &r[j], 4);
    assert_int_equal(g, j & 1 ? 0x7fc00001u : 0xffc00002u);
  }
}

static void test_many_getter(void** state) {
  (void)state;
  assert_null(collReduceGetManyFn(collFloat16, collSum));
  assert_null(collReduceGetManyFn(collBfloat16, collAvg));
  assert_null(collReduceGetManyFn((collDataType_t)collNumTypes, collSum));
  assert_null(collReduceGetManyFn(collFloat32, (collRedOp_t)collNumOps));
  assert_ptr_equal(collReduceGetManyFn(collInt32, collAvg), collReduceGetManyFn(collInt32, collSum));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_many_matches_pairwise),
      cmocka_unit_test(test_many_nan_order),
      cmocka_unit_test(test_many_getter),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
