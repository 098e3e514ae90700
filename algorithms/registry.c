/*
 * registry.c - the table of schedule builders, searched by function and
 * (optionally, e.g. from COLL_ALGO) by name. The first row that builds a
 * function is its default. Point-to-point is run by the engine directly and
 * has no row.
 */
#include <strings.h>

#include "algorithms.h"

#define COLL_FN_BIT(f) (1u << (unsigned)(f))

const collAlgo collAlgoTable[] = {
    {"ring",
     COLL_FN_BIT(COLL_FN_ALLREDUCE) | COLL_FN_BIT(COLL_FN_ALLGATHER) |
         COLL_FN_BIT(COLL_FN_REDUCESCATTER),
     collRingBuild},
    {"hier",
     COLL_FN_BIT(COLL_FN_ALLREDUCE) | COLL_FN_BIT(COLL_FN_ALLGATHER) |
         COLL_FN_BIT(COLL_FN_REDUCESCATTER),
     collHierBuild},
    {"chain", COLL_FN_BIT(COLL_FN_BROADCAST) | COLL_FN_BIT(COLL_FN_REDUCE),
     collChainBuild},
    {"tree", COLL_FN_BIT(COLL_FN_ALLREDUCE), collTreeBuild},
    {"binomial", COLL_FN_BIT(COLL_FN_BROADCAST) | COLL_FN_BIT(COLL_FN_REDUCE),
     collBinomialBuild},
    {"rhd", COLL_FN_BIT(COLL_FN_ALLREDUCE) | COLL_FN_BIT(COLL_FN_REDUCESCATTER),
     collRhdBuild},
    {"bruck", COLL_FN_BIT(COLL_FN_ALLGATHER), collBruckBuild},
    {"hier_tree", COLL_FN_BIT(COLL_FN_ALLREDUCE), collHierTreeBuild},
    {"hier_rhd", COLL_FN_BIT(COLL_FN_ALLREDUCE), collHierRhdBuild},
    {"hier_direct", COLL_FN_BIT(COLL_FN_ALLREDUCE), collHierDirectBuild},
    {"direct",
     COLL_FN_BIT(COLL_FN_ALLREDUCE) | COLL_FN_BIT(COLL_FN_ALLGATHER) |
         COLL_FN_BIT(COLL_FN_REDUCESCATTER),
     collDirectBuild},
    {NULL, 0, NULL},
};

/* name: NULL or "" = the default; otherwise matched case-insensitively
 * ("Ring" == "ring", like NCCL_ALGO). A known name that cannot build fn, an
 * unknown name or an invalid fn give NULL. */
const collAlgo* collAlgoFind(collFunc fn, const char* name) {
  if ((unsigned)fn >= (unsigned)COLL_FN_COUNT) return NULL;
  for (const collAlgo* a = collAlgoTable; a->name != NULL; a++) {
    if (!(a->funcMask & COLL_FN_BIT(fn))) continue;
    if (name == NULL || name[0] == '\0' || strcasecmp(name, a->name) == 0)
      return a;
  }
  return NULL;
}
