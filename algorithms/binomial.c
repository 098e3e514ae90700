/*
 * binomial.c - binomial tree broadcast and reduce, any root.
 *
 * The classic MPICH algorithms (Thakur, Rabenseifner & Gropp, "Optimization
 * of collective communication operations in MPICH", IJHPCA 19(1), 2005).
 * Relative rank v = (r - root) mod n; low(v) = lowest set bit of v, and
 * low(0) = the smallest power of two >= n. The parent of v != 0 is
 * v - low(v); the children of v are v + m for m = low(v)/2, low(v)/4, ..., 1
 * with v + m < n. With L = ceil(log2 n), the edges of mask 2^(L-1-k) carry
 * broadcast round k and reduce round L-1-k (k = 0..L-1).
 *
 *     n = 8, root 0:   0 -> 4 -> 6 -> 7      round 0: 0->4
 *                      |    +--> 5           round 1: 0->2, 4->6
 *                      +--> 2 -> 3           round 2: 0->1, 2->3,
 *                      +--> 1                         4->5, 6->7
 *
 * Broadcast: v receives from its parent, then sends to its children one
 *   per phase, largest subtree first (as MPICH's blocking sends).
 *   root:     phase 0: SEND SEND -> child (+ COPY SEND -> RECV unless in
 *             place); phase i: SEND SEND -> i-th child;
 *   non-root: phase 0: RECV parent -> RECV; phase i: SEND RECV -> i-th child.
 *   Non-roots never touch SEND.
 * Reduce: v receives from its children one per phase, smallest subtree
 *   first (v+1, v+2, v+4, ...), each RECV_REDUCE into its accumulator, then
 *   sends the accumulator to its parent. Accumulator: RECV on the root,
 *   SCRATCH block 0 on interior non-roots; a leaf sends SEND directly.
 *   The first RECV_REDUCE reads SEND (src), the following ones the
 *   accumulator (src == dst, allowed); in place the root's SEND is RECV.
 *   Non-roots never touch RECV. The order is fixed, independent of arrival
 *   order: acc = child(v+1) op in, then acc = child(v+2) op acc, ...
 *
 * Per rank: one step and one phase per message, at most L phases (the
 * root: L sends or receives; v != 0: log2(low(v)) + 1). No sub-chunking: the
 * binomial tree is the latency algorithm (chain is the pipelined one); the
 * engine still overlaps slices over its channels.
 *
 * Cost for a slice of S bytes: L = ceil(log2 n) sequential message steps
 * (the odd relative ranks get the broadcast, and the root the last partial
 * of the reduce, in step L). Broadcast: the root sends
 * L * S, every other rank receives S once; reduce: the root receives and
 * reduces L * S, every non-root sends S once. (n-1) * S on the wire.
 * n == 1: one COPY SEND -> RECV unless in place. Steps with 0 elements are
 * not emitted.
 */
#include "algorithms.h"
#include "patterns/emit.h"

static collRegion binomialWhole(collBufId buf, size_t count) {
  return collRegionMake(buf, 0, 0, count);
}

/* Lowest set bit of v; for the root (v == 0) the smallest power of two >= n. */
static int binomialLowBit(int v, int n) {
  if (v != 0) return v & -v;
  int span = 1;
  while (span < n) span *= 2;
  return span;
}

static int binomialRank(const collSchedArgs* a, int v) { return (v + a->root) % a->nranks; }

static void binomialBroadcast(const collSchedArgs* a, int v, collEmitter* e) {
  const int n = a->nranks, low = binomialLowBit(v, n);
  const size_t c = a->count;
  if (v != 0) {
    collEmit(e, COLL_STEP_RECV, binomialRank(a, v - low), collRegionNone(), binomialWhole(COLL_BUF_RECV, c));
    collEmitNextPhase(e);
  } else if (!a->inPlace) { /* concurrent with the first SEND, both read SEND */
    collEmit(e, COLL_STEP_COPY, -1, binomialWhole(COLL_BUF_SEND, c), binomialWhole(COLL_BUF_RECV, c));
  }
  const collRegion src = binomialWhole(v == 0 ? COLL_BUF_SEND : COLL_BUF_RECV, c);
  for (int mask = low >> 1; mask > 0; mask >>= 1) {
    if (v + mask >= n) continue;
    collEmit(e, COLL_STEP_SEND, binomialRank(a, v + mask), src, collRegionNone());
    collEmitNextPhase(e);
  }
}

static void binomialReduce(const collSchedArgs* a, int v, collSched* s, collEmitter* e) {
  const int n = a->nranks, low = binomialLowBit(v, n);
  const size_t c = a->count;
  if (n == 1) {
    if (!a->inPlace)
      collEmit(e, COLL_STEP_COPY, -1, binomialWhole(COLL_BUF_SEND, c), binomialWhole(COLL_BUF_RECV, c));
    return;
  }
  const collRegion acc = binomialWhole(v == 0 ? COLL_BUF_RECV : COLL_BUF_SCRATCH, c);
  collRegion partial = binomialWhole(COLL_BUF_SEND, c); /* what the rank holds so far */
  for (int mask = 1; mask < low && v + mask < n; mask <<= 1) {
    collEmit(e, COLL_STEP_RECV_REDUCE, binomialRank(a, v + mask), partial, acc);
    collEmitNextPhase(e);
    partial = acc;
  }
  if (v == 0) return;
  if (partial.buf == COLL_BUF_SCRATCH) s->scratchBlocks = 1;
  collEmit(e, COLL_STEP_SEND, binomialRank(a, v - low), partial, collRegionNone());
}

collResult_t collBinomialBuild(const collSchedArgs* a, collSched* s) {
  if (!a || !s || a->nranks < 1 || a->rank < 0 || a->rank >= a->nranks || a->root < 0 ||
      a->root >= a->nranks)
    return collInvalidArgument;
  const int v = (a->rank - a->root + a->nranks) % a->nranks;
  collEmitter e = collEmitterMake(s);
  switch (a->fn) {
    case COLL_FN_BROADCAST: binomialBroadcast(a, v, &e); break;
    case COLL_FN_REDUCE: binomialReduce(a, v, s, &e); break;
    default: return collInvalidArgument;
  }
  return e.err;
}
