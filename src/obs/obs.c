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
  o->mbLeft = 1;
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
  o->mbLeft = 1;
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
    comm->obsEvents = o->events;
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
  comm->obsEvents = 0;
  __atomic_store_n(&comm->obs, NULL, __ATOMIC_RELEASE);
  free(o->peers);
  free(o->fr);
  free(o);
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

/* The record of a collective that ended, failed or waited before its
 * algorithm was known. */
void collObsMaterialize(struct collObs* o, collComm_t comm) {
  if (o->curBits != COLL_OBS_CUR_PENDING) return;
  collObsRecordOp(o, comm, o->curOp, COLL_OBS_ALGO_NONE, 0, 0);
  o->curN = 1;
  o->curBits = COLL_OBS_ALGO_NONE;
}

void collObsOpAlgoSlow(collComm_t comm, const collOp* op, int algo, int nch, size_t chunk) {
  struct collObs* o = comm->obs;
  collObsRecordOp(o, comm, op, algo, nch, 0);
  collObsRecord* e = o->cur;
  if (algo == COLL_OBS_ALGO_MAILBOX) o->mbLeft = o->events ? 1 : COLL_OBS_MB_SAMPLE;
  o->curN = 1;
  o->curBits = (uint32_t)algo | COLL_OBS_CUR_TIMED;
  COLL_OBS_SET(e->chunk, (uint64_t)chunk);
  COLL_OBS_SET(e->tStartNs, collObsNowNs());
  COLL_OBS_SET(e->timed, 1);
  if (o->events) collObsEvOp(comm, 1, collSuccess);
}

void collObsOpEndSlow(collComm_t comm, const collOp* op, collResult_t r) {
  struct collObs* o = comm->obs;
  collObsMaterialize(o, comm);
  collObsRecord* e = o->cur;
  int algo = (int)(o->curBits & 0xff), timed = (o->curBits & COLL_OBS_CUR_TIMED) != 0;
  uint64_t now = timed || o->events ? collObsNowNs() : 0;
  collObsCloseWait(o, now ? now : o->waitLastNs);
  if (timed) COLL_OBS_SET(e->tEndNs, now);
  if (o->curBits & COLL_OBS_CUR_FAST) { /* counted at its start: it failed */
    if (r != collSuccess) COLL_OBS_ADD(o->coll[e->fn][algo].failed, 1);
    COLL_OBS_SET(e->state, (uint8_t)(r == collSuccess ? COLL_OBS_REC_DONE : COLL_OBS_REC_FAILED));
  } else {
    collObsCount(o, e, op, algo, now - e->tStartNs, timed, r);
    COLL_OBS_SET(o->collSeq, o->collSeq + 1);
  }
  o->curBits = 0;
  if (o->events) {
    if (r != collSuccess) collObsCloseSlots(comm, now);
    if (o->ev->trace) collObsTraceOp(o->ev->trace, e, e->tStartNs ? e->tStartNs : now, now, 1, op);
    collObsEvOp(comm, 0, r);
  }
}

void collObsP2pBeginImpl(collComm_t comm, const collOp* ops, int n) {
  struct collObs* o = comm->obs;
  uint64_t now = collObsNowNs();
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
  }
  o->curN = n;
  o->curBits = COLL_OBS_ALGO_P2P | COLL_OBS_CUR_TIMED;
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

/* ---- waits ----------------------------------------------------------------------- */
void collObsWaitingImpl(collComm_t comm, int waitPeer, double sinceSec, double nowSec) {
  struct collObs* o = comm->obs;
  if (!o) return;
  collObsMaterialize(o, comm);
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
  COLL_OBS_SET(e->waitCh, o->pendCh);
  COLL_OBS_SET(e->waitPhase, o->pendPhase);
  COLL_OBS_SET(e->waitStep, o->pendStep);
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
  collObsMaterialize(o, comm);
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
