/*
 * i19_progress_thread_errno.c - issue 19 "Messages": when the progress
 * thread that runs a communicator's stream operations cannot be started,
 * the error said only "cannot start the progress thread": neither why
 * (pthread_create's error) nor what to do about it.
 *
 * Every new thread of this process is given an impossible stack size
 * (pthread_setattr_default_np), so the first call on a stream, which starts
 * the progress thread, fails the way it fails at a thread or memory limit
 * (glibc: EAGAIN). The call must return collSystemError naming
 * pthread_create's error and the limits, and leave the communicator usable:
 * with the default restored, the next call on the stream starts the thread
 * and succeeds.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "coll.h"

static int fails;

static void expect(const char* what, int cond) {
  printf("%-60s %s\n", what, cond ? "ok" : "FAILED");
  if (!cond) fails++;
}

int main(void) {
  collUniqueId id;
  collComm_t comm = NULL;
  collStream_t s = NULL;
  if (collGetUniqueId(&id) != collSuccess || collCommInitRank(&comm, 1, id, 0) != collSuccess ||
      collStreamCreate(comm, &s) != collSuccess) {
    printf("setup failed: %s\n", collGetLastError(NULL));
    return 1;
  }
  pthread_attr_t saved, huge;
  if (pthread_getattr_default_np(&saved) != 0 || pthread_attr_init(&huge) != 0 ||
      pthread_attr_setstacksize(&huge, (size_t)1 << 60) != 0 || pthread_setattr_default_np(&huge) != 0) {
    printf("cannot set the default thread attributes\n");
    return 1;
  }
  float x = 1, y = 0;
  collResult_t r = collAllReduce(&x, &y, 1, collFloat, collSum, comm, s);
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", collGetLastError(comm));
  pthread_setattr_default_np(&saved);
  printf("collAllReduce on a stream: %s: \"%s\"\n", collGetErrorString(r), msg);
  char want[128];
  snprintf(want, sizeof want, "pthread_create: %s", strerror(EAGAIN));
  expect("the call fails with collSystemError", r == collSystemError);
  expect("the message says it is the progress thread", strstr(msg, "progress thread") != NULL);
  expect("the message has pthread_create's error (EAGAIN)", strstr(msg, want) != NULL);
  expect("the message names the limits and the blocking way out",
         strstr(msg, "ulimit -u") && strstr(msg, "pids.max") && strstr(msg, "NULL stream"));
  r = collAllReduce(&x, &y, 1, collFloat, collSum, comm, s);
  expect("with the default restored, the next call on the stream works",
         r == collSuccess && collStreamSynchronize(s) == collSuccess && y == 1.0f);
  expect("destroy", collStreamDestroy(s) == collSuccess && collCommDestroy(comm) == collSuccess);
  pthread_attr_destroy(&huge);
  pthread_attr_destroy(&saved);
  printf("%s\n", fails ? "FAILED" : "passed");
  return fails != 0;
}
