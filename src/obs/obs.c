/*
 * obs.c - the hooks of obs.h that are not inline: setup and teardown,
 * call ends that time or fail, send/recv batches, waits, failures, and the
 * dispatch of events to the trace (trace.c) and a profiler plugin
 * (profiler.c).
 */
#include "obs/obs.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algorithms/algorithms.h"
#include "misc/log.h"
#include "misc/param.h"
#include "obs/obs_internal.h"

uint64_t collObsNowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int collObsAlgoId(const void* algo) {
  if (!algo) return COLL_OBS_ALGO_NONE;
  int id = (int)((const collAlgo*)algo - collAlgoTable);
  return id >= 0 && id < COLL_OBS_ALGO_MAILBOX ? id : COLL_OBS_ALGO_NONE;
}

const char* collObsAlgoName(int id) {
  if (id == COLL_OBS_ALGO_MAILBOX) return "mailbox";
  if (id == COLL_OBS_ALGO_P2P) return "p2p";
  if (id < 0 || id >= COLL_OBS_ALGO_MAILBOX) return "none";
  for (int i = 0; i <= id; i++)
    if (!collAlgoTable[i].name) return "none";
  return collAlgoTable[id].name;
}

const char* collObsFnName(int fn) {
  static const char* names[COLL_OBS_FNS] = {"all-reduce", "all-gather", "reduce-scatter", "broadcast",
                                            "reduce",     "send",       "recv",           "barrier"};
  return fn >= 0 && fn < COLL_OBS_FNS ? names[fn] : "?";
}

/* ---- setup ------------------------------------------------------------------ */
/* No open run; the next mailbox call is timed (and every one with events). */
static void collObsHotReset(collComm_t comm, int events) {
  collObsHot* h = &comm->obsHot;
  memset(h, 0, sizeof *h);
  h->fn = -1;
  h->mbLeft = 1;
  h->events = events;
}

collResult_t collObsInit(collComm_t comm) {
  int rows = 0;
  while (collAlgoTable[rows].name) rows++;
  if (rows > COLL_OBS_ALGO_MAILBOX)
    return collSetError(collInternalError, "obs: %d algorithms, room for %d", rows, COLL_OBS_ALGO_MAILBOX);
  struct collObs* o = calloc(1, sizeof *o);
  if (!o) return collSetError(collSystemError, "init: out of memory (counters)");
  o->rank = comm->rank;
  o->nranks = comm->nranks;
  o->waitPeer = -1;
  int64_t want = collParamInt(COLL_PARAM_FR_ENTRIES);
  o->frSize = 1;
  while ((int64_t)o->frSize < want) o->frSize <<= 1;
  o->frMask = o->frSize - 1;
  collObsHotReset(comm, 0);
  o->peers = calloc((size_t)comm->nranks, sizeof *o->peers);
  o->fr = calloc(o->frSize, sizeof *o->fr); /* COLL_FR_ENTRIES=0: one slot, overwritten every call */
  if (!o->peers || !o->fr) {
    free(o->peers);
    free(o->fr);
    free(o);
    return collSetError(collSystemError, "init: out of memory (counters)");
  }
  o->cur = o->frCur = &o->fr[0];
  o->frEnd = o->fr + o->frSize;
  o->tInitNs = collObsNowNs();
  __atomic_store_n(&comm->obs, o, __ATOMIC_RELEASE);
  return collSuccess;
}

/* Zeroes what init itself did (COLL_TUNE_CALIBRATE's ping-pongs), then
 * starts the event consumers. */
collResult_t collObsStart(collComm_t comm) {
  struct collObs* o = comm->obs;
  memset(o->peers, 0, sizeof *o->peers * (size_t)o->nranks);
  memset(o->coll, 0, sizeof o->coll);
  memset(o->fr, 0, sizeof *o->fr * o->frSize);
  o->collSeq = o->p2pSeq = 0;
  o->frNext = 0;
  o->cur = o->frCur = &o->fr[0];
  o->curBits = 0;
  o->gen = 0;
  o->soloNext = 0;
  collObsHotReset(comm, 0);
  o->waitSinceNs = 0;
  o->tInitNs = collObsNowNs();
  const char* trace = collParamStr(COLL_SPARAM_TRACE_FILE);
  const char* plugin = collParamStr(COLL_SPARAM_PROFILER_PLUGIN);
  if (trace || plugin) {
    struct collObsEvents* ev = calloc(1, sizeof *ev);
    if (!ev) return collSetError(collSystemError, "init: out of memory (events)");
    o->ev = ev;
    if (trace && !(ev->trace = collObsTraceCreate()))
      return collSetError(collSystemError, "init: out of memory (COLL_TRACE_FILE buffer)");
    if (plugin) {
      collResult_t r = collObsProfilerLoad(comm, &ev->prof);
      if (r != collSuccess) return r;
    }
    o->events = ev->trace || ev->prof.mask;
    collObsHotReset(comm, o->events);
  }
  if (collParamInt(COLL_PARAM_FR_SIGNAL) > 0) collObsSignalSetup();
  o->started = 1;
  return collSuccess;
}

void collObsFree(collComm_t comm) {
  struct collObs* o = comm->obs;
  if (!o) return;
  char amsg[sizeof comm->asyncMsg];
  collCommErrorMessage(comm, amsg, sizeof amsg);
  const char* why = strstr(amsg, "collCommAbort was called") ? "abort" : "destroy";
  char used[1024];
  const char* spec = collParamStr(COLL_SPARAM_STATS_FILE);
  FILE* f = spec && o->started ? collObsOpen(comm, spec, "COLL_STATS_FILE", used, sizeof used) : NULL;
  if (f) {
    collObsWriteStats(comm, f, why);
    fclose(f);
  }
  int failed = __atomic_load_n(&comm->asyncError, __ATOMIC_ACQUIRE) != collSuccess;
  if ((failed || o->failed) && !COLL_OBS_GET(o->frDumped)) collObsDumpFlightRecord(comm, NULL, why, 0);
  struct collObsEvents* ev = o->ev;
  if (ev) {
    spec = collParamStr(COLL_SPARAM_TRACE_FILE);
    if (ev->trace && spec && o->started && (f = collObsOpen(comm, spec, "COLL_TRACE_FILE", used, sizeof used))) {
      collObsTraceWrite(comm, ev->trace, f);
      fclose(f);
    }
    collObsTraceFree(ev->trace);
    collObsProfilerUnload(&ev->prof);
    for (int c = 0; c < COLL_MAX_CHANNELS; c++) free(ev->ch[c].s);
    free(ev->p2pHandles);
    free(ev);
  }
  collObsHotReset(comm, 0);
  __atomic_store_n(&comm->obs, NULL, __ATOMIC_RELEASE);
  free(o->peers);
  free(o->fr);
  free(o);
}

/* ---- records and runs ------------------------------------------------------------ */
/* The next flight-recorder record to write (counted written). */
static collObsRecord* collObsNextRecord(struct collObs* o) {
  collObsRecord* e = o->frCur;
  collObsRecord* n = e + 1;
  o->frCur = n == o->frEnd ? o->fr : n;
  COLL_OBS_SET(o->frNext, o->frNext + 1); /* single writer; readers load it whole */
  return e;
}

static uint32_t collObsFnOf(collComm_t comm, const collOp* op) {
  return op->sendbuff == &comm->barrierBuf[0] ? COLL_OBS_FN_BARRIER : (uint32_t)op->fn;
}

/* Writes the record of the collective op (state, algorithm algo on nch
 * channels, not timed, one call, seq o->collSeq; peer = root unless
 * noRoot: -1), makes it o->cur. */
static collObsRecord* collObsRecordOp(struct collObs* o, collComm_t comm, const collOp* op, int state, int algo,
                                      int nch, int noRoot) {
  collObsRecord* e = collObsNextRecord(o);
  collObsRecord w;
  memset(&w, 0, sizeof w);
  w.fn = (uint8_t)collObsFnOf(comm, op);
  w.state = (uint8_t)state;
  w.algo = (uint8_t)algo;
  w.nch = (uint8_t)nch;
  w.dtype = (int32_t)op->dtype;
  w.op = (int32_t)op->op;
  w.peer = noRoot ? -1 : op->root;
  w.waitPeer = -1;
  COLL_OBS_SET(e->meta, w.meta);
  COLL_OBS_SET(e->dtypeOp, w.dtypeOp);
  COLL_OBS_SET(e->peers, w.peers);
  COLL_OBS_SET(e->seq, o->collSeq);
  COLL_OBS_SET(e->count, (uint64_t)op->count);
  COLL_OBS_SET(e->reps, 1);
  COLL_OBS_SET(e->opIdx, comm->opCount);
  COLL_OBS_SET(e->tWaitNs, 0);
  o->cur = e;
  return e;
}

/* Moves the first n calls of the open run into the ring (one record) and
 * the counters; inside a gen section (readers see them in one place). */
static void collObsRunMove(struct collObs* o, collComm_t comm, uint64_t n) {
  collObsHot* h = &comm->obsHot;
  if (!n) return;
  collObsRecord* e = collObsNextRecord(o);
  collObsRecord w;
  memset(&w, 0, sizeof w);
  w.fn = (uint8_t)o->runFn;
  w.state = COLL_OBS_REC_RUN;
  w.algo = (uint8_t)o->runAlgo;
  w.nch = (uint8_t)o->runNch;
  w.dtypeOp = h->dtypeOp;
  w.peer = o->runRoot;
  w.waitPeer = -1;
  COLL_OBS_SET(e->meta, w.meta);
  COLL_OBS_SET(e->dtypeOp, w.dtypeOp);
  COLL_OBS_SET(e->peers, w.peers);
  COLL_OBS_SET(e->seq, o->collSeq);
  COLL_OBS_SET(e->count, h->count);
  COLL_OBS_SET(e->reps, n);
  COLL_OBS_SET(e->opIdx, o->runOpIdx);
  COLL_OBS_SET(e->tWaitNs, 0);
  COLL_OBS_SET(e->chunk, 0);
  collObsColl* k = &o->coll[o->runFn][o->runAlgo];
  COLL_OBS_ADD(k->calls, n);
  COLL_OBS_ADD(k->bytes, n * h->count * collTypeSize((collDataType_t)w.dtype));
  COLL_OBS_SET(o->collSeq, o->collSeq + n);
  COLL_OBS_SET(h->reps, h->reps - n);
  o->runOpIdx += n;
  o->cur = e;
}

static void collObsGenBegin(struct collObs* o) {
  __atomic_store_n(&o->gen, o->gen + 1, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
}
static void collObsGenEnd(struct collObs* o) { __atomic_store_n(&o->gen, o->gen + 1, __ATOMIC_RELEASE); }

/* Ends the open run (its calls to the ring and the counters); no run after. */
static void collObsRunClose(struct collObs* o, collComm_t comm) {
  collObsHot* h = &comm->obsHot;
  if (h->reps) {
    collObsGenBegin(o);
    collObsRunMove(o, comm, h->reps);
    collObsGenEnd(o);
  }
  h->fn = -1;
}

/* When the running call is the open run's last: the calls before it stay
 * a run, it gets a record of its own (o->cur, state RUN: done once counted)
 * for what follows (its wait, its failure), and the run goes on after it. */
static void collObsRunSplit(struct collObs* o, collComm_t comm) {
  collObsHot* h = &comm->obsHot;
  if (!h->reps || o->runOpIdx + h->reps - 1 != comm->opCount) return;
  collObsGenBegin(o);
  collObsRunMove(o, comm, h->reps - 1);
  collObsRunMove(o, comm, 1);
  collObsGenEnd(o);
}

void collObsCollSnapshot(collComm_t comm, collObsColl (*k)[COLL_OBS_MAX_ALGOS]) {
  const struct collObs* o = comm->obs;
  const collObsHot* h = &comm->obsHot;
  for (int tries = 0;; tries++) {
    uint32_t g = __atomic_load_n(&o->gen, __ATOMIC_ACQUIRE);
    for (int fn = 0; fn < COLL_OBS_FNS; fn++)
      for (int a = 0; a < COLL_OBS_MAX_ALGOS; a++) {
        const collObsColl* q = &o->coll[fn][a];
        k[fn][a].calls = COLL_OBS_GET(q->calls);
        k[fn][a].failed = COLL_OBS_GET(q->failed);
        k[fn][a].bytes = COLL_OBS_GET(q->bytes);
        k[fn][a].timedCalls = COLL_OBS_GET(q->timedCalls);
        k[fn][a].timeNs = COLL_OBS_GET(q->timeNs);
      }
    uint64_t reps = COLL_OBS_GET(h->reps);
    int fn = COLL_OBS_GET(o->runFn), algo = COLL_OBS_GET(o->runAlgo);
    uint64_t count = COLL_OBS_GET(h->count), dtypeOp = COLL_OBS_GET(h->dtypeOp);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if ((g & 1) == 0 && __atomic_load_n(&o->gen, __ATOMIC_RELAXED) == g) {
      if (reps && fn >= 0 && fn < COLL_OBS_FNS && algo >= 0 && algo < COLL_OBS_MAX_ALGOS) {
        collObsRecord w;
        w.dtypeOp = dtypeOp;
        k[fn][algo].calls += reps;
        k[fn][algo].bytes += reps * count * collTypeSize((collDataType_t)w.dtype);
      }
      return;
    }
    if (tries > 1000) return; /* the engine keeps moving runs: a copy that may mix moments */
  }
}

/* ---- calls ---------------------------------------------------------------------- */
/* Ends the long wait that is open, counting it to the peer waited on. */
static void collObsCloseWait(struct collObs* o, uint64_t now) {
  if (!o->waitSinceNs) return;
  if (o->waitPeer >= 0 && o->waitPeer < o->nranks && now > o->waitSinceNs)
    COLL_OBS_ADD(o->peers[o->waitPeer].waitNs, now - o->waitSinceNs);
  o->waitSinceNs = 0;
}

/* Counters of one operation of the launch item that ends. */
static void collObsCount(struct collObs* o, collObsRecord* e, const collOp* op, int algo, uint64_t durNs, int timed,
                         collResult_t r) {
  collObsColl* k = &o->coll[e->fn][algo];
  uint64_t bytes = (uint64_t)op->count * collTypeSize(op->dtype);
  COLL_OBS_ADD(k->calls, 1);
  COLL_OBS_ADD(k->bytes, bytes);
  if (timed) {
    COLL_OBS_ADD(k->timedCalls, 1);
    COLL_OBS_ADD(k->timeNs, durNs);
  }
  if (r != collSuccess) COLL_OBS_ADD(k->failed, 1);
  COLL_OBS_SET(e->state, (uint8_t)(r == collSuccess ? COLL_OBS_REC_DONE : COLL_OBS_REC_FAILED));
}

/* Closes the steps of the ending operation that are still open (it failed). */
static void collObsCloseSlots(collComm_t comm, uint64_t now) {
  struct collObsEvents* ev = comm->obs->ev;
  for (int c = 0; c < COLL_MAX_CHANNELS; c++)
    for (int i = 0; i < ev->ch[c].cap; i++) {
      collObsSlot* s = &ev->ch[c].s[i];
      if (!s->open) continue;
      if (ev->trace) collObsTraceStep(ev->trace, c, s, now, 1);
      if (s->handle && ev->prof.ops) ev->prof.ops->stopEvent(s->handle);
      s->open = 0;
      s->handle = NULL;
    }
}

/* A mailbox call that does not extend the open run: the first of a new
 * run (1), or, one in COLL_OBS_MB_SAMPLE and every one with events, a
 * timed call with a record of its own that the caller ends (0). */
int collObsMailboxSlow(collComm_t comm, const collOp* op) {
  struct collObs* o = comm->obs;
  collObsHot* h = &comm->obsHot;
  int timed = h->mbLeft == 0;
  collObsRunClose(o, comm);
  memcpy(&h->dtypeOp, &op->dtype, sizeof h->dtypeOp);
  h->count = op->count;
  h->peer = op->peer;
  o->runFn = (int)collObsFnOf(comm, op);
  o->runAlgo = COLL_OBS_ALGO_MAILBOX;
  o->runNch = 1;
  o->runRoot = -1;
  if (!timed) {
    o->runOpIdx = comm->opCount;
    COLL_OBS_SET(h->reps, 1);
    h->fn = (int32_t)op->fn;
    return 1;
  }
  h->mbLeft = o->events ? 1 : COLL_OBS_MB_SAMPLE;
  collObsOpBeginImpl(comm, op);
  collObsOpAlgoImpl(comm, op, COLL_OBS_ALGO_MAILBOX, 1, 0);
  o->runOpIdx = comm->opCount + 1; /* equal calls after it: a run */
  h->fn = (int32_t)op->fn;
  return 0;
}

int collObsSoloSlow(collComm_t comm, const collOp* op) {
  struct collObs* o = comm->obs;
  collObsHot* h = &comm->obsHot;
  if (h->mbLeft == 0) h->mbLeft = o->events ? 1 : COLL_OBS_MB_SAMPLE;
  o->soloNext = 1; /* collObsOpEndImpl starts the run */
  return 0;
}

void collObsOpBeginImpl(collComm_t comm, const collOp* op) {
  struct collObs* o = comm->obs;
  collObsRunClose(o, comm);
  collObsRecordOp(o, comm, op, COLL_OBS_REC_RUNNING, COLL_OBS_ALGO_NONE, 0, 0);
  o->curN = 1;
  o->curBits = COLL_OBS_ALGO_NONE | COLL_OBS_CUR_OPEN;
}

void collObsOpAlgoImpl(collComm_t comm, const collOp* op, int algo, int nch, size_t chunk) {
  struct collObs* o = comm->obs;
  if (!(o->curBits & COLL_OBS_CUR_OPEN)) collObsOpBeginImpl(comm, op);
  collObsRecord* e = o->cur;
  collObsRecord w;
  w.meta = COLL_OBS_GET(e->meta);
  w.algo = (uint8_t)algo;
  w.nch = (uint8_t)nch;
  w.timed = 1;
  COLL_OBS_SET(e->chunk, (uint64_t)chunk);
  COLL_OBS_SET(e->tStartNs, collObsNowNs());
  COLL_OBS_SET(e->meta, w.meta);
  if (algo == COLL_OBS_ALGO_MAILBOX) COLL_OBS_SET(e->peer, -1);
  o->curBits = (uint32_t)algo | COLL_OBS_CUR_TIMED | COLL_OBS_CUR_OPEN;
  if (o->events) collObsEvOp(comm, 1, collSuccess);
}

collResult_t collObsOpEndImpl(collComm_t comm, const collOp* op, collResult_t r) {
  struct collObs* o = comm->obs;
  if (!(o->curBits & COLL_OBS_CUR_OPEN)) collObsOpBeginImpl(comm, op);
  collObsRecord* e = o->cur;
  int algo = (int)(o->curBits & 0xff), timed = (o->curBits & COLL_OBS_CUR_TIMED) != 0;
  uint64_t now = timed || o->events ? collObsNowNs() : 0;
  collObsCloseWait(o, now ? now : o->waitLastNs);
  if (timed) COLL_OBS_SET(e->tEndNs, now);
  collObsCount(o, e, op, algo, now - COLL_OBS_GET(e->tStartNs), timed, r);
  COLL_OBS_SET(o->collSeq, o->collSeq + 1);
  o->curBits = 0;
  if (o->soloNext) { /* one rank: the calls equal to this one form a run */
    o->soloNext = 0;
    collObsHot* h = &comm->obsHot;
    memcpy(&h->dtypeOp, &op->dtype, sizeof h->dtypeOp);
    h->count = op->count;
    h->peer = op->peer;
    o->runFn = e->fn;
    o->runAlgo = algo;
    o->runNch = e->nch;
    o->runRoot = collObsRecPeer(e);
    o->runOpIdx = comm->opCount + 1;
    h->fn = r == collSuccess ? (int32_t)op->fn : -1;
  }
  if (o->events) {
    if (r != collSuccess) collObsCloseSlots(comm, now);
    if (o->ev->trace) collObsTraceOp(o->ev->trace, e, e->tStartNs ? e->tStartNs : now, now, 1, op);
    collObsEvOp(comm, 0, r);
  }
  return r;
}

void collObsP2pBeginImpl(collComm_t comm, const collOp* ops, int n) {
  struct collObs* o = comm->obs;
  uint64_t now = collObsNowNs();
  collObsRunClose(o, comm);
  for (int i = 0; i < n; i++) {
    collObsRecord* e = collObsNextRecord(o);
    if (i == 0) o->cur = e;
    collObsRecord w;
    memset(&w, 0, sizeof w);
    w.fn = (uint8_t)ops[i].fn;
    w.dtype = (int32_t)ops[i].dtype;
    w.op = 0;
    w.state = COLL_OBS_REC_RUNNING;
    w.algo = COLL_OBS_ALGO_P2P;
    w.nch = (uint8_t)comm->nchannels;
    w.isP2p = 1;
    w.timed = 1;
    w.peer = ops[i].peer;
    w.waitPeer = -1;
    COLL_OBS_SET(e->meta, w.meta);
    COLL_OBS_SET(e->dtypeOp, w.dtypeOp);
    COLL_OBS_SET(e->peers, w.peers);
    COLL_OBS_SET(e->seq, o->p2pSeq);
    COLL_OBS_SET(e->count, (uint64_t)ops[i].count);
    COLL_OBS_SET(e->chunk, (uint64_t)comm->chunkBytes);
    COLL_OBS_SET(e->tStartNs, now);
    COLL_OBS_SET(e->tWaitNs, 0);
    COLL_OBS_SET(e->reps, 1);
  }
  o->curN = n;
  o->curBits = COLL_OBS_ALGO_P2P | COLL_OBS_CUR_TIMED | COLL_OBS_CUR_OPEN;
  if (!o->events) return;
  struct collObsEvents* ev = o->ev;
  ev->opStartNs = now;
  if (ev->prof.mask & collProfileP2p) {
    if (ev->p2pCap < n) {
      void** h = realloc(ev->p2pHandles, sizeof(void*) * (size_t)n);
      if (!h) return;
      ev->p2pHandles = h;
      ev->p2pCap = n;
    }
    for (int i = 0; i < n; i++) {
      collProfilerEventDescr_v1_t d;
      memset(&d, 0, sizeof d);
      d.type = collProfileP2p;
      d.parentObj = ev->groupHandle;
      d.rank = comm->rank;
      d.p2p.seqNumber = o->p2pSeq;
      d.p2p.func = ops[i].fn == COLL_FN_SEND ? "send" : "recv";
      d.p2p.buff = ops[i].fn == COLL_FN_SEND ? ops[i].sendbuff : ops[i].recvbuff;
      d.p2p.count = ops[i].count;
      d.p2p.datatype = ops[i].dtype;
      d.p2p.peer = ops[i].peer;
      d.p2p.bytes = ops[i].count * collTypeSize(ops[i].dtype);
      d.p2p.nChannels = comm->nchannels;
      ev->p2pHandles[i] = NULL;
      ev->prof.ops->startEvent(ev->prof.ctx, &ev->p2pHandles[i], &d);
    }
  }
  ev->waitReported = 0;
}

void collObsP2pEndImpl(collComm_t comm, const collOp* ops, int n, collResult_t r) {
  struct collObs* o = comm->obs;
  uint64_t now = collObsNowNs();
  collObsCloseWait(o, now);
  for (int i = 0; i < n; i++) {
    collObsRecord* e = &o->fr[(o->frNext - (uint64_t)(n - i)) & (o->frSize - 1)];
    COLL_OBS_SET(e->tEndNs, now);
    collObsCount(o, e, &ops[i], COLL_OBS_ALGO_P2P, now - e->tStartNs, 1, r);
  }
  COLL_OBS_SET(o->p2pSeq, o->p2pSeq + 1);
  o->curBits = 0;
  if (!o->events) return;
  struct collObsEvents* ev = o->ev;
  if (r != collSuccess) collObsCloseSlots(comm, now);
  if (ev->trace) collObsTraceOp(ev->trace, o->cur, ev->opStartNs, now, n, ops);
  if ((ev->prof.mask & collProfileP2p) && ev->p2pCap >= n)
    for (int i = 0; i < n; i++)
      if (ev->p2pHandles[i]) {
        ev->prof.ops->stopEvent(ev->p2pHandles[i]);
        ev->p2pHandles[i] = NULL;
      }
}

void collObsStepDoneImpl(collComm_t comm, int c, int i, int peer, int isSend, size_t bytes) {
  struct collObs* o = comm->obs;
  collObsPeer* p = &o->peers[peer];
  if (isSend) {
    COLL_OBS_ADD(p->bytesSent, bytes);
    COLL_OBS_ADD(p->msgsSent, 1);
  } else {
    COLL_OBS_ADD(p->bytesRecv, bytes);
    COLL_OBS_ADD(p->msgsRecv, 1);
  }
  if (o->events) collObsEvStep(comm, 0, c, i, 0, peer, bytes, 0, 0);
}

/* ---- waits ----------------------------------------------------------------------- */
void collObsWaitingImpl(collComm_t comm, int waitPeer, double sinceSec, double nowSec) {
  struct collObs* o = comm->obs;
  if (!o) return;
  collObsRunSplit(o, comm); /* a mailbox call of a run: its own record, for the wait */
  uint64_t now = (uint64_t)(nowSec * 1e9);
  if (!o->waitSinceNs) {
    uint64_t since = (uint64_t)(sinceSec * 1e9);
    o->waitSinceNs = since > 0 && since <= now ? since : now;
    COLL_OBS_SET(o->cur->tWaitNs, o->waitSinceNs);
  } else if (waitPeer != o->waitPeer && o->waitPeer >= 0 && o->waitPeer < o->nranks) {
    /* the wait moved on to another peer: the time so far was the last one's */
    COLL_OBS_ADD(o->peers[o->waitPeer].waitNs, now - o->waitSinceNs);
    o->waitSinceNs = now;
  }
  o->waitPeer = waitPeer;
  o->waitLastNs = now;
  collObsRecord* e = o->cur;
  COLL_OBS_SET(e->waitPeer, waitPeer);
  COLL_OBS_SET(e->waitCh, comm->obsHot.pendCh);
  COLL_OBS_SET(e->waitPhase, comm->obsHot.pendPhase);
  COLL_OBS_SET(e->waitStep, comm->obsHot.pendStep);
  struct collObsEvents* ev = o->ev;
  if (o->events && ev->prof.ops && !ev->waitReported) {
    void* h = (o->curBits & 0xff) == COLL_OBS_ALGO_P2P ? (ev->p2pCap > 0 ? ev->p2pHandles[0] : NULL) : ev->opHandle;
    collProfilerEventStateArgs_v1_t a;
    a.wait.peer = waitPeer;
    if (h) ev->prof.ops->recordEventState(h, collProfilerStateWaiting, &a);
    ev->waitReported = 1;
  }
}

void collObsWaitEndImpl(collComm_t comm) {
  struct collObs* o = comm->obs;
  if (o && o->waitSinceNs) collObsCloseWait(o, collObsNowNs());
}

void collObsFailureImpl(collComm_t comm, collResult_t r, const char* msg) {
  struct collObs* o = comm->obs;
  if (!o || o->failed) return;
  o->failed = 1;
  snprintf(o->error, sizeof o->error, "%s (%s)", msg ? msg : "", collGetErrorString(r));
  collObsRunSplit(o, comm);
  collObsRecord* c = o->cur;
  if (!o->curBits && c && c->state == COLL_OBS_REC_RUN && c->reps == 1 && c->opIdx == comm->opCount) {
    /* the call of a run that failed (counted in the run): failed too */
    COLL_OBS_SET(c->state, COLL_OBS_REC_FAILED);
    COLL_OBS_ADD(o->coll[c->fn][c->algo].failed, 1);
  }
  int n = (o->curBits & 0xff) == COLL_OBS_ALGO_P2P ? o->curN : 1;
  for (int i = 0; i < n && o->curBits; i++) {
    collObsRecord* e = &o->fr[(o->frNext - (uint64_t)(n - i)) & o->frMask];
    if (e->state == COLL_OBS_REC_RUNNING) COLL_OBS_SET(e->state, COLL_OBS_REC_FAILED);
  }
  if (collParamStr(COLL_SPARAM_FR_FILE))
    collObsDumpFlightRecord(comm, NULL, r == collTimeout ? "timeout" : "failure", 0);
}

/* ---- events ------------------------------------------------------------------------ */
void collObsEvLaunch(collComm_t comm, int begin, int nops, collResult_t r) {
  struct collObsEvents* ev = comm->obs->ev;
  (void)r;
  if (!(ev->prof.mask & collProfileGroup)) return;
  if (begin) {
    collProfilerEventDescr_v1_t d;
    memset(&d, 0, sizeof d);
    d.type = collProfileGroup;
    d.rank = comm->rank;
    d.group.seqNumber = ev->launchSeq++;
    d.group.nops = nops;
    ev->groupHandle = NULL;
    ev->prof.ops->startEvent(ev->prof.ctx, &ev->groupHandle, &d);
  } else if (ev->groupHandle) {
    ev->prof.ops->stopEvent(ev->groupHandle);
    ev->groupHandle = NULL;
  }
}

void collObsEvOp(collComm_t comm, int begin, collResult_t r) {
  struct collObs* o = comm->obs;
  struct collObsEvents* ev = o->ev;
  (void)r;
  if (begin) ev->waitReported = 0;
  if (!(ev->prof.mask & collProfileColl)) return;
  if (!begin) {
    if (ev->opHandle) ev->prof.ops->stopEvent(ev->opHandle);
    ev->opHandle = NULL;
    return;
  }
  const collObsRecord* e = o->cur;
  collProfilerEventDescr_v1_t d;
  memset(&d, 0, sizeof d);
  d.type = collProfileColl;
  d.parentObj = ev->groupHandle;
  d.rank = comm->rank;
  d.coll.seqNumber = e->seq;
  d.coll.func = collObsFnName(e->fn);
  d.coll.count = e->count;
  d.coll.datatype = (collDataType_t)e->dtype;
  d.coll.op = (collRedOp_t)e->op;
  d.coll.root = collObsRecPeer(e);
  d.coll.bytes = e->count * collTypeSize((collDataType_t)e->dtype);
  d.coll.algo = collObsAlgoName(e->algo);
  d.coll.nChannels = e->nch;
  d.coll.chunkBytes = e->chunk;
  ev->opHandle = NULL;
  ev->prof.ops->startEvent(ev->prof.ctx, &ev->opHandle, &d);
}

static collObsSlot* collObsSlotAt(struct collObsEvents* ev, int c, int i) {
  if (c < 0 || c >= COLL_MAX_CHANNELS || i < 0) return NULL;
  collObsChanSlots* cs = &ev->ch[c];
  if (i >= cs->cap) {
    int ncap = cs->cap ? cs->cap : 16;
    while (ncap <= i) ncap *= 2;
    collObsSlot* n = realloc(cs->s, sizeof *n * (size_t)ncap);
    if (!n) return NULL;
    memset(n + cs->cap, 0, sizeof *n * (size_t)(ncap - cs->cap));
    cs->s = n;
    cs->cap = ncap;
  }
  return &cs->s[i];
}

void collObsEvStep(collComm_t comm, int begin, int c, int i, int kind, int peer, size_t bytes, int phase,
                   size_t slice) {
  struct collObs* o = comm->obs;
  struct collObsEvents* ev = o->ev;
  collObsSlot* s = collObsSlotAt(ev, c, i);
  if (!s) return;
  if (begin) {
    s->postNs = collObsNowNs();
    s->bytes = bytes;
    s->slice = slice;
    s->peer = peer;
    s->phase = phase;
    s->kind = (uint8_t)kind;
    s->open = 1;
    s->handle = NULL;
    if (ev->prof.mask & collProfileStep) {
      static const char* kinds[] = {"send", "recv", "recv-reduce"};
      collProfilerEventDescr_v1_t d;
      memset(&d, 0, sizeof d);
      d.type = collProfileStep;
      d.rank = comm->rank;
      d.parentObj = (o->curBits & 0xff) == COLL_OBS_ALGO_P2P ? (phase >= 0 && phase < ev->p2pCap ? ev->p2pHandles[phase] : NULL)
                                                    : ev->opHandle;
      d.step.channel = c;
      d.step.peer = peer;
      d.step.isSend = kind == COLL_STEP_SEND;
      d.step.bytes = bytes;
      d.step.phase = phase;
      d.step.slice = slice;
      d.step.kind = kind >= 0 && kind <= 2 ? kinds[kind] : "?";
      ev->prof.ops->startEvent(ev->prof.ctx, &s->handle, &d);
    }
    return;
  }
  if (!s->open) return;
  if (ev->trace) collObsTraceStep(ev->trace, c, s, collObsNowNs(), 0);
  if (s->handle) ev->prof.ops->stopEvent(s->handle);
  s->handle = NULL;
  s->open = 0;
}
