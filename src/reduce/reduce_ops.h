/*
 * reduce_ops.h - the element operations of the host kernels (reduce.c: two
 * inputs; reduce_many.c: n inputs), one definition for both: OP_<op>(T, p,
 * q) combines two elements of type T, and fmax_/fmin_<type> are the float
 * max/min of reduce.c's semantics. Private to src/reduce.
 */
#ifndef COLL_REDUCE_OPS_H_
#define COLL_REDUCE_OPS_H_

#include <stdint.h>
#include <string.h>

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

#endif
