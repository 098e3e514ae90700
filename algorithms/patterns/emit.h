/*
 * emit.h - appending steps to a schedule, shared by every builder.
 *
 * Steps with 0 elements are not emitted (both sides skip them), phases must
 * fit in the step's 16 bits, and the first error (out of memory, too many
 * phases) sticks: builders emit freely and return e.err at the end.
 */
#ifndef COLL_PATTERNS_EMIT_H_
#define COLL_PATTERNS_EMIT_H_

#include "../../src/engine/sched.h"

typedef struct {
  collSched* s;
  int phase;         /* phase of the next step (collEmit) */
  int used;          /* the current phase holds a step */
  collResult_t err;  /* first error, collSuccess otherwise */
} collEmitter;

static inline collEmitter collEmitterMake(collSched* s) {
  collEmitter e = {s, 0, 0, collSuccess};
  return e;
}

/* Appends a step at an explicit phase. src is ignored for RECV, dst for SEND. */
void collEmitAt(collEmitter* e, collStepKind kind, int phase, int peer, collRegion src, collRegion dst);
/* Appends a step to the current phase. */
void collEmit(collEmitter* e, collStepKind kind, int peer, collRegion src, collRegion dst);
/* Closes the current phase; the next step starts a new one (empty phases
 * are not numbered, so small counts give short schedules). */
void collEmitNextPhase(collEmitter* e);

#endif
