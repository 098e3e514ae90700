/*
 * split.c - collCommSplit (NCCL semantics): ranks with the same color form a
 * communicator ordered by (key, parent rank). Two bootstrap allgathers: one
 * of (color, key), one of the unique id each group's first rank creates.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "misc/log.h"

typedef struct {
  int32_t color, key;
} collSplitInfo;

collResult_t collCommSplit(collComm_t comm, int color, int key, collComm_t* newcomm, collConfig_t* config) {
  if (!newcomm) return collSetError(collInvalidArgument, "collCommSplit: newcomm is NULL");
  *newcomm = NULL;
  if (color < COLL_SPLIT_NOCOLOR)
    return collSetError(collInvalidArgument, "collCommSplit: color %d is negative (COLL_SPLIT_NOCOLOR is -1)", color);
  collResult_t r = collCommEnter(comm, "collCommSplit");
  if (r != collSuccess) return r;
  collStreamsDrain(comm);
  int n = comm->nranks;
  collSplitInfo* info = calloc((size_t)n, sizeof *info);
  collUniqueId* ids = calloc((size_t)n, sizeof *ids);
  if (!info || !ids) {
    r = collSetError(collSystemError, "collCommSplit: out of memory");
    goto out;
  }
  info[comm->rank] = (collSplitInfo){color, key};
  if ((r = collBootAllGather(&comm->boot, info, sizeof *info)) != collSuccess) goto out;
  /* My position in the group and whether I am its first member. */
  int newRank = 0, newSize = 0, leader = -1;
  for (int i = 0; i < n; i++) {
    if (info[i].color != color || color == COLL_SPLIT_NOCOLOR) continue;
    newSize++;
    if (info[i].key < key || (info[i].key == key && i < comm->rank)) newRank++;
    if (leader < 0 || info[i].key < info[leader].key) leader = i;
  }
  if (color != COLL_SPLIT_NOCOLOR && leader == comm->rank) {
    /* Root on the same address family and interface as the bootstrap. */
    collSockAddr addr;
    char ifname[64];
    if ((r = collSocketFindInterface(&addr, ifname, sizeof ifname)) != collSuccess) goto out;
    if ((r = collUniqueIdAt(&ids[comm->rank], &addr, 0)) != collSuccess) goto out;
  }
  if ((r = collBootAllGather(&comm->boot, ids, sizeof *ids)) != collSuccess) goto out;
  if (color != COLL_SPLIT_NOCOLOR) r = collCommInitRankConfig(newcomm, newSize, ids[leader], newRank, config);
out:
  free(info);
  free(ids);
  collCommLeave(comm);
  return r;
}
