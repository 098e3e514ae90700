/*
 * hier.c - hierarchical (two-level) all-reduce, all-gather, reduce-scatter.
 *
 * Ranks are grouped by node (args->rankNode); node j holds M_j ranks in
 * increasing rank order, its "local ranks" 0..M_j-1; K nodes. Intra-node
 * pieces are rings over a node's local ranks; the inter-node piece runs one
 * ring per SEGMENT over the owners of that segment on every node, in node
 * order 0..K-1, all rings in parallel (they share phases). Same idea as
 * NCCL's per-local-rank inter-node rings, generalised to uneven nodes.
 *
 * Shard layout. Node j cuts the c elements (of the vector, or of every
 * per-rank block for all-gather / reduce-scatter) into M_j near-equal
 * pieces (collSplitEven); local rank x owns piece x. The SEGMENTS are the
 * common refinement of all nodes' cuts: every node boundary is a segment
 * boundary, so each segment lies in exactly one piece of every node and has
 * one owner per node. At most N-K+1 segments, no lcm blow-up; with equal
 * nodes the segments are the pieces (one inter ring per local rank).
 *
 *   K = 3 nodes of 1, 3, 2 ranks (ranks 0 | 1 2 3 | 4 5), c = 12:
 *     node 0 pieces  |0 ........................... 12|  owner 0
 *     node 1 pieces  |0 ..... 4|4 ..... 8|8 ....... 12|  owners 1 2 3
 *     node 2 pieces  |0 ........ 6|6 .............. 12|  owners 4 5
 *     segments       |0 ..... 4|4 . 6|6 . 8|8 ....... 12|
 *     inter rings    0->1->4   0->2->4 0->2->5 0->3->5    (and back to 0)
 *   Rank 0 is in all four rings, rank 2 in two; each ring moves its segment
 *   only, so every node puts about the same bytes on the wire.
 *
 * All-reduce (the 2D scheme of Mikami et al., "Massively distributed SGD:
 * ImageNet/ResNet-50 training in a flash", 2018, and Horovod's hierarchical
 * all-reduce; each level is Patarasuk & Yuan's bandwidth-optimal ring):
 *   1. intra reduce-scatter (ring over the node): local rank x ends with
 *      the node sum of piece x in RECV;                M_j-1 phases
 *   2. inter all-reduce: per segment a ring all-reduce over its K owners,
 *      the segment cut in K sub-blocks (RS then AG);   2(K-1) phases
 *   3. intra all-gather (ring over the node) of the pieces.  M_j-1 phases
 *   Everything lands in RECV; no scratch. M_j == 1 skips 1 and 3 (step 2
 *   then reads the input directly); K == 1 skips 2.
 *   Composed variants (hier_tree, hier_rhd, hier_direct): step 2 runs that
 *   flat all-reduce builder over each segment's K owners instead of the
 *   ring (patterns/embed.h: virtual rank = node index, the segment as the
 *   vector, in place in RECV, or SEND -> RECV when M_j == 1). A rank's
 *   segments then run one after another, in increasing offset (parallel
 *   when equal nodes give every rank one segment); they reuse the inner
 *   schedule's scratch blocks.
 *
 * All-gather (per-rank count c, RECV blk b = rank b's block):
 *   1. intra all-gather of whole blocks: every local rank gets all M_j
 *      blocks of its node;                              M_j-1 phases
 *   2. inter all-gather: per segment s a ring over its owners; node i
 *      contributes segment s of each of its M_i blocks; K-1 phases
 *   3. intra all-gather of pieces of the N-M_j blocks of other nodes
 *      (local rank x holds piece x of them after 2).    M_j-1 phases
 *   Out of place a COPY SEND -> RECV blk rank runs in phase 0 while the
 *   first sends read SEND.
 *
 * Reduce-scatter (SEND blk b = contribution to rank b):
 *   1. intra reduce-scatter of pieces of all N blocks: local rank x ends with
 *      the node sum of piece x of every block;          M_j-1 phases
 *   2. inter reduce-scatter: per segment s a ring over its owners; node i's
 *      share is segment s of its M_i blocks; the owner on node j ends with
 *      the full sum of segment s of node j's blocks;   K-1 phases
 *   3. intra all-to-all: local rank x sends piece x of block L[y] to local
 *      rank y (one phase; own piece lands in RECV directly).
 *   Partial sums live in SCRATCH blk b (a mirror of SEND: N blocks, each
 *   element written at most once, so no ping-pong); SEND is never written;
 *   in place RECV (= SEND blk rank) is written only by the last reduction
 *   of each of its elements, after its last read.
 *
 *   node 0:  r0 -> r1 -> r2 -> r0   (intra ring)      K nodes, ring of owners
 *              |     |     |                         per segment, one per
 *   node 1:  r3 -> r4 -> r5 -> r3   inter: r0->r3->r0, r1->r4->r1, r2->r5->r2
 *
 * Bytes on the wire (elements; c as above, N = sum M_j):
 *   all-reduce   inter, total 2(K-1) c exactly; node j sends
 *                about 2(K-1)/K * c (+ rounding of sub-blocks), spread
 *                over its M_j ranks: about 2(K-1)/(K M_j) * c per rank;
 *                intra 2(M_j-1)/M_j * c per rank.
 *                (Flat ring, nodes contiguous: each of the K boundary links
 *                carries 2(N-1)/N * c, all of it on ONE rank per node.)
 *   all-gather / reduce-scatter
 *                inter, total (K-1) N c exactly; node j sends
 *                AG (N - M_{j+1}) c, RS (N - M_j) c, over its M_j
 *                ranks (segment by segment). intra per rank:
 *                AG (M_j-1) c + (M_j-1)(N-M_j) c/M_j,
 *                RS (M_j-1) N c/M_j + (M_j-1) c/M_j.
 *                (Flat ring: (N-1) c per crossing link, >= K links.)
 *   Phases: AR 2(M_j-1) + 2(K-1); AG 2(M_j-1) + (K-1) (K == 1: M_j-1);
 *   RS (M_j-1) + (K-1) + 1 (M_j == 1: K-1). Flat ring: 2(N-1), N-1.
 *
 * Matching: for a (sender, receiver) pair steps are emitted by ring step,
 * then segment, then block, in increasing order on both sides; intra pairs
 * are same-node and inter pairs cross-node, so the pieces never share a
 * pair. Steps with 0 elements are not emitted, empty phases not numbered.
 * rankNode == NULL or nnodes <= 1: one node (rings over all ranks). An
 * invalid layout (node out of range, empty node) -> collInvalidArgument.
 * Restrictions: phases must fit in 16 bits; reduce-scatter needs N blocks
 * of scratch (N x the slice per channel; ring: 2); the segment list is
 * malloc'ed per build (at most N-K+1 entries).
 */
#include <stdlib.h>

#include "algorithms.h"
#include "patterns/embed.h"
#include "patterns/emit.h"
#include "patterns/nodes.h"

typedef struct {
  size_t off, cnt; /* elements [off, off+cnt) of the vector / of a block */
  int next, prev;  /* owners of the segment on nodes j+1 and j-1 */
} hierSeg;

typedef struct {
  const collSchedArgs* a;
  collSched* s;
  collNodeLayout L;
  int N, K, j, M, l, me, nextL, prevL;
  hierSeg* seg; /* segments of this rank's piece, increasing */
  int* owners;  /* [nseg * K]: owner of segment g on node i at g*K + i */
  int nseg;
  collSchedBuildFn inter; /* all-reduce between owners; NULL: parallel rings */
  collEmitter e; /* steps go to s through it; e.err is the result */
} hierCtx;

static void hierEmit(hierCtx* h, collStepKind kind, int peer, collRegion src,
                     collRegion dst) {
  collEmit(&h->e, kind, peer, src, dst);
}

static void hierNextPhase(hierCtx* h) { collEmitNextPhase(&h->e); }

static collRegion hierReg(collBufId buf, int blk, size_t off, size_t cnt) {
  return collRegionMake(buf, (uint32_t)blk, off, cnt);
}

/* Piece x of this node's cut of [0, count), in block blk of buf. */
static collRegion hierPiece(const hierCtx* h, collBufId buf, int blk, int x) {
  size_t off, cnt;
  collSplitEven(h->a->count, h->M, x, &off, &cnt);
  return hierReg(buf, blk, off, cnt);
}

/* Sub-block i (of K) of segment g, in block blk of buf. */
static collRegion hierSub(const hierCtx* h, collBufId buf, int blk, int g,
                          int i) {
  size_t off, cnt;
  collSplitEven(h->seg[g].cnt, h->K, i, &off, &cnt);
  return hierReg(buf, blk, h->seg[g].off + off, cnt);
}

static collRegion hierSegReg(const hierCtx* h, collBufId buf, int blk, int g) {
  return hierReg(buf, blk, h->seg[g].off, h->seg[g].cnt);
}

/* Segments of this rank's piece: the common refinement of every node's
 * cut, restricted to [off, off+cnt) of piece l. */
static int hierSegments(hierCtx* h) {
  const size_t c = h->a->count;
  size_t pos, end;
  collSplitEven(c, h->M, h->l, &pos, &end);
  end += pos;
  h->seg = malloc(sizeof(hierSeg) * ((size_t)h->N + 1));
  h->owners = malloc(sizeof(int) * ((size_t)h->N + 1) * (size_t)h->K);
  if (!h->seg || !h->owners) return -1;
  h->nseg = 0;
  while (pos < end) {
    hierSeg* g = &h->seg[h->nseg++];
    size_t stop = end;
    for (int i = 0; i < h->K; i++) {
      const int m = collNodeSize(&h->L, i), x = collSplitEvenFind(c, m, pos);
      size_t o, n;
      collSplitEven(c, m, x, &o, &n);
      if (o + n < stop) stop = o + n;
      h->owners[(h->nseg - 1) * h->K + i] = collNodeRank(&h->L, i, x);
      if (i == collMod(h->j + 1, h->K)) g->next = collNodeRank(&h->L, i, x);
      if (i == collMod(h->j - 1, h->K)) g->prev = collNodeRank(&h->L, i, x);
    }
    g->off = pos;
    g->cnt = stop - pos;
    pos = stop;
  }
  return 0;
}

static void hierCopyAll(hierCtx* h) {
  const size_t c = h->a->count;
  if (!h->a->inPlace)
    hierEmit(h, COLL_STEP_COPY, -1, hierReg(COLL_BUF_SEND, 0, 0, c),
             hierReg(COLL_BUF_RECV, 0, 0, c));
}

/* Step 2 of all-reduce with another inter-node algorithm: one embedded
 * schedule per segment, over its owners (virtual rank = node index), the
 * segments one after another (in increasing offset on every rank, so
 * composed schedules match and cannot wait on each other in a cycle); each
 * reuses the same scratch blocks, since they never overlap in time. */
static void hierInterEmbedded(hierCtx* h, collBufId A) {
  for (int g = 0; g < h->nseg && h->K > 1; g++) {
    collEmbed m = {h->inter, COLL_FN_ALLREDUCE, h->K, h->j, 0, h->seg[g].cnt, A == COLL_BUF_RECV,
                   h->owners + (size_t)g * (size_t)h->K, A, COLL_BUF_RECV, h->seg[g].off, 0};
    hierNextPhase(h);
    int need = collEmbedEmit(&h->e, &m);
    if (need > h->s->scratchBlocks) h->s->scratchBlocks = need;
  }
}

static void hierAllReduce(hierCtx* h) {
  const int M = h->M, l = h->l, j = h->j;
  int K = h->K;
  const collBufId in = h->a->inPlace ? COLL_BUF_RECV : COLL_BUF_SEND;
  if (h->N == 1) {
    hierCopyAll(h);
    return;
  }
  for (int k = 0; k < M - 1; k++) { /* 1. intra reduce-scatter */
    const int sb = collMod(l - k - 1, M), rb = collMod(l - k - 2, M);
    hierEmit(h, COLL_STEP_SEND, h->nextL,
             hierPiece(h, k == 0 ? in : COLL_BUF_RECV, 0, sb), collRegionNone());
    hierEmit(h, COLL_STEP_RECV_REDUCE, h->prevL, hierPiece(h, in, 0, rb),
             hierPiece(h, COLL_BUF_RECV, 0, rb));
    hierNextPhase(h);
  }
  /* 2. inter all-reduce per segment; node sums are in A. */
  const collBufId A = M > 1 ? COLL_BUF_RECV : in;
  if (h->inter) {
    hierInterEmbedded(h, A);
    K = 1; /* the rings below are replaced */
  }
  for (int k = 0; K > 1 && k < K - 1; k++) {
    const int sb = collMod(j - k, K), rb = collMod(j - k - 1, K);
    for (int g = 0; g < h->nseg; g++)
      hierEmit(h, COLL_STEP_SEND, h->seg[g].next,
               hierSub(h, k == 0 ? A : COLL_BUF_RECV, 0, g, sb), collRegionNone());
    for (int g = 0; g < h->nseg; g++)
      hierEmit(h, COLL_STEP_RECV_REDUCE, h->seg[g].prev, hierSub(h, A, 0, g, rb),
               hierSub(h, COLL_BUF_RECV, 0, g, rb));
    hierNextPhase(h);
  }
  for (int k = 0; K > 1 && k < K - 1; k++) {
    const int sb = collMod(j + 1 - k, K), rb = collMod(j - k, K);
    for (int g = 0; g < h->nseg; g++)
      hierEmit(h, COLL_STEP_SEND, h->seg[g].next,
               hierSub(h, COLL_BUF_RECV, 0, g, sb), collRegionNone());
    for (int g = 0; g < h->nseg; g++)
      hierEmit(h, COLL_STEP_RECV, h->seg[g].prev, collRegionNone(),
               hierSub(h, COLL_BUF_RECV, 0, g, rb));
    hierNextPhase(h);
  }
  for (int k = 0; k < M - 1; k++) { /* 3. intra all-gather */
    hierEmit(h, COLL_STEP_SEND, h->nextL,
             hierPiece(h, COLL_BUF_RECV, 0, collMod(l - k, M)), collRegionNone());
    hierEmit(h, COLL_STEP_RECV, h->prevL, collRegionNone(),
             hierPiece(h, COLL_BUF_RECV, 0, collMod(l - k - 1, M)));
    hierNextPhase(h);
  }
}

/* All-gather: region of block b to send. Out of place, the own block is
 * read from SEND during phase 0 (while the COPY fills RECV blk me). */
static collRegion hierAgSrc(const hierCtx* h, int b, size_t off, size_t cnt) {
  if (b == h->me && !h->a->inPlace && h->e.phase == 0)
    return hierReg(COLL_BUF_SEND, 0, off, cnt);
  return hierReg(COLL_BUF_RECV, b, off, cnt);
}

static void hierAllGather(hierCtx* h) {
  const int M = h->M, K = h->K, l = h->l, j = h->j;
  const size_t c = h->a->count;
  if (!h->a->inPlace)
    hierEmit(h, COLL_STEP_COPY, -1, hierReg(COLL_BUF_SEND, 0, 0, c),
             hierReg(COLL_BUF_RECV, h->me, 0, c));
  for (int k = 0; k < M - 1; k++) { /* 1. intra all-gather of blocks */
    const int sb = collNodeRank(&h->L, j, collMod(l - k, M)),
              rb = collNodeRank(&h->L, j, collMod(l - k - 1, M));
    hierEmit(h, COLL_STEP_SEND, h->nextL, hierAgSrc(h, sb, 0, c), collRegionNone());
    hierEmit(h, COLL_STEP_RECV, h->prevL, collRegionNone(),
             hierReg(COLL_BUF_RECV, rb, 0, c));
    hierNextPhase(h);
  }
  for (int k = 0; K > 1 && k < K - 1; k++) { /* 2. inter, per segment */
    const int sn = collMod(j - k, K), rn = collMod(j - k - 1, K);
    for (int g = 0; g < h->nseg; g++)
      for (int i = 0; i < collNodeSize(&h->L, sn); i++)
        hierEmit(h, COLL_STEP_SEND, h->seg[g].next,
                 hierAgSrc(h, collNodeRank(&h->L, sn, i), h->seg[g].off,
                           h->seg[g].cnt),
                 collRegionNone());
    for (int g = 0; g < h->nseg; g++)
      for (int i = 0; i < collNodeSize(&h->L, rn); i++)
        hierEmit(h, COLL_STEP_RECV, h->seg[g].prev, collRegionNone(),
                 hierSegReg(h, COLL_BUF_RECV, collNodeRank(&h->L, rn, i), g));
    hierNextPhase(h);
  }
  for (int k = 0; K > 1 && k < M - 1; k++) { /* 3. intra, other nodes' */
    const int sp = collMod(l - k, M), rp = collMod(l - k - 1, M);
    for (int b = 0; b < h->N; b++)
      if (h->L.node[b] != j)
        hierEmit(h, COLL_STEP_SEND, h->nextL, hierPiece(h, COLL_BUF_RECV, b, sp),
                 collRegionNone());
    for (int b = 0; b < h->N; b++)
      if (h->L.node[b] != j)
        hierEmit(h, COLL_STEP_RECV, h->prevL, collRegionNone(),
                 hierPiece(h, COLL_BUF_RECV, b, rp));
    hierNextPhase(h);
  }
}

static void hierReduceScatter(hierCtx* h) {
  const int M = h->M, K = h->K, l = h->l, j = h->j, N = h->N;
  if (N == 1) {
    hierCopyAll(h);
    return;
  }
  h->s->scratchBlocks = N; /* W(b) = SCRATCH blk b mirrors SEND blk b */
  for (int k = 0; k < M - 1; k++) { /* 1. intra reduce-scatter of pieces */
    const int sp = collMod(l - k - 1, M), rp = collMod(l - k - 2, M);
    const int last = k == M - 2; /* rp == l */
    for (int b = 0; b < N; b++)
      hierEmit(h, COLL_STEP_SEND, h->nextL,
               hierPiece(h, k == 0 ? COLL_BUF_SEND : COLL_BUF_SCRATCH, b, sp),
               collRegionNone());
    for (int b = 0; b < N; b++) {
      collRegion dst = last && K == 1 && b == h->me
                           ? hierPiece(h, COLL_BUF_RECV, 0, rp)
                           : hierPiece(h, COLL_BUF_SCRATCH, b, rp);
      hierEmit(h, COLL_STEP_RECV_REDUCE, h->prevL,
               hierPiece(h, COLL_BUF_SEND, b, rp), dst);
    }
    hierNextPhase(h);
  }
  /* 2. inter reduce-scatter per segment; node sums P are in W when M > 1,
   * the input itself when M == 1; results accumulate in W (own: RECV). */
  const collBufId P = M > 1 ? COLL_BUF_SCRATCH : COLL_BUF_SEND;
  for (int k = 0; K > 1 && k < K - 1; k++) {
    const int sn = collMod(j - k - 1, K), rn = collMod(j - k - 2, K);
    const int last = k == K - 2; /* rn == j */
    for (int g = 0; g < h->nseg; g++)
      for (int i = 0; i < collNodeSize(&h->L, sn); i++)
        hierEmit(h, COLL_STEP_SEND, h->seg[g].next,
                 hierSegReg(h, k == 0 ? P : COLL_BUF_SCRATCH,
                            collNodeRank(&h->L, sn, i), g),
                 collRegionNone());
    for (int g = 0; g < h->nseg; g++)
      for (int i = 0; i < collNodeSize(&h->L, rn); i++) {
        const int b = collNodeRank(&h->L, rn, i);
        collRegion dst = last && b == h->me ? hierSegReg(h, COLL_BUF_RECV, 0, g)
                                            : hierSegReg(h, COLL_BUF_SCRATCH, b, g);
        hierEmit(h, COLL_STEP_RECV_REDUCE, h->seg[g].prev, hierSegReg(h, P, b, g),
                 dst);
      }
    hierNextPhase(h);
  }
  if (M > 1) { /* 3. intra all-to-all of the finished pieces */
    for (int x = 0; x < M; x++)
      if (x != l) {
        const int b = collNodeRank(&h->L, j, x);
        hierEmit(h, COLL_STEP_SEND, b, hierPiece(h, COLL_BUF_SCRATCH, b, l),
                 collRegionNone());
      }
    for (int x = 0; x < M; x++)
      if (x != l)
        hierEmit(h, COLL_STEP_RECV, collNodeRank(&h->L, j, x), collRegionNone(),
                 hierPiece(h, COLL_BUF_RECV, 0, x));
    hierNextPhase(h);
  }
}

static collResult_t hierBuild(const collSchedArgs* a, collSched* s, collSchedBuildFn inter) {
  if (!a || !s || a->nranks < 1 || a->rank < 0 || a->rank >= a->nranks)
    return collInvalidArgument;
  if (a->fn != COLL_FN_ALLREDUCE && a->fn != COLL_FN_ALLGATHER &&
      a->fn != COLL_FN_REDUCESCATTER)
    return collInvalidArgument;
  if (inter && a->fn != COLL_FN_ALLREDUCE) return collInvalidArgument;
  hierCtx h = {0};
  h.a = a;
  h.s = s;
  h.inter = inter;
  int rc = collNodeLayoutInit(&h.L, a->rankNode, a->nnodes, a->nranks);
  if (rc != 0) return rc == -1 ? collInvalidArgument : collInternalError;
  h.N = a->nranks;
  h.K = h.L.nnodes;
  h.me = a->rank;
  h.j = h.L.node[h.me];
  h.M = collNodeSize(&h.L, h.j);
  h.l = h.L.local[h.me];
  h.nextL = collNodeRank(&h.L, h.j, collMod(h.l + 1, h.M));
  h.prevL = collNodeRank(&h.L, h.j, collMod(h.l - 1, h.M));
  h.e = collEmitterMake(s);
  if (hierSegments(&h) != 0) {
    h.e.err = collInternalError;
  } else {
    switch (a->fn) {
      case COLL_FN_ALLREDUCE: hierAllReduce(&h); break;
      case COLL_FN_ALLGATHER: hierAllGather(&h); break;
      default: hierReduceScatter(&h); break;
    }
  }
  free(h.seg);
  free(h.owners);
  collNodeLayoutFree(&h.L);
  return h.e.err;
}

collResult_t collHierBuild(const collSchedArgs* a, collSched* s) { return hierBuild(a, s, NULL); }
collResult_t collHierTreeBuild(const collSchedArgs* a, collSched* s) { return hierBuild(a, s, collTreeBuild); }
collResult_t collHierRhdBuild(const collSchedArgs* a, collSched* s) { return hierBuild(a, s, collRhdBuild); }
collResult_t collHierDirectBuild(const collSchedArgs* a, collSched* s) { return hierBuild(a, s, collDirectBuild); }
