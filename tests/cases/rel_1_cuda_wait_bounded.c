/*
 * rel_1_cuda_wait_bounded.c - reliability review, point 1: every wait of a
 * device call for the GPU is bounded. On the fake CUDA driver, a stream
 * operation that never completes (FAKECUDA_HANG, set per mode by the
 * .cmake) stands for a hung kernel or a wedged GPU. One rank, one process;
 * every mode runs under a 60 s alarm, so a wait without a deadline fails
 * the test (SIGALRM) instead of hanging it.
 *
 * Modes (argv[1]; none: staged):
 *  staged   the first staging copy never completes: a blocking all-reduce
 *           of 1000 int32 on device buffers with a 300 ms call timeout
 *           returns collTimeout naming that copy; the communicator has
 *           failed (collCommGetAsyncError), and collCommDestroy returns
 *           (it does not free the staging, which would wait for the GPU).
 *  piped    the same for an all-reduce larger than COLL_CUDA_STAGE_CHUNK
 *           (copied piece by piece): the wait for the first piece's copy.
 *  piped_ag the same for an all-gather of that size whose third copy (the
 *           first piece's result) never completes: the wait for the third
 *           piece's copy in, queued behind it.
 *  legacy   the caller's own work on the legacy default stream never
 *           completes: the blocking call's wait for it is collTimeout.
 *  abort    the staging copy never completes and the call has no deadline
 *           (COLL_TIMEOUT=0): collCommAbort from another thread after
 *           200 ms ends the call with the abort's error.
 *  backoff  the caller's work on its CUDA stream never completes: a call on
 *           collStreamCreateCuda's stream waits for it on the progress
 *           thread for its 1.5 s timeout, polling the event at most 2000
 *           times (backoff to 1 ms; a poll every 50 us is 30000).
 * Without a usable driver every mode skips (77).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"
#include "helper_i16_dev.h"

#include "helper_check.h"

#ifdef COLL_HAVE_CUDA
static int fails;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int says(const char* s) { return strstr(collGetLastError(NULL), s) != NULL; }

static collComm_t comm;

static void* aborter(void* arg) {
  (void)arg;
  usleep(200000);
  collCommAbort(comm);
  return NULL;
}

/* The comm failed with want and its destroy returns. */
static void expectFailedComm(collResult_t want) {
  collResult_t a = collSuccess;
  CHECK(collCommGetAsyncError(comm, &a) == collSuccess && a == want, "async error %d, expected %d", (int)a, (int)want);
  int x = 1, y = 0;
  CHECK(collAllReduce(&x, &y, 1, collInt32, collSum, comm, NULL) == want, "a later call: %s", collGetLastError(NULL));
  double t0 = now();
  CHECK(collCommDestroy(comm) == collSuccess, "destroy: %s", collGetLastError(NULL));
  printf("collCommDestroy took %.3f s\n", now() - t0);
}

static int run(const char* mode) {
  collUniqueId id;
  if (collGetUniqueId(&id) != collSuccess || collCommInitRank(&comm, 1, id, 0) != collSuccess) {
    fprintf(stderr, "init: %s\n", collGetLastError(NULL));
    return 1;
  }
  int piped = strcmp(mode, "piped") == 0 || strcmp(mode, "piped_ag") == 0;
  size_t count = piped ? 1 << 20 : 1000; /* piped: 4 MiB, COLL_CUDA_STAGE_CHUNK is 64 KiB */
  int32_t* host = calloc(count, sizeof *host);
  void* dsend = devAlloc(count * 4);
  void* drecv = devAlloc(count * 4);
  for (size_t i = 0; i < count; i++) host[i] = (int32_t)i;
  devCopy(dsend, host, count * 4); /* cuMemcpy: not the hung entry */
  double t0 = now();
  collResult_t r;
  if (strcmp(mode, "staged") == 0 || piped || strcmp(mode, "legacy") == 0) {
    if (strcmp(mode, "legacy") == 0) /* the caller's work before the call: never completes */
      CHECK(COLL_CU(cuMemsetD8Async)((CUdeviceptr)(uintptr_t)drecv, 0, 4, NULL) == CUDA_SUCCESS, "memset");
    CHECK(collCommSetCallTimeout(comm, 300) == collSuccess, "call timeout");
    r = strcmp(mode, "piped_ag") == 0 ? collAllGather(dsend, drecv, count, collInt32, comm, NULL)
                                      : collAllReduce(dsend, drecv, count, collInt32, collSum, comm, NULL);
    double dt = now() - t0;
    const char* what = strcmp(mode, "staged") == 0 ? "rank 0: the copies of the call's device inputs to host staging "
                                                      "did not finish within 0.3 s (the call's timeout)"
                       : piped ? "rank 0: the copy of a device input piece to host staging did "
                                                      "not finish within 0.3 s (the call's timeout)"
                                                    : "rank 0: the work enqueued before this call on the legacy "
                                                      "default stream did not finish within 0.3 s (the call's "
                                                      "timeout)";
    printf("%s: returned %d after %.3f s: %s\n", mode, (int)r, dt, collGetLastError(NULL));
    CHECK(r == collTimeout, "returned %d, expected collTimeout", (int)r);
    CHECK(says(what), "message \"%s\" lacks \"%s\"", collGetLastError(NULL), what);
    CHECK(dt >= 0.29 && dt < 30, "returned after %.3f s", dt);
    expectFailedComm(collTimeout);
  } else if (strcmp(mode, "abort") == 0) {
    pthread_t t;
    pthread_create(&t, NULL, aborter, NULL);
    r = collAllReduce(dsend, drecv, count, collInt32, collSum, comm, NULL);
    double dt = now() - t0;
    pthread_join(t, NULL);
    printf("abort: returned %d after %.3f s: %s\n", (int)r, dt, collGetLastError(NULL));
    CHECK(r == collRemoteError, "returned %d, expected the abort's collRemoteError", (int)r);
    CHECK(says("rank 0: waiting for the copies of the call's device inputs to host staging: communicator failed "
               "earlier: collCommAbort was called"),
          "message");
    CHECK(dt >= 0.19 && dt < 30, "returned after %.3f s", dt);
  } else if (strcmp(mode, "backoff") == 0) {
    const char* lib = getenv("COLL_CUDA_LIBRARY");
    void* h = lib ? dlopen(lib, RTLD_NOW | RTLD_NOLOAD) : NULL; /* loaded by coll already */
    long (*polls)(void) = NULL;
    if (h) *(void**)&polls = dlsym(h, "fakecudaPolls");
    if (!polls) {
      printf("SKIP: the driver is not the fake (no fakecudaPolls)\n");
      return DEV_SKIP;
    }
    CUstream us = devStream();
    collStream_t s = NULL;
    CHECK(collStreamCreateCuda(comm, us, &s) == collSuccess, "collStreamCreateCuda: %s", collGetLastError(NULL));
    CHECK(COLL_CU(cuMemsetD8Async)((CUdeviceptr)(uintptr_t)drecv, 0, 4, us) == CUDA_SUCCESS, "memset");
    CHECK(collCommSetCallTimeout(comm, 1500) == collSuccess, "call timeout");
    long p0 = polls();
    r = collAllReduce(dsend, drecv, count, collInt32, collSum, comm, s);
    CHECK(r == collSuccess, "issue: %s", collGetLastError(NULL));
    r = collStreamSynchronize(s);
    double dt = now() - t0;
    long n = polls() - p0;
    printf("backoff: collStreamSynchronize returned %d after %.3f s, %ld polls of the GPU: %s\n", (int)r, dt, n,
           collGetLastError(NULL));
    CHECK(r == collTimeout, "returned %d, expected collTimeout", (int)r);
    CHECK(says("rank 0: the work enqueued before this call on its CUDA stream did not finish within 1.5 s"),
          "message");
    CHECK(dt >= 1.49 && dt < 30, "returned after %.3f s", dt);
    CHECK(n <= 2000, "%ld polls in %.3f s: the wait does not back off", n, dt);
    collStreamDestroy(s);
    expectFailedComm(collTimeout);
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  free(host);
  return fails ? 1 : 0;
}
#endif

int main(int argc, char** argv) {
  alarm(60); /* a wait without a deadline: killed, the test fails */
  if (!devSetup(0)) return DEV_SKIP;
#ifdef COLL_HAVE_CUDA
  int rc = run(argc > 1 ? argv[1] : "staged");
  printf("%s\n", rc == 0 ? "PASS" : rc == DEV_SKIP ? "SKIP" : "FAIL");
  return rc;
#else
  (void)argc, (void)argv;
  printf("SKIP: built without CUDA\n");
  return DEV_SKIP;
#endif
}
