/*
 * br42_many_ranks.c - BR-42: many ranks on one host. One unique id; 10
 * all-reduces of count 1 (rank+1), a barrier, 3 all-reduces of 1,048,576
 * floats, an all-gather of sendcount 1 (value rank), destroy. Every rank
 * checks the results, then counts its sockets before destroying: listening
 * ones (TCP LISTEN, AF_UNIX accepting) must be a handful (<= 4), all of them
 * at most 2n + 16. The run must end within its bound.
 * Usage: br42_many_ranks [nranks [bound_s]]   (default 64 ranks, 120 s; ctest:
 *        BR42_RANKS=32, 8 under the sanitizers)
 *        br42_many_ranks pinned                8 ranks on 2 cores (taskset
 *        style affinity), 1000 all-reduces of count 1 within 60 s.
 */
#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"
#include "tests/integration/mp_harness.h"

#define BIG (1 << 20)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* 1 if the socket inode is listening: TCP state 0A in /proc/net/tcp{,6}, or
 * an AF_UNIX socket with __SO_ACCEPTCON (0x10000) in /proc/net/unix. */
static int isListening(unsigned long ino) {
  const char* files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
  char line[512];
  for (int i = 0; i < 2; i++) {
    FILE* f = fopen(files[i], "r");
    while (f && fgets(line, sizeof line, f)) {
      unsigned st;
      unsigned long in;
      if (sscanf(line, " %*d: %*s %*s %x %*s %*s %*s %*s %*s %lu", &st, &in) == 2 && in == ino) {
        fclose(f);
        return st == 0x0A;
      }
    }
    if (f) fclose(f);
  }
  FILE* f = fopen("/proc/net/unix", "r");
  while (f && fgets(line, sizeof line, f)) {
    unsigned long flags, in;
    if (sscanf(line, "%*s %*s %*s %lx %*s %*s %lu", &flags, &in) == 2 && in == ino) {
      fclose(f);
      return (flags & 0x10000) != 0;
    }
  }
  if (f) fclose(f);
  return 0;
}

static void countSockets(int* total, int* listening) {
  *total = *listening = 0;
  DIR* d = opendir("/proc/self/fd");
  for (struct dirent* e; d && (e = readdir(d));) {
    char path[300], link[64];
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    ssize_t k = readlink(path, link, sizeof link - 1);
    if (k <= 0) continue;
    link[k] = 0;
    unsigned long ino;
    if (sscanf(link, "socket:[%lu]", &ino) != 1) continue;
    (*total)++;
    *listening += isListening(ino);
  }
  if (d) closedir(d);
}

static int body(collComm_t comm, int rank, int nranks, void* arg) {
  int iters = *(int*)arg, bad = 0;
  float x = (float)(rank + 1), y;
  const float sum = (float)nranks * (float)(nranks + 1) / 2;
  for (int i = 0; i < iters && !bad; i++) {
    y = 0;
    if (collAllReduce(&x, &y, 1, collFloat, collSum, comm, NULL) != collSuccess || y != sum) {
      printf("rank %d: all-reduce %d gave %g: %s\n", rank, i, y, collGetLastError(comm));
      bad = 1;
    }
  }
  if (iters > 10) return bad; /* the pinned variant: small calls only */
  if (!bad && collBarrier(comm, NULL) != collSuccess) bad = 1;
  float* big = malloc(sizeof(float) * BIG);
  for (int k = 0; k < 3 && !bad; k++) {
    for (int i = 0; i < BIG; i++) big[i] = (float)(rank + 1);
    if (collAllReduce(big, big, BIG, collFloat, collSum, comm, NULL) != collSuccess) bad = 1;
    for (int i = 0; i < BIG && !bad; i++)
      if (big[i] != sum) {
        printf("rank %d: big all-reduce [%d] = %g, want %g\n", rank, i, big[i], sum);
        bad = 1;
      }
  }
  free(big);
  int* all = malloc(sizeof(int) * (size_t)nranks);
  int me = rank;
  if (!bad && collAllGather(&me, all, 1, collInt32, comm, NULL) != collSuccess) bad = 1;
  for (int i = 0; i < nranks && !bad; i++)
    if (all[i] != i) {
      printf("rank %d: all-gather [%d] = %d\n", rank, i, all[i]);
      bad = 1;
    }
  free(all);
  int socks, listening;
  countSockets(&socks, &listening);
  if (listening > 4 || socks > 2 * nranks + 16) {
    printf("rank %d: %d sockets, %d listening (limits %d, 4)\n", rank, socks, listening, 2 * nranks + 16);
    bad = 1;
  }
  if (rank == 0 || rank == nranks - 1 || bad)
    printf("rank %d: results ok=%d, %d sockets, %d listening\n", rank, !bad, socks, listening);
  return bad;
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "pinned") == 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    CPU_SET(sched_getcpu() >= 0 && sysconf(_SC_NPROCESSORS_ONLN) > 1 ? 1 : 0, &set);
    sched_setaffinity(0, sizeof set, &set); /* inherited by the ranks */
    int iters = 1000;
    double t0 = now();
    int rc = collMpRun(8, 90, body, &iters);
    double dt = now() - t0;
    printf("8 ranks on 2 cores, 1000 all-reduces: %s in %.1f s\n", rc ? "FAIL" : "ok", dt);
    rc |= dt > 60;
    printf("%d passed, %d failed\n", !rc, !!rc);
    return rc;
  }
  int n = argc > 1 ? atoi(argv[1]) : getenv("BR42_RANKS") ? atoi(getenv("BR42_RANKS")) : 64;
  int bound = argc > 2 ? atoi(argv[2]) : 120;
  int iters = 10;
  double t0 = now();
  int rc = collMpRun(n, bound + 30, body, &iters);
  double dt = now() - t0;
  printf("%d ranks: %s in %.1f s (bound %d s)\n", n, rc ? "FAIL" : "ok", dt, bound);
  rc |= dt > bound;
  printf("%d passed, %d failed\n", !rc, !!rc);
  return rc;
}
