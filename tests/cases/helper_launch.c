/* helper_launch.c - torchrun-style rank processes for tests (see helper_launch.h). */
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

struct collLaunch {
  int nranks, port, timeoutSec;
  double t0;
  pid_t* pid;
  int* status;     /* -1 while running */
  double* exitAt;  /* seconds after t0 */
  int* killed;     /* by the watchdog */
  int* outFd;      /* memfd or -1 */
  char** out;
};

static double collLaunchNow(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Binds 127.0.0.1:port (0 = any); returns the bound port or 0. */
static int collLaunchTryBind(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons((uint16_t)port);
  socklen_t sl = sizeof a;
  int got = 0;
  if (bind(fd, (struct sockaddr*)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr*)&a, &sl) == 0)
    got = ntohs(a.sin_port);
  close(fd);
  return got;
}

/* Ports below the kernel's ephemeral range (ip_local_port_range): a port
 * the kernel hands out for bind(0) or as a connect's source port may be
 * taken by any process (another test's listener) between the check and the
 * moment the root binds it, seconds later in some cases (br38). */
int collLaunchFreePort(void) {
  int lo = 32768, hi = 60999;
  FILE* f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (f) {
    if (fscanf(f, "%d %d", &lo, &hi) != 2) lo = 32768;
    fclose(f);
  }
  int top = lo > 12000 ? lo - 1 : 65535, bottom = lo > 12000 ? 10000 : hi + 1;
  unsigned seed = (unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL);
  for (int i = 0; i < 256 && top > bottom; i++) {
    int q = bottom + 1 + (int)(rand_r(&seed) % (unsigned)(top - bottom));
    if (collLaunchTryBind(q) == q) return q - 1; /* coll's root listens on MASTER_PORT + 1 = q */
  }
  for (int i = 0; i < 64; i++) { /* no room outside the range: any free port */
    int q = collLaunchTryBind(0);
    if (q > 1024 && q <= 65535) return q - 1;
  }
  return 0;
}

static void collLaunchSetInt(const char* name, int v) {
  char s[32];
  snprintf(s, sizeof s, "%d", v);
  setenv(name, s, 1);
}

/* In the child: environment, output, then body or exec. Never returns. */
static void collLaunchChild(const collLaunchSpec* spec, int rank, int port, int outFd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  alarm((unsigned)(spec->timeoutSec > 0 ? spec->timeoutSec : 120) + 5);
  if (outFd >= 0) {
    dup2(outFd, 1);
    dup2(outFd, 2);
    close(outFd);
  }
  collLaunchSetInt("RANK", rank);
  collLaunchSetInt("WORLD_SIZE", spec->nranks);
  collLaunchSetInt("LOCAL_RANK", rank);
  collLaunchSetInt("LOCAL_WORLD_SIZE", spec->nranks);
  collLaunchSetInt("GROUP_RANK", 0);
  setenv("MASTER_ADDR", spec->masterAddr ? spec->masterAddr : "127.0.0.1", 1);
  collLaunchSetInt("MASTER_PORT", port);
  if (spec->runId) setenv("TORCHELASTIC_RUN_ID", spec->runId, 1);
  setenv("COLL_SOCKET_IFNAME", "lo", 0);
  if (spec->setup) spec->setup(rank, spec->nranks, spec->arg);
  if (spec->argv) {
    execv(spec->argv[0], spec->argv);
    fprintf(stderr, "launch: rank %d: exec %s: %s\n", rank, spec->argv[0], strerror(errno));
    _exit(127);
  }
  int rc = spec->body ? spec->body(rank, spec->nranks, spec->arg) : 0;
  fflush(stdout);
  fflush(stderr);
  _exit(rc);
}

collLaunch* collLaunchStart(const collLaunchSpec* spec) {
  if (!spec || spec->nranks < 1 || (!spec->body && !spec->argv)) {
    fprintf(stderr, "launch: bad spec\n");
    return NULL;
  }
  int n = spec->nranks;
  collLaunch* L = calloc(1, sizeof *L);
  if (!L) return NULL;
  L->nranks = n;
  L->timeoutSec = spec->timeoutSec > 0 ? spec->timeoutSec : 120;
  L->pid = calloc((size_t)n, sizeof *L->pid);
  L->status = calloc((size_t)n, sizeof *L->status);
  L->exitAt = calloc((size_t)n, sizeof *L->exitAt);
  L->killed = calloc((size_t)n, sizeof *L->killed);
  L->outFd = calloc((size_t)n, sizeof *L->outFd);
  L->out = calloc((size_t)n, sizeof *L->out);
  if (!L->pid || !L->status || !L->exitAt || !L->killed || !L->outFd || !L->out) {
    L->nranks = 0; /* nothing started, no fd opened */
    collLaunchFree(L);
    return NULL;
  }
  for (int r = 0; r < n; r++) {
    L->status[r] = -1;
    L->exitAt[r] = -1;
    L->outFd[r] = -1;
  }
  L->port = spec->masterPort ? spec->masterPort : collLaunchFreePort();
  if (!L->port) {
    fprintf(stderr, "launch: no free port\n");
    collLaunchFree(L);
    return NULL;
  }
  fflush(stdout);
  fflush(stderr);
  L->t0 = collLaunchNow();
  for (int r = 0; r < n; r++) {
    if (spec->capture) {
      char name[32];
      snprintf(name, sizeof name, "launch-rank%d", r);
      L->outFd[r] = memfd_create(name, MFD_CLOEXEC);
      if (L->outFd[r] < 0) {
        fprintf(stderr, "launch: memfd_create: %s\n", strerror(errno));
        collLaunchFree(L);
        return NULL;
      }
    }
    pid_t p = fork();
    if (p < 0) {
      fprintf(stderr, "launch: fork of rank %d: %s\n", r, strerror(errno));
      collLaunchFree(L);
      return NULL;
    }
    if (p == 0) {
      for (int k = 0; k < r; k++)
        if (L->outFd[k] >= 0) close(L->outFd[k]); /* other ranks' output is not ours */
      collLaunchChild(spec, r, L->port, L->outFd[r]);
    }
    L->pid[r] = p;
  }
  return L;
}

int collLaunchMasterPort(const collLaunch* L) { return L->port; }

pid_t collLaunchPid(const collLaunch* L, int rank) {
  return rank >= 0 && rank < L->nranks && L->status[rank] < 0 ? L->pid[rank] : 0;
}

void collLaunchKill(collLaunch* L, int rank, int sig) {
  pid_t p = collLaunchPid(L, rank);
  if (p > 0) kill(p, sig);
}

static void collLaunchReaped(collLaunch* L, int r, int status) {
  L->status[r] = status;
  L->exitAt[r] = collLaunchNow() - L->t0;
}

int collLaunchPoll(collLaunch* L) {
  int running = 0;
  for (int r = 0; r < L->nranks; r++) {
    if (L->status[r] >= 0 || L->pid[r] <= 0) continue;
    int st;
    pid_t p = waitpid(L->pid[r], &st, WNOHANG);
    if (p == L->pid[r]) collLaunchReaped(L, r, st);
    else if (p < 0 && errno == ECHILD) collLaunchReaped(L, r, 0x7f00); /* not ours any more: "exit 127" */
    else running++;
  }
  return running;
}

int collLaunchWait(collLaunch* L, int timeoutSec) {
  double end = collLaunchNow() + (timeoutSec > 0 ? timeoutSec : L->timeoutSec);
  while (collLaunchPoll(L) > 0) {
    if (collLaunchNow() > end) {
      for (int r = 0; r < L->nranks; r++)
        if (L->status[r] < 0 && L->pid[r] > 0) {
          fprintf(stderr, "launch: watchdog: rank %d (pid %d) still running; killing it\n", r, (int)L->pid[r]);
          L->killed[r] = 1;
          kill(L->pid[r], SIGKILL);
        }
      for (int r = 0; r < L->nranks; r++)
        if (L->status[r] < 0 && L->pid[r] > 0) {
          int st;
          if (waitpid(L->pid[r], &st, 0) == L->pid[r]) collLaunchReaped(L, r, st);
        }
      break;
    }
    struct timespec ts = {0, 2 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  int bad = 0;
  for (int r = 0; r < L->nranks; r++) bad += collLaunchExitCode(L, r) != 0;
  return bad;
}

int collLaunchStatus(const collLaunch* L, int rank) { return L->status[rank]; }

int collLaunchExitCode(const collLaunch* L, int rank) {
  int st = L->status[rank];
  return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

double collLaunchExitTime(const collLaunch* L, int rank) { return L->exitAt[rank]; }

int collLaunchTimedOut(const collLaunch* L, int rank) { return L->killed[rank]; }

const char* collLaunchOutput(collLaunch* L, int rank) {
  if (rank < 0 || rank >= L->nranks || L->outFd[rank] < 0) return "";
  struct stat sb;
  if (fstat(L->outFd[rank], &sb) != 0) return "";
  char* b = realloc(L->out[rank], (size_t)sb.st_size + 1);
  if (!b) return "";
  L->out[rank] = b;
  ssize_t got = pread(L->outFd[rank], b, (size_t)sb.st_size, 0);
  b[got > 0 ? got : 0] = 0;
  return b;
}

void collLaunchReport(collLaunch* L) {
  for (int r = 0; r < L->nranks; r++) {
    int st = L->status[r];
    if (st < 0) fprintf(stderr, "launch: rank %d: still running\n", r);
    else if (WIFEXITED(st)) fprintf(stderr, "launch: rank %d: exit %d after %.2f s\n", r, WEXITSTATUS(st), L->exitAt[r]);
    else fprintf(stderr, "launch: rank %d: killed by signal %d after %.2f s%s\n", r, WTERMSIG(st), L->exitAt[r],
                 L->killed[r] ? " (watchdog)" : "");
    const char* o = collLaunchOutput(L, r);
    if (*o) fprintf(stderr, "---- rank %d output ----\n%s%s", r, o, o[strlen(o) - 1] == '\n' ? "" : "\n");
  }
}

void collLaunchFree(collLaunch* L) {
  if (!L) return;
  if (L->pid && L->status) {
    for (int r = 0; r < L->nranks; r++)
      if (L->pid[r] > 0 && L->status[r] < 0) kill(L->pid[r], SIGKILL);
    for (int r = 0; r < L->nranks; r++)
      if (L->pid[r] > 0 && L->status[r] < 0) {
        int st;
        waitpid(L->pid[r], &st, 0);
      }
  }
  if (L->outFd)
    for (int r = 0; r < L->nranks; r++)
      if (L->outFd[r] >= 0) close(L->outFd[r]);
  if (L->out)
    for (int r = 0; r < L->nranks; r++) free(L->out[r]);
  free(L->pid);
  free(L->status);
  free(L->exitAt);
  free(L->killed);
  free(L->outFd);
  free(L->out);
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
