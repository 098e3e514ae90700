/*
 * memcheck.h - the memory-type rule of a call, checked when it is issued
 * (issue 16): the buffers one call uses are all host memory or all on one
 * GPU, the one the communicator is bound to (its first device call or CUDA
 * stream). Every communicator and stream can run device buffers: a pointer
 * is device memory only once the CUDA driver loaded (device/memtype.h), and
 * core/devcall.h stages the call through pinned host memory.
 */
#ifndef COLL_CORE_MEMCHECK_H_
#define COLL_CORE_MEMCHECK_H_

#include "coll.h"
#include "device/memtype.h"

/* Classifies sendbuff and recvbuff (NULL: a buffer this rank does not use,
 * or count 0; it is not looked at) with collMemCheckCall (device/memtype.h)
 * into *info (the call's memory type, which picks the engine's executor:
 * engine/exec.h), and binds comm to the GPU of device buffers at its first
 * device call. collSuccess when both are host memory (pinned or not), or
 * both on comm's GPU. Errors, each message starting with fn:
 *  - collInvalidArgument, mixed memory types or two GPUs ("collAllReduce:
 *    recvbuff is host memory but sendbuff is CUDA device memory of GPU 0;
 *    all buffers of one call must be host memory or on one GPU");
 *  - collInvalidArgument, buffers of another GPU than the communicator's
 *    ("collAllReduce: sendbuff is on GPU 1 but this communicator runs on
 *    GPU 0 (bound by its first device call or CUDA stream); ...");
 *  - collSystemError: the driver's pointer query failed ("collAllReduce:
 *    sendbuff: CUDA: cuPointerGetAttributes(0x...) failed: ...").
 * Costs one collMemAllHost look while the process has no CUDA driver
 * mapped. Thread-safe. */
static inline collResult_t collCheckCallMemory(collComm_t comm, const char* fn, const void* sendbuff,
                                               const void* recvbuff, collMemInfo* info);

/* The part after the first look (memcheck.c). */
collResult_t collCheckCallMemoryTypes(collComm_t comm, const char* fn, const void* sendbuff, const void* recvbuff,
                                      collMemInfo* info);

static inline collResult_t collCheckCallMemory(collComm_t comm, const char* fn, const void* sendbuff,
                                               const void* recvbuff, collMemInfo* info) {
  if (collMemAllHost()) {
    *info = (collMemInfo){COLL_MEM_HOST, -1, 0};
    return collSuccess;
  }
  return collCheckCallMemoryTypes(comm, fn, sendbuff, recvbuff, info);
}

#endif
