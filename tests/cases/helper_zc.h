/*
 * helper_zc.h - what the collMemAlloc / zero-copy cases (i17_4_*) count:
 * this process's mappings of collMemAlloc segments and the calls the
 * counters attribute to the zerocopy algorithm (descriptors:
 * failCountFds of helper_fail.h).
 */
#ifndef COLL_HELPER_ZC_H_
#define COLL_HELPER_ZC_H_

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "coll.h"

/* Lines of /proc/self/maps that map a collMemAlloc memfd ("coll-mem"). */
static inline int zcCountMemMaps(void) {
  FILE* f = fopen("/proc/self/maps", "r");
  char line[512];
  int n = 0;
  while (f && fgets(line, sizeof line, f)) n += strstr(line, "memfd:coll-mem") != NULL;
  if (f) fclose(f);
  return n;
}

/* Calls of comm the counters attribute to the zerocopy algorithm. */
static inline uint64_t zcCalls(collComm_t comm) {
  collCollStats_t rows[64];
  int n = 0;
  uint64_t c = 0;
  if (collCommGetCollStats(comm, rows, 64, &n) != collSuccess) return 0;
  for (int i = 0; i < n; i++)
    if (strcmp(rows[i].algo, "zerocopy") == 0) c += rows[i].calls;
  return c;
}

#endif
