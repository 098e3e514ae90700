/*
 * report.c - the benchmark's output: nccl-tests' table on stdout (rank 0),
 * and the same numbers as JSON (-J, nccl-tests' schema version 2: config,
 * devices, one object per row with out_of_place / in_place, summary) and
 * as CSV (--csv, one line per row). Only rank 0 writes.
 *
 * SPDX-License-Identifier: BSD-3-Clause
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "launch.h"

#define STR_(x) #x
#define STR(x) STR_(x)
#define BENCH_VERSION STR(COLL_MAJOR) "." STR(COLL_MINOR) "." STR(COLL_PATCH)
#define JSON_VERSION 2

extern char** environ;

struct benchReport {
  FILE* json;
  FILE* csv;
  int rows;  /* JSON result objects written */
  int stage; /* JSON: 0 top level open, 1 inside "results" */
};

void reportFloat(char* out, size_t len, double v, int width) {
  if (!isfinite(v)) {
    snprintf(out, len, "%*g", width, v);
    return;
  }
  int power = 0;
  for (double p = 1; v >= p; p *= 10) power++;
  if (power < width - 2) snprintf(out, len, "%*.2f", width, v);
  else if (power < width - 1) snprintf(out, len, "%*.1f", width, v);
  else if (power < width + 1) snprintf(out, len, "%*.0f", width, v);
  else if (width >= 7) snprintf(out, len, "%*.1e", width, v);
  else snprintf(out, len, "%*.0e", width, v);
}

/* "YYYY-MM-DD HH:MM:SS" local time. */
static void nowString(char* buf, size_t len) {
  time_t t = time(NULL);
  struct tm tm;
  localtime_r(&t, &tm);
  strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
}

/* ---- JSON --------------------------------------------------------------- */

/* Writes s as a JSON string (escaping quotes, backslashes, controls). */
static void jsonStr(FILE* f, const char* s) {
  fputc('"', f);
  for (; s && *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
    else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
    else fputc(ch, f);
  }
  fputc('"', f);
}

/* A finite number, or null (JSON has no NaN or infinity). */
static void jsonNum(FILE* f, double v) {
  if (isfinite(v)) fprintf(f, "%.17g", v);
  else fputs("null", f);
}

/* Opens path for writing without replacing a file: path, path.0, ... */
static FILE* openNew(const char* path, char* used, size_t len) {
  snprintf(used, len, "%s", path);
  for (int k = 0; k < 1000; k++) {
    FILE* f = fopen(used, "wx");
    if (f || errno != EEXIST) return f;
    snprintf(used, len, "%s.%d", path, k);
  }
  return NULL;
}

/* Environment entries worth recording: coll's, NCCL's and the launchers'
 * (not the whole environment, which may hold secrets). */
static int envRecorded(const char* e) {
  static const char* prefixes[] = {"COLL_", "NCCL_", "OMPI_COMM_WORLD_", "PMI_", "SLURM_", "RANK=", "WORLD_SIZE=",
                                   "LOCAL_RANK=", "MASTER_ADDR=", "MASTER_PORT=", "UCX_"};
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
    if (strncmp(e, prefixes[i], strlen(prefixes[i])) == 0) return 1;
  return 0;
}

static void jsonBegin(const rankCtx_t* ctx, FILE* f) {
  char ts[64];
  nowString(ts, sizeof ts);
  int lib = 0;
  collGetVersion(&lib);
  fprintf(f, "{\"version\":%d,\"start_time\":", JSON_VERSION);
  jsonStr(f, ts);
  fputs(",\"args\":[", f);
  for (int i = 0; i < ctx->o->argc; i++) {
    if (i) fputc(',', f);
    jsonStr(f, ctx->o->argv[i]);
  }
  fputs("],\"env\":[", f);
  int first = 1;
  for (char** e = environ; e && *e; e++) {
    if (!envRecorded(*e)) continue;
    if (!first) fputc(',', f);
    jsonStr(f, *e);
    first = 0;
  }
  fprintf(f, "],\"coll_version\":%d", lib);
}

/* ---- CSV ---------------------------------------------------------------- */

static void csvHeader(FILE* f, int showAlgo) {
  fputs("size,count,type,redop,root", f);
  for (int p = 0; p < 2; p++) {
    const char* w = p ? "ip" : "oop";
    fprintf(f, ",%s_time_us,%s_algbw_gbs,%s_busbw_gbs,%s_wrong", w, w, w, w);
  }
  fputs(showAlgo ? ",timestamp,algorithm\n" : ",timestamp\n", f);
}

/* ---- table ------------------------------------------------------------- */

int reportBegin(rankCtx_t* ctx) {
  const benchOpts_t* o = ctx->o;
  if (ctx->rank != 0) return 0;
  benchReport_t* rep = calloc(1, sizeof *rep);
  if (!rep) return -1;
  ctx->report = rep;
  char used[4096];
  if (o->jsonPath) {
    if (!(rep->json = openNew(o->jsonPath, used, sizeof used))) {
      fprintf(stderr, "coll-tests: cannot create the JSON file %s (-J): %s\n", o->jsonPath, strerror(errno));
      return -1;
    }
    jsonBegin(ctx, rep->json);
  }
  if (o->csvPath) {
    if (!(rep->csv = fopen(o->csvPath, "w"))) {
      fprintf(stderr, "coll-tests: cannot create the CSV file %s (--csv): %s\n", o->csvPath, strerror(errno));
      return -1;
    }
    csvHeader(rep->csv, o->showAlgo);
  }
  int lib = 0;
  collGetVersion(&lib);
  printf("# coll-tests version %s coll-library=%d\n", BENCH_VERSION, lib);
  printf("# Collective test starting: %s\n", o->prog);
  printf("# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d agg iters: %d "
         "validation: %d graph: 0 unalign: %d\n",
         o->nthreads, o->ngpus, o->minBytes, o->maxBytes, o->stepFactor > 1 ? o->stepFactor : o->stepBytes,
         o->stepFactor > 1 ? "factor" : "bytes", o->warmup, o->iters, o->agg, o->check, o->unalign);
  if (o->blocking == 1) printf("# Blocking Enabled: wait for completion and barrier after each collective \n");
  if (o->blocking == 2) printf("# Blocking Enabled: wait for completion after each collective (no barrier) \n");
  if (o->perIter) printf("# Per-Iteration Report: host timing of each iteration; i_* uses the max over ranks \n");
  if (o->parallelInit) printf("# Parallel Init Enabled: threads call into collCommInitRank concurrently \n");
  if (o->jsonPath) printf("# Writing JSON output to %s\n", used);
  if (o->csvPath) printf("# Writing CSV output to %s\n", o->csvPath);
  if (o->nprocs > 1 && o->launchTimeout > 0)
    printf("# Wall-clock limit of -np: %d s (COLL_TESTS_LAUNCH_TIMEOUT)\n", o->launchTimeout);
  else if (o->nprocs > 1)
    printf("# Wall-clock limit of -np: none%s\n", o->cycles == 0 ? " (-N 0)" : "");
  fputs(o->ignored, stdout);
  printf("#\n");
  return 0;
}

/* One rank's line of "# Using devices", exchanged as bytes. */
typedef struct {
  int32_t rank, pid, gpu; /* gpu: -1 for host memory */
  char host[56];
  char gpuName[64], gpuBus[20];
} rankInfo_t;

int reportDevices(rankCtx_t* ctx, int* local) {
  rankInfo_t me = {.rank = ctx->rank, .pid = (int32_t)getpid(), .gpu = -1};
  if (ctx->o->device == BENCH_DEV_CUDA) {
    me.gpu = ctx->gpu;
    snprintf(me.gpuName, sizeof me.gpuName, "%s", ctx->gpuName);
    snprintf(me.gpuBus, sizeof me.gpuBus, "%s", ctx->gpuBus);
  }
  gethostname(me.host, sizeof(me.host) - 1);
  me.host[strcspn(me.host, ".")] = '\0';
  rankInfo_t* all = calloc((size_t)ctx->nranks, sizeof(*all));
  if (!all) return -1;
  collResult_t r = collAllGather(&me, all, sizeof(me), collInt8, ctx->comm, NULL);
  if (r != collSuccess) {
    free(all);
    benchFailed(ctx, "exchanging the rank list (collAllGather)", r);
    return -1;
  }
  FILE* js = ctx->report ? ctx->report->json : NULL;
  const benchOpts_t* o = ctx->o;
  if (js) {
    fprintf(js, ",\"config\":{\"nthreads\":%d,\"ngpus\":%d,\"minimum_bytes\":%zu,\"maximum_bytes\":%zu,", o->nthreads,
            o->ngpus, o->minBytes, o->maxBytes);
    if (o->stepFactor > 1) fprintf(js, "\"step_factor\":%zu,", o->stepFactor);
    else fprintf(js, "\"step_bytes\":%zu,", o->stepBytes);
    fprintf(js, "\"warmup_iters\":%d,\"iterations\":%d,\"aggregated_iterations\":%d,\"validation\":%d,\"graph\":0,"
            "\"blocking_collectives\":\"%s\",\"per_iter_timing\":\"%s\",\"parallel_init\":\"%s\",\"unalign\":%d,"
            "\"devices\":[",
            o->warmup, o->iters, o->agg, o->check, o->blocking ? "true" : "false", o->perIter ? "true" : "false",
            o->parallelInit ? "true" : "false", o->unalign);
  }
  benchPrintf(ctx, "# Using devices\n");
  *local = 0;
  for (int i = 0; i < ctx->nranks; i++) {
    int dev = 0;
    for (int j = 0; j < i; j++) dev += strcmp(all[j].host, all[i].host) == 0;
    *local += strcmp(all[i].host, me.host) == 0;
    int gpu = all[i].gpu >= 0;
    const char* hex = gpu ? all[i].gpuBus : "cpu";
    const char* info = gpu ? all[i].gpuName : "Host memory";
    if (gpu) dev = all[i].gpu;
    benchPrintf(ctx, "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s\n", all[i].rank, 0, all[i].pid,
                all[i].host, dev, hex, info);
    if (js) {
      fprintf(js, "%s{\"rank\":%d,\"group\":0,\"pid\":%d,\"hostname\":", i ? "," : "", all[i].rank, all[i].pid);
      jsonStr(js, all[i].host);
      fprintf(js, ",\"device\":%d,\"device_hex\":", dev);
      jsonStr(js, hex);
      fputs(",\"device_info\":", js);
      jsonStr(js, info);
      fputc('}', js);
    }
  }
  if (js) fputs("]}", js);
  free(all);
  return 0;
}

void reportTableHeader(const rankCtx_t* ctx) {
  if (ctx->rank != 0) return;
  const benchOpts_t* o = ctx->o;
  const char* tm = o->cputime ? "cputime" : "time";
  const char* tsLbl = o->timestamps ? "timestamp" : "";
  const char* tsFmt = o->timestamps ? "%Y-%m-%d %H:%M:%S" : "";
  int tsPad = o->timestamps ? 19 : 0;
  printf("#\n");
  if (o->perIter) {
    printf("# %10s  %12s  %8s  %6s  %6s              out-of-place (+ per-iteration)                                "
           "in-place (+ per-iteration)\n", "", "", "", "", "");
    for (int row = 0; row < 2; row++) {
      const char* k[] = {"size", "count", "(B)", "(elements)"};
      printf("# %10s  %12s  %8s  %6s  %6s", k[row * 2], k[row * 2 + 1], row ? "" : "type", row ? "" : "redop",
             row ? "" : "root");
      for (int p = 0; p < 2; p++)
        printf("  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s", row ? "(us)" : tm, row ? "(GB/s)" : "algbw",
               row ? "(GB/s)" : "busbw", row ? "" : "#wrong", row ? "(us)" : "i_min", row ? "(us)" : "i_max",
               row ? "(us)" : "i_p99", row ? "(%)" : "i_cv%");
      printf(" %*s\n", tsPad, row ? tsFmt : tsLbl);
    }
  } else {
    printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "",
           "", "", "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s%s\n", "size", "count", "type",
           "redop", "root", tm, "algbw", "busbw", "#wrong", tm, "algbw", "busbw", "#wrong", tsPad, tsLbl,
           o->showAlgo ? "  algorithm" : "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)", "(elements)", "", "",
           "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", tsPad, tsFmt);
  }
  if (ctx->report && ctx->report->json) {
    fputs(",\"results\":[", ctx->report->json);
    ctx->report->stage = 1;
  }
}

/* The 4 (or 8 with -I) columns of one placement. */
static void printPlacement(const rankCtx_t* ctx, const benchResult_t* r) {
  char ts[32], as[32], bs[32];
  reportFloat(ts, sizeof ts, r->timeUs, 7);
  reportFloat(as, sizeof as, r->algBw, 6);
  reportFloat(bs, sizeof bs, r->busBw, 6);
  if (r->wrong >= 0) printf("  %7s  %6s  %6s  %6g", ts, as, bs, (double)r->wrong);
  else printf("  %7s  %6s  %6s    N/A", ts, as, bs);
  if (ctx->o->perIter) {
    char a[32], b[32], c[32], d[32];
    reportFloat(a, sizeof a, r->iter.min, 7);
    reportFloat(b, sizeof b, r->iter.max, 7);
    reportFloat(c, sizeof c, r->iter.p99, 7);
    reportFloat(d, sizeof d, r->iter.cvPct, 7);
    printf("  %7s  %7s  %7s  %7s", a, b, c, d);
  }
}

static void jsonPlacement(const rankCtx_t* ctx, FILE* f, const char* key, const benchResult_t* r) {
  fprintf(f, ",\"%s\":{\"%s\":", key, ctx->o->cputime ? "cpu_time" : "time");
  jsonNum(f, r->timeUs);
  fputs(",\"alg_bw\":", f);
  jsonNum(f, r->algBw);
  fputs(",\"bus_bw\":", f);
  jsonNum(f, r->busBw);
  fputs(",\"nwrong\":", f);
  if (r->wrong >= 0) fprintf(f, "%lld", (long long)r->wrong);
  else fputs("null", f);
  fputc('}', f);
  if (r->hasIter) {
    fprintf(f, ",\"%s_per_iter\":{\"min_us\":", key);
    jsonNum(f, r->iter.min);
    fputs(",\"max_us\":", f);
    jsonNum(f, r->iter.max);
    fputs(",\"p99_us\":", f);
    jsonNum(f, r->iter.p99);
    fputs(",\"cv_pct\":", f);
    jsonNum(f, r->iter.cvPct);
    fputc('}', f);
  }
}

void reportRow(rankCtx_t* ctx, const testCase_t* tc, const benchResult_t res[2]) {
  if (ctx->rank != 0) return;
  size_t big = tc->n.sendCount > tc->n.recvCount ? tc->n.sendCount : tc->n.recvCount;
  size_t bytes = big * tc->t->size;
  const char* op = benchOpName(tc->op);
  char stamp[64] = "";
  if (ctx->o->timestamps) nowString(stamp, sizeof stamp);
  printf("%12zu  %12zu  %8s  %6s  %6d", bytes, tc->n.paramCount, tc->t->name, op, tc->root);
  for (int p = 0; p < 2; p++) printPlacement(ctx, &res[p]);
  if (ctx->o->timestamps) printf("%21s", stamp);
  if (ctx->o->showAlgo) printf("  %s", res[0].algo);
  printf("\n");
  benchReport_t* rep = ctx->report;
  if (rep && rep->json) {
    FILE* f = rep->json;
    fprintf(f, "%s{\"size\":%zu,\"count\":%zu,\"type\":\"%s\",\"redop\":\"%s\",\"root\":\"%6d\"", rep->rows ? "," : "",
            bytes, tc->n.paramCount, tc->t->name, op, tc->root);
    jsonPlacement(ctx, f, "out_of_place", &res[0]);
    jsonPlacement(ctx, f, "in_place", &res[1]);
    if (ctx->o->showAlgo) fprintf(f, ",\"algorithm\":\"%s\"", res[0].algo);
    fprintf(f, ",\"actual_iterations\":%d,\"experiment_name\":\"%s\"}", ctx->o->iters, ctx->c->name);
    rep->rows++;
  }
  if (rep && rep->csv) {
    fprintf(rep->csv, "%zu,%zu,%s,%s,%d", bytes, tc->n.paramCount, tc->t->name, op, tc->root);
    for (int p = 0; p < 2; p++) {
      fprintf(rep->csv, ",%.6g,%.6g,%.6g,", res[p].timeUs, res[p].algBw, res[p].busBw);
      if (res[p].wrong >= 0) fprintf(rep->csv, "%lld", (long long)res[p].wrong);
    }
    fprintf(rep->csv, ",%s", stamp);
    if (ctx->o->showAlgo) fprintf(rep->csv, ",%s", res[0].algo);
    fputc('\n', rep->csv);
  }
}

static void closeFiles(rankCtx_t* ctx) {
  benchReport_t* rep = ctx->report;
  if (!rep) return;
  if (rep->json) fclose(rep->json);
  if (rep->csv) fclose(rep->csv);
  free(rep);
  ctx->report = NULL;
}

int reportEnd(rankCtx_t* ctx, double peakRssBytes) {
  double avg = ctx->bwCount ? ctx->bwSum / ctx->bwCount : 0;
  double minBw = ctx->o->minBusBw;
  int bwFail = minBw >= 0 && avg < 0.9 * minBw;
  int rc = ctx->errors || bwFail ? LAUNCH_WRONG : LAUNCH_OK;
  if (ctx->rank != 0) return rc;
  printf("# %-20s : %d %s\n", "Out of bounds values", ctx->errors, ctx->errors ? "FAILED" : "OK");
  printf("# %-20s : %g %s\n", "Avg bus bandwidth", avg, minBw < 0 ? "" : bwFail ? "FAILED" : "OK");
  if (ctx->o->memReport) {
    size_t buf = ctx->bufBytes;
    printf("# %-20s : buffers %.2f MB per rank | peak RSS %.2f MB (largest rank)\n", "Host memory usage",
           (double)buf / (1 << 20), peakRssBytes / (1 << 20));
  }
  printf("#\n");
  printf("# Collective test concluded: %s\n", ctx->o->prog);
  benchReport_t* rep = ctx->report;
  if (rep && rep->json) {
    FILE* f = rep->json;
    char ts[64];
    nowString(ts, sizeof ts);
    fprintf(f, "%s,\"out_of_bounds\":{\"count\":%d,\"okay\":\"%s\"},\"average_bus_bandwidth\":{\"bandwidth\":",
            rep->stage ? "]" : "", ctx->errors, ctx->errors ? "false" : "true");
    jsonNum(f, avg);
    fprintf(f, ",\"okay\":\"%s\"}", minBw < 0 ? "unchecked" : bwFail ? "false" : "true");
    if (ctx->o->memReport) {
      fputs(",\"host_memory\":{\"peak_rss_bytes\":", f);
      jsonNum(f, peakRssBytes);
      fputc('}', f);
    }
    fputs(",\"errors\":[],\"end_time\":", f);
    jsonStr(f, ts);
    fputs("}\n", f);
  }
  closeFiles(ctx);
  return rc;
}

void reportAbort(rankCtx_t* ctx, const char* why) {
  benchReport_t* rep = ctx->report;
  if (rep && rep->json) { /* still a valid document, with the error */
    char ts[64];
    nowString(ts, sizeof ts);
    fprintf(rep->json, "%s,\"errors\":[", rep->stage ? "]" : "");
    jsonStr(rep->json, why);
    fputs("],\"end_time\":", rep->json);
    jsonStr(rep->json, ts);
    fputs("}\n", rep->json);
  }
  closeFiles(ctx);
}
