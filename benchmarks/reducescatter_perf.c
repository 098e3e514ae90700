/* reducescatter_perf.c - collReduceScatter benchmark (nccl-tests
 * reduce_scatter_perf).
 * SPDX-License-Identifier: BSD-3-Clause */
#include "common.h"

/* Each rank sends nranks*base elements and receives base; in place the
 * receive buffer is sendbuff + rank*base. */
static void counts(size_t count, size_t eltSize, int nranks, benchCounts_t* c) {
  size_t base = benchPerRankCount(count, eltSize, nranks);
  *c = (benchCounts_t){base * (size_t)nranks, base, base, 0, base};
}

/* One collReduceScatter. */
static collResult_t run(const void* s, void* r, size_t count, collDataType_t t,
                        size_t eltSize, collRedOp_t op, int root, collComm_t comm,
                        collStream_t stream) {
  (void)eltSize; (void)root;
  return collReduceScatter(s, r, count, t, op, comm, stream);
}

/* Output j is the reduction of every rank's element rank*count + j. */
static benchSrc_t source(int rank, int nranks, int root, size_t count, size_t j,
                         int* peer, size_t* idx) {
  (void)nranks; (void)root; (void)peer;
  *idx = (size_t)rank * count + j;
  return BENCH_SRC_ALL;
}

static const benchColl_t kColl = {"ReduceScatter", 1, 0, 1, BENCH_BUS_NM1_N,
                                  counts, run, source};

int main(int argc, char** argv) { return benchMain(argc, argv, &kColl); }
