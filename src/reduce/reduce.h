/*
 * reduce.h - host reduction kernels for every data type and op.
 * float16/bfloat16: each element is widened to float32, combined, and rounded
 * back to nearest-even once per call. avg is computed as sum here; the caller
 * divides the final result with collReduceAvgFinish.
 */
#ifndef COLL_REDUCE_H_
#define COLL_REDUCE_H_

#include <stddef.h>
#include <stdint.h>

#include "coll.h"

/* dst[i] = a[i] op b[i] for i < n; dst may alias a or b. */
typedef void (*collReduceFn)(void* dst, const void* a, const void* b, size_t n);

/* Size in bytes of one element, 0 for an invalid type. */
size_t collTypeSize(collDataType_t t);
/* nccl-tests names ("float", "half", ...); "invalid" for an invalid value. */
const char* collTypeName(collDataType_t t);
const char* collOpName(collRedOp_t op); /* "sum", ... */

/* Kernel for (type, op); avg maps to sum. NULL for invalid type/op. */
collReduceFn collReduceGetFn(collDataType_t t, collRedOp_t op);

/* out[o][i] = in[0][i] op in[1][i] op ... op in[n-1][i] for i < count
 * and every o < nout, in rank order (the bits of collReduceFn applied
 * pairwise: ((in[0] op in[1]) op in[2]) ...); avgDiv > 1 then divides each
 * result by avgDiv as collReduceAvgFinish does (pass 1 for no division).
 * n >= 2. An output may be one of the inputs exactly (in place: each
 * element is read before it is written); other overlaps are not allowed.
 * stream[o] != 0: out[o] is written with streaming stores where it is
 * 16-byte aligned (no read for ownership; the caller fences before
 * publishing), so set it only for outputs that are not inputs. */
typedef void (*collReduceManyFn)(char* const* out, const int* stream, int nout, const char* const* in, int n,
                                 size_t count, int avgDiv);
/* The n-input kernel of (type, op), avg -> sum; NULL for float16/bfloat16
 * (the engine reduces those through float32 working copies) and for an
 * invalid type or op. */
collReduceManyFn collReduceGetManyFn(collDataType_t t, collRedOp_t op);

/* buf[i] = buf[i] / nranks for i < n (integers truncate toward zero like
 * NCCL; float16/bfloat16 via float32, rounded to nearest even). */
void collReduceAvgFinish(void* buf, size_t n, collDataType_t t, int nranks);

/* float16/bfloat16 working copies (the engine's float32 accumulation,
 * COLL_HALF_ACCUM): t must be collFloat16 or collBfloat16 (other types are
 * a no-op). Widen: dst[i] = src[i] exactly. Narrow: dst[i] = src[i] /
 * divisor rounded once to nearest even (divisor 1: no division; avg passes
 * nranks). PreMul: dst[i] = round(src[i] * round(1 / nranks)), NCCL's
 * pre-multiplied average in the type itself (COLL_HALF_ACCUM=native). dst
 * and src do not overlap. */
void collReduceWiden(float* dst, const void* src, size_t n, collDataType_t t);
void collReduceNarrow(void* dst, const float* src, size_t n, collDataType_t t, int divisor);
void collReducePreMul(void* dst, const void* src, size_t n, collDataType_t t, int nranks);
/* 1 for collFloat16 and collBfloat16. */
int collTypeIsHalf(collDataType_t t);

/* Conversions (round to nearest even, NaN preserved). */
float collHalfToFloat(uint16_t h);
uint16_t collFloatToHalf(float f);
float collBf16ToFloat(uint16_t b);
uint16_t collFloatToBf16(float f);

/* Array float16 <-> float32 conversions. fast != 0 uses the x86 F16C path
 * when the CPU has it, fast == 0 forces the portable code (both give the same
 * bits). Return 1 if the F16C path ran, 0 otherwise. */
int collHalfToFloatArray(float* dst, const uint16_t* src, size_t n, int fast);
int collFloatToHalfArray(uint16_t* dst, const float* src, size_t n, int fast);

#endif
