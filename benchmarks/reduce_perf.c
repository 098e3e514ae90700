/* reduce_perf.c - collReduce benchmark (nccl-tests reduce_perf).
 * SPDX-License-Identifier: BSD-3-Clause */
#include "common.h"

/* count elements in and out; in-place is recvbuff == sendbuff. */
static void counts(size_t count, size_t eltSize, int nranks, benchCounts_t* c) {
  (void)eltSize; (void)nranks;
  *c = (benchCounts_t){count, count, count, 0, 0};
}

/* One collReduce to root. */
static collResult_t run(const void* s, void* r, size_t count, collDataType_t t,
                        size_t eltSize, collRedOp_t op, int root, collComm_t comm,
                        collStream_t stream) {
  (void)eltSize;
  return collReduce(s, r, count, t, op, root, comm, stream);
}

/* On root, output j is the reduction of every rank's element j; the other
 * ranks have no output. */
static benchSrc_t source(int rank, int nranks, int root, size_t count, size_t j,
                         int* peer, size_t* idx) {
  (void)nranks; (void)count; (void)peer;
  *idx = j;
  return rank == root ? BENCH_SRC_ALL : BENCH_SRC_NONE;
}

static const benchColl_t kColl = {"Reduce", 1, 1, 1, BENCH_BUS_ONE,
                                  counts, run, source};

int main(int argc, char** argv) { return benchMain(argc, argv, &kColl); }
