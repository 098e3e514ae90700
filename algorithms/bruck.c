/*
 * bruck.c - Bruck all-gather for any number of ranks.
 *
 * Source: J. Bruck, C.-T. Ho, S. Kipnis, E. Upfal, D. Weathersby, "Efficient
 * algorithms for all-to-all communications in multiport message-passing
 * systems", IEEE TPDS 8(11), 1997 (the concatenation algorithm, one port).
 *
 * Step k = 0 .. ceil(log2 n)-1, distance d = 2^k: rank r holds the d blocks
 * r, r+1, ..., r+d-1 (mod n); it sends m = min(d, n-d) of them (blocks r ..
 * r+m-1) to rank r-d and receives blocks r+d .. r+d+m-1 from rank r+d, so
 * after the step it holds 2d blocks (all n after the last, shorter step).
 * Any n works this way: no power-of-two pre/post step.
 *
 *       step 0: r -> r-1    step 1: r -> r-2    step 2: r -> r-4 ...
 *
 * Buffers: every block is received straight into its final place, RECV
 * block b (b = the rank that contributed it), so there is no final rotation
 * and no scratch. A region may not cross a block (block strides are the
 * per-rank count, not the slice count), so a step carries one message per
 * block (runs that wrap past block n-1 need no special case); sender and
 * receiver both walk the blocks in increasing distance from the sender,
 * which matches the k-th SEND with the k-th RECV. The rank's own block is
 * always sent from its input (SEND, or RECV block r in place); out of place
 * a COPY puts it into RECV block r in phase 0, concurrently with the SENDs
 * reading SEND. SEND is never written.
 *
 * SENDs and RECVs of a phase alternate: transports bound the requests in
 * flight per connection (64) and the engine stops posting a phase's later
 * steps at a refused one, so more than 64 SENDs ahead of all RECVs (n > 128)
 * could wait on a peer that waits the same way.
 *
 * Steps/phases per rank: ceil(log2 n) phases; phase k holds min(2^k, n-2^k)
 * SENDs and as many RECVs (n-1 of each in all), plus the COPY in phase 0.
 * Cost with S = bytes per block: ceil(log2 n) sequential message steps;
 * every rank sends and receives (n-1) S (step k: min(2^k, n-2^k) S),
 * nothing is reduced.
 *
 * Steps with 0 elements are not emitted. n == 1: one COPY unless in place.
 */
#include "algorithms.h"
#include "patterns/emit.h"

static int bruckMod(int x, int n) { return ((x % n) + n) % n; }

static void bruckAllGather(const collSchedArgs* a, collEmitter* e) {
  const int n = a->nranks, r = a->rank;
  const size_t c = a->count;
  const collRegion own = a->inPlace ? collRegionMake(COLL_BUF_RECV, (uint32_t)r, 0, c)
                                    : collRegionMake(COLL_BUF_SEND, 0, 0, c);
  if (!a->inPlace) collEmit(e, COLL_STEP_COPY, -1, own, collRegionMake(COLL_BUF_RECV, (uint32_t)r, 0, c));
  for (int d = 1; d < n; d *= 2) {
    const int m = d < n - d ? d : n - d;
    const int to = bruckMod(r - d, n), from = (r + d) % n;
    for (int j = 0; j < m; j++) { /* alternate, see the header */
      const int b = (r + j) % n;
      collEmit(e, COLL_STEP_SEND, to, b == r ? own : collRegionMake(COLL_BUF_RECV, (uint32_t)b, 0, c),
               collRegionNone());
      collEmit(e, COLL_STEP_RECV, from, collRegionNone(),
               collRegionMake(COLL_BUF_RECV, (uint32_t)((from + j) % n), 0, c));
    }
    collEmitNextPhase(e);
  }
}

collResult_t collBruckBuild(const collSchedArgs* a, collSched* s) {
  if (!a || !s || a->nranks < 1 || a->rank < 0 || a->rank >= a->nranks || a->fn != COLL_FN_ALLGATHER)
    return collInvalidArgument;
  collEmitter e = collEmitterMake(s);
  bruckAllGather(a, &e);
  return e.err;
}
