/* alltoall_perf.c - all-to-all benchmark built from grouped collSend and
 * collRecv (nccl-tests alltoall_perf).
 * SPDX-License-Identifier: BSD-3-Clause */
#include "common.h"

/* nranks blocks of `base` elements each way; in place is not defined. */
static void counts(size_t count, size_t eltSize, int nranks, benchCounts_t* c) {
  size_t base = benchPerRankCount(count, eltSize, nranks);
  *c = (benchCounts_t){base * (size_t)nranks, base * (size_t)nranks, base, 0, 0};
}

/* One group of nranks sends and nranks receives of count elements. */
static collResult_t run(const void* s, void* r, size_t count, collDataType_t t,
                        size_t eltSize, collRedOp_t op, int root, collComm_t comm,
                        collStream_t stream) {
  (void)op; (void)root;
  int nranks;
  collResult_t res = collCommCount(comm, &nranks);
  if (res != collSuccess || count == 0) return res;
  if ((res = collGroupStart()) != collSuccess) return res;
  collResult_t first = collSuccess;
  for (int p = 0; p < nranks; p++) {
    size_t off = (size_t)p * count * eltSize;
    collResult_t a = collSend((const char*)s + off, count, t, p, comm, stream);
    collResult_t b = collRecv((char*)r + off, count, t, p, comm, stream);
    if (first == collSuccess) first = a != collSuccess ? a : b;
  }
  res = collGroupEnd();
  return first != collSuccess ? first : res;
}

/* Output block p comes from block `rank` of rank p's input. */
static benchSrc_t source(int rank, int nranks, int root, size_t count, size_t j,
                         int* peer, size_t* idx) {
  (void)nranks; (void)root;
  *peer = (int)(j / count);
  *idx = (size_t)rank * count + j % count;
  return BENCH_SRC_ONE;
}

static const benchColl_t kColl = {"AlltoAll", 0, 0, 0, BENCH_BUS_NM1_N,
                                  counts, run, source};

int main(int argc, char** argv) { return benchMain(argc, argv, &kColl); }
