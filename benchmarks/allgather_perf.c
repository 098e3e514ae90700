/* allgather_perf.c - collAllGather benchmark (nccl-tests all_gather_perf).
 * SPDX-License-Identifier: BSD-3-Clause */
#include "common.h"

/* Each rank sends `base` elements and receives nranks*base; in place the
 * send buffer is recvbuff + rank*base. */
static void counts(size_t count, size_t eltSize, int nranks, benchCounts_t* c) {
  size_t base = benchPerRankCount(count, eltSize, nranks);
  *c = (benchCounts_t){base, base * (size_t)nranks, base, base, 0};
}

/* One collAllGather. */
static collResult_t run(const void* s, void* r, size_t count, collDataType_t t,
                        size_t eltSize, collRedOp_t op, int root, collComm_t comm,
                        collStream_t stream) {
  (void)eltSize; (void)op; (void)root;
  return collAllGather(s, r, count, t, comm, stream);
}

/* Output j is element j % count of rank j / count. */
static benchSrc_t source(int rank, int nranks, int root, size_t count, size_t j,
                         int* peer, size_t* idx) {
  (void)rank; (void)nranks; (void)root;
  *peer = (int)(j / count);
  *idx = j % count;
  return BENCH_SRC_ONE;
}

static const benchColl_t kColl = {"AllGather", 0, 0, 1, BENCH_BUS_NM1_N,
                                  counts, run, source};

int main(int argc, char** argv) { return benchMain(argc, argv, &kColl); }
