/* kernel_names.h - what the host and the kernels (kernels.cu) agree on:
 * block size and kernel names. Included by C and by CUDA C++. */
#ifndef COLL_DEVICE_KERNEL_NAMES_H_
#define COLL_DEVICE_KERNEL_NAMES_H_

/* threads per block of every kernel (__launch_bounds__) */
#define COLL_DEV_THREADS 512

/* Kernel names in collDataType_t order (tags of reduce_math.h). */
#define COLL_DEV_TYPE_TAGS {"i8", "u8", "i32", "u32", "i64", "u64", "f16", "f32", "f64", "bf16"}
/* Reduction ops with a kernel, in collRedOp_t order (avg runs sum, then collDevAvg_<type>). */
#define COLL_DEV_OP_TAGS {"sum", "prod", "max", "min"}

#endif
