/*
 * launch.c - starting the benchmark ranks (see launch.h for the modes).
 *
 * -np N: the parent forks the N children first, then calls collGetUniqueId
 * and writes the id into one pipe per child. Forking before the library has
 * started any thread keeps the children free of copied locks; the parent
 * keeps the rendezvous listener alive while it waits. If a child fails or
 * the deadline passes, the others are killed and the status is non-zero.
 *
 * SPDX-License-Identifier: BSD-3-Clause
 */
#include "launch.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define GRACE_SEC 5 /* after a failure, how long the other ranks may take */

/* Prints a failed coll call to stderr with collGetLastError. */
void launchReportError(int rank, const char* what, collResult_t res, collComm_t comm) {
  char who[32] = "";
  if (rank >= 0) snprintf(who, sizeof who, "rank %d: ", rank);
  const char* msg = collGetLastError(comm);
  size_t n = strlen(what);
  if (strncmp(msg, what, n) == 0 && msg[n] == ':') /* the message names the call already */
    fprintf(stderr, "coll-tests: %s%s (%s)\n", who, msg, collGetErrorString(res));
  else
    fprintf(stderr, "coll-tests: %s%s failed: %s: %s\n", who, what, collGetErrorString(res), msg);
}

/* Seconds on the monotonic clock. */
static double nowSec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Sleeps for ms milliseconds. */
static void sleepMs(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Runs fn on comm, then destroys it (or aborts it when fn failed). */
static int runAndRelease(collComm_t comm, launchRankFn fn, void* arg) {
  int rc = fn(comm, arg);
  if (rc == LAUNCH_FAILED) {
    collCommAbort(comm);
    return rc;
  }
  collResult_t res = collCommDestroy(comm);
  if (res != collSuccess) {
    launchReportError(-1, "collCommDestroy", res, NULL);
    return LAUNCH_FAILED;
  }
  return rc;
}

/* Creates rank `rank` of nranks, runs fn, then destroys (or aborts) it. */
static int runOneRank(const launchOpts_t* o, const collUniqueId* id,
                      int nranks, int rank, launchRankFn fn, void* arg) {
  collConfig_t config = COLL_CONFIG_INITIALIZER;
  if (o->timeoutSec >= 0) config.timeoutSec = o->timeoutSec;
  collComm_t comm = NULL;
  collResult_t res = collCommInitRankConfig(&comm, nranks, *id, rank, &config);
  if (res != collSuccess) {
    launchReportError(rank, "collCommInitRankConfig", res, NULL);
    return LAUNCH_FAILED;
  }
  return runAndRelease(comm, fn, arg);
}

/* Shared state of the rank threads of one process. */
typedef struct {
  const launchOpts_t* opts;
  const collUniqueId* id;
  int nranks, firstRank;
  launchRankFn fn;
  void* arg;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int finished, worst;
} threadGroup_t;

typedef struct {
  threadGroup_t* g;
  int rank;
} threadArg_t;

/* Body of one rank thread: runs the rank, then reports to the group. */
static void* rankThread(void* p) {
  threadArg_t* t = p;
  threadGroup_t* g = t->g;
  int rc = runOneRank(g->opts, g->id, g->nranks, t->rank, g->fn, g->arg);
  pthread_mutex_lock(&g->lock);
  g->finished++;
  if (rc > g->worst) g->worst = rc;
  pthread_cond_broadcast(&g->cond);
  pthread_mutex_unlock(&g->lock);
  return NULL;
}

/* Runs ranks firstRank .. firstRank+nlocal-1 of nranks in this process, one
 * thread each. If one fails and the others do not finish within GRACE_SEC
 * (they may be blocked on the failed rank), the process exits. */
static int runLocalRanks(const launchOpts_t* o, const collUniqueId* id,
                         int nranks, int firstRank, int nlocal,
                         launchRankFn fn, void* arg) {
  if (nlocal == 1) return runOneRank(o, id, nranks, firstRank, fn, arg);
  threadGroup_t g = {.opts = o, .id = id, .nranks = nranks,
                     .firstRank = firstRank, .fn = fn, .arg = arg};
  pthread_mutex_init(&g.lock, NULL);
  pthread_cond_init(&g.cond, NULL);
  pthread_t* tids = calloc((size_t)nlocal, sizeof(*tids));
  threadArg_t* targs = calloc((size_t)nlocal, sizeof(*targs));
  if (!tids || !targs) {
    fprintf(stderr, "coll-tests: out of memory\n");
    return LAUNCH_FAILED;
  }
  int started = 0;
  for (; started < nlocal; started++) {
    targs[started] = (threadArg_t){&g, firstRank + started};
    if (pthread_create(&tids[started], NULL, rankThread, &targs[started])) {
      fprintf(stderr, "coll-tests: pthread_create failed\n");
      fflush(NULL);
      _exit(LAUNCH_FAILED); /* the started ranks would wait forever */
    }
  }
  pthread_mutex_lock(&g.lock);
  double giveUp = 0;
  while (g.finished < nlocal) {
    if (g.worst == LAUNCH_FAILED && giveUp == 0) giveUp = nowSec() + GRACE_SEC;
    if (giveUp != 0 && nowSec() > giveUp) {
      fprintf(stderr, "coll-tests: %d rank thread(s) still blocked after a "
              "failure; exiting\n", nlocal - g.finished);
      fflush(NULL);
      _exit(LAUNCH_FAILED);
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 1;
    pthread_cond_timedwait(&g.cond, &g.lock, &ts);
  }
  pthread_mutex_unlock(&g.lock);
  for (int i = 0; i < nlocal; i++) pthread_join(tids[i], NULL);
  free(tids);
  free(targs);
  return g.worst;
}

/* Writes all of buf to fd; returns 0 or -1. */
static int writeAll(int fd, const void* buf, size_t len) {
  const char* p = buf;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

/* Reads exactly len bytes from fd; returns 0 or -1 (EOF or error). */
static int readAll(int fd, void* buf, size_t len) {
  char* p = buf;
  while (len > 0) {
    ssize_t n = read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

/* COLL_TESTS_BIND=core: child p runs on the p-th CPU this process may use
 * (as mpirun --bind-to core does while ranks <= cores), when there are at
 * least as many CPUs as children; unset or none: the scheduler places it. */
static void bindChild(int p, int nprocs) {
  const char* b = getenv("COLL_TESTS_BIND");
  if (!b || strcmp(b, "core") != 0) return;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) < nprocs) return;
  for (int c = 0, k = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, &set)) continue;
    if (k++ != p) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(c, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) perror("coll-tests: COLL_TESTS_BIND: sched_setaffinity");
    return;
  }
}

/* Body of child process p: waits for the id, runs its ranks, exits. */
static void childMain(const launchOpts_t* o, int p, int readFd, pid_t parent,
                      launchRankFn fn, void* arg) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  bindChild(p, o->nprocs);
  if (getppid() != parent) _exit(LAUNCH_FAILED);
  collUniqueId id;
  if (readAll(readFd, &id, sizeof(id)) != 0) _exit(LAUNCH_FAILED);
  close(readFd);
  int nranks = o->nprocs * o->nthreads;
  int rc = runLocalRanks(o, &id, nranks, p * o->nthreads, o->nthreads, fn, arg);
  fflush(NULL);
  _exit(rc);
}

/* Sends sig to every child still running. */
static void killChildren(const pid_t* pids, const int* alive, int n, int sig) {
  for (int i = 0; i < n; i++)
    if (alive[i]) kill(pids[i], sig);
}

/* Waits for the children. When one fails (status >= LAUNCH_FAILED or a
 * signal), the others get GRACE_SEC to notice it and print their own error
 * (coll names the failed rank within ms on one host), then the rest are
 * killed; when the deadline passes, they are killed at once. Returns the
 * worst status of the children that ended on their own (124 after the
 * deadline). */
static int waitChildren(const launchOpts_t* o, const pid_t* pids, int n) {
  if (n <= 0) return 0;
  int* alive = calloc((size_t)n, sizeof(int));
  if (!alive) return LAUNCH_FAILED;
  for (int i = 0; i < n; i++) alive[i] = 1;
  int left = n, worst = 0, killing = 0;
  double deadline = o->launchTimeoutSec > 0 ? nowSec() + o->launchTimeoutSec : 0, hardKill = 0;
  double failedAt = 0; /* when the first child failed */
  while (left > 0) {
    int st;
    pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid > 0) {
      for (int i = 0; i < n; i++) {
        if (pids[i] != pid || !alive[i]) continue;
        alive[i] = 0;
        left--;
        int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (killing && WIFSIGNALED(st)) break; /* killed by us */
        if (rc > LAUNCH_WRONG) /* wrong results were reported already */
          fprintf(stderr, "coll-tests: rank process %d (pid %d) %s %d\n", i,
                  (int)pid, WIFEXITED(st) ? "exited with status" :
                  "killed by signal", WIFEXITED(st) ? rc : WTERMSIG(st));
        if (rc > worst) worst = rc;
        if (worst >= LAUNCH_FAILED && failedAt == 0) failedAt = nowSec();
      }
      continue;
    }
    if (pid < 0 && errno != EINTR) break;
    int late = deadline > 0 && nowSec() > deadline;
    int graceOver = failedAt > 0 && nowSec() > failedAt + GRACE_SEC;
    if (!killing && (graceOver || late)) {
      if (worst < LAUNCH_FAILED) {
        fprintf(stderr, "coll-tests: timeout after %d s (set "
                "COLL_TESTS_LAUNCH_TIMEOUT); killing the ranks\n",
                o->launchTimeoutSec);
        worst = 124;
      }
      killing = 1;
      killChildren(pids, alive, n, SIGTERM);
      hardKill = nowSec() + GRACE_SEC;
    } else if (killing && hardKill != 0 && nowSec() > hardKill) {
      killChildren(pids, alive, n, SIGKILL);
      hardKill = 0;
    }
    sleepMs(20);
  }
  free(alive);
  return worst;
}

/* -np mode: forks nprocs children, hands them a fresh unique id. */
static int launchProcs(const launchOpts_t* o, launchRankFn fn, void* arg) {
  int n = o->nprocs;
  setenv("COLL_SOCKET_IFNAME", "lo", 0);
  fflush(NULL);
  pid_t* pids = calloc((size_t)n, sizeof(pid_t));
  int* wfds = calloc((size_t)n, sizeof(int));
  if (!pids || !wfds) {
    fprintf(stderr, "coll-tests: out of memory\n");
    return LAUNCH_FAILED;
  }
  pid_t self = getpid();
  int forked = 0, rc = 0;
  for (; forked < n; forked++) {
    int fds[2];
    if (pipe(fds) != 0) break;
    pid_t pid = fork();
    if (pid < 0) {
      close(fds[0]);
      close(fds[1]);
      break;
    }
    if (pid == 0) {
      for (int i = 0; i < forked; i++) close(wfds[i]);
      close(fds[1]);
      childMain(o, forked, fds[0], self, fn, arg);
    }
    close(fds[0]);
    pids[forked] = pid;
    wfds[forked] = fds[1];
  }
  if (forked < n) {
    perror("coll-tests: pipe/fork");
    rc = LAUNCH_FAILED;
  }
  collUniqueId id;
  collResult_t res = rc ? collSuccess : collGetUniqueId(&id);
  if (res != collSuccess) {
    launchReportError(-1, "collGetUniqueId", res, NULL);
    rc = LAUNCH_FAILED;
  }
  /* On failure the children read EOF and exit. */
  signal(SIGPIPE, SIG_IGN);
  for (int i = 0; i < forked; i++) {
    if (rc == 0 && writeAll(wfds[i], &id, sizeof(id)) != 0) rc = LAUNCH_FAILED;
    close(wfds[i]);
  }
  int worst = waitChildren(o, pids, forked);
  free(pids);
  free(wfds);
  return worst > rc ? worst : rc;
}

/* Returns the world size a launcher put in the environment, 0 if there is
 * none, -1 if launcher variables are set but are not a valid job (one of a
 * pair, a size that is not a positive integer): collCommInitFromEnv then
 * names what is wrong instead of this process running a 1-rank job. */
static int launcherWorldSize(void) {
  static const char* vars[][2] = {{"RANK", "WORLD_SIZE"},
                                  {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                  {"PMI_RANK", "PMI_SIZE"},
                                  {"SLURM_PROCID", "SLURM_NTASKS"}};
  int half = 0;
  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
    const char* rank = getenv(vars[i][0]);
    const char* size = getenv(vars[i][1]);
    if (rank && *rank && size && *size) {
      char* end;
      long w = strtol(size, &end, 10);
      return *end || w < 1 || w > 65536 || (w == 1 && strcmp(rank, "0") != 0) ? -1 : (int)w;
    }
    if ((rank && *rank) || (size && *size)) half = 1;
  }
  return half ? -1 : 0;
}

/* Launcher mode: one rank per process, rendezvous by the library. */
static int launchFromEnv(const launchOpts_t* o, launchRankFn fn, void* arg) {
  collConfig_t config = COLL_CONFIG_INITIALIZER;
  if (o->timeoutSec >= 0) config.timeoutSec = o->timeoutSec;
  collComm_t comm = NULL;
  collResult_t res = collCommInitFromEnv(&comm, &config);
  if (res != collSuccess) {
    launchReportError(-1, "collCommInitFromEnv", res, NULL);
    return LAUNCH_FAILED;
  }
  return runAndRelease(comm, fn, arg);
}

/* Picks the mode (see launch.h) and runs the ranks. */
int launchRun(const launchOpts_t* o, launchRankFn fn, void* arg) {
  int world = launcherWorldSize();
  if (o->nprocs > 1 && world > 1) { /* every launched copy would run its own -np job */
    fprintf(stderr, "coll-tests: -np > 1 is not supported under a launcher "
            "(%d ranks found in the environment): drop -np, the launcher starts the ranks\n", world);
    return LAUNCH_FAILED;
  }
  if (o->nprocs > 1) return launchProcs(o, fn, arg);
  if (world > 1 || world < 0) {
    if (o->nthreads > 1 && world > 1) {
      fprintf(stderr, "coll-tests: -t > 1 is not supported under a launcher "
              "(%d ranks found in the environment)\n", world);
      return LAUNCH_FAILED;
    }
    return launchFromEnv(o, fn, arg);
  }
  setenv("COLL_SOCKET_IFNAME", "lo", 0);
  collUniqueId id;
  collResult_t res = collGetUniqueId(&id);
  if (res != collSuccess) {
    launchReportError(-1, "collGetUniqueId", res, NULL);
    return LAUNCH_FAILED;
  }
  return runLocalRanks(o, &id, o->nthreads, 0, o->nthreads, fn, arg);
}
