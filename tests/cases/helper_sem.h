/*
 * helper_sem.h - small checks shared by the semantics cases (br01, br02,
 * br03, br05, br08, br21, br28, br33, br43). Header only: the cases glob
 * compiles every *.c as a test, so helpers that are not tests live here.
 *
 * Every macro counts failures in a local `int fails` of the caller and
 * names the rank (a local `int rank`) in its message.
 */
#ifndef COLL_CASES_HELPER_SEM_H_
#define COLL_CASES_HELPER_SEM_H_

#include <dirent.h>
#include <stdio.h>
#include <time.h>

#include "coll.h"

static inline double semNow(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Entries of a directory (without . and ..), -1 if it cannot be read. */
static inline int semCountDir(const char* path) {
  DIR* d = opendir(path);
  int n = 0;
  if (!d) return -1;
  for (struct dirent* e; (e = readdir(d));) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

/* A coll call that must succeed; on failure prints the call, the code and
 * collGetLastError, and counts a failure. Evaluates to 1 on success. */
#define SEM_OK(call)                                                                                          \
  semOk_((call), #call, rank, __LINE__, &fails)

static inline int semOk_(collResult_t r, const char* what, int rank, int line, int* fails) {
  if (r == collSuccess) return 1;
  fprintf(stderr, "rank %d line %d: %s: %s: %s\n", rank, line, what, collGetErrorString(r), collGetLastError(NULL));
  (*fails)++;
  return 0;
}

/* A condition that must hold; prints the formatted message otherwise. */
#define SEM_CHECK(cond, ...)                                                                                  \
  do {                                                                                                        \
    if (!(cond)) {                                                                                            \
      fprintf(stderr, "rank %d line %d: check failed: ", rank, __LINE__);                                    \
      fprintf(stderr, __VA_ARGS__);                                                                           \
      fprintf(stderr, "\n");                                                                                  \
      fails++;                                                                                                \
    }                                                                                                         \
  } while (0)

#endif
