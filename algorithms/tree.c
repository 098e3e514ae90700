/*
 * tree.c - double binary tree all-reduce.
 *
 * Sanders, Speck & Traeff, "Two-tree algorithms for full bandwidth
 * broadcast, reduction and scan", Parallel Computing 35(12), 2009, with the
 * tree shapes NCCL (2.4+) uses (ncclGetBtree / ncclGetDtree, trees.cc):
 *
 *   tree 0: an in-order binary tree over ranks 0..n-1. Index i > 0 with
 *     lowest set bit b has parent (i ^ b) | 2b, or i ^ b when that is >= n,
 *     and children i - b/2 and i + b/2 (or the nearest i + b/2^k < n);
 *     index 0 is the root, with the single child 2^floor(log2(n-1)).
 *   tree 1: tree 0 shifted by one rank (index = r-1, odd n) or mirrored
 *     (index = n-1-r, even n). Odd ranks are leaves of tree 0 and even
 *     ranks leaves of tree 1, so every rank is interior in one tree only
 *     (odd n: rank 0 is interior in both).
 *
 *        tree 0, n = 8               tree 1 (mirrored: index = 7 - r)
 *     0 -------- 4                   7 -------- 3
 *              /   \                          /   \
 *             2     6                        5     1
 *            / \   / \                      / \   / \
 *           1   3 5   7                    6   4 2   0
 *
 * The slice is split in two halves (collSplitEven); half t is reduced up
 * tree t to its root and the root's result is broadcast back down tree t,
 * both trees at once, so every link carries traffic in both directions.
 *
 * Sub-chunking: each half is cut into K sub-chunks, pipelined so that a
 * rank forwards sub-chunk j while it receives j+1. Chosen because the
 * engine's all-reduce slice is n engine chunks: as one block, a slice
 * would take R rounds (below) of up to S bytes each on the busiest rank,
 * overlapped only by the engine's few channels, against 2S in all with a
 * full pipeline. K = halfCount / TREE_SUBCHUNK_MIN_ELEMS clamped to
 * 1..R-1: sub-chunks stay large enough to stream, and the K-1 extra rounds
 * at most double the round count (n = 2: R = 2, K = 1; its two rounds
 * already keep both directions of its one link busy). Small counts get
 * K = 1, so small messages keep the tree's latency.
 *
 * Schedule: global rounds, identical on every rank. Round r of a rank is
 * its r-th phase (rounds in which a rank has nothing to do are not
 * numbered). Each step is a train: sub-chunk j runs in round start + j.
 * Every message of round r is sent and received in round r, so with
 * rendezvous sends round r completes once rounds < r have (no deadlock),
 * and within a round each tree has at most one message per (sender,
 * receiver); steps are emitted tree 0 first, so both sides agree on order.
 * For tree node x (its index), ready(x) = round from which x can send its
 * subtree's partial of sub-chunk 0 upwards: 0 for a leaf, else
 * gather(x) + (number of children), gather(x) = max ready(children).
 * With in = SEND (RECV when in place) and [j] = sub-chunk j of the half:
 *   round gather(x)+j:    RECV_REDUCE child0 [j]: RECV = recv op in;
 *                         RECV child1 [j] -> SCRATCH (2 children)
 *   round gather(x)+1+j:  REDUCE RECV[j] op= SCRATCH[j] (2 children)
 *   round gather(p)+j:    SEND [j] to the parent p (leaf: from in, else
 *                         from RECV); gather(p) >= ready(x)
 *   round down(p)+j:      RECV [j] from p into RECV (the final result)
 *   round down(x)+j:      SEND RECV[j] to every child
 *   with down(x) = ready(root) + depth(x): the root sends down as soon as
 *   it holds the total, a child forwards one round after it received.
 * The two children of a node land in different regions (RECV and SCRATCH),
 * so no phase has a write/write overlap; reductions run in a fixed order
 * ((child0 op in) op child1) and the root's result is broadcast, so every
 * rank gets bit-identical results whatever the arrival order.
 *
 * Per rank and sub-chunk: interior in a tree: 2 RECVs, 1 REDUCE, 1 SEND up,
 * 1 RECV down, 2 SENDs down; leaf: 1 SEND up, 1 RECV down. With
 * L = ceil(log2 n) (the depth of the tree), one sub-chunk takes
 * R = ready(root) + L rounds: 2L message rounds (L up, L down) and at most
 * L - 1 rounds with only a local REDUCE, so R <= 3L - 1 (n = 4: 5,
 * n = 8: 8, n = 64: 17); K sub-chunks take R + K - 1 rounds. A rank's
 * phases are the rounds it is busy in (K = 1: at most 7, any n).
 *
 * Cost for a slice of S bytes: the busiest rank (two children in its
 * interior tree) sends 2S and receives 2S: S/2 up + 2 * S/2 down in its
 * interior tree, S/2 up and S/2 down in its leaf tree (the ring: 2(n-1)/n
 * * S); 2(n-1) * S on the wire in all. Per round such a rank moves at most
 * 2S/K each way (pipeline full), so
 * T ~ (R + K - 1) * (alpha + 2S/K * beta), of which only 2L + K - 1
 * rounds pay a message latency (alpha).
 *
 * Buffers: SEND is only read; RECV and SCRATCH (1 block, same offsets as
 * RECV, only on ranks with two children) are written. In place, in == RECV
 * (RECV_REDUCE src == dst, allowed). n == 1: one COPY SEND -> RECV unless
 * in place. Steps with 0 elements are not emitted (count < 2 leaves a half
 * empty), empty rounds are not numbered.
 */
#include "algorithms.h"
#include "patterns/emit.h"

#define TREE_NTREES 2
#define TREE_SUBCHUNK_MIN_ELEMS 32768

/* ---- the binary tree over indices (tree 0; tree 1 relabels ranks) ---- */

static int btreeParent(int n, int i) {
  if (i == 0) return -1;
  const int bit = i & -i, up = (i ^ bit) | (bit << 1);
  return up < n ? up : i ^ bit;
}

/* Children of index i, smaller first; returns how many (0..2). */
static int btreeChildren(int n, int i, int child[2]) {
  if (i == 0) {
    if (n == 1) return 0;
    int top = 1;
    while (top * 2 < n) top *= 2;
    child[0] = top;
    return 1;
  }
  const int half = (i & -i) >> 1;
  if (half == 0) return 0;
  int k = 0;
  child[k++] = i - half;
  for (int h = half; h > 0; h >>= 1)
    if (i + h < n) {
      child[k++] = i + h;
      break;
    }
  return k;
}

/* ceil(log2 n): the depth of the deepest leaf. */
static int btreeLevels(int n) {
  int levels = 0;
  while ((1 << levels) < n) levels++;
  return levels;
}

static int btreeDepth(int n, int i) {
  int d = 0;
  for (; i != 0; i = btreeParent(n, i)) d++;
  return d;
}

static int btreeReady(int n, int i);

/* Round in which index i receives sub-chunk 0 from its children; -1 for a
 * leaf. Both children send in that round (the earlier one waits). */
static int btreeGather(int n, int i) {
  int child[2], g = -1;
  const int k = btreeChildren(n, i, child);
  for (int m = 0; m < k; m++) {
    const int r = btreeReady(n, child[m]);
    if (r > g) g = r;
  }
  return g;
}

static int btreeReady(int n, int i) {
  int child[2];
  const int k = btreeChildren(n, i, child);
  return k == 0 ? 0 : btreeGather(n, i) + k;
}

/* ---- tree t's labels: index <-> rank ---- */

static int treeIndex(int n, int t, int rank) {
  if (t == 0) return rank;
  return n % 2 ? (rank - 1 + n) % n : n - 1 - rank;
}

static int treeRank(int n, int t, int index) {
  if (t == 0 || index < 0) return index;
  return n % 2 ? (index + 1) % n : n - 1 - index;
}

/* ---- one rank's part in one tree ---- */

typedef struct {
  int parent, nchild, child[2]; /* ranks; parent -1 at the root */
  int gather;                   /* first round of the children's RECVs, -1: leaf */
  int upSend, downRecv;         /* first round of each train, -1: root */
  int downSend;                 /* first round, -1: leaf */
  size_t off, count;            /* the half of the slice this tree reduces */
} treeRole;

/* rootDone: ready(root), the round the root starts sending down. */
static treeRole treeRoleMake(const collSchedArgs* a, int t, int rootDone) {
  const int n = a->nranks, x = treeIndex(n, t, a->rank), p = btreeParent(n, x);
  const int depth = btreeDepth(n, x);
  treeRole role;
  role.parent = treeRank(n, t, p);
  role.nchild = btreeChildren(n, x, role.child);
  for (int m = 0; m < role.nchild; m++) role.child[m] = treeRank(n, t, role.child[m]);
  role.gather = btreeGather(n, x);
  role.upSend = p < 0 ? -1 : btreeGather(n, p);
  role.downRecv = p < 0 ? -1 : rootDone + depth - 1;
  role.downSend = role.nchild == 0 ? -1 : rootDone + depth;
  collSplitEven(a->count, TREE_NTREES, t, &role.off, &role.count);
  return role;
}

static int treeLastRound(const treeRole* role, int subchunks) {
  int last = role->gather + (role->nchild == 2 ? 1 : 0);
  if (role->downRecv > last) last = role->downRecv;
  if (role->downSend > last) last = role->downSend;
  return last + subchunks - 1;
}

/* K, for a schedule of `rounds` rounds without sub-chunks (see header). */
static int treeSubchunks(size_t count, int rounds) {
  const size_t k = (count + 1) / 2 / TREE_SUBCHUNK_MIN_ELEMS, kMax = (size_t)(rounds - 1);
  if (k <= 1) return 1;
  return (int)(k < kMax ? k : kMax);
}

/* ---- emission ---- */

typedef struct {
  collEmitter* e;
  collBufId in; /* SEND, or RECV when in place */
  int subchunks;
} treeCtx;

/* Sub-chunk index of a train starting at `start` in `round`, -1 if idle. */
static int treeTrainAt(const treeCtx* c, int start, int round) {
  return start >= 0 && round >= start && round < start + c->subchunks ? round - start : -1;
}

static collRegion treeSub(const treeCtx* c, const treeRole* role, collBufId buf, int j) {
  size_t off, cnt;
  collSplitEven(role->count, c->subchunks, j, &off, &cnt);
  return collRegionMake(buf, 0, role->off + off, cnt);
}

static void treeEmitRound(const treeCtx* c, const treeRole* role, int round) {
  collEmitter* e = c->e;
  const collRegion none = collRegionNone();
  int j = treeTrainAt(c, role->gather, round);
  if (j >= 0) {
    collEmit(e, COLL_STEP_RECV_REDUCE, role->child[0], treeSub(c, role, c->in, j),
             treeSub(c, role, COLL_BUF_RECV, j));
    if (role->nchild == 2)
      collEmit(e, COLL_STEP_RECV, role->child[1], none, treeSub(c, role, COLL_BUF_SCRATCH, j));
  }
  j = role->nchild == 2 ? treeTrainAt(c, role->gather + 1, round) : -1;
  if (j >= 0)
    collEmit(e, COLL_STEP_REDUCE, -1, treeSub(c, role, COLL_BUF_SCRATCH, j), treeSub(c, role, COLL_BUF_RECV, j));
  j = treeTrainAt(c, role->upSend, round);
  if (j >= 0)
    collEmit(e, COLL_STEP_SEND, role->parent, treeSub(c, role, role->nchild ? COLL_BUF_RECV : c->in, j), none);
  j = treeTrainAt(c, role->downRecv, round);
  if (j >= 0) collEmit(e, COLL_STEP_RECV, role->parent, none, treeSub(c, role, COLL_BUF_RECV, j));
  j = treeTrainAt(c, role->downSend, round);
  for (int m = 0; j >= 0 && m < role->nchild; m++)
    collEmit(e, COLL_STEP_SEND, role->child[m], treeSub(c, role, COLL_BUF_RECV, j), none);
}

static void treeAllReduce(const collSchedArgs* a, collSched* s, collEmitter* e) {
  const int n = a->nranks;
  if (n == 1) {
    if (!a->inPlace)
      collEmit(e, COLL_STEP_COPY, -1, collRegionMake(COLL_BUF_SEND, 0, 0, a->count),
               collRegionMake(COLL_BUF_RECV, 0, 0, a->count));
    return;
  }
  const int rootDone = btreeReady(n, 0), rounds = rootDone + btreeLevels(n);
  const treeCtx c = {e, a->inPlace ? COLL_BUF_RECV : COLL_BUF_SEND, treeSubchunks(a->count, rounds)};
  treeRole roles[TREE_NTREES];
  int last = 0;
  for (int t = 0; t < TREE_NTREES; t++) {
    roles[t] = treeRoleMake(a, t, rootDone);
    if (roles[t].nchild == 2) s->scratchBlocks = 1;
    const int l = treeLastRound(&roles[t], c.subchunks);
    if (l > last) last = l;
  }
  for (int round = 0; round <= last; round++) {
    for (int t = 0; t < TREE_NTREES; t++) treeEmitRound(&c, &roles[t], round);
    collEmitNextPhase(e);
  }
}

collResult_t collTreeBuild(const collSchedArgs* a, collSched* s) {
  if (!a || !s || a->nranks < 1 || a->rank < 0 || a->rank >= a->nranks || a->fn != COLL_FN_ALLREDUCE)
    return collInvalidArgument;
  collEmitter e = collEmitterMake(s);
  treeAllReduce(a, s, &e);
  return e.err;
}
