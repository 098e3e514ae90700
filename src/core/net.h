/* net.h - choosing transports: inter-node by name, intra-node if allowed. */
#ifndef COLL_CORE_NET_H_
#define COLL_CORE_NET_H_

#include "coll_net.h"

/* The transport between nodes called `name` (NULL = the default: the
 * COLL_NET_PLUGIN transport when one is set, else "tcp"), initialized once.
 * A plugin is a shared object exporting `collNetPlugin_v2` (coll_net.h);
 * it is loaded at the first call, checked (ABI version and size, a name,
 * every operation present) and answers to its own name; a built-in of the
 * same name is then hidden. Errors: collInvalidArgument for an unknown name
 * or a plugin that cannot be loaded or fails the checks (every call then
 * fails the same way), or the transport's init error. Thread-safe. */
collResult_t collNetGetInter(const char* name, const collNet_v2_t** out);
/* The intra-node transport (shared memory), initialized once, or NULL when
 * COLL_SHM_DISABLE=1, when `inter` is the in-process loopback transport
 * (then it carries everything), or when shm cannot work here (logged). */
const collNet_v2_t* collNetGetIntra(const collNet_v2_t* inter);

#endif
