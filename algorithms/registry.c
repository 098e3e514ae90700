/*
 * registry.c - the table of schedule builders, searched by function and
 * (optionally, e.g. from COLL_ALGO) by name. The first row that builds a
 * function is its default. Point-to-point is run by the engine directly and
 * has no row. The last field (nodeAware) is 1 for the rows whose builder
 * reads the node layout: the engine does not renumber their ranks per
 * channel.
 */
#include <strings.h>

#include "algorithms.h"

#define COLL_FN_BIT(f) (1u << (unsigned)(f))

const collAlgo collAlgoTable[] = {
    {"ring",
     COLL_FN_BIT(COLL_FN_ALLREDUCE) | COLL_FN_BIT(COLL_FN_ALLGATHER) |
         COLL_FN_BIT(COLL_FN_REDUCESCATTER),
     collRingBuild, 0},
    {"hier",
     COLL_FN_BIT(COLL_FN_ALLREDUCE) | COLL_FN_BIT(COLL_FN_ALLGATHER) |
         COLL_FN_BIT(COLL_FN_REDUCESCATTER),
     collHierBuild, 1},
    {"chain", COLL_FN_BIT(COLL_FN_BROADCAST) | COLL_FN_BIT(COLL_FN_REDUCE),
     collChainBuild, 0},
    {"tree", COLL_FN_BIT(COLL_FN_ALLREDUCE), collTreeBuild, 0},
    {"binomial", COLL_FN_BIT(COLL_FN_BROADCAST) | COLL_FN_BIT(COLL_FN_REDUCE),
     collBinomialBuild, 0},
    {"rhd", COLL_FN_BIT(COLL_FN_ALLREDUCE) | COLL_FN_BIT(COLL_FN_REDUCESCATTER),
     collRhdBuild, 0},
    {"bruck", COLL_FN_BIT(COLL_FN_ALLGATHER), collBruckBuild, 0},
    {"hier_tree", COLL_FN_BIT(COLL_FN_ALLREDUCE), collHierTreeBuild, 1},
    {"hier_rhd", COLL_FN_BIT(COLL_FN_ALLREDUCE), collHierRhdBuild, 1},
    {"hier_direct", COLL_FN_BIT(COLL_FN_ALLREDUCE), collHierDirectBuild, 1},
    {"direct",
     COLL_FN_BIT(COLL_FN_ALLREDUCE) | COLL_FN_BIT(COLL_FN_ALLGATHER) |
         COLL_FN_BIT(COLL_FN_REDUCESCATTER),
     collDirectBuild, 0},
    /* hier_leader.c: hier_<intra reduce/broadcast>_<inter all-reduce> */
    {"hier_chain_ring", COLL_FN_BIT(COLL_FN_ALLREDUCE), collHierChainRingBuild, 1},
    {"hier_chain_tree", COLL_FN_BIT(COLL_FN_ALLREDUCE), collHierChainTreeBuild, 1},
    {"hier_chain_rhd", COLL_FN_BIT(COLL_FN_ALLREDUCE), collHierChainRhdBuild, 1},
    {"hier_chain_direct", COLL_FN_BIT(COLL_FN_ALLREDUCE), collHierChainDirectBuild, 1},
    {"hier_binomial_ring", COLL_FN_BIT(COLL_FN_ALLREDUCE), collHierBinomialRingBuild, 1},
    {"hier_binomial_tree", COLL_FN_BIT(COLL_FN_ALLREDUCE), collHierBinomialTreeBuild, 1},
    {"hier_binomial_rhd", COLL_FN_BIT(COLL_FN_ALLREDUCE), collHierBinomialRhdBuild, 1},
    {"hier_binomial_direct", COLL_FN_BIT(COLL_FN_ALLREDUCE), collHierBinomialDirectBuild, 1},
    /* src/engine/zerocopy.c: reads the peers' collMemAlloc buffers in place
     * (not a schedule); where some rank's buffers are elsewhere the call
     * falls back to this row's schedule, ring's. All-gather:
     * src/engine/cmagather.c reads the peers' blocks of any host memory by
     * process_vm_readv, the same fallback. The tuner never prices it as a
     * schedule (collTunerZeroCopy decides). */
    {"zerocopy",
     COLL_FN_BIT(COLL_FN_ALLREDUCE) | COLL_FN_BIT(COLL_FN_REDUCESCATTER) | COLL_FN_BIT(COLL_FN_ALLGATHER),
     collRingBuild, 0},
    {NULL, 0, NULL, 0},
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
