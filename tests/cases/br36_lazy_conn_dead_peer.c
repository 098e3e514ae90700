/*
 * br36_lazy_conn_dead_peer - BR-36 (pytorch/gloo#520): a rank exits (or is
 * stopped) before a sub-communicator's first collective; the survivors'
 * first call on it makes connections lazily and must fail in bounded time
 * in both roles (the side that connects and the side that accepts).
 *
 * Recipe: ranks started as torchrun starts them; world = collCommInitFromEnv
 * with timeout T; S = collCommSplit(world, color 0) (variant: S from a fresh
 * unique id that rank 0 hands out through shared memory). A 1-element
 * all-reduce on the world only. The victim then _exit(86)s (variant: stops
 * itself with SIGSTOP). The survivors call a 1-element all-reduce on S.
 * Victim rank 0 and the highest rank, so survivors play both roles; with the
 * mailbox (no connection at all), with shared-memory rings (mailbox off) and
 * with TCP (COLL_SHM_DISABLE=1); 2 and 4 ranks; T = 2 s and 10 s.
 * Expected: every survivor's first call on S returns an error within T + 10
 * s; collCommAbort(S) and collCommDestroy(world) return within 5 s; the
 * survivors exit 0 on their own. (Before: a TCP connect to the exited rank
 * was retried for COLL_CONNECT_TIMEOUT_MS, 60 s.) COLL_CASE_QUICK=1 (set for
 * the sanitizer build) runs 6 of the 21 combinations.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helper_fail.h"

enum { VIA_MAILBOX, VIA_SHM, VIA_TCP };
static const char* viaName[] = {"mailbox", "shm rings", "tcp"};

typedef struct {
  int nranks, victim, stop, timeoutSec, via, freshId;
  int idReady;
  collUniqueId id;
  double firstCall[8], afterAbort[8];
  collResult_t code[8];
  char msg[8][512];
} shared;

static void setup(int rank, int nranks, void* arg) {
  (void)rank, (void)nranks;
  shared* sh = arg;
  char v[16];
  snprintf(v, sizeof v, "%d", sh->timeoutSec);
  setenv("COLL_TIMEOUT", v, 1);
  if (sh->via != VIA_MAILBOX) setenv("COLL_MAILBOX_BYTES", "0", 1);
  if (sh->via == VIA_TCP) setenv("COLL_SHM_DISABLE", "1", 1);
}

static int body(int rank, int nranks, void* arg) {
  shared* sh = arg;
  collComm_t world, S;
  if (collCommInitFromEnv(&world, NULL) != collSuccess) {
    fprintf(stderr, "rank %d: init: %s\n", rank, collGetLastError(NULL));
    return 1;
  }
  collResult_t r;
  if (sh->freshId) {
    if (rank == 0) {
      if (collGetUniqueId(&sh->id) != collSuccess) return 1;
      __atomic_store_n(&sh->idReady, 1, __ATOMIC_RELEASE);
    }
    while (!__atomic_load_n(&sh->idReady, __ATOMIC_ACQUIRE)) usleep(1000);
    r = collCommInitRank(&S, nranks, sh->id, rank);
  } else {
    r = collCommSplit(world, 0, rank, &S, NULL);
  }
  if (r != collSuccess) {
    fprintf(stderr, "rank %d: S: %s\n", rank, collGetLastError(NULL));
    return 1;
  }
  float x = 1, y = 0;
  if (collAllReduce(&x, &y, 1, collFloat, collSum, world, NULL) != collSuccess || y != (float)nranks) return 1;
  if (rank == sh->victim) {
    if (sh->stop) raise(SIGSTOP);
    _exit(86);
  }
  double t0 = failNow();
  r = collAllReduce(&x, &y, 1, collFloat, collSum, S, NULL);
  sh->firstCall[rank] = failNow() - t0;
  sh->code[rank] = r;
  snprintf(sh->msg[rank], sizeof sh->msg[rank], "%s", collGetLastError(NULL));
  t0 = failNow();
  collResult_t a = collCommAbort(S), d = collCommDestroy(world);
  sh->afterAbort[rank] = a == collSuccess && d == collSuccess ? failNow() - t0 : 1e9;
  return 0;
}

static int run(shared* sh) {
  collLaunchSpec spec = {.nranks = sh->nranks, .timeoutSec = 60, .body = body, .setup = setup, .arg = sh,
                         .capture = 1};
  collLaunch* L = collLaunchStart(&spec);
  if (!L) return 1;
  double t0 = failNow(), bound = sh->timeoutSec + 10 + 15; /* + init */
  int left;
  do {
    usleep(5000);
    collLaunchPoll(L);
    left = 0;
    for (int k = 0; k < sh->nranks; k++) left += k != sh->victim && collLaunchStatus(L, k) < 0;
  } while (left && failNow() - t0 < bound);
  collLaunchKill(L, sh->victim, SIGKILL);
  collLaunchWait(L, 5);
  int fails = 0;
  for (int k = 0; k < sh->nranks; k++) {
    if (k == sh->victim) continue;
    int ok = collLaunchExitCode(L, k) == 0 && sh->code[k] != collSuccess &&
             sh->firstCall[k] <= sh->timeoutSec + 10 && sh->afterAbort[k] <= 5;
    printf("    rank %d: %s: first call on S %s after %.2f s; abort + destroy %.3f s; \"%s\"\n", k,
           ok ? "ok" : "FAILED", collGetErrorString(sh->code[k]), sh->firstCall[k], sh->afterAbort[k], sh->msg[k]);
    fails += !ok;
  }
  if (fails) collLaunchReport(L);
  collLaunchFree(L);
  return fails;
}

int main(void) {
  /* nranks, victim, stop, timeout, via, freshId */
  static const int cases[][6] = {
      {2, 0, 0, 2, VIA_MAILBOX, 0}, {2, 1, 0, 2, VIA_MAILBOX, 0}, {4, 0, 0, 2, VIA_MAILBOX, 0},
      {4, 3, 0, 2, VIA_MAILBOX, 0}, {2, 0, 0, 2, VIA_SHM, 0},     {2, 1, 0, 2, VIA_SHM, 0},
      {4, 0, 0, 2, VIA_SHM, 0},     {4, 3, 0, 2, VIA_SHM, 0},     {2, 0, 0, 2, VIA_TCP, 0},
      {2, 1, 0, 2, VIA_TCP, 0},     {4, 0, 0, 2, VIA_TCP, 0},     {4, 3, 0, 2, VIA_TCP, 0},
      {2, 0, 0, 10, VIA_SHM, 0},    {2, 1, 0, 10, VIA_TCP, 0},    {4, 0, 0, 2, VIA_TCP, 1},
      {4, 3, 0, 2, VIA_SHM, 1},     {2, 0, 1, 2, VIA_SHM, 0},     {2, 1, 1, 2, VIA_SHM, 0},
      {2, 0, 1, 2, VIA_TCP, 0},     {4, 3, 1, 2, VIA_TCP, 0},     {2, 1, 1, 10, VIA_TCP, 0},
  };
  /* COLL_CASE_QUICK (the sanitizer build): both roles, shm and tcp, exit and stop */
  static const int quick[] = {5, 8, 10, 14, 16, 19};
  int isQuick = getenv("COLL_CASE_QUICK") != NULL;
  size_t ncases = isQuick ? sizeof quick / sizeof quick[0] : sizeof cases / sizeof cases[0];
  shared* sh = failShared(sizeof *sh);
  int fails = 0;
  for (size_t i = 0; i < ncases; i++) {
    size_t c = isQuick ? (size_t)quick[i] : i;
    memset(sh, 0, sizeof *sh);
    sh->nranks = cases[c][0];
    sh->victim = cases[c][1];
    sh->stop = cases[c][2];
    sh->timeoutSec = cases[c][3];
    sh->via = cases[c][4];
    sh->freshId = cases[c][5];
    printf("%d ranks, victim %d %s, timeout %d s, %s, S from %s\n", sh->nranks, sh->victim,
           sh->stop ? "stops" : "exits", sh->timeoutSec, viaName[sh->via], sh->freshId ? "a fresh id" : "a split");
    fflush(stdout);
    fails += run(sh);
  }
  printf("%s\n", fails ? "FAILED" : "PASSED");
  return fails ? 1 : 0;
}
