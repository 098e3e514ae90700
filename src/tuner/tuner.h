/* tuner.h - algorithm choice per call. For now: COLL_ALGO overrides, else the
 * registry's default (the cost model comes with more algorithms). */
#ifndef COLL_TUNER_H_
#define COLL_TUNER_H_

#include "engine/sched.h"

/* Algorithm name forced for fn by COLL_ALGO ("ring", or per collective
 * "allreduce:ring;broadcast:chain"), or NULL. */
const char* collAlgoOverride(collFunc fn);

/* The algorithm for a call that COLL_ALGO does not force, from inputs that
 * are identical on every rank (function, node layout): "hier" for all-reduce,
 * all-gather and reduce-scatter when the job spans several nodes and some
 * node holds several ranks (it crosses the network with 2(K-1)/K of the data
 * per node instead of the ring's per-rank share), else NULL (the registry's
 * default, ring/chain). The cost model replaces this rule later. */
const char* collTunerDefault(collFunc fn, int nranks, int nnodes);

#endif
