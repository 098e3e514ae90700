/* sendrecv_perf.c - ring collSend/collRecv benchmark (nccl-tests
 * sendrecv_perf): each rank sends to rank+1 and receives from rank-1.
 * SPDX-License-Identifier: BSD-3-Clause */
#include "common.h"

/* count elements each way; in place is not defined (N/A). */
static void counts(size_t count, size_t eltSize, int nranks, benchCounts_t* c) {
  (void)eltSize; (void)nranks;
  *c = (benchCounts_t){count, count, count, 0, 0};
}

/* One grouped send to the next rank and receive from the previous one. */
static collResult_t run(const void* s, void* r, size_t count, collDataType_t t,
                        size_t eltSize, collRedOp_t op, int root, collComm_t comm,
                        collStream_t stream) {
  (void)eltSize; (void)op; (void)root;
  int rank, nranks;
  collResult_t res;
  if ((res = collCommUserRank(comm, &rank)) != collSuccess) return res;
  if ((res = collCommCount(comm, &nranks)) != collSuccess) return res;
  if ((res = collGroupStart()) != collSuccess) return res;
  collResult_t a = collSend(s, count, t, (rank + 1) % nranks, comm, stream);
  collResult_t b = collRecv(r, count, t, (rank - 1 + nranks) % nranks, comm, stream);
  res = collGroupEnd();
  return a != collSuccess ? a : b != collSuccess ? b : res;
}

/* Output j is element j of the previous rank. */
static benchSrc_t source(int rank, int nranks, int root, size_t count, size_t j,
                         int* peer, size_t* idx) {
  (void)root; (void)count;
  *peer = (rank - 1 + nranks) % nranks;
  *idx = j;
  return BENCH_SRC_ONE;
}

static const benchColl_t kColl = {"SendRecv", 0, 0, 0, BENCH_BUS_ONE,
                                  counts, run, source};

int main(int argc, char** argv) { return benchMain(argc, argv, &kColl); }
