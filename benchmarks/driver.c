/*
 * driver.c - one benchmark rank: buffers, warm-up, the timed loop, the
 * correctness checks and the sweep over types, ops, roots and sizes, as
 * nccl-tests runs them. Between-rank exchanges (timings, #wrong) use coll
 * itself.
 *
 * Timing of one (size, placement): -w warm-up operations and a barrier
 * (lazy connections and schedule building happen there, never in the timed
 * loop), then -n iterations of -m operations each (grouped when -m > 1),
 * timed from the first issue to the completion of the last; the time per
 * operation is collated across ranks per -a. With -I each iteration is
 * completed before the next one starts and timed alone.
 *
 * --device cuda (devmem.h): the buffers are GPU memory and every call runs
 * on one CUDA stream wrapped by collStreamCreateCuda (-y 1: the legacy
 * default stream); "completion" is then, as in nccl-tests, the host waiting
 * for that stream (after collStreamSynchronize, which returns the call's
 * error, if any, in bounded time). The checks write the inputs into host
 * mirrors, copy them to the GPU, and copy the receive buffer (with its guard
 * zone) back before comparing.
 *
 * SPDX-License-Identifier: BSD-3-Clause
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "devmem.h"
#include "launch.h"

/* libcoll's since issue 16 (CUDA builds; a host-only build refuses it):
 * weak, so that these programs link and run host sweeps against any libcoll,
 * and --device cuda says so when the library lacks it. */
extern collResult_t collStreamCreateCuda(collComm_t comm, void* cudaStream, collStream_t* stream)
    __attribute__((weak));

void benchPrintf(const rankCtx_t* ctx, const char* fmt, ...) {
  if (ctx->rank != 0) return;
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
}

void benchFailed(const rankCtx_t* ctx, const char* what, collResult_t r) {
  fprintf(stderr, "coll-tests: rank %d: %s failed: %s: %s\n", ctx->rank, what, collGetErrorString(r),
          collGetLastError(ctx->comm));
}

/* Seconds on the monotonic clock. */
static double nowSec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Send and receive pointers of tc, in-place per NCCL's rules. */
static void bufPtrs(const rankCtx_t* ctx, const testCase_t* tc, char** send, char** recv) {
  size_t e = tc->t->size, r = (size_t)ctx->rank;
  *send = tc->inPlace ? ctx->recvBase + tc->n.sendInplaceOffset * r * e : ctx->sendBase;
  *recv = tc->inPlace ? ctx->recvBase + tc->n.recvInplaceOffset * r * e : ctx->recvBase;
}

/* Issues one operation of tc. */
static int startColl(rankCtx_t* ctx, const testCase_t* tc) {
  char *s, *r;
  bufPtrs(ctx, tc, &s, &r);
  collRedOp_t op = tc->op == OP_COPY ? collSum : (collRedOp_t)tc->op;
  BCHECK(ctx, ctx->c->name,
         ctx->c->run(s, r, tc->n.paramCount, tc->t->type, tc->t->size, op, tc->root, ctx->comm, ctx->stream));
  return 0;
}

/* Waits for every issued operation. */
static int complete(rankCtx_t* ctx) {
  if (ctx->stream) BCHECK(ctx, "collStreamSynchronize", collStreamSynchronize(ctx->stream));
  if (ctx->o->device == BENCH_DEV_CUDA && benchDevStreamSync(ctx->cuStream)) {
    fprintf(stderr, "coll-tests: rank %d: %s\n", ctx->rank, benchDevError());
    return -1;
  }
  return 0;
}

/* A barrier between timed iterations (-z 1). */
static int barrier(rankCtx_t* ctx) {
  BCHECK(ctx, "collBarrier", collBarrier(ctx->comm, NULL));
  return 0;
}

/* Combines a per-rank time across ranks per -a (0 rank0, 1 avg, 2 min, 3 max). */
static int collate(rankCtx_t* ctx, double* sec) {
  static const collRedOp_t ops[] = {collSum, collSum, collMin, collMax};
  if (ctx->o->average == 0) {
    BCHECK(ctx, "collating the time (collBroadcast)", collBroadcast(sec, sec, 1, collFloat64, 0, ctx->comm, NULL));
    return 0;
  }
  BCHECK(ctx, "collating the time (collAllReduce)",
         collAllReduce(sec, sec, 1, collFloat64, ops[ctx->o->average], ctx->comm, NULL));
  if (ctx->o->average == 1) *sec /= ctx->nranks;
  return 0;
}

static int cmpDouble(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* -I: min, max, p99 and coefficient of variation of the iteration times
 * (seconds, the max over ranks of each iteration), skipping the first -K. */
static int iterStats(rankCtx_t* ctx, double* t, benchIterStats_t* s) {
  int n = ctx->o->iters;
  BCHECK(ctx, "collating iteration times (collAllReduce)",
         collAllReduce(t, t, (size_t)n, collFloat64, collMax, ctx->comm, NULL));
  double* v = t + ctx->o->perIterSkip;
  int m = n - ctx->o->perIterSkip;
  qsort(v, (size_t)m, sizeof *v, cmpDouble);
  double sum = 0, var = 0;
  for (int i = 0; i < m; i++) sum += v[i];
  double avg = sum / m;
  for (int i = 0; i < m; i++) var += (v[i] - avg) * (v[i] - avg);
  int p99 = (m * 99 + 99) / 100 - 1;
  *s = (benchIterStats_t){v[0] * 1e6, v[m - 1] * 1e6, v[p99 < m ? p99 : m - 1] * 1e6,
                          avg > 0 ? sqrt(var / m) / avg * 100 : 0};
  return 0;
}

/* Runs the timed loop of tc; fills res's time (after -a) and -I stats. */
static int timeColl(rankCtx_t* ctx, const testCase_t* tc, benchResult_t* res) {
  const benchOpts_t* o = ctx->o;
  for (int i = 0; i < o->warmup; i++)
    if (startColl(ctx, tc)) return -1;
  if (complete(ctx)) return -1;
  BCHECK(ctx, "collBarrier", collBarrier(ctx->comm, NULL));
  double* iterT = o->perIter ? calloc((size_t)o->iters, sizeof(double)) : NULL;
  if (o->perIter && !iterT) return -1;
  double t0 = nowSec();
  int rc = 0;
  for (int it = 0; it < o->iters && rc == 0; it++) {
    double ti = nowSec();
    if (o->agg > 1) collGroupStart();
    for (int a = 0; a < o->agg && rc == 0; a++) {
      rc = startColl(ctx, tc);
      if (rc == 0 && o->blocking && o->agg == 1 && o->device == BENCH_DEV_CUDA) rc = complete(ctx);
      if (rc == 0 && o->blocking == 1 && o->agg == 1) rc = barrier(ctx);
    }
    if (o->agg > 1) {
      collResult_t r = collGroupEnd();
      if (r != collSuccess) {
        benchFailed(ctx, "collGroupEnd", r);
        rc = -1;
      }
      if (rc == 0 && o->blocking && o->device == BENCH_DEV_CUDA) rc = complete(ctx);
      if (rc == 0 && o->blocking == 1) rc = barrier(ctx);
    }
    if (rc == 0 && iterT) {
      rc = complete(ctx);
      iterT[it] = nowSec() - ti;
    }
  }
  double tIssued = nowSec();
  if (rc == 0) rc = complete(ctx);
  double t1 = nowSec();
  double sec = ((o->cputime ? tIssued : t1) - t0) / ((double)o->iters * o->agg);
  if (rc == 0) rc = collate(ctx, &sec);
  if (rc == 0 && iterT) {
    rc = iterStats(ctx, iterT, &res->iter);
    res->hasIter = 1;
  }
  free(iterT);
  res->timeUs = sec * 1e6;
  return rc;
}

/* One check round: verifiable inputs, one op, count wrong elements and
 * changed guard bytes on this rank. Returns -1 on a coll failure. */
static int checkOnce(rankCtx_t* ctx, const testCase_t* tc, int64_t* wrong) {
  const typeInfo_t* t = tc->t;
  size_t e = t->size, r = (size_t)ctx->rank;
  size_t sendBytes = tc->n.sendCount * e, recvBytes = tc->n.recvCount * e;
  size_t end = recvBytes;
  if (tc->inPlace) {
    size_t se = tc->n.sendInplaceOffset * r * e + sendBytes;
    size_t re = tc->n.recvInplaceOffset * r * e + recvBytes;
    end = se > re ? se : re;
  }
  char *sendp, *recvp;
  bufPtrs(ctx, tc, &sendp, &recvp);
  /* the same places in the host mirrors */
  char* hRecvBase = ctx->hrecv + (ctx->recvBase - ctx->recv);
  char* hSendBase = ctx->hsend + (ctx->sendBase - ctx->send);
  int inRecv = sendp >= ctx->recvBase && sendp < ctx->recvBase + end;
  char* hsendp = inRecv ? hRecvBase + (sendp - ctx->recvBase) : hSendBase + (sendp - ctx->sendBase);
  char* hrecvp = hRecvBase + (recvp - ctx->recvBase);
  uint64_t seed = ++ctx->seed;
  memset(hRecvBase, POISON_BYTE, end);
  for (size_t i = 0; i < tc->n.sendCount; i++)
    benchWriteElem(t, hsendp, i, benchGenValue(t, tc->op, ctx->nranks, ctx->rank, i, seed));
  for (int k = 0; k < CANARY_BYTES; k++) hRecvBase[end + k] = (char)(0xC3 ^ (k * 29));
  if (ctx->o->device == BENCH_DEV_CUDA &&
      ((!inRecv && benchDevToDevice(sendp, hsendp, sendBytes)) || benchDevToDevice(ctx->recvBase, hRecvBase, end + CANARY_BYTES))) {
    fprintf(stderr, "coll-tests: rank %d: writing the inputs to the GPU: %s\n", ctx->rank, benchDevError());
    return -1;
  }
  if (startColl(ctx, tc) || complete(ctx)) return -1;
  if (ctx->o->device == BENCH_DEV_CUDA && benchDevToHost(hRecvBase, ctx->recvBase, end + CANARY_BYTES)) {
    fprintf(stderr, "coll-tests: rank %d: reading the results from the GPU: %s\n", ctx->rank, benchDevError());
    return -1;
  }

  int looseAvg = tc->op == collAvg && (ctx->nranks & (ctx->nranks - 1)) != 0 ? ctx->nranks : 0;
  int64_t bad = 0;
  for (size_t j = 0; j < tc->n.recvCount; j++) {
    int peer;
    size_t idx;
    int64_t want;
    switch (ctx->c->source(ctx->rank, ctx->nranks, tc->root, tc->n.paramCount, j, &peer, &idx)) {
      case BENCH_SRC_ONE: want = benchGenValue(t, tc->op, ctx->nranks, peer, idx, seed); break;
      case BENCH_SRC_ALL: want = benchReduceAll(t, tc->op, ctx->nranks, idx, seed); break;
      default: continue;
    }
    if (!benchMatches(t, hrecvp, j, want, looseAvg)) bad++;
  }
  for (int k = 0; k < CANARY_BYTES; k++)
    if (hRecvBase[end + k] != (char)(0xC3 ^ (k * 29))) bad++;
  *wrong = bad;
  return 0;
}

/* Checks tc `-c` times; *wrong = mismatches summed over all ranks. */
static int checkColl(rankCtx_t* ctx, const testCase_t* tc, int64_t* wrong) {
  *wrong = 0;
  for (int c = 0; c < ctx->o->check && *wrong == 0; c++) {
    int64_t mine = 0;
    if (checkOnce(ctx, tc, &mine)) return -1;
    if (mine)
      fprintf(stderr, "coll-tests: rank %d: %s %s %s count %zu%s: %lld wrong elements\n", ctx->rank, ctx->c->name,
              tc->t->name, benchOpName(tc->op), tc->n.paramCount, tc->inPlace ? " in-place" : "", (long long)mine);
    *wrong = mine;
    BCHECK(ctx, "summing #wrong (collAllReduce)", collAllReduce(wrong, wrong, 1, collInt64, collSum, ctx->comm, NULL));
  }
  return 0;
}

/* --show_algo: the algorithm of the newest operation of this row in the
 * flight recorder (collCommGetCallRecords): same collective, count and type;
 * send/recv rows: the newest send. */
static void rowAlgo(rankCtx_t* ctx, const testCase_t* tc, char* out, size_t len) {
  static const char* names[][2] = {{"AllReduce", "all-reduce"}, {"AllGather", "all-gather"},
                                   {"ReduceScatter", "reduce-scatter"}, {"Broadcast", "broadcast"},
                                   {"Reduce", "reduce"}, {"SendRecv", "send"}, {"AlltoAll", "send"}};
  const char* want = "?";
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(ctx->c->name, names[i][0]) == 0) want = names[i][1];
  collCallRecord_t rec[32];
  int n = 0;
  snprintf(out, len, "-");
  if (collCommGetCallRecords(ctx->comm, rec, 32, &n) != collSuccess) return;
  int p2p = strcmp(want, "send") == 0;
  for (int i = n - 1; i >= 0; i--) {
    if (strcmp(rec[i].coll, want) != 0) continue;
    if (!p2p && (rec[i].count != tc->n.paramCount || rec[i].datatype != tc->t->type)) continue;
    if (p2p || strcmp(rec[i].algo, "mailbox") == 0 || strcmp(rec[i].algo, "none") == 0)
      snprintf(out, len, "%s", rec[i].algo);
    else
      snprintf(out, len, "%s/%dch", rec[i].algo, rec[i].nchannels);
    return;
  }
}

/* Times and checks one placement of one size. */
static int benchTime(rankCtx_t* ctx, const testCase_t* tc, benchResult_t* res) {
  *res = (benchResult_t){.wrong = -1};
  if (timeColl(ctx, tc, res)) return -1;
  if (ctx->o->showAlgo) rowAlgo(ctx, tc, res->algo, sizeof res->algo);
  size_t bytes = (tc->n.sendCount > tc->n.recvCount ? tc->n.sendCount : tc->n.recvCount) * tc->t->size;
  double n = ctx->nranks;
  double factor = ctx->c->busFactor == BENCH_BUS_ALLREDUCE ? 2 * (n - 1) / n
                  : ctx->c->busFactor == BENCH_BUS_NM1_N   ? (n - 1) / n
                                                           : 1;
  res->algBw = res->timeUs > 0 ? (double)bytes / 1e3 / res->timeUs : 0;
  res->busBw = res->algBw * factor;
  if (ctx->o->check > 0 && (!tc->inPlace || ctx->c->checkInPlace)) {
    if (checkColl(ctx, tc, &res->wrong)) return -1;
    if (res->wrong) ctx->errors++;
  }
  ctx->bwSum += res->busBw;
  ctx->bwCount++;
  return 0;
}

/* The size after `size` in the -b/-e/-f/-i sweep (0 when it would wrap). */
static size_t nextSize(const benchOpts_t* o, size_t size) {
  size_t next = o->stepFactor > 1 ? (size ? size * o->stepFactor : 1) : size + o->stepBytes;
  return next > size ? next : 0;
}

/* Sweeps the sizes for one (type, op, root): one table row per size. */
static int timeTest(rankCtx_t* ctx, const typeInfo_t* t, int op, int root) {
  size_t shift = (size_t)ctx->o->unalign * t->size;
  ctx->sendBase = ctx->send + shift;
  ctx->recvBase = ctx->recv + shift;
  for (size_t size = ctx->o->minBytes; size <= ctx->maxBytes;) {
    testCase_t tc = {.t = t, .op = op, .root = root};
    ctx->c->counts(size / t->size, t->size, ctx->nranks, &tc.n);
    benchResult_t res[2];
    for (tc.inPlace = 0; tc.inPlace <= 1; tc.inPlace++)
      if (benchTime(ctx, &tc, &res[tc.inPlace])) return -1;
    reportRow(ctx, &tc, res);
    size = nextSize(ctx->o, size);
    if (size == 0) break;
  }
  return 0;
}

/* Lowers maxBytes (same on all ranks) so the local ranks' buffers fit. */
static int fitMemory(rankCtx_t* ctx, int localRanks) {
  uint64_t phys = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGE_SIZE);
  uint64_t reserve = 1ull << 30;
  uint64_t extra = 4096 + CANARY_BYTES + (uint64_t)ctx->o->unalign * 8;
  uint64_t allowed = phys > reserve ? (phys - reserve) / (uint64_t)localRanks / 2 : 0;
  allowed = allowed > extra ? allowed - extra : 0;
  BCHECK(ctx, "agreeing on the memory limit (collAllReduce)",
         collAllReduce(&allowed, &allowed, 1, collUint64, collMin, ctx->comm, NULL));
  if (ctx->maxBytes > allowed) {
    ctx->maxBytes = (size_t)allowed;
    benchPrintf(ctx, "#\n# Reducing maxBytes to %zu due to memory limitation\n", ctx->maxBytes);
  }
  return 0;
}

/* Allocates and touches the buffers (first-touch faults stay out of the
 * timings): maxBytes, plus -u elements of the largest type, plus the guard. */
static int allocBuffers(rankCtx_t* ctx) {
  size_t bytes = ((ctx->maxBytes + (size_t)ctx->o->unalign * 8) + 4095) & ~(size_t)4095;
  if (!bytes) bytes = 4096;
  void *s = NULL, *r = NULL;
  if (ctx->o->localRegister) { /* -R 1: shared memory the node's peers read in place */
    BCHECK(ctx, "collMemAlloc", collMemAlloc(&s, bytes));
    ctx->send = ctx->hsend = s; /* freed by the caller on every path */
    BCHECK(ctx, "collMemAlloc", collMemAlloc(&r, bytes + CANARY_BYTES));
    ctx->recv = ctx->hrecv = r;
    BCHECK(ctx, "collCommRegister", collCommRegister(ctx->comm, s, bytes, &ctx->regs[0]));
    BCHECK(ctx, "collCommRegister", collCommRegister(ctx->comm, r, bytes + CANARY_BYTES, &ctx->regs[1]));
  } else if (posix_memalign(&s, 4096, bytes) || posix_memalign(&r, 4096, bytes + CANARY_BYTES)) {
    fprintf(stderr, "coll-tests: rank %d: cannot allocate 2 x %zu bytes\n", ctx->rank, bytes);
    free(s);
    return -1;
  }
  memset(s, 0, bytes);
  memset(r, 0, bytes + CANARY_BYTES);
  ctx->send = ctx->hsend = s;
  ctx->recv = ctx->hrecv = r;
  ctx->bufBytes = 2 * bytes + CANARY_BYTES;
  if (ctx->o->device != BENCH_DEV_CUDA) return 0;
  void *ds = NULL, *dr = NULL;
  if (benchDevAlloc(&ds, bytes) || benchDevAlloc(&dr, bytes + CANARY_BYTES)) {
    fprintf(stderr, "coll-tests: rank %d: cannot allocate 2 x %zu bytes on GPU %d: %s\n", ctx->rank, bytes, ctx->gpu,
            benchDevError());
    benchDevFree(ds);
    return -1;
  }
  ctx->send = ds;
  ctx->recv = dr;
  return 0;
}

/* Agrees on ok (1) across ranks: 0 when any rank failed. */
static int allOk(rankCtx_t* ctx, int ok, int* all) {
  int32_t v = ok;
  BCHECK(ctx, "agreeing on the GPU setup (collAllReduce)", collAllReduce(&v, &v, 1, collInt32, collMin, ctx->comm, NULL));
  *all = v;
  return 0;
}

/* Index of this rank among the ranks on its host (hostnames exchanged). */
static int findLocalRank(rankCtx_t* ctx) {
  char me[64] = "";
  gethostname(me, sizeof me - 1);
  char* all = calloc((size_t)ctx->nranks, sizeof me);
  if (!all) return -1;
  collResult_t r = collAllGather(me, all, sizeof me, collInt8, ctx->comm, NULL);
  if (r != collSuccess) {
    free(all);
    benchFailed(ctx, "exchanging host names (collAllGather)", r);
    return -1;
  }
  ctx->localRank = 0;
  for (int i = 0; i < ctx->rank; i++) ctx->localRank += strcmp(all + (size_t)i * sizeof me, me) == 0;
  free(all);
  return 0;
}

/* --device cuda: GPU localRank % count current on this thread, a CUDA
 * stream, and the coll stream wrapping it. Collective: every rank learns
 * whether all succeeded (no rank waits for one that gave up). */
static int openDevice(rankCtx_t* ctx) {
  int n = 0, ok = 1, all = 0;
  char why[600] = "";
  if (findLocalRank(ctx)) return -1;
  if (benchDevLoad(&n) || (ctx->gpu = ctx->localRank % n,
                           benchDevUse(ctx->gpu, ctx->gpuName, sizeof ctx->gpuName, ctx->gpuBus, sizeof ctx->gpuBus)) ||
      benchDevStreamCreate(&ctx->cuStream)) {
    snprintf(why, sizeof why, "%s", benchDevError());
    ok = 0;
  }
  if (ok && ctx->o->streamNull) { /* -y 1: the legacy default stream (the host waits on it) */
    benchDevStreamDestroy(ctx->cuStream);
    ctx->cuStream = NULL;
  }
  if (ok) {
    collResult_t r = collStreamCreateCuda(ctx->comm, ctx->cuStream, &ctx->stream);
    if (r != collSuccess) {
      snprintf(why, sizeof why, "collStreamCreateCuda: %s: %s", collGetErrorString(r), collGetLastError(ctx->comm));
      ok = 0;
    }
  }
  if (!ok) fprintf(stderr, "coll-tests: rank %d: --device cuda: %s\n", ctx->rank, why);
  if (allOk(ctx, ok, &all)) return -1;
  return all ? 0 : -1;
}

/* Loops over the types, ops, roots and -N cycles. */
static int runAll(rankCtx_t* ctx) {
  const benchOpts_t* o = ctx->o;
  const benchColl_t* c = ctx->c;
  int t0 = o->typeIndex < 0 ? 0 : o->typeIndex;
  int t1 = o->typeIndex < 0 ? kNumTypes : o->typeIndex + 1;
  int op0 = !c->hasOp ? 0 : o->opIndex < 0 ? 0 : o->opIndex;
  int op1 = !c->hasOp ? 1 : o->opIndex < 0 ? kNumOps : o->opIndex + 1;
  int r0 = !c->hasRoot ? -1 : o->root < 0 ? 0 : o->root;
  int r1 = !c->hasRoot ? 0 : o->root < 0 ? ctx->nranks : o->root + 1;
  if (c->hasRoot && r0 >= ctx->nranks) {
    if (ctx->rank == 0) fprintf(stderr, "coll-tests: root %d is out of range (%d ranks)\n", r0, ctx->nranks);
    return -1;
  }
  for (int cycle = 0; o->cycles == 0 || cycle < o->cycles; cycle++)
    for (int t = t0; t < t1; t++)
      for (int op = op0; op < op1; op++)
        for (int root = r0; root < r1; root++)
          if (timeTest(ctx, &kTypes[t], c->hasOp ? (int)kOps[op].op : OP_COPY, root)) return -1;
  return 0;
}

/* VmHWM of this process in bytes, the largest over ranks (-M). */
static int peakRss(rankCtx_t* ctx, double* bytes) {
  *bytes = 0;
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "VmHWM:", 6) == 0) *bytes = atof(line + 6) * 1024;
  if (f) fclose(f);
  BCHECK(ctx, "collating memory use (collAllReduce)", collAllReduce(bytes, bytes, 1, collFloat64, collMax, ctx->comm, NULL));
  return 0;
}

typedef struct {
  const benchOpts_t* o;
  const benchColl_t* c;
} rankArgs_t;

/* launchRankFn: the whole benchmark on one rank. */
static int runRank(collComm_t comm, void* arg) {
  const rankArgs_t* a = arg;
  rankCtx_t ctx = {.o = a->o, .c = a->c, .comm = comm, .maxBytes = a->o->maxBytes};
  int local = 1, rc = LAUNCH_FAILED;
  collResult_t r;
  if ((r = collCommUserRank(comm, &ctx.rank)) != collSuccess || (r = collCommCount(comm, &ctx.nranks)) != collSuccess) {
    launchReportError(-1, "collCommUserRank/collCommCount", r, comm);
    return LAUNCH_FAILED;
  }
  if (a->o->device != BENCH_DEV_CUDA && !a->o->blocking && !a->o->streamNull &&
      (r = collStreamCreate(comm, &ctx.stream)) != collSuccess) {
    launchReportError(ctx.rank, "collStreamCreate", r, comm);
    return LAUNCH_FAILED;
  }
  double rss = 0;
  if ((a->o->device != BENCH_DEV_CUDA || openDevice(&ctx) == 0) && reportBegin(&ctx) == 0 &&
      reportDevices(&ctx, &local) == 0 && fitMemory(&ctx, local) == 0 && allocBuffers(&ctx) == 0) {
    reportTableHeader(&ctx);
    if (runAll(&ctx) == 0 && (!a->o->memReport || peakRss(&ctx, &rss) == 0)) rc = reportEnd(&ctx, rss);
  }
  if (rc == LAUNCH_FAILED) reportAbort(&ctx, collGetLastError(comm));
  fflush(stdout);
  /* the stream is freed on every path (after a failure its error is the
   * failure's, already reported) */
  if (ctx.stream && (r = collStreamDestroy(ctx.stream)) != collSuccess && rc != LAUNCH_FAILED) {
    launchReportError(ctx.rank, "collStreamDestroy", r, comm);
    rc = LAUNCH_FAILED;
  }
  if (ctx.send != ctx.hsend) benchDevFree(ctx.send);
  if (ctx.recv != ctx.hrecv) benchDevFree(ctx.recv);
  benchDevStreamDestroy(ctx.cuStream);
  if (a->o->localRegister) {
    for (int i = 0; i < 2; i++)
      if (ctx.regs[i]) collCommDeregister(comm, ctx.regs[i]);
    collMemFree(ctx.hsend);
    collMemFree(ctx.hrecv);
  } else {
    free(ctx.hsend);
    free(ctx.hrecv);
  }
  return rc;
}

size_t benchPerRankCount(size_t count, size_t eltSize, int nranks) {
  size_t align = eltSize < 16 ? 16 / eltSize : 1;
  return (count / (size_t)nranks) / align * align;
}

int benchMain(int argc, char** argv, const benchColl_t* coll) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  benchOpts_t o;
  int p = benchParseArgs(argc, argv, &o);
  if (p != 0) return p > 0 ? 0 : 2;
  /* --device cuda without a usable GPU: one line, before any rank starts
   * (a parent that forks ranks must not initialize CUDA itself) */
  if (o.device == BENCH_DEV_CUDA) {
    int n = 0;
    if (o.nprocs > 1 ? benchDevProbeForked() : benchDevLoad(&n)) {
      fprintf(stderr, "coll-tests: --device cuda: no usable GPU here: %s\n", benchDevError());
      return 2;
    }
    if (!collStreamCreateCuda) {
      fprintf(stderr, "coll-tests: --device cuda: this libcoll cannot run collectives on CUDA streams "
                      "(no collStreamCreateCuda: a build before issue 16)\n");
      return 2;
    }
  }
  launchOpts_t lo = {.nprocs = o.nprocs, .nthreads = o.nthreads, .timeoutSec = o.timeout,
                     .launchTimeoutSec = o.launchTimeout};
  rankArgs_t args = {&o, coll};
  return launchRun(&lo, runRank, &args);
}
