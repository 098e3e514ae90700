/*
 * peer_common.h - what the peer benchmarks (mpi_perf.c, gloo_perf.cc) share
 * with coll's benchmarks/common.c: the nccl-tests flags they accept, the
 * size sweep, the element counts per size, the verifiable input pattern and
 * the output row layout. Header-only so that one C file (built twice, once
 * per MPI) and one C++ file can use it.
 *
 * Only float32 / sum is supported (the comparison fixes both).
 *
 * SPDX-License-Identifier: BSD-3-Clause
 */
#ifndef COLL_COMPARE_PEER_COMMON_H_
#define COLL_COMPARE_PEER_COMMON_H_

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* clock_gettime, posix_memalign */
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { PEER_ALLREDUCE, PEER_ALLGATHER, PEER_REDUCESCATTER };

typedef struct {
  int colls[3], ncolls;     /* -C a,b,..: the collectives, run in this order */
  int coll;                 /* PEER_*: the one being run */
  int check;                /* -c, as in nccl-tests */
  int nprocs;               /* -np: ranks to fork (gloo); MPI ignores it */
  int nsizes;               /* the sweep: size i with its own -w and -n */
  size_t size[64];
  int warmup[64], iters[64];
  size_t maxBytes;
} peerOpts_t;

/* Element counts of one size, as coll's *_perf.c counts() compute them. */
typedef struct {
  size_t send, recv, param;
} peerCounts_t;

static const char* const kPeerCollNames[] = {"allreduce", "allgather",
                                             "reducescatter"};

/* Parses a size with an optional K/M/G suffix; -1 on error. */
static double peerParseSize(const char* s) {
  char* end;
  double v = strtod(s, &end), unit = 1;
  if (end == s || v < 0) return -1;
  if (*end == 'K' || *end == 'k') unit = 1024.0, end++;
  else if (*end == 'M' || *end == 'm') unit = 1024.0 * 1024, end++;
  else if (*end == 'G' || *end == 'g') unit = 1024.0 * 1024 * 1024, end++;
  if (*end == 'B' || *end == 'b') end++;
  return *end ? -1 : v * unit;
}

/* Appends the comma-separated sizes of `list` with warm-up w and iters n
 * (w < 0: the global -w/-n, filled in later); -1 on error. */
static int peerAddSizes(peerOpts_t* o, const char* list, int w, int n) {
  char buf[1024], *save = NULL;
  snprintf(buf, sizeof(buf), "%s", list);
  for (char* t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    double sz = peerParseSize(t);
    if (sz < 1 || o->nsizes == 64) return -1;
    o->size[o->nsizes] = (size_t)sz;
    o->warmup[o->nsizes] = w, o->iters[o->nsizes++] = n;
  }
  return 0;
}

/* Flags: -C coll[,coll..], the sweep, -c CHECK [-np N] [-d float] [-o sum]. The sweep
 * is -b MIN -e MAX -f FACTOR -w W -n N (nccl-tests), or -l S1,S2,.. (with
 * -w/-n), or bands -B W:N:S1,S2,.. (repeatable: each band its own warm-up
 * and iteration counts). 0 ok, -1 error. */
static int peerParseArgs(int argc, char** argv, peerOpts_t* o) {
  memset(o, 0, sizeof(*o));
  o->coll = -1, o->check = 1, o->nprocs = 1;
  size_t minB = 32 << 20, maxB = 32 << 20, factor = 2;
  int w = 1, n = 20;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) goto bad;
    i++;
    if (!strcmp(a, "-C")) {
      char buf[256], *save = NULL;
      snprintf(buf, sizeof(buf), "%s", v);
      for (char* t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int c = 0;
        while (c < 3 && strcmp(t, kPeerCollNames[c])) c++;
        if (c == 3 || o->ncolls == 3) goto bad;
        o->colls[o->ncolls++] = c;
      }
      o->coll = o->ncolls ? o->colls[0] : -1;
    } else if (!strcmp(a, "-b") || !strcmp(a, "-e")) {
      double s = peerParseSize(v);
      if (s < 1) goto bad;
      if (a[1] == 'b') minB = (size_t)s; else maxB = (size_t)s;
    } else if (!strcmp(a, "-l")) {
      if (peerAddSizes(o, v, -1, -1)) goto bad;
    } else if (!strcmp(a, "-B")) {
      int bw, bn, off = 0;
      if (sscanf(v, "%d:%d:%n", &bw, &bn, &off) != 2 || !off || bw < 0 || bn < 1 ||
          peerAddSizes(o, v + off, bw, bn))
        goto bad;
    } else if (!strcmp(a, "-f")) factor = (size_t)atol(v);
    else if (!strcmp(a, "-n")) n = atoi(v);
    else if (!strcmp(a, "-w")) w = atoi(v);
    else if (!strcmp(a, "-c")) o->check = atoi(v);
    else if (!strcmp(a, "-np")) o->nprocs = atoi(v);
    else if (!strcmp(a, "-d")) { if (strcmp(v, "float") && strcmp(v, "float32")) goto bad; }
    else if (!strcmp(a, "-o")) { if (strcmp(v, "sum")) goto bad; }
    else goto bad;
  }
  if (o->coll < 0 || n < 1 || w < 0 || o->nprocs < 1 || factor < 2 || minB > maxB)
    goto bad;
  if (o->nsizes == 0) /* no -l / -B: the nccl-tests sweep */
    for (size_t s = minB; s <= maxB && o->nsizes < 64; s = s * factor > s ? s * factor : maxB + 1)
      o->size[o->nsizes] = s, o->warmup[o->nsizes++] = -1;
  for (int i = 0; i < o->nsizes; i++) {
    if (o->warmup[i] < 0) o->warmup[i] = w, o->iters[i] = n;
    if (o->size[i] > o->maxBytes) o->maxBytes = o->size[i];
  }
  return 0;
bad:
  fprintf(stderr, "usage: %s -C allreduce|allgather|reducescatter[,..] "
          "{-b MIN -e MAX -f FACTOR | -l S1,S2,..} [-w WARMUP -n ITERS] "
          "[-B WARMUP:ITERS:S1,S2,.. ...] -c CHECK [-np N] [-d float] [-o sum]\n",
          argv[0]);
  return -1;
}

/* coll's benchPerRankCount: count/nranks rounded down to 16 bytes. */
static size_t peerPerRank(size_t count, int n) {
  return (count / (size_t)n) / 4 * 4;
}

/* Counts of `bytes` of float32 on n ranks (coll's counts()). */
static peerCounts_t peerCounts(int coll, size_t bytes, int n) {
  size_t count = bytes / 4, base = peerPerRank(count, n);
  peerCounts_t c = {count, count, count};
  if (coll == PEER_ALLGATHER) c.send = base, c.recv = base * (size_t)n, c.param = base;
  if (coll == PEER_REDUCESCATTER) c.send = base * (size_t)n, c.recv = base, c.param = base;
  return c;
}

/* The printed size: the larger buffer, in bytes. */
static size_t peerRowBytes(peerCounts_t c) {
  return (c.send > c.recv ? c.send : c.recv) * 4;
}

/* Input element i of rank r is h - B with h = (7 i + 13 r + 3 seed) mod
 * (2B + 1): coll's genValue for float32. Sums use B = 2^20 / n, so every
 * partial sum is exact; copies use B = 2^20. Walked incrementally (h += 7)
 * so that checking 256 MiB costs about as much as a memcpy. */
typedef struct {
  uint64_t h, m;
  int64_t bound;
} peerGen_t;

static peerGen_t peerGenAt(int coll, int n, int r, size_t i, uint64_t seed) {
  peerGen_t g;
  g.bound = coll == PEER_ALLGATHER ? (1 << 20) : (1 << 20) / n;
  g.m = (uint64_t)(2 * g.bound + 1);
  g.h = ((uint64_t)i * 7 + (uint64_t)r * 13 + seed * 3) % g.m;
  return g;
}

static int64_t peerGenNext(peerGen_t* g) {
  int64_t v = (int64_t)g->h - g->bound;
  g->h += 7;
  if (g->h >= g->m) g->h -= g->m;
  return v;
}

/* Fills this rank's `count` input elements for check round `seed`. */
static void peerFill(int coll, int n, int r, float* in, size_t count, uint64_t seed) {
  peerGen_t g = peerGenAt(coll, n, r, 0, seed);
  for (size_t i = 0; i < count; i++) in[i] = (float)peerGenNext(&g);
}

/* Wrong elements of rank r's output `out` (c.recv elements): all-gather
 * block p is rank p's input; a reduction's element j is the sum over ranks
 * of input element j (reduce-scatter: r * count + j). */
static int64_t peerVerify(int coll, int n, int r, const float* out, peerCounts_t c,
                          uint64_t seed) {
  int64_t bad = 0;
  if (coll == PEER_ALLGATHER) {
    for (int p = 0; p < n; p++) {
      peerGen_t g = peerGenAt(coll, n, p, 0, seed);
      for (size_t i = 0; i < c.param; i++)
        bad += out[(size_t)p * c.param + i] != (float)peerGenNext(&g);
    }
    return bad;
  }
  peerGen_t g[64];
  size_t idx0 = coll == PEER_REDUCESCATTER ? (size_t)r * c.param : 0;
  for (int p = 0; p < n && p < 64; p++) g[p] = peerGenAt(coll, n, p, idx0, seed);
  for (size_t j = 0; j < c.recv; j++) {
    int64_t want = 0;
    for (int p = 0; p < n && p < 64; p++) want += peerGenNext(&g[p]);
    bad += out[j] != (float)want;
  }
  return bad;
}

/* Allocates `bytes` (at least one page), page-aligned and pre-faulted. */
static void* peerAlloc(size_t bytes) {
  void* p = NULL;
  size_t b = (bytes + 4095) & ~(size_t)4095;
  if (posix_memalign(&p, 4096, b ? b : 4096)) return NULL;
  memset(p, 0, b ? b : 4096);
  return p;
}

/* Seconds on the monotonic clock. */
static double peerNow(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* nccl-tests' getFloatStr (same as common.c's fmtFloat). */
static void peerFmt(char* out, size_t len, double v, int width) {
  int power = 0;
  for (double p = 1; v >= p; p *= 10) power++;
  if (power < width - 2) snprintf(out, len, "%*.2f", width, v);
  else if (power < width - 1) snprintf(out, len, "%*.1f", width, v);
  else if (power < width + 1) snprintf(out, len, "%*.0f", width, v);
  else snprintf(out, len, "%*.1e", width, v);
}

/* The nccl-tests header; `what` names the library and algorithm. */
static void peerHeader(const peerOpts_t* o, int n, const char* what) {
  printf("# %s %s\n# nRanks %d validation: %d time: max over ranks\n",
         kPeerCollNames[o->coll], what, n, o->check);
  for (int i = 0; i < o->nsizes; i++)
    printf("# size %zu warmup iters: %d iters: %d\n", o->size[i], o->warmup[i],
           o->iters[i]);
  printf("#\n# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n",
         "", "", "", "", "");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size",
         "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
         "algbw", "busbw", "#wrong");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)",
         "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
         "(GB/s)", "");
}

/* Row start: size, count, type, redop, root. */
static void peerRowStart(int coll, peerCounts_t c) {
  printf("%12zu  %12zu  %8s  %6s  %6d", peerRowBytes(c), c.param, "float",
         coll == PEER_ALLGATHER ? "none" : "sum", -1);
}

/* One placement's 4 columns; wrong < 0 prints N/A. */
static void peerRowCell(int coll, int n, peerCounts_t c, double sec, int64_t wrong) {
  double factor = coll == PEER_ALLREDUCE ? 2.0 * (n - 1) / n : (double)(n - 1) / n;
  double alg = sec > 0 ? (double)peerRowBytes(c) / 1e9 / sec : 0;
  char ts[32], as[32], bs[32];
  peerFmt(ts, sizeof(ts), sec * 1e6, 7);
  peerFmt(as, sizeof(as), alg, 6);
  peerFmt(bs, sizeof(bs), alg * factor, 6);
  if (wrong >= 0) printf("  %7s  %6s  %6s  %6lld", ts, as, bs, (long long)wrong);
  else printf("  %7s  %6s  %6s    N/A", ts, as, bs);
}

#endif /* COLL_COMPARE_PEER_COMMON_H_ */
