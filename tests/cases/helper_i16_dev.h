/*
 * helper_i16_dev.h - device memory for the issue-16 device-buffer cases,
 * through coll's own driver loader (COLL_CUDA_LIBRARY: the fake driver of
 * tests/fakecuda in CI, the real one on a GPU machine). Header only: the
 * cases' glob does not pick it up.
 */
#ifndef COLL_TEST_HELPER_I16_DEV_H_
#define COLL_TEST_HELPER_I16_DEV_H_

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "device/cuda_loader.h"
#include "device/devexec.h"

#define DEV_SKIP 77

/* Loads the driver and makes GPU 0 current on this thread; 0 with the
 * reason printed when there is no driver or device (the case skips). */
static inline int devSetup(int device) {
  if (collCudaLoad() != collSuccess) {
    printf("SKIP: no usable CUDA driver: %s\n", collGetLastError(NULL));
    return 0;
  }
  if (collDevSetCurrent(device) != collSuccess) {
    printf("SKIP: GPU %d: %s\n", device, collGetLastError(NULL));
    return 0;
  }
  return 1;
}

#ifdef COLL_HAVE_CUDA
static inline void* devAlloc(size_t bytes) {
  void* p = NULL;
  if (collDevAlloc(&p, bytes ? bytes : 1) != collSuccess) {
    fprintf(stderr, "devAlloc(%zu): %s\n", bytes, collGetLastError(NULL));
    abort();
  }
  return p;
}

static inline void devCopy(void* dst, const void* src, size_t bytes) {
  if (!bytes) return;
  CUresult r = COLL_CU(cuMemcpy)((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, bytes);
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "cuMemcpy(%zu bytes): CUDA error %d\n", bytes, (int)r);
    abort();
  }
}

static inline void devCopyAsync(void* dst, const void* src, size_t bytes, CUstream s) {
  CUresult r = COLL_CU(cuMemcpyAsync)((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, bytes, s);
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "cuMemcpyAsync(%zu bytes): CUDA error %d\n", bytes, (int)r);
    abort();
  }
}

static inline CUstream devStream(void) {
  CUstream s = NULL;
  if (COLL_CU(cuStreamCreate)(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
    fprintf(stderr, "cuStreamCreate failed\n");
    abort();
  }
  return s;
}
#endif

#endif
