/*
 * br24_many_comms.c - BR-24: 5000 live communicators (collCommSplit of the
 * world, one color), each used for a 1-element all-reduce (rank+1) and kept
 * alive; then all destroyed, and one more created and used. On 2 ranks
 * (BR24_RANKS=4 for the 4-rank variant of the recipe).
 * Expected: every creation succeeds and every sum is n(n+1)/2, or from some
 * index on creation fails on every rank with an error naming the resource
 * within 20 s (then the ones before keep working); after destroying all, a
 * new communicator works; the process ends with the fds it started with.
 * Prints the time per creation, the fds and the RSS per communicator.
 * (With 4 fds per communicator and rank, RLIMIT_NOFILE 20000 ends 2 ranks
 * at about 4995: the split then fails on every rank naming ulimit -n.)
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"
#include "tests/integration/mp_harness.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int countFds(void) {
  DIR* d = opendir("/proc/self/fd");
  int n = 0;
  if (!d) return -1;
  for (struct dirent* e; (e = readdir(d));) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static long rssKb(void) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "VmRSS:", 6) == 0) kb = atol(line + 6);
  if (f) fclose(f);
  return kb;
}

static int allreduceOk(collComm_t c, int rank, int nranks) {
  int v = rank + 1, s = 0;
  return collAllReduce(&v, &s, 1, collInt32, collSum, c, NULL) == collSuccess && s == nranks * (nranks + 1) / 2;
}

static int body(collComm_t world, int rank, int nranks, void* arg) {
  int want = *(int*)arg;
  collComm_t* c = calloc((size_t)want, sizeof *c);
  int fd0 = countFds();
  long rss0 = rssKb();
  double t0 = now();
  int made = 0, fails = 0;
  for (; made < want; made++) {
    double ti = now();
    collResult_t r = collCommSplit(world, 0, rank, &c[made], NULL);
    if (r != collSuccess) {
      double dt = now() - ti;
      const char* msg = collGetLastError(world);
      printf("rank %d: creation %d failed after %.2f s: %s\n", rank, made + 1, dt, msg);
      if (dt > 20 || !(strstr(msg, "file descriptors") || strstr(msg, "open files"))) fails++;
      break;
    }
    if (!allreduceOk(c[made], rank, nranks)) {
      printf("rank %d: all-reduce on communicator %d failed: %s\n", rank, made + 1, collGetLastError(c[made]));
      fails++;
      made++;
      break;
    }
  }
  double dt = now() - t0;
  int fd1 = countFds();
  long rss1 = rssKb();
  printf("rank %d: %d communicators in %.1f s (%.2f ms each), %.1f fds and %.1f KiB RSS each\n", rank, made, dt,
         made ? dt * 1e3 / made : 0, made ? (double)(fd1 - fd0) / made : 0, made ? (double)(rss1 - rss0) / made : 0);
  /* the ones made so far still work: the first and the last */
  if (made > 0 && (!allreduceOk(c[0], rank, nranks) || !allreduceOk(c[made - 1], rank, nranks))) {
    printf("rank %d: an earlier communicator stopped working\n", rank);
    fails++;
  }
  for (int i = 0; i < made; i++)
    if (collCommDestroy(c[i]) != collSuccess) fails++;
  collComm_t extra;
  if (collCommSplit(world, 0, rank, &extra, NULL) != collSuccess || !allreduceOk(extra, rank, nranks)) {
    printf("rank %d: a new communicator after destroying all: %s\n", rank, collGetLastError(world));
    fails++;
  } else {
    collCommDestroy(extra);
  }
  int fd2 = countFds();
  if (fd2 != fd0) {
    printf("rank %d: fds %d before, %d after destroying all\n", rank, fd0, fd2);
    fails++;
  }
  free(c);
  return fails;
}

int main(void) {
  int nranks = getenv("BR24_RANKS") ? atoi(getenv("BR24_RANKS")) : 2;
  int count = getenv("BR24_COUNT") ? atoi(getenv("BR24_COUNT")) : 5000;
  int rc = collMpRun(nranks, 280, body, &count);
  printf("%d passed, %d failed\n", rc ? 0 : 1, rc ? 1 : 0);
  return rc;
}
