/*
 * reduce_many.c - n-input reduction kernels (reduce.h: collReduceManyFn),
 * for the zero-copy all-reduce and reduce-scatter (engine/zerocopy.c), which
 * read every rank's input where it is.
 *
 * One pass, a cache line (64 bytes) at a time: the line of every input is
 * loaded and combined in registers in rank order (reduce_math.h's element
 * functions), then stored into every output. Reducing pairwise into an
 * accumulator instead (a chunk of in[0] op in[1], then op in[2], ..., then
 * copied out) runs in phases: while the chunk is stored no input is being
 * read, and the other way round. One core of the 2-core EPYC VM of
 * benchmarks/compare, float sum of 64 MiB inputs, this kernel over that
 * loop: 4 inputs into 1 output (reduce-scatter, 4 ranks) 1.5-1.9x, 4 into
 * 4 (all-reduce) 1.1-1.3x, 2 into 1 1.1-1.2x, 2 into 2 0.9-1.2x (noise:
 * others' builds and VMs ran). The inputs are prefetched a few lines ahead
 * (0 .. 2048 bytes: the same within that noise).
 */
#include "reduce/reduce.h"
#include "reduce/reduce_math.h"

#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define MANY_LINE 64
#define MANY_PREFETCH 1024 /* bytes ahead of the line combined now */

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

/* One kernel: collRm_<op>_<type> and collRm_div_<type> (reduce_math.h,
 * the semantics every host and GPU kernel shares) over lines of T. */
#define KERNEL_MANY(OP, TAG, T)                                                                          \
  static void many_##OP##_##TAG(char* const* out, const int* stream, int nout, const char* const* in,   \
                                int n, size_t count, int avgDiv) {                                      \
    enum { B = MANY_LINE / sizeof(T) };                                                                \
    size_t i = 0;                                                                                      \
    for (; i + B <= count; i += B) {                                                                   \
      size_t at = i * sizeof(T);                                                                       \
      T acc[B];                                                                                        \
      for (int r = 0; r < n; r++) __builtin_prefetch(in[r] + at + MANY_PREFETCH, 0, 3);               \
      memcpy(acc, in[0] + at, MANY_LINE);                                                              \
      for (int r = 1; r < n; r++)                                                                      \
        for (int j = 0; j < B; j++) {                                                                  \
          T x;                                                                                         \
          memcpy(&x, in[r] + at + (size_t)j * sizeof(T), sizeof x);                                    \
          acc[j] = collRm_##OP##_##TAG(acc[j], x);                                                     \
        }                                                                                              \
      if (avgDiv > 1)                                                                                  \
        for (int j = 0; j < B; j++) acc[j] = collRm_div_##TAG(acc[j], avgDiv);                         \
      for (int o = 0; o < nout; o++) manyStoreLine(out[o] + at, acc, stream[o]);                       \
    }                                                                                                  \
    for (; i < count; i++) {                                                                           \
      T acc, x;                                                                                        \
      memcpy(&acc, in[0] + i * sizeof(T), sizeof acc);                                                 \
      for (int r = 1; r < n; r++) {                                                                    \
        memcpy(&x, in[r] + i * sizeof(T), sizeof x);                                                   \
        acc = collRm_##OP##_##TAG(acc, x);                                                             \
      }                                                                                                \
      if (avgDiv > 1) acc = collRm_div_##TAG(acc, avgDiv);                                             \
      for (int o = 0; o < nout; o++) memcpy(out[o] + i * sizeof(T), &acc, sizeof acc);                 \
    }                                                                                                  \
  }

#define TYPE_MANY(TAG, T)     \
  KERNEL_MANY(sum, TAG, T)    \
  KERNEL_MANY(prod, TAG, T)   \
  KERNEL_MANY(max, TAG, T)    \
  KERNEL_MANY(min, TAG, T)
TYPE_MANY(i8, int8_t)
TYPE_MANY(u8, uint8_t)
TYPE_MANY(i32, int32_t)
TYPE_MANY(u32, uint32_t)
TYPE_MANY(i64, int64_t)
TYPE_MANY(u64, uint64_t)
TYPE_MANY(f32, float)
TYPE_MANY(f64, double)

#define ROW(TAG) {many_sum_##TAG, many_prod_##TAG, many_max_##TAG, many_min_##TAG}
#define NONE {NULL, NULL, NULL, NULL}
static const collReduceManyFn kMany[collNumTypes][4] = {
    ROW(i8), ROW(u8), ROW(i32), ROW(u32), ROW(i64), ROW(u64), NONE, ROW(f32), ROW(f64), NONE};

collReduceManyFn collReduceGetManyFn(collDataType_t t, collRedOp_t op) {
  if ((unsigned)t >= (unsigned)collNumTypes || (unsigned)op >= (unsigned)collNumOps) return NULL;
  return kMany[t][op == collAvg ? collSum : op];
}
