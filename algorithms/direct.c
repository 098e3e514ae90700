/*
 * direct.c - one-shot all-reduce, all-gather and reduce-scatter for small
 * messages on few ranks: every rank exchanges with every other rank in a
 * single message round. All-reduce is the "one-shot" all-reduce of the
 * custom all-reduce kernels of TensorRT-LLM and vLLM (every rank gathers
 * all inputs and reduces them itself); all-gather and reduce-scatter are the
 * corresponding one-round direct exchanges.
 *
 * All-gather: rank r sends its block (SEND, or RECV block r in place) to
 *   every other rank and receives block k from rank k straight into RECV
 *   block k; out of place a COPY puts its own block into RECV block r. One
 *   phase of n-1 SENDs, n-1 RECVs (+COPY), no scratch.
 *
 * All-reduce / reduce-scatter: rank r sends every other rank k its
 *   contribution to k's result (all-reduce: its whole slice; reduce-scatter:
 *   SEND block k) and receives the n-1 contributions to its own result,
 *   then folds them IN RANK ORDER, x_0 op x_1 op ... op x_{n-1} (REDUCE:
 *   acc = acc op x_k), so every rank computes the same expression whatever
 *   the arrival order: all-reduce results are bit-identical on all ranks.
 *   x_0 is received straight into the accumulator, which is RECV unless
 *   RECV still holds the rank's own contribution (in place, r != 0): then
 *   the accumulator is a scratch block, copied to RECV at the end. Rank 0
 *   starts from its own input (COPY out of place). Contribution k != r
 *   lands in scratch block k - (k > r) (n-1 blocks of count). SEND is never
 *   written.
 *   Phases: 1 exchange phase (n-1 SENDs, n-1 RECVs), then n-1 phases of one
 *   REDUCE each, then possibly the final COPY.
 *
 * Cost with S = slice bytes (all-reduce) or bytes per block (all-gather,
 * reduce-scatter): one message step; every rank sends and receives
 * (n-1) S; all-reduce and reduce-scatter reduce (n-1) S per rank (n-1
 * dependent local passes over S) plus at most one local copy of S.
 *
 * Any n works (no power-of-two structure); sends go to r+1, r+2, ... so
 * that not every rank addresses rank 0 first. Steps with 0 elements are not
 * emitted. n == 1: one COPY unless in place.
 */
#include "algorithms.h"
#include "patterns/emit.h"

static void directAllGather(const collSchedArgs* a, collEmitter* e) {
  const int n = a->nranks, r = a->rank;
  const size_t c = a->count;
  const collRegion own = a->inPlace ? collRegionMake(COLL_BUF_RECV, (uint32_t)r, 0, c)
                                    : collRegionMake(COLL_BUF_SEND, 0, 0, c);
  if (!a->inPlace) collEmit(e, COLL_STEP_COPY, -1, own, collRegionMake(COLL_BUF_RECV, (uint32_t)r, 0, c));
  for (int k = 1; k < n; k++) collEmit(e, COLL_STEP_SEND, (r + k) % n, own, collRegionNone());
  for (int k = 1; k < n; k++) {
    const int from = (r + n - k) % n;
    collEmit(e, COLL_STEP_RECV, from, collRegionNone(), collRegionMake(COLL_BUF_RECV, (uint32_t)from, 0, c));
  }
}

/* Region of this rank's contribution to rank k's result. */
typedef collRegion (*directPart)(const collSchedArgs* a, int k);

static collRegion directAllReducePart(const collSchedArgs* a, int k) {
  (void)k;
  return collRegionMake(a->inPlace ? COLL_BUF_RECV : COLL_BUF_SEND, 0, 0, a->count);
}

static collRegion directReduceScatterPart(const collSchedArgs* a, int k) {
  return collRegionMake(COLL_BUF_SEND, (uint32_t)k, 0, a->count);
}

/* Scratch block that receives rank k's contribution (k != rank). */
static collRegion directSlot(const collSchedArgs* a, int k) {
  return collRegionMake(COLL_BUF_SCRATCH, (uint32_t)(k - (k > a->rank)), 0, a->count);
}

static void directReduce(const collSchedArgs* a, collSched* s, collEmitter* e, directPart part) {
  const int n = a->nranks, r = a->rank;
  const collRegion mine = part(a, r), out = collRegionMake(COLL_BUF_RECV, 0, 0, a->count);
  /* In place on rank r != 0, RECV holds x_r until the fold reaches it. */
  const int accInScratch = a->inPlace && r != 0;
  const collRegion acc = accInScratch ? directSlot(a, 0) : out;
  s->scratchBlocks = n - 1;
  for (int k = 1; k < n; k++) {
    const int to = (r + k) % n;
    collEmit(e, COLL_STEP_SEND, to, part(a, to), collRegionNone());
  }
  for (int k = 0; k < n; k++)
    if (k != r) collEmit(e, COLL_STEP_RECV, k, collRegionNone(), k == 0 ? acc : directSlot(a, k));
  if (r == 0 && !a->inPlace) collEmit(e, COLL_STEP_COPY, -1, mine, out);
  collEmitNextPhase(e);
  for (int k = 1; k < n; k++) {
    collEmit(e, COLL_STEP_REDUCE, -1, k == r ? mine : directSlot(a, k), acc);
    collEmitNextPhase(e);
  }
  if (accInScratch) collEmit(e, COLL_STEP_COPY, -1, acc, out);
}

collResult_t collDirectBuild(const collSchedArgs* a, collSched* s) {
  if (!a || !s || a->nranks < 1 || a->rank < 0 || a->rank >= a->nranks)
    return collInvalidArgument;
  collEmitter e = collEmitterMake(s);
  switch (a->fn) {
    case COLL_FN_ALLREDUCE: directReduce(a, s, &e, directAllReducePart); break;
    case COLL_FN_ALLGATHER: directAllGather(a, &e); break;
    case COLL_FN_REDUCESCATTER: directReduce(a, s, &e, directReduceScatterPart); break;
    default: return collInvalidArgument;
  }
  return e.err;
}
