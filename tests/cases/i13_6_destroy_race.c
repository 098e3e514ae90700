/*
 * i13_6_destroy_race - issue 13 point 6: collCommDestroy while another
 * thread is inside a call on that communicator, and two threads issuing on
 * one communicator at once.
 *
 * The rule (include/coll.h): destroy never frees under a call in flight. A
 * call that another thread is inside when destroy begins fails with
 * collInvalidUsage ("collCommDestroy was called on another thread while this
 * call ... was in flight"); destroy returns once it left. A second thread
 * that issues while one is inside a call is refused with collInvalidUsage
 * ("another thread ... is inside ..."), and the first call goes on.
 *
 * 2 ranks started as torchrun starts them, COLL_TIMEOUT 20 s:
 *  A) rank 0: a thread blocks in an all-reduce rank 1 never joins; the main
 *     thread destroys the communicator: destroy returns collSuccess within
 *     2 s, the all-reduce returns collInvalidUsage naming collCommDestroy
 *     within 2 s. Same with the thread in collStreamSynchronize of a queued
 *     all-reduce; the stream is destroyed afterwards (collSuccess).
 *     (Before: a heap-use-after-free in collEngineRecvConn under ASan.)
 *  B) rank 0: a thread blocks in an all-reduce that rank 1 joins 1 s later;
 *     meanwhile the main thread calls collBroadcast: refused within 1 s with
 *     collInvalidUsage naming the other call; the all-reduce then gives the
 *     right sum, and a next all-reduce on both ranks too.
 *     (Before: the broadcast ran concurrently and hung until the timeout.)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helper_fail.h"

#define N 4096

typedef struct {
  int phase[2]; /* rank 1 waits for rank 0's scenario to finish */
  int fails[2];
} shared;

typedef struct {
  collComm_t comm;
  collStream_t stream; /* NULL: blocking all-reduce; else synchronize it */
  float* in;
  float* out;
  collResult_t r;
  char msg[1024];
  double took;
} callArg;

static void* caller(void* p) {
  callArg* a = p;
  double t0 = failNow();
  a->r = a->stream ? collStreamSynchronize(a->stream)
                   : collAllReduce(a->in, a->out, N, collFloat, collSum, a->comm, NULL);
  snprintf(a->msg, sizeof a->msg, "%s", collGetLastError(NULL));
  a->took = failNow() - t0;
  return NULL;
}

static int check(int ok, const char* what) {
  printf("  %s: %s\n", ok ? "ok" : "FAILED", what);
  return !ok;
}

static int initComm(collComm_t* comm) {
  collResult_t r = collCommInitFromEnv(comm, NULL);
  if (r != collSuccess) fprintf(stderr, "init: %s\n", collGetLastError(NULL));
  return r != collSuccess;
}

/* A: destroy while a call is in flight on another thread. */
static int destroyRace(int rank, shared* sh, int viaStream) {
  collComm_t comm;
  if (initComm(&comm)) return 1;
  static float in[N], out[N];
  int fails = 0;
  if (rank == 1) { /* never joins; waits for rank 0 to finish */
    while (!__atomic_load_n(&sh->phase[0], __ATOMIC_ACQUIRE)) usleep(1000);
    collCommDestroy(comm);
    return 0;
  }
  callArg a = {comm, NULL, in, out, collSuccess, "", 0};
  if (viaStream) {
    fails += check(collStreamCreate(comm, &a.stream) == collSuccess, "stream created");
    fails += check(collAllReduce(in, out, N, collFloat, collSum, comm, a.stream) == collSuccess, "all-reduce queued");
  }
  pthread_t th;
  pthread_create(&th, NULL, caller, &a);
  usleep(300 * 1000);
  double t0 = failNow();
  collResult_t d = collCommDestroy(comm);
  double took = failNow() - t0;
  pthread_join(th, NULL);
  printf("  destroy: %s after %.3f s; the call in flight: %s after %.3f s: %s\n", collGetErrorString(d), took,
         collGetErrorString(a.r), a.took, a.msg);
  fails += check(d == collSuccess && took < 2.0, "destroy returned collSuccess within 2 s");
  fails += check(a.r == collInvalidUsage && strstr(a.msg, "collCommDestroy") && a.took < 2.5,
                 "the call in flight failed with collInvalidUsage naming collCommDestroy");
  if (viaStream) fails += check(collStreamDestroy(a.stream) == collSuccess, "orphaned stream destroyed");
  fails += check(collAllReduce(in, out, N, collFloat, collSum, comm, NULL) == collInvalidUsage,
                 "the destroyed communicator is refused afterwards");
  __atomic_store_n(&sh->phase[0], 1, __ATOMIC_RELEASE);
  return fails;
}

/* B: a second issuing thread is refused, the first call completes. */
static int twoThreads(int rank, shared* sh) {
  collComm_t comm;
  if (initComm(&comm)) return 1;
  static float in[N], out[N];
  for (int i = 0; i < N; i++) in[i] = (float)(rank + 1);
  int fails = 0;
  if (rank == 1) {
    usleep(1000 * 1000);
    fails += check(collAllReduce(in, out, N, collFloat, collSum, comm, NULL) == collSuccess && out[0] == 3.0f &&
                   out[N - 1] == 3.0f, "rank 1: first all-reduce = 3");
  } else {
    callArg a = {comm, NULL, in, out, collSuccess, "", 0};
    pthread_t th;
    pthread_create(&th, NULL, caller, &a);
    usleep(200 * 1000);
    float x = 0;
    double t0 = failNow();
    collResult_t r = collBroadcast(&x, &x, 1, collFloat, 0, comm, NULL);
    double took = failNow() - t0;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", collGetLastError(NULL));
    pthread_join(th, NULL);
    printf("  second thread: %s after %.3f s: %s\n", collGetErrorString(r), took, msg);
    fails += check(r == collInvalidUsage && took < 1.0 && strstr(msg, "another thread") && strstr(msg, "collAllReduce"),
                   "the second thread's broadcast was refused at once, naming the other call");
    fails += check(a.r == collSuccess && out[0] == 3.0f && out[N - 1] == 3.0f, "rank 0: first all-reduce = 3");
  }
  for (int i = 0; i < N; i++) in[i] = (float)(10 * (rank + 1));
  fails += check(collAllReduce(in, out, N, collFloat, collSum, comm, NULL) == collSuccess && out[0] == 30.0f &&
                 out[N - 1] == 30.0f, "next all-reduce = 30");
  fails += check(collCommDestroy(comm) == collSuccess, "destroy");
  (void)sh;
  return fails;
}

static int scenario;

static int body(int rank, int nranks, void* arg) {
  (void)nranks;
  shared* sh = arg;
  int f = scenario == 2 ? twoThreads(rank, sh) : destroyRace(rank, sh, scenario == 1);
  sh->fails[rank] = f;
  return f ? 1 : 0;
}

static void setup(int rank, int nranks, void* arg) {
  (void)rank, (void)nranks, (void)arg;
  setenv("COLL_TIMEOUT", "20", 1);
}

int main(void) {
  static const char* names[] = {"A: destroy during a blocking all-reduce", "A: destroy during collStreamSynchronize",
                                "B: two threads issue at once"};
  shared* sh = failShared(sizeof *sh);
  int fails = 0;
  for (scenario = 0; scenario < 3; scenario++) {
    memset(sh, 0, sizeof *sh);
    printf("%s\n", names[scenario]);
    collLaunchSpec spec = {.nranks = 2, .timeoutSec = 40, .body = body, .setup = setup, .arg = sh};
    int bad = collLaunchRun(&spec);
    if (bad) printf("  FAILED: %d rank(s) failed\n", bad);
    fails += bad;
  }
  printf("%s\n", fails ? "FAILED" : "PASSED");
  return fails ? 1 : 0;
}
