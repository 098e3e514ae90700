/*
 * devexec.h - local steps on GPU memory: copies, reductions and avg's
 * division enqueued on a CUDA stream (the engine's executor for device
 * buffers), plus making a GPU current on the calling thread.
 *
 * Streams are the driver's CUstream (a cudaStream_t is the same handle),
 * passed as void* so that callers need no CUDA header; NULL is the legacy
 * default stream. Every function only enqueues: it never waits for the GPU.
 * Each needs the device's context current on the calling thread
 * (collDevSetCurrent) and returns collSystemError with the CUDA error's
 * name when the driver refuses (collCudaLoad's errors when it cannot be
 * loaded). Thread-safe.
 */
#ifndef COLL_DEVICE_DEVEXEC_H_
#define COLL_DEVICE_DEVEXEC_H_

#include <stddef.h>

#include "coll.h"

/* Number of CUDA devices (0 when the driver cannot be loaded: no error). */
int collDevCount(void);

/* Makes GPU `device` (CUDA ordinal) current on this thread through its
 * primary context (the one the CUDA runtime uses), retained once per process
 * and device and kept until the process exits. Errors: those of
 * collCudaLoad, collInvalidArgument (device out of range, named with the
 * count), collSystemError. */
collResult_t collDevSetCurrent(int device);

/* How collDevCopyAsync moves bytes. */
enum { COLL_DEV_COPY_KERNEL = 0, COLL_DEV_COPY_ENGINE = 1 };

/* Enqueues dst[0..bytes) = src[0..bytes) on stream: with the copy kernel
 * (16-byte packs when dst and src share their offset modulo 16) or the copy
 * engine (cuMemcpyAsync). dst and src must not overlap unless equal (equal:
 * nothing is enqueued). bytes 0 enqueues nothing. */
collResult_t collDevCopyAsync(void* dst, const void* src, size_t bytes, int how, void* stream);

/* Enqueues dst[i] = a[i] op b[i] for i < n elements of type t (avg: sum;
 * finish with collDevAvgAsync), with the kernel of src/device/kernels.cu
 * (the math of src/reduce/reduce_math.h). dst may equal a or b. Errors:
 * collInvalidArgument for an invalid t or op, plus the above. */
collResult_t collDevReduceAsync(void* dst, const void* a, const void* b, size_t n, collDataType_t t,
                                collRedOp_t op, void* stream);

/* Enqueues buf[i] = buf[i] / nranks for i < n (avg's last step, as
 * collReduceAvgFinish on the host); nothing when nranks <= 1 or n == 0.
 * Errors: collInvalidArgument for an invalid t. */
collResult_t collDevAvgAsync(void* buf, size_t n, collDataType_t t, int nranks, void* stream);

/* Allocates bytes (> 0) of device memory on the current context's GPU
 * (cuMemAlloc) into *p. Errors: those of collCudaLoad, collInvalidArgument
 * (p NULL or bytes 0), collSystemError (the driver refused, e.g.
 * CUDA_ERROR_OUT_OF_MEMORY, named). */
collResult_t collDevAlloc(void** p, size_t bytes);
/* Frees what collDevAlloc returned (NULL: nothing). */
void collDevFree(void* p);

/* 1 when every operation enqueued on stream finished, 0 while some run,
 * -1 when one failed (error set: collSystemError naming the CUDA error).
 * Never waits. */
int collDevStreamIdle(void* stream);
/* Waits for stream's operations. Errors: collSystemError naming the CUDA
 * error of a failed one. */
collResult_t collDevStreamSync(void* stream);

/* Blocks per grid the kernels use for `bytes` of output on the current
 * device: enough 512-thread blocks for one 16-byte pack per thread, at most
 * 4 per multiprocessor (full occupancy; each thread then loops). For tests
 * and benchmarks. */
unsigned collDevGridFor(size_t bytes);

/* The GPU architectures the embedded kernels were built for ("sm_80 sm_90
 * compute_90"), "" without CUDA. */
const char* collDevArchs(void);

#endif
