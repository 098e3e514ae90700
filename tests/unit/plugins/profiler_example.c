/*
 * profiler_example.c - an example coll profiler plugin (include/coll_profiler.h).
 * Build it as a shared object and run with COLL_PROFILER_PLUGIN=path.so.
 *
 * It logs every event, one line each, to $COLL_EXAMPLE_PROFILER_LOG.<rank>
 * (stderr when unset), with the time since init:
 *   <us> start <type> id=<n> parent=<n> <fields>
 *   <us> state id=<n> waiting peer=<p>
 *   <us> stop id=<n>
 * where the fields are those of the descriptor (func, algo, count, bytes,
 * peer...). Handles are small heap objects that carry the event's id. With
 * COLL_EXAMPLE_PROFILER_STEPS=1 it also asks for step (transfer) events.
 * tests/cases/i18_4_profiler_events.c reads the logs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll_profiler.h"

typedef struct {
  FILE* f;
  double t0;
  unsigned long next;
} ctx_t;

typedef struct {
  ctx_t* ctx;
  unsigned long id;
} handle_t;

static double nowUs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static collResult_t init(void** context, uint64_t commHash, int nranks, int rank, int nnodes, int* mask) {
  ctx_t* c = calloc(1, sizeof *c);
  if (!c) return collSystemError;
  const char* base = getenv("COLL_EXAMPLE_PROFILER_LOG");
  if (base) {
    char path[512];
    snprintf(path, sizeof path, "%s.%d", base, rank);
    c->f = fopen(path, "w");
    if (!c->f) {
      free(c);
      return collSystemError;
    }
  } else {
    c->f = stderr;
  }
  c->t0 = nowUs();
  c->next = 1;
  const char* steps = getenv("COLL_EXAMPLE_PROFILER_STEPS");
  if (steps && atoi(steps)) *mask |= collProfileStep;
  fprintf(c->f, "0 init comm=%016llx nranks=%d rank=%d nnodes=%d mask=%d\n", (unsigned long long)commHash, nranks,
          rank, nnodes, *mask);
  *context = c;
  return collSuccess;
}

static unsigned long idOf(void* h) { return h ? ((handle_t*)h)->id : 0; }

static collResult_t startEvent(void* context, void** eHandle, const collProfilerEventDescr_v1_t* d) {
  ctx_t* c = context;
  handle_t* h = malloc(sizeof *h);
  *eHandle = h;
  if (!h) return collSystemError;
  h->ctx = c;
  h->id = c->next++;
  fprintf(c->f, "%.1f start ", nowUs() - c->t0);
  switch (d->type) {
    case collProfileGroup:
      fprintf(c->f, "group id=%lu parent=%lu seq=%llu nops=%d\n", h->id, idOf(d->parentObj),
              (unsigned long long)d->group.seqNumber, d->group.nops);
      break;
    case collProfileColl:
      fprintf(c->f, "coll id=%lu parent=%lu seq=%llu func=%s algo=%s count=%zu bytes=%zu root=%d nch=%d\n", h->id,
              idOf(d->parentObj), (unsigned long long)d->coll.seqNumber, d->coll.func, d->coll.algo, d->coll.count,
              d->coll.bytes, d->coll.root, d->coll.nChannels);
      break;
    case collProfileP2p:
      fprintf(c->f, "p2p id=%lu parent=%lu seq=%llu func=%s peer=%d count=%zu bytes=%zu\n", h->id, idOf(d->parentObj),
              (unsigned long long)d->p2p.seqNumber, d->p2p.func, d->p2p.peer, d->p2p.count, d->p2p.bytes);
      break;
    case collProfileStep:
      fprintf(c->f, "step id=%lu parent=%lu kind=%s peer=%d bytes=%zu channel=%d phase=%d\n", h->id,
              idOf(d->parentObj), d->step.kind, d->step.peer, d->step.bytes, d->step.channel, d->step.phase);
      break;
    default:
      fprintf(c->f, "unknown id=%lu type=%d\n", h->id, d->type);
  }
  return collSuccess;
}

static collResult_t stopEvent(void* eHandle) {
  handle_t* h = eHandle;
  fprintf(h->ctx->f, "%.1f stop id=%lu\n", nowUs() - h->ctx->t0, h->id);
  free(h);
  return collSuccess;
}

static collResult_t recordEventState(void* eHandle, collProfilerEventState_v1_t state,
                                     const collProfilerEventStateArgs_v1_t* args) {
  handle_t* h = eHandle;
  if (state == collProfilerStateWaiting)
    fprintf(h->ctx->f, "%.1f state id=%lu waiting peer=%d\n", nowUs() - h->ctx->t0, h->id, args->wait.peer);
  return collSuccess;
}

static collResult_t finalize(void* context) {
  ctx_t* c = context;
  fprintf(c->f, "%.1f finalize\n", nowUs() - c->t0);
  if (c->f != stderr) fclose(c->f);
  free(c);
  return collSuccess;
}

__attribute__((visibility("default"))) const collProfiler_v1_t collProfiler_v1 = {
    "example", init, startEvent, stopEvent, recordEventState, finalize};
