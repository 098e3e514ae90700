/*
 * br37_timeouts - BR-37 (pytorch/pytorch#165422): a communicator's timeout
 * can be changed after creation, and one call can have its own.
 *
 * API (include/coll.h): collCommSetTimeout / collCommGetTimeout (seconds,
 * for operations issued afterwards), collCommSetCallTimeout (milliseconds,
 * the next launch only). Rule for asynchronous operations: the deadline is
 * taken when the operation is issued; changing the timeout later does not
 * change operations already queued or running.
 *
 * 2 ranks started as torchrun starts them; each case runs on C =
 * collCommSplit(world) created with the given timeout:
 *  1. C at 60 s, lowered to 2 s; rank 1 does not call; rank 0's all-reduce
 *     fails with collTimeout ("timed out") between 1.5 s and 5 s.
 *  2. C at 60 s; a call with a 500 ms per-call timeout while rank 1 is there
 *     succeeds; the next call, which rank 1 joins 1.5 s late, succeeds (the
 *     per-call timeout did not stick; collCommGetTimeout still says 60);
 *     then a 500 ms call that rank 1 never joins fails within 3 s.
 *  3. C at 2 s, raised to 30 s; rank 1 joins after 5 s; result 3.0.
 *  4. async: C at 60 s, an all-reduce is queued on a stream, then the
 *     timeout is lowered to 1 s; rank 1 joins after 3 s: success (60 s
 *     applied). C at 1 s, an all-reduce queued, then raised to 60 s; rank 1
 *     joins after 3 s: rank 0 fails with collTimeout after ~1 s (1 s applied).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helper_fail.h"

typedef struct {
  int step[2]; /* rank r reached step k */
} shared;

static shared* sh;
static int fails;

static void expect(int ok, const char* what) {
  printf("  %s: %s\n", ok ? "ok" : "FAILED", what);
  fflush(stdout);
  fails += !ok;
}

/* Both ranks: rank `me` announces step k and waits until the other got there. */
static void meet(int me, int k) {
  __atomic_store_n(&sh->step[me], k, __ATOMIC_RELEASE);
  while (__atomic_load_n(&sh->step[1 - me], __ATOMIC_ACQUIRE) < k) usleep(1000);
}

static collComm_t newComm(collComm_t world, int rank, int timeoutSec) {
  collConfig_t cfg = COLL_CONFIG_INITIALIZER;
  cfg.timeoutSec = timeoutSec;
  collComm_t c = NULL;
  if (collCommSplit(world, 0, rank, &c, &cfg) != collSuccess) {
    fprintf(stderr, "rank %d: split: %s\n", rank, collGetLastError(NULL));
    exit(2);
  }
  return c;
}

/* All-reduce of rank+1 on c; *sec = how long it took. */
static collResult_t ar(collComm_t c, int rank, collStream_t s, float* out, double* sec) {
  static float in;
  in = (float)(rank + 1);
  double t0 = failNow();
  collResult_t r = collAllReduce(&in, out, 1, collFloat, collSum, c, s);
  if (s && r == collSuccess) r = collStreamSynchronize(s);
  if (sec) *sec = failNow() - t0;
  return r;
}

static int body(int rank, int nranks, void* arg) {
  (void)nranks, (void)arg;
  collComm_t world;
  if (collCommInitFromEnv(&world, NULL) != collSuccess) return 2;
  float out = 0;
  double sec;
  collResult_t r;
  int step = 0;

  /* 1 */
  collComm_t c = newComm(world, rank, 60);
  if (rank == 0) {
    expect(collCommSetTimeout(c, 2) == collSuccess, "1: timeout lowered from 60 s to 2 s");
    r = ar(c, rank, NULL, &out, &sec);
    printf("  1: %s after %.2f s: %s\n", collGetErrorString(r), sec, collGetLastError(NULL));
    expect(r == collTimeout && sec >= 1.5 && sec <= 5 && strstr(collGetLastError(NULL), "timed out"),
           "1: rank 0 got collTimeout between 1.5 and 5 s, saying it timed out");
  }
  meet(rank, ++step);
  collCommDestroy(c);

  /* 2 */
  c = newComm(world, rank, 60);
  if (rank == 0) collCommSetCallTimeout(c, 500);
  r = ar(c, rank, NULL, &out, &sec);
  if (rank == 0) expect(r == collSuccess && out == 3.0f, "2: a 500 ms call with rank 1 present succeeds");
  if (rank == 1) usleep(1500 * 1000);
  r = ar(c, rank, NULL, &out, &sec);
  if (rank == 0) {
    int t = 0;
    collCommGetTimeout(c, &t);
    printf("  2: next call %s after %.2f s, timeout %d s\n", collGetErrorString(r), sec, t);
    expect(r == collSuccess && out == 3.0f && sec > 1.0 && t == 60,
           "2: the next call, joined 1.5 s late, succeeds (60 s applied again)");
    collCommSetCallTimeout(c, 500);
    r = ar(c, rank, NULL, &out, &sec);
    printf("  2: %s after %.2f s: %s\n", collGetErrorString(r), sec, collGetLastError(NULL));
    expect(r == collTimeout && sec >= 0.4 && sec <= 3 && strstr(collGetLastError(NULL), "collCommSetCallTimeout"),
           "2: a 500 ms call that rank 1 never joins fails within 3 s, naming the per-call timeout");
  }
  meet(rank, ++step);
  collCommDestroy(c);

  /* 3 */
  c = newComm(world, rank, 2);
  if (rank == 0) {
    expect(collCommSetTimeout(c, 30) == collSuccess, "3: timeout raised from 2 s to 30 s");
    meet(rank, ++step);
  } else {
    meet(rank, ++step);
    usleep(5000 * 1000);
  }
  r = ar(c, rank, NULL, &out, &sec);
  if (rank == 0) {
    printf("  3: %s after %.2f s, result %g\n", collGetErrorString(r), sec, (double)out);
    expect(r == collSuccess && out == 3.0f && sec > 4, "3: joined after 5 s: success with 3.0");
  }
  meet(rank, ++step);
  collCommDestroy(c);

  /* 4 */
  for (int k = 0; k < 2; k++) {
    c = newComm(world, rank, k == 0 ? 60 : 1);
    if (rank == 0) {
      collStream_t s;
      collStreamCreate(c, &s);
      static float in0 = 1;
      double t0 = failNow();
      r = collAllReduce(&in0, &out, 1, collFloat, collSum, c, s);
      collCommSetTimeout(c, k == 0 ? 1 : 60);
      meet(rank, ++step);
      if (r == collSuccess) r = collStreamSynchronize(s);
      sec = failNow() - t0;
      printf("  4.%d: issued with %d s, changed to %d s: %s after %.2f s\n", k, k == 0 ? 60 : 1, k == 0 ? 1 : 60,
             collGetErrorString(r), sec);
      if (k == 0) expect(r == collSuccess && out == 3.0f, "4: the queued call kept 60 s (issue time) and succeeded");
      else expect(r == collTimeout && sec < 2.5, "4: the queued call kept 1 s (issue time) and timed out");
      collStreamDestroy(s);
    } else {
      meet(rank, ++step);
      usleep(3000 * 1000);
      if (k == 0) r = ar(c, rank, NULL, &out, &sec);
    }
    meet(rank, ++step);
    collCommDestroy(c);
  }
  collCommDestroy(world);
  return fails ? 1 : 0;
}

int main(void) {
  sh = failShared(sizeof *sh);
  collLaunchSpec spec = {.nranks = 2, .timeoutSec = 90, .body = body};
  int bad = collLaunchRun(&spec);
  printf("%s\n", bad ? "FAILED" : "PASSED");
  return bad ? 1 : 0;
}
