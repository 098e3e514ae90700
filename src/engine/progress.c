/*
 * progress.c - how executors wait, deadlines and abort.
 *
 * A waiting thread cannot assume that it, or the peer it waits for, has a
 * core: other processes, the framework's threads or the rank's own peers may
 * hold them, and the scheduler may put both ranks of a pair on one core
 * while another core runs someone else. A wait therefore goes through three
 * phases:
 *  1. poll without yielding, for a window that adapts per communicator
 *     (1-50 us, at most COLL_SPIN_US; none when the machine runs more ranks
 *     than it has cores): it halves after a wait that outlasted it and
 *     doubles after one that ended inside it, so a pair whose waits end only
 *     when the other gets the core stops burning it;
 *  2. poll with sched_yield() between polls, so that whoever can make
 *     progress on this core (often the awaited peer) runs at once, until
 *     COLL_SPIN_US passed since the wait began;
 *  3. sleep on a futex word or in poll() on the fds of what is pending (at
 *     most 5 ms at a time), woken by the peer's post.
 * A yield is only cheap while nothing but our own ranks wants the core.
 * Otherwise the scheduler (EEVDF: a yield moves the task's deadline one
 * slice on) gives the other task a whole time slice, 0.7-3 ms, where a
 * sleeper would be woken within microseconds of the post. So a yield that
 * lasted over COLL_BUSY_YIELD_SEC ends phase 2 at once, and for a backoff
 * period (10 ms, doubled by each long yield that ends one, at most 1 s) the
 * waits of the communicator go from phase 1 straight to phase 3. Only when
 * another task may have held the core: a long yield while the machine's
 * runnable tasks are this rank and its runnable peers on this kernel went
 * to one of those (a peer copying or reducing a large call, or touching new
 * memory); that wait sleeps, but no backoff follows, which would make the
 * next small calls sleep too (4 ranks on 2 cores: a 64 B all-reduce took
 * 26 us in the 10 ms after the benchmark's buffer setup, 2-3 us yielding).
 * That verdict ("our own ranks") holds for COLL_OWN_VERDICT_SEC: the long
 * yields in that time read no /proc files. Where every yield is long (two
 * ranks on one core, each wait lasts the peer's whole step) the check cost
 * up to six syscalls per wait: on a TCG guest with Soft-RoCE, several times
 * the single doorbell write that an 8-byte all-reduce itself needs.
 */
#include "engine/progress.h"

#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "engine/runnable.h"
#include "misc/log.h"
#include "misc/socket.h"
#include "obs/obs.h"

#define COLL_PURE_MIN_SEC 1e-6
#define COLL_PURE_MAX_SEC 50e-6
#define COLL_BUSY_YIELD_SEC 200e-6 /* a peer's turn is shorter; another task's slice is longer */
#define COLL_BUSY_BACKOFF_MIN_SEC 10e-3
#define COLL_BUSY_BACKOFF_MAX_SEC 1.0
#define COLL_OWN_VERDICT_SEC 10e-3 /* as the shortest backoff: a foreign task starts one at most this late */

static double collPureMax(collComm_t comm) {
  double spin = comm->spinUs * 1e-6;
  if (comm->yieldWait) return 0; /* more ranks than cores: someone always waits for a core */
  return spin < COLL_PURE_MAX_SEC ? spin : COLL_PURE_MAX_SEC;
}

void collIdleInit(collComm_t comm, collIdle* w) {
  double max = collPureMax(comm);
  double pure = comm->waitPureSec;
  if (pure <= 0) pure = max; /* the first wait */
  else if (comm->waitEscalated == 2) pure *= 0.5;
  else if (comm->waitEscalated == 1) pure *= 2; /* a wait that never idled teaches nothing */
  if (pure > max) pure = max;
  if (pure < COLL_PURE_MIN_SEC && max >= COLL_PURE_MIN_SEC) pure = COLL_PURE_MIN_SEC;
  comm->waitPureSec = pure;
  comm->waitEscalated = 0;
  w->comm = comm;
  w->idle = 0;
  w->pureSec = pure;
  w->spinSec = comm->spinUs * 1e-6;
  w->sleeping = comm->spinUs <= 0;
  w->yield = 0;
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

void collIdleAdd(collIdle* w, const collNet_t* net, void* netComm, short events) {
  if (w->nfds >= COLL_MAX_POLLFDS) return;
  w->nets[w->nfds] = net;
  w->comms[w->nfds] = netComm;
  w->fds[w->nfds].events = events;
  w->nfds++;
}

/* The fd of net's listen comm on this communicator, or -1. A transport
 * whose send comms have no fd of their own (ib: a completion never makes an
 * fd writable) gives its listeners the fd that turns readable on any of its
 * events, sends' completions included (ib.h); other transports' listen fds
 * are readable only on an incoming connection, a harmless wake-up. */
static int collIdleListenFd(const collIdle* w, const collNet_t* net) {
  for (int k = 0; k < COLL_NET_SLOTS; k++) {
    int fd = -1;
    if (w->comm->nets[k] == net && w->comm->listenComms[k] &&
        net->getPollFd(w->comm->listenComms[k], &fd) == collSuccess && fd >= 0)
      return fd;
  }
  return -1;
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
    short ev = w->fds[i].events;
    if (w->nets[i]->getPollFd(w->comms[i], &fd) != collSuccess) continue;
    if (fd < 0 && ev == POLLOUT) { /* a send comm without an fd: its transport's listen fd (POLLIN) */
      fd = collIdleListenFd(w, w->nets[i]);
      ev = POLLIN;
    }
    if (fd < 0) continue;
    w->fds[n].fd = fd;
    w->fds[n].events = ev;
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

/* Whether a task not of this communicator may be runnable: the machine
 * runs more tasks than this thread and the communicator's runnable ranks on
 * this kernel (a peer's state is read only while the count could be ours),
 * or the count is unknown (a long yield then starts a backoff, as always). */
static int collIdleForeignTask(const struct collComm* comm) {
  int n = collSysRunnable();
  if (n < 0 || n > comm->kernelRanks) return 1;
  int ours = 1;
  uint64_t kernel = comm->peers[comm->rank].kernelHash;
  for (int i = 0; i < comm->nranks && n > ours; i++)
    if (i != comm->rank && comm->peers[i].kernelHash == kernel && collTaskRunnable(comm->peers[i].pid) == 1) ours++;
  return n > ours;
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
    w->yield = 0;
    w->nfds = 0;
    w->futexWord = NULL;
    return collSuccess;
  }
  ++w->idle;
  /* while polling without yield the clock (~25-60 ns on a VM) is read every
   * 8th idle step, then on every step (a yield may last a time slice) */
  if (w->sleeping || w->yield || (w->idle & 7) == 1) {
    double now = collTimeNow();
    if (w->idleSince == 0) {
      w->idleSince = now;
      if (!comm->waitEscalated) comm->waitEscalated = 1;
    }
    double idleFor = now - w->idleSince;
    if (!w->yield && !w->sleeping && idleFor >= w->pureSec) {
      comm->waitEscalated = 2;
      if (now < comm->waitBusyUntil) {
        w->sleeping = 1; /* the core is contended: see the top of this file */
      } else {
        if (comm->waitBusyBackoff > 0 && now - comm->waitBusyUntil > 4 * comm->waitBusyBackoff)
          comm->waitBusyBackoff = 0; /* no long yield for a while: the next backoff starts small */
        w->yield = 1;
      }
    }
    if (idleFor > w->spinSec) w->sleeping = 1;
    collObsWaiting(comm, waitPeer, w->idleSince, now);
    if (w->deadline > 0 && now > w->deadline) {
      collSetError(collTimeout, "rank %d: %s timed out after %g s (%s) waiting on rank %d (%s)", comm->rank, what,
                   comm->runTimeoutSec, collTimeoutSource(comm), waitPeer,
                   waitPeer >= 0 ? collCommPeerHost(comm, waitPeer) : "-");
      return collEngineFail(comm, collTimeout);
    }
  }
  if (w->sleeping) {
    collIdleSleep(w);
  } else if (w->yield) {
    double t0 = collTimeNow();
    sched_yield();
    double t1 = collTimeNow();
    if (t1 - t0 > COLL_BUSY_YIELD_SEC) { /* the core is contended: see the top of this file */
      w->sleeping = 1;
      if (t1 < comm->waitOwnUntil) {
        /* our own ranks a moment ago: still them */
      } else if (collIdleForeignTask(comm)) {
        double b = comm->waitBusyBackoff <= 0 ? COLL_BUSY_BACKOFF_MIN_SEC : 2 * comm->waitBusyBackoff;
        comm->waitBusyBackoff = b < COLL_BUSY_BACKOFF_MAX_SEC ? b : COLL_BUSY_BACKOFF_MAX_SEC;
        comm->waitBusyUntil = t1 + comm->waitBusyBackoff;
      } else {
        comm->waitOwnUntil = t1 + COLL_OWN_VERDICT_SEC;
      }
    }
  }
  w->nfds = 0;
  w->futexWord = NULL;
  return collSuccess;
}
