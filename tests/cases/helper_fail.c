/* helper_fail.c - measurements for the failure cases (helper_fail.h). */
#include "helper_fail.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double failNow(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static long failStatusKb(pid_t pid, const char* key) {
  char path[64], line[256];
  if (pid) snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  else snprintf(path, sizeof path, "/proc/self/status");
  FILE* f = fopen(path, "r");
  if (!f) return -1;
  long v = -1;
  size_t kl = strlen(key);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
      v = strtol(line + kl + 1, NULL, 10);
      break;
    }
  fclose(f);
  return v;
}

long failRssKb(pid_t pid) { return failStatusKb(pid, "VmRSS"); }
long failHwmKb(pid_t pid) { return failStatusKb(pid, "VmHWM"); }
int failCountThreads(void) { return (int)failStatusKb(0, "Threads"); }

int failResetHwm(void) {
  int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  int ok = write(fd, "5", 1) == 1;
  close(fd);
  return ok ? 0 : -1;
}

/* Calls fn(link target) for each open fd; returns the number of fds. */
static int failForFds(int (*fn)(const char*)) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0, dfd = dirfd(d);
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' || atoi(e->d_name) == dfd) continue;
    char path[300], target[300];
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    ssize_t k = readlink(path, target, sizeof target - 1);
    target[k > 0 ? k : 0] = 0;
    n += fn ? fn(target) : 1;
  }
  closedir(d);
  return n;
}

/* Writes the fd link targets of this process, space-separated, into buf. */
static char* failFdBuf;
static size_t failFdLen;
static int failFdName(const char* t) {
  size_t n = strlen(failFdBuf);
  if (n + 1 < failFdLen) snprintf(failFdBuf + n, failFdLen - n, "%s%s", n ? " " : "", t);
  return 1;
}
static void failFdNames(char* buf, size_t len) {
  buf[0] = 0;
  failFdBuf = buf;
  failFdLen = len;
  failForFds(failFdName);
}

/* coll's memfds (rings: "coll-shm"); not the launcher's output capture */
static int failIsCollMemfd(const char* t) { return strncmp(t, "/memfd:coll", 11) == 0 && !strstr(t, "launch"); }
int failCountFds(void) { return failForFds(NULL); }
int failCountMemfds(void) { return failForFds(failIsCollMemfd); }

int failCountDevShm(const pid_t* pids, int npids) {
  DIR* d = opendir("/dev/shm");
  if (!d) return 0;
  int n = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, "coll", 4) != 0) continue;
    int mine = npids == 0;
    for (int k = 0; k < npids && !mine; k++) { /* coll's names end in "-<pid of the creator>" */
      char tail[24];
      snprintf(tail, sizeof tail, "-%d", (int)pids[k]);
      size_t tl = strlen(tail), nl = strlen(e->d_name);
      mine = nl > tl && strcmp(e->d_name + nl - tl, tail) == 0;
    }
    n += mine;
  }
  closedir(d);
  return n;
}

void* failShared(size_t bytes) {
  void* p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

int failContainsAll(const char* text, const char* const* needles) {
  for (; *needles; needles++)
    if (!strstr(text, *needles)) return 0;
  return 1;
}

#define FAIL_MAX_RANKS 16

static int failPerfKillOnce(const char* perf, int nranks, const char* bytes, int iters, int victim, int sig,
                            double boundSec, int* portTaken);

int failPerfKill(const char* perf, int nranks, const char* bytes, int iters, int victim, int sig, double boundSec) {
  int taken = 0, f = 0;
  for (int attempt = 0; attempt < 3; attempt++) { /* see failJobTrial: another job took the port */
    f = failPerfKillOnce(perf, nranks, bytes, iters, victim, sig, boundSec, &taken);
    if (!taken) break;
    printf("(the rendezvous port was taken by another process: again on another port)\n");
  }
  return f;
}

static int failPerfKillOnce(const char* perf, int nranks, const char* bytes, int iters, int victim, int sig,
                            double boundSec, int* portTaken) {
  *portTaken = 0;
  if (nranks > FAIL_MAX_RANKS) return 1;
  char it[16];
  snprintf(it, sizeof it, "%d", iters);
  char* argv[] = {(char*)perf, "-b", (char*)bytes, "-e", (char*)bytes, "-n", it, "-c", "0", NULL};
  collLaunchSpec spec = {.nranks = nranks, .timeoutSec = 120, .capture = 1, .argv = argv};
  collLaunch* L = collLaunchStart(&spec);
  if (!L) return 1;
  int fails = 0;
  /* every rank is in its timed loop once rank 0 printed the table header
   * (it follows the first collectives) and a moment passed */
  double until = failNow() + 60;
  while (!strstr(collLaunchOutput(L, 0), "(GB/s)") && failNow() < until && collLaunchPoll(L) == nranks)
    usleep(20000);
  usleep(1500 * 1000);
  if (collLaunchPoll(L) != nranks) {
    for (int k = 0; k < nranks; k++) *portTaken |= strstr(collLaunchOutput(L, k), "in use") != NULL;
    if (*portTaken) {
      collLaunchFree(L);
      return 1;
    }
    fprintf(stderr, "a rank exited before the signal\n");
    collLaunchReport(L);
    collLaunchFree(L);
    return 1;
  }
  long rss0[FAIL_MAX_RANKS], peak[FAIL_MAX_RANKS];
  double exitAfter[FAIL_MAX_RANKS];
  for (int k = 0; k < nranks; k++) {
    rss0[k] = peak[k] = failRssKb(collLaunchPid(L, k));
    exitAfter[k] = -1;
  }
  pid_t vpid = collLaunchPid(L, victim);
  double t0 = failNow();
  collLaunchKill(L, victim, sig);
  for (;;) {
    collLaunchPoll(L);
    int running = 0;
    for (int k = 0; k < nranks; k++) {
      if (k == victim || exitAfter[k] >= 0) continue;
      if (collLaunchStatus(L, k) >= 0) {
        exitAfter[k] = failNow() - t0;
        continue;
      }
      long r = failRssKb(collLaunchPid(L, k));
      if (r > peak[k]) peak[k] = r;
      running++;
    }
    if (!running || failNow() - t0 > boundSec) break;
    for (int k = 0; k < nranks; k++) /* a runaway must not take the machine down */
      if (k != victim && peak[k] > 2 * rss0[k] + (512 << 10)) {
        fprintf(stderr, "rank %d: RSS %ld KiB (was %ld at the signal): stopping the run\n", k, peak[k], rss0[k]);
        t0 = -1e9; /* ends the loop; every survivor still running fails below */
      }
    usleep(20000);
  }
  collLaunchWait(L, 1);
  char name[48];
  snprintf(name, sizeof name, "rank %d (pid %d", victim, (int)vpid);
  for (int k = 0; k < nranks; k++) {
    if (k == victim) continue;
    const char* out = collLaunchOutput(L, k);
    int code = collLaunchExitCode(L, k);
    int ok = exitAfter[k] >= 0 && exitAfter[k] <= boundSec && code > 0 && peak[k] <= rss0[k] + rss0[k] / 10 + 8192 &&
             strstr(out, name) != NULL;
    printf("rank %d: %s: exit %d after %.2f s, RSS %ld KiB at the signal, peak %ld KiB after; names \"%s\": %s\n", k,
           ok ? "ok" : "FAILED", code, exitAfter[k], rss0[k], peak[k], name, strstr(out, name) ? "yes" : "no");
    if (!ok) {
      fails++;
      fprintf(stderr, "---- rank %d output ----\n%s\n", k, out);
    }
  }
  collLaunchFree(L);
  return fails;
}

/* ---- the looping job ------------------------------------------------------ */
static int failJobBody(int rank, int nranks, void* arg) {
  failJob* j = arg;
  j->fds0[rank] = failCountFds();
  collComm_t comm;
  collResult_t r = collCommInitFromEnv(&comm, NULL);
  /* the short timeout applies to the collectives, not to init on a loaded machine */
  if (r == collSuccess) r = collCommSetTimeout(comm, j->timeoutSec);
  if (r != collSuccess) {
    snprintf(j->msg[rank], sizeof j->msg[rank], "init: %s", collGetLastError(NULL));
    return 2;
  }
  enum { MAXN = 1 << 16 };
  static float a[MAXN], b[MAXN];
  static const size_t sizes[] = {1, 300, 1024, 1 << 16};
  for (size_t i = 0; i < MAXN; i++) a[i] = (float)(rank + 1);
  float want = (float)(nranks * (nranks + 1) / 2);
  double start = failNow();
  for (unsigned it = 0;; it++) {
    size_t n = sizes[it % 4];
    r = collAllReduce(a, b, n, collFloat, collSum, comm, NULL);
    if (r != collSuccess) break;
    if (b[0] != want || b[n - 1] != want) j->wrong[rank]++;
    if (it == 16) { /* warmed up: every path and connection made */
      j->rssReady[rank] = failRssKb(0);
      failResetHwm();
      __atomic_store_n(&j->ready[rank], 1, __ATOMIC_RELEASE);
    }
    if (failNow() - start > 100) break; /* never outlive the test */
  }
  j->errorAt[rank] = failNow();
  j->code[rank] = r;
  snprintf(j->msg[rank], sizeof j->msg[rank], "%s", collGetLastError(comm));
  double t0 = failNow();
  collResult_t d = collCommDestroy(comm);
  j->destroySec[rank] = d == collSuccess ? failNow() - t0 : 1e9;
  j->hwmEnd[rank] = failHwmKb(0);
  j->fdsEnd[rank] = failCountFds();
  j->memfdsEnd[rank] = failCountMemfds();
  if (j->fdsEnd[rank] != j->fds0[rank]) failFdNames(j->fdNames[rank], sizeof j->fdNames[rank]);
  __atomic_store_n(&j->done[rank], 1, __ATOMIC_RELEASE);
  return 0;
}

static int failJobTrialOnce(failJob* job, int nranks, int victim, int sig, double delay, double bound,
                            const char* words, double* worst, int verbose, int* portTaken);

int failJobTrial(failJob* job, int nranks, int victim, int sig, double delay, double bound, const char* words,
                 double* worst, int verbose) {
  int taken = 0, f = 0;
  /* another job on this machine may take the rendezvous port between the
   * check and rank 0's bind: that is not what is tested, try another port */
  for (int attempt = 0; attempt < 3; attempt++) {
    f = failJobTrialOnce(job, nranks, victim, sig, delay, bound, words, worst, verbose, &taken);
    if (!taken) break;
    printf("  (the rendezvous port was taken by another process: again on another port)\n");
  }
  return f;
}

static int failJobTrialOnce(failJob* job, int nranks, int victim, int sig, double delay, double bound,
                            const char* words, double* worst, int verbose, int* portTaken) {
  *portTaken = 0;
  int timeoutSec = job->timeoutSec;
  memset(job, 0, sizeof *job);
  job->timeoutSec = timeoutSec;
  collLaunchSpec spec = {.nranks = nranks, .timeoutSec = 60, .capture = 1, .body = failJobBody, .arg = job};
  collLaunch* L = collLaunchStart(&spec);
  if (!L) return 1;
  pid_t pids[FAIL_JOB_MAX] = {0};
  for (int k = 0; k < nranks && k < FAIL_JOB_MAX; k++) pids[k] = collLaunchPid(L, k);
  int fails = 0, all = 0;
  double until = failNow() + 30;
  while (!all && failNow() < until && collLaunchPoll(L) == nranks) {
    all = 1;
    for (int k = 0; k < nranks; k++) all &= __atomic_load_n(&job->ready[k], __ATOMIC_ACQUIRE);
    if (!all) usleep(2000);
  }
  if (!all) {
    for (int k = 0; k < nranks; k++) *portTaken |= strstr(job->msg[k], "in use") != NULL;
    if (*portTaken) {
      collLaunchFree(L);
      return 1;
    }
    printf("trial: the ranks did not all start looping\n");
    for (int k = 0; k < nranks; k++)
      if (job->msg[k][0]) printf("  rank %d: %s\n", k, job->msg[k]);
    collLaunchReport(L);
    collLaunchFree(L);
    return 1;
  }
  usleep((useconds_t)(delay * 1e6));
  pid_t vpid = collLaunchPid(L, victim);
  double t0 = failNow();
  collLaunchKill(L, victim, sig);
  *worst = 0;
  for (int k = 0; k < nranks; k++) { /* survivors finish on their own */
    if (k == victim) continue;
    while (!__atomic_load_n(&job->done[k], __ATOMIC_ACQUIRE) && failNow() - t0 < bound + 10 &&
           collLaunchStatus(L, k) < 0) {
      usleep(2000);
      collLaunchPoll(L);
    }
  }
  collLaunchKill(L, victim, SIGKILL);
  int bad = collLaunchWait(L, 10);
  int shmLeft = failCountDevShm(pids, nranks);
  if (shmLeft) {
    printf("  %d /dev/shm entries of this job's ranks are left\n", shmLeft);
    fails++;
  }
  char name[48];
  snprintf(name, sizeof name, "rank %d (pid %d", victim, (int)vpid);
  for (int k = 0; k < nranks; k++) {
    if (k == victim) continue;
    double dt = job->done[k] ? job->errorAt[k] - t0 : -1;
    if (dt > *worst) *worst = dt;
    const char* why = !job->done[k]                                    ? "no error recorded"
                      : collLaunchExitCode(L, k) != 0                  ? "rank exited non-zero"
                      : dt < 0                                         ? "error before the signal"
                      : dt > bound                                     ? "error too late"
                      : !strstr(job->msg[k], name) || !strstr(job->msg[k], words) ? "message does not name the rank"
                      : job->wrong[k]                                  ? "wrong values"
                      : job->destroySec[k] > 2.0                       ? "destroy slow or failed"
                      : job->fdsEnd[k] != job->fds0[k]                 ? "fds not back"
                      : job->memfdsEnd[k] != 0                         ? "memfds left"
                      : job->hwmEnd[k] > job->rssReady[k] + job->rssReady[k] / 10 + 2048 ? "peak RSS grew"
                                                                       : NULL;
    if (why || verbose)
      printf("  rank %d: %s: error after %.3f s (code %d), fds %d -> %d, memfds %d, RSS %ld -> peak %ld KiB, destroy "
             "%.3f s\n    \"%s\"\n", k, why ? why : "ok", dt, job->code[k], job->fds0[k], job->fdsEnd[k],
             job->memfdsEnd[k], job->rssReady[k], job->hwmEnd[k], job->destroySec[k], job->msg[k]);
    if (why && job->fdsEnd[k] != job->fds0[k]) printf("    open after destroy: %s\n", job->fdNames[k]);
    if (why) fails++;
  }
  if (fails) {
    printf("  (victim rank %d pid %d, signal %d; %d rank(s) with a bad exit)\n", victim, (int)vpid, sig, bad);
    collLaunchReport(L);
  }
  collLaunchFree(L);
  return fails;
}
