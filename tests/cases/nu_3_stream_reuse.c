/*
 * nu_3_stream_reuse.c - new user's finding 3: a destroyed stream used again
 * is a specific collInvalidUsage ("stream 0x... was already destroyed") on
 * every entry point, and the library does not read the freed stream (the
 * ASan build of this test fails on any such read). Before the fix:
 * "collAllReduce: stream belongs to another communicator" and
 * "collStreamSynchronize: the stream's communicator was destroyed", each a
 * read of freed memory.
 * Also: a stream of another live communicator still says so, and a stream
 * whose communicator was destroyed is still just freed.
 */
#include <stdio.h>
#include <string.h>

#include "coll.h"

static int fails;

static void expect(const char* what, int cond) {
  printf("%-64s %s\n", what, cond ? "ok" : "FAILED");
  if (!cond) {
    printf("  collGetLastError: \"%s\"\n", collGetLastError(NULL));
    fails++;
  }
}

static int says(const char* s) { return strstr(collGetLastError(NULL), s) != NULL; }

static int newComm(collComm_t* c) {
  collUniqueId id;
  return collGetUniqueId(&id) == collSuccess && collCommInitRank(c, 1, id, 0) == collSuccess;
}

int main(void) {
  collComm_t c = NULL, d = NULL;
  if (!newComm(&c) || !newComm(&d)) {
    printf("init: %s\n", collGetLastError(NULL));
    return 1;
  }
  collStream_t s = NULL, t = NULL, keep = NULL;
  expect("collStreamCreate", collStreamCreate(c, &s) == collSuccess);
  expect("collStreamCreate (a second, live stream)", collStreamCreate(c, &keep) == collSuccess);
  expect("collStreamDestroy", collStreamDestroy(s) == collSuccess);
  char want[64];
  snprintf(want, sizeof want, "stream %p was already destroyed", (void*)s);
  float x = 1, y = 0;
  expect("collAllReduce on the destroyed stream: collInvalidUsage",
         collAllReduce(&x, &y, 1, collFloat, collSum, c, s) == collInvalidUsage && says("collAllReduce") &&
             says(want));
  expect("collSend on the destroyed stream: collInvalidUsage",
         collSend(&x, 1, collFloat, 0, c, s) == collInvalidUsage && says(want));
  expect("collStreamSynchronize on the destroyed stream: collInvalidUsage",
         collStreamSynchronize(s) == collInvalidUsage && says("collStreamSynchronize") && says(want));
  expect("collStreamQuery on the destroyed stream: collInvalidUsage",
         collStreamQuery(s) == collInvalidUsage && says(want));
  expect("collStreamDestroy twice: collInvalidUsage", collStreamDestroy(s) == collInvalidUsage && says("already destroyed"));
  expect("the communicator is not failed by it",
         collAllReduce(&x, &y, 1, collFloat, collSum, c, keep) == collSuccess && collStreamSynchronize(keep) == collSuccess &&
             y == 1.0f);

  expect("collStreamCreate on another communicator", collStreamCreate(d, &t) == collSuccess);
  expect("a stream of another communicator: collInvalidUsage naming it",
         collAllReduce(&x, &y, 1, collFloat, collSum, c, t) == collInvalidUsage && says("another communicator"));
  expect("collCommDestroy(d)", collCommDestroy(d) == collSuccess);
  expect("a stream whose communicator was destroyed: synchronize says so",
         collStreamSynchronize(t) == collInvalidUsage && says("communicator was destroyed"));
  expect("a stream whose communicator was destroyed is just freed", collStreamDestroy(t) == collSuccess);
  expect("collStreamDestroy(keep)", collStreamDestroy(keep) == collSuccess);
  expect("collCommDestroy(c)", collCommDestroy(c) == collSuccess);
  printf("%d failed\n", fails);
  return fails != 0;
}
