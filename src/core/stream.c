/*
 * stream.c - streams (completion domains) and the communicator's progress
 * thread. Work issued on a stream is queued and run in issue order by one
 * progress thread per communicator, which sleeps on a condition variable
 * when idle. A NULL stream runs the work on the caller's thread once the
 * queue is empty, so small blocking calls pay no thread hand-off.
 *
 * A thread that waits (collStreamSynchronize, or a NULL-stream call draining
 * the queue) runs the queued items itself, in issue order, whenever no item
 * is running: the common "issue, then wait" pattern then costs no wake-up of
 * the progress thread on the critical path (on this kind of VM a futex
 * wake-up of a sleeping thread costs 50-100 us, more than a small
 * all-reduce). Only one thread runs an item at a time (qrunning).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/devcall.h"
#include "misc/log.h"
#include "topo/topo.h"

/* The end of work on CUDA streams or device buffers (qlock held): its
 * further CUDA streams count it done, then the gate opens. */
static __attribute__((noinline)) void collWorkDoneDevice(collComm_t comm, collWork* w, collResult_t r) {
  for (int i = 0; i < w->nextra; i++) { /* a group's further CUDA streams */
    if (r != collSuccess && w->extra[i]->error == collSuccess) w->extra[i]->error = r;
    w->extra[i]->pending--;
  }
  if (w->dev) collDevWorkFinish(comm, w->dev); /* opens the CUDA streams' gate: the work counts as done */
  free(w->extra);
}

/* Pops the queue head and runs it. Called with qlock held and no item
 * running; returns with qlock held. */
static void collRunQueued(collComm_t comm) {
  collWork* w = comm->qhead;
  comm->qhead = w->next;
  if (!comm->qhead) comm->qtail = NULL;
  comm->qrunning = 1;
  pthread_mutex_unlock(&comm->qlock);
  collResult_t r = w->dev ? collDevWorkRun(comm, w->dev, w->ops, w->nops) : collEngineRun(comm, w->ops, w->nops);
  pthread_mutex_lock(&comm->qlock);
  comm->qrunning = 0;
  if (r != collSuccess && w->stream->error == collSuccess) w->stream->error = r;
  w->stream->pending--;
  comm->qbusy--;
  int extra = w->nextra;
  if (__builtin_expect(w->dev || extra, 0)) collWorkDoneDevice(comm, w, r);
  /* waiters wait for a stream or the whole queue to empty: waking them per
   * item would put an extra thread on the cores at every item */
  if (w->stream->pending == 0 || comm->qbusy == 0 || extra) pthread_cond_broadcast(&comm->qdone);
  if (comm->qhead) pthread_cond_signal(&comm->qcond); /* the next item, for the progress thread */
  free(w->ops);
  free(w);
}

static void* collProgressThread(void* arg) {
  collComm_t comm = arg;
  collTopoPinProgressThread(comm);
  pthread_mutex_lock(&comm->qlock);
  for (;;) {
    if (comm->qhead && !comm->qrunning) {
      collRunQueued(comm);
      continue;
    }
    if (comm->stopping && !comm->qhead && !comm->qrunning) break;
    pthread_cond_wait(&comm->qcond, &comm->qlock);
  }
  pthread_mutex_unlock(&comm->qlock);
  return NULL;
}

/* With qlock held: until *count is 0, runs queued items (when none is
 * running) or waits for the running one. */
static void collWaitRunning(collComm_t comm, const int* count) {
  while (*count > 0) {
    if (comm->qhead && !comm->qrunning) collRunQueued(comm);
    else pthread_cond_wait(&comm->qdone, &comm->qlock);
  }
}

/* Queues w on comm (starting the progress thread with the first item);
 * on failure frees w and what it holds. */
static inline __attribute__((always_inline)) collResult_t collEnqueue(collComm_t comm, collWork* w) {
  pthread_mutex_lock(&comm->qlock);
  if (!comm->threadStarted) {
    int e = pthread_create(&comm->progress, NULL, collProgressThread, comm);
    if (e != 0) {
      pthread_mutex_unlock(&comm->qlock);
      if (w->dev) collDevWorkFinish(comm, w->dev); /* its CUDA streams go on */
      free(w->extra);
      free(w->ops);
      free(w);
      return collSetError(collSystemError,
                          "rank %d: cannot start the progress thread that runs this communicator's stream "
                          "operations: pthread_create: %s%s",
                          comm->rank, strerror(e),
                          e == EAGAIN ? " (a limit is reached: threads, ulimit -u or the cgroup's pids.max; or memory "
                                        "for its stack, ulimit -s and ulimit -v); a NULL stream runs calls on the "
                                        "caller's thread instead"
                                      : "");
    }
    comm->threadStarted = 1;
  }
  if (comm->qtail) comm->qtail->next = w;
  else comm->qhead = w;
  comm->qtail = w;
  comm->qbusy++;
  w->stream->pending++;
  for (int i = 0; i < w->nextra; i++) w->extra[i]->pending++;
  pthread_cond_signal(&comm->qcond);
  pthread_mutex_unlock(&comm->qlock);
  return collSuccess;
}

/* A work item holding a copy of ops[0..nops) for stream; NULL: out of memory (error set). */
static collWork* collWorkNew(collStream_t stream, const collOp* ops, int nops) {
  collWork* w = calloc(1, sizeof *w);
  collOp* copy = malloc(sizeof(collOp) * (size_t)nops);
  if (!w || !copy) {
    free(w);
    free(copy);
    collSetError(collSystemError, "out of memory queueing an operation");
    return NULL;
  }
  memcpy(copy, ops, sizeof(collOp) * (size_t)nops);
  w->ops = copy;
  w->nops = nops;
  w->stream = stream;
  return w;
}

collResult_t collSubmit(collComm_t comm, collStream_t stream, const collOp* ops, int nops) {
  if (!stream) { /* the blocking host path: as before device buffers existed, one test more */
    collStreamsDrain(comm);
    if (__builtin_expect(collDevOpsOnDevice(ops, nops), 0)) return collDevRunBlocking(comm, ops, nops);
    return collEngineRun(comm, ops, nops);
  }
  if (__builtin_expect(stream->cuda || collDevOpsOnDevice(ops, nops), 0))
    return collSubmitStreams(comm, &stream, 1, ops, nops);
  collWork* w = collWorkNew(stream, ops, nops);
  return w ? collEnqueue(comm, w) : collSystemError;
}

collResult_t collSubmitStreams(collComm_t comm, collStream_t const* streams, int nstreams, const collOp* ops,
                               int nops) {
  if (nstreams == 0) return collSubmit(comm, NULL, ops, nops);
  collWork* w = collWorkNew(streams[0], ops, nops);
  if (!w) return collSystemError;
  if (nstreams > 1) {
    if (!(w->extra = malloc(sizeof *w->extra * (size_t)(nstreams - 1)))) {
      free(w->ops);
      free(w);
      return collSetError(collSystemError, "out of memory queueing an operation");
    }
    memcpy(w->extra, streams + 1, sizeof *w->extra * (size_t)(nstreams - 1));
    w->nextra = nstreams - 1;
  }
  collResult_t issued = collSuccess;
  if (streams[0]->cuda || collDevOpsOnDevice(ops, nops)) {
    /* events and gate waits on the CUDA streams, in issue order */
    issued = collDevWorkIssue(comm, streams, nstreams, ops, nops, &w->dev);
    if (!w->dev) {
      free(w->extra);
      free(w->ops);
      free(w);
      return issued;
    }
  }
  collResult_t r = collEnqueue(comm, w);
  return r != collSuccess ? r : issued;
}

void collStreamsDrain(collComm_t comm) {
  pthread_mutex_lock(&comm->qlock);
  collWaitRunning(comm, &comm->qbusy);
  pthread_mutex_unlock(&comm->qlock);
}

void collStreamsShutdown(collComm_t comm) {
  pthread_mutex_lock(&comm->qlock);
  comm->stopping = 1;
  pthread_cond_broadcast(&comm->qcond);
  int started = comm->threadStarted;
  comm->threadStarted = 0;
  pthread_mutex_unlock(&comm->qlock);
  if (started) pthread_join(comm->progress, NULL);
}

collResult_t collStreamCreateImpl(collComm_t comm, collStream_t* stream) {
  if (!stream) return collSetError(collInvalidArgument, "collStreamCreate: stream is NULL");
  *stream = NULL;
  collResult_t r = collCommEnter(comm, "collStreamCreate");
  if (r != collSuccess) return r;
  collStream_t s = calloc(1, sizeof *s);
  if (!s) r = collSetError(collSystemError, "collStreamCreate: out of memory");
  else {
    s->comm = comm;
    s->magic = COLL_STREAM_MAGIC;
    if ((r = collStreamRegister(comm, s)) != collSuccess) free(s);
    else *stream = s;
  }
  collCommLeave(comm);
  return r;
}

/* Waits for the stream; returns its first error (without clearing it).
 * The communicator cannot be freed meanwhile (collStreamEnter). */
collResult_t collStreamSynchronizeImpl(collStream_t s) {
  if (!s || s->magic != COLL_STREAM_MAGIC)
    return collSetError(collInvalidArgument, "collStreamSynchronize: stream is NULL or not a coll stream");
  collComm_t comm;
  collResult_t r = collStreamEnter(s, &comm, "collStreamSynchronize");
  if (r != collSuccess) return r;
  pthread_mutex_lock(&comm->qlock);
  collWaitRunning(comm, &s->pending);
  r = s->error;
  pthread_mutex_unlock(&comm->qlock);
  if (r != collSuccess) {
    char msg[sizeof comm->asyncMsg];
    collCommErrorMessage(comm, msg, sizeof msg);
    collSetError(r, "an operation on this stream failed: %s", msg[0] ? msg : collGetErrorString(r));
  }
  collCommLeave(comm);
  return r;
}

collResult_t collStreamQueryImpl(collStream_t s) {
  if (!s || s->magic != COLL_STREAM_MAGIC)
    return collSetError(collInvalidArgument, "collStreamQuery: stream is NULL or not a coll stream");
  collComm_t comm;
  collResult_t r = collStreamEnter(s, &comm, "collStreamQuery");
  if (r != collSuccess) return r;
  pthread_mutex_lock(&comm->qlock);
  r = s->error != collSuccess ? s->error : (s->pending > 0 ? collInProgress : collSuccess);
  pthread_mutex_unlock(&comm->qlock);
  if (r != collSuccess && r != collInProgress) /* the failure happened on the progress thread: say it here */
    collSetError(r, "an operation on this stream failed: %s", comm->asyncMsg[0] ? comm->asyncMsg : collGetErrorString(r));
  collCommLeave(comm);
  return r;
}

/* Synchronizes, then frees the stream. A stream whose communicator was
 * destroyed has nothing left to wait for: it is just freed. */
collResult_t collStreamDestroyImpl(collStream_t s) {
  if (!s) return collSuccess;
  if (s->magic != COLL_STREAM_MAGIC)
    return collSetError(collInvalidArgument, "collStreamDestroy: not a coll stream (destroyed twice?)");
  collComm_t comm;
  collResult_t r = collSuccess;
  if (collStreamEnter(s, &comm, "collStreamDestroy") == collSuccess) {
    collCommLeave(comm);
    r = collStreamSynchronize(s);
  } else {
    collClearError();
  }
  collStreamUnregister(s);
  s->magic = 0;
  free(s);
  return r;
}
