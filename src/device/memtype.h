/*
 * memtype.h - which memory type and device a buffer is (host or a GPU's),
 * and the rule for the buffers of one call.
 *
 * Host memory is anything CUDA does not know (malloc, mmap, stack) and host
 * memory CUDA pinned or registered (cudaHostAlloc, cudaHostRegister); device
 * memory is what cudaMalloc / cuMemAlloc / cuMemMap return, on one GPU;
 * managed memory (cudaMallocManaged) counts as memory of the GPU the driver
 * names for it. While this process has not mapped the CUDA driver library,
 * no pointer can be device memory and the answer costs a few ns without
 * loading anything (cuda_loader.h, collCudaDriverPresent).
 */
#ifndef COLL_DEVICE_MEMTYPE_H_
#define COLL_DEVICE_MEMTYPE_H_

#include "coll.h"

typedef enum {
  COLL_MEM_HOST = 0,    /* host memory (pinned or not) */
  COLL_MEM_DEVICE = 1,  /* device memory of GPU `device` */
  COLL_MEM_MANAGED = 2  /* CUDA managed memory; `device` as the driver reports it */
} collMemKind;

typedef struct {
  int kind;   /* collMemKind */
  int device; /* CUDA device ordinal; -1 for host memory */
  int pinned; /* host memory that CUDA pinned or registered (GPUs can reach it) */
} collMemInfo;

/* Plain host memory, as an initializer. */
#define COLL_MEM_HOST_INFO {COLL_MEM_HOST, -1, 0}

/* Fills *info for the memory p points into (NULL: host). A driver that is
 * mapped but cannot be used (cuInit fails: no device, stub library) means no
 * device memory exists: host, reported once at INFO. Errors:
 * collInvalidArgument (info NULL), collSystemError (the driver's pointer
 * query failed; the message names the CUDA error). Thread-safe. */
collResult_t collMemQuery(const void* p, collMemInfo* info);

/* The memory-type rule of one call: bufs[0..n-1] (NULL entries are skipped:
 * buffers a rank does not use, count 0) must all be host memory, or all
 * device or managed memory of one GPU. *info (may be NULL) gets the call's
 * type (host when every entry is NULL). Errors: collInvalidArgument naming
 * the two buffers that differ, with fn and names[i] ("collAllReduce:
 * recvbuff is CUDA device memory of GPU 0 but sendbuff is host memory; all
 * buffers of one call must be host memory or on one GPU"), and those of
 * collMemQuery. While this process has no CUDA driver mapped, nothing is
 * queried (one collCudaDriverPresent look for the whole call): host.
 * Thread-safe. */
collResult_t collMemCheckCall(const char* fn, int n, const void* const* bufs, const char* const* names,
                              collMemInfo* info);

/* 1 when no pointer can be device memory now (no CUDA driver mapped in
 * this process): the cheap first look of every call. */
int collMemAllHost(void);

/* "host memory", "pinned host memory", "CUDA device memory of GPU 1",
 * "CUDA managed memory of GPU 0" into buf (size bytes); returns buf. */
const char* collMemDescribe(const collMemInfo* info, char* buf, int size);

#endif
