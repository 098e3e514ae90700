/*
 * devmem.h - device buffers for the benchmarks (--device cuda): the CUDA
 * driver API, loaded with dlopen at first use (COLL_TESTS_CUDA_LIBRARY, else
 * COLL_CUDA_LIBRARY as libcoll reads it, else libcuda.so.1), so the *_perf
 * programs build without the
 * CUDA toolkit and run host-memory sweeps on machines without a GPU. Only
 * what the driver needs: pick a GPU (its primary context, which the CUDA
 * runtime shares), allocate, copy to and from host memory, one stream.
 *
 * Every function returns 0, or -1 after writing why into the thread's
 * message (benchDevError()): "<call>: <CUDA error name> (<text>)". The
 * functions are thread-safe; the context is per thread (benchDevUse on each
 * rank thread).
 *
 * SPDX-License-Identifier: BSD-3-Clause
 */
#ifndef COLL_BENCH_DEVMEM_H_
#define COLL_BENCH_DEVMEM_H_

#include <stddef.h>

/* Loads the driver once per process and counts the GPUs into *count (> 0 on
 * success: no GPU is an error, "no CUDA-capable device is detected"). */
int benchDevLoad(int* count);

/* Same check without touching CUDA in this process: runs benchDevLoad in a
 * child process (a parent that forks CUDA ranks must not initialize CUDA)
 * and copies its message. */
int benchDevProbeForked(void);

/* Makes GPU `device` current on the calling thread (primary context) and
 * describes it in desc ("NVIDIA H200", PCI bus id in bus). */
int benchDevUse(int device, char* desc, size_t descLen, char* bus, size_t busLen);

int benchDevAlloc(void** p, size_t bytes); /* zeroed */
void benchDevFree(void* p);
/* Synchronous copies (the whole context is idle when they return). */
int benchDevToDevice(void* dst, const void* src, size_t bytes);
int benchDevToHost(void* dst, const void* src, size_t bytes);

/* A CUDA stream (a CUstream, which is a cudaStream_t; non-blocking: it does
 * not wait for the legacy default stream) and host waits on it. */
int benchDevStreamCreate(void** stream);
int benchDevStreamSync(void* stream);
void benchDevStreamDestroy(void* stream);

/* The message of the last failure on this thread. */
const char* benchDevError(void);

#endif /* COLL_BENCH_DEVMEM_H_ */
