/*
 * helper_check.h - the cases' checks: a condition that does not hold is
 * counted in the caller's `fails` (an int in scope) and printed with its
 * line, and the case goes on.
 *   CHECK(cond, fmt, ...)         "FAILED: <message> (line N)" on stderr
 *   CHECK_RANKED(cond, fmt, ...)  "rank R/N FAIL line L: <message>" on
 *                                 stdout, the first 10 of a rank (needs
 *                                 `rank` and `nranks` in scope)
 */
#ifndef COLL_TEST_HELPER_CHECK_H_
#define COLL_TEST_HELPER_CHECK_H_

#include <stdio.h>

#define CHECK(cond, ...)                         \
  do {                                           \
    if (!(cond)) {                               \
      fprintf(stderr, "FAILED: ");               \
      fprintf(stderr, __VA_ARGS__);              \
      fprintf(stderr, " (line %d)\n", __LINE__); \
      fails++;                                   \
    }                                            \
  } while (0)

#define CHECK_RANKED(cond, ...)                                      \
  do {                                                               \
    if (!(cond)) {                                                   \
      if (fails++ < 10) {                                            \
        printf("rank %d/%d FAIL line %d: ", rank, nranks, __LINE__); \
        printf(__VA_ARGS__);                                         \
        printf("\n");                                                \
      }                                                              \
    }                                                                \
  } while (0)

#endif
