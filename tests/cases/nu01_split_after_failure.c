/*
 * NU-01 (found trying coll as a new user): a split after one rank's
 * communicator failed must fail on the other ranks within the
 * communicator's timeout (collCommSetTimeout), not wait for COLL_TIMEOUT.
 *
 * 3 ranks as threads of one process (collCommInitAll), COLL_TIMEOUT=120,
 * collCommSetTimeout(c, 2) on each. Rank 0 sends 2048 floats, rank 1
 * receives 1000: rank 1's receive fails (mismatch) and its communicator is
 * failed. Then every rank calls collCommSplit. Expected: rank 1's split
 * fails at once (its communicator failed earlier); ranks 0 and 2 fail too,
 * each within 2 s + 8 s of slack (the old code waited the 120 s of
 * COLL_TIMEOUT there), with no new communicator; every collCommDestroy
 * returns. The receive buffer's guard floats stay untouched.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll.h"

#define N 3
#define GUARD 64
#define TIMEOUT_S 2
#define SLACK_S 8.0

static collComm_t comms[N];
static pthread_barrier_t bar;
static collResult_t splitRes[N], recvRes = collSuccess;
static double splitTook[N];
static collComm_t splitComm[N];
static char splitMsg[N][512];
static int guardBad;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void* body(void* arg) {
  int rk = (int)(long)arg;
  collComm_t c = comms[rk];
  float* buf = malloc((2048 + GUARD) * sizeof(float));
  for (int i = 0; i < 2048 + GUARD; i++) buf[i] = rk == 0 ? 1.0f : -7.0f;
  if (rk == 0) (void)collSend(buf, 2048, collFloat32, 1, c, NULL); /* may succeed: it cannot know */
  if (rk == 1) {
    recvRes = collRecv(buf, 1000, collFloat32, 0, c, NULL);
    for (int i = 1000; i < 1000 + GUARD; i++) guardBad += buf[i] != -7.0f;
  }
  pthread_barrier_wait(&bar);
  int colors[N] = {7, 7, COLL_SPLIT_NOCOLOR};
  double t0 = now();
  splitComm[rk] = NULL;
  splitRes[rk] = collCommSplit(c, colors[rk], rk, &splitComm[rk], NULL);
  splitTook[rk] = now() - t0;
  snprintf(splitMsg[rk], sizeof splitMsg[rk], "%s", splitRes[rk] == collSuccess ? "" : collGetLastError(c));
  free(buf);
  return NULL;
}

int main(void) {
  setenv("COLL_TIMEOUT", "120", 1);
  int fails = 0;
  if (collCommInitAll(comms, N, NULL) != collSuccess) {
    printf("FAIL: collCommInitAll: %s\n", collGetLastError(NULL));
    return 1;
  }
  for (int i = 0; i < N; i++) collCommSetTimeout(comms[i], TIMEOUT_S);
  pthread_t t[N];
  pthread_barrier_init(&bar, NULL, N);
  for (long i = 0; i < N; i++) pthread_create(&t[i], NULL, body, (void*)i);
  for (int i = 0; i < N; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&bar);
  if (recvRes == collSuccess) {
    printf("FAIL: rank 1's receive of 1000 floats returned success for a send of 2048\n");
    fails++;
  }
  if (guardBad) {
    printf("FAIL: %d guard floats after rank 1's receive buffer were overwritten\n", guardBad);
    fails++;
  }
  for (int r = 0; r < N; r++) {
    printf("rank %d: split %s in %.2f s%s%s\n", r, collGetErrorString(splitRes[r]), splitTook[r],
           splitMsg[r][0] ? ": " : "", splitMsg[r]);
    if (splitRes[r] == collSuccess || splitComm[r]) {
      printf("FAIL: rank %d's split succeeded after rank 1's communicator failed\n", r);
      fails++;
    }
    if (splitTook[r] > TIMEOUT_S + SLACK_S) {
      printf("FAIL: rank %d's split took %.1f s, more than the communicator's %d s timeout + %.0f s\n", r,
             splitTook[r], TIMEOUT_S, SLACK_S);
      fails++;
    }
    if (splitComm[r]) collCommDestroy(splitComm[r]);
  }
  for (int r = 0; r < N; r++)
    if (collCommDestroy(comms[r]) != collSuccess) {
      printf("FAIL: collCommDestroy(rank %d): %s\n", r, collGetLastError(NULL));
      fails++;
    }
  printf("%s\n", fails ? "FAILED" : "passed");
  return fails ? 1 : 0;
}
