/*
 * helper_sched_sim.c - schedule checker/simulator, see sched_sim.h.
 * Depends only on src/engine/sched.* (no cmocka: linked into every unit
 * test executable).
 */
#include "sched_sim.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_MAX_RANKS 4096

typedef struct {
  size_t base;   /* first element in the rank's memory */
  size_t bsize;  /* elements per block (= whole size for stride-0 buffers) */
  uint32_t nblk; /* 0 = buffer absent on this rank */
} simView;

typedef struct simMsg {
  struct simMsg* next;
  int srank, sstep; /* sender and its step index */
  size_t n;
  int32_t* tag;
  uint8_t* cnt; /* n * nranks */
} simMsg;

typedef struct {
  simMsg *head, *tail;
} simQueue;

typedef struct {
  collSched s;
  int inPlace;
  simView view[3];
  size_t memSize;
  int32_t* tag; /* -1 = never written */
  uint8_t* cnt; /* memSize * nranks contribution counters */
  size_t *src, *dst, *n; /* resolved per step */
  unsigned char* done;
  int lo, hi, started; /* current phase = steps [lo, hi) */
  size_t sent;
} simRank;

typedef struct {
  const collSimConfig* cfg;
  int N;
  size_t c;
  simRank* rk;
  simQueue* q; /* q[src * N + dst] */
  unsigned char* busy;
  collSimResult* res;
} simCtx;

static int simFail(simCtx* X, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int simFail(simCtx* X, const char* fmt, ...) {
  if (X->res->ok) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(X->res->msg, sizeof(X->res->msg), fmt, ap);
    va_end(ap);
    X->res->ok = 0;
  }
  return -1;
}

const char* collSimFnName(collFunc fn) {
  static const char* names[] = {"allreduce", "allgather", "reducescatter",
                                "broadcast", "reduce",    "send",
                                "recv"};
  return (unsigned)fn < COLL_FN_COUNT ? names[fn] : "?";
}

static const char* simKindName(int k) {
  static const char* names[] = {"SEND", "RECV", "RECV_REDUCE", "COPY",
                                "REDUCE"};
  return k >= 0 && k <= COLL_STEP_REDUCE ? names[k] : "?";
}

static const char* simBufName(int b) {
  static const char* names[] = {"SEND", "RECV", "SCRATCH", "NONE"};
  return b >= 0 && b <= COLL_BUF_NONE ? names[b] : "?";
}

static int simIsRecv(int k) {
  return k == COLL_STEP_RECV || k == COLL_STEP_RECV_REDUCE;
}
static int simIsComm(int k) { return k == COLL_STEP_SEND || simIsRecv(k); }
static int simReadsSrc(int k) { return k != COLL_STEP_RECV; }
static int simWritesDst(int k) { return k != COLL_STEP_SEND; }

/* Short description of step i of rank r, for messages. */
static const char* simDesc(simCtx* X, int r, int i, char* out, size_t sz) {
  const collStep* st = &X->rk[r].s.steps[i];
  snprintf(out, sz,
           "rank %d step %d (%s phase %u peer %d src %s blk %u off %zu n %zu "
           "dst %s blk %u off %zu n %zu)",
           r, i, simKindName(st->kind), (unsigned)st->phase, (int)st->peer,
           simBufName(st->src.buf), (unsigned)st->src.blk, st->src.off,
           st->src.count, simBufName(st->dst.buf), (unsigned)st->dst.blk,
           st->dst.off, st->dst.count);
  return out;
}

static void simSetViews(simCtx* X, int r) {
  const collSimConfig* cfg = X->cfg;
  simRank* R = &X->rk[r];
  const size_t c = X->c, N = (size_t)X->N;
  simView snd = {0, c, 1}, rcv = {0, c, 1};
  if (cfg->fn == COLL_FN_ALLGATHER) rcv.nblk = (uint32_t)N;
  if (cfg->fn == COLL_FN_REDUCESCATTER) snd.nblk = (uint32_t)N;
  if (cfg->fn == COLL_FN_BROADCAST && r != cfg->root) snd.nblk = 0;
  if (cfg->fn == COLL_FN_REDUCE && r != cfg->root) rcv.nblk = 0;
  const size_t ssz = snd.bsize * snd.nblk, rsz = rcv.bsize * rcv.nblk;
  if (R->inPlace && snd.nblk && rcv.nblk) {
    if (cfg->fn == COLL_FN_ALLGATHER) snd.base = (size_t)r * c;
    if (cfg->fn == COLL_FN_REDUCESCATTER) rcv.base = (size_t)r * c;
  } else {
    rcv.base = ssz;
  }
  size_t end = snd.base + ssz > rcv.base + rsz ? snd.base + ssz : rcv.base + rsz;
  R->view[COLL_BUF_SEND] = snd;
  R->view[COLL_BUF_RECV] = rcv;
  R->view[COLL_BUF_SCRATCH].base = end;
  R->view[COLL_BUF_SCRATCH].bsize = c;
  R->view[COLL_BUF_SCRATCH].nblk = (uint32_t)R->s.scratchBlocks;
  R->memSize = end + c * (size_t)R->s.scratchBlocks;
}

/* Region -> first element address; fails when out of bounds. */
static int simResolve(simCtx* X, int r, int i, const collRegion* g,
                      const char* role, size_t* addr) {
  char d[256];
  if (g->buf > COLL_BUF_SCRATCH)
    return simFail(X, "%s: %s region uses buffer id %u",
                   simDesc(X, r, i, d, sizeof d), role, (unsigned)g->buf);
  const simView* v = &X->rk[r].view[g->buf];
  if (v->nblk == 0)
    return simFail(X, "%s: %s region touches %s, absent on this rank",
                   simDesc(X, r, i, d, sizeof d), role, simBufName(g->buf));
  if (g->blk >= v->nblk || g->off > v->bsize || g->count > v->bsize - g->off)
    return simFail(X,
                   "%s: %s region out of bounds (%s has %u blocks of %zu)",
                   simDesc(X, r, i, d, sizeof d), role, simBufName(g->buf),
                   (unsigned)v->nblk, v->bsize);
  *addr = v->base + (size_t)g->blk * v->bsize + g->off;
  return 0;
}

/* [a, a+n) and [b, b+m) intersect. */
static int simOverlap(size_t a, size_t n, size_t b, size_t m) {
  return a < b + m && b < a + n;
}

static int simCheckStatic(simCtx* X, int r) {
  simRank* R = &X->rk[r];
  const collSched* s = &R->s;
  char d[256], d2[256];
  for (int i = 0; i < s->nsteps; i++) {
    const collStep* st = &s->steps[i];
    simDesc(X, r, i, d, sizeof d);
    if (st->kind > COLL_STEP_REDUCE)
      return simFail(X, "%s: unknown step kind %u", d, (unsigned)st->kind);
    if (i > 0 && st->phase < s->steps[i - 1].phase)
      return simFail(X, "%s: steps not in phase order", d);
    if (st->phase >= s->nphases)
      return simFail(X, "%s: phase beyond nphases %d", d, s->nphases);
    if (simIsComm(st->kind)) {
      if (st->peer < 0 || st->peer >= X->N || st->peer == r)
        return simFail(X, "%s: bad peer", d);
    } else if (st->peer != -1) {
      return simFail(X, "%s: local step with peer != -1", d);
    }
    if (st->kind >= COLL_STEP_RECV_REDUCE && st->src.count != st->dst.count)
      return simFail(X, "%s: src and dst counts differ", d);
    R->n[i] = st->kind == COLL_STEP_SEND ? st->src.count : st->dst.count;
    if (R->n[i] == 0) continue;
    if (simReadsSrc(st->kind) &&
        simResolve(X, r, i, &st->src, "src", &R->src[i]) != 0)
      return -1;
    if (simWritesDst(st->kind)) {
      if (st->dst.buf == COLL_BUF_SEND)
        return simFail(X, "%s: writes COLL_BUF_SEND", d);
      if (simResolve(X, r, i, &st->dst, "dst", &R->dst[i]) != 0) return -1;
    }
    if (simReadsSrc(st->kind) && simWritesDst(st->kind) &&
        simOverlap(R->src[i], R->n[i], R->dst[i], R->n[i]) &&
        (R->src[i] != R->dst[i] || st->kind == COLL_STEP_REDUCE))
      return simFail(X, "%s: src and dst overlap", d);
  }
  /* Steps of one phase run concurrently: no conflicting accesses. */
  for (int i = 0; i < s->nsteps; i++) {
    if (R->n[i] == 0) continue;
    const int ki = s->steps[i].kind;
    for (int j = i + 1; j < s->nsteps && s->steps[j].phase == s->steps[i].phase;
         j++) {
      const int kj = s->steps[j].kind;
      const size_t n = R->n[i], m = R->n[j];
      if (m == 0) continue;
      int bad = 0;
      if (simWritesDst(ki) && simWritesDst(kj))
        bad |= simOverlap(R->dst[i], n, R->dst[j], m);
      if (simWritesDst(ki) && simReadsSrc(kj))
        bad |= simOverlap(R->dst[i], n, R->src[j], m);
      if (simReadsSrc(ki) && simWritesDst(kj))
        bad |= simOverlap(R->src[i], n, R->dst[j], m);
      if (bad)
        return simFail(X, "race in one phase between %s and %s",
                       simDesc(X, r, i, d, sizeof d),
                       simDesc(X, r, j, d2, sizeof d2));
    }
  }
  return 0;
}

/* Fails if any of n elements at addr was never written. */
static int simCheckInit(simCtx* X, int r, int i, size_t addr, size_t n,
                        const char* role) {
  const int32_t* t = X->rk[r].tag + addr;
  for (size_t e = 0; e < n; e++)
    if (t[e] < 0) {
      char d[256];
      return simFail(X, "%s: %s element %zu was never written", simDesc(X, r, i, d, sizeof d),
                     role, e);
    }
  return 0;
}

/* dst[e] = (a[e] op mem[b + e]) on rank r; tags must match. */
static int simCombine(simCtx* X, int r, int i, const int32_t* atag,
                      const uint8_t* acnt, size_t b, size_t dst, size_t n) {
  simRank* R = &X->rk[r];
  const size_t N = (size_t)X->N;
  for (size_t e = 0; e < n; e++) {
    const int32_t tb = R->tag[b + e];
    if (atag[e] != tb) {
      char d[256];
      return simFail(X, "%s: element %zu reduces tag %d with tag %d",
                     simDesc(X, r, i, d, sizeof d), e, (int)atag[e], (int)tb);
    }
    const uint8_t* ca = acnt + e * N;
    const uint8_t* cb = R->cnt + (b + e) * N;
    uint8_t* cd = R->cnt + (dst + e) * N;
    for (size_t k = 0; k < N; k++) {
      unsigned v = (unsigned)ca[k] + cb[k];
      cd[k] = (uint8_t)(v > 255 ? 255 : v);
    }
    R->tag[dst + e] = tb;
  }
  return 0;
}

static int simStartPhase(simCtx* X, int r) {
  simRank* R = &X->rk[r];
  const size_t N = (size_t)X->N;
  R->hi = R->lo;
  while (R->hi < R->s.nsteps && R->s.steps[R->hi].phase == R->s.steps[R->lo].phase)
    R->hi++;
  for (int i = R->lo; i < R->hi; i++) {
    const collStep* st = &R->s.steps[i];
    const size_t n = R->n[i];
    if (n == 0) {
      R->done[i] = 1;
      continue;
    }
    switch (st->kind) {
      case COLL_STEP_SEND: {
        if (simCheckInit(X, r, i, R->src[i], n, "src") != 0) return -1;
        simMsg* m = calloc(1, sizeof(*m));
        if (m) m->tag = malloc(n * sizeof(int32_t));
        if (m) m->cnt = malloc(n * N);
        if (!m || !m->tag || !m->cnt) {
          if (m) free(m->tag);
          free(m);
          return simFail(X, "out of memory");
        }
        m->srank = r;
        m->sstep = i;
        m->n = n;
        memcpy(m->tag, R->tag + R->src[i], n * sizeof(int32_t));
        memcpy(m->cnt, R->cnt + R->src[i] * N, n * N);
        simQueue* q = &X->q[(size_t)r * N + (size_t)st->peer];
        if (q->tail) q->tail->next = m;
        else q->head = m;
        q->tail = m;
        R->sent += n;
        R->done[i] = (unsigned char)(X->cfg->eager != 0);
        break;
      }
      case COLL_STEP_COPY:
        if (simCheckInit(X, r, i, R->src[i], n, "src") != 0) return -1;
        memmove(R->tag + R->dst[i], R->tag + R->src[i], n * sizeof(int32_t));
        memmove(R->cnt + R->dst[i] * N, R->cnt + R->src[i] * N, n * N);
        R->done[i] = 1;
        break;
      case COLL_STEP_REDUCE:
        if (simCheckInit(X, r, i, R->src[i], n, "src") != 0 ||
            simCheckInit(X, r, i, R->dst[i], n, "dst") != 0 ||
            simCombine(X, r, i, R->tag + R->src[i], R->cnt + R->src[i] * N,
                       R->dst[i], R->dst[i], n) != 0)
          return -1;
        R->done[i] = 1;
        break;
      default: /* receives wait for their message */
        break;
    }
  }
  R->started = 1;
  return 0;
}

static int simConsume(simCtx* X, int r, int i, simMsg* m) {
  simRank* R = &X->rk[r];
  const collStep* st = &R->s.steps[i];
  const size_t N = (size_t)X->N, n = R->n[i];
  char d[256], d2[256];
  if (m->n != n)
    return simFail(X, "%s: size mismatch, message has %zu elements (from %s)",
                   simDesc(X, r, i, d, sizeof d), m->n,
                   simDesc(X, m->srank, m->sstep, d2, sizeof d2));
  if (st->kind == COLL_STEP_RECV) {
    memcpy(R->tag + R->dst[i], m->tag, n * sizeof(int32_t));
    memcpy(R->cnt + R->dst[i] * N, m->cnt, n * N);
  } else if (simCheckInit(X, r, i, R->src[i], n, "src") != 0 ||
             simCombine(X, r, i, m->tag, m->cnt, R->src[i], R->dst[i], n) != 0) {
    return -1;
  }
  R->done[i] = 1;
  X->rk[m->srank].done[m->sstep] = 1; /* rendezvous: the send completes */
  return 0;
}

/* Runs rank r as far as it can; sets *progress when anything happened. */
static int simAdvance(simCtx* X, int r, int* progress) {
  simRank* R = &X->rk[r];
  for (;;) {
    if (R->lo >= R->s.nsteps) return 0;
    if (!R->started) {
      if (simStartPhase(X, r) != 0) return -1;
      *progress = 1;
    }
    memset(X->busy, 0, (size_t)X->N);
    int pending = 0;
    for (int i = R->lo; i < R->hi; i++) {
      const collStep* st = &R->s.steps[i];
      if (R->done[i]) continue;
      if (!simIsRecv(st->kind) || X->busy[st->peer]) {
        pending = 1;
        continue;
      }
      simQueue* q = &X->q[(size_t)st->peer * (size_t)X->N + (size_t)r];
      simMsg* m = q->head;
      if (!m) { /* later receives from this peer match later messages */
        X->busy[st->peer] = 1;
        pending = 1;
        continue;
      }
      q->head = m->next;
      if (!q->head) q->tail = NULL;
      int rc = simConsume(X, r, i, m);
      free(m->tag);
      free(m->cnt);
      free(m);
      if (rc != 0) return -1;
      *progress = 1;
    }
    if (pending) return 0;
    R->lo = R->hi;
    R->started = 0;
  }
}

static int simDeadlock(simCtx* X) {
  char buf[600], d[256];
  size_t len = 0;
  int shown = 0;
  buf[0] = '\0';
  for (int r = 0; r < X->N && shown < 2; r++) {
    simRank* R = &X->rk[r];
    if (R->lo >= R->s.nsteps) continue;
    int i = R->lo;
    while (i < R->hi && R->done[i]) i++;
    if (i >= R->hi) continue;
    int w = snprintf(buf + len, sizeof(buf) - len, "%s waits; ",
                     simDesc(X, r, i, d, sizeof d));
    if (w > 0 && (size_t)w < sizeof(buf) - len) len += (size_t)w;
    shown++;
  }
  return simFail(X, "deadlock: %s", buf);
}

static int simElemOk(simCtx* X, int r, size_t addr, int32_t tag, int origin) {
  const simRank* R = &X->rk[r];
  if (R->tag[addr] != tag) return 0;
  const uint8_t* cnt = R->cnt + addr * (size_t)X->N;
  for (int k = 0; k < X->N; k++)
    if (cnt[k] != (origin < 0 ? 1 : (k == origin))) return 0;
  return 1;
}

static int simBadElem(simCtx* X, int r, const char* what, size_t idx,
                      size_t addr, int32_t tag, int origin) {
  const simRank* R = &X->rk[r];
  char got[80];
  int k = 0;
  for (; k < X->N && k < (int)sizeof(got) - 4; k++) {
    unsigned v = R->cnt[addr * (size_t)X->N + (size_t)k];
    got[k] = (char)(v < 10 ? '0' + v : '+');
  }
  got[k] = '\0';
  return simFail(X,
                 "rank %d %s element %zu: expected tag %d with %s, got tag %d "
                 "with contributions per rank [%s]",
                 r, what, idx, (int)tag,
                 origin < 0 ? "one contribution of every rank"
                            : "only the origin rank's contribution",
                 (int)R->tag[addr], got);
}

static int simCheckResult(simCtx* X) {
  const collSimConfig* cfg = X->cfg;
  const size_t c = X->c, N = (size_t)X->N;
  for (int a = 0; a < X->N; a++)
    for (int b = 0; b < X->N; b++) {
      simMsg* m = X->q[(size_t)a * N + (size_t)b].head;
      if (m) {
        char d[256];
        return simFail(X, "unmatched message to rank %d from %s", b,
                       simDesc(X, a, m->sstep, d, sizeof d));
      }
    }
  for (int r = 0; r < X->N; r++) {
    const simRank* R = &X->rk[r];
    const simView* rv = &R->view[COLL_BUF_RECV];
    const simView* sv = &R->view[COLL_BUF_SEND];
    const size_t rsz = rv->bsize * rv->nblk, ssz = sv->bsize * sv->nblk;
    for (size_t j = 0; j < rsz; j++) {
      int32_t tag = (int32_t)j;
      int origin = -1;
      switch (cfg->fn) {
        case COLL_FN_ALLGATHER: tag = (int32_t)(j % c); origin = (int)(j / c); break;
        case COLL_FN_REDUCESCATTER: tag = (int32_t)((size_t)r * c + j); break;
        case COLL_FN_BROADCAST: origin = cfg->root; break;
        default: break;
      }
      if (!simElemOk(X, r, rv->base + j, tag, origin))
        return simBadElem(X, r, "RECV", j, rv->base + j, tag, origin);
    }
    for (size_t j = 0; j < ssz; j++) {
      const size_t addr = sv->base + j;
      if (rsz && addr >= rv->base && addr < rv->base + rsz) continue;
      if (!simElemOk(X, r, addr, (int32_t)j, r))
        return simBadElem(X, r, "SEND (must stay unchanged)", j, addr,
                          (int32_t)j, r);
    }
  }
  return 0;
}

static int simRunAll(simCtx* X, collSchedBuildFn build) {
  const collSimConfig* cfg = X->cfg;
  const size_t N = (size_t)X->N;
  for (int r = 0; r < X->N; r++) {
    simRank* R = &X->rk[r];
    R->inPlace = cfg->place == COLL_SIM_IN_PLACE ||
                 (cfg->place == COLL_SIM_IN_PLACE_ODD && (r & 1));
    collSchedArgs a = {cfg->fn, X->N, r, cfg->root, cfg->count, R->inPlace, cfg->rankNode, cfg->nnodes};
    collSchedReset(&R->s);
    collResult_t rc = build(&a, &R->s);
    if (rc != collSuccess)
      return simFail(X, "builder failed on rank %d: result %d", r, (int)rc);
    if (R->s.nsteps < 0 || (R->s.nsteps > 0 && !R->s.steps) ||
        R->s.scratchBlocks < 0)
      return simFail(X, "rank %d: malformed schedule", r);
    if (R->s.nsteps > X->res->maxSteps) X->res->maxSteps = R->s.nsteps;
    if (R->s.nphases > X->res->maxPhases) X->res->maxPhases = R->s.nphases;
    if (R->s.scratchBlocks > X->res->maxScratchBlocks)
      X->res->maxScratchBlocks = R->s.scratchBlocks;
    simSetViews(X, r);
    const size_t ns = (size_t)R->s.nsteps + 1, mem = R->memSize + 1;
    R->src = calloc(ns, sizeof(size_t));
    R->dst = calloc(ns, sizeof(size_t));
    R->n = calloc(ns, sizeof(size_t));
    R->done = calloc(ns, 1);
    R->tag = malloc(mem * sizeof(int32_t));
    R->cnt = calloc(mem, N);
    if (!R->src || !R->dst || !R->n || !R->done || !R->tag || !R->cnt)
      return simFail(X, "out of memory");
    for (size_t e = 0; e < mem; e++) R->tag[e] = -1;
    const simView* sv = &R->view[COLL_BUF_SEND];
    for (size_t j = 0; j < sv->bsize * sv->nblk; j++) {
      R->tag[sv->base + j] = (int32_t)j;
      R->cnt[(sv->base + j) * N + (size_t)r] = 1;
    }
    if (simCheckStatic(X, r) != 0) return -1;
  }
  for (;;) {
    int progress = 0, finished = 1;
    for (int r = 0; r < X->N; r++)
      if (simAdvance(X, r, &progress) != 0) return -1;
    for (int r = 0; r < X->N; r++)
      if (X->rk[r].lo < X->rk[r].s.nsteps) finished = 0;
    if (finished) break;
    if (!progress) return simDeadlock(X);
  }
  return simCheckResult(X);
}

int collSimRun(const collSimConfig* cfg, collSchedBuildFn build,
               collSimResult* res) {
  memset(res, 0, sizeof(*res));
  res->ok = 1;
  simCtx X;
  memset(&X, 0, sizeof(X));
  X.cfg = cfg;
  X.res = res;
  X.N = cfg->nranks;
  X.c = cfg->count;
  const int rooted = cfg->fn == COLL_FN_BROADCAST || cfg->fn == COLL_FN_REDUCE;
  if (cfg->nranks < 1 || cfg->nranks > SIM_MAX_RANKS || !build ||
      cfg->fn > COLL_FN_REDUCE ||
      (rooted && (cfg->root < 0 || cfg->root >= cfg->nranks)) ||
      cfg->count > (size_t)INT32_MAX / (size_t)cfg->nranks)
    return simFail(&X, "bad simulator configuration");
  const size_t N = (size_t)X.N;
  X.rk = calloc(N, sizeof(simRank));
  X.q = calloc(N * N, sizeof(simQueue));
  X.busy = calloc(N, 1);
  if (!X.rk || !X.q || !X.busy) simFail(&X, "out of memory");
  else simRunAll(&X, build);
  for (size_t r = 0; X.rk && r < N; r++) {
    simRank* R = &X.rk[r];
    res->totalSentElems += R->sent;
    if (R->sent > res->maxSentElems) res->maxSentElems = R->sent;
    collSchedFree(&R->s);
    free(R->src);
    free(R->dst);
    free(R->n);
    free(R->done);
    free(R->tag);
    free(R->cnt);
  }
  for (size_t k = 0; X.q && k < N * N; k++)
    while (X.q[k].head) {
      simMsg* m = X.q[k].head;
      X.q[k].head = m->next;
      free(m->tag);
      free(m->cnt);
      free(m);
    }
  free(X.rk);
  free(X.q);
  free(X.busy);
  return res->ok;
}
