/* progress.c - spin-then-poll waiting, deadlines and abort for executors. */
#include "engine/progress.h"

#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "misc/log.h"
#include "misc/socket.h"
#include "obs/obs.h"

void collIdleInit(collComm_t comm, collIdle* w) {
  w->idle = 0;
  w->spinSec = comm->spinUs * 1e-6;
  w->sleeping = comm->spinUs <= 0;
  w->yield = comm->yieldWait;
  w->idleSince = 0;
  w->deadline = comm->runTimeoutSec > 0 ? collTimeNow() + comm->runTimeoutSec : 0;
  w->nfds = 0;
  w->futexWord = NULL;
}

void collIdleFutex(collIdle* w, _Atomic uint32_t* word, uint32_t val, _Atomic int32_t* sleepers) {
  w->futexWord = word;
  w->futexVal = val;
  w->futexSleepers = sleepers;
}

void collIdleAdd(collIdle* w, const collNet_v2_t* net, void* netComm, short events) {
  if (w->nfds >= COLL_MAX_POLLFDS) return;
  w->nets[w->nfds] = net;
  w->comms[w->nfds] = netComm;
  w->fds[w->nfds].events = events;
  w->nfds++;
}

/* Sleeps on the futex word, or in poll() on the fds of what is pending (at
 * most 5 ms either way). */
static void collIdleSleep(collIdle* w) {
  if (w->futexWord) {
    atomic_fetch_add(w->futexSleepers, 1); /* seq_cst: before the re-read below */
    if (atomic_load(w->futexWord) == w->futexVal) {
      struct timespec ts = {0, 5 * 1000 * 1000};
      syscall(SYS_futex, w->futexWord, FUTEX_WAIT, w->futexVal, &ts, NULL, 0);
    }
    atomic_fetch_sub(w->futexSleepers, 1);
    return;
  }
  int n = 0;
  for (int i = 0; i < w->nfds; i++) {
    int fd = -1;
    if (w->nets[i]->getPollFd(w->comms[i], &fd) != collSuccess || fd < 0) continue;
    w->fds[n].fd = fd;
    w->fds[n].events = w->fds[i].events;
    w->fds[n].revents = 0;
    n++;
  }
  if (n > 0) poll(w->fds, (nfds_t)n, 5);
  else sched_yield();
}

/* The first failure of a communicator: closes everything (peers blocked on
 * us fail fast), then records the message, completed with what the
 * connections told on closing (a peer that rejected one) and with the
 * ranks on this host that stopped progressing (engine/blame.c). */
collResult_t collEngineFail(collComm_t comm, collResult_t r) {
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", collLastErrorMessage());
  /* recorded at once (this also sets abortFlag), so that a call issued
   * meanwhile fails with this reason; completed below */
  int first = collCommSetAsyncError(comm, r, msg);
  char why[400] = "";
  collEngineCloseConnsWhy(comm, why, sizeof why);
  size_t len0 = strlen(msg);
  if (first && why[0]) snprintf(msg + len0, sizeof msg - len0, "; %s", why);
  if (first && (r == collRemoteError || r == collTimeout || r == collSystemError))
    collEngineBlame(comm, msg, sizeof msg);
  if (strlen(msg) != len0) {
    collSetError(r, "%s", msg);
    collCommRefineAsyncError(comm, msg);
  }
  collObsFailure(comm, r, msg);
  return r;
}

/* How the deadline of the running operation was set, for messages. */
static const char* collTimeoutSource(const struct collComm* comm) {
  return comm->runTimeoutPerCall ? "per-call timeout, collCommSetCallTimeout" : "COLL_TIMEOUT / collCommSetTimeout";
}

collResult_t collIdleStep(collComm_t comm, collIdle* w, int progressed, const char* what, int waitPeer) {
  if (__atomic_load_n(&comm->abortFlag, __ATOMIC_ACQUIRE)) {
    collResult_t e = __atomic_load_n(&comm->asyncError, __ATOMIC_ACQUIRE);
    if (e == collSuccess || e == collInProgress) e = collRemoteError;
    char msg[sizeof comm->asyncMsg];
    collCommErrorMessage(comm, msg, sizeof msg);
    return collSetError(e, "rank %d: %s interrupted: communicator aborted (%s)", comm->rank, what,
                        msg[0] ? msg : "collCommAbort");
  }
  if (progressed) {
    if (w->idleSince != 0) collObsWaitEnd(comm);
    w->idle = 0;
    w->idleSince = 0;
    w->sleeping = w->spinSec <= 0;
    w->nfds = 0;
    w->futexWord = NULL;
    return collSuccess;
  }
  ++w->idle;
  /* while spinning, the clock (~60 ns on a VM) is read every 64th idle step
   * (every step when yielding: a yield may last a time slice) */
  if (w->sleeping || w->yield || (w->idle & 63) == 0) {
    double now = collTimeNow();
    if (w->idleSince == 0) w->idleSince = now;
    else if (now - w->idleSince > w->spinSec) w->sleeping = 1;
    collObsWaiting(comm, waitPeer, now);
    if (w->deadline > 0 && now > w->deadline) {
      collSetError(collTimeout, "rank %d: %s timed out after %g s (%s) waiting on rank %d (%s)", comm->rank, what,
                   comm->runTimeoutSec, collTimeoutSource(comm), waitPeer,
                   waitPeer >= 0 ? collCommPeerHost(comm, waitPeer) : "-");
      return collEngineFail(comm, collTimeout);
    }
  }
  if (w->sleeping) collIdleSleep(w);
  else if (w->yield) sched_yield();
  w->nfds = 0;
  w->futexWord = NULL;
  return collSuccess;
}
