/*
 * fake_cuda.c - test only: the driver calls of devmem.c on host memory, and
 * collStreamCreateCuda as a plain coll stream, preloaded into a *_perf
 * program (LD_PRELOAD, COLL_TESTS_CUDA_LIBRARY) so that the --device cuda
 * path of the benchmarks (GPU buffers, host mirrors, copies both ways,
 * stream waits, the checks on the copied-back bytes) runs on a machine
 * without a GPU. libcoll sees host memory (its own driver is not this one).
 * Destroying a stream (a rank's last call) prints the process's counts:
 * "fake_cuda: htod N dtoh N stream_sync N alloc N free N".
 * FAKE_CUDA_CORRUPT=1: every copy to the host flips its first byte (the
 * checks must then count wrong elements).
 *
 * SPDX-License-Identifier: BSD-3-Clause
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

static atomic_long nHtoD, nDtoH, nSync, nAlloc, nFree;
/* which way a copy goes: the allocations of cuMemAlloc_v2 are "device" */
static _Atomic(size_t) devLo[64], devHi[64];


collResult_t collStreamCreateCuda(collComm_t comm, void* cudaStream, collStream_t* stream) {
  (void)cudaStream;
  return collStreamCreate(comm, stream);
}

CUresult cuInit(unsigned f) { return f ? 1 : 0; }
CUresult cuGetErrorName(CUresult r, const char** s) { *s = r ? "CUDA_ERROR_FAKE" : "CUDA_SUCCESS"; return 0; }
CUresult cuGetErrorString(CUresult r, const char** s) { *s = r ? "fake failure" : "no error"; return 0; }
CUresult cuDeviceGetCount(int* n) { *n = 1; return 0; }
CUresult cuDeviceGet(int* d, int i) { *d = i; return i == 0 ? 0 : 101; }
CUresult cuDeviceGetName(char* s, int len, int d) { (void)d; snprintf(s, (size_t)len, "fake GPU"); return 0; }
CUresult cuDeviceGetPCIBusId(char* s, int len, int d) { (void)d; snprintf(s, (size_t)len, "0000:00:00.0"); return 0; }
CUresult cuDevicePrimaryCtxRetain(void** c, int d) { (void)d; *c = (void*)&nAlloc; return 0; }
CUresult cuCtxSetCurrent(void* c) { (void)c; return 0; }
CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t n) {
  void* m = malloc(n);
  if (!m) return 2;
  long k = nAlloc++;
  if (k < 64) {
    devLo[k] = (size_t)m;
    devHi[k] = (size_t)m + n;
  }
  *p = (CUdeviceptr)(size_t)m;
  return 0;
}
CUresult cuMemFree_v2(CUdeviceptr p) { nFree++; free((void*)(size_t)p); return 0; }
CUresult cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, void* s) {
  (void)s;
  memset((void*)(size_t)p, v, n);
  return 0;
}
static int isDev(size_t p) {
  for (int i = 0; i < 64; i++)
    if (p >= devLo[i] && p < devHi[i]) return 1;
  return 0;
}
CUresult cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n) {
  int toHost = isDev((size_t)s) && !isDev((size_t)d);
  if (toHost) nDtoH++;
  else nHtoD++;
  memcpy((void*)(size_t)d, (const void*)(size_t)s, n);
  const char* c = getenv("FAKE_CUDA_CORRUPT");
  if (toHost && c && *c == '1' && n) ((unsigned char*)(size_t)d)[0] ^= 0x5A;
  return 0;
}
CUresult cuStreamCreate(void** s, unsigned f) { (void)f; *s = malloc(1); return *s ? 0 : 2; }
CUresult cuStreamSynchronize(void* s) {
  if (s) nSync++; /* the legacy stream's waits after copies are not counted */
  return 0;
}
CUresult cuStreamDestroy_v2(void* s) {
  free(s);
  fprintf(stderr, "fake_cuda: htod %ld dtoh %ld stream_sync %ld alloc %ld free %ld\n", (long)nHtoD, (long)nDtoH,
          (long)nSync, (long)nAlloc, (long)nFree);
  return 0;
}
