/* net.h - choosing transports: inter-node by name, intra-node if allowed. */
#ifndef COLL_CORE_NET_H_
#define COLL_CORE_NET_H_

#include "coll_net.h"

/* The transport between nodes called `name` (NULL = default "tcp"),
 * initialized once. Errors: collInvalidArgument for an unknown name, or the
 * transport's init error. */
collResult_t collNetGetInter(const char* name, const collNet_v1_t** out);
/* The intra-node transport (shared memory), initialized once, or NULL when
 * COLL_SHM_DISABLE=1 or it cannot work here (logged at INFO). */
const collNet_v1_t* collNetGetIntra(void);

#endif
