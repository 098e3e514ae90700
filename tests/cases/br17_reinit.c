/*
 * br17_reinit.c - BR-17: init, all-reduce, destroy, 50 times in the same
 * processes, with no pause between cycles, on 2 and on 4 ranks:
 *  U  a fresh unique id every cycle (rank 0 makes it, a pipe carries it);
 *  E  launcher mode with the same MASTER_ADDR:MASTER_PORT every cycle;
 *  R  the same unique id again in cycle 1: an id serves one communicator,
 *     so that init must fail on every rank within 10 s (not hang).
 * Cycle c: rank r contributes 10*(c+1)*(r+1), the sum must be
 * 10*(c+1)*n(n+1)/2 (30*(c+1) on 2 ranks). Each 50-cycle loop must take
 * under 60 s, and each process must end with the fds and threads it had
 * before the loop (within 2).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"
#include "helper_launch.h"

#define CYCLES 50
#define MAXR 4

typedef struct {
  char mode; /* 'U', 'E', 'R' */
  int pipes[MAXR][2];
} variant;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int countDir(const char* path) {
  DIR* d = opendir(path);
  int n = 0;
  if (!d) return -1;
  for (struct dirent* e; (e = readdir(d));) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static int readAll(int fd, void* buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t k = read(fd, (char*)buf + got, n - got);
    if (k <= 0) return -1;
    got += (size_t)k;
  }
  return 0;
}

static int body(int rank, int nranks, void* arg) {
  variant* v = arg;
  for (int r = 0; r < nranks; r++) { /* keep only my read end (rank 0: every write end) */
    if (r != rank || rank == 0) close(v->pipes[r][0]);
    if (rank != 0) close(v->pipes[r][1]);
  }
  int fd0 = countDir("/proc/self/fd"), th0 = countDir("/proc/self/task");
  double t0 = now();
  collUniqueId id;
  for (int c = 0; c < CYCLES; c++) {
    collComm_t comm;
    collResult_t r;
    if (v->mode == 'E') {
      r = collCommInitFromEnv(&comm, NULL);
    } else {
      if (c == 0 || v->mode == 'U') {
        if (rank == 0) {
          if (collGetUniqueId(&id) != collSuccess) return 1;
          for (int p = 1; p < nranks; p++)
            if (write(v->pipes[p][1], &id, sizeof id) != (ssize_t)sizeof id) return 1;
        } else if (readAll(v->pipes[rank][0], &id, sizeof id) != 0) {
          return 1;
        }
      }
      double ti = now();
      r = collCommInitRank(&comm, nranks, id, rank);
      if (v->mode == 'R' && c == 1) {
        double dt = now() - ti;
        printf("rank %d: reused id: %s after %.2f s: %s\n", rank, r ? "error" : "success", dt,
               r ? collGetLastError(NULL) : "");
        if (r == collSuccess) collCommDestroy(comm);
        return r != collSuccess && dt < 10 ? 0 : 1;
      }
    }
    if (r != collSuccess) {
      printf("rank %d: cycle %d: init: %s\n", rank, c, collGetLastError(NULL));
      return 1;
    }
    float x = 10.0f * (float)(c + 1) * (float)(rank + 1), y = 0;
    r = collAllReduce(&x, &y, 1, collFloat, collSum, comm, NULL);
    float want = 10.0f * (float)(c + 1) * (float)(nranks * (nranks + 1) / 2);
    if (r != collSuccess || y != want) {
      printf("rank %d: cycle %d: all-reduce %d gave %g, want %g: %s\n", rank, c, r, y, want, collGetLastError(comm));
      collCommDestroy(comm);
      return 1;
    }
    if (collCommDestroy(comm) != collSuccess) return 1;
  }
  double dt = now() - t0;
  int fd1 = countDir("/proc/self/fd"), th1 = countDir("/proc/self/task");
  int bad = dt > 60 || abs(fd1 - fd0) > 2 || abs(th1 - th0) > 2;
  printf("rank %d: %d cycles in %.2f s; fds %d -> %d, threads %d -> %d\n", rank, CYCLES, dt, fd0, fd1, th0, th1);
  return bad;
}

static int run(char mode, int nranks) {
  variant v;
  v.mode = mode;
  for (int r = 0; r < MAXR; r++)
    if (pipe(v.pipes[r]) != 0) return 1;
  collLaunchSpec spec = {.nranks = nranks, .timeoutSec = 120, .capture = 1, .body = body, .arg = &v};
  collLaunch* L = collLaunchStart(&spec);
  for (int r = 0; r < MAXR; r++) {
    close(v.pipes[r][0]);
    close(v.pipes[r][1]);
  }
  int bad = !L || collLaunchWait(L, 0) != 0;
  printf("%c on %d ranks: %s\n", mode, nranks, bad ? "FAIL" : "ok");
  for (int r = 0; L && r < nranks; r++) printf("    %s", collLaunchOutput(L, r));
  if (bad && L) collLaunchReport(L);
  collLaunchFree(L);
  return bad;
}

int main(void) {
  int fails = 0, n = 0;
  const char modes[] = {'U', 'E', 'R'};
  for (int m = 0; m < 3; m++)
    for (int nr = 2; nr <= 4; nr += 2, n++) fails += run(modes[m], nr);
  printf("%d passed, %d failed\n", n - fails, fails);
  return fails ? 1 : 0;
}
