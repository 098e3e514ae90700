/* allreduce_perf.c - collAllReduce benchmark (nccl-tests all_reduce_perf).
 * SPDX-License-Identifier: BSD-3-Clause */
#include "common.h"

/* count elements in and out; in-place is recvbuff == sendbuff. */
static void counts(size_t count, size_t eltSize, int nranks, benchCounts_t* c) {
  (void)eltSize;
  (void)nranks;
  *c = (benchCounts_t){count, count, count, 0, 0};
}

/* One collAllReduce. */
static collResult_t run(const void* s, void* r, size_t count, collDataType_t t,
                        size_t eltSize, collRedOp_t op, int root, collComm_t comm,
                        collStream_t stream) {
  (void)eltSize;
  (void)root;
  return collAllReduce(s, r, count, t, op, comm, stream);
}

/* Output j is the reduction of every rank's element j. */
static benchSrc_t source(int rank, int nranks, int root, size_t count, size_t j,
                         int* peer, size_t* idx) {
  (void)rank; (void)nranks; (void)root; (void)count; (void)peer;
  *idx = j;
  return BENCH_SRC_ALL;
}

static const benchColl_t kColl = {"AllReduce", 1, 0, 1, BENCH_BUS_ALLREDUCE,
                                  counts, run, source};

int main(int argc, char** argv) { return benchMain(argc, argv, &kColl); }
