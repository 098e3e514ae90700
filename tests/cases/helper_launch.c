/* helper_launch.c - torchrun-style rank processes for tests (helper_launch.h). */
#include "helper_launch.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  pid_t pid;      /* 0 once reaped (or never started) */
  int status;     /* waitpid status, -1 while running */
  int timedOut;
  double exitAt;  /* seconds after the start, -1 while running */
  int outFd;      /* memfd with the rank's output, -1 without capture */
  char* out;
} collLaunchRank;

struct collLaunch {
  collLaunchSpec spec;
  int port;
  double t0;
  collLaunchRank* r;
};

static double collLaunchNow(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int collLaunchFreePort(void) {
  for (int attempt = 0; attempt < 64; attempt++) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    int ok = bind(s, (struct sockaddr*)&a, sizeof a) == 0 && getsockname(s, (struct sockaddr*)&a, &al) == 0;
    close(s);
    int p = ok ? (int)ntohs(a.sin_port) - 1 : 0; /* coll's root takes MASTER_PORT + 1 = the port just seen free */
    if (p > 1024) return p;
  }
  return 0;
}

static void collLaunchChild(const collLaunch* L, int rank, pid_t parent) {
  const collLaunchSpec* s = &L->spec;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127); /* the parent is already gone */
  /* as a launcher starts a rank: default dispositions, nothing blocked (a
   * test run in the background would otherwise pass SIGINT on ignored) */
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  alarm((unsigned)(s->timeoutSec > 0 ? s->timeoutSec : 120) + 5);
  if (L->r[rank].outFd >= 0) {
    dup2(L->r[rank].outFd, 1);
    dup2(L->r[rank].outFd, 2);
    close(L->r[rank].outFd);
  }
  for (int k = 0; k < s->nranks; k++) /* other ranks' capture files are not ours */
    if (k != rank && L->r[k].outFd >= 0) close(L->r[k].outFd);
  char v[32];
  snprintf(v, sizeof v, "%d", rank);
  setenv("RANK", v, 1);
  setenv("LOCAL_RANK", v, 1);
  snprintf(v, sizeof v, "%d", s->nranks);
  setenv("WORLD_SIZE", v, 1);
  setenv("LOCAL_WORLD_SIZE", v, 1);
  setenv("MASTER_ADDR", s->masterAddr ? s->masterAddr : "127.0.0.1", 1);
  snprintf(v, sizeof v, "%d", L->port);
  setenv("MASTER_PORT", v, 1);
  if (s->runId) setenv("TORCHELASTIC_RUN_ID", s->runId, 1);
  setenv("COLL_SOCKET_IFNAME", "lo", 0);
  if (s->setup) s->setup(rank, s->nranks, s->arg);
  if (s->argv) {
    execvp(s->argv[0], s->argv);
    fprintf(stderr, "helper_launch: exec %s: %s\n", s->argv[0], strerror(errno));
    _exit(127);
  }
  int rc = s->body ? s->body(rank, s->nranks, s->arg) : 0;
  fflush(stdout);
  fflush(stderr);
  _exit(rc);
}

collLaunch* collLaunchStart(const collLaunchSpec* spec) {
  if (!spec || spec->nranks < 1 || (!spec->argv && !spec->body)) {
    fprintf(stderr, "helper_launch: bad spec\n");
    return NULL;
  }
  collLaunch* L = calloc(1, sizeof *L);
  if (!L) return NULL;
  L->spec = *spec;
  L->r = calloc((size_t)spec->nranks, sizeof *L->r);
  L->port = spec->masterPort > 0 ? spec->masterPort : collLaunchFreePort();
  if (!L->r || L->port <= 0) {
    fprintf(stderr, "helper_launch: %s\n", L->r ? "no free port" : "out of memory");
    free(L->r);
    free(L);
    return NULL;
  }
  for (int k = 0; k < spec->nranks; k++) {
    L->r[k].status = -1;
    L->r[k].exitAt = -1;
    L->r[k].outFd = spec->capture ? memfd_create("coll-launch-out", MFD_CLOEXEC) : -1;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t parent = getpid();
  L->t0 = collLaunchNow();
  for (int k = 0; k < spec->nranks; k++) {
    pid_t p = fork();
    if (p < 0) {
      fprintf(stderr, "helper_launch: fork: %s\n", strerror(errno));
      collLaunchFree(L);
      return NULL;
    }
    if (p == 0) collLaunchChild(L, k, parent);
    L->r[k].pid = p;
  }
  return L;
}

int collLaunchMasterPort(const collLaunch* L) { return L->port; }
pid_t collLaunchPid(const collLaunch* L, int rank) {
  return rank >= 0 && rank < L->spec.nranks ? L->r[rank].pid : 0;
}

void collLaunchKill(collLaunch* L, int rank, int sig) {
  if (rank >= 0 && rank < L->spec.nranks && L->r[rank].pid > 0) kill(L->r[rank].pid, sig);
}

static void collLaunchReaped(collLaunch* L, pid_t p, int status) {
  for (int k = 0; k < L->spec.nranks; k++)
    if (L->r[k].pid == p) {
      L->r[k].pid = 0;
      L->r[k].status = status;
      L->r[k].exitAt = collLaunchNow() - L->t0;
    }
}

int collLaunchPoll(collLaunch* L) {
  int running = 0;
  for (int k = 0; k < L->spec.nranks; k++) {
    if (L->r[k].pid <= 0) continue;
    int st;
    pid_t p = waitpid(L->r[k].pid, &st, WNOHANG);
    if (p == L->r[k].pid) collLaunchReaped(L, p, st);
    else running++;
  }
  return running;
}

int collLaunchWait(collLaunch* L, int timeoutSec) {
  if (timeoutSec <= 0) timeoutSec = L->spec.timeoutSec > 0 ? L->spec.timeoutSec : 120;
  double end = collLaunchNow() + timeoutSec;
  while (collLaunchPoll(L) > 0 && collLaunchNow() < end) usleep(2000);
  for (int k = 0; k < L->spec.nranks; k++) {
    if (L->r[k].pid <= 0) continue;
    L->r[k].timedOut = 1;
    kill(L->r[k].pid, SIGKILL);
    kill(L->r[k].pid, SIGCONT);
    int st;
    if (waitpid(L->r[k].pid, &st, 0) == L->r[k].pid) collLaunchReaped(L, L->r[k].pid, st);
  }
  int bad = 0;
  for (int k = 0; k < L->spec.nranks; k++) bad += collLaunchExitCode(L, k) != 0;
  return bad;
}

int collLaunchStatus(const collLaunch* L, int rank) { return L->r[rank].pid > 0 ? -1 : L->r[rank].status; }

int collLaunchExitCode(const collLaunch* L, int rank) {
  int st = collLaunchStatus(L, rank);
  return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

double collLaunchExitTime(const collLaunch* L, int rank) { return L->r[rank].exitAt; }
int collLaunchTimedOut(const collLaunch* L, int rank) { return L->r[rank].timedOut; }

const char* collLaunchOutput(collLaunch* L, int rank) {
  collLaunchRank* r = &L->r[rank];
  free(r->out);
  r->out = NULL;
  struct stat st;
  if (r->outFd < 0 || fstat(r->outFd, &st) != 0) return "";
  r->out = calloc((size_t)st.st_size + 1, 1);
  if (!r->out) return "";
  ssize_t n = pread(r->outFd, r->out, (size_t)st.st_size, 0);
  r->out[n > 0 ? n : 0] = 0;
  return r->out;
}

void collLaunchReport(collLaunch* L) {
  for (int k = 0; k < L->spec.nranks; k++) {
    int st = collLaunchStatus(L, k);
    if (st < 0) fprintf(stderr, "rank %d: still running\n", k);
    else if (WIFEXITED(st)) fprintf(stderr, "rank %d: exited %d after %.2f s\n", k, WEXITSTATUS(st), L->r[k].exitAt);
    else fprintf(stderr, "rank %d: killed by signal %d after %.2f s%s\n", k, WTERMSIG(st), L->r[k].exitAt,
                 L->r[k].timedOut ? " (watchdog)" : "");
    const char* out = collLaunchOutput(L, k);
    if (out[0]) fprintf(stderr, "---- rank %d output ----\n%s", k, out);
  }
}

void collLaunchFree(collLaunch* L) {
  if (!L) return;
  for (int k = 0; k < L->spec.nranks; k++)
    if (L->r[k].pid > 0) {
      kill(L->r[k].pid, SIGKILL);
      kill(L->r[k].pid, SIGCONT);
      int st;
      waitpid(L->r[k].pid, &st, 0);
      L->r[k].pid = 0;
    }
  for (int k = 0; k < L->spec.nranks; k++) {
    if (L->r[k].outFd >= 0) close(L->r[k].outFd);
    free(L->r[k].out);
  }
  free(L->r);
  free(L);
}

int collLaunchRun(const collLaunchSpec* spec) {
  collLaunch* L = collLaunchStart(spec);
  if (!L) return spec ? spec->nranks : 1;
  int bad = collLaunchWait(L, 0);
  if (bad) collLaunchReport(L);
  collLaunchFree(L);
  return bad;
}
