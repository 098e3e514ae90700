/* cost.c - timing simulation of one slice on every rank (model in cost.h). */
#include "tuner/cost.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  collSched s;
  int* byPeer;      /* [2 * (n + 1)] start offsets: sends, then recvs */
  int* list;        /* step indices grouped by (direction, peer), in order */
  int* ord;         /* per step: ordinal among its (direction, peer) group */
  int* phaseBegin;  /* [nphases + 1]: first step of each phase */
  double* start;    /* [nphases + 1]: start time of each phase */
  int phase;        /* phases below are done; start[phase] is known */
  double busyCpu;   /* CPU time of its copies, reductions and shm and same-node network transfers (x cpuShare) */
  double busyWire;  /* time on its network link (full duplex: max of the directions per phase) */
  double netSent, netRecv; /* its inter-node bytes / bw, each direction */
  double busyLat;
  double cpuUs; /* CPU time of its transfer ends (sends and receives with data) */
} simRank;

static int isXfer(int k) { return k == COLL_STEP_SEND || k == COLL_STEP_RECV || k == COLL_STEP_RECV_REDUCE; }
static int dirOf(int k) { return k == COLL_STEP_SEND ? 0 : 1; }

int collCostPath(const collTuneLayout* l, int a, int b) {
  if (a == b) return COLL_PATH_SELF;
  if (l->rankNode && l->rankNode[a] != l->rankNode[b]) return COLL_PATH_NET;
  return l->intraShm ? COLL_PATH_SHM : COLL_PATH_LOCAL;
}

static void simRankFree(simRank* r) {
  collSchedFree(&r->s);
  free(r->byPeer);
  free(r->list);
  free(r->ord);
  free(r->phaseBegin);
  free(r->start);
}

/* Indexes rank r's steps by (direction, peer) and by phase. 0 on failure. */
static int simRankIndex(simRank* r, int n) {
  const collSched* s = &r->s;
  int ns = s->nsteps, np = s->nphases > 0 ? s->nphases : 1;
  r->byPeer = calloc(2 * ((size_t)n + 1), sizeof(int));
  r->list = malloc(sizeof(int) * ((size_t)ns + 1));
  r->ord = malloc(sizeof(int) * ((size_t)ns + 1));
  r->phaseBegin = calloc((size_t)np + 1, sizeof(int));
  r->start = calloc((size_t)np + 1, sizeof(double));
  if (!r->byPeer || !r->list || !r->ord || !r->phaseBegin || !r->start) return 0;
  int* cnt = r->byPeer; /* counts first, then turned into offsets */
  for (int i = 0; i < ns; i++) {
    const collStep* st = &s->steps[i];
    if (st->phase >= np) return 0;
    r->phaseBegin[st->phase + 1]++;
    if (isXfer(st->kind)) cnt[dirOf(st->kind) * (n + 1) + st->peer + 1]++;
  }
  for (int p = 0; p < np; p++) r->phaseBegin[p + 1] += r->phaseBegin[p];
  for (int i = 1; i < 2 * (n + 1); i++) cnt[i] += cnt[i - 1];
  /* fill: cnt[d*(n+1)+peer] is the group's start; use ord as a cursor */
  int* cursor = calloc(2 * (size_t)n, sizeof(int));
  if (!cursor) return 0;
  for (int i = 0; i < ns; i++) {
    const collStep* st = &s->steps[i];
    if (!isXfer(st->kind)) continue;
    int g = dirOf(st->kind) * n + st->peer;
    int base = cnt[dirOf(st->kind) * (n + 1) + st->peer];
    r->ord[i] = cursor[g];
    r->list[base + cursor[g]++] = i;
  }
  free(cursor);
  return 1;
}

typedef struct {
  const collTuneModel* m;
  const collTuneLayout* l;
  simRank* rk;
  size_t esize;
  int n;
} simCtx;

static double xferUs(const simCtx* c, int path, size_t bytes) {
  double t = (double)bytes / (c->m->bwGBs[path] * 1e3);
  return path == COLL_PATH_NET ? t : t * c->m->cpuShare;
}

/* Extra latency of a message whose receiver waits for a core: wakeUs for
 * each other rank per core. */
static double wakeUs(const collTuneModel* m) { return m->cpuShare > 1.0 ? m->wakeUs * (m->cpuShare - 1.0) : 0.0; }

static double latUs(const simCtx* c, int path) {
  return c->m->latUs[path] + c->m->stepUs * c->m->cpuShare + wakeUs(c->m);
}

/* Tries to finish rank r's current phase; 1 when it did. */
static int simAdvance(simCtx* c, int r) {
  simRank* R = &c->rk[r];
  const collSched* s = &R->s;
  int p = R->phase, n = c->n;
  double ps = R->start[p], end = ps, own = 0.0, lat = 0.0, sendT = 0.0, recvT = 0.0, cpuT = 0.0;
  for (int i = R->phaseBegin[p]; i < R->phaseBegin[p + 1]; i++) {
    const collStep* st = &s->steps[i];
    size_t cntElems = st->kind == COLL_STEP_SEND ? st->src.count : st->dst.count;
    size_t bytes = cntElems * c->esize;
    if (!isXfer(st->kind)) {
      if (bytes == 0) continue;
      double gbs = st->kind == COLL_STEP_COPY ? c->m->copyGBs : c->m->reduceGBs;
      own += (double)bytes / (gbs * 1e3) * c->m->cpuShare;
      continue;
    }
    if (bytes == 0) continue; /* a no-op on both sides, no dependency */
    const simRank* Q = &c->rk[st->peer];
    int other = 1 - dirOf(st->kind);
    int g = Q->byPeer[other * (n + 1) + r], gEnd = Q->byPeer[other * (n + 1) + r + 1];
    if (g + R->ord[i] >= gEnd) return 0; /* unmatched: treated as stuck */
    int j = Q->list[g + R->ord[i]];
    int qp = Q->s.steps[j].phase;
    if (Q->phase < qp) return 0; /* peer's post time not known yet */
    int path = collCostPath(c->l, r, st->peer);
    double t = xferUs(c, path, bytes), l1 = latUs(c, path);
    /* a socket end runs the kernel's network stack on this node's cores */
    R->cpuUs += c->m->stepUs + wakeUs(c->m) / 2 + (path == COLL_PATH_SHM ? 0.0 : c->m->latUs[path] / 2);
    double done = (ps > Q->start[qp] ? ps : Q->start[qp]) + l1 + t;
    if (st->kind == COLL_STEP_RECV_REDUCE) {
      double red = (double)bytes / (c->m->reduceGBs * 1e3) * c->m->cpuShare;
      done += red;
      own += red;
    }
    if (path != COLL_PATH_NET) cpuT += t; /* this rank's CPU copies it: sends and receives add up */
    else if (st->kind == COLL_STEP_SEND) sendT += t;
    else recvT += t;
    if (l1 > lat) lat = l1;
    if (done > end) end = done;
  }
  own += cpuT;
  double wire = sendT > recvT ? sendT : recvT; /* network links are full duplex */
  R->netSent += sendT;
  R->netRecv += recvT;
  if (ps + own + wire > end) end = ps + own + wire;
  R->busyCpu += own;
  R->busyWire += wire;
  R->busyLat += lat;
  R->start[++R->phase] = end;
  return 1;
}

/* The ranks of a node share its network links: the slice takes at least the
 * busiest node's inter-node time in one direction, spread over netLinks. */
static void nodeLinkBound(const collTuneLayout* l, const simRank* rk, collSliceCost* out) {
  if (!l->rankNode || l->nnodes <= 1) return;
  double* dir = calloc(2 * (size_t)l->nnodes, sizeof(double));
  if (!dir) return; /* the bound is a refinement; without it the estimate stands */
  for (int r = 0; r < l->nranks; r++) {
    int node = l->rankNode[r];
    if (node < 0 || node >= l->nnodes) continue;
    dir[2 * node] += rk[r].netSent;
    dir[2 * node + 1] += rk[r].netRecv;
  }
  double busiest = 0;
  for (int i = 0; i < 2 * l->nnodes; i++)
    if (dir[i] > busiest) busiest = dir[i];
  free(dir);
  busiest /= l->netLinks > 1 ? l->netLinks : 1;
  if (busiest > out->bwUs) out->bwUs = busiest;
  if (busiest > out->makespanUs) out->makespanUs = busiest;
}

static collSliceCost collCostSliceExact(const collTuneModel* m, const collTuneLayout* l, collSchedBuildFn build,
                                        collFunc fn, size_t count, size_t esize) {
  collSliceCost out = {0, 0, 0, 0};
  int n = l->nranks;
  simCtx c = {m, l, calloc((size_t)n, sizeof(simRank)), esize, n};
  if (!c.rk) return out;
  int ok = 1;
  for (int r = 0; r < n && ok; r++) {
    collSchedArgs a = {fn, n, r, 0, count, 0, l->rankNode, l->nnodes};
    ok = build(&a, &c.rk[r].s) == collSuccess && simRankIndex(&c.rk[r], n);
  }
  int remaining = n;
  while (ok && remaining > 0) {
    int moved = 0;
    remaining = 0;
    for (int r = 0; r < n; r++) {
      simRank* R = &c.rk[r];
      while (R->phase < R->s.nphases && simAdvance(&c, r)) moved = 1;
      if (R->phase < R->s.nphases) remaining++;
    }
    if (!moved && remaining) ok = 0; /* deadlock: the checker would fail it too */
  }
  if (ok) {
    double cpuSum = 0, busyCpuSum = 0;
    for (int r = 0; r < n; r++) {
      const simRank* R = &c.rk[r];
      double e = R->start[R->s.nphases > 0 ? R->s.nphases : 0];
      if (e > out.makespanUs) out.makespanUs = e;
      /* a rank is never faster than a whole core (busyCpu / cpuShare) */
      double own = R->busyWire + (m->cpuShare > 1.0 ? R->busyCpu / m->cpuShare : R->busyCpu);
      if (own > out.bwUs) out.bwUs = own;
      busyCpuSum += R->busyCpu;
      if (R->busyLat > out.latUs) out.latUs = R->busyLat;
      cpuSum += R->cpuUs;
    }
    if (m->cpuShare > 1.0) {
      /* the cores are shared: a slice cannot take less than the mean rank's
       * CPU time (already x cpuShare), however the work is spread */
      if (busyCpuSum / n > out.bwUs) out.bwUs = busyCpuSum / n;
      /* the node's cores must run every transfer end's wake-up and overhead */
      double cpu = cpuSum / n * m->cpuShare, crit = out.makespanUs;
      /* the two overlap only in part: others' work delays the critical path */
      out.makespanUs = (crit > cpu ? crit : cpu) + 0.5 * (crit < cpu ? crit : cpu);
      if (cpu > out.bwUs) out.bwUs = cpu;
    }
    nodeLinkBound(l, c.rk, &out);
    out.ok = 1;
  }
  for (int r = 0; r < n; r++) simRankFree(&c.rk[r]);
  free(c.rk);
  return out;
}

double collCostCall(const collSliceCost* c, size_t nslices, int channels) {
  if (!c->ok) return 1e30;
  if (nslices <= 1) return c->makespanUs;
  double pipelined = (c->bwUs + c->latUs) / (channels > 0 ? channels : 1);
  double period = c->bwUs > pipelined ? c->bwUs : pipelined;
  return c->makespanUs + (double)(nslices - 1) * period;
}

/* ---- large communicators: a proxy of at most COLL_COST_PROXY_RANKS ranks ----
 * Simulating every rank holds every rank's schedule at once: a ring or a
 * one-shot algorithm has O(n) steps per rank, so O(n^2) steps in all (512
 * ranks: 30 MB per rank, and every rank prices the same candidates), and
 * indexes them by peer (n^2 ints). When the steps of all ranks would pass
 * COLL_COST_MAX_SIM_STEPS, or there are more than COLL_COST_MAX_EXACT_RANKS
 * ranks, the slice is
 * simulated on a proxy of COLL_COST_PROXY_RANKS ranks with the same number
 * of nodes (up to 32, ranks spread evenly, blocked or round-robin as the
 * real layout is) and the same bytes per step, and its latency part is
 * scaled by rank 0's phase count at the real size over the proxy's, its
 * bandwidth part by rank 0's bytes moved (rank 0's own schedule at the real
 * size is built alone: O(n)). An estimate, the same on every rank. */
#define COLL_COST_MAX_SIM_STEPS (1 << 15)
#define COLL_COST_PROXY_RANKS 64
#define COLL_COST_MAX_EXACT_RANKS 256
#define COLL_COST_PROXY_NODES 32

/* Phases and bytes sent + received by rank r's schedule. 0 if it fails. */
static int collCostRankStats(collSchedBuildFn build, const collSchedArgs* a, size_t esize, int* steps, int* phases,
                             double* bytes) {
  collSched s;
  memset(&s, 0, sizeof s);
  if (build(a, &s) != collSuccess) {
    collSchedFree(&s);
    return 0;
  }
  double b = 0;
  for (int i = 0; i < s.nsteps; i++) {
    const collStep* st = &s.steps[i];
    if (st->kind == COLL_STEP_SEND) b += (double)st->src.count * (double)esize;
    else if (st->kind == COLL_STEP_RECV || st->kind == COLL_STEP_RECV_REDUCE) b += (double)st->dst.count * (double)esize;
  }
  *steps = s.nsteps;
  *phases = s.nphases;
  *bytes = b;
  collSchedFree(&s);
  return 1;
}

collSliceCost collCostSlice(const collTuneModel* m, const collTuneLayout* l, collSchedBuildFn build, collFunc fn,
                            size_t count, size_t esize) {
  collSliceCost none = {0, 0, 0, 0};
  int n = l->nranks;
  collSchedArgs a0 = {fn, n, 0, 0, count, 0, l->rankNode, l->nnodes};
  int steps0, phases0;
  double bytes0;
  if (n <= COLL_COST_PROXY_RANKS) return collCostSliceExact(m, l, build, fn, count, esize);
  if (!collCostRankStats(build, &a0, esize, &steps0, &phases0, &bytes0)) return none;
  /* the exact simulation also indexes each rank's steps by peer: n^2 ints */
  if (n <= COLL_COST_MAX_EXACT_RANKS && (double)steps0 * n <= COLL_COST_MAX_SIM_STEPS)
    return collCostSliceExact(m, l, build, fn, count, esize);
  /* the proxy layout */
  int pn = l->rankNode && l->nnodes > 1 ? (l->nnodes < COLL_COST_PROXY_NODES ? l->nnodes : COLL_COST_PROXY_NODES) : 1;
  int ppn = COLL_COST_PROXY_RANKS / pn;
  int maxPerNode = (n + l->nnodes - 1) / (l->nnodes > 0 ? l->nnodes : 1);
  if (ppn > maxPerNode) ppn = maxPerNode;
  if (ppn < 1) ppn = 1;
  int pr = pn * ppn;
  int* pnode = pn > 1 ? malloc(sizeof(int) * (size_t)pr) : NULL;
  if (pn > 1 && !pnode) return none;
  int changes = 0;
  for (int r = 0; pn > 1 && r + 1 < n; r++) changes += l->rankNode[r] != l->rankNode[r + 1];
  int roundRobin = pn > 1 && changes * 2 > n;
  for (int r = 0; pnode && r < pr; r++) pnode[r] = roundRobin ? r % pn : r / ppn;
  collTuneLayout pl = *l;
  pl.nranks = pr;
  pl.rankNode = pnode;
  pl.nnodes = pn;
  /* the same bytes per step: an all-reduce slice is cut into one block per rank */
  size_t pcount = fn == COLL_FN_ALLREDUCE ? (size_t)((double)count * pr / n) : count;
  if (fn == COLL_FN_ALLREDUCE && count > 0 && pcount == 0) pcount = 1;
  collSliceCost c = collCostSliceExact(m, &pl, build, fn, pcount, esize);
  collSchedArgs ap = {fn, pr, 0, 0, pcount, 0, pnode, pn};
  int stepsP, phasesP;
  double bytesP;
  if (c.ok && collCostRankStats(build, &ap, esize, &stepsP, &phasesP, &bytesP)) {
    double lf = phasesP > 0 ? (double)phases0 / phasesP : 1.0, bf = bytesP > 0 ? bytes0 / bytesP : 1.0;
    double lat = c.latUs * lf, bw = c.bwUs * bf, old = c.latUs + c.bwUs;
    c.makespanUs = old > 0 ? c.makespanUs * (lat + bw) / old : c.makespanUs * lf;
    c.latUs = lat;
    c.bwUs = bw;
  } else {
    c = none;
  }
  free(pnode);
  return c;
}
