/*
 * algorithms.h - the algorithm registry: one row per schedule builder.
 * Algorithms include only src/engine/sched.h (and patterns); never a
 * transport, a socket or a thread.
 */
#ifndef COLL_ALGORITHMS_H_
#define COLL_ALGORITHMS_H_

#include "../src/engine/sched.h"

typedef struct {
  const char* name;      /* "ring", "chain", "p2p"... used by COLL_ALGO */
  unsigned funcMask;     /* 1u << collFunc it can build */
  collSchedBuildFn build;
  /* 1: the builder reads collSchedArgs.rankNode (the hier* rows), so the
   * engine runs it on the real rank numbers on every channel; 0: channel c
   * runs it over the ranks renumbered by perm_c (patterns/renumber.h). */
  int nodeAware;
} collAlgo;

/* NULL-terminated by a row with name == NULL. */
extern const collAlgo collAlgoTable[];

/* First algorithm that builds fn (optionally with the given name; NULL =
 * default). NULL if none. */
const collAlgo* collAlgoFind(collFunc fn, const char* name);

/* Builders (one file each). */
collResult_t collRingBuild(const collSchedArgs* a, collSched* s);  /* ring.c */
collResult_t collChainBuild(const collSchedArgs* a, collSched* s); /* chain.c */
collResult_t collHierBuild(const collSchedArgs* a, collSched* s);  /* hier.c */
/* hier.c with another inter-node all-reduce between the segment owners */
collResult_t collHierTreeBuild(const collSchedArgs* a, collSched* s);
collResult_t collHierRhdBuild(const collSchedArgs* a, collSched* s);
collResult_t collHierDirectBuild(const collSchedArgs* a, collSched* s);
/* hier_leader.c: reduce to the node leader (chain / binomial), all-reduce
 * between the leaders (ring / tree / rhd / direct), broadcast in the node */
collResult_t collHierChainRingBuild(const collSchedArgs* a, collSched* s);
collResult_t collHierChainTreeBuild(const collSchedArgs* a, collSched* s);
collResult_t collHierChainRhdBuild(const collSchedArgs* a, collSched* s);
collResult_t collHierChainDirectBuild(const collSchedArgs* a, collSched* s);
collResult_t collHierBinomialRingBuild(const collSchedArgs* a, collSched* s);
collResult_t collHierBinomialTreeBuild(const collSchedArgs* a, collSched* s);
collResult_t collHierBinomialRhdBuild(const collSchedArgs* a, collSched* s);
collResult_t collHierBinomialDirectBuild(const collSchedArgs* a, collSched* s);
collResult_t collTreeBuild(const collSchedArgs* a, collSched* s);     /* tree.c */
collResult_t collBinomialBuild(const collSchedArgs* a, collSched* s); /* binomial.c */
collResult_t collRhdBuild(const collSchedArgs* a, collSched* s);      /* rhd.c */
collResult_t collBruckBuild(const collSchedArgs* a, collSched* s);    /* bruck.c */
collResult_t collDirectBuild(const collSchedArgs* a, collSched* s);   /* direct.c */

#endif
