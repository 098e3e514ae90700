/*
 * BR-13: the bits of a reduction do not depend on how many communicators
 * the process made before, on the rank, on in-place or not, or on the run
 * (NVIDIA/nccl#2360).
 *
 * 4 ranks; bfloat16 and float32; counts 1,048,576 and 1,000,003; op sum;
 * out-of-place and in-place. Element i of rank r comes from xorshift64
 * seeded with 1234 + r, mapped to [-1, 1) and rounded to the type. Scenario
 * k = 0..3: before the measured call, k extra communicators (split of the
 * world, then fresh unique ids, alternately) each run a 1-element
 * all-reduce and stay alive; then the measured all-reduce runs on the world
 * communicator. The whole sequence runs twice, in two sets of processes.
 * Expected: one digest of the output bits per type and count, the same for
 * every k, rank, placement and run (a 64-bit FNV-1a of the buffer: bitwise
 * identity is what is compared; the recipe's SHA-256 would only be another
 * name for the same bits).
 * br13_determinism.cmake runs it with the mailbox off too. What can change
 * the bits between jobs is the tuner's choice (algorithm, chunk, channels:
 * the order of the sums): it depends only on the topology and the settings,
 * except with COLL_TUNE_CALIBRATE=1 (measured speeds; see the .cmake).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../integration/mp_harness.h"
#include "helper_data.h"
#include "reduce/reduce.h"

#define NSCEN 4
#ifndef BR13_RUNS
#define BR13_RUNS 2 /* sets of processes (the sanitizer build runs one: see the .cmake) */
#endif
#define NMEAS 8 /* 2 types x 2 counts x 2 placements */

static dataShared* seen; /* c[run * NSCEN + k].rank[r].digests[measurement] */

static uint64_t xorshift(uint64_t* s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

static void fillInput(void* buf, collDataType_t t, size_t n, int rank) {
  uint64_t s = 1234 + (uint64_t)rank;
  for (size_t i = 0; i < n; i++) {
    float v = (float)((double)(xorshift(&s) >> 11) * 0x1p-53 * 2.0 - 1.0);
    if (t == collBfloat16) ((uint16_t*)buf)[i] = collFloatToBf16(v);
    else ((float*)buf)[i] = v;
  }
}

/* k extra communicators, each with a 1-element all-reduce, kept alive. */
static int extras(collComm_t world, int rank, int nranks, int k, collComm_t* out) {
  int fails = 0;
  for (int j = 0; j < k; j++) {
    collResult_t r;
    if (j % 2 == 0) r = collCommSplit(world, 0, rank, &out[j], NULL);
    else r = dataFreshComm(world, rank, nranks, 120, &out[j]);
    DATA_CHECK(r == collSuccess, "extra communicator %d: %s", j, collGetLastError(NULL));
    if (r != collSuccess) {
      out[j] = NULL;
      continue;
    }
    int one = 1, sum = 0;
    DATA_CHECK(collAllReduce(&one, &sum, 1, collInt32, collSum, out[j], NULL) == collSuccess && sum == nranks,
               "1-element all-reduce on extra communicator %d", j);
  }
  return fails;
}

static int body(collComm_t world, int rank, int nranks, void* arg) {
  int run = *(int*)arg, fails = 0;
  static const collDataType_t types[2] = {collBfloat16, collFloat32};
  static const size_t counts[2] = {1048576, 1000003};
  size_t maxBytes = 1048576 * 4;
  char* in = malloc(maxBytes);
  char* out = malloc(maxBytes);
  for (int k = 0; k < NSCEN; k++) {
    collComm_t ex[NSCEN];
    fails += extras(world, rank, nranks, k, ex);
    uint64_t* dig = seen->c[run * NSCEN + k].rank[rank].digests;
    int m = 0;
    for (int ti = 0; ti < 2; ti++)
      for (int ci = 0; ci < 2; ci++)
        for (int inPlace = 0; inPlace < 2; inPlace++, m++) {
          collDataType_t t = types[ti];
          size_t n = counts[ci], bytes = n * collTypeSize(t);
          fillInput(in, t, n, rank);
          if (inPlace) memcpy(out, in, bytes);
          collResult_t r = collAllReduce(inPlace ? out : in, out, n, t, collSum, world, NULL);
          DATA_CHECK(r == collSuccess, "all-reduce: %s", collGetLastError(world));
          dig[m] = dataDigest(out, bytes);
        }
    for (int j = 0; j < k; j++)
      if (ex[j]) DATA_CHECK(collCommDestroy(ex[j]) == collSuccess, "destroy: %s", collGetLastError(NULL));
  }
  free(in);
  free(out);
  return fails;
}

int main(void) {
  seen = dataSharedMap();
  if (!seen) return 1;
  int fails = 0;
  double t0 = dataNow();
  for (int run = 0; run < BR13_RUNS; run++) DATA_CHECK(collMpRun(4, 240, body, &run) == 0, "run %d: a rank failed", run);
  static const char* what[NMEAS] = {"bfloat16 1048576 out-of-place", "bfloat16 1048576 in-place",
                                    "bfloat16 1000003 out-of-place", "bfloat16 1000003 in-place",
                                    "float32 1048576 out-of-place",  "float32 1048576 in-place",
                                    "float32 1000003 out-of-place",  "float32 1000003 in-place"};
  for (int m = 0; m < NMEAS; m++) {
    /* the reference: run 0, k = 0, rank 0, out-of-place of the same type and count */
    uint64_t ref = seen->c[0].rank[0].digests[m & ~1];
    int bad = 0;
    for (int run = 0; run < BR13_RUNS; run++)
      for (int k = 0; k < NSCEN; k++)
        for (int r = 0; r < 4; r++) {
          uint64_t d = seen->c[run * NSCEN + k].rank[r].digests[m];
          if (d != ref && bad++ < 4)
            DATA_CHECK(0, "%s: run %d, %d extra communicators, rank %d: digest %016llx, expected %016llx", what[m],
                       run, k, r, (unsigned long long)d, (unsigned long long)ref);
        }
    DATA_CHECK(bad == 0, "%s: %d of %d results differ in their bits", what[m], bad, BR13_RUNS * NSCEN * 4);
    printf("%s: %s (digest %016llx)\n", what[m], bad ? "FAILED" : "identical everywhere", (unsigned long long)ref);
  }
  printf("BR-13 bitwise determinism (%.1f s): %s\n", dataNow() - t0, fails ? "FAILED" : "passed");
  return fails ? 1 : 0;
}
