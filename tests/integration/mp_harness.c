/* mp_harness.c - fork N ranks, watchdog, reap (see mp_harness.h). */
#include "mp_harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Reads exactly n bytes from fd (the id from the parent). */
static int collMpReadAll(int fd, void* buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t k = read(fd, (char*)buf + got, n - got);
    if (k <= 0) return -1;
    got += (size_t)k;
  }
  return 0;
}

static int collMpFork(int nranks, int timeoutSec, collMpBody body, void* arg, int raw, collMpPrepare prepare,
                      void* prepArg) {
  setenv("COLL_SOCKET_IFNAME", "lo", 0);
  fflush(stdout);
  fflush(stderr);
  pid_t* pids = calloc((size_t)nranks, sizeof(pid_t));
  int* pipes = calloc((size_t)nranks, sizeof(int));
  for (int r = 0; r < nranks; r++) {
    int pfd[2];
    if (pipe(pfd) != 0) {
      perror("pipe");
      for (int k = 0; k < r; k++) kill(pids[k], SIGKILL);
      free(pids);
      free(pipes);
      return 1;
    }
    pid_t p = fork();
    if (p < 0) {
      perror("fork");
      for (int k = 0; k < r; k++) kill(pids[k], SIGKILL);
      free(pids);
      free(pipes);
      return 1;
    }
    if (p == 0) {
      alarm((unsigned)timeoutSec + 5); /* never outlive the parent's watchdog */
      close(pfd[1]);
      collUniqueId id;
      if (collMpReadAll(pfd[0], &id, sizeof id) != 0) _exit(3); /* parent gave up */
      close(pfd[0]);
      int fails;
      if (raw) {
        fails = body(NULL, r, nranks, &id);
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
    close(pfd[0]);
    pids[r] = p;
    pipes[r] = pfd[1];
  }
  collUniqueId id;
  int ok = prepare ? prepare(&id, prepArg) == 0 : collGetUniqueId(&id) == collSuccess;
  if (!ok) fprintf(stderr, "creating the unique id failed: %s\n", collGetLastError(NULL));
  for (int r = 0; r < nranks; r++) {
    if (ok && write(pipes[r], &id, sizeof id) != (ssize_t)sizeof id) ok = 0;
    close(pipes[r]); /* without an id the child exits 3 */
  }
  free(pipes);
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
  return collMpFork(nranks, timeoutSec, body, arg, 0, NULL, NULL);
}

int collMpRunRaw(int nranks, int timeoutSec, collMpBody body, collMpPrepare prepare, void* prepArg) {
  return collMpFork(nranks, timeoutSec, body, NULL, 1, prepare, prepArg);
}
