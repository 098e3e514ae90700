/*
 * check.c - COLL_CHECK=1: before each collective, every rank allgathers the
 * call's signature (collective, count, data type, op, root, COLL_HALF_ACCUM
 * mode) over the bootstrap ring and compares. A difference fails the call on
 * every rank with collInvalidUsage naming the first differing rank and both
 * calls in words (sig.h), before any data moves. Costs one small ring
 * allgather per call. (Without it, the same signature travels in every
 * message's tag, and the receiver of a mismatched message fails.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/progress.h"
#include "engine/sig.h"
#include "misc/log.h"

/* The compared fields (fixed width, no padding: compared with memcmp). */
typedef struct {
  int32_t fn, dtype, op, root, wide, pad;
  uint64_t count;
} collCheckSig;

static void collCheckDescribe(const collCheckSig* c, char* buf, size_t len) {
  collSig s = {c->fn, c->dtype, c->op, c->wide, c->root, 0, c->count};
  collSigDescribe(&s, buf, len);
  if (c->wide == 0 && (c->fn == COLL_FN_ALLREDUCE || c->fn == COLL_FN_REDUCESCATTER || c->fn == COLL_FN_REDUCE) &&
      (c->dtype == collFloat16 || c->dtype == collBfloat16) && c->op != collMax && c->op != collMin) {
    size_t n = strlen(buf);
    if (n < len) snprintf(buf + n, len - n, " with COLL_HALF_ACCUM=native");
  }
}

collResult_t collCheckSignature(collComm_t comm, const collOp* op) {
  int n = comm->nranks;
  collCheckSig* all = calloc((size_t)n, sizeof *all);
  if (!all) return collSetError(collSystemError, "COLL_CHECK: out of memory");
  collSig s;
  collSigOf(op, 0, collEngineWide(op), &s);
  all[comm->rank] = (collCheckSig){s.fn, s.dtype, s.op, s.root, s.wide, 0, s.count};
  collResult_t r = collBootAllGather(&comm->boot, all, sizeof *all);
  if (r != collSuccess) {
    free(all);
    return collSetError(r, "rank %d: COLL_CHECK exchange failed: %s", comm->rank, collLastErrorMessage());
  }
  /* report against rank 0's call so every rank names the same culprit */
  int first = 0;
  for (int j = 1; j < n && !first; j++)
    if (memcmp(&all[j], &all[0], sizeof all[0]) != 0) first = j;
  if (!first) {
    free(all);
    return collSuccess;
  }
  char a[200], b[200];
  collCheckDescribe(&all[0], a, sizeof a);
  collCheckDescribe(&all[first], b, sizeof b);
  free(all);
  return collSetError(collInvalidUsage, "COLL_CHECK: rank %d (%s) called %s but rank 0 (%s) called %s", first,
                      collCommPeerHost(comm, first), b, collCommPeerHost(comm, 0), a);
}
