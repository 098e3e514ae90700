/* loopback.h - in-process transport: ranks are threads of one process. */
#ifndef COLL_LOOPBACK_H_
#define COLL_LOOPBACK_H_

#include "coll_net.h"

extern const collNet_v1_t collNetLoopback;

#endif
