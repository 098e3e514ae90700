/*
 * i16_device_streams.c - issue 16: NCCL's stream semantics for calls on
 * device buffers (collStreamCreateCuda), and their error paths.
 *
 * Modes (argv[1]), each on 2 ranks as processes:
 *  semantics  with every fake stream operation delayed (FAKECUDA_DELAY_US,
 *             set by the .cmake): an all-reduce issued on a CUDA stream right
 *             after a delayed copy of its input returns while that copy is
 *             not done (the host is not blocked); a copy enqueued after it on
 *             the same stream sees the result; a group spanning two CUDA
 *             streams of one comm waits for the inputs of both and both
 *             streams see its results; stream NULL waits for the legacy
 *             default stream and returns with the result in device memory;
 *             collStreamQuery/Synchronize report completion.
 *  gpu        (FAKECUDA_DEVICES=2) the comm runs on GPU 0: a buffer of GPU 1,
 *             or a CUDA stream made while GPU 1 is current, is
 *             collInvalidArgument naming both GPUs; nothing runs.
 *  cudafail   rank 1's first staging copy fails (FAKECUDA_FAIL): both ranks'
 *             calls fail, the comm fails on both, and both CUDA streams are
 *             released (cuStreamSynchronize returns) in bounded time.
 *  deadpeer   rank 1 exits after init: rank 0's call on a CUDA stream fails
 *             in bounded time and its stream is released.
 *  nodriver   (COLL_CUDA_LIBRARY names no library) collStreamCreateCuda is
 *             collSystemError saying why, NULL arguments collInvalidArgument;
 *             host calls work.
 * Without a usable driver every mode but nodriver skips (77).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../integration/mp_harness.h"
#include "coll.h"
#include "helper_i16_dev.h"

#define CHECK(cond, ...)                                 \
  do {                                                   \
    if (!(cond)) {                                       \
      fprintf(stderr, "rank %d: ", rank);                \
      fprintf(stderr, __VA_ARGS__);                      \
      fprintf(stderr, " (line %d)\n", __LINE__);         \
      fails++;                                           \
    }                                                    \
  } while (0)

static int nodriver(collComm_t comm, int rank, int n, void* arg) {
  (void)n, (void)arg;
  int fails = 0;
  collStream_t s = (collStream_t)1;
  collResult_t r = collStreamCreateCuda(comm, NULL, &s);
  const char* m = collGetLastError(NULL);
  CHECK(r == collSystemError || r == collInvalidUsage, "collStreamCreateCuda without a driver returned %d: %s", (int)r,
        m);
  CHECK(s == NULL, "stream not cleared on failure");
  CHECK(strncmp(m, "collStreamCreateCuda: CUDA: ", 28) == 0, "message: %s", m);
  r = collStreamCreateCuda(comm, NULL, NULL);
  CHECK(r == collInvalidArgument && strstr(collGetLastError(NULL), "stream is NULL"), "NULL stream: %d %s", (int)r,
        collGetLastError(NULL));
  r = collStreamCreateCuda(NULL, NULL, &s);
  CHECK(r == collInvalidArgument || r == collInvalidUsage, "NULL comm: %d %s", (int)r, collGetLastError(NULL));
  int a = rank + 1, b = 0;
  r = collAllReduce(&a, &b, 1, collInt32, collSum, comm, NULL);
  CHECK(r == collSuccess && b == 3, "host all-reduce: %d, %d", (int)r, b);
  return fails;
}

#ifdef COLL_HAVE_CUDA

enum { COUNT = 4096 };

static void expectSum(int rank, int* fails, const int32_t* got, int n, int seed, const char* what) {
  for (int i = 0; i < COUNT; i++) {
    int32_t want = 0;
    for (int r = 0; r < n; r++) want += r * 1000 + i % 97 + seed;
    if (got[i] != want) {
      fprintf(stderr, "rank %d: %s: element %d is %d, expected %d\n", rank, what, i, got[i], want);
      (*fails)++;
      return;
    }
  }
}

static void input(int32_t* h, int rank, int seed) {
  for (int i = 0; i < COUNT; i++) h[i] = rank * 1000 + i % 97 + seed;
}

static int semantics(collComm_t comm, int rank, int n, void* arg) {
  (void)arg;
  int fails = 0;
  if (!devSetup(0)) return 1;
  size_t bytes = COUNT * sizeof(int32_t);
  int32_t *hin = malloc(bytes), *hout = malloc(bytes), *junk = malloc(bytes);
  memset(junk, 0x5a, bytes);
  int32_t *dsend = devAlloc(bytes), *drecv = devAlloc(bytes), *d2 = devAlloc(bytes), *d3 = devAlloc(bytes);
  CUstream us = devStream(), us2 = devStream();
  collStream_t cs, cs2;
  CHECK(collStreamCreateCuda(comm, us, &cs) == collSuccess, "collStreamCreateCuda: %s", collGetLastError(NULL));
  CHECK(collStreamCreateCuda(comm, us2, &cs2) == collSuccess, "collStreamCreateCuda: %s", collGetLastError(NULL));
  CUevent ev;
  CHECK(COLL_CU(cuEventCreate)(&ev, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS, "cuEventCreate");

  /* 1. the call returns before its (delayed) input is ready; a later copy sees the result */
  input(hin, rank, 1);
  devCopy(drecv, junk, bytes);
  devCopyAsync(dsend, hin, bytes, us);
  COLL_CU(cuEventRecord)(ev, us);
  collResult_t r = collAllReduce(dsend, drecv, COUNT, collInt32, collSum, comm, cs);
  CUresult q = COLL_CU(cuEventQuery)(ev);
  CHECK(r == collSuccess, "all-reduce on a CUDA stream: %s", collGetLastError(NULL));
  CHECK(q == CUDA_ERROR_NOT_READY, "the call returned only after its input was ready (cuEventQuery %d): it blocked",
        (int)q);
  memset(hout, 0, bytes);
  devCopyAsync(hout, drecv, bytes, us);
  CHECK(COLL_CU(cuStreamSynchronize)(us) == CUDA_SUCCESS, "cuStreamSynchronize");
  expectSum(rank, &fails, hout, n, 1, "a copy after the call on its stream");
  CHECK(collStreamSynchronize(cs) == collSuccess, "collStreamSynchronize: %s", collGetLastError(NULL));
  CHECK(collStreamQuery(cs) == collSuccess, "collStreamQuery after synchronize");

  /* 2. a group over two CUDA streams: the all-reduce's input comes on us, the broadcast's on us2 */
  input(hin, rank, 2);
  devCopy(drecv, junk, bytes);
  devCopy(d3, junk, bytes);
  devCopyAsync(dsend, hin, bytes, us);
  int32_t* bc = malloc(bytes);
  for (int i = 0; i < COUNT; i++) bc[i] = rank == 0 ? 7 * i : -1;
  devCopyAsync(d2, bc, bytes, us2);
  collGroupStart();
  collAllReduce(dsend, drecv, COUNT, collInt32, collSum, comm, cs);
  collBroadcast(d2, d3, COUNT, collInt32, 0, comm, cs2);
  r = collGroupEnd();
  CHECK(r == collSuccess, "group over two CUDA streams: %s", collGetLastError(NULL));
  memset(hout, 0, bytes);
  devCopyAsync(hout, drecv, bytes, us);
  int32_t* hb = calloc(COUNT, sizeof *hb);
  devCopyAsync(hb, d3, bytes, us2);
  CHECK(COLL_CU(cuStreamSynchronize)(us) == CUDA_SUCCESS && COLL_CU(cuStreamSynchronize)(us2) == CUDA_SUCCESS,
        "cuStreamSynchronize");
  expectSum(rank, &fails, hout, n, 2, "group: all-reduce seen on its stream");
  for (int i = 0; i < COUNT; i++)
    if (hb[i] != 7 * i) {
      CHECK(0, "group: broadcast element %d is %d, expected %d on the second stream", i, hb[i], 7 * i);
      break;
    }
  CHECK(collStreamSynchronize(cs) == collSuccess && collStreamSynchronize(cs2) == collSuccess,
        "collStreamSynchronize after the group: %s", collGetLastError(NULL));

  /* 3. stream NULL: ordered after the legacy default stream, returns when done */
  input(hin, rank, 3);
  devCopy(drecv, junk, bytes);
  devCopyAsync(dsend, hin, bytes, NULL);
  r = collAllReduce(dsend, drecv, COUNT, collInt32, collSum, comm, NULL);
  CHECK(r == collSuccess, "blocking all-reduce: %s", collGetLastError(NULL));
  memset(hout, 0, bytes);
  devCopy(hout, drecv, bytes);
  expectSum(rank, &fails, hout, n, 3, "stream NULL");

  collStreamDestroy(cs);
  collStreamDestroy(cs2);
  COLL_CU(cuEventDestroy)(ev);
  COLL_CU(cuStreamDestroy)(us);
  COLL_CU(cuStreamDestroy)(us2);
  collDevFree(dsend), collDevFree(drecv), collDevFree(d2), collDevFree(d3);
  free(hin), free(hout), free(junk), free(bc), free(hb);
  return fails;
}

static int gpu(collComm_t comm, int rank, int n, void* arg) {
  (void)n, (void)arg;
  int fails = 0;
  if (!devSetup(1)) return 1;
  int32_t* other = devAlloc(64); /* on GPU 1 */
  if (!devSetup(0)) return 1;
  int32_t* mine = devAlloc(64);
  collStream_t cs;
  CHECK(collStreamCreateCuda(comm, NULL, &cs) == collSuccess, "collStreamCreateCuda on GPU 0: %s",
        collGetLastError(NULL));
  collResult_t r = collAllReduce(other, other, 16, collInt32, collSum, comm, cs);
  const char* m = collGetLastError(NULL);
  CHECK(r == collInvalidArgument && strstr(m, "collAllReduce: sendbuff is on GPU 1") &&
            strstr(m, "this communicator runs on GPU 0"),
        "a buffer of GPU 1: %d %s", (int)r, m);
  r = collAllReduce(mine, other, 16, collInt32, collSum, comm, cs);
  CHECK(r == collInvalidArgument && strstr(collGetLastError(NULL), "GPU 1") && strstr(collGetLastError(NULL), "GPU 0"),
        "mixed GPUs: %d %s", (int)r, collGetLastError(NULL));
  collDevSetCurrent(1);
  collStream_t cs1 = (collStream_t)1;
  r = collStreamCreateCuda(comm, NULL, &cs1);
  m = collGetLastError(NULL);
  CHECK(r == collInvalidArgument && cs1 == NULL && strstr(m, "the current device is on GPU 1") &&
            strstr(m, "runs on GPU 0"),
        "a CUDA stream while GPU 1 is current: %d %s", (int)r, m);
  collDevSetCurrent(0);
  /* the refused calls ran nowhere: the comm still works */
  r = collAllReduce(mine, mine, 16, collInt32, collSum, comm, cs);
  CHECK(r == collSuccess && collStreamSynchronize(cs) == collSuccess, "a call after the refused ones: %s",
        collGetLastError(NULL));
  collStreamDestroy(cs);
  collDevFree(mine);
  return fails;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A call on a CUDA stream that fails: the stream is released, the error
 * reported. Returns the failed checks. */
static int failingCall(collComm_t comm, int rank, const char* what, const char* expect) {
  int fails = 0;
  if (!devSetup(0)) return 1;
  size_t bytes = COUNT * sizeof(int32_t);
  int32_t* h = malloc(bytes);
  input(h, rank, 0);
  int32_t *ds = devAlloc(bytes), *dr = devAlloc(bytes);
  devCopy(ds, h, bytes);
  CUstream us = devStream();
  collStream_t cs;
  CHECK(collStreamCreateCuda(comm, us, &cs) == collSuccess, "collStreamCreateCuda: %s", collGetLastError(NULL));
  double t0 = now();
  collResult_t r = collAllReduce(ds, dr, COUNT, collInt32, collSum, comm, cs);
  CHECK(r == collSuccess, "%s: the call is issued (it fails later): %s", what, collGetLastError(NULL));
  CUresult cr = COLL_CU(cuStreamSynchronize)(us); /* must return: the gate opens on failure too */
  double t = now() - t0;
  r = collStreamSynchronize(cs);
  char m[1200];
  snprintf(m, sizeof m, "%s", collGetLastError(NULL));
  CHECK(cr == CUDA_SUCCESS, "%s: cuStreamSynchronize %d", what, (int)cr);
  CHECK(r != collSuccess, "%s: collStreamSynchronize succeeded", what);
  collResult_t ae = collSuccess;
  collCommGetAsyncError(comm, &ae);
  CHECK(ae != collSuccess && ae != collInProgress, "%s: the comm did not fail (%d)", what, (int)ae);
  CHECK(t < 30, "%s: the stream was released only after %.1f s", what, t);
  CHECK(!expect || strstr(m, expect), "%s: the message does not say \"%s\": %s", what, expect, m);
  printf("rank %d: %s: stream released after %.3f s; collStreamSynchronize: %s\n", rank, what, t, m);
  collStreamDestroy(cs);
  COLL_CU(cuStreamDestroy)(us);
  collDevFree(ds), collDevFree(dr);
  free(h);
  return fails;
}

static int cudafail(collComm_t comm, int rank, int n, void* arg) {
  (void)n, (void)arg;
  /* read by the fake driver when it loads: the first call of the body loads it */
  if (rank == 1) setenv("FAKECUDA_FAIL", "cuMemcpyAsync:1", 1);
  return failingCall(comm, rank, rank == 1 ? "a failed staging copy" : "a peer whose copy failed",
                     rank == 1 ? "to host staging failed" : NULL);
}

static int deadpeer(collComm_t comm, int rank, int n, void* arg) {
  (void)n, (void)arg;
  if (rank == 1) _exit(0);
  collCommSetTimeout(comm, 20);
  return failingCall(comm, rank, "a dead peer", NULL);
}
#endif

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "nodriver";
  if (strcmp(mode, "nodriver") == 0) return collMpRun(2, 60, nodriver, NULL);
#ifndef COLL_HAVE_CUDA
  printf("SKIP: libcoll built without CUDA\n");
  return DEV_SKIP;
#else
  int pr = devProbe(); /* the parent stays without CUDA: a child probes */
  if (pr) return pr;
  collMpBody body = strcmp(mode, "semantics") == 0 ? semantics
                    : strcmp(mode, "gpu") == 0     ? gpu
                    : strcmp(mode, "cudafail") == 0 ? cudafail
                    : strcmp(mode, "deadpeer") == 0 ? deadpeer
                                                    : NULL;
  if (!body) return 2;
  int rc = collMpRun(2, 120, body, NULL);
  printf("%s: %s\n", rc ? "FAIL" : "PASS", mode);
  return rc;
#endif
}
