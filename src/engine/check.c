/*
 * check.c - COLL_CHECK=1: before each collective, every rank allgathers the
 * call's signature (collective, count, data type, op, root)
 * over the bootstrap ring and compares. A difference fails the call on every
 * rank with collInvalidUsage naming the first differing rank and both
 * signatures, before any data moves. Costs one small ring allgather per call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/progress.h"
#include "misc/log.h"
#include "reduce/reduce.h"

typedef struct {
  int32_t fn, dtype, op, root;
  uint64_t count;
} collSignature;

static const char* collCheckFnName(int fn) {
  static const char* names[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "Send", "Recv"};
  return fn >= 0 && fn < COLL_FN_COUNT ? names[fn] : "?";
}

static void collSigStr(const collSignature* s, char* buf, size_t len) {
  int rooted = s->fn == COLL_FN_BROADCAST || s->fn == COLL_FN_REDUCE;
  int reduces = s->fn == COLL_FN_ALLREDUCE || s->fn == COLL_FN_REDUCESCATTER || s->fn == COLL_FN_REDUCE;
  snprintf(buf, len, "%s(count=%llu, %s%s%s, root=%d)", collCheckFnName(s->fn),
           (unsigned long long)s->count, collTypeName((collDataType_t)s->dtype), reduces ? ", " : "",
           reduces ? collOpName((collRedOp_t)s->op) : "", rooted ? s->root : -1);
}

collResult_t collCheckSignature(collComm_t comm, const collOp* op) {
  int n = comm->nranks;
  collSignature* all = calloc((size_t)n, sizeof *all);
  if (!all) return collSetError(collSystemError, "COLL_CHECK: out of memory");
  int reduces = op->fn == COLL_FN_ALLREDUCE || op->fn == COLL_FN_REDUCESCATTER || op->fn == COLL_FN_REDUCE;
  int rooted = op->fn == COLL_FN_BROADCAST || op->fn == COLL_FN_REDUCE;
  all[comm->rank] = (collSignature){(int32_t)op->fn, (int32_t)op->dtype, reduces ? (int32_t)op->op : 0,
                                    rooted ? op->root : -1, op->count};
  collResult_t r = collBootAllGather(&comm->boot, all, sizeof *all);
  if (r != collSuccess) {
    free(all);
    return collSetError(r, "rank %d: COLL_CHECK exchange failed: %s", comm->rank, collLastErrorMessage());
  }
  const collSignature* me = &all[comm->rank];
  for (int i = 0; i < n; i++) {
    if (memcmp(&all[i], me, sizeof *me) == 0) continue;
    char a[160], b[160];
    collSigStr(&all[0], a, sizeof a);
    collSigStr(&all[i], b, sizeof b);
    /* report against rank 0's call so every rank names the same culprit */
    int first = 0;
    for (int j = 1; j < n; j++)
      if (memcmp(&all[j], &all[0], sizeof all[0]) != 0) { first = j; break; }
    collSigStr(&all[first], b, sizeof b);
    free(all);
    return collSetError(collInvalidUsage, "COLL_CHECK: rank %d (%s) called %s but rank 0 (%s) called %s", first,
                        collCommPeerHost(comm, first), b, collCommPeerHost(comm, 0), a);
  }
  free(all);
  return collSuccess;
}
