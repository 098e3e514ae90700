/* memcheck.c - the memory-type rule of a call (memcheck.h). */
#include "core/memcheck.h"

#include <stdio.h>
#include <string.h>

#include "core/devcall.h"
#include "device/cuda_loader.h"
#include "misc/log.h"

/* Whether comm and stream can run a call on device memory; if not, why
 * (a sentence for the caller's message). Every communicator and stream can
 * once the CUDA driver loads (core/devcall.h: the call is staged through
 * pinned host memory, on a CUDA stream ordered with it). */
static int collCanRunDevice(collComm_t comm, collStream_t stream, const char** why) {
  (void)comm, (void)stream;
  if (collCudaLoadQuiet() == collSuccess) return 1;
  *why = collCudaLoadMessage();
  return 0;
}

collResult_t collCheckCallMemoryTypes(collComm_t comm, collStream_t stream, const char* fn, const void* sendbuff,
                                      const void* recvbuff, collMemInfo* info) {
  const void* bufs[2] = {sendbuff, recvbuff};
  const char* names[2] = {"sendbuff", "recvbuff"};
  collMemInfo call = {COLL_MEM_HOST, -1, 0};
  const char* why = "";
  collResult_t r = collMemCheckCall(fn, 2, bufs, names, &call);
  *info = call;
  if (r == collInvalidArgument && !collCanRunDevice(comm, stream, &why))
    return collSetError(r, "%s; this communicator runs host memory only", collLastErrorMessage());
  if (r != collSuccess || call.kind == COLL_MEM_HOST) return r;
  if (collCanRunDevice(comm, stream, &why)) /* one GPU per communicator */
    return collDevBind(comm, call.device, fn, sendbuff ? "sendbuff" : "recvbuff");
  /* a device call on a host-only communicator: name each device buffer */
  collMemInfo m[2];
  char desc[2][64];
  int dev[2] = {0, 0};
  for (int i = 0; i < 2; i++) {
    if (!bufs[i]) continue;
    if ((r = collMemQuery(bufs[i], &m[i])) != collSuccess)
      return collSetError(r, "%s: %s: %s", fn, names[i], collLastErrorMessage());
    dev[i] = m[i].kind != COLL_MEM_HOST;
    collMemDescribe(&m[i], desc[i], sizeof desc[i]);
  }
  if (dev[0] && dev[1] && strcmp(desc[0], desc[1]) == 0)
    return collSetError(collInvalidArgument,
                        "%s: sendbuff and recvbuff are %s; this communicator runs host memory only: %s", fn, desc[0],
                        why);
  if (dev[0] && dev[1])
    return collSetError(collInvalidArgument,
                        "%s: sendbuff is %s and recvbuff is %s; this communicator runs host memory only: %s", fn,
                        desc[0], desc[1], why);
  int i = dev[0] ? 0 : 1;
  return collSetError(collInvalidArgument, "%s: %s is %s; this communicator runs host memory only: %s", fn, names[i],
                      desc[i], why);
}
