/* tuner.h - algorithm choice per call. For now: COLL_ALGO overrides, else the
 * registry's default (the cost model comes with more algorithms). */
#ifndef COLL_TUNER_H_
#define COLL_TUNER_H_

#include "engine/sched.h"

/* Algorithm name forced for fn by COLL_ALGO ("ring", or per collective
 * "allreduce:ring;broadcast:chain"), or NULL. */
const char* collAlgoOverride(collFunc fn);

#endif
