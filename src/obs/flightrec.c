/*
 * flightrec.c - the flight recorder: reading it (collCommGetCallRecords),
 * dumping it as JSON (collCommDumpFlightRecorder, on failure or abort, on
 * COLL_FR_SIGNAL), in the spirit of PyTorch's NCCL flight recorder (a ring
 * of the last operations per rank, dumped on a watchdog timeout) and NCCL's
 * RAS (per-rank operation counts that show who is behind).
 *
 * The dump names for every entry its collective number (equal on every
 * rank), state, and for a wait the peer and step it was on, so that
 * tools/coll_report --fr can tell from the files of all ranks which rank
 * the others waited for.
 *
 * Signals: COLL_FR_SIGNAL=N installs a handler for signal N that only
 * writes a byte to a pipe (async-signal-safe); a thread started with it
 * dumps every communicator of the process (registry lock held, so none is
 * freed meanwhile).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "misc/log.h"
#include "misc/param.h"
#include "obs/obs_internal.h"
#include "reduce/reduce.h"

/* A consistent-enough copy of record i (fields read whole). */
static void collObsRecordCopy(const collObsRecord* e, collObsRecord* out) {
  out->seq = COLL_OBS_GET(e->seq);
  out->count = COLL_OBS_GET(e->count);
  out->chunk = COLL_OBS_GET(e->chunk);
  out->tStartNs = COLL_OBS_GET(e->tStartNs);
  out->tEndNs = COLL_OBS_GET(e->tEndNs);
  out->tWaitNs = COLL_OBS_GET(e->tWaitNs);
  out->peer = COLL_OBS_GET(e->peer);
  out->waitPeer = COLL_OBS_GET(e->waitPeer);
  out->waitCh = COLL_OBS_GET(e->waitCh);
  out->waitPhase = COLL_OBS_GET(e->waitPhase);
  out->waitStep = COLL_OBS_GET(e->waitStep);
  out->meta = COLL_OBS_GET(e->meta);
  out->fn = COLL_OBS_GET(e->fn);
  out->dtype = COLL_OBS_GET(e->dtype);
  out->op = COLL_OBS_GET(e->op);
  out->state = COLL_OBS_GET(e->state);
  out->algo = COLL_OBS_GET(e->algo);
  out->nch = COLL_OBS_GET(e->nch);
  out->timed = COLL_OBS_GET(e->timed);
  out->reps = COLL_OBS_GET(e->reps);
  out->opIdx = COLL_OBS_GET(e->opIdx);
  if (!out->timed) out->tStartNs = out->tEndNs = 0;
  if (out->algo >= COLL_OBS_ALGO_MAILBOX && out->algo != COLL_OBS_ALGO_P2P) out->chunk = 0; /* not written */
  if (out->waitPeer < 0) out->tWaitNs = 0;
  out->peer = collObsRecPeer(out);
}

/* First record index and count of the valid ones (oldest first). */
static void collObsRecordRange(const struct collObs* o, uint64_t* first, uint64_t* n) {
  uint64_t next = COLL_OBS_GET(o->frNext);
  *n = next < o->frSize ? next : o->frSize;
  *first = next - *n;
}

/* The last calls (at most o->frSize), oldest first, one record each: runs
 * of equal calls (a record, or the open run in comm->obsHot) expanded,
 * their states read off comm->opCount. Copied while no run moves (gen).
 * NULL: out of memory. */
static collObsRecord* collObsCalls(collComm_t comm, uint64_t* ncalls, uint64_t* collSeq) {
  const struct collObs* o = comm->obs;
  const collObsHot* h = &comm->obsHot;
  collObsRecord* recs = malloc(sizeof *recs * (o->frSize + 1));
  collObsRecord* out = malloc(sizeof *out * o->frSize);
  if (!recs || !out) {
    free(recs);
    free(out);
    return NULL;
  }
  uint64_t first, cnt, opCount;
  for (int tries = 0;; tries++) {
    uint32_t g = __atomic_load_n(&o->gen, __ATOMIC_ACQUIRE);
    collObsRecordRange(o, &first, &cnt);
    for (uint64_t k = 0; k < cnt; k++) collObsRecordCopy(&o->fr[(first + k) & (o->frSize - 1)], &recs[k]);
    collObsRecord* r = &recs[cnt];
    memset(r, 0, sizeof *r);
    r->reps = COLL_OBS_GET(h->reps);
    r->fn = (uint8_t)COLL_OBS_GET(o->runFn);
    r->dtypeOp = COLL_OBS_GET(h->dtypeOp);
    r->count = COLL_OBS_GET(h->count);
    r->seq = COLL_OBS_GET(o->collSeq);
    r->opIdx = COLL_OBS_GET(o->runOpIdx);
    r->algo = (uint8_t)COLL_OBS_GET(o->runAlgo);
    r->nch = (uint8_t)COLL_OBS_GET(o->runNch);
    opCount = __atomic_load_n(&comm->opCount, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (((g & 1) == 0 && __atomic_load_n(&o->gen, __ATOMIC_RELAXED) == g) || tries > 1000) break;
  }
  collObsRecord* run = &recs[cnt];
  *collSeq = run->seq + run->reps;
  if (run->reps) {
    run->state = COLL_OBS_REC_RUN;
    run->peer = COLL_OBS_GET(o->runRoot);
    run->waitPeer = -1;
    cnt++;
  }
  uint64_t n = 0; /* calls written, from the end of out */
  for (uint64_t k = cnt; k-- > 0 && n < o->frSize;) {
    const collObsRecord* e = &recs[k];
    uint64_t reps = e->reps ? e->reps : 1;
    for (uint64_t i = reps; i-- > 0 && n < o->frSize;) {
      collObsRecord* c = &out[o->frSize - ++n];
      *c = *e;
      c->seq = e->seq + i;
      c->reps = 1;
      if (e->state == COLL_OBS_REC_RUN) c->state = e->opIdx + i < opCount ? COLL_OBS_REC_DONE : COLL_OBS_REC_RUNNING;
    }
  }
  memmove(out, out + (o->frSize - n), sizeof *out * n);
  free(recs);
  *ncalls = n;
  return out;
}

static double collObsWallUs(uint64_t monoNs, int64_t offsetNs) {
  return monoNs ? ((double)monoNs + (double)offsetNs) * 1e-3 : 0;
}

collResult_t collCommGetCallRecordsImpl(collComm_t comm, collCallRecord_t* records, int max, int* n) {
  if (!n || (!records && max > 0))
    return collSetError(collInvalidArgument, "collCommGetCallRecords: records or n is NULL");
  if (max < 0) return collSetError(collInvalidArgument, "collCommGetCallRecords: max %d < 0", max);
  collResult_t r = collCommEnterAny(comm, "collCommGetCallRecords");
  if (r != collSuccess) return r;
  const struct collObs* o = comm->obs;
  *n = 0;
  uint64_t ncalls = 0, seq;
  collObsRecord* calls = o ? collObsCalls(comm, &ncalls, &seq) : NULL;
  if (o && !calls) r = collSetError(collSystemError, "collCommGetCallRecords: out of memory");
  if (calls) {
    uint64_t first = 0, cnt = ncalls;
    if (cnt > (uint64_t)max) {
      first += cnt - (uint64_t)max;
      cnt = (uint64_t)max;
    }
    int64_t off = collObsRealtimeOffsetNs();
    for (uint64_t k = 0; k < cnt; k++) {
      collObsRecord e = calls[first + k];
      collCallRecord_t* c = &records[k];
      memset(c, 0, sizeof *c);
      c->seq = e.seq;
      snprintf(c->coll, sizeof c->coll, "%s", collObsFnName(e.fn));
      snprintf(c->algo, sizeof c->algo, "%s", collObsAlgoName(e.algo));
      snprintf(c->state, sizeof c->state, "%s", collObsStateName(e.state));
      c->count = e.count;
      c->bytes = e.count * collTypeSize((collDataType_t)e.dtype);
      c->datatype = (collDataType_t)e.dtype;
      c->op = (collRedOp_t)e.op;
      c->peer = e.peer;
      c->nchannels = e.nch;
      c->waitPeer = e.waitPeer;
      c->waitChannel = e.waitPeer >= 0 ? e.waitCh : -1;
      c->waitPhase = e.waitPeer >= 0 ? e.waitPhase : -1;
      c->waitStep = e.waitPeer >= 0 ? e.waitStep : -1;
      c->startUs = collObsWallUs(e.tStartNs, off);
      c->durationUs = e.state != COLL_OBS_REC_RUNNING && e.tStartNs && e.tEndNs >= e.tStartNs
                          ? (double)(e.tEndNs - e.tStartNs) * 1e-3
                          : -1;
      c->waitStartUs = collObsWallUs(e.tWaitNs, off);
    }
    *n = (int)cnt;
    free(calls);
  }
  collCommLeave(comm);
  return r;
}

void collObsWriteFlightRecord(collComm_t comm, FILE* f, const char* why) {
  const struct collObs* o = comm->obs;
  int64_t off = collObsRealtimeOffsetNs();
  uint64_t now = collObsNowNs();
  uint64_t cnt = 0, collSeq = 0;
  collObsRecord* calls = collObsCalls(comm, &cnt, &collSeq);
  collResult_t err = __atomic_load_n(&comm->asyncError, __ATOMIC_ACQUIRE);
  fprintf(f, "{\"kind\":\"coll-flight-recorder\",\"version\":1,\"reason\":");
  collObsJsonStr(f, why);
  fprintf(f, ",\"rank\":%d,\"nranks\":%d,\"host\":", comm->rank, comm->nranks);
  collObsJsonStr(f, collHostName());
  fprintf(f, ",\"pid\":%d,\"comm\":\"%016llx\",\"node\":%d,\"dumpUs\":%.3f,\"collSeq\":%llu,\"p2pSeq\":%llu,",
          (int)getpid(), (unsigned long long)comm->commHash, comm->node, collObsWallUs(now, off),
          (unsigned long long)collSeq, (unsigned long long)COLL_OBS_GET(o->p2pSeq));
  char msg[sizeof comm->asyncMsg];
  collCommErrorMessage(comm, msg, sizeof msg);
  fprintf(f, "\"failed\":%s,\"error\":", err != collSuccess || o->failed ? "true" : "false");
  collObsJsonStr(f, msg[0] ? msg : o->error);
  fprintf(f, ",\"hosts\":[");
  for (int p = 0; p < comm->nranks; p++) {
    if (p) fputc(',', f);
    collObsJsonStr(f, collCommPeerHost(comm, p));
  }
  fprintf(f, "],\"pids\":[");
  for (int p = 0; p < comm->nranks; p++) fprintf(f, "%s%d", p ? "," : "", comm->peers ? (int)comm->peers[p].pid : 0);
  fprintf(f, "],\"entries\":[");
  for (uint64_t k = 0; calls && k < cnt; k++) {
    const collObsRecord e = calls[k];
    fprintf(f, "%s\n{\"seq\":%llu,\"kind\":\"%s\",\"coll\":\"%s\",\"algo\":\"%s\",\"state\":\"%s\",\"count\":%llu,"
            "\"bytes\":%llu,\"dtype\":\"%s\",\"op\":\"%s\",\"peer\":%d,\"nchannels\":%d,\"chunkBytes\":%llu,",
            k ? "," : "", (unsigned long long)e.seq, e.isP2p ? "p2p" : "coll", collObsFnName(e.fn),
            collObsAlgoName(e.algo), collObsStateName(e.state), (unsigned long long)e.count,
            (unsigned long long)(e.count * collTypeSize((collDataType_t)e.dtype)),
            collTypeName((collDataType_t)e.dtype), e.isP2p ? "-" : collOpName((collRedOp_t)e.op), e.peer, e.nch,
            (unsigned long long)e.chunk);
    fprintf(f, "\"startUs\":%.3f,\"durationUs\":%.3f,\"waitPeer\":%d,\"waitChannel\":%d,\"waitPhase\":%d,"
            "\"waitStep\":%d,\"waitStartUs\":%.3f}",
            collObsWallUs(e.tStartNs, off),
            e.state != COLL_OBS_REC_RUNNING && e.tStartNs && e.tEndNs >= e.tStartNs ? (double)(e.tEndNs - e.tStartNs) * 1e-3
                                                                                     : -1.0,
            e.waitPeer, e.waitPeer >= 0 ? e.waitCh : -1, e.waitPeer >= 0 ? e.waitPhase : -1,
            e.waitPeer >= 0 ? e.waitStep : -1, collObsWallUs(e.tWaitNs, off));
  }
  fputs("\n]}\n", f);
  free(calls);
}

int collObsDumpFlightRecord(collComm_t comm, const char* path, const char* why, int toStderr) {
  struct collObs* o = __atomic_load_n(&comm->obs, __ATOMIC_ACQUIRE);
  if (!o) return 0;
  const char* spec = path ? path : collParamStr(COLL_SPARAM_FR_FILE);
  if (!spec && !toStderr) return 0;
  char used[1024];
  FILE* f = spec ? collObsOpen(comm, spec, path ? "collCommDumpFlightRecorder" : "COLL_FR_FILE", used, sizeof used)
                 : stderr;
  if (!f) return 0;
  collObsWriteFlightRecord(comm, f, why);
  if (f != stderr) fclose(f);
  else fflush(f);
  COLL_OBS_SET(o->frDumped, 1);
  COLL_INFO(COLL_SUB_INIT, "rank %d: flight recorder (%s) written to %s", comm->rank, why, spec ? used : "stderr");
  return 1;
}

collResult_t collCommDumpFlightRecorderImpl(collComm_t comm, const char* path) {
  if (!path && !collParamStr(COLL_SPARAM_FR_FILE))
    return collSetError(collInvalidArgument, "collCommDumpFlightRecorder: path is NULL and COLL_FR_FILE is unset");
  collResult_t r = collCommEnterAny(comm, "collCommDumpFlightRecorder");
  if (r != collSuccess) return r;
  if (!comm->obs) r = collSetError(collInvalidUsage, "collCommDumpFlightRecorder: communicator is still initializing");
  else if (!collObsDumpFlightRecord(comm, path, "api", 0))
    r = collSetError(collSystemError, "collCommDumpFlightRecorder: cannot write %s",
                     path ? path : collParamStr(COLL_SPARAM_FR_FILE));
  collCommLeave(comm);
  return r;
}

/* ---- COLL_FR_SIGNAL ---------------------------------------------------------- */
static int collObsSigPipe[2] = {-1, -1};
static pthread_once_t collObsSigOnce = PTHREAD_ONCE_INIT;

static void collObsSigHandler(int sig) {
  (void)sig;
  int saved = errno;
  char b = 1;
  if (collObsSigPipe[1] >= 0 && write(collObsSigPipe[1], &b, 1) < 0) { /* full: a dump is pending anyway */ }
  errno = saved;
}

static void collObsSigDumpOne(collComm_t comm, void* arg) {
  (void)arg;
  if (__atomic_load_n(&comm->obs, __ATOMIC_ACQUIRE)) collObsDumpFlightRecord(comm, NULL, "signal", 1);
}

static void* collObsSigThread(void* arg) {
  (void)arg;
  char b;
  for (;;) {
    ssize_t k = read(collObsSigPipe[0], &b, 1);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return NULL;
    collCommForEach(collObsSigDumpOne, NULL);
  }
}

static void collObsSigInstall(void) {
  int sig = (int)collParamInt(COLL_PARAM_FR_SIGNAL);
  if (pipe2(collObsSigPipe, O_CLOEXEC) != 0) {
    COLL_WARN_ALWAYS(COLL_SUB_INIT, "COLL_FR_SIGNAL=%d: pipe failed (%s); no dumps on the signal", sig, strerror(errno));
    return;
  }
  fcntl(collObsSigPipe[1], F_SETFL, O_NONBLOCK);
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  /* the dumper never takes the signal itself */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&t, &attr, collObsSigThread, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    COLL_WARN_ALWAYS(COLL_SUB_INIT, "COLL_FR_SIGNAL=%d: cannot start the dump thread; no dumps on the signal", sig);
    return;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = collObsSigHandler;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(sig, &sa, NULL) != 0)
    COLL_WARN_ALWAYS(COLL_SUB_INIT, "COLL_FR_SIGNAL=%d: sigaction failed (%s); no dumps on the signal", sig,
                     strerror(errno));
  else
    COLL_INFO(COLL_SUB_INIT, "flight recorder: signal %d dumps every communicator to %s", sig,
              collParamStr(COLL_SPARAM_FR_FILE) ? collParamStr(COLL_SPARAM_FR_FILE) : "stderr");
}

void collObsSignalSetup(void) { pthread_once(&collObsSigOnce, collObsSigInstall); }
