/* broadcast_perf.c - collBroadcast benchmark (nccl-tests broadcast_perf).
 * SPDX-License-Identifier: BSD-3-Clause */
#include "common.h"

/* count elements in and out; in-place is recvbuff == sendbuff. */
static void counts(size_t count, size_t eltSize, int nranks, benchCounts_t* c) {
  (void)eltSize; (void)nranks;
  *c = (benchCounts_t){count, count, count, 0, 0};
}

/* One collBroadcast from root. */
static collResult_t run(const void* s, void* r, size_t count, collDataType_t t,
                        size_t eltSize, collRedOp_t op, int root, collComm_t comm,
                        collStream_t stream) {
  (void)eltSize; (void)op;
  return collBroadcast(s, r, count, t, root, comm, stream);
}

/* Output j is root's element j on every rank. */
static benchSrc_t source(int rank, int nranks, int root, size_t count, size_t j,
                         int* peer, size_t* idx) {
  (void)rank; (void)nranks; (void)count;
  *peer = root;
  *idx = j;
  return BENCH_SRC_ONE;
}

static const benchColl_t kColl = {"Broadcast", 0, 1, 1, BENCH_BUS_ONE,
                                  counts, run, source};

int main(int argc, char** argv) { return benchMain(argc, argv, &kColl); }
