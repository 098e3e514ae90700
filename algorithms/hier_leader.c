/*
 * hier_leader.c - leader-based hierarchical all-reduce: a reduce to one
 * leader per node, an all-reduce between the leaders, a broadcast from the
 * leader, each level any builder of the registry ("leader" family,
 * hier_<intra>_<inter>).
 *
 * Ranks are grouped by node as in hier.c (args->rankNode, patterns/nodes.h):
 * node j holds M_j ranks in increasing rank order, local ranks 0..M_j-1; K
 * nodes, N ranks. The LEADER of node j is its local rank 0, the lowest rank
 * of the node. Every level is an embedded flat builder (patterns/embed.h);
 * the intra builder is chain or binomial (both build reduce and broadcast),
 * the inter builder ring, tree, rhd or direct (all-reduce). With c the
 * slice's element count and in = SEND (RECV in place):
 *   1. intra REDUCE of the whole vector to the leader: virtual group = the
 *      node's local ranks, root 0, in -> RECV of the leader. Non-leaders
 *      only read `in` and accumulate in SCRATCH (embed's scratchBase 0: the
 *      chain's middle ranks, the binomial tree's interior ranks; 1 block of
 *      c elements); they never touch RECV here.
 *   2. inter ALL-REDUCE of the whole vector between the K leaders (virtual
 *      rank = node index), in place in RECV; its scratch (tree: 1 block,
 *      direct: K-1 blocks of c) also starts at block 0, as step 1 is over.
 *   3. intra BROADCAST from the leader, RECV -> RECV (in place on the
 *      leader); the only step that writes a non-leader's RECV.
 *   The levels follow one another in phases (each embedded schedule starts
 *   after the previous one's last phase on that rank). This is NCCL's tree
 *   algorithm generalised: NCCL's all-reduce tree is a chain inside each
 *   node and a double binary tree between nodes, a reduce up and a
 *   broadcast down (S. Jeaugey, "Massively Scale Your Deep Learning
 *   Training with NCCL 2.4", NVIDIA developer blog, 2019; "The tree is only
 *   between nodes. Within a single node, it is indeed just a chain.",
 *   NVIDIA/nccl issue #919): hier_chain_tree is that shape, without NCCL's
 *   overlap of the reduce and the broadcast inside one slice. The
 *   three-level scheme itself is MPICH's SMP-aware all-reduce
 *   (MPIR_Allreduce_intra_smp: reduce to the node's local root, all-reduce
 *   between the node roots, broadcast in the node).
 *
 *     node 0:  r1 -> r2 -> r0 (leader)      reduce: chain into the leader
 *                            |
 *     node 1:  r4 -> r5 -> r3 (leader)      inter: r0 <-> r3 (any builder)
 *              then r0 -> r1 -> r2, r3 -> r4 -> r5   broadcast: chain
 *
 * Bytes on the wire (elements, S = c):
 *   intra: every non-leader sends S once in the reduce; the broadcast
 *     sends S per child (chain: every rank but the last; binomial: the
 *     leader ceil(log2 M_j) S); (M_j-1) S in each level, 2 (M_j-1) S per
 *     node (hier.c's rings: the same total, in pieces of S/M_j).
 *   inter: only leaders cross nodes, with the inner builder's cost on K
 *     ranks: ring 2(K-1)/K S per leader (2(K-1) S in all, exactly); rhd
 *     2(p2-1)/p2 S (p2 = largest power of two <= K; + S on the odd rank of
 *     a pair when K is not one); tree up to 2 S; direct (K-1) S. hier.c
 *     spreads the inter-node volume over all M_j ranks of a node; here one
 *     rank per node carries it, in exchange for fewer, larger intra steps.
 *   Message steps on the critical path: reduce and broadcast M_j-1 each
 *   (chain) or ceil(log2 M_j) each (binomial), plus the inner all-reduce's.
 *   Phases per rank: chain at most 2 per level; binomial at most
 *   ceil(log2 M_j) per level; plus the inner all-reduce's on leaders.
 *   No sub-chunking: a slice moves whole along the chain, so chain levels
 *   pipeline only across the engine's slices and channels (tree.c cuts its
 *   halves into sub-chunks for that reason); binomial is the latency one.
 * Scratch (blocks of c): 1 on chain middle ranks and binomial interior
 *   non-leaders (the reduce's accumulator); on leaders the inner
 *   all-reduce's (ring, rhd 0; tree 1; direct K-1); both from block 0.
 *
 * Edge cases: M_j == 1: no reduce, the leader's all-reduce reads `in`
 * directly (SEND -> RECV, as hier.c) and no broadcast; K == 1 (rankNode
 * NULL or nnodes <= 1): reduce + broadcast over all ranks (as hier.c runs
 * its intra rings only); N == 1: one COPY SEND -> RECV unless in place.
 * count 0: nothing. Uneven nodes need nothing special: each node runs its
 * own intra schedule, only leaders talk across nodes. Matching: intra pairs
 * (same node) carry the reduce's messages then the broadcast's, in that
 * order on both sides; inter pairs (leader to leader) only the all-reduce.
 * An invalid layout (node out of range, empty node) -> collInvalidArgument.
 * The leader list (K ints) is malloc'ed per build.
 */
#include <stdlib.h>

#include "algorithms.h"
#include "patterns/embed.h"
#include "patterns/emit.h"
#include "patterns/nodes.h"

/* Appends one level; s->scratchBlocks = the most any level needs. */
static void leaderLevel(collEmitter* e, collSched* s, const collEmbed* m) {
  const int need = collEmbedEmit(e, m);
  if (need > s->scratchBlocks) s->scratchBlocks = need;
}

static collResult_t leaderBuild(const collSchedArgs* a, collSched* s, collSchedBuildFn intra,
                                collSchedBuildFn inter) {
  if (!a || !s || a->nranks < 1 || a->rank < 0 || a->rank >= a->nranks || a->fn != COLL_FN_ALLREDUCE)
    return collInvalidArgument;
  collNodeLayout L;
  const int rc = collNodeLayoutInit(&L, a->rankNode, a->nnodes, a->nranks);
  if (rc != 0) return rc == -1 ? collInvalidArgument : collInternalError;
  const int K = L.nnodes, j = L.node[a->rank], M = collNodeSize(&L, j), l = L.local[a->rank];
  const int* nodeRanks = L.ranks + L.start[j]; /* [M] rank of each local rank */
  const size_t c = a->count;
  const collBufId in = a->inPlace ? COLL_BUF_RECV : COLL_BUF_SEND;
  collEmitter e = collEmitterMake(s);
  collBufId nodeSum = COLL_BUF_RECV; /* where the leader holds its node's sum */
  if (M > 1 || K == 1) {             /* 1. reduce to the leader */
    const collEmbed m = {.build = intra, .fn = COLL_FN_REDUCE, .nranks = M, .rank = l, .root = 0, .count = c,
                         .inPlace = a->inPlace, .members = nodeRanks, .sendBuf = in, .recvBuf = COLL_BUF_RECV,
                         .scratchBase = 0};
    leaderLevel(&e, s, &m);
  } else {
    nodeSum = in;
  }
  if (l == 0 && K > 1) { /* 2. all-reduce between the leaders */
    int* leaders = malloc(sizeof(int) * (size_t)K);
    if (!leaders) {
      e.err = collInternalError;
    } else {
      for (int i = 0; i < K; i++) leaders[i] = collNodeRank(&L, i, 0);
      const collEmbed m = {.build = inter, .fn = COLL_FN_ALLREDUCE, .nranks = K, .rank = j, .count = c,
                           .inPlace = nodeSum == COLL_BUF_RECV, .members = leaders, .sendBuf = nodeSum,
                           .recvBuf = COLL_BUF_RECV, .scratchBase = 0};
      leaderLevel(&e, s, &m);
      free(leaders);
    }
  }
  { /* 3. broadcast from the leader, in place on it */
    const collEmbed m = {.build = intra, .fn = COLL_FN_BROADCAST, .nranks = M, .rank = l, .root = 0, .count = c,
                         .inPlace = 1, .members = nodeRanks, .sendBuf = COLL_BUF_RECV, .recvBuf = COLL_BUF_RECV};
    leaderLevel(&e, s, &m);
  }
  collNodeLayoutFree(&L);
  return e.err;
}

/* The registry's entry points: hier_<intra>_<inter>. */
#define LEADER_ROW(name, intra, inter) \
  collResult_t name(const collSchedArgs* a, collSched* s) { return leaderBuild(a, s, intra, inter); }
LEADER_ROW(collHierChainRingBuild, collChainBuild, collRingBuild)
LEADER_ROW(collHierChainTreeBuild, collChainBuild, collTreeBuild)
LEADER_ROW(collHierChainRhdBuild, collChainBuild, collRhdBuild)
LEADER_ROW(collHierChainDirectBuild, collChainBuild, collDirectBuild)
LEADER_ROW(collHierBinomialRingBuild, collBinomialBuild, collRingBuild)
LEADER_ROW(collHierBinomialTreeBuild, collBinomialBuild, collTreeBuild)
LEADER_ROW(collHierBinomialRhdBuild, collBinomialBuild, collRhdBuild)
LEADER_ROW(collHierBinomialDirectBuild, collBinomialBuild, collDirectBuild)
