/* shm.c - placeholder until the shared-memory transport lands. */
#include "transports/shm/shm.h"

#include "misc/log.h"

static collResult_t collShmInit(collNetLogFn log) {
  (void)log;
  return collSetError(collInvalidUsage, "the shared-memory transport is not built yet");
}

const collNet_v1_t collNetShm = {.size = sizeof(collNet_v1_t), .version = COLL_NET_VERSION, .name = "shm",
                                 .init = collShmInit};
