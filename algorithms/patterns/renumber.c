/*
 * renumber.c - per-channel renumbering of the ranks (see renumber.h): the
 * permutation, its inverse, the mapping of a built schedule back to real
 * ranks, and the build of one channel's schedule with both.
 */
#include "renumber.h"

/* shift_c mod n, without overflow for any c >= 0. */
static int collPermShift(int c, int n) {
  return (int)(((long long)(c / 2) * (long long)(n / 2)) % (long long)n);
}

int collRankPerm(int c, int n, int r) {
  if (n <= 1 || r < 0 || r >= n || c < 0) return r;
  int rev = (c & 1) ? (n - r) % n : r;
  return (rev + collPermShift(c, n)) % n;
}

int collRankPermInv(int c, int n, int v) {
  if (n <= 1 || v < 0 || v >= n || c < 0) return v;
  int rev = (v - collPermShift(c, n) + n) % n; /* rev_c(r); rev_c is an involution */
  return (c & 1) ? (n - rev) % n : rev;
}

/* blk -> perm^-1(blk) when the region is in the rank-indexed buffer. */
static void collRegionRenumber(collRegion* g, int rankBuf, int c, int n) {
  if (rankBuf >= 0 && g->buf == (uint8_t)rankBuf && g->blk < (uint32_t)n)
    g->blk = (uint32_t)collRankPermInv(c, n, (int)g->blk);
}

void collSchedRenumber(collSched* s, collFunc fn, int c, int n) {
  if (n <= 1 || c <= 0 || fn == COLL_FN_SEND || fn == COLL_FN_RECV) return;
  int rankBuf = fn == COLL_FN_ALLGATHER ? COLL_BUF_RECV : fn == COLL_FN_REDUCESCATTER ? COLL_BUF_SEND : -1;
  for (int i = 0; i < s->nsteps; i++) {
    collStep* st = &s->steps[i];
    if (st->peer >= 0) st->peer = collRankPermInv(c, n, st->peer);
    collRegionRenumber(&st->src, rankBuf, c, n);
    collRegionRenumber(&st->dst, rankBuf, c, n);
  }
}

collResult_t collSchedBuildChannel(collSchedBuildFn build, const collSchedArgs* a, int c, collSched* s) {
  if (c <= 0 || a->nranks <= 1) return build(a, s);
  collSchedArgs v = *a;
  v.rank = collRankPerm(c, a->nranks, a->rank);
  v.root = collRankPerm(c, a->nranks, a->root);
  collResult_t r = build(&v, s);
  if (r == collSuccess) collSchedRenumber(s, a->fn, c, a->nranks);
  return r;
}
