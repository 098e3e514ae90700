/*
 * renumber.h - per-channel renumbering of the ranks, so that the C channels
 * of a call run different ring orders / tree roots / halving partners over
 * the same ranks (several connections and cores carry a large call).
 *
 * Channel c runs the algorithm's schedule on virtual ranks
 *   v = perm_c(r) = (rev_c(r) + shift_c) mod n,
 *   rev_c(r) = (n - r) mod n for odd c, r for even c,
 *   shift_c  = (c / 2) * (n / 2)            (integer division),
 * so channel 0 is the identity, channel 1 reverses the ring, channels 2/3
 * move roots and partners by half the ranks. The engine builds the schedule
 * with rank' = perm_c(rank), root' = perm_c(root) and then maps the built
 * steps back to real ranks with collSchedRenumber (both in
 * collSchedBuildChannel, which the unit tests run the same way).
 *
 * Only for rows whose builder ignores the node layout (collAlgo.nodeAware
 * == 0): collSchedArgs.rankNode stays indexed by real ranks.
 */
#ifndef COLL_PATTERNS_RENUMBER_H_
#define COLL_PATTERNS_RENUMBER_H_

#include "../../src/engine/sched.h"

/* perm_c(r) for channel c >= 0 over n ranks. r outside [0, n) (e.g. the
 * unused root -1) and n <= 1 give r unchanged. */
int collRankPerm(int c, int n, int r);

/* perm_c^-1(v): the real rank that runs as virtual rank v on channel c.
 * v outside [0, n) and n <= 1 give v unchanged. */
int collRankPermInv(int c, int n, int v);

/* Maps a schedule built for virtual rank perm_c(rank) of n ranks back to
 * real ranks, in place: every step's peer p >= 0 becomes perm_c^-1(p), and
 * the regions indexed by rank (blk = rank of the block's owner) get
 * blk -> perm_c^-1(blk): all-gather COLL_BUF_RECV, reduce-scatter
 * COLL_BUF_SEND (the buffers whose stride is the per-rank count, sched.h).
 * Scratch blocks and stride-0 buffers are left alone. Send/recv (fn
 * COLL_FN_SEND / COLL_FN_RECV) and channel 0 are left unchanged. */
void collSchedRenumber(collSched* s, collFunc fn, int c, int n);

/* Builds the schedule of real rank a->rank on channel c >= 0 into s (reset
 * by the caller): build() with rank and root renumbered by perm_c over
 * a->nranks, then collSchedRenumber. c = 0 is a plain build(a, s). Returns
 * build()'s result (s is only mapped on collSuccess). */
collResult_t collSchedBuildChannel(collSchedBuildFn build, const collSchedArgs* a, int c, collSched* s);

#endif
