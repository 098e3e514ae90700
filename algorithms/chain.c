/*
 * chain.c - chain broadcast and chain reduce.
 *
 * The ranks form a chain in ring order: every rank sends only to
 * next = r+1 and receives only from prev = r-1 (mod n), so the chain reuses
 * the ring's connections. Position p = (r - root) mod n.
 *
 * Broadcast: root -> root+1 -> ... -> root+n-1.
 *   root (p = 0):   phase 0: SEND SEND -> next  (+ COPY SEND -> RECV unless
 *                   in place, i.e. sendbuff == recvbuff on root);
 *   0 < p < n-1:    phase 0: RECV prev -> RECV; phase 1: SEND RECV -> next;
 *   p = n-1 (last): phase 0: RECV prev -> RECV.
 *   Non-roots never touch SEND (it is not read on them and may be NULL).
 *
 * Reduce: root+1 -> root+2 -> ... -> root+n-1 -> root.
 *   p = 1 (first):  phase 0: SEND SEND -> next;
 *   1 < p <= n-1:   phase 0: RECV_REDUCE prev, src SEND, dst SCRATCH blk 0;
 *                   phase 1: SEND SCRATCH blk 0 -> next;
 *   root (p = 0):   phase 0: RECV_REDUCE prev, src SEND, dst RECV (in place
 *                   SEND == RECV, so src == dst, allowed).
 *   Non-roots never touch RECV (it may be NULL there, as in NCCL).
 *
 *     broadcast:  root -> r+1 -> r+2 -> ... -> r+n-1
 *     reduce:     r+1 -> r+2 -> ... -> r+n-1 -> root
 *
 * Cost per rank: 2 steps at most; count elements sent by every rank except
 * the last (broadcast) / the root (reduce); (n-1) * count on the wire in
 * total. A single slice takes n-1 hops; large messages are pipelined by the
 * engine, which cuts them into slices: every rank starts its next slice as
 * soon as its own two steps are done, so slices flow down the chain one
 * behind the other, several at once over the channels (NCCL's pipelined
 * chain). Two phases whatever n. n == 1: one COPY SEND->RECV unless in
 * place. Steps with 0 elements are not emitted.
 */
#include "algorithms.h"
#include "patterns/emit.h"

static collRegion chainWhole(collBufId buf, size_t count) {
  return collRegionMake(buf, 0, 0, count);
}

static void chainBroadcast(const collSchedArgs* a, int p, collEmitter* e) {
  const int n = a->nranks, next = (a->rank + 1) % n,
            prev = (a->rank + n - 1) % n;
  const size_t c = a->count;
  if (p == 0) {
    if (!a->inPlace)
      collEmitAt(e, COLL_STEP_COPY, 0, -1, chainWhole(COLL_BUF_SEND, c),
                chainWhole(COLL_BUF_RECV, c));
    if (n > 1)
      collEmitAt(e, COLL_STEP_SEND, 0, next, chainWhole(COLL_BUF_SEND, c),
                collRegionNone());
    return;
  }
  collEmitAt(e, COLL_STEP_RECV, 0, prev, collRegionNone(),
            chainWhole(COLL_BUF_RECV, c));
  if (p < n - 1)
    collEmitAt(e, COLL_STEP_SEND, 1, next, chainWhole(COLL_BUF_RECV, c),
              collRegionNone());
}

static void chainReduce(const collSchedArgs* a, int p, collSched* s,
                        collEmitter* e) {
  const int n = a->nranks, next = (a->rank + 1) % n,
            prev = (a->rank + n - 1) % n;
  const size_t c = a->count;
  if (n == 1) {
    if (!a->inPlace)
      collEmitAt(e, COLL_STEP_COPY, 0, -1, chainWhole(COLL_BUF_SEND, c),
                chainWhole(COLL_BUF_RECV, c));
    return;
  }
  if (p == 1) { /* head of the chain: its input is the first partial */
    collEmitAt(e, COLL_STEP_SEND, 0, next, chainWhole(COLL_BUF_SEND, c),
              collRegionNone());
  } else if (p == 0) { /* tail: the root reduces into its RECV */
    collEmitAt(e, COLL_STEP_RECV_REDUCE, 0, prev, chainWhole(COLL_BUF_SEND, c),
              chainWhole(COLL_BUF_RECV, c));
  } else { /* middle: partial += own input, in scratch, then forward */
    s->scratchBlocks = 1;
    collEmitAt(e, COLL_STEP_RECV_REDUCE, 0, prev, chainWhole(COLL_BUF_SEND, c),
              chainWhole(COLL_BUF_SCRATCH, c));
    collEmitAt(e, COLL_STEP_SEND, 1, next, chainWhole(COLL_BUF_SCRATCH, c),
              collRegionNone());
  }
}

collResult_t collChainBuild(const collSchedArgs* a, collSched* s) {
  if (!a || !s || a->nranks < 1 || a->rank < 0 || a->rank >= a->nranks ||
      a->root < 0 || a->root >= a->nranks)
    return collInvalidArgument;
  const int p = (a->rank - a->root + a->nranks) % a->nranks;
  collEmitter e = collEmitterMake(s);
  switch (a->fn) {
    case COLL_FN_BROADCAST: chainBroadcast(a, p, &e); break;
    case COLL_FN_REDUCE: chainReduce(a, p, s, &e); break;
    default: return collInvalidArgument;
  }
  return e.err;
}
