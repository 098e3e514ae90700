/*
 * reduce_many.c - n-input reduction kernels (reduce.h: collReduceManyFn),
 * for the zero-copy all-reduce and reduce-scatter (engine/zerocopy.c), which
 * read every rank's input where it is.
 *
 * One pass, a cache line (64 bytes) at a time: the line of every input is
 * loaded and combined in registers in rank order, then stored into every
 * output. Reducing pairwise into an accumulator instead (a chunk of in[0] op
 * in[1], then op in[2], ..., then copied out) runs in phases: while the
 * chunk is stored no input is being read, and the other way round. On the
 * 2-core EPYC VM of benchmarks/compare that loop moved 10-18 GB/s of memory
 * traffic on one core where this one moves 17-29 (4 or 2 inputs of 64 MiB,
 * one or as many outputs; a streaming-store copy: 17-27). The inputs are
 * prefetched a few lines ahead: the hardware prefetchers stop at every 4 KiB
 * page, and n streams start a page each at the same time.
 */
#include "reduce/reduce.h"
#include "reduce/reduce_ops.h"

#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define MANY_LINE 64
#define MANY_PREFETCH 1024 /* bytes ahead: of 256 .. 4096, the fastest on that VM */

/* One line of src into dst: streaming stores (no read for ownership) when
 * stream and dst is 16-byte aligned, where the CPU has them. */
static inline void manyStoreLine(char* dst, const void* src, int stream) {
#if defined(__SSE2__)
  if (stream && ((uintptr_t)dst & 15) == 0) {
    for (int k = 0; k < MANY_LINE / 16; k++)
      _mm_stream_si128((__m128i*)(void*)(dst + 16 * k),
                       _mm_loadu_si128((const __m128i*)(const void*)((const char*)src + 16 * k)));
    return;
  }
#endif
  (void)stream;
  memcpy(dst, src, MANY_LINE);
}

/* A accumulates (unsigned for integer sum/prod: wrapping, as reduce.c);
 * an average divides the result as T by a D, as collReduceAvgFinish does. */
#define KERNEL_MANY(NAME, A, T, D, OP)                                                                   \
  static void NAME(char* const* out, const int* stream, int nout, const char* const* in, int n,         \
                   size_t count, int avgDiv) {                                                         \
    enum { B = MANY_LINE / sizeof(A) };                                                                \
    size_t i = 0;                                                                                      \
    for (; i + B <= count; i += B) {                                                                   \
      size_t at = i * sizeof(A);                                                                       \
      A acc[B];                                                                                        \
      for (int r = 0; r < n; r++) __builtin_prefetch(in[r] + at + MANY_PREFETCH, 0, 3);               \
      memcpy(acc, in[0] + at, MANY_LINE);                                                              \
      for (int r = 1; r < n; r++)                                                                      \
        for (int j = 0; j < B; j++) {                                                                  \
          A x;                                                                                         \
          memcpy(&x, in[r] + at + (size_t)j * sizeof(A), sizeof x);                                    \
          acc[j] = OP(A, acc[j], x);                                                                   \
        }                                                                                              \
      if (avgDiv > 1)                                                                                  \
        for (int j = 0; j < B; j++) acc[j] = (A)((T)acc[j] / (D)avgDiv);                               \
      for (int o = 0; o < nout; o++) manyStoreLine(out[o] + at, acc, stream[o]);                       \
    }                                                                                                  \
    for (; i < count; i++) {                                                                           \
      A acc, x;                                                                                        \
      memcpy(&acc, in[0] + i * sizeof(A), sizeof acc);                                                 \
      for (int r = 1; r < n; r++) {                                                                    \
        memcpy(&x, in[r] + i * sizeof(A), sizeof x);                                                   \
        acc = OP(A, acc, x);                                                                           \
      }                                                                                                \
      if (avgDiv > 1) acc = (A)((T)acc / (D)avgDiv);                                                   \
      for (int o = 0; o < nout; o++) memcpy(out[o] + i * sizeof(A), &acc, sizeof acc);                 \
    }                                                                                                  \
  }

/* sum (also avg's), prod, max, min of an integer type S: T signed or not,
 * U its unsigned twin, D the divisor type of collReduceAvgFinish. */
#define INT_MANY(S, T, U, D)                   \
  KERNEL_MANY(many_sum_##S, U, T, D, OP_SUM)   \
  KERNEL_MANY(many_prod_##S, U, T, D, OP_PROD) \
  KERNEL_MANY(many_max_##S, T, T, D, OP_MAX)   \
  KERNEL_MANY(many_min_##S, T, T, D, OP_MIN)
INT_MANY(i8, int8_t, uint8_t, int)
INT_MANY(u8, uint8_t, uint8_t, int)
INT_MANY(i32, int32_t, uint32_t, int32_t)
INT_MANY(u32, uint32_t, uint32_t, uint32_t)
INT_MANY(i64, int64_t, uint64_t, int64_t)
INT_MANY(u64, uint64_t, uint64_t, uint64_t)

#define FLOAT_MANY(T)                          \
  KERNEL_MANY(many_sum_##T, T, T, T, OP_SUM)   \
  KERNEL_MANY(many_prod_##T, T, T, T, OP_PROD) \
  KERNEL_MANY(many_max_##T, T, T, T, OP_FMAX)  \
  KERNEL_MANY(many_min_##T, T, T, T, OP_FMIN)
FLOAT_MANY(float)
FLOAT_MANY(double)

#define ROW(S) {many_sum_##S, many_prod_##S, many_max_##S, many_min_##S}
#define NONE {NULL, NULL, NULL, NULL}
static const collReduceManyFn kMany[collNumTypes][4] = {
    ROW(i8), ROW(u8), ROW(i32), ROW(u32), ROW(i64), ROW(u64), NONE, ROW(float), ROW(double), NONE};

collReduceManyFn collReduceGetManyFn(collDataType_t t, collRedOp_t op) {
  if ((unsigned)t >= (unsigned)collNumTypes || (unsigned)op >= (unsigned)collNumOps) return NULL;
  return kMany[t][op == collAvg ? collSum : op];
}
