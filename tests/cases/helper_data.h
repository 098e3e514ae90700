/*
 * helper_data.h - shared pieces of the data-path cases (i14_*, br06, br11,
 * br13, br15, br32, br35): what each rank saw, in memory shared with the
 * parent (mapped before collMpRun forks, so the parent can compare ranks),
 * a clock, and checks that count failures.
 */
#ifndef COLL_HELPER_DATA_H_
#define COLL_HELPER_DATA_H_

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "coll.h"

#define DATA_MAX_RANKS 8

/* What one rank saw of one call (and of the call after it). */
typedef struct {
  int res;          /* collResult_t of the call */
  double took;      /* seconds */
  int nextRes;      /* of the call made after it (-1: none made) */
  double nextTook;
  char msg[700];    /* collGetLastError after the call (or the next one) */
  char nextMsg[700];
  uint64_t digest;  /* free for the case (e.g. a hash of the output) */
} dataSeen;

typedef struct {
  dataSeen rank[DATA_MAX_RANKS];
} dataShared;

/* Shared between the parent and the forked ranks; never freed (one per
 * process, a few KiB). */
static inline dataShared* dataSharedMap(void) {
  void* p = mmap(NULL, sizeof(dataShared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  memset(p, 0, sizeof(dataShared));
  return (dataShared*)p;
}

static inline double dataNow(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Counts a failure in `fails` (a local int) and prints why. */
#define DATA_CHECK(cond, ...)                      \
  do {                                             \
    if (!(cond)) {                                 \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                \
      fputc('\n', stderr);                         \
      fails++;                                     \
    }                                              \
  } while (0)

/* FNV-1a over bytes: identical buffers give identical digests. */
static inline uint64_t dataDigest(const void* p, size_t n) {
  const unsigned char* b = (const unsigned char*)p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

#endif
