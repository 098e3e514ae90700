/*
 * memcheck.h - the memory-type rule of a call, checked when it is issued
 * (issue 16): the buffers one call uses are all host memory or all on one
 * GPU, and device buffers only go to a communicator and stream that can run
 * device work: every one can once the CUDA driver loads (core/devcall.h
 * stages the call through pinned host memory), on the one GPU the
 * communicator is bound to. Where the driver cannot be used, a device or
 * managed buffer is refused with a message that names it and says why,
 * before it reaches memcpy.
 */
#ifndef COLL_CORE_MEMCHECK_H_
#define COLL_CORE_MEMCHECK_H_

#include "coll.h"
#include "device/memtype.h"

/* Classifies sendbuff and recvbuff (NULL: a buffer this rank does not use,
 * or count 0; it is not looked at) with collMemCheckCall (device/memtype.h)
 * into *info (the call's memory type, which picks the engine's executor:
 * engine/exec.h). collSuccess when both are host memory (pinned or not).
 * Errors, each
 * message starting with fn:
 *  - collInvalidArgument, mixed memory types ("collAllReduce: recvbuff is
 *    host memory but sendbuff is CUDA device memory of GPU 0; all buffers of
 *    one call must be host memory or on one GPU; ...");
 *  - collInvalidArgument, device or managed memory while the CUDA driver
 *    cannot be used ("collAllReduce: sendbuff and recvbuff are CUDA device
 *    memory of GPU 0; this communicator runs host memory only: <why>");
 *  - collInvalidArgument, buffers of another GPU than the communicator's
 *    ("collAllReduce: sendbuff is on GPU 1 but this communicator runs on
 *    GPU 0 ...");
 *  - collSystemError: the driver's pointer query failed (names the buffer
 *    and the CUDA error).
 * Costs one collMemAllHost look (a coarse clock read, inline) while the
 * process has no CUDA driver mapped. Thread-safe. */
static inline collResult_t collCheckCallMemory(collComm_t comm, collStream_t stream, const char* fn,
                                               const void* sendbuff, const void* recvbuff, collMemInfo* info);

/* The part after the first look (memcheck.c). */
collResult_t collCheckCallMemoryTypes(collComm_t comm, collStream_t stream, const char* fn, const void* sendbuff,
                                      const void* recvbuff, collMemInfo* info);

static inline collResult_t collCheckCallMemory(collComm_t comm, collStream_t stream, const char* fn,
                                               const void* sendbuff, const void* recvbuff, collMemInfo* info) {
  if (collMemAllHost()) {
    *info = (collMemInfo){COLL_MEM_HOST, -1, 0};
    return collSuccess;
  }
  return collCheckCallMemoryTypes(comm, stream, fn, sendbuff, recvbuff, info);
}

#endif
