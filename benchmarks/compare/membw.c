/*
 * membw.c - the machine's memory limit for benchmarks/compare: copy
 * bandwidth of one core and of all cores at once, per working set, measured
 * in the same run as the libraries it bounds.
 *
 *   membw [-s MiB,MiB,..] [-t threads] [-r reps]
 *
 * -s lists working sets (default 64): the bytes of all source and
 * destination buffers together, so a collective is bounded by the rate
 * measured at its node's data size (table.py) and the caches count the same
 * in both. For each set W, one thread copies W/2 bytes, then T threads (-t,
 * default: online CPUs) each copy W/(2T) at once (a barrier starts them).
 * Buffers are allocated and touched before timing (first-touch page faults
 * are slow on the VMs this runs on). Each copy runs -r times (default 5)
 * with memcpy, a plain load/store loop, a streaming-store loop (SSE2: no
 * read for ownership, so a copied byte is exactly one read and one write of
 * memory), and as an in-place update of both buffers (each word read and
 * written back: what an in-place collective does); the figure is the best
 * of all: the limit is what the machine can do, whichever way. "copy GB/s"
 * counts the bytes copied or updated (10^9 bytes/s; each is one read and
 * one write); with T threads it is T x bytes / the slowest thread's time.
 *
 * Output, one line per measurement, for table.py:
 *   membw set_bytes 67108864 threads 1 copy_GBps 5.81
 *   membw set_bytes 67108864 threads 2 copy_GBps 7.02
 * Exit 0; 1 with a message when memory cannot be allocated; 2 on bad
 * arguments.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define COPY_WAYS 4

static size_t gBytes; /* per thread, per buffer */
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

/* A copy with streaming stores (where the CPU has them; else the loop):
 * the destination is written without being read first. */
static void copyStream(char* d, const char* s, size_t n) {
#if defined(__SSE2__)
  size_t v = n / 16;
  for (size_t i = 0; i < v; i++)
    _mm_stream_si128((__m128i*)(void*)(d + 16 * i), _mm_load_si128((const __m128i*)(const void*)(s + 16 * i)));
  _mm_sfence();
  memcpy(d + 16 * v, s + 16 * v, n % 16);
#else
  copyLoop((uint64_t*)d, (const uint64_t*)s, n / 8);
  memcpy(d + n / 8 * 8, s + n / 8 * 8, n % 8);
#endif
}

/* Each word of a buffer read and written back changed, in place: a byte
 * updated is one read and one write, as a copied byte is (an in-place
 * collective's access pattern; on some machines faster than a copy). */
static void update(uint64_t* restrict x, size_t n) {
  for (size_t i = 0; i < n; i++) x[i] ^= 0x0101010101010101u;
}

static void* run(void* arg) {
  job* j = (job*)arg;
  j->best = 1e30;
  /* each way -r times in a row, as a benchmark repeats one collective: what
   * one way leaves in the caches is what its next repetition finds */
  for (int how = 0; how < COPY_WAYS; how++) {
    for (int r = 0; r < gReps; r++) {
      pthread_barrier_wait(&gBar);
      double t0 = now();
      if (how == 0) memcpy(j->dst, j->src, gBytes);
      else if (how == 1) copyLoop((uint64_t*)j->dst, (const uint64_t*)j->src, gBytes / 8);
      else if (how == 2) copyStream(j->dst, j->src, gBytes);
      else {
        update((uint64_t*)j->src, gBytes / 8);
        update((uint64_t*)j->dst, gBytes / 8);
      }
      double dt = (now() - t0) / (how == 3 ? 2 : 1); /* the update moved twice the bytes */
      pthread_barrier_wait(&gBar);
      if (dt < j->best) j->best = dt;
      j->src[r % gBytes] ^= 1; /* the next copy is not of identical data (no page dedup tricks) */
    }
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
    jobs[i].src = aligned_alloc(64, (gBytes + 63) / 64 * 64);
    jobs[i].dst = aligned_alloc(64, (gBytes + 63) / 64 * 64);
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

int main(int argc, char** argv) {
  int threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
  const char* sets = "64";
  int c;
  while ((c = getopt(argc, argv, "s:t:r:")) != -1) {
    if (c == 's') sets = optarg;
    else if (c == 't') threads = atoi(optarg);
    else if (c == 'r') gReps = atoi(optarg);
    else {
      fprintf(stderr, "usage: %s [-s MiB,MiB,..] [-t threads] [-r reps]\n", argv[0]);
      return 2;
    }
  }
  if (threads < 1 || gReps < 1) {
    fprintf(stderr, "membw: -t and -r must be positive\n");
    return 2;
  }
  for (int pass = 0; pass < 2; pass++) { /* 0: check the whole list first */
    for (const char* p = sets; *p;) {
      char* end;
      unsigned long mib = strtoul(p, &end, 10);
      if (end == p || mib == 0 || (*end && *end != ',') || (*end && !end[1])) {
        fprintf(stderr, "membw: -s wants positive MiB separated by commas, not \"%s\"\n", sets);
        return 2;
      }
      p = *end ? end + 1 : end;
      if (pass == 0) continue;
      size_t set = (size_t)mib << 20;
      int counts[2] = {1, threads};
      for (int k = 0; k < (threads > 1 ? 2 : 1); k++) {
        gBytes = set / 2 / (size_t)counts[k];
        double g = measure(counts[k]);
        if (g < 0) {
          fprintf(stderr, "membw: cannot allocate %lu MiB for %d threads\n", mib, counts[k]);
          return 1;
        }
        printf("membw set_bytes %zu threads %d copy_GBps %.3f\n", set, counts[k], g);
        fflush(stdout);
      }
    }
  }
  return 0;
}
