/*
 * helper_iface_rank.c - one rank of the interface cases (br25, br26, br45),
 * launched the way torchrun launches: RANK, WORLD_SIZE, MASTER_ADDR and
 * MASTER_PORT in the environment, collCommInitFromEnv, no unique id passed
 * by hand. Built as case_iface_rank by helper_iface.cmake (not a test).
 *
 *   case_iface_rank [-c COUNT] [-t float|int32] [-H DIR]
 *
 * Runs one sum all-reduce of COUNT elements (default 1048576 float32), rank r
 * contributing r+1, and checks that every element is n(n+1)/2 exactly.
 * -H DIR: after the all-reduce, creates DIR/done.<rank> and waits (at most
 * 60 s) for DIR/go before destroying the communicator, so that the calling
 * script can list the rank's TCP connections while they exist.
 *
 * Prints one line "rank R/N: OK ..." or "rank R/N: ERROR <step>: <code>:
 * <message>" and exits 0 (OK), 2 (a coll call failed), 1 (wrong result or
 * usage).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int gRank = -1, gSize = -1;
static double gT0;

static int fail(const char* step, collResult_t r, collComm_t comm) {
  printf("rank %d/%d: ERROR %s: %s: %s (after %.1f s)\n", gRank, gSize, step, collGetErrorString(r),
         collGetLastError(comm), now() - gT0);
  fflush(stdout);
  return 2;
}

int main(int argc, char** argv) {
  size_t count = 1048576;
  int isInt = 0;
  const char* hold = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-c") && i + 1 < argc) count = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "-t") && i + 1 < argc) isInt = !strcmp(argv[++i], "int32");
    else if (!strcmp(argv[i], "-H") && i + 1 < argc) hold = argv[++i];
    else {
      fprintf(stderr, "usage: %s [-c COUNT] [-t float|int32] [-H DIR]\n", argv[0]);
      return 1;
    }
  }
  gRank = getenv("RANK") ? atoi(getenv("RANK")) : -1;
  gSize = getenv("WORLD_SIZE") ? atoi(getenv("WORLD_SIZE")) : -1;
  gT0 = now();
  collComm_t comm = NULL;
  collResult_t r = collCommInitFromEnv(&comm, NULL);
  if (r != collSuccess) return fail("init", r, NULL);
  int n = gSize;
  size_t es = isInt ? sizeof(int32_t) : sizeof(float);
  char* buf = malloc(count * es + 1);
  if (!buf) return 1;
  for (size_t i = 0; i < count; i++) {
    if (isInt) ((int32_t*)buf)[i] = gRank + 1;
    else ((float*)buf)[i] = (float)(gRank + 1);
  }
  r = collAllReduce(buf, buf, count, isInt ? collInt32 : collFloat, collSum, comm, NULL);
  if (r != collSuccess) {
    int rc = fail("allreduce", r, comm);
    collCommAbort(comm);
    return rc;
  }
  double want = (double)n * (n + 1) / 2.0;
  size_t bad = 0;
  double first = 0;
  for (size_t i = 0; i < count; i++) {
    double v = isInt ? (double)((int32_t*)buf)[i] : (double)((float*)buf)[i];
    if (v != want && bad++ == 0) first = v;
  }
  free(buf);
  if (bad) {
    printf("rank %d/%d: WRONG %zu of %zu elements differ from %g (first: %g)\n", gRank, n, bad, count, want, first);
    collCommAbort(comm);
    return 1;
  }
  double t = now() - gT0;
  if (hold) {
    char path[4096];
    snprintf(path, sizeof path, "%s/done.%d", hold, gRank);
    FILE* f = fopen(path, "w");
    if (f) fclose(f);
    snprintf(path, sizeof path, "%s/go", hold);
    struct stat st;
    for (int i = 0; i < 6000 && stat(path, &st) != 0; i++) usleep(10000);
  }
  r = collCommDestroy(comm);
  if (r != collSuccess) return fail("destroy", r, NULL);
  printf("rank %d/%d: OK allreduce %s x %zu = %g on every element in %.2f s\n", gRank, n, isInt ? "int32" : "float",
         count, want, t);
  return 0;
}
