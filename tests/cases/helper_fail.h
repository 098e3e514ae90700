/*
 * helper_fail.h - measurements shared by the failure cases (i13_*, br18,
 * br36, br37, br44): clocks, RSS and its peak, open fds, memfds, threads,
 * /dev/shm entries, memory shared between a test and its rank processes,
 * and the allreduce_perf "kill one rank" scenario of issue 13.
 *
 * Use from a tests/cases test: in its <name>.cmake,
 *   include(${CMAKE_CURRENT_SOURCE_DIR}/helper_fail.cmake)
 */
#ifndef COLL_HELPER_FAIL_H_
#define COLL_HELPER_FAIL_H_

#include <stddef.h>
#include <sys/types.h>

#include "coll.h"
#include "helper_launch.h"

/* CLOCK_MONOTONIC seconds (comparable between processes). */
double failNow(void);
/* VmRSS / VmHWM of pid (0: this process) in KiB; -1 if unreadable. */
long failRssKb(pid_t pid);
long failHwmKb(pid_t pid);
/* Resets this process's VmHWM to its current RSS (Linux >= 4.0). 0 on success. */
int failResetHwm(void);
/* Open fds, fds that are memfds named "coll*", threads of this process. */
int failCountFds(void);
int failCountMemfds(void);
int failCountThreads(void);
/* Entries of /dev/shm whose name starts with "coll" and ends in "-<pid>"
 * for one of the npids pids (npids 0: every coll entry; the machine may be
 * shared with other jobs). */
int failCountDevShm(const pid_t* pids, int npids);
/* Zeroed memory shared with processes forked afterwards (never freed). */
void* failShared(size_t bytes);
/* 1 if the text contains every needle (NULL-terminated list). */
int failContainsAll(const char* text, const char* const* needles);

/* Issue 13.1 / 13.10: `nranks` allreduce_perf processes launched as
 * torchrun does (-b bytes -e bytes -n iters -c 0, no -np); once every rank
 * runs its timed loop, rank `victim` gets `sig` (SIGKILL, SIGTERM, SIGINT).
 * The survivors' RSS is sampled every 20 ms until they exit (at most
 * boundSec). Passes (returns 0) when every survivor exited non-zero within
 * boundSec of the signal, its peak RSS after the signal stayed within 10 %
 * (+ 8 MiB) of its RSS at the signal, and its output names the victim
 * ("rank V (pid P"); prints the numbers either way. */
int failPerfKill(const char* perf, int nranks, const char* bytes, int iters, int victim, int sig, double boundSec);

/* A job of torchrun-style rank processes (collCommInitFromEnv) that loop
 * over all-reduces of 1 .. 65536 floats (mailbox and ring paths, checked
 * values) until one fails; each rank records what a survivor must show. */
#define FAIL_JOB_MAX 16
typedef struct {
  int timeoutSec;                  /* collCommSetTimeout after init */
  int ready[FAIL_JOB_MAX];         /* warmed up, looping */
  int done[FAIL_JOB_MAX];          /* error recorded, communicator destroyed */
  double errorAt[FAIL_JOB_MAX];    /* failNow() when the error came */
  double destroySec[FAIL_JOB_MAX]; /* how long collCommDestroy took */
  int code[FAIL_JOB_MAX];
  int wrong[FAIL_JOB_MAX];         /* all-reduces with a wrong value */
  long rssReady[FAIL_JOB_MAX], hwmEnd[FAIL_JOB_MAX]; /* KiB; VmHWM reset when ready */
  int fds0[FAIL_JOB_MAX], fdsEnd[FAIL_JOB_MAX], memfdsEnd[FAIL_JOB_MAX];
  char msg[FAIL_JOB_MAX][1024];
  char fdNames[FAIL_JOB_MAX][512]; /* when fds are not back: what is open after destroy */
} failJob;

/* One trial: starts nranks ranks, waits until all loop, waits `delay`
 * seconds, sends sig to `victim` and checks every survivor: an error within
 * `bound` seconds of the signal, its message naming the victim ("rank V
 * (pid P" and `words`, e.g. "has exited" or "is stopped"), no wrong value,
 * destroy within 2 s, fds back to the count before init, no coll memfd,
 * peak RSS within 10 % (+ 2 MiB) of the RSS when ready. The victim is then
 * killed; no /dev/shm entry of its ranks may be left. Returns the number
 * of failed checks; *worst gets the slowest
 * survivor's time to error. */
int failJobTrial(failJob* job, int nranks, int victim, int sig, double delay, double bound, const char* words,
                 double* worst, int verbose);

#endif
