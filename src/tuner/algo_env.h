/* algo_env.h - COLL_ALGO: which algorithms each collective may use
 * (algo_env.c). Syntax as NCCL_ALGO:
 *   entries separated by ';', each "[collective:]list";
 *   list = names separated by ',', or '^' and names to exclude;
 *   an entry without a collective applies to every collective that has at
 *   least one of the names (the others keep every algorithm);
 *   a later entry replaces an earlier one for the same collective.
 * Examples: "ring", "^ring", "allreduce:tree,rhd;broadcast:^chain". */
#ifndef COLL_TUNER_ALGO_ENV_H_
#define COLL_TUNER_ALGO_ENV_H_

#include <stdint.h>

#include "coll.h"
#include "engine/sched.h"

/* The restriction COLL_ALGO puts on fn, as a list for collAlgoSpecMask
 * ("ring", "tree,rhd", "^ring"), or NULL when fn may use every algorithm
 * (also when COLL_ALGO is invalid: init fails then, collAlgoCheckEnv).
 * Parsed once per process; thread-safe; the pointer stays valid. */
const char* collAlgoOverride(collFunc fn);

/* collSuccess when COLL_ALGO is unset or valid; else collInvalidArgument
 * with a message (collGetLastError) that names the wrong entry and lists the
 * valid collectives or algorithms. Called by every init. Thread-safe. */
collResult_t collAlgoCheckEnv(void);

/* Turns a list for fn into a mask of collAlgoTable rows (bit i = row i).
 * collInvalidArgument (message lists fn's algorithms) when a name is not an
 * algorithm of fn, the list is empty, or it excludes every algorithm. */
collResult_t collAlgoSpecMask(collFunc fn, const char* spec, uint64_t* mask);

/* 1 when the list spec (NULL: no restriction) lets a collective use the
 * algorithm called name. */
int collAlgoSpecAllows(const char* spec, const char* name);

#endif
