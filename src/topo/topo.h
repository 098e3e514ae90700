/* topo.h - node grouping (and, later, hwloc topology). */
#ifndef COLL_TOPO_H_
#define COLL_TOPO_H_

#include <stdint.h>

#include "core/comm.h"

/* Hash that identifies this node: hostname + boot id, or COLL_HOSTID when set
 * (so tests can emulate several nodes on one machine). */
uint64_t collTopoHostHash(void);
/* Fills comm->rankNode, nnodes, node, localRank, localRanks from the peers'
 * host hashes; nodes are numbered in order of their first rank. */
void collTopoNodes(collComm_t comm);

#endif
