/*
 * i17_4_zerocopy_dead_peer.c - issue 17 point 4: a rank dies during
 * zero-copy all-reduces (collMemAlloc buffers, 16 MiB per rank); with
 * `allgather` (issue 17 point 3) during single-copy all-gathers instead
 * (engine/cmagather.c: malloc'd buffers, 16 MiB per rank and block).
 *
 * 3 ranks (and 2), communicator timeout 60 s. Every rank records its open
 * descriptors before init, allocates its buffers, checks that a first call
 * ran through "zerocopy", then loops over all-reduces. The last rank starts
 * a thread that, 10-60 ms later, notes the time and SIGKILLs its own
 * process: somewhere inside a call (rounds, reduction or copies).
 * Expected on every survivor: a call fails (collRemoteError) within 5 s of
 * the kill (far below the 60 s timeout: the death is seen, not timed out),
 * its message names the dead rank; right after the failure no peer's
 * coll-mem segment is mapped any more (only the rank's own two; all-gather:
 * none, its buffers are malloc'd and nothing is mapped); after
 * collCommDestroy and collMemFree no coll-mem mapping and no coll memfd is
 * left and the descriptors are back to the count before init.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../integration/mp_harness.h"
#include "helper_zc.h"
#include "helper_fail.h"

#define COUNT ((size_t)4 << 20) /* floats: 16 MiB per buffer */

typedef struct {
  double killAt;
  double errAt[8];
  int code[8], mapsAfterErr[8], mapsEnd[8], memfdsEnd[8], fds0[8], fdsEnd[8], zcFirst[8], named[8];
  char msg[8][400];
} shared;

static shared* sh;
static int gather; /* all-gathers of malloc'd buffers instead */

static collResult_t call(const float* s, float* d, collComm_t comm) {
  if (gather) return collAllGather(s, d, COUNT, collFloat32, comm, NULL);
  return collAllReduce(s, d, COUNT, collFloat32, collSum, comm, NULL);
}

static void* killer(void* arg) {
  (void)arg;
  usleep(10000 + (useconds_t)(getpid() % 50) * 1000);
  sh->killAt = failNow();
  raise(SIGKILL);
  return NULL;
}

static int body(collComm_t unused, int rank, int nranks, void* arg) {
  (void)unused;
  collUniqueId* id = arg;
  sh->fds0[rank] = failCountFds();
  collComm_t comm;
  if (collCommInitRank(&comm, nranks, *id, rank) != collSuccess) {
    fprintf(stderr, "rank %d: init: %s\n", rank, collGetLastError(NULL));
    return 1;
  }
  collCommSetTimeout(comm, 60);
  float *s = NULL, *d = NULL;
  if (gather) {
    s = malloc(COUNT * 4);
    d = malloc(COUNT * 4 * (size_t)nranks);
  } else if (collMemAlloc((void**)&s, COUNT * 4) != collSuccess || collMemAlloc((void**)&d, COUNT * 4) != collSuccess) {
    fprintf(stderr, "rank %d: collMemAlloc: %s\n", rank, collGetLastError(NULL));
    return 1;
  }
  for (size_t i = 0; i < COUNT; i++) s[i] = (float)(rank + 1);
  collResult_t r = call(s, d, comm);
  /* all-gather: the last element is the last rank's */
  float last = gather ? (float)nranks : (float)(nranks * (nranks + 1) / 2);
  sh->zcFirst[rank] = r == collSuccess && zcCalls(comm) == 1 && d[COUNT * (gather ? (size_t)nranks : 1) - 1] == last;
  if (rank == nranks - 1) {
    pthread_t t;
    pthread_create(&t, NULL, killer, NULL);
  }
  for (int k = 0; k < 100000 && r == collSuccess; k++) r = call(s, d, comm);
  sh->errAt[rank] = failNow();
  sh->code[rank] = (int)r;
  snprintf(sh->msg[rank], sizeof sh->msg[rank], "%s", collGetLastError(comm));
  char who[32];
  snprintf(who, sizeof who, "rank %d", nranks - 1);
  sh->named[rank] = strstr(sh->msg[rank], who) != NULL;
  sh->mapsAfterErr[rank] = zcCountMemMaps();
  collCommDestroy(comm);
  if (gather) {
    free(s);
    free(d);
  } else {
    collMemFree(s);
    collMemFree(d);
  }
  sh->mapsEnd[rank] = zcCountMemMaps();
  sh->memfdsEnd[rank] = failCountMemfds();
  sh->fdsEnd[rank] = failCountFds();
  return 0;
}

int main(int argc, char** argv) {
  gather = argc > 1 && strcmp(argv[1], "allgather") == 0;
  sh = failShared(sizeof *sh);
  int fails = 0;
  for (int n = 3; n >= 2; n--) {
    memset(sh, 0, sizeof *sh);
    collMpRunRaw(n, 60, body, NULL, NULL); /* the victim's death fails the run: judged below */
    for (int q = 0; q < n - 1; q++) {
      double dt = sh->errAt[q] - sh->killAt;
      int ok = sh->zcFirst[q] && sh->killAt > 0 && sh->code[q] == collRemoteError && dt >= 0 && dt < 5 &&
               sh->named[q] && sh->mapsAfterErr[q] == (gather ? 0 : 2) && sh->mapsEnd[q] == 0 && sh->memfdsEnd[q] == 0 &&
               sh->fdsEnd[q] == sh->fds0[q];
      printf("%d ranks, rank %d: first call zerocopy %d; error %s %.3f s after the kill: \"%s\"; coll-mem mappings "
             "after the error %d (want %d), at the end %d; coll memfds %d; fds %d -> %d: %s\n",
             n, q, sh->zcFirst[q], collGetErrorString((collResult_t)sh->code[q]), dt, sh->msg[q], sh->mapsAfterErr[q],
             gather ? 0 : 2, sh->mapsEnd[q], sh->memfdsEnd[q], sh->fds0[q], sh->fdsEnd[q], ok ? "ok" : "FAILED");
      fails += !ok;
    }
  }
  printf("i17_4_zerocopy_dead_peer%s: %s\n", gather ? " allgather" : "", fails ? "FAILED" : "passed");
  return fails ? 1 : 0;
}
