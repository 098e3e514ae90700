/*
 * split.c - collCommSplit (NCCL semantics): ranks with the same color form a
 * communicator ordered by (key, parent rank). Two bootstrap allgathers: one
 * of (color, key, whether this rank has file descriptors left for another
 * communicator), one of the unique id each group's first rank creates (or
 * an empty one if it could not). So a rank that cannot create the new
 * communicator makes every rank of the split fail at once, instead of
 * leaving the others waiting for it in the new communicator's init.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/core.h"
#include "misc/log.h"

typedef struct {
  int32_t color, key;
  int32_t fdShort; /* 0, or how many fds this rank could not open */
  int32_t pad;
} collSplitInfo;

/* Opens and closes `need` fds: how many of them could not be opened. */
static int collFdShortfall(int need) {
  int fds[256], got = 0;
  if (need > 256) need = 256;
  while (got < need && (fds[got] = eventfd(0, EFD_CLOEXEC)) >= 0) got++;
  for (int i = 0; i < got; i++) close(fds[i]);
  return need - got;
}

/* The error of a failed exchange of the split, with what a user checks. */
static collResult_t splitExchangeFailed(collComm_t comm, collResult_t r, const char* what) {
  return collSetError(r,
                      "rank %d: collCommSplit: exchanging %s with the other %d ranks failed (every rank must call "
                      "collCommSplit; a rank whose communicator failed earlier returns from it at once): %s",
                      comm->rank, what, comm->nranks - 1, collLastErrorMessage());
}

collResult_t collCommSplitImpl(collComm_t comm, int color, int key, collComm_t* newcomm, collConfig_t* config) {
  if (!newcomm) return collSetError(collInvalidArgument, "collCommSplit: newcomm is NULL");
  *newcomm = NULL;
  if (color < COLL_SPLIT_NOCOLOR)
    return collSetError(collInvalidArgument, "collCommSplit: color %d is negative (COLL_SPLIT_NOCOLOR is -1)", color);
  collResult_t r = collCommEnterIssue(comm, "collCommSplit"); /* a collective: one issuing thread */
  if (r != collSuccess) return r;
  collStreamsDrain(comm);
  /* the exchanges below wait under the communicator's timeout as it is now
   * (collCommSetTimeout after init did not reach the bootstrap: a peer that
   * never joined the split held the others for COLL_TIMEOUT) */
  comm->boot.timeoutSec = __atomic_load_n(&comm->timeoutSec, __ATOMIC_ACQUIRE);
  int n = comm->nranks;
  collSplitInfo* info = calloc((size_t)n, sizeof *info);
  collUniqueId* ids = calloc((size_t)n, sizeof *ids);
  if (!info || !ids) {
    r = collSetError(collSystemError, "collCommSplit: out of memory");
    goto out;
  }
  /* an init holds about 16 + nranks fds at its peak */
  int need = color == COLL_SPLIT_NOCOLOR ? 0 : 16 + n;
  info[comm->rank] = (collSplitInfo){color, key, need ? collFdShortfall(need) : 0, 0};
  if ((r = collBootAllGather(&comm->boot, info, sizeof *info)) != collSuccess) {
    r = splitExchangeFailed(comm, r, "colors and keys");
    goto out;
  }
  for (int i = 0; i < n; i++)
    if (info[i].fdShort && info[i].color == color && color != COLL_SPLIT_NOCOLOR) {
      struct rlimit rl;
      getrlimit(RLIMIT_NOFILE, &rl);
      r = collSetError(collSystemError,
                       "collCommSplit: rank %d cannot open the file descriptors a new communicator needs (%d of %d "
                       "failed: Too many open files; RLIMIT_NOFILE here is %llu): destroy communicators or "
                       "raise ulimit -n",
                       i, info[i].fdShort, 16 + n, (unsigned long long)rl.rlim_cur);
      goto out;
    }
  /* My position in the group and whether I am its first member. */
  int newRank = 0, newSize = 0, leader = -1;
  for (int i = 0; i < n; i++) {
    if (info[i].color != color || color == COLL_SPLIT_NOCOLOR) continue;
    newSize++;
    if (info[i].key < key || (info[i].key == key && i < comm->rank)) newRank++;
    if (leader < 0 || info[i].key < info[leader].key) leader = i;
  }
  char why[512] = "";
  if (color != COLL_SPLIT_NOCOLOR && leader == comm->rank) {
    /* Root on the same address family and interface as the bootstrap. */
    collSockAddr addr;
    char ifname[64];
    /* on failure the id stays empty: the others learn it from the allgather */
    if (collSocketFindInterface(&addr, ifname, sizeof ifname) != collSuccess ||
        collUniqueIdAt(&ids[comm->rank], &addr, 0) != collSuccess) {
      snprintf(why, sizeof why, "%s", collLastErrorMessage());
      memset(&ids[comm->rank], 0, sizeof ids[comm->rank]);
    }
  }
  if ((r = collBootAllGather(&comm->boot, ids, sizeof *ids)) != collSuccess) {
    r = splitExchangeFailed(comm, r, "the new communicators' ids");
    goto out;
  }
  if (color != COLL_SPLIT_NOCOLOR) {
    collUniqueId empty;
    memset(&empty, 0, sizeof empty);
    if (memcmp(&ids[leader], &empty, sizeof empty) == 0) {
      r = collSetError(collSystemError, "collCommSplit: rank %d could not create the new communicator's id%s%s",
                       leader, why[0] ? ": " : " (see its log)", why);
      goto out;
    }
  }
  if (color != COLL_SPLIT_NOCOLOR) r = collCommInitRankConfig(newcomm, newSize, ids[leader], newRank, config);
out:
  free(info);
  free(ids);
  collCommLeaveIssue(comm);
  return r;
}
