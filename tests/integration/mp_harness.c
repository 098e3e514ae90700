/* mp_harness.c - fork N ranks, watchdog, reap (see mp_harness.h). */
#include "mp_harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int collMpFork(int nranks, int timeoutSec, collMpBody body, void* arg, collUniqueId* rawId) {
  setenv("COLL_SOCKET_IFNAME", "lo", 0);
  collUniqueId id;
  if (!rawId) {
    if (collGetUniqueId(&id) != collSuccess) {
      fprintf(stderr, "collGetUniqueId failed: %s\n", collGetLastError(NULL));
      return 1;
    }
  }
  fflush(stdout);
  fflush(stderr);
  pid_t* pids = calloc((size_t)nranks, sizeof(pid_t));
  for (int r = 0; r < nranks; r++) {
    pid_t p = fork();
    if (p < 0) {
      perror("fork");
      for (int k = 0; k < r; k++) kill(pids[k], SIGKILL);
      free(pids);
      return 1;
    }
    if (p == 0) {
      alarm((unsigned)timeoutSec + 5); /* never outlive the parent's watchdog */
      int fails;
      if (rawId) {
        fails = body(NULL, r, nranks, rawId);
      } else {
        collComm_t comm;
        collResult_t res = collCommInitRank(&comm, nranks, id, r);
        if (res != collSuccess) {
          fprintf(stderr, "rank %d: collCommInitRank: %s: %s\n", r, collGetErrorString(res), collGetLastError(NULL));
          _exit(2);
        }
        fails = body(comm, r, nranks, arg);
        res = collCommDestroy(comm);
        if (res != collSuccess) {
          fprintf(stderr, "rank %d: collCommDestroy: %s\n", r, collGetLastError(NULL));
          fails++;
        }
      }
      fflush(stdout);
      _exit(fails ? 1 : 0);
    }
    pids[r] = p;
  }
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int left = nranks, failed = 0;
  while (left > 0) {
    int status;
    pid_t p = waitpid(-1, &status, WNOHANG);
    if (p > 0) {
      int r = 0;
      while (r < nranks && pids[r] != p) r++;
      if (r == nranks) continue;
      left--;
      pids[r] = 0;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "rank %d %s %d\n", r, WIFEXITED(status) ? "exited with" : "killed by signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        failed = 1;
      }
      continue;
    }
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (t.tv_sec - t0.tv_sec > timeoutSec) {
      fprintf(stderr, "watchdog: %d rank(s) still running after %d s; killing them\n", left, timeoutSec);
      for (int r = 0; r < nranks; r++)
        if (pids[r]) kill(pids[r], SIGKILL);
      while (left > 0 && waitpid(-1, &status, 0) > 0) left--;
      failed = 1;
      break;
    }
    usleep(2000);
  }
  free(pids);
  return failed;
}

int collMpRun(int nranks, int timeoutSec, collMpBody body, void* arg) {
  return collMpFork(nranks, timeoutSec, body, arg, NULL);
}

int collMpRunRaw(int nranks, int timeoutSec, collMpBody body, collUniqueId* id) {
  return collMpFork(nranks, timeoutSec, body, NULL, id);
}
