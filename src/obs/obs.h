/*
 * obs.h - what a communicator did: counters (always on), the flight
 * recorder (always on), and the optional event consumers (COLL_TRACE_FILE
 * timeline, COLL_PROFILER_PLUGIN). The engine calls the hooks below at
 * clear points; the logic lives in src/obs/.
 *
 *   collEngineRun          collObsLaunchTraced: one flag test; with events on collObsLaunchBegin / End
 *   a mailbox collective   collObsMailbox: the one hook of the ~0.2 us path (below)
 *   other collectives      collObsOpBegin, collObsOpAlgo (what the tuner chose), collObsOpEnd;
 *                          collObsOpEmpty (count 0)
 *   per send/recv batch    collObsP2pBegin / collObsP2pEnd
 *   per transfer           collObsStepPost (events only), collObsStepDone (counters)
 *   per pending step       collObsPending (which step a wait is on)
 *   collIdleStep           collObsWaiting (at its clock reads), collObsWaitEnd; mbWaitAll collObsWaitDone
 *   collEngineFail         collObsFailure (flight-recorder dump)
 *
 * Cost: consecutive mailbox calls equal in function, count, type, op and
 * peer word (a barrier's is COLL_PEER_BARRIER) form a run, kept in comm->obsHot beside
 * the fields the engine reads anyway: a call that extends it costs one
 * countdown, four compares and one add, with no clock read and no end
 * hook (tools/obs_overhead.sh: ~15 instructions against ~1250 for the call
 * itself; 57 with the four hooks of before). The run's flight-recorder
 * record (one record, "reps" calls) and its counters are written when it
 * ends: at the next call that differs, at one in COLL_OBS_MB_SAMPLE
 * mailbox calls (timed, with a record of its own), when a wait or a
 * failure singles out its running call. Readers add the open run (a
 * generation count makes their copy consistent). Whether a run's last
 * call is still running comes from comm->opCount, which the engine counts
 * anyway. Durations of calls that run a schedule or a send/recv batch are
 * measured on every call. Waits are timed with the clock reads
 * collIdleStep already makes (every 8th idle poll, then every one, from the
 * second one of a wait on): a wait with fewer than two clock reads is not
 * counted. Building with -DCOLL_OBS=OFF (COLL_NO_OBS) compiles every hook
 * out, to measure what they cost.
 *
 * Threads: one thread runs a communicator's engine at a time (the issuing
 * thread or the progress thread); it is the only writer. Readers (the stats
 * API, a flight-recorder dump on another thread or on a signal) may run at
 * any time: each counter and record field is read whole, a snapshot across
 * fields may mix moments.
 */
#ifndef COLL_OBS_H_
#define COLL_OBS_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/comm.h"
#include "engine/engine.h"
#include "reduce/reduce.h"

#define COLL_OBS_MAX_ALGOS 32  /* registry rows, then mailbox, p2p, none */
#define COLL_OBS_FNS (COLL_FN_COUNT + 1) /* collFunc, then barrier */
#define COLL_OBS_FN_BARRIER COLL_FN_COUNT
#define COLL_OBS_MB_SAMPLE 256 /* mailbox and one-rank calls: one in this many is timed */
#define COLL_OBS_CUR_TIMED 0x100u /* curBits: the running operation is timed */
#define COLL_OBS_CUR_OPEN 0x200u  /* curBits: an operation with a record of its own runs (until its end hook) */

/* COLL_OBS_REC_RUN: calls of a run (collObsRecord.reps of them, from
 * comm->opCount opIdx on): done once the engine counted them (opCount). */
enum { COLL_OBS_REC_FREE = 0, COLL_OBS_REC_RUNNING = 1, COLL_OBS_REC_DONE = 2, COLL_OBS_REC_FAILED = 3,
       COLL_OBS_REC_RUN = 4 };

typedef struct {
  uint64_t bytesSent, bytesRecv, msgsSent, msgsRecv, waitNs;
} collObsPeer;

typedef struct {
  uint64_t calls, failed, bytes, timedCalls, timeNs;
} collObsColl;

/* One flight-recorder entry: an operation as it ran. */
typedef struct {
  uint64_t seq;      /* collectives: the communicator's collective number; p2p: its batch number */
  uint64_t count;    /* elements as passed */
  uint64_t chunk;    /* chunk bytes the tuner chose (0: none; stale for the mailbox) */
  uint64_t tStartNs; /* CLOCK_MONOTONIC ns; 0: not measured */
  uint64_t tEndNs;
  uint64_t tWaitNs;  /* when the current (or last) long wait began; 0: none */
  union { /* as in collOp (dtype, then op): copied as one word */
    struct {
      int32_t dtype, op;
    };
    uint64_t dtypeOp;
  };
  union { /* written together at the start (one store) */
    struct {
      int32_t peer;     /* root (broadcast, reduce), peer (send, recv), else -1 */
      int32_t waitPeer; /* the peer its last long wait was on; -1: none (then waitCh.. and tWaitNs are stale) */
    };
    uint64_t peers;
  };
  int32_t waitCh, waitPhase, waitStep; /* the step that wait was on (p2p: phase = op of the batch) */
  uint64_t reps;     /* calls this record stands for (seq .. seq + reps - 1); 1 but for mailbox runs */
  uint64_t opIdx;    /* state COLL_OBS_REC_RUN: comm->opCount of its first call */
  union {
    struct {
      uint8_t fn;     /* collFunc, or COLL_OBS_FN_BARRIER */
      uint8_t state, algo, nch, isP2p;
      uint8_t timed;  /* tStartNs (and, once ended, tEndNs) were measured; else stale */
      uint8_t pad_[2];
    };
    uint64_t meta;
  };
} collObsRecord;

struct collObsEvents; /* obs.c: trace and profiler state */

struct collObs {
  int rank, nranks;
  collObsPeer* peers;    /* [nranks] */
  uint64_t collSeq, p2pSeq;
  collObsColl coll[COLL_OBS_FNS][COLL_OBS_MAX_ALGOS];
  uint64_t tInitNs;      /* when the communicator was created */
  /* flight recorder: a ring of frSize (a power of two) records */
  collObsRecord* fr;
  uint32_t frSize;
  uint64_t frMask;       /* frSize - 1 */
  uint64_t frNext;       /* records written so far */
  collObsRecord* frCur;  /* the next one to write: fr[frNext & frMask] */
  collObsRecord* frEnd;  /* fr + frSize */
  collObsRecord* cur;    /* the running operation's record (first of a p2p batch) */
  uint32_t curBits;      /* its algorithm id | COLL_OBS_CUR_*; 0: no record of its own open */
  int curN;              /* records of the running launch item (p2p batch size) */
  /* the open run (its key, reps: comm->obsHot); its calls are collSeq.. */
  int runFn;             /* its fn for the counters (COLL_OBS_FN_BARRIER for barriers) */
  int runAlgo, runNch;   /* its algorithm (COLL_OBS_ALGO_MAILBOX; one rank: the tuner's) and channels */
  int runRoot;           /* its record's peer: the root (broadcast, reduce on one rank), else -1 */
  int soloNext;          /* one rank: the timed call now running starts a run of the calls equal to it */
  uint64_t runOpIdx;     /* comm->opCount of its first call */
  uint32_t gen;          /* odd while a run's calls move to the ring and the counters (readers retry) */
  /* the long wait now open (the step the engine last found pending: comm->obsHot) */
  int waitPeer;
  uint64_t waitSinceNs;  /* 0: no long wait open */
  uint64_t waitLastNs;   /* the latest clock read of that wait (its end, to 64 polls) */
  int failed;            /* collObsFailure ran */
  int frDumped;
  int started;           /* collObsStart finished: init succeeded */
  char error[1024];      /* the failure's message */
  int events;            /* trace or profiler on: the step hooks call out */
  struct collObsEvents* ev;
};

/* Atomic relaxed accessors: single writer, concurrent readers. */
#define COLL_OBS_GET(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define COLL_OBS_SET(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define COLL_OBS_ADD(x, v) COLL_OBS_SET(x, COLL_OBS_GET(x) + (v))

/* Sets up comm->obs (counters, flight recorder) during init, before the
 * tuner (whose calibration runs operations). Errors: collSystemError. */
collResult_t collObsInit(collComm_t comm);
/* At the end of init: zeroes what init counted, starts the trace buffer
 * (COLL_TRACE_FILE) and the profiler plugin (COLL_PROFILER_PLUGIN).
 * Errors: collSystemError (memory), collInvalidArgument (a plugin that
 * cannot be loaded or whose init fails). */
collResult_t collObsStart(collComm_t comm);
/* Writes COLL_STATS_FILE, COLL_TRACE_FILE and, for a communicator that
 * failed or was aborted, the flight recorder (COLL_FR_FILE), then frees
 * comm->obs. NULL-safe (init failed before collObsInit). */
void collObsFree(collComm_t comm);

uint64_t collObsNowNs(void);
/* Registry row of a, for the counters. */
int collObsAlgoId(const void* algo);
enum { COLL_OBS_ALGO_MAILBOX = COLL_OBS_MAX_ALGOS - 3, COLL_OBS_ALGO_P2P = COLL_OBS_MAX_ALGOS - 2,
       COLL_OBS_ALGO_NONE = COLL_OBS_MAX_ALGOS - 1 };
const char* collObsAlgoName(int id);
const char* collObsFnName(int fn);

/* ---- out of line (events, waits, p2p, failures) ---------------------------- */
void collObsEvLaunch(collComm_t comm, int begin, int nops, collResult_t r);
void collObsEvOp(collComm_t comm, int begin, collResult_t r);
void collObsEvStep(collComm_t comm, int begin, int c, int i, int kind, int peer, size_t bytes, int phase,
                   size_t slice);
int collObsMailboxSlow(collComm_t comm, const collOp* op);
void collObsStepDoneImpl(collComm_t comm, int c, int i, int peer, int isSend, size_t bytes);
int collObsSoloSlow(collComm_t comm, const collOp* op);
void collObsOpBeginImpl(collComm_t comm, const collOp* op);
void collObsOpAlgoImpl(collComm_t comm, const collOp* op, int algo, int nch, size_t chunk);
collResult_t collObsOpEndImpl(collComm_t comm, const collOp* op, collResult_t r);
void collObsP2pBeginImpl(collComm_t comm, const collOp* ops, int n);
void collObsP2pEndImpl(collComm_t comm, const collOp* ops, int n, collResult_t r);
void collObsWaitingImpl(collComm_t comm, int waitPeer, double sinceSec, double nowSec);
void collObsWaitEndImpl(collComm_t comm);
void collObsFailureImpl(collComm_t comm, collResult_t r, const char* msg);
/* Readers: a copy of the counters of every collective and algorithm with
 * the open run added (consistent with the ring: see gen). */
void collObsCollSnapshot(collComm_t comm, collObsColl (*k)[COLL_OBS_MAX_ALGOS]);

#ifdef COLL_NO_OBS
#define COLL_OBS_CALL(x) ((void)0)
#else
#define COLL_OBS_CALL(x) x
#endif
/* A send/recv batch starts / ended (its records, timing, events). */
static inline void collObsP2pBegin(collComm_t comm, const collOp* ops, int n) {
  (void)comm; (void)ops; (void)n;
  COLL_OBS_CALL(collObsP2pBeginImpl(comm, ops, n));
}
static inline void collObsP2pEnd(collComm_t comm, const collOp* ops, int n, collResult_t r) {
  (void)comm; (void)ops; (void)n; (void)r;
  COLL_OBS_CALL(collObsP2pEndImpl(comm, ops, n, r));
}
/* collIdleStep read the clock (nowSec) while waiting on waitPeer, a wait
 * that began at its first clock read (sinceSec); progress ended a long wait.
 * A wait with one clock read lasted 0 by the clock: nothing to count. */
static inline void collObsWaiting(collComm_t comm, int waitPeer, double sinceSec, double nowSec) {
  (void)comm; (void)waitPeer; (void)sinceSec; (void)nowSec;
#ifndef COLL_NO_OBS
  if (nowSec == sinceSec) return;
  struct collObs* o = comm->obs;
  if (__builtin_expect(o && o->waitSinceNs && o->waitPeer == waitPeer, 1)) {
    o->waitLastNs = (uint64_t)(nowSec * 1e9); /* the wait goes on: its latest clock read */
    return;
  }
  collObsWaitingImpl(comm, waitPeer, sinceSec, nowSec);
#endif
}
static inline void collObsWaitEnd(collComm_t comm) {
  (void)comm;
  COLL_OBS_CALL(collObsWaitEndImpl(comm));
}
/* The communicator failed (first failure): records marked, COLL_FR_FILE dump. */
static inline void collObsFailure(collComm_t comm, collResult_t r, const char* msg) {
  (void)comm; (void)r; (void)msg;
  COLL_OBS_CALL(collObsFailureImpl(comm, r, msg));
}

/* A record's root / peer (-1 for collectives without a root). */
static inline int collObsRecPeer(const collObsRecord* e) {
  return e->isP2p || e->fn == COLL_FN_BROADCAST || e->fn == COLL_FN_REDUCE ? e->peer : -1;
}

/* Bytes per element of each collDataType_t (reduce.h has the function). */
static const uint8_t collObsTypeBytes[collNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};

#ifdef COLL_NO_OBS
static inline int collObsLaunchTraced(collComm_t comm) { (void)comm; return 0; }
static inline void collObsLaunchBegin(collComm_t comm, int nops) { (void)comm; (void)nops; }
static inline void collObsLaunchEnd(collComm_t comm, collResult_t r) { (void)comm; (void)r; }
static inline int collObsMailbox(collComm_t comm, const collOp* op) { (void)comm; (void)op; return 1; }
static inline int collObsSolo(collComm_t comm, const collOp* op) { (void)comm; (void)op; return 1; }
static inline void collObsOpBegin(collComm_t comm, const collOp* op) { (void)comm; (void)op; }
static inline void collObsOpAlgo(collComm_t comm, const collOp* op, int algo, int nch, size_t chunk) {
  (void)comm; (void)op; (void)algo; (void)nch; (void)chunk;
}
static inline collResult_t collObsOpEnd(collComm_t comm, const collOp* op, collResult_t r) {
  (void)comm; (void)op;
  return r;
}
static inline collResult_t collObsOpEmpty(collComm_t comm, const collOp* op) {
  (void)comm; (void)op;
  return collSuccess;
}
static inline void collObsWaitDone(collComm_t comm) { (void)comm; }
static inline void collObsStepPost(collComm_t comm, int c, int i, int kind, int peer, size_t bytes, int phase,
                                   size_t slice) {
  (void)comm; (void)c; (void)i; (void)kind; (void)peer; (void)bytes; (void)phase; (void)slice;
}
static inline void collObsStepDone(collComm_t comm, int c, int i, int peer, int isSend, size_t bytes) {
  (void)comm; (void)c; (void)i; (void)peer; (void)isSend; (void)bytes;
}
static inline void collObsPending(collComm_t comm, int c, int phase, int i) { (void)comm; (void)c; (void)phase; (void)i; }
#else
/* Counters: the engine's thread is their only writer, and adds in place
 * (one add to memory); readers load each one whole (COLL_OBS_GET). */
#define COLL_OBS_INC(x, v) ((x) += (v))

/* 1 when the launch has events to report (trace, profiler): the engine then
 * brackets it with collObsLaunchBegin / collObsLaunchEnd. */
static inline int collObsLaunchTraced(collComm_t comm) { return __builtin_expect(comm->obsHot.events != 0, 0); }
static inline void collObsLaunchBegin(collComm_t comm, int nops) { collObsEvLaunch(comm, 1, nops, collSuccess); }
static inline void collObsLaunchEnd(collComm_t comm, collResult_t r) { collObsEvLaunch(comm, 0, 0, r); }

/* The collective op runs through the mailbox. 1: it is counted (a call of
 * the open run: one countdown, four compares, one add; or the first of a
 * new run), nothing more to call; 0: it is timed or has events, it began
 * (collObsOpBegin, collObsOpAlgo done) and the caller ends it
 * (collObsOpEnd). Its end and its failure need no hook: the engine's
 * opCount says which call of a run is done, collObsFailure marks the one
 * that failed. */
/* The call extends the open run (it is equal to it, and not one to time). */
static inline int collObsRunExtends(collComm_t comm, const collOp* op) {
  collObsHot* h = &comm->obsHot;
  uint64_t dtypeOp;
  _Static_assert(sizeof(collDataType_t) == 4 && sizeof(collRedOp_t) == 4 &&
                     offsetof(collOp, op) == offsetof(collOp, dtype) + 4,
                 "collOp: dtype and op are one 8-byte word");
  memcpy(&dtypeOp, &op->dtype, sizeof dtypeOp);
  if (__builtin_expect(--h->mbLeft != 0 && op->count == h->count && dtypeOp == h->dtypeOp &&
                           (int32_t)op->fn == h->fn && op->peer == h->peer,
                       1)) {
    COLL_OBS_INC(h->reps, 1);
    return 1;
  }
  return 0;
}

static inline int collObsMailbox(collComm_t comm, const collOp* op) {
  return collObsRunExtends(comm, op) || collObsMailboxSlow(comm, op);
}

/* The same for a collective on a communicator of one rank (its schedule
 * moves no byte between ranks; the ~0.4 us path): 1: a call of the open
 * run, counted, run it without obsOp; 0: it begins as any other collective
 * (collObsOpBegin ... collObsOpEnd), timed, and the calls equal to it after
 * it form a run with the algorithm the tuner chose for it. */
static inline int collObsSolo(collComm_t comm, const collOp* op) {
  return collObsRunExtends(comm, op) || collObsSoloSlow(comm, op);
}

/* A collective that is not a mailbox call starts (its record). */
static inline void collObsOpBegin(collComm_t comm, const collOp* op) { collObsOpBeginImpl(comm, op); }
/* Its algorithm is known (a registry row): record, timing, events. */
static inline void collObsOpAlgo(collComm_t comm, const collOp* op, int algo, int nch, size_t chunk) {
  collObsOpAlgoImpl(comm, op, algo, nch, chunk);
}
/* It ended (r: its result, returned): counters, record, events. */
static inline collResult_t collObsOpEnd(collComm_t comm, const collOp* op, collResult_t r) {
  return collObsOpEndImpl(comm, op, r);
}
/* A collective of count 0 (it runs nothing): its record and counters. */
static inline collResult_t collObsOpEmpty(collComm_t comm, const collOp* op) {
  collObsOpBeginImpl(comm, op);
  return collObsOpEndImpl(comm, op, collSuccess);
}

/* A mailbox wait ended: the long wait that is open ends at its last clock
 * read (no clock read here). */
static inline void collObsWaitDone(collComm_t comm) {
  struct collObs* o = comm->obs;
  if (o && o->waitSinceNs) {
    COLL_OBS_INC(o->peers[o->waitPeer].waitNs, o->waitLastNs - o->waitSinceNs);
    o->waitSinceNs = 0;
  }
}

/* A transfer was posted (events only). */
static inline void collObsStepPost(collComm_t comm, int c, int i, int kind, int peer, size_t bytes, int phase,
                                   size_t slice) {
  if (__builtin_expect(comm->obsHot.events, 0)) collObsEvStep(comm, 1, c, i, kind, peer, bytes, phase, slice);
}

/* A transfer with peer completed: bytes sent (isSend) or received (out of
 * line: a transfer costs far more than the call, and the engine's step
 * loop stays as tight as without counters). */
static inline void collObsStepDone(collComm_t comm, int c, int i, int peer, int isSend, size_t bytes) {
  collObsStepDoneImpl(comm, c, i, peer, isSend, bytes);
}

/* Step i of channel c (phase) is still pending: what a wait would be on. */
static inline void collObsPending(collComm_t comm, int c, int phase, int i) {
  collObsHot* h = &comm->obsHot;
  h->pendCh = c;
  h->pendPhase = phase;
  h->pendStep = i;
}
#endif

#endif
