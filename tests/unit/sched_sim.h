/*
 * sched_sim.h - in-process schedule checker/simulator for unit tests.
 *
 * collSimRun builds the schedules of all nranks ranks with one builder and
 * executes them in one thread, checking the sched.h contract and the result:
 *
 *  Static checks, per rank:
 *   - the builder returns collSuccess; steps are in non-decreasing phase
 *     order and nphases covers them; kinds and peers are valid (peer in
 *     range and != self for SEND/RECV/RECV_REDUCE, -1 for COPY/REDUCE);
 *   - src.count == dst.count for RECV_REDUCE/COPY/REDUCE;
 *   - no step writes COLL_BUF_SEND; every region (count > 0) lies inside
 *     its buffer and its block: SEND/RECV sizes per collective, SCRATCH =
 *     scratchBlocks blocks of count; absent buffers (broadcast SEND on
 *     non-roots, reduce RECV on non-roots) may not be touched at all;
 *   - a step's src and dst overlap either exactly or not at all (REDUCE:
 *     not at all);
 *   - steps of one phase (which run concurrently) have no write/write or
 *     read/write overlap, computed on real memory addresses (aliasing of
 *     in-place buffers included).
 *  Execution: one FIFO queue per (src, dst); a phase starts when every step
 *  of the earlier phases completed; SENDs are posted (data snapshot) and
 *  local steps run at phase start; RECVs complete in step order per peer
 *  when a message is at the queue head, whose size must equal the posted
 *  count. Steps with count 0 are no-ops on both sides (never queued).
 *  Default is rendezvous: a SEND completes only when its receiver took it
 *  (so schedules that need transport buffering deadlock); eager = 1 lets a
 *  SEND complete at once. No progress possible -> deadlock failure;
 *  messages left over -> failure.
 *  Data model: each element is (tag, counts[nranks]): tag = index of the
 *  element in the sender's SEND buffer, counts = contributions of each
 *  rank (input of rank r = e_r). RECV/COPY copy both; reductions require
 *  equal tags and add counts. Reading never-written memory fails at once.
 *  Buffers are views on one memory array per rank, so in-place aliasing
 *  (allreduce/broadcast/reduce: SEND == RECV; allgather: SEND == RECV blk
 *  rank; reduce-scatter: RECV == SEND blk rank) is real.
 *  Final check: allreduce every rank RECV[i] = (i, all ones); allgather
 *  RECV[b*count+i] = (i, e_b); reduce-scatter rank r RECV[i] =
 *  (r*count+i, all ones); broadcast RECV[i] = (i, e_root); reduce root
 *  RECV[i] = (i, all ones); SEND memory outside RECV unchanged.
 *
 * Depends on src/engine/sched.* only (linked into every unit test).
 */
#ifndef COLL_TEST_SCHED_SIM_H_
#define COLL_TEST_SCHED_SIM_H_

#include <stddef.h>

#include "engine/sched.h"

typedef enum {
  COLL_SIM_OUT_OF_PLACE = 0,
  COLL_SIM_IN_PLACE = 1,     /* every rank in place */
  COLL_SIM_IN_PLACE_ODD = 2  /* odd ranks in place, even ranks not */
} collSimPlace;

typedef struct {
  collFunc fn;        /* ALLREDUCE, ALLGATHER, REDUCESCATTER, BROADCAST, REDUCE */
  int nranks;         /* 1..255 */
  int root;           /* broadcast/reduce */
  size_t count;       /* per-block count handed to the builder */
  collSimPlace place;
  int eager;          /* 0: rendezvous SENDs (strict), 1: eager SENDs */
  const int* rankNode; /* node of each rank (NULL = one node) */
  int nnodes;
} collSimConfig;

typedef struct {
  int ok;             /* 1: schedules valid and result exact */
  char msg[768];      /* first failure, empty when ok */
  /* statistics over ranks */
  size_t maxSentElems;   /* most elements one rank sent */
  size_t totalSentElems; /* elements sent by all ranks */
  int maxSteps;          /* most steps in one rank's schedule */
  int maxPhases;         /* highest nphases */
  int maxScratchBlocks;  /* highest scratchBlocks */
} collSimResult;

/* Runs the check; returns res->ok. cfg and res must not be NULL. */
int collSimRun(const collSimConfig* cfg, collSchedBuildFn build,
               collSimResult* res);

const char* collSimFnName(collFunc fn);

#endif
