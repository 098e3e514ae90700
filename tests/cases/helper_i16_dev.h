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
#include <sys/wait.h>
#include <unistd.h>

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

/* The five collectives of the device-resident path, in this order (fn of
 * devIssue). */
enum { DEV_AR, DEV_AG, DEV_RS, DEV_BC, DEV_RD, DEV_NCOLL };
static inline const char* devCollName(int fn) {
  static const char* const names[DEV_NCOLL] = {"allreduce", "allgather", "reducescatter", "broadcast", "reduce"};
  return fn >= 0 && fn < DEV_NCOLL ? names[fn] : "?";
}

/* Collective fn (DEV_*) of count elements (per rank where the API says so). */
static inline collResult_t devIssue(int fn, const void* send, void* recv, size_t count, collDataType_t t,
                                    collRedOp_t op, int root, collComm_t comm, collStream_t st) {
  switch (fn) {
    case DEV_AR: return collAllReduce(send, recv, count, t, op, comm, st);
    case DEV_AG: return collAllGather(send, recv, count, t, comm, st);
    case DEV_RS: return collReduceScatter(send, recv, count, t, op, comm, st);
    case DEV_BC: return collBroadcast(send, recv, count, t, root, comm, st);
    default: return collReduce(send, recv, count, t, op, root, comm, st);
  }
}

/* A child probes the driver (the parent must not load CUDA before it
 * forks the ranks): 0, DEV_SKIP (no driver, reason printed) or 1. */
static inline int devProbe(void) {
  pid_t pid = fork();
  if (pid == 0) _exit(devSetup(0) ? 0 : DEV_SKIP);
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return 1;
  return WEXITSTATUS(st);
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
