/*
 * i16_device_pipe.c - issue 16: a large all-gather or reduce-scatter on
 * device buffers that is staged through pinned host memory (over tcp, or
 * with COLL_P2P_DISABLE=1) goes piece by piece, so its pinned staging stays
 * at the pipeline's two slots instead of n times the buffer.
 *
 * Each rank (a process) runs all-gather (int32) and reduce-scatter (int32
 * sum, float64 max) of COUNT = 2^18 + 3 elements per rank, out of place and
 * in place, with stream NULL and on a collStreamCreateCuda stream, with
 * COLL_CUDA_STAGE_CHUNK=65536 (the .cmake): 17 pieces per rank's block, the
 * last of 3 elements. Every result must be byte-equal to the same call on
 * host buffers and to the expected values, and every device call must have
 * been staged (collDevStagedCalls). The fake driver lets a process hold
 * FAKECUDA_PINNED_KB=1024 KiB of pinned memory (the .cmake): the pipeline
 * needs 2 slots x (n + 1) x 64 KiB (640 KiB on 4 ranks), staging a call whole
 * needs (n + 1) x 1 MiB or more, so a call staged whole fails.
 * On the fake driver each call's copies are counted (fakecudaCalls): a
 * piece's n segments (all-gather's output, reduce-scatter's input) are one
 * cuMemcpy2DAsync, its other side one cuMemcpyAsync; with
 * FAKECUDA_MISSING=cuMemcpy2DAsync (procs3_no2d) every segment is a
 * cuMemcpyAsync of its own, with the same results.
 *
 * Usage: case_i16_device_pipe [NRANKS] (2 by default). Without a usable
 * CUDA driver (COLL_CUDA_LIBRARY) it skips (77).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "core/devcall.h"
#include "helper_i16_dev.h"
#include "reduce/reduce.h"
#include "../integration/mp_harness.h"

#ifndef COLL_HAVE_CUDA
int main(void) {
  printf("SKIP: libcoll built without CUDA\n");
  return DEV_SKIP;
}
#else

#define COUNT ((size_t)(1 << 18) + 3)

/* element i of rank r's input: a small integer */
static int inputOf(int rank, size_t i) { return (int)((rank * 7 + i * 3) % 11) - 5; }

static void fill(void* buf, collDataType_t t, size_t n, int rank) {
  for (size_t i = 0; i < n; i++) {
    if (t == collInt32) ((int32_t*)buf)[i] = inputOf(rank, i);
    else ((double*)buf)[i] = inputOf(rank, i);
  }
}

/* element i of the expected result on rank of nranks (reduce-scatter: op is sum or max) */
static double expected(int isAg, collRedOp_t op, int rank, int nranks, size_t i) {
  if (isAg) return inputOf((int)(i / COUNT), i % COUNT);
  double v = inputOf(0, (size_t)rank * COUNT + i);
  for (int q = 1; q < nranks; q++) {
    double x = inputOf(q, (size_t)rank * COUNT + i);
    v = op == collSum ? v + x : v > x ? v : x;
  }
  return v;
}

/* The fake driver's count of calls of an entry point (fakecudaCalls), or
 * NULL on another driver. */
static long (*fakeCalls)(const char*);

/* The copy calls one device call should make (fake driver): pieces of
 * COLL_CUDA_STAGE_CHUNK bytes, each one copy of its one-segment side and one
 * 2-D copy of its n segments (n copies without cuMemcpy2DAsync; one copy
 * on one rank). */
static void wantCopies(size_t count, size_t es, int n, long* copies, long* copies2d) {
  size_t pe = (size_t)atol(getenv("COLL_CUDA_STAGE_CHUNK")) / es, pieces = (count + pe - 1) / pe;
  const char* miss = getenv("FAKECUDA_MISSING");
  int two = n > 1 && !(miss && strcmp(miss, "cuMemcpy2DAsync") == 0);
  *copies2d = two ? (long)pieces : 0;
  *copies = (long)pieces * (two ? 1 : 1 + n);
}

static int body(collComm_t comm, int rank, int n, void* arg) {
  (void)arg;
  if (!devSetup(0)) return 1;
  const char* lib = getenv("COLL_CUDA_LIBRARY");
  void* fk = lib && getenv("COLL_CUDA_STAGE_CHUNK") ? dlopen(lib, RTLD_NOW | RTLD_NOLOAD) : NULL;
  if (fk) *(void**)&fakeCalls = dlsym(fk, "fakecudaCalls");
  collCommSetTimeout(comm, 60);
  CUstream us = devStream();
  collStream_t cs;
  if (collStreamCreateCuda(comm, us, &cs) != collSuccess) {
    fprintf(stderr, "rank %d: collStreamCreateCuda: %s\n", rank, collGetLastError(NULL));
    return 1;
  }
  size_t big = COUNT * (size_t)n * 8; /* bytes of the n-block side, float64 */
  char *hs = malloc(big), *hr = malloc(big), *out = malloc(big), *ds = devAlloc(big), *dr = devAlloc(big);
  /* all-gather int32, reduce-scatter int32 sum, reduce-scatter float64 max */
  static const struct {
    int ag;
    collDataType_t t;
    collRedOp_t op;
  } calls[] = {{1, collInt32, collSum}, {0, collInt32, collSum}, {0, collFloat64, collMax}};
  int fails = 0, ncalls = 0;
  for (int c = 0; c < 3; c++)
    for (int ip = 0; ip < 2; ip++) {
      int ag = calls[c].ag;
      collDataType_t t = calls[c].t;
      size_t es = collTypeSize(t), blk = COUNT * es, nb = blk * (size_t)n;
      /* in place: all-gather's send is rank's block of recv, reduce-scatter's recv rank's block of send */
      size_t sOff = ip && ag ? (size_t)rank * blk : 0, rOff = ip && !ag ? (size_t)rank * blk : 0;
      char* hsend = ip ? (ag ? hr + sOff : hs) : hs;
      char* hrecv = ip && !ag ? hs + rOff : hr;
      char* dsend = ip ? (ag ? dr + sOff : ds) : ds;
      char* drecv = ip && !ag ? ds + rOff : dr;
      memset(hr, 0x5a, big), memset(hs, 0x5a, big);
      fill(hsend, t, ag ? COUNT : COUNT * (size_t)n, rank);
      devCopy(ds, hs, big), devCopy(dr, hr, big);
      collResult_t r = ag ? collAllGather(hsend, hrecv, COUNT, t, comm, NULL)
                          : collReduceScatter(hsend, hrecv, COUNT, t, calls[c].op, comm, NULL);
      if (r != collSuccess) {
        fprintf(stderr, "rank %d: host call %d: %s\n", rank, c, collGetLastError(NULL));
        return fails + 1;
      }
      collStream_t st = ip ? cs : NULL;
      long c1 = fakeCalls ? fakeCalls("cuMemcpyAsync") : 0, c2 = fakeCalls ? fakeCalls("cuMemcpy2DAsync") : 0;
      r = ag ? collAllGather(dsend, drecv, COUNT, t, comm, st)
             : collReduceScatter(dsend, drecv, COUNT, t, calls[c].op, comm, st);
      ncalls++;
      if (r == collSuccess && st && COLL_CU(cuStreamSynchronize)(us) != CUDA_SUCCESS) r = collSystemError;
      if (r == collSuccess && st) r = collStreamQuery(cs);
      if (r == collSuccess && fakeCalls) {
        long w1 = 0, w2 = 0;
        wantCopies(COUNT, es, n, &w1, &w2);
        c1 = fakeCalls("cuMemcpyAsync") - c1, c2 = fakeCalls("cuMemcpy2DAsync") - c2;
        if (c1 != w1 || c2 != w2) {
          fprintf(stderr, "rank %d: call %d %s: %ld cuMemcpyAsync and %ld cuMemcpy2DAsync, expected %ld and %ld\n",
                  rank, c, ip ? "in place" : "out of place", c1, c2, w1, w2);
          fails++;
        }
      }
      if (r != collSuccess) {
        fprintf(stderr, "rank %d: device %s type %d %s: %s\n", rank, ag ? "allgather" : "reducescatter", (int)t,
                ip ? "in place" : "out of place", collGetLastError(NULL));
        return fails + 1;
      }
      size_t len = ag ? nb : blk;
      devCopy(out, drecv, len);
      if (memcmp(out, hrecv, len) != 0) {
        size_t i = 0;
        while (out[i] == hrecv[i]) i++;
        fprintf(stderr, "rank %d: call %d %s: byte %zu differs from the host call: 0x%02x, host 0x%02x\n", rank, c,
                ip ? "in place" : "out of place", i, (unsigned char)out[i], (unsigned char)hrecv[i]);
        fails++;
        continue;
      }
      for (size_t i = 0; i < len / es; i++) {
        double want = expected(ag, calls[c].op, rank, n, i);
        double got = t == collInt32 ? ((int32_t*)out)[i] : ((double*)out)[i];
        if (got != want) {
          fprintf(stderr, "rank %d: call %d %s: element %zu is %g, expected %g\n", rank, c,
                  ip ? "in place" : "out of place", i, got, want);
          fails++;
          break;
        }
      }
    }
  if (collDevStagedCalls(comm) != (unsigned long long)ncalls) {
    fprintf(stderr, "rank %d: %llu staged device calls, expected %d\n", rank, collDevStagedCalls(comm), ncalls);
    fails++;
  }
  if (rank == 0) printf("rank 0: %d staged device calls, each equal to the host call\n", ncalls);
  collStreamDestroy(cs);
  collDevFree(ds);
  collDevFree(dr);
  COLL_CU(cuStreamDestroy)(us);
  free(hs), free(hr), free(out);
  if (fk) dlclose(fk);
  return fails;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 2;
  if (n < 1 || n > 8) return 2;
  int pr = devProbe(); /* no CUDA in the parent before the fork */
  if (pr) return pr;
  int rc = collMpRun(n, 240, body, NULL);
  printf("%s: %d ranks as processes\n", rc ? "FAIL" : "PASS", n);
  return rc;
}
#endif
