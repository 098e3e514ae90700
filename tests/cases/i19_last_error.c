/*
 * i19_last_error.c - issue 19 "Messages": after a call that succeeds,
 * collGetLastError no longer returns the failure of an earlier call.
 * ncclGetLastError keeps the last WARN of the thread until another one
 * replaces it; coll's message describes the last call of this thread only
 * (empty after a success or collInProgress). A failure whose cleanup calls
 * other public functions internally keeps its own message; a failure that
 * collCommGetAsyncError reports is the message then.
 * Before the fix each "after success" check below saw the old message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll.h"

static int fails;

static void expect(const char* what, int cond) {
  printf("%-66s %s\n", what, cond ? "ok" : "FAILED");
  if (!cond) {
    printf("  collGetLastError: \"%s\"\n", collGetLastError(NULL));
    fails++;
  }
}

static int empty(void) { return collGetLastError(NULL)[0] == 0; }
static int says(const char* s) { return strstr(collGetLastError(NULL), s) != NULL; }

int main(void) {
  unsetenv("COLL_TUNER_PLUGIN");
  int v = 0;
  expect("collGetVersion(NULL) fails and says why", collGetVersion(NULL) == collInvalidArgument && says("version"));
  expect("collGetVersion(&v) succeeds: message empty", collGetVersion(&v) == collSuccess && empty());

  collUniqueId id;
  memset(&id, 0, sizeof id);
  collComm_t c = NULL;
  expect("collCommInitRank(nranks 0) fails and says why",
         collCommInitRank(&c, 0, id, 0) == collInvalidArgument && says("nranks 0"));
  expect("collGetUniqueId succeeds: message empty", collGetUniqueId(&id) == collSuccess && empty());
  expect("collCommInitRank(bad rank) fails", collCommInitRank(&c, 1, id, 5) == collInvalidArgument && says("rank 5"));
  expect("collCommInitRank succeeds: message empty", collCommInitRank(&c, 1, id, 0) == collSuccess && empty());

  int n = 0;
  expect("collCommCount(NULL count) fails", collCommCount(c, NULL) == collInvalidArgument && says("count is NULL"));
  expect("collCommCount succeeds: message empty", collCommCount(c, &n) == collSuccess && n == 1 && empty());

  float x = 1, y = 0;
  expect("collAllReduce(bad type) fails",
         collAllReduce(&x, &y, 1, (collDataType_t)99, collSum, c, NULL) == collInvalidArgument);
  collStream_t s = NULL;
  expect("collStreamCreate succeeds: message empty", collStreamCreate(c, &s) == collSuccess && empty());
  expect("collBroadcast(root 3) fails", collBroadcast(&x, &y, 1, collFloat, 3, c, s) == collInvalidArgument);
  expect("collAllReduce on the stream succeeds: message empty",
         collAllReduce(&x, &y, 1, collFloat, collSum, c, s) == collSuccess && empty());
  expect("collStreamSynchronize succeeds: message empty", collStreamSynchronize(s) == collSuccess && empty());
  expect("collStreamDestroy(s) succeeds", collStreamDestroy(s) == collSuccess && y == 1.0f && empty());

  expect("collGroupEnd without collGroupStart fails", collGroupEnd() != collSuccess && !empty());
  expect("collGroupStart succeeds: message empty", collGroupStart() == collSuccess && empty());
  expect("collGroupEnd succeeds: message empty", collGroupEnd() == collSuccess && empty());

  collResult_t async = collInternalError;
  expect("collCommGetAsyncError(NULL) fails", collCommGetAsyncError(c, NULL) == collInvalidArgument);
  expect("collCommGetAsyncError succeeds: message empty",
         collCommGetAsyncError(c, &async) == collSuccess && async == collSuccess && empty());

  /* collCommInitAll fails on every rank and aborts the others itself: its
   * own message survives the internal collCommAbort calls */
  setenv("COLL_TUNER_PLUGIN", "/nonexistent/coll-tuner.so", 1);
  collComm_t two[2] = {NULL, NULL};
  expect("collCommInitAll with a missing plugin keeps its message",
         collCommInitAll(two, 2, NULL) == collInvalidArgument && says("collCommInitAll: rank") &&
             says("COLL_TUNER_PLUGIN=/nonexistent/coll-tuner.so cannot be loaded"));
  unsetenv("COLL_TUNER_PLUGIN");

  /* non-blocking init: collInProgress is not a failure */
  collConfig_t cfg = COLL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  collComm_t nb = NULL;
  expect("collCommDestroy(twice-destroyed handle) fails", collCommDestroy(c) == collSuccess &&
                                                            collCommDestroy(c) == collInvalidUsage && !empty());
  collGetUniqueId(&id);
  collResult_t r = collCommInitRankConfig(&nb, 1, id, 0, &cfg);
  expect("non-blocking init returns collInProgress or success: message empty",
         (r == collInProgress || r == collSuccess) && empty());
  for (int i = 0; i < 30000 && collCommGetAsyncError(nb, &async) == collSuccess && async == collInProgress; i++)
    nanosleep(&(struct timespec){0, 1000000}, NULL); /* up to 30 s */
  expect("non-blocking init completes", async == collSuccess);
  expect("collCommDestroy succeeds: message empty", collCommDestroy(nb) == collSuccess && empty());

  /* a non-blocking init that fails: collCommGetAsyncError reports it, and
   * the message is that failure's (it happened on the init thread) */
  setenv("COLL_TUNER_PLUGIN", "/nonexistent/coll-tuner.so", 1);
  collGetUniqueId(&id);
  r = collCommInitRankConfig(&nb, 1, id, 0, &cfg);
  async = collInProgress;
  for (int i = 0; i < 30000 && collCommGetAsyncError(nb, &async) == collSuccess && async == collInProgress; i++)
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  expect("failed non-blocking init: collCommGetAsyncError names the failure",
         r == collInProgress && async == collInvalidArgument && says("COLL_TUNER_PLUGIN=/nonexistent/coll-tuner.so"));
  unsetenv("COLL_TUNER_PLUGIN");
  expect("collCommDestroy of the failed communicator succeeds: message empty",
         collCommDestroy(nb) == collSuccess && empty());

  printf("i19_last_error: %d failed\n", fails);
  return fails ? 1 : 0;
}
