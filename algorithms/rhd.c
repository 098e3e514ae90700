/*
 * rhd.c - recursive halving-doubling all-reduce and reduce-scatter.
 *
 * Sources: R. Thakur, R. Rabenseifner, W. Gropp, "Optimization of collective
 * communication operations in MPICH", IJHPCA 19(1), 2005; R. Rabenseifner,
 * "Optimization of collective reduction operations", ICCS 2004.
 * All-reduce is Rabenseifner's algorithm: a reduce-scatter by recursive
 * halving, then an all-gather by recursive doubling. Reduce-scatter is the
 * first half alone, laid out so that each rank ends with its own block.
 *
 * Non-power of two (as in MPICH): p2 = largest power of two <= n, rem =
 * n - p2. Ranks 2i and 2i+1 (i < rem) pair up: the even rank sends its whole
 * input to the odd one, which reduces it into its own (received op own) and
 * stands for both; the p2 participants v (rank 2v+1 for v < rem, rank v+rem
 * beyond) run the power-of-two algorithm; at the end the odd rank sends the
 * even one its result (all-reduce: the whole slice; reduce-scatter: the
 * even rank's block, which lies in the odd rank's piece).
 *
 * Halving, mask = p2/2, p2/4, ..., 1: participant v exchanges with v^mask;
 * its window of 2*mask pieces is split in halves, v sends the half holding
 * piece v^mask and RECV_REDUCEs the half holding its own piece (received op
 * own). Afterwards v holds the full reduction of piece v. Doubling (all-
 * reduce), mask = 1, 2, ..., p2/2: v sends its window of mask pieces to
 * v^mask and receives v^mask's window into place. Every element is reduced
 * by exactly one owner in a fixed order and then copied, so all ranks get
 * identical bits whatever the arrival order.
 *
 * All-reduce: the slice is cut into p2 pieces (collSplitEven), piece v for
 *   participant v; a window of pieces is one contiguous region, so each
 *   exchange is one SEND and one RECV_REDUCE (or RECV) in one phase.
 *   Participant: 2 log2(p2) phases of 2 steps; a paired odd rank adds a
 *   RECV_REDUCE phase before and a SEND phase after; a paired even rank has
 *   2 phases (SEND, RECV). Buffers: the first exchange reads the input
 *   (SEND, or RECV in place), every reduction lands in RECV; no scratch.
 *   Cost, S = slice bytes: 2 log2(p2) message steps, each participant sends
 *   and receives 2 (p2-1)/p2 S and reduces (p2-1)/p2 S. Not a power of two:
 *   +2 message steps; the paired odd rank (busiest) also receives and
 *   reduces S before and sends S after (critical path 2 S + 2 (p2-1)/p2 S).
 *
 * Reduce-scatter: block b of the send buffer (count elements) is destined
 *   for rank b; participant v's piece is the group of blocks of the ranks it
 *   stands for (2v and 2v+1 for v < rem, v+rem beyond), so windows are runs
 *   of whole blocks. A region may not cross a block (block strides are the
 *   per-rank count, not the slice count), so every message carries one
 *   block: log2(p2) phases holding n-1 SENDs and n-1 RECV_REDUCEs in all
 *   for a power of two (n-1 = p2/2 + ... + 1). The SENDs and RECV_REDUCEs of
 *   a phase alternate: transports bound the requests in flight per
 *   connection (64) and the engine stops posting a phase's later steps at a
 *   refused one, so more than 64 SENDs ahead of all receives could wait on
 *   a peer that waits the same way. Buffers: the first exchange reads the
 *   SEND blocks, later partial sums live in SCRATCH (block b at scratch
 *   block b - base: the rank's window after the first exchange), the rank's
 *   own block is reduced straight into RECV by the last exchange. A paired
 *   odd rank RECV_REDUCEs all n blocks of its partner into SCRATCH first (n
 *   scratch blocks, base 0), the paired even rank receives its result into
 *   RECV. In place (RECV is SEND block rank) only that last write to RECV
 *   aliases a read of the block, in the same step (same memory, allowed).
 *   Cost, S = bytes per block: log2(p2) message steps, each rank sends,
 *   receives and reduces (n-1) S. Not a power of two: +2 message steps; the
 *   paired even rank sends n S, the paired odd rank receives and reduces n S
 *   first, its halving exchanges carry up to mask + min(mask, rem) blocks
 *   (at most 2 (p2-1) S in all) and it sends S at the end; critical path
 *   (n + 1 + sum over mask of (mask + min(mask, rem))) S.
 *
 * Steps with 0 elements (slices smaller than p2 pieces) are not emitted and
 * empty phases are not numbered. n == 1: one COPY SEND->RECV unless in
 * place.
 */
#include "algorithms.h"
#include "patterns/emit.h"

/* The n ranks folded onto p2 participants (see the header comment). */
typedef struct {
  int p2, rem;
} rhdFold;

static rhdFold rhdFoldMake(int nranks) {
  rhdFold f = {1, 0};
  while (f.p2 <= nranks / 2) f.p2 *= 2;
  f.rem = nranks - f.p2;
  return f;
}

/* Participant of rank q; -1 for a paired even rank, which sits out. */
static int rhdParticipant(const rhdFold* f, int q) {
  if (q >= 2 * f->rem) return q - f->rem;
  return q % 2 ? q / 2 : -1;
}

/* 1 when rank q is one of a pair (q < 2 rem). */
static int rhdIsPaired(const rhdFold* f, int q) { return q < 2 * f->rem; }

static int rhdRankOf(const rhdFold* f, int v) { return v < f->rem ? 2 * v + 1 : v + f->rem; }

/* First block (reduce-scatter) of participant v's group; v == p2 gives n. */
static int rhdFirstBlock(const rhdFold* f, int v) { return v < f->rem ? 2 * v : v + f->rem; }

/* Participants [lo, hi): the aligned window of `size` (a power of two) that
 * holds v. */
typedef struct {
  int lo, hi;
} rhdWindow;

static rhdWindow rhdWindowOf(int v, int size) {
  rhdWindow w = {v & ~(size - 1), (v & ~(size - 1)) + size};
  return w;
}

static void rhdCopyInput(const collSchedArgs* a, collEmitter* e) {
  if (!a->inPlace)
    collEmit(e, COLL_STEP_COPY, -1, collRegionMake(COLL_BUF_SEND, 0, 0, a->count),
             collRegionMake(COLL_BUF_RECV, 0, 0, a->count));
}

/* ---- all-reduce ---------------------------------------------------------- */

/* Elements of the pieces of window w (piece p2 starts at count). */
static collRegion rhdPieces(collBufId buf, size_t count, int p2, rhdWindow w) {
  size_t lo, hi, unused;
  collSplitEven(count, p2, w.lo, &lo, &unused);
  collSplitEven(count, p2, w.hi, &hi, &unused);
  return collRegionMake(buf, 0, lo, hi - lo);
}

static void rhdAllReduce(const collSchedArgs* a, collEmitter* e) {
  const rhdFold f = rhdFoldMake(a->nranks);
  const int q = a->rank, v = rhdParticipant(&f, q);
  const size_t c = a->count;
  const collRegion in = collRegionMake(a->inPlace ? COLL_BUF_RECV : COLL_BUF_SEND, 0, 0, c);
  const collRegion out = collRegionMake(COLL_BUF_RECV, 0, 0, c);
  if (v < 0) { /* paired even rank: input to q+1, result back from it */
    collEmit(e, COLL_STEP_SEND, q + 1, in, collRegionNone());
    collEmitNextPhase(e);
    collEmit(e, COLL_STEP_RECV, q + 1, collRegionNone(), out);
    return;
  }
  collBufId cur = in.buf; /* where this rank's partial sums are */
  if (rhdIsPaired(&f, q)) {
    collEmit(e, COLL_STEP_RECV_REDUCE, q - 1, in, out);
    collEmitNextPhase(e);
    cur = COLL_BUF_RECV;
  }
  for (int mask = f.p2 / 2; mask >= 1; mask /= 2) { /* recursive halving */
    const rhdWindow keep = rhdWindowOf(v, mask), give = rhdWindowOf(v ^ mask, mask);
    const int peer = rhdRankOf(&f, v ^ mask);
    collEmit(e, COLL_STEP_SEND, peer, rhdPieces(cur, c, f.p2, give), collRegionNone());
    collEmit(e, COLL_STEP_RECV_REDUCE, peer, rhdPieces(cur, c, f.p2, keep),
             rhdPieces(COLL_BUF_RECV, c, f.p2, keep));
    collEmitNextPhase(e);
    cur = COLL_BUF_RECV;
  }
  for (int mask = 1; mask < f.p2; mask *= 2) { /* recursive doubling */
    const int peer = rhdRankOf(&f, v ^ mask);
    collEmit(e, COLL_STEP_SEND, peer, rhdPieces(COLL_BUF_RECV, c, f.p2, rhdWindowOf(v, mask)),
             collRegionNone());
    collEmit(e, COLL_STEP_RECV, peer, collRegionNone(),
             rhdPieces(COLL_BUF_RECV, c, f.p2, rhdWindowOf(v ^ mask, mask)));
    collEmitNextPhase(e);
  }
  if (rhdIsPaired(&f, q)) collEmit(e, COLL_STEP_SEND, q - 1, out, collRegionNone());
}

/* ---- reduce-scatter ------------------------------------------------------ */

/* Where a participant's partial sums of the blocks are. */
typedef struct {
  size_t count;
  int rank;
  int inScratch; /* 0: still the SEND blocks (before the first exchange) */
  int base;      /* block held by scratch block 0 */
} rhdPartials;

static collRegion rhdPartial(const rhdPartials* p, int b) {
  if (p->inScratch) return collRegionMake(COLL_BUF_SCRATCH, (uint32_t)(b - p->base), 0, p->count);
  return collRegionMake(COLL_BUF_SEND, (uint32_t)b, 0, p->count);
}

/* Destination of block b's reduction: RECV for the rank's own block in the
 * last exchange, its scratch block otherwise. */
static collRegion rhdReduced(const rhdPartials* p, int b, int last) {
  if (last && b == p->rank) return collRegionMake(COLL_BUF_RECV, 0, 0, p->count);
  return collRegionMake(COLL_BUF_SCRATCH, (uint32_t)(b - p->base), 0, p->count);
}

/* Sets the scratch of participant v: a paired rank keeps all n blocks; any
 * other rank the blocks of its window after the first exchange. */
static void rhdScratchLayout(const rhdFold* f, int v, int paired, int nranks,
                             rhdPartials* p, collSched* s) {
  if (paired) {
    p->base = 0;
    s->scratchBlocks = nranks;
    return;
  }
  const rhdWindow w = rhdWindowOf(v, f->p2 / 2);
  p->base = rhdFirstBlock(f, w.lo);
  s->scratchBlocks = f->p2 > 2 ? rhdFirstBlock(f, w.hi) - p->base : 0;
}

/* One halving exchange of participant v: the blocks of v^mask's half go
 * to it, the peer's partials of our half are reduced in. SENDs and
 * RECV_REDUCEs alternate (see the header). */
static void rhdHalvingBlocks(const rhdFold* f, int v, int mask, const rhdPartials* p, collEmitter* e) {
  const rhdWindow keep = rhdWindowOf(v, mask), give = rhdWindowOf(v ^ mask, mask);
  const int peer = rhdRankOf(f, v ^ mask);
  const int give0 = rhdFirstBlock(f, give.lo), ngive = rhdFirstBlock(f, give.hi) - give0;
  const int keep0 = rhdFirstBlock(f, keep.lo), nkeep = rhdFirstBlock(f, keep.hi) - keep0;
  for (int i = 0; i < ngive || i < nkeep; i++) {
    if (i < ngive) collEmit(e, COLL_STEP_SEND, peer, rhdPartial(p, give0 + i), collRegionNone());
    if (i < nkeep)
      collEmit(e, COLL_STEP_RECV_REDUCE, peer, rhdPartial(p, keep0 + i), rhdReduced(p, keep0 + i, mask == 1));
  }
  collEmitNextPhase(e);
}

static void rhdReduceScatter(const collSchedArgs* a, collSched* s, collEmitter* e) {
  const rhdFold f = rhdFoldMake(a->nranks);
  const int q = a->rank, v = rhdParticipant(&f, q), paired = rhdIsPaired(&f, q);
  const size_t c = a->count;
  const collRegion out = collRegionMake(COLL_BUF_RECV, 0, 0, c);
  if (v < 0) { /* paired even rank: all blocks to q+1, own block back */
    for (int b = 0; b < a->nranks; b++)
      collEmit(e, COLL_STEP_SEND, q + 1, collRegionMake(COLL_BUF_SEND, (uint32_t)b, 0, c),
               collRegionNone());
    collEmitNextPhase(e);
    collEmit(e, COLL_STEP_RECV, q + 1, collRegionNone(), out);
    return;
  }
  rhdPartials p = {c, q, 0, 0};
  rhdScratchLayout(&f, v, paired, a->nranks, &p, s);
  if (paired) {
    for (int b = 0; b < a->nranks; b++)
      collEmit(e, COLL_STEP_RECV_REDUCE, q - 1, rhdPartial(&p, b), rhdReduced(&p, b, 0));
    collEmitNextPhase(e);
    p.inScratch = 1;
  }
  for (int mask = f.p2 / 2; mask >= 1; mask /= 2) {
    rhdHalvingBlocks(&f, v, mask, &p, e);
    p.inScratch = 1;
  }
  if (paired) collEmit(e, COLL_STEP_SEND, q - 1, rhdPartial(&p, q - 1), collRegionNone());
}

collResult_t collRhdBuild(const collSchedArgs* a, collSched* s) {
  if (!a || !s || a->nranks < 1 || a->rank < 0 || a->rank >= a->nranks)
    return collInvalidArgument;
  if (a->fn != COLL_FN_ALLREDUCE && a->fn != COLL_FN_REDUCESCATTER) return collInvalidArgument;
  collEmitter e = collEmitterMake(s);
  if (a->nranks == 1)
    rhdCopyInput(a, &e);
  else if (a->fn == COLL_FN_ALLREDUCE)
    rhdAllReduce(a, &e);
  else
    rhdReduceScatter(a, s, &e);
  return e.err;
}
