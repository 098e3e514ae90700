/* progress.h - helpers shared by the collective and p2p executors. */
#ifndef COLL_PROGRESS_H_
#define COLL_PROGRESS_H_

#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>

#include "engine/engine.h"

#define COLL_MAX_POLLFDS 64

/* Idle handling for an executor loop (policy: progress.c): counts idle
 * iterations, polls, then yields between polls, then sleeps in poll() on the
 * given fds (or on a futex word) once they lasted COLL_SPIN_US, and turns the
 * comm's abort flag or a passed deadline into an error (naming `what`).
 * One wait per collIdleInit: the adaptive window learns from each. */
typedef struct {
  int idle;
  int sleeping;      /* phase 3 (progress.c): sleep on every idle step */
  int yield;         /* phase 2: sched_yield() between polls */
  double pureSec;    /* length of phase 1 (comm->waitPureSec when the wait began) */
  double spinSec;    /* COLL_SPIN_US in seconds */
  double idleSince;  /* when the current idle stretch began (0: not read yet) */
  double deadline;
  /* what the pending requests wait on; resolved to fds only before sleeping
   * (getPollFd may arm a transport's wake-up, so it is not called per spin) */
  const collNet_t* nets[COLL_MAX_POLLFDS];
  void* comms[COLL_MAX_POLLFDS];
  struct pollfd fds[COLL_MAX_POLLFDS];
  int nfds;
  /* or a 32-bit word in shared memory to sleep on while it holds futexVal;
   * the sleeper counts itself in *futexSleepers (see mailbox.c) */
  _Atomic uint32_t* futexWord;
  uint32_t futexVal;
  _Atomic int32_t* futexSleepers;
  collComm_t comm;   /* whose adaptive state (waitPureSec, waitBusy*) this wait reads and updates */
} collIdle;

void collIdleInit(collComm_t comm, collIdle* w);
/* Adds a transport comm's fd for POLLIN (recv) or POLLOUT (send). */
void collIdleAdd(collIdle* w, const collNet_t* net, void* netComm, short events);
/* Sleep on a futex word instead of fds (this step only, like collIdleAdd). */
void collIdleFutex(collIdle* w, _Atomic uint32_t* word, uint32_t val, _Atomic int32_t* sleepers);
/* Call once per loop iteration. Returns collSuccess to continue. */
collResult_t collIdleStep(collComm_t comm, collIdle* w, int progressed, const char* what, int waitPeer);
/* Records a failure on the comm (aborting it), closes its connections and
 * listeners, completes the message (rejected connections, ranks on this
 * host that exited or stopped) and returns r. */
collResult_t collEngineFail(collComm_t comm, collResult_t r);
/* collEngineCloseConns that also reports what a transport said on closing
 * (e.g. the peer rejected the connection) into why (empty if nothing). */
void collEngineCloseConnsWhy(collComm_t comm, char* why, size_t whySize);

#endif
