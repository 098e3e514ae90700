/* sched.c - growable step list used by every schedule builder. */
#include "sched.h"

#include <stdlib.h>

int collSchedAdd(collSched* s, collStep step) {
  if (s->nsteps == s->cap) {
    int ncap = s->cap ? s->cap * 2 : 16;
    collStep* n = realloc(s->steps, (size_t)ncap * sizeof(*n));
    if (!n) return -1;
    s->steps = n;
    s->cap = ncap;
  }
  s->steps[s->nsteps++] = step;
  if (step.phase + 1 > s->nphases) s->nphases = step.phase + 1;
  return 0;
}

void collSchedReset(collSched* s) {
  s->nsteps = 0;
  s->nphases = 0;
  s->scratchBlocks = 0;
}

void collSchedFree(collSched* s) {
  free(s->steps);
  s->steps = NULL;
  s->nsteps = s->cap = s->nphases = s->scratchBlocks = 0;
}
