/*
 * ring.c - ring all-reduce, all-gather and reduce-scatter.
 *
 * Every rank r sends only to next = r+1 and receives only from prev = r-1
 * (mod n). Per ring step, each rank sends one block and receives one block
 * concurrently (one phase per step), so every link is busy in every step.
 *
 * All-reduce (Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for
 * clusters of workstations", JPDC 69(2), 2009): the slice is split into n
 * near-equal blocks (collSplitEven).
 *   reduce-scatter, k = 0..n-2: send block r-k, RECV_REDUCE block r-k-1;
 *     afterwards rank r holds the full reduction of block r+1 in RECV;
 *   all-gather,     k = 0..n-2: send block r+1-k, RECV block r-k.
 *   2(n-1) steps; on the wire per rank 2(n-1) * ceil(count/n) elements
 *   (the optimum 2(n-1)/n * count up to rounding).
 *   The first step reads the input (SEND, or RECV when in place); every
 *   reduction lands in RECV, so SEND is never written.
 *
 * All-gather: n-1 steps; step k sends block r-k and receives block r-k-1
 *   (RECV blk = owning rank, stride = per-rank count). Out of place, step 0
 *   sends straight from SEND while a concurrent COPY puts it in RECV blk r.
 *   (n-1) * count elements on the wire per rank.
 *
 * Reduce-scatter: n-1 steps; step k sends the partial sum of block r-k-1 and
 *   RECV_REDUCEs block r-k-2 with the local SEND blk r-k-2; the last step
 *   (k = n-2) reduces block r into RECV. Partial sums ping-pong between two
 *   SCRATCH blocks (step k writes scratch k%2 while sending scratch (k-1)%2),
 *   never the const SEND buffer nor RECV: in place, RECV aliases SEND blk r,
 *   which is read only by that last step (src == dst memory, allowed).
 *   (n-1) * count elements on the wire per rank.
 *
 *       r-1 ---> r ---> r+1      step k: send blk to r+1,
 *        ^                |              receive (and reduce) from r-1
 *        +----- ... <-----+
 *
 * Steps with 0 elements are not emitted and empty phases are not numbered,
 * so small counts give short schedules. n == 1: one COPY SEND->RECV unless
 * in place. Restriction: a rank's phases must fit in 16 bits (all-reduce
 * with more than 32768 ranks and count >= nranks) -> collInvalidArgument.
 */
#include "algorithms.h"
#include "patterns/emit.h"


static int ringMod(int x, int n) { return ((x % n) + n) % n; }

static collRegion ringBlock(collBufId buf, size_t count, int n, int b) {
  size_t off, cnt;
  collSplitEven(count, n, b, &off, &cnt);
  return collRegionMake(buf, 0, off, cnt);
}

static void ringAllReduce(const collSchedArgs* a, collEmitter* e) {
  const int n = a->nranks, r = a->rank;
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const collBufId in = a->inPlace ? COLL_BUF_RECV : COLL_BUF_SEND;
  if (n == 1) {
    if (!a->inPlace)
      collEmit(e, COLL_STEP_COPY, -1, collRegionMake(COLL_BUF_SEND, 0, 0, a->count),
               collRegionMake(COLL_BUF_RECV, 0, 0, a->count));
    return;
  }
  for (int k = 0; k < n - 1; k++) { /* reduce-scatter */
    const int sb = ringMod(r - k, n), rb = ringMod(r - k - 1, n);
    collEmit(e, COLL_STEP_SEND, next,
             ringBlock(k == 0 ? in : COLL_BUF_RECV, a->count, n, sb),
             collRegionNone());
    collEmit(e, COLL_STEP_RECV_REDUCE, prev, ringBlock(in, a->count, n, rb),
             ringBlock(COLL_BUF_RECV, a->count, n, rb));
    collEmitNextPhase(e);
  }
  for (int k = 0; k < n - 1; k++) { /* all-gather of the reduced blocks */
    const int sb = ringMod(r + 1 - k, n), rb = ringMod(r - k, n);
    collEmit(e, COLL_STEP_SEND, next, ringBlock(COLL_BUF_RECV, a->count, n, sb),
             collRegionNone());
    collEmit(e, COLL_STEP_RECV, prev, collRegionNone(),
             ringBlock(COLL_BUF_RECV, a->count, n, rb));
    collEmitNextPhase(e);
  }
}

static void ringAllGather(const collSchedArgs* a, collEmitter* e) {
  const int n = a->nranks, r = a->rank;
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const size_t c = a->count;
  if (!a->inPlace) /* concurrent with step 0, which also reads SEND */
    collEmit(e, COLL_STEP_COPY, -1, collRegionMake(COLL_BUF_SEND, 0, 0, c),
             collRegionMake(COLL_BUF_RECV, (uint32_t)r, 0, c));
  for (int k = 0; k < n - 1; k++) {
    const int sb = ringMod(r - k, n), rb = ringMod(r - k - 1, n);
    collRegion src = (k == 0 && !a->inPlace)
                         ? collRegionMake(COLL_BUF_SEND, 0, 0, c)
                         : collRegionMake(COLL_BUF_RECV, (uint32_t)sb, 0, c);
    collEmit(e, COLL_STEP_SEND, next, src, collRegionNone());
    collEmit(e, COLL_STEP_RECV, prev, collRegionNone(),
             collRegionMake(COLL_BUF_RECV, (uint32_t)rb, 0, c));
    collEmitNextPhase(e);
  }
}

static void ringReduceScatter(const collSchedArgs* a, collSched* s,
                              collEmitter* e) {
  const int n = a->nranks, r = a->rank;
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const size_t c = a->count;
  if (n == 1) {
    if (!a->inPlace)
      collEmit(e, COLL_STEP_COPY, -1, collRegionMake(COLL_BUF_SEND, 0, 0, c),
               collRegionMake(COLL_BUF_RECV, 0, 0, c));
    return;
  }
  s->scratchBlocks = n - 2 < 2 ? n - 2 : 2; /* partial sums ping-pong */
  for (int k = 0; k < n - 1; k++) {
    const int sb = ringMod(r - k - 1, n), rb = ringMod(r - k - 2, n);
    collRegion src = k == 0 ? collRegionMake(COLL_BUF_SEND, (uint32_t)sb, 0, c)
                            : collRegionMake(COLL_BUF_SCRATCH,
                                             (uint32_t)((k - 1) % 2), 0, c);
    collRegion dst = k == n - 2 ? collRegionMake(COLL_BUF_RECV, 0, 0, c)
                                : collRegionMake(COLL_BUF_SCRATCH,
                                                 (uint32_t)(k % 2), 0, c);
    collEmit(e, COLL_STEP_SEND, next, src, collRegionNone());
    /* k == n-2: rb == r; in place that SEND block is RECV itself. */
    collEmit(e, COLL_STEP_RECV_REDUCE, prev,
             collRegionMake(COLL_BUF_SEND, (uint32_t)rb, 0, c), dst);
    collEmitNextPhase(e);
  }
}

collResult_t collRingBuild(const collSchedArgs* a, collSched* s) {
  if (!a || !s || a->nranks < 1 || a->rank < 0 || a->rank >= a->nranks)
    return collInvalidArgument;
  collEmitter e = collEmitterMake(s);
  switch (a->fn) {
    case COLL_FN_ALLREDUCE: ringAllReduce(a, &e); break;
    case COLL_FN_ALLGATHER: ringAllGather(a, &e); break;
    case COLL_FN_REDUCESCATTER: ringReduceScatter(a, s, &e); break;
    default: return collInvalidArgument;
  }
  return e.err;
}
