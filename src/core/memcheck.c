/* memcheck.c - the memory-type rule of a call (memcheck.h). */
#include "core/memcheck.h"

#include "core/devcall.h"

collResult_t collCheckCallMemoryTypes(collComm_t comm, const char* fn, const void* sendbuff, const void* recvbuff,
                                      collMemInfo* info) {
  const void* bufs[2] = {sendbuff, recvbuff};
  const char* names[2] = {"sendbuff", "recvbuff"};
  *info = (collMemInfo)COLL_MEM_HOST_INFO;
  collResult_t r = collMemCheckCall(fn, 2, bufs, names, info);
  if (r != collSuccess || info->kind == COLL_MEM_HOST) return r;
  /* device memory exists only where the driver loaded: the call is staged
   * (core/devcall.h) on the communicator's one GPU */
  return collDevBind(comm, info->device, fn, sendbuff ? "sendbuff" : "recvbuff");
}
