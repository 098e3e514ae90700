/*
 * bench.h - internals of the benchmark driver shared by its parts:
 *   args.c    nccl-tests flags (bench options);
 *   verify.c  verifiable inputs and exact expected outputs;
 *   report.c  the nccl-tests table, JSON (-J) and CSV (--csv) output;
 *   driver.c  one rank: buffers, warm-up, timing, checks, the sweep.
 * common.h is what each *_perf.c sees; launch.h starts the ranks.
 *
 * SPDX-License-Identifier: BSD-3-Clause
 */
#ifndef COLL_BENCH_BENCH_H_
#define COLL_BENCH_BENCH_H_

#include <stdint.h>
#include <stdio.h>

#include "common.h"

#define CANARY_BYTES 64  /* guard zone after every receive region */
#define POISON_BYTE 0x7F /* never a valid expected value, NaN in half */
#define OP_COPY (-1)     /* input pattern of the non-reductions */

/* ---- types and ops (verify.c) ------------------------------------------ */
typedef struct {
  const char* name;
  collDataType_t type;
  size_t size;
  int isFloat, isSigned;
  int64_t limit; /* largest |value| (and partial sum) kept exact */
  int prodTwos;  /* most factors of two in one product */
  double eps;    /* 2^-mantissa bits: avg on non-power-of-2 ranks may be
                    off by 4*n*eps relative (1/n is inexact) */
} typeInfo_t;

typedef struct {
  const char* name;
  collRedOp_t op;
} opInfo_t;

extern const typeInfo_t kTypes[];
extern const int kNumTypes;
extern const opInfo_t kOps[];
extern const int kNumOps;

/* Index in kTypes of a -d name or alias; -1 for "all", -2 unknown. */
int benchTypeIndex(const char* name);
/* Index in kOps of a -o name; -1 for "all", -2 unknown. */
int benchOpIndex(const char* name);
/* "sum", ... or "none" for OP_COPY. */
const char* benchOpName(int op);

/* Input element i of rank r (of n) for check round `seed`; op is a
 * collRedOp_t or OP_COPY. Always a small integer, exact in every type. */
int64_t benchGenValue(const typeInfo_t* t, int op, int n, int r, size_t i, uint64_t seed);
/* The exact reduction by op over all n ranks of their element idx. */
int64_t benchReduceAll(const typeInfo_t* t, int op, int n, size_t idx, uint64_t seed);
/* Stores integer value v as element j of buf. */
void benchWriteElem(const typeInfo_t* t, void* buf, size_t j, int64_t v);
/* 1 if element j of buf equals v; looseAvg > 0 is the rank count of an avg
 * whose 1/n is inexact (see typeInfo_t.eps). */
int benchMatches(const typeInfo_t* t, const void* buf, size_t j, int64_t v, int looseAvg);

/* ---- options (args.c) --------------------------------------------------- */
enum { BENCH_DEV_HOST = 0, BENCH_DEV_CUDA = 1 };

typedef struct {
  int nthreads, ngpus, nprocs;
  size_t minBytes, maxBytes, stepBytes, stepFactor;
  int iters, warmup, agg, check, cycles, parallelInit;
  int blocking, streamNull, timeout, cputime, average;
  int typeIndex;       /* -1: all */
  int opIndex;         /* -1: all */
  int root;            /* -1: all */
  int unalign;         /* -u: elements the buffers are shifted by */
  int perIter;         /* -I: per-iteration timing columns */
  int perIterSkip;     /* -K: first iterations left out of those */
  int timestamps;      /* -S: timestamp column */
  int memReport;       /* -M: memory usage line */
  int showAlgo;        /* --show_algo: the algorithm each row ran (flight recorder) */
  int device;          /* --device: BENCH_DEV_HOST (default) or BENCH_DEV_CUDA */
  int localRegister;   /* -R 1: buffers from collMemAlloc, registered with collCommRegister */
  const char* jsonPath; /* -J */
  const char* csvPath;  /* --csv */
  int launchTimeout;   /* -np: seconds, 0 = none */
  double minBusBw;     /* COLL_TESTS_MIN_BW in GB/s; < 0: no check */
  char ignored[512];   /* flags accepted for nccl-tests' sake, and why ignored */
  const char* prog;
  int argc;
  char** argv;
} benchOpts_t;

/* Fills *o from argv. Returns 0 to run, 1 after -h, -1 on error (printed). */
int benchParseArgs(int argc, char** argv, benchOpts_t* o);

/* ---- one rank (driver.c) ------------------------------------------------ */
typedef struct benchReport benchReport_t;

typedef struct {
  const benchOpts_t* o;
  const benchColl_t* c;
  collComm_t comm;
  collStream_t stream; /* NULL: blocking calls */
  int rank, nranks;
  char* send;          /* buffers as allocated ... */
  char* recv;          /* (maxBytes + unalign + CANARY_BYTES) */
  char* sendBase;      /* ... and shifted by -u elements of the current type */
  char* recvBase;
  /* --device cuda: send/recv are GPU memory, these their host mirrors (the
   * checks fill and read them, copied to and from the GPU); host: the same
   * pointers as send/recv */
  char* hsend;
  char* hrecv;
  void* cuStream;      /* --device cuda: the CUDA stream the calls run on */
  int localRank;       /* index among the ranks on this host */
  int gpu;             /* --device cuda: the GPU ordinal used */
  char gpuName[64];    /* "NVIDIA H200" */
  char gpuBus[20];     /* "0000:1B:00.0" */
  size_t maxBytes;
  size_t bufBytes;     /* bytes allocated for both buffers */
  void* regs[2];       /* -R 1: the registrations of send and recv */
  uint64_t seed;
  int errors;          /* (size, placement) results with wrong elements */
  double bwSum;
  int bwCount;
  benchReport_t* report; /* rank 0: the open -J / --csv files */
} rankCtx_t;

/* What is being measured: one (type, op, root, size, placement). */
typedef struct {
  const typeInfo_t* t;
  int op; /* collRedOp_t, or OP_COPY for the non-reductions */
  int root;
  int inPlace;
  benchCounts_t n;
} testCase_t;

/* Statistics of the per-iteration times (-I), microseconds. */
typedef struct {
  double min, max, p99, cvPct;
} benchIterStats_t;

/* One placement's measurement. */
typedef struct {
  double timeUs, algBw, busBw;
  int64_t wrong; /* -1: not checked (N/A) */
  int hasIter;
  benchIterStats_t iter;
  char algo[32];   /* --show_algo: "ring/2ch", "mailbox", "p2p" */
} benchResult_t;

/* printf on rank 0 only. */
void benchPrintf(const rankCtx_t* ctx, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
/* Reports a failed coll call of this rank: "coll-tests: rank R: what: ...". */
void benchFailed(const rankCtx_t* ctx, const char* what, collResult_t r);

#define BCHECK(ctx, what, call)           \
  do {                                    \
    collResult_t r_ = (call);             \
    if (r_ != collSuccess) {              \
      benchFailed((ctx), (what), r_);     \
      return -1;                          \
    }                                     \
  } while (0)

/* ---- output (report.c) -------------------------------------------------- */
/* Opens -J / --csv on rank 0 and prints header lines 1-4 and the notes
 * about ignored flags. Returns -1 on a file that cannot be created. */
int reportBegin(rankCtx_t* ctx);
/* "# Using devices" lines from every rank's (pid, host); *local = ranks on
 * this host. Collective: every rank calls it. */
int reportDevices(rankCtx_t* ctx, int* local);
void reportTableHeader(const rankCtx_t* ctx);
/* One table row (and JSON object, CSV line): both placements. */
void reportRow(rankCtx_t* ctx, const testCase_t* tc, const benchResult_t res[2]);
/* Footer lines, JSON summary; closes the files. Returns a LAUNCH_* code. */
int reportEnd(rankCtx_t* ctx, double peakRssBytes);
/* Closes the files without a footer (failed run); the JSON records why. */
void reportAbort(rankCtx_t* ctx, const char* why);
/* nccl-tests' number format: v in width columns, shrinking the precision. */
void reportFloat(char* out, size_t len, double v, int width);

#endif /* COLL_BENCH_BENCH_H_ */
