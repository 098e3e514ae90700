/*
 * trace.c - the COLL_TRACE_FILE timeline: spans kept in memory while the
 * communicator runs, written at destroy as a Chrome trace / Perfetto JSON
 * file (open it in ui.perfetto.dev or chrome://tracing; tools/coll_report
 * --trace merges the files of all ranks into one).
 *
 * Layout: one process per rank (pid = rank, named "rank R (host)"), in it
 * one track for the operations ("calls": a span per collective with its
 * algorithm, count, bytes, channels, chunk; a span per send/recv batch)
 * and tracks per channel for the transfers ("ch C": a span per message from
 * post to completion, named "send > P" / "recv < P" / "recv-reduce < P",
 * with bytes, peer, phase and slice). Transfers of one channel that overlap
 * go on extra tracks of that channel ("ch C.1", ...), so that every track's
 * spans nest. Every span is a "B" event followed by its "E" event on the
 * same track; a transfer still open when its operation failed ends with the
 * operation and says "unfinished". Times: wall clock in microseconds.
 *
 * At most COLL_TRACE_MAX_STEPS transfers and COLL_TRACE_MAX_OPS operations
 * are kept per communicator (the earliest); the file says how many were
 * dropped.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "misc/log.h"
#include "obs/obs_internal.h"
#include "reduce/reduce.h"

#define COLL_TRACE_MAX_STEPS 500000
#define COLL_TRACE_MAX_OPS 100000
#define COLL_TRACE_OP_PEERS 8 /* send/recv batch members named per span */

typedef struct {
  uint64_t t0, t1, bytes, slice;
  int32_t peer, phase;
  uint16_t ch, lane;
  uint8_t kind, unfinished;
} collTraceStep;

typedef struct {
  uint64_t t0, t1;
  collObsRecord rec;
  int nops;
  int32_t peers[COLL_TRACE_OP_PEERS];
  uint64_t bytes[COLL_TRACE_OP_PEERS];
  uint8_t isRecv[COLL_TRACE_OP_PEERS];
} collTraceOp;

struct collObsTrace {
  collTraceStep* steps;
  size_t nsteps, capSteps;
  collTraceOp* ops;
  size_t nops, capOps;
  uint64_t droppedSteps, droppedOps;
};

struct collObsTrace* collObsTraceCreate(void) { return calloc(1, sizeof(struct collObsTrace)); }

void collObsTraceFree(struct collObsTrace* t) {
  if (!t) return;
  free(t->steps);
  free(t->ops);
  free(t);
}

/* Makes room for one more element; 0 when full or out of memory. */
static int collTraceGrow(void** arr, size_t* cap, size_t n, size_t elem, size_t max) {
  if (n < *cap) return 1;
  if (n >= max) return 0;
  size_t ncap = *cap ? *cap * 2 : 1024;
  if (ncap > max) ncap = max;
  void* p = realloc(*arr, ncap * elem);
  if (!p) return 0;
  *arr = p;
  *cap = ncap;
  return 1;
}

void collObsTraceOp(struct collObsTrace* t, const collObsRecord* rec, uint64_t t0, uint64_t t1, int nops,
                    const collOp* ops) {
  if (!collTraceGrow((void**)&t->ops, &t->capOps, t->nops, sizeof(collTraceOp), COLL_TRACE_MAX_OPS)) {
    t->droppedOps++;
    return;
  }
  collTraceOp* o = &t->ops[t->nops++];
  memset(o, 0, sizeof *o);
  o->t0 = t0;
  o->t1 = t1 >= t0 ? t1 : t0;
  o->rec = *rec;
  o->nops = nops;
  for (int i = 0; i < nops && i < COLL_TRACE_OP_PEERS; i++) {
    o->peers[i] = ops[i].peer;
    o->bytes[i] = (uint64_t)ops[i].count * collTypeSize(ops[i].dtype);
    o->isRecv[i] = ops[i].fn == COLL_FN_RECV;
  }
}

void collObsTraceStep(struct collObsTrace* t, int ch, const collObsSlot* s, uint64_t t1, int unfinished) {
  if (!collTraceGrow((void**)&t->steps, &t->capSteps, t->nsteps, sizeof(collTraceStep), COLL_TRACE_MAX_STEPS)) {
    t->droppedSteps++;
    return;
  }
  collTraceStep* e = &t->steps[t->nsteps++];
  e->t0 = s->postNs;
  e->t1 = t1 >= s->postNs ? t1 : s->postNs;
  e->bytes = s->bytes;
  e->slice = s->slice;
  e->peer = s->peer;
  e->phase = s->phase;
  e->ch = (uint16_t)ch;
  e->lane = 0;
  e->kind = s->kind;
  e->unfinished = (uint8_t)unfinished;
}

static int collTraceStepCmp(const void* a, const void* b) {
  const collTraceStep *x = a, *y = b;
  if (x->ch != y->ch) return x->ch < y->ch ? -1 : 1;
  if (x->t0 != y->t0) return x->t0 < y->t0 ? -1 : 1;
  return x->t1 > y->t1 ? -1 : x->t1 < y->t1; /* longer first: an equal start nests inside */
}

#define COLL_TRACE_MAX_LANES 256

/* Puts each channel's transfers on the first lane whose last span ended
 * before it starts (sorted by start): spans on one lane never overlap. */
static int collTraceLanes(struct collObsTrace* t, int* lanesPerCh) {
  qsort(t->steps, t->nsteps, sizeof *t->steps, collTraceStepCmp);
  uint64_t end[COLL_TRACE_MAX_LANES];
  int nlanes = 0, ch = -1;
  for (size_t i = 0; i < t->nsteps; i++) {
    collTraceStep* s = &t->steps[i];
    if (s->ch != ch) {
      ch = s->ch;
      nlanes = 0;
    }
    int l = 0;
    while (l < nlanes && end[l] > s->t0) l++;
    if (l == COLL_TRACE_MAX_LANES) l = COLL_TRACE_MAX_LANES - 1; /* never reached in practice */
    if (l == nlanes) nlanes++;
    end[l] = s->t1;
    s->lane = (uint16_t)l;
    if (nlanes > lanesPerCh[ch]) lanesPerCh[ch] = nlanes;
  }
  return 0;
}

static int collTraceTid(int ch, int lane) { return 1 + ch * COLL_TRACE_MAX_LANES + lane; }

static void collTraceMeta(FILE* f, int* first, int pid, int tid, const char* what, const char* name, int sort) {
  fprintf(f, "%s\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"%s\",\"args\":{\"name\":", *first ? "" : ",", pid, tid,
          what);
  collObsJsonStr(f, name);
  fputs("}}", f);
  fprintf(f, ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"%s_sort_index\",\"args\":{\"sort_index\":%d}}", pid,
          tid, what[0] == 'p' ? "process" : "thread", sort);
  *first = 0;
}

static void collTraceOpName(const collTraceOp* o, char* buf, size_t len) {
  if (o->rec.isP2p) snprintf(buf, len, "send/recv x%d", o->nops);
  else snprintf(buf, len, "%s %s", collObsFnName(o->rec.fn), collObsAlgoName(o->rec.algo));
}

void collObsTraceWrite(collComm_t comm, struct collObsTrace* t, FILE* f) {
  int64_t off = collObsRealtimeOffsetNs();
  int pid = comm->rank;
  int lanes[COLL_MAX_CHANNELS] = {0};
  collTraceLanes(t, lanes);
  fputs("{\"displayTimeUnit\":\"ns\",\"otherData\":{", f);
  fprintf(f, "\"kind\":\"coll-trace\",\"rank\":%d,\"nranks\":%d,\"host\":", comm->rank, comm->nranks);
  collObsJsonStr(f, collHostName());
  fprintf(f, ",\"pid\":%d,\"comm\":\"%016llx\",\"droppedSteps\":%llu,\"droppedOps\":%llu},\"traceEvents\":[",
          (int)getpid(), (unsigned long long)comm->commHash, (unsigned long long)t->droppedSteps,
          (unsigned long long)t->droppedOps);
  int first = 1;
  char name[128];
  snprintf(name, sizeof name, "rank %d (%s)", comm->rank, collHostName());
  collTraceMeta(f, &first, pid, 0, "process_name", name, comm->rank);
  collTraceMeta(f, &first, pid, 0, "thread_name", "calls", 0);
  for (int c = 0; c < COLL_MAX_CHANNELS; c++)
    for (int l = 0; l < lanes[c]; l++) {
      if (l) snprintf(name, sizeof name, "ch %d.%d", c, l);
      else snprintf(name, sizeof name, "ch %d", c);
      collTraceMeta(f, &first, pid, collTraceTid(c, l), "thread_name", name, collTraceTid(c, l));
    }
  /* operations: they run one after another, so their spans never overlap */
  for (size_t i = 0; i < t->nops; i++) {
    const collTraceOp* o = &t->ops[i];
    const collObsRecord* e = &o->rec;
    collTraceOpName(o, name, sizeof name);
    fprintf(f, ",\n{\"ph\":\"B\",\"pid\":%d,\"tid\":0,\"ts\":%.3f,\"cat\":\"%s\",\"name\":\"%s\",\"args\":{", pid,
            ((double)o->t0 + (double)off) * 1e-3, e->isP2p ? "p2p" : "coll", name);
    if (e->isP2p) {
      fprintf(f, "\"seq\":%llu,\"ops\":[", (unsigned long long)e->seq);
      for (int k = 0; k < o->nops && k < COLL_TRACE_OP_PEERS; k++)
        fprintf(f, "%s\"%s %d: %llu B\"", k ? "," : "", o->isRecv[k] ? "recv from" : "send to", o->peers[k],
                (unsigned long long)o->bytes[k]);
      fprintf(f, "%s]", o->nops > COLL_TRACE_OP_PEERS ? ",\"...\"" : "");
    } else {
      fprintf(f, "\"seq\":%llu,\"algo\":\"%s\",\"count\":%llu,\"bytes\":%llu,\"dtype\":\"%s\",\"op\":\"%s\",\"root\":%d,"
              "\"nchannels\":%d,\"chunkBytes\":%llu",
              (unsigned long long)e->seq, collObsAlgoName(e->algo), (unsigned long long)e->count,
              (unsigned long long)(e->count * collTypeSize((collDataType_t)e->dtype)),
              collTypeName((collDataType_t)e->dtype), collOpName((collRedOp_t)e->op), collObsRecPeer(e), e->nch,
              (unsigned long long)e->chunk);
    }
    fprintf(f, ",\"state\":\"%s\"}}", collObsStateName(e->state));
    fprintf(f, ",\n{\"ph\":\"E\",\"pid\":%d,\"tid\":0,\"ts\":%.3f,\"cat\":\"%s\",\"name\":\"%s\"}", pid,
            ((double)o->t1 + (double)off) * 1e-3, e->isP2p ? "p2p" : "coll", name);
  }
  /* transfers, lane by lane in start order: each lane's spans are disjoint */
  static const char* kinds[] = {"send >", "recv <", "recv-reduce <"};
  for (size_t i = 0; i < t->nsteps; i++) {
    const collTraceStep* s = &t->steps[i];
    snprintf(name, sizeof name, "%s %d", s->kind <= 2 ? kinds[s->kind] : "?", s->peer);
    int tid = collTraceTid(s->ch, s->lane);
    fprintf(f, ",\n{\"ph\":\"B\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"cat\":\"step\",\"name\":\"%s\",\"args\":{"
            "\"peer\":%d,\"bytes\":%llu,\"phase\":%d,\"slice\":%llu,\"channel\":%d%s}}",
            pid, tid, ((double)s->t0 + (double)off) * 1e-3, name, s->peer, (unsigned long long)s->bytes, s->phase,
            (unsigned long long)s->slice, s->ch, s->unfinished ? ",\"unfinished\":true" : "");
    fprintf(f, ",\n{\"ph\":\"E\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"cat\":\"step\",\"name\":\"%s\"}", pid, tid,
            ((double)s->t1 + (double)off) * 1e-3, name);
  }
  fputs("\n]}\n", f);
}
