/*
 * helper_data.h - shared pieces of the data-path cases (i14_*, br06, br11,
 * br13, br15, br32, br35): what each rank saw of each case, in memory shared
 * with the parent (mapped before collMpRun forks, so the parent can compare
 * ranks), fresh communicators for cases that break theirs, a clock, and
 * checks that count failures.
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
#define DATA_MAX_CASES 40

/* What one rank saw of one call (and of the call after it). */
typedef struct {
  int res;          /* collResult_t of the call */
  double took;      /* seconds */
  int nextRes;      /* of the call made after it (-1: none made) */
  double nextTook;
  char msg[700];    /* collGetLastError after the call (or the next one) */
  char nextMsg[700];
  uint64_t digest;  /* free for the case (e.g. a hash of the output) */
  uint64_t digests[8];
} dataSeen;

typedef struct {
  dataSeen rank[DATA_MAX_RANKS];
} dataCaseSeen;

typedef struct {
  dataCaseSeen c[DATA_MAX_CASES];
} dataShared;

/* Shared between the parent and the forked ranks; never freed (one per
 * process, a few KiB). */
static inline dataShared* dataSharedMap(void) {
  void* p = mmap(NULL, sizeof(dataShared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  memset(p, 0, sizeof(dataShared));
  return (dataShared*)p;
}

/* A fresh communicator of every rank of ctl (rank 0 makes the id and
 * broadcasts it over ctl), with a timeout of timeoutSec (the recipe's
 * COLL_TIMEOUT): cases that break their communicator run one
 * after another in the same processes (a process's first communicator costs
 * seconds under the sanitizers, the next ones milliseconds). */
static inline collResult_t dataFreshComm(collComm_t ctl, int rank, int nranks, int timeoutSec, collComm_t* out) {
  collUniqueId id;
  memset(&id, 0, sizeof id);
  if (rank == 0 && collGetUniqueId(&id) != collSuccess) return collSystemError;
  collResult_t r = collBroadcast(&id, &id, sizeof id, collUint8, 0, ctl, NULL);
  if (r != collSuccess) return r;
  collConfig_t cfg = COLL_CONFIG_INITIALIZER;
  cfg.timeoutSec = timeoutSec;
  return collCommInitRankConfig(out, nranks, id, rank, &cfg);
}

/* The control communicator of a case runner (the harness's) waits out any
 * case: its timeout (COLL_TIMEOUT, read once per process) is set long;
 * the cases' communicators get theirs from dataFreshComm. */
#define DATA_CONTROL_TIMEOUT "300"

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

/* One case of a runner: runs case k on comm, fills *me, returns failures. */
typedef int (*dataCaseFn)(collComm_t comm, int rank, int nranks, int k, dataSeen* me);

/* Runs cases 0..ncases-1 in turn, each on a fresh communicator of every rank
 * of ctl (dataFreshComm with timeoutSec), destroyed after it; the case's
 * time in us (communicator included) goes to seen->c[k].rank[rank].digest;
 * a barrier on ctl ends each case. Returns the failures counted. */
static inline int dataRunCases(collComm_t ctl, int rank, int nranks, int ncases, int timeoutSec, dataShared* seen,
                               dataCaseFn one) {
  int fails = 0;
  for (int k = 0; k < ncases; k++) {
    collComm_t comm;
    double t0 = dataNow();
    collResult_t r = dataFreshComm(ctl, rank, nranks, timeoutSec, &comm);
    DATA_CHECK(r == collSuccess, "case %d: communicator: %s", k, collGetLastError(NULL));
    if (r != collSuccess) return fails;
    fails += one(comm, rank, nranks, k, &seen->c[k].rank[rank]);
    DATA_CHECK(collCommDestroy(comm) == collSuccess, "case %d: destroy: %s", k, collGetLastError(NULL));
    seen->c[k].rank[rank].digest = (uint64_t)((dataNow() - t0) * 1e6);
    DATA_CHECK(collBarrier(ctl, NULL) == collSuccess, "barrier: %s", collGetLastError(ctl));
  }
  return fails;
}

#endif
