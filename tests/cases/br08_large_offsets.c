/*
 * BR-08: an all-reduce whose byte size and byte offsets pass 2^31 and 2^32
 * (open-mpi/ompi#10095: with about 12 GB of int64 on 4 ranks, chunk offsets
 * computed in a 32-bit int went negative and the result was wrong).
 *
 *  int64: 4 ranks, count 400,000,000 (3.2 GB per buffer; the count fits in
 *         31 bits, the byte size and the last chunks' byte offsets do not),
 *         in-place sum, element i on rank r = (i mod 1000) + r; blocking,
 *         then again on a stream (the non-blocking form). Expected element
 *         i = 4*(i mod 1000) + 6 on every rank: every element is checked,
 *         and a failure names the first wrong index (the recipe's indices
 *         0, 1, 268435455/268435456, the quarter boundaries and the last 1000
 *         are among them).
 *  uint8: (extension: an element count above 2^31) 2 ranks, count
 *         3,221,225,472 (3 * 2^30), in-place sum, rank 0 byte i = i mod 61,
 *         rank 1 bytes = 3; expected byte i = (i mod 61) + 3.
 * Usage: case_br08_large_offsets int64|uint8. Needs 3.2 GB per rank (13 GB
 * for int64, 6.5 GB for uint8) and exits 77 (skipped) when MemAvailable is
 * short. ctest label cases-big, gcc build only (br08_large_offsets.cmake).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../integration/mp_harness.h"
#include "helper_sem.h"

#define N64 400000000ull
#define N8 3221225472ull

static const char* gKind;

static uint64_t memAvailable(void) {
  FILE* f = fopen("/proc/meminfo", "r");
  char line[256];
  uint64_t kb = 0;
  if (!f) return 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "MemAvailable: %" SCNu64 " kB", &kb) == 1) break;
  fclose(f);
  return kb * 1024;
}

/* MAP_POPULATE: the kernel faults the pages in at once, about twice as fast
 * as first touch on this VM (MADV_HUGEPAGE was slower: direct compaction). */
static void* bigAlloc(size_t bytes) {
  void* p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static void fill64(int64_t* b, int rank) {
  int64_t m = 0;
  for (uint64_t i = 0; i < N64; i++) {
    b[i] = m + rank;
    if (++m == 1000) m = 0;
  }
}

static int check64(const int64_t* b, int rank, const char* how) {
  int fails = 0;
  uint64_t bad = 0, first = 0;
  int64_t m = 0;
  for (uint64_t i = 0; i < N64; i++) {
    if (b[i] != 4 * m + 6 && bad++ == 0) first = i;
    if (++m == 1000) m = 0;
  }
  SEM_CHECK(bad == 0, "int64 %s: %" PRIu64 " wrong elements, first at %" PRIu64 " (%" PRId64 ", expected %" PRId64 ")",
            how, bad, first, bad ? b[first] : 0, (int64_t)(4 * (first % 1000) + 6));
  static const uint64_t probe[] = {0, 1, 268435455, 268435456, 99999999, 100000000, 199999999, 200000000,
                                   299999999, 300000000, N64 - 1000, N64 - 1};
  for (size_t k = 0; k < sizeof probe / sizeof probe[0]; k++) {
    uint64_t i = probe[k];
    SEM_CHECK(b[i] == (int64_t)(4 * (i % 1000) + 6), "int64 %s: element %" PRIu64 " = %" PRId64, how, i, b[i]);
  }
  return fails;
}

static int body64(collComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  (void)nranks;
  int fails = 0;
  size_t bytes = N64 * sizeof(int64_t);
  double tm = semNow();
  int64_t* b = bigAlloc(bytes);
  tm = semNow() - tm;
  if (!b) {
    fprintf(stderr, "rank %d: cannot map %zu bytes\n", rank, bytes);
    return 1;
  }
  for (int pass = 0; pass < 2 && !fails; pass++) {
    const char* how = pass ? "on a stream" : "blocking";
    double t0 = semNow();
    fill64(b, rank);
    double t1 = semNow();
    if (pass == 0) {
      SEM_OK(collAllReduce(b, b, N64, collInt64, collSum, comm, NULL));
    } else {
      collStream_t s;
      if (SEM_OK(collStreamCreate(comm, &s))) {
        SEM_OK(collAllReduce(b, b, N64, collInt64, collSum, comm, s));
        SEM_OK(collStreamSynchronize(s));
        SEM_OK(collStreamDestroy(s));
      }
    }
    double t2 = semNow();
    fails += check64(b, rank, how);
    printf("int64 x %llu, rank %d of 4, %s: map %.1f s, fill %.1f s, all-reduce %.1f s, check %.1f s\n",
           (unsigned long long)N64, rank, how, pass ? 0.0 : tm, t1 - t0, t2 - t1, semNow() - t2);
  }
  munmap(b, bytes);
  return fails;
}

static int body8(collComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  (void)nranks;
  int fails = 0;
  double tm = semNow();
  uint8_t* b = bigAlloc(N8);
  tm = semNow() - tm;
  if (!b) {
    fprintf(stderr, "rank %d: cannot map %llu bytes\n", rank, (unsigned long long)N8);
    return 1;
  }
  double t0 = semNow();
  if (rank == 0) {
    uint8_t m = 0;
    for (uint64_t i = 0; i < N8; i++) {
      b[i] = m;
      if (++m == 61) m = 0;
    }
  } else {
    memset(b, 3, N8);
  }
  double t1 = semNow();
  SEM_OK(collAllReduce(b, b, N8, collUint8, collSum, comm, NULL));
  double t2 = semNow();
  uint64_t bad = 0, first = 0;
  uint8_t m = 0;
  for (uint64_t i = 0; i < N8; i++) {
    if (b[i] != (uint8_t)(m + 3) && bad++ == 0) first = i;
    if (++m == 61) m = 0;
  }
  SEM_CHECK(bad == 0, "uint8: %" PRIu64 " wrong bytes, first at %" PRIu64 " (%u, expected %u)", bad, first,
            bad ? b[first] : 0, (unsigned)(first % 61 + 3));
  printf("uint8 x %llu, rank %d of 2: map %.1f s, fill %.1f s, all-reduce %.1f s, check %.1f s\n",
         (unsigned long long)N8, rank, tm, t1 - t0, t2 - t1, semNow() - t2);
  munmap(b, N8);
  return fails;
}

int main(int argc, char** argv) {
  gKind = argc > 1 ? argv[1] : "int64";
  int is64 = strcmp(gKind, "int64") == 0;
  if (!is64 && strcmp(gKind, "uint8") != 0) {
    fprintf(stderr, "usage: %s int64|uint8\n", argv[0]);
    return 2;
  }
  int nranks = is64 ? 4 : 2;
  uint64_t need = (uint64_t)nranks * (is64 ? N64 * 8 : N8) + (512ull << 20);
  uint64_t avail = memAvailable();
  if (avail < need) {
    printf("BR-08 %s: skipped: needs %.1f GB, MemAvailable is %.1f GB\n", gKind, (double)need / 1e9,
           (double)avail / 1e9);
    return 77;
  }
  double t0 = semNow();
  int rc = collMpRun(nranks, 1500, is64 ? body64 : body8, NULL);
  printf("BR-08 %s all-reduce past 2^31 bytes on %d ranks: %s (%.0f s)\n", gKind, nranks, rc ? "FAILED" : "passed",
         semNow() - t0);
  return rc;
}
