/* net.h - choosing transports: inter-node by name, intra-node if allowed. */
#ifndef COLL_CORE_NET_H_
#define COLL_CORE_NET_H_

#include "coll_net.h"

/* The transport between nodes called `name` (NULL = default "tcp"),
 * initialized once. Errors: collInvalidArgument for an unknown name, or the
 * transport's init error. */
collResult_t collNetGetInter(const char* name, const collNet_v2_t** out);
/* The intra-node transport (shared memory), initialized once, or NULL when
 * COLL_SHM_DISABLE=1, when `inter` is the in-process loopback transport
 * (then it carries everything), or when shm cannot work here (logged). */
const collNet_v2_t* collNetGetIntra(const collNet_v2_t* inter);

#endif
