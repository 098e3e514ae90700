/*
 * common.h - shared driver of the coll benchmarks (the allreduce_perf
 * family). Flags, sizes, output and correctness checks follow nccl-tests.
 * Every *_perf.c only fills a benchColl_t and calls benchMain (driver.c; the
 * parts are listed in bench.h). Uses only
 * the public API in coll.h.
 *
 * SPDX-License-Identifier: BSD-3-Clause
 */
#ifndef COLL_BENCH_COMMON_H_
#define COLL_BENCH_COMMON_H_

#include <stddef.h>
#include "coll.h"

/* Element counts of one call, as nccl-tests' GetCollByteCount: the send and
 * receive buffer sizes, the count passed to the call, and the in-place
 * offsets (in elements, multiplied by the rank). */
typedef struct {
  size_t sendCount;
  size_t recvCount;
  size_t paramCount;
  size_t sendInplaceOffset;
  size_t recvInplaceOffset;
} benchCounts_t;

/* Where expected output element j comes from. */
typedef enum {
  BENCH_SRC_NONE, /* not checked (e.g. reduce on a non-root rank) */
  BENCH_SRC_ONE,  /* a copy of element *idx of rank *peer's input */
  BENCH_SRC_ALL   /* the reduction over all ranks of their element *idx */
} benchSrc_t;

/* Bus bandwidth factor applied to the algorithm bandwidth. */
typedef enum {
  BENCH_BUS_ALLREDUCE, /* 2(n-1)/n */
  BENCH_BUS_NM1_N,     /* (n-1)/n: allgather, reducescatter, alltoall */
  BENCH_BUS_ONE        /* 1: broadcast, reduce, sendrecv */
} benchBusFactor_t;

/* One collective under test. */
typedef struct {
  const char* name;        /* e.g. "AllReduce" (used in messages) */
  int hasOp;               /* a reduction: loops over -o, prints redop */
  int hasRoot;             /* rooted: loops over -r, prints root */
  int checkInPlace;        /* 0: in-place results are not defined (N/A) */
  benchBusFactor_t busFactor;
  /* Fills *c for `count` = size/eltSize elements and nranks ranks. */
  void (*counts)(size_t count, size_t eltSize, int nranks, benchCounts_t* c);
  /* Issues one operation on stream (NULL = blocking). */
  collResult_t (*run)(const void* sendbuff, void* recvbuff, size_t count,
                      collDataType_t type, size_t eltSize, collRedOp_t op,
                      int root, collComm_t comm, collStream_t stream);
  /* Says where output element j (j < recvCount) of `rank` comes from.
   * Input element i of every rank is a known function of (rank, i). */
  benchSrc_t (*source)(int rank, int nranks, int root, size_t count,
                       size_t j, int* peer, size_t* idx);
} benchColl_t;

/* count/nranks rounded down to a multiple of 16 bytes worth of elements,
 * the per-rank count rule of nccl-tests. */
size_t benchPerRankCount(size_t count, size_t eltSize, int nranks);

/* Parses argv, launches the ranks and runs the benchmark; returns the
 * process exit status. */
int benchMain(int argc, char** argv, const benchColl_t* coll);

#endif /* COLL_BENCH_COMMON_H_ */
