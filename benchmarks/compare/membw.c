/*
 * membw.c - the machine's memory limit for benchmarks/compare: memcpy
 * bandwidth of one core and of all cores at once, measured in the same run as
 * the libraries it bounds.
 *
 *   membw [-s MiB] [-t threads] [-r reps]
 *
 * Each thread copies its own buffer (default 64 MiB, far beyond the caches;
 * allocated and touched before timing: first-touch page faults are slow on
 * the VMs this runs on) with memcpy and with a plain load/store loop, -r
 * times each; the figure is the best of all (the limit is what the machine
 * can do, whichever way). "copy GB/s" counts the bytes copied (10^9 bytes/s):
 * every copied byte is one read and one write, so the memory traffic is twice
 * that. With T threads, all start together (a barrier) and the aggregate is
 * T x bytes / the slowest thread's time.
 *
 * Output, one line per measurement, for table.py, and the last-level cache's
 * size (data sets that fit in it run faster than this limit; 0: unknown):
 *   membw threads 1 copy_GBps 5.81
 *   membw threads 2 copy_GBps 7.02
 *   membw llc_bytes 33554432
 * Exit 0, or 1 with a message when memory cannot be allocated.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static size_t gBytes = 64u << 20;
static int gReps = 5;
static pthread_barrier_t gBar;

typedef struct {
  char* src;
  char* dst;
  double best; /* seconds of the fastest copy */
} job;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A plain load/store copy: on some machines faster than glibc's memcpy,
 * whose non-temporal stores for large sizes bypass the cache. */
static void copyLoop(uint64_t* restrict d, const uint64_t* restrict s, size_t n) {
  for (size_t i = 0; i < n; i++) d[i] = s[i];
}

static void* run(void* arg) {
  job* j = (job*)arg;
  j->best = 1e30;
  for (int r = 0; r < gReps; r++) {
    for (int how = 0; how < 2; how++) {
      pthread_barrier_wait(&gBar);
      double t0 = now();
      if (how == 0) memcpy(j->dst, j->src, gBytes);
      else copyLoop((uint64_t*)j->dst, (const uint64_t*)j->src, gBytes / 8);
      double dt = now() - t0;
      pthread_barrier_wait(&gBar);
      if (dt < j->best) j->best = dt;
    }
    j->src[r % gBytes] ^= 1; /* the next copy is not of identical data (no page dedup tricks) */
  }
  return NULL;
}

/* Aggregate copy GB/s of n threads, or -1 when memory is short. */
static double measure(int n) {
  job* jobs = calloc((size_t)n, sizeof *jobs);
  pthread_t* th = calloc((size_t)n, sizeof *th);
  if (!jobs || !th) return -1;
  int ok = 1;
  for (int i = 0; i < n && ok; i++) {
    jobs[i].src = malloc(gBytes);
    jobs[i].dst = malloc(gBytes);
    if (!jobs[i].src || !jobs[i].dst) ok = 0;
    else {
      memset(jobs[i].src, i + 1, gBytes);
      memset(jobs[i].dst, 0, gBytes);
    }
  }
  double worst = 0;
  if (ok) {
    pthread_barrier_init(&gBar, NULL, (unsigned)n);
    for (int i = 0; i < n; i++) pthread_create(&th[i], NULL, run, &jobs[i]);
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&gBar);
    for (int i = 0; i < n; i++)
      if (jobs[i].best > worst) worst = jobs[i].best;
  }
  for (int i = 0; i < n; i++) {
    free(jobs[i].src);
    free(jobs[i].dst);
  }
  free(jobs);
  free(th);
  return ok ? (double)n * (double)gBytes / worst / 1e9 : -1;
}

/* Size of the largest cache of cpu0 from sysfs ("32768K"), 0 if unknown
 * (sysconf's figure is wrong on some VMs). */
static long llcBytes(void) {
  long best = 0;
  for (int i = 0; i < 8; i++) {
    char path[96], buf[32];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    FILE* f = fopen(path, "r");
    if (!f) continue;
    if (fgets(buf, sizeof buf, f)) {
      char* end;
      long v = strtol(buf, &end, 10);
      if (*end == 'K') v <<= 10;
      else if (*end == 'M') v <<= 20;
      if (v > best) best = v;
    }
    fclose(f);
  }
  return best;
}

int main(int argc, char** argv) {
  int threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
  int c;
  while ((c = getopt(argc, argv, "s:t:r:")) != -1) {
    if (c == 's') gBytes = (size_t)strtoul(optarg, NULL, 10) << 20;
    else if (c == 't') threads = atoi(optarg);
    else if (c == 'r') gReps = atoi(optarg);
    else {
      fprintf(stderr, "usage: %s [-s MiB] [-t threads] [-r reps]\n", argv[0]);
      return 2;
    }
  }
  if (gBytes == 0 || threads < 1 || gReps < 1) {
    fprintf(stderr, "membw: -s, -t and -r must be positive\n");
    return 2;
  }
  int counts[2] = {1, threads};
  for (int k = 0; k < (threads > 1 ? 2 : 1); k++) {
    double g = measure(counts[k]);
    if (g < 0) {
      fprintf(stderr, "membw: cannot allocate 2 x %zu MiB per thread for %d threads\n", gBytes >> 20, counts[k]);
      return 1;
    }
    printf("membw threads %d copy_GBps %.3f\n", counts[k], g);
  }
  printf("membw llc_bytes %ld\n", llcBytes());
  return 0;
}
