/*
 * kernels.cu - coll's GPU kernels: copy, every type x op reduction, and
 * avg's final division. Device code only: nvcc builds this file into a
 * fatbin that is embedded in libcoll (build/.../coll_fatbin.c) and loaded
 * with the driver API at first use (src/device/devexec.c), so libcoll never
 * links the CUDA runtime and loads on machines without a driver.
 *
 * Each kernel is one grid-stride loop over 16-byte packs: thread w of nw runs
 * the range body of src/reduce/reduce_math.h (the same code the host unit
 * tests run), so adjacent threads touch adjacent 16-byte packs. Launched with
 * COLL_DEV_THREADS threads per block (devexec.c sizes the grid). Names are
 * extern "C" so the host finds them by name:
 *   collDevCopy(dst, src, bytes)
 *   collDevReduce_<op>_<type>(dst, a, b, n)     op: sum prod max min
 *   collDevAvg_<type>(buf, n, nranks)
 * types: i8 u8 i32 u32 i64 u64 f16 f32 f64 bf16.
 */
#include "reduce/reduce_math.h"
#include "device/kernel_names.h"

#define COLL_DEV_GID ((size_t)blockIdx.x * blockDim.x + threadIdx.x)
#define COLL_DEV_NW ((size_t)gridDim.x * blockDim.x)

extern "C" __global__ void __launch_bounds__(COLL_DEV_THREADS)
    collDevCopy(void* dst, const void* src, size_t bytes) {
  collRmCopyRange(dst, src, bytes, COLL_DEV_GID, COLL_DEV_NW);
}

#define COLL_DEV_RED(OP, TAG)                                                                        \
  extern "C" __global__ void __launch_bounds__(COLL_DEV_THREADS)                                     \
      collDevReduce_##OP##_##TAG(void* dst, const void* a, const void* b, size_t n) {                \
    collRmRange_##OP##_##TAG(dst, a, b, n, COLL_DEV_GID, COLL_DEV_NW);                               \
  }
#define COLL_DEV_TYPE(TAG)                                                                           \
  COLL_DEV_RED(sum, TAG)                                                                             \
  COLL_DEV_RED(prod, TAG)                                                                            \
  COLL_DEV_RED(max, TAG)                                                                             \
  COLL_DEV_RED(min, TAG)                                                                             \
  extern "C" __global__ void __launch_bounds__(COLL_DEV_THREADS)                                     \
      collDevAvg_##TAG(void* buf, size_t n, int nranks) {                                            \
    collRmAvgRange_##TAG(buf, n, nranks, COLL_DEV_GID, COLL_DEV_NW);                                 \
  }
COLL_RM_FOR_TYPES(COLL_DEV_TYPE)
