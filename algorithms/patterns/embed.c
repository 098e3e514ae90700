/* embed.c - appending a builder's schedule to another (see embed.h). */
#include "embed.h"

static collRegion embedRegion(const collEmbed* m, collRegion r) {
  if (r.buf == COLL_BUF_SCRATCH) return collRegionMake(COLL_BUF_SCRATCH, m->scratchBase + r.blk, r.off, r.count);
  if (r.buf == COLL_BUF_SEND) return collRegionMake(m->sendBuf, 0, m->off + r.off, r.count);
  if (r.buf == COLL_BUF_RECV) return collRegionMake(m->recvBuf, 0, m->off + r.off, r.count);
  return r;
}

int collEmbedEmit(collEmitter* e, const collEmbed* m) {
  if (e->err != collSuccess || m->count == 0) return 0;
  collSched inner = {0};
  collSchedArgs a = {m->fn, m->nranks, m->rank, m->root, m->count, m->inPlace, NULL, 1};
  collResult_t r = m->build(&a, &inner);
  if (r != collSuccess) {
    e->err = r;
    collSchedFree(&inner);
    return 0;
  }
  int base = e->phase + (e->used ? 1 : 0);
  for (int i = 0; i < inner.nsteps; i++) {
    const collStep* st = &inner.steps[i];
    collEmitAt(e, (collStepKind)st->kind, base + st->phase, st->peer >= 0 ? m->members[st->peer] : -1,
               embedRegion(m, st->src), embedRegion(m, st->dst));
  }
  if (inner.nphases > 0) {
    e->phase = base + inner.nphases;
    e->used = 0;
  }
  int scratch = inner.scratchBlocks;
  collSchedFree(&inner);
  return scratch;
}
