/*
 * br38_root_late.c - BR-38: ranks that start before the root wait for it;
 * a root that never starts is an error naming its address within the init
 * timeout, without spinning a core; many ranks connecting at once are fine.
 * Ranks are started as torchrun starts them (fixed MASTER_ADDR/MASTER_PORT).
 *  1. 4 ranks; ranks 1-3 at t = 0, rank 0 (the root) at t = 8 s;
 *     COLL_INIT_TIMEOUT=30; all-reduce of rank+1 gives 10 on every rank.
 *  2. the root never starts; COLL_INIT_TIMEOUT=5: ranks 1-3 fail within 10 s
 *     with a message naming 127.0.0.1:MASTER_PORT+1, using < 1 s of CPU each.
 *  3. 64 ranks, rank 0 started 0.5 s after the others: all finish init
 *     within 60 s and the sum is 2080 (BR38_RANKS=16 under the sanitizers,
 *     whose processes take about 0.5 GB each).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"
#include "helper_launch.h"

typedef struct {
  int rootDelayMs; /* -1: rank 0 never calls init */
  const char* initTimeout;
} scenario;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void setup(int rank, int nranks, void* arg) {
  const scenario* s = arg;
  (void)nranks;
  setenv("COLL_INIT_TIMEOUT", s->initTimeout, 1);
  if (rank == 0 && s->rootDelayMs > 0) usleep((useconds_t)s->rootDelayMs * 1000);
}

static int body(int rank, int nranks, void* arg) {
  const scenario* s = arg;
  if (rank == 0 && s->rootDelayMs < 0) return 0;
  double t0 = now();
  collComm_t comm;
  collResult_t r = collCommInitFromEnv(&comm, NULL);
  double dt = now() - t0;
  if (s->rootDelayMs < 0) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
                 ru.ru_stime.tv_usec * 1e-6;
    char where[32];
    snprintf(where, sizeof where, "127.0.0.1:%d", atoi(getenv("MASTER_PORT")) + 1);
    int bad = r == collSuccess || !strstr(collGetLastError(NULL), where) || cpu > 1.0 || dt > 10;
    printf("rank %d: %.2f s, %.3f s CPU: %s\n", rank, dt, cpu, r == collSuccess ? "success" : collGetLastError(NULL));
    if (r == collSuccess) collCommDestroy(comm);
    return bad;
  }
  if (r != collSuccess) {
    printf("rank %d: init failed after %.2f s: %s\n", rank, dt, collGetLastError(NULL));
    return 1;
  }
  float x = (float)(rank + 1), y = 0;
  r = collAllReduce(&x, &y, 1, collFloat, collSum, comm, NULL);
  int bad = r != collSuccess || y != (float)(nranks * (nranks + 1) / 2);
  if (bad || rank == 0) printf("rank %d: init %.2f s, sum %g (%s)\n", rank, dt, y, r ? collGetLastError(comm) : "ok");
  collCommDestroy(comm);
  return bad;
}

static int run(const char* name, int nranks, scenario* s, double bound) {
  collLaunchSpec spec = {.nranks = nranks, .timeoutSec = 90, .capture = 1, .body = body, .setup = setup, .arg = s};
  double t0 = now();
  collLaunch* L = collLaunchStart(&spec);
  int bad = !L || collLaunchWait(L, 0) != 0;
  double dt = now() - t0;
  if (dt > bound) bad = 1;
  printf("%-52s %s (%.2f s)\n", name, bad ? "FAIL" : "ok", dt);
  if (L) {
    for (int r = 0; r < nranks && r < 4; r++) printf("    %s", collLaunchOutput(L, r));
    if (bad) collLaunchReport(L);
  }
  collLaunchFree(L);
  return bad;
}

int main(void) {
  int fails = 0;
  scenario s1 = {8000, "30"}, s2 = {-1, "5"}, s3 = {500, "60"};
  fails += run("1: ranks 1-3 first, the root 8 s later", 4, &s1, 25);
  fails += run("2: the root never starts (COLL_INIT_TIMEOUT=5)", 4, &s2, 12);
  int many = getenv("BR38_RANKS") ? atoi(getenv("BR38_RANKS")) : 64; /* 16 under the sanitizers */
  char name[64];
  snprintf(name, sizeof name, "3: %d ranks at once, the root last", many);
  fails += run(name, many, &s3, 60);
  printf("%d passed, %d failed\n", 3 - fails, fails);
  return fails ? 1 : 0;
}
