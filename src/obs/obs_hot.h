/*
 * obs_hot.h - the part of the counters that lives in the communicator
 * (struct collComm.obsHot), beside the fields the engine reads on every
 * call: the open run of equal mailbox calls and the one flag word of the
 * event consumers. A run of calls equal in function, count, type, op and
 * peer word costs one add per call (obs.h, collObsMailbox); its flight-
 * recorder record and its counters are written when it ends (src/obs/obs.c).
 */
#ifndef COLL_OBS_HOT_H_
#define COLL_OBS_HOT_H_

#include <stdint.h>

typedef struct {
  uint32_t mbLeft;  /* mailbox calls until the next one that is timed; 1 while events are on (every one) */
  int32_t events;   /* COLL_TRACE_FILE or COLL_PROFILER_PLUGIN on: launches call out */
  int32_t fn, peer; /* the open run's collOp.fn and collOp.peer (COLL_PEER_BARRIER: barrier); fn -1: no run */
  uint64_t count;   /* its collOp.count */
  uint64_t dtypeOp; /* its collOp.dtype and collOp.op, one 8-byte word */
  uint64_t reps;    /* calls in the open run (written by the engine's thread only) */
  int32_t pendCh, pendPhase, pendStep; /* the step the engine last found pending: what a wait is on */
} collObsHot;

#endif
