/*
 * mpi_perf.c - MPI_Allreduce / MPI_Allgather / MPI_Reduce_scatter_block in
 * the nccl-tests layout of coll's allreduce_perf, for the comparison table.
 * One source, built twice: with mpicc.openmpi and with mpicc.mpich.
 *
 *   mpirun -np N mpi_perf -C allreduce[,allgather,reducescatter]
 *          -b MIN -e MAX -f FACTOR -n ITERS -w WARMUP -c CHECK
 *   (or -l / -B size lists: see peer_common.h)
 *
 * Several -C collectives run one after the other in one launch (buffers
 * allocated and touched once), each with its own header and table.
 * Rules (same as coll's benchmarks/common.c): buffers allocated once at the
 * largest size and touched before timing; per placement: -w warm-up calls,
 * barrier, -n timed calls, time = total / n, max over ranks; then -c checked
 * calls on fresh rank-dependent inputs, wrong elements summed over ranks.
 * In-place: MPI_IN_PLACE (reduce-scatter: input and result in recvbuf, the
 * result at its start, as MPI defines it).
 *
 * SPDX-License-Identifier: BSD-3-Clause
 */
#include "peer_common.h" /* first: it sets _POSIX_C_SOURCE */

#include <malloc.h>
#include <mpi.h>

/* One collective call; inPlace selects MPI_IN_PLACE. */
static int runColl(const peerOpts_t* o, peerCounts_t c, int inPlace, float* send,
                   float* recv) {
  const void* s = inPlace ? MPI_IN_PLACE : send;
  int p = (int)c.param;
  switch (o->coll) {
    case PEER_ALLREDUCE:
      return MPI_Allreduce(s, recv, p, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    case PEER_ALLGATHER:
      return inPlace ? MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, p,
                                     MPI_FLOAT, MPI_COMM_WORLD)
                     : MPI_Allgather(send, p, MPI_FLOAT, recv, p, MPI_FLOAT,
                                     MPI_COMM_WORLD);
    default:
      return MPI_Reduce_scatter_block(s, recv, p, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
}

/* Times one placement: seconds per call, max over ranks; <0 on error. */
static double timeColl(const peerOpts_t* o, int sizeIdx, peerCounts_t c,
                       int inPlace, float* send, float* recv) {
  int warmup = o->warmup[sizeIdx], iters = o->iters[sizeIdx];
  for (int i = 0; i < warmup; i++)
    if (runColl(o, c, inPlace, send, recv)) return -1;
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = peerNow();
  for (int i = 0; i < iters; i++)
    if (runColl(o, c, inPlace, send, recv)) return -1;
  double sec = (peerNow() - t0) / iters, max;
  MPI_Allreduce(&sec, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return max;
}

/* -c checked calls; wrong elements summed over ranks (stops at the first
 * round with errors, as common.c does); -2 on an MPI error. */
static int64_t checkColl(const peerOpts_t* o, peerCounts_t c, int inPlace,
                         float* send, float* recv, int n, int r, uint64_t* seed) {
  long long total = 0;
  for (int k = 0; k < o->check && total == 0; k++) {
    ++*seed;
    size_t outBytes = (c.send > c.recv ? c.send : c.recv) * 4;
    memset(recv, 0x7F, outBytes);
    float* in = send;
    if (inPlace) in = o->coll == PEER_ALLGATHER ? recv + (size_t)r * c.param : recv;
    peerFill(o->coll, n, r, in, c.send, *seed);
    if (runColl(o, c, inPlace, send, recv)) return -2;
    long long mine = peerVerify(o->coll, n, r, recv, c, *seed);
    MPI_Allreduce(&mine, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  }
  return total;
}

int main(int argc, char** argv) {
  /* Keep freed memory in the process (no per-call mmap/munmap page faults). */
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  setvbuf(stdout, NULL, _IOLBF, 0);
  MPI_Init(&argc, &argv);
  int n, r;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  peerOpts_t o;
  if (peerParseArgs(argc, argv, &o) || n > 64) {
    MPI_Finalize();
    return 2;
  }
  float* send = peerAlloc(o.maxBytes);
  float* recv = peerAlloc(o.maxBytes + 64);
  if (!send || !recv) {
    fprintf(stderr, "mpi_perf: cannot allocate 2 x %zu bytes\n", o.maxBytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  char ver[MPI_MAX_LIBRARY_VERSION_STRING];
  int len;
  MPI_Get_library_version(ver, &len);
  ver[strcspn(ver, "\n,")] = '\0';
  uint64_t seed = 0;
  int failed = 0;
  for (int k = 0; k < o.ncolls; k++) {
    int errors = 0;
    o.coll = o.colls[k];
    if (r == 0) peerHeader(&o, n, ver);
    for (int i = 0; i < o.nsizes; i++) {
      peerCounts_t c = peerCounts(o.coll, o.size[i], n);
      if (r == 0) peerRowStart(o.coll, c);
      for (int ip = 0; ip <= 1; ip++) {
        double sec = timeColl(&o, i, c, ip, send, recv);
        int64_t wrong = o.check ? checkColl(&o, c, ip, send, recv, n, r, &seed) : -1;
        if (sec < 0 || wrong < -1) MPI_Abort(MPI_COMM_WORLD, 1);
        errors += wrong > 0;
        if (r == 0) peerRowCell(o.coll, n, c, sec, wrong);
      }
      if (r == 0) printf("\n");
    }
    if (r == 0) printf("# Out of bounds values : %d %s\n", errors, errors ? "FAILED" : "OK");
    failed |= errors;
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return failed ? 1 : 0;
}
