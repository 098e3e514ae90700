/*
 * embed.h - running one builder's schedule inside another (composition).
 *
 * A composite algorithm (hier.c: any inter-node all-reduce between the
 * owners of a segment; hier_leader.c: a reduce and a broadcast inside each
 * node, an all-reduce between the node leaders) builds the inner schedule
 * for a virtual group of `nranks` ranks (rooted collectives: rooted at
 * virtual rank `root`) and a virtual vector of `count` elements, then
 * appends its steps to the outer schedule with:
 *   peer v            -> members[v]
 *   SEND / RECV       -> bufMap[SEND / RECV] at element offset `off`
 *                        (block 0; in place maps both to the same buffer)
 *   SCRATCH blk b     -> SCRATCH blk scratchBase + b (same offset: the outer
 *                        scratch stride, the slice count, is >= count)
 *   phase p           -> the emitter's next free phase + p.
 * The inner schedule's per-pair message order is kept, and its phases come
 * after everything emitted so far, so composing valid schedules in the same
 * order on every rank keeps the outer schedule valid.
 */
#ifndef COLL_PATTERNS_EMBED_H_
#define COLL_PATTERNS_EMBED_H_

#include "emit.h"

typedef struct {
  collSchedBuildFn build;
  collFunc fn;
  int nranks, rank;      /* virtual group */
  int root;              /* virtual rank of the root (reduce, broadcast); 0 otherwise */
  size_t count;          /* virtual count per block */
  int inPlace;
  const int* members;    /* [nranks] real rank of each virtual rank */
  collBufId sendBuf, recvBuf;
  size_t off;            /* element offset of the virtual vector */
  uint32_t scratchBase;
} collEmbed;

/* Appends the inner schedule; the emitter's phase moves past it. Returns
 * the scratch blocks the inner schedule needs beyond scratchBase (0 or
 * more); on failure sets e->err and returns 0. */
int collEmbedEmit(collEmitter* e, const collEmbed* m);

#endif
