/*
 * br19_nonblocking_init.c - BR-19: after a non-blocking init (blocking = 0),
 * grouped send/recv to every peer including self works, whether the caller
 * first polls collCommGetAsyncError until init finished or issues the group
 * at once (coll then waits for its init inside the call; it never reports
 * invalid usage). 4 ranks; rank r sends block p (256 int32) filled with
 * 1000r + p to rank p; on rank q, receive block p must hold 1000p + q.
 * Variants: poll first; no poll; no poll with a stream (the group is queued).
 * Init must reach success within 30 s.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"
#include "tests/integration/mp_harness.h"

#define BLK 256

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int body(collComm_t unused, int rank, int nranks, void* arg) {
  (void)unused;
  collUniqueId id = *(collUniqueId*)arg;
  int variant = atoi(getenv("BR19_VARIANT"));
  collConfig_t cfg = COLL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  collComm_t comm = NULL;
  double t0 = now();
  collResult_t r = collCommInitRankConfig(&comm, nranks, id, rank, &cfg);
  if (r != collSuccess && r != collInProgress) {
    printf("rank %d: init returned %d: %s\n", rank, r, collGetLastError(NULL));
    return 1;
  }
  if (variant == 0) { /* poll until init left the in-progress state */
    collResult_t st = collInProgress;
    while (st == collInProgress && now() - t0 < 30) {
      if (collCommGetAsyncError(comm, &st) != collSuccess) return 1;
      if (st == collInProgress) usleep(1000);
    }
    if (st != collSuccess) {
      printf("rank %d: init state %d after %.2f s: %s\n", rank, st, now() - t0, collGetLastError(NULL));
      return 1;
    }
  }
  int* sendbuf = malloc(sizeof(int) * BLK * (size_t)nranks);
  int* recvbuf = malloc(sizeof(int) * BLK * (size_t)nranks);
  for (int p = 0; p < nranks; p++)
    for (int i = 0; i < BLK; i++) {
      sendbuf[p * BLK + i] = 1000 * rank + p;
      recvbuf[p * BLK + i] = -1;
    }
  collStream_t stream = NULL;
  int fails = 0;
  if (variant == 2 && (r = collStreamCreate(comm, &stream)) != collSuccess) {
    printf("rank %d: collStreamCreate: %d: %s\n", rank, r, collGetLastError(comm));
    fails++;
  }
  collGroupStart();
  for (int p = 0; p < nranks && !fails; p++) {
    if ((r = collSend(sendbuf + p * BLK, BLK, collInt32, p, comm, stream)) != collSuccess) {
      printf("rank %d: collSend to %d: %d: %s\n", rank, p, r, collGetLastError(comm));
      fails++;
    }
    if ((r = collRecv(recvbuf + p * BLK, BLK, collInt32, p, comm, stream)) != collSuccess) {
      printf("rank %d: collRecv from %d: %d: %s\n", rank, p, r, collGetLastError(comm));
      fails++;
    }
  }
  r = collGroupEnd();
  if (r != collSuccess) {
    printf("rank %d: collGroupEnd: %d: %s\n", rank, r, collGetLastError(comm));
    fails++;
  }
  if (stream && (r = collStreamSynchronize(stream)) != collSuccess) {
    printf("rank %d: collStreamSynchronize: %d: %s\n", rank, r, collGetLastError(comm));
    fails++;
  }
  for (int p = 0; p < nranks && !fails; p++)
    for (int i = 0; i < BLK; i++)
      if (recvbuf[p * BLK + i] != 1000 * p + rank) {
        printf("rank %d: block %d [%d] = %d, want %d\n", rank, p, i, recvbuf[p * BLK + i], 1000 * p + rank);
        fails++;
        break;
      }
  if (stream) collStreamDestroy(stream);
  free(sendbuf);
  free(recvbuf);
  if (collCommDestroy(comm) != collSuccess) fails++;
  return fails;
}

int main(void) {
  const char* names[] = {"poll until init finished, then the group", "the group at once, no poll",
                         "the group at once on a stream"};
  int fails = 0;
  for (int v = 0; v < 3; v++) {
    char s[8];
    snprintf(s, sizeof s, "%d", v);
    setenv("BR19_VARIANT", s, 1);
    int rc = collMpRunRaw(4, 60, body, NULL, NULL);
    printf("%-44s %s\n", names[v], rc ? "FAIL" : "ok");
    fails += rc != 0;
  }
  printf("%d passed, %d failed\n", 3 - fails, fails);
  return fails ? 1 : 0;
}
