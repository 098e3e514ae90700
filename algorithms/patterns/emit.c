/* emit.c - the schedule step emitter shared by builders (see emit.h). */
#include "emit.h"

#include <stdint.h>

void collEmitAt(collEmitter* e, collStepKind kind, int phase, int peer, collRegion src, collRegion dst) {
  size_t n = kind == COLL_STEP_SEND ? src.count : dst.count;
  if (n == 0 || e->err != collSuccess) return;
  if (phase > UINT16_MAX) {
    e->err = collInvalidArgument;
    return;
  }
  collStep st;
  st.kind = (uint8_t)kind;
  st.phase = (uint16_t)phase;
  st.peer = peer;
  st.src = kind == COLL_STEP_RECV ? collRegionNone() : src;
  st.dst = kind == COLL_STEP_SEND ? collRegionNone() : dst;
  if (collSchedAdd(e->s, st) != 0) e->err = collInternalError;
}

void collEmit(collEmitter* e, collStepKind kind, int peer, collRegion src, collRegion dst) {
  size_t n = kind == COLL_STEP_SEND ? src.count : dst.count;
  if (n == 0 || e->err != collSuccess) return;
  collEmitAt(e, kind, e->phase, peer, src, dst);
  if (e->err == collSuccess) e->used = 1;
}

void collEmitNextPhase(collEmitter* e) {
  if (e->used) e->phase++;
  e->used = 0;
}
