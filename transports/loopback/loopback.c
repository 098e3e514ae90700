/* loopback.c - placeholder until the in-process transport lands. */
#include "transports/loopback/loopback.h"

#include "misc/log.h"

static collResult_t collLbInit(collNetLogFn log) {
  (void)log;
  return collSetError(collInvalidUsage, "the loopback transport is not built yet");
}

const collNet_v1_t collNetLoopback = {.size = sizeof(collNet_v1_t), .version = COLL_NET_VERSION, .name = "loopback",
                                      .init = collLbInit};
