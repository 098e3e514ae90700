/*
 * sched.h - schedule types: the contract between algorithms and the engine.
 *
 * An algorithm builds, for ONE rank, a list of steps over buffer regions. The
 * engine executes it per slice: a large call is cut into slices of at most
 * chunk-size elements per block, and the schedule is rebuilt/run for each
 * slice, slices spread over channels (one connection set each) so they
 * overlap. Algorithms never see chunk sizes, sockets or memory types.
 *
 * Region addressing: element address = base(buf) + (blk * stride(buf) +
 * sliceOffset + off). The engine sets stride(buf) per collective:
 *   all-reduce, broadcast, reduce: stride 0 for both buffers (blk is 0);
 *   all-gather: recv stride = per-rank count, send stride 0;
 *   reduce-scatter: send stride = per-rank count, recv stride 0;
 *   scratch: stride = slice count (blk = scratch block index).
 * `count` handed to the builder is the slice's element count PER BLOCK
 * (all-gather/reduce-scatter: per rank; others: the whole slice).
 *
 * Execution rule: steps carry a phase; every step of phase p may run
 * concurrently once every step of phases < p completed. Steps with count 0
 * are no-ops on both sides. For a (sender, receiver, channel) pair the k-th
 * SEND of the sender matches the k-th RECV/RECV_REDUCE of the receiver, in
 * step order, so builders emit steps in an order both sides agree on.
 */
#ifndef COLL_SCHED_H_
#define COLL_SCHED_H_

#include <stddef.h>
#include <stdint.h>

#include "coll.h"

typedef enum {
  COLL_STEP_SEND = 0,        /* send src to peer */
  COLL_STEP_RECV = 1,        /* receive from peer into dst */
  COLL_STEP_RECV_REDUCE = 2, /* dst = (data from peer) op src; src may == dst */
  COLL_STEP_COPY = 3,        /* dst = src (local) */
  COLL_STEP_REDUCE = 4       /* dst = dst op src (local) */
} collStepKind;

typedef enum {
  COLL_BUF_SEND = 0,    /* user send buffer */
  COLL_BUF_RECV = 1,    /* user recv buffer */
  COLL_BUF_SCRATCH = 2, /* engine scratch, stride = slice count */
  COLL_BUF_NONE = 3
} collBufId;

typedef struct {
  uint8_t buf;   /* collBufId */
  uint32_t blk;  /* block index, see header comment */
  size_t off;    /* element offset within the block slice */
  size_t count;  /* elements */
} collRegion;

typedef struct {
  uint8_t kind;   /* collStepKind */
  uint16_t phase;
  int32_t peer;   /* rank for SEND/RECV/RECV_REDUCE, -1 otherwise */
  collRegion src; /* SEND, RECV_REDUCE (local operand), COPY, REDUCE */
  collRegion dst; /* RECV, RECV_REDUCE, COPY, REDUCE */
} collStep;

typedef enum {
  COLL_FN_ALLREDUCE = 0,
  COLL_FN_ALLGATHER = 1,
  COLL_FN_REDUCESCATTER = 2,
  COLL_FN_BROADCAST = 3,
  COLL_FN_REDUCE = 4,
  COLL_FN_SEND = 5,
  COLL_FN_RECV = 6,
  COLL_FN_COUNT = 7
} collFunc;

/* Inputs of a builder; identical on every rank except `rank`. */
typedef struct {
  collFunc fn;
  int nranks;
  int rank;
  int root;     /* broadcast/reduce; ignored otherwise */
  size_t count; /* elements per block in this slice (see header) */
  int inPlace;  /* user sendbuff aliases the rank's part of recvbuff */
  /* Node layout (identical on every rank): node index of each rank, nodes
   * numbered 0..nnodes-1 in order of their first rank. NULL = one node. */
  const int* rankNode;
  int nnodes;
} collSchedArgs;

typedef struct {
  collStep* steps;
  int nsteps;
  int cap;
  int nphases;       /* 1 + highest phase used */
  int scratchBlocks; /* scratch needed, in blocks of `count` elements */
} collSched;

/* Appends a step (grows steps); returns 0, or -1 when out of memory. */
int collSchedAdd(collSched* s, collStep step);
void collSchedReset(collSched* s); /* nsteps = 0, keeps capacity */
void collSchedFree(collSched* s);

/* Region helpers for builders. */
static inline collRegion collRegionMake(collBufId buf, uint32_t blk, size_t off,
                                        size_t count) {
  collRegion r = {(uint8_t)buf, blk, off, count};
  return r;
}
static inline collRegion collRegionNone(void) {
  collRegion r = {COLL_BUF_NONE, 0, 0, 0};
  return r;
}

/* Split `count` elements into `parts` nearly equal pieces; piece i starts at
 * *off and holds *cnt elements (the first count%parts pieces get one more). */
static inline void collSplitEven(size_t count, int parts, int i, size_t* off,
                                 size_t* cnt) {
  size_t q = count / (size_t)parts, r = count % (size_t)parts, ui = (size_t)i;
  *cnt = q + (ui < r ? 1 : 0);
  *off = q * ui + (ui < r ? ui : r);
}

/* A schedule builder: fills s (already reset) for args. Returns collSuccess
 * or collInternalError (out of memory) / collInvalidArgument. */
typedef collResult_t (*collSchedBuildFn)(const collSchedArgs* args,
                                         collSched* s);

#endif
