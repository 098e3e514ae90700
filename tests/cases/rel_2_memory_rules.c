/*
 * rel_2_memory_rules.c - reliability review, point 2: the memory-type rule
 * of every call that takes buffers, on real device memory of the fake CUDA
 * driver (two GPUs: FAKECUDA_DEVICES=2, set by the .cmake) instead of a
 * test hook. One rank, one process. Each refusal is checked for its exact
 * code and message, and for writing nothing.
 *
 * Modes (argv[1]; none: rules):
 *  rules      mixed host and device buffers (plain and pinned host memory),
 *             buffers of two GPUs in one call, for the five collectives on
 *             the NULL stream and on a coll stream, and for send/recv alone
 *             and in a group: collInvalidArgument naming both buffers, and
 *             the communicator stays unbound and usable. Then a device call
 *             on GPU 0 binds it (exact result); a buffer of GPU 1 and a CUDA
 *             stream made while GPU 1 is current are collInvalidArgument
 *             naming both GPUs. Count 0 looks at no buffer; host and pinned
 *             host memory give exact results.
 *  queryfail  the driver's pointer query fails (FAKECUDA_FAIL): the call is
 *             collSystemError naming the buffer and the CUDA error; the
 *             communicator has not failed and the next call works.
 *  bindfail   the first cuStreamCreate fails (FAKECUDA_FAIL): the
 *             collStreamCreateCuda that binds the communicator is
 *             collSystemError naming coll's staging stream, *stream NULL;
 *             a second one works and runs a call.
 *  nodriver   (no driver library) every pointer is host memory, with no
 *             query: the host path gives exact results.
 * Without a usable driver every mode but nodriver skips (77).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll.h"
#include "device/memtype.h"
#include "helper_check.h"
#include "helper_i16_dev.h"

enum { N = 64 };

static int fails;

#ifdef COLL_HAVE_CUDA
/* got is want with the exact message want_msg */
static void expectErr(collResult_t got, collResult_t want, const char* wantMsg, const char* what) {
  const char* m = collGetLastError(NULL);
  CHECK(got == want, "%s: returned %d, expected %d (%s)", what, (int)got, (int)want, m);
  CHECK(strcmp(m, wantMsg) == 0, "%s: message\n  \"%s\"\nexpected\n  \"%s\"", what, m, wantMsg);
}

#endif

static collComm_t oneRank(void) {
  collUniqueId id;
  collComm_t c = NULL;
  if (collGetUniqueId(&id) != collSuccess || collCommInitRank(&c, 1, id, 0) != collSuccess) {
    fprintf(stderr, "init: %s\n", collGetLastError(NULL));
    exit(1);
  }
  return c;
}

#ifdef COLL_HAVE_CUDA
enum { AR, AG, RS, BC, RD, NCOLL };
static const char* collName[NCOLL] = {"collAllReduce", "collAllGather", "collReduceScatter", "collBroadcast",
                                      "collReduce"};

static collResult_t issue(int k, const void* s, void* r, size_t count, collComm_t c, collStream_t st) {
  switch (k) {
    case AR: return collAllReduce(s, r, count, collInt32, collSum, c, st);
    case AG: return collAllGather(s, r, count, collInt32, c, st);
    case RS: return collReduceScatter(s, r, count, collInt32, collSum, c, st);
    case BC: return collBroadcast(s, r, count, collInt32, 0, c, st);
    default: return collReduce(s, r, count, collInt32, collSum, 0, c, st);
  }
}

#endif

static void fill(int32_t* h, int base) {
  for (int i = 0; i < N; i++) h[i] = base + i;
}

static int hostRun(void) {
  collComm_t c = oneRank();
  int32_t a[N], b[N];
  fill(a, 100);
  memset(b, 0, sizeof b);
  CHECK(collAllReduce(a, b, N, collInt32, collSum, c, NULL) == collSuccess, "%s", collGetLastError(NULL));
  CHECK(memcmp(a, b, sizeof a) == 0, "host all-reduce result");
  CHECK(collCudaDriverPresent() == 0, "a driver got mapped");
  const void* bufs[2] = {a, b};
  const char* names[2] = {"sendbuff", "recvbuff"};
  collMemInfo mi;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < 100000; i++) CHECK(collMemCheckCall("x", 2, bufs, names, &mi) == collSuccess, "check");
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("collMemCheckCall of two host buffers without a driver: %.0f ns per call (reported, not asserted)\n",
         ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / 100000);
  CHECK(mi.kind == COLL_MEM_HOST, "kind %d", mi.kind);
  CHECK(collCommDestroy(c) == collSuccess, "destroy");
  return fails ? 1 : 0;
}

#ifdef COLL_HAVE_CUDA
static void* pinnedAlloc(size_t bytes) {
  void* p = NULL;
  if (COLL_CU(cuMemHostAlloc)(&p, bytes, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS) abort();
  return p;
}

/* The device buffer holds base + i (its first N elements): nothing wrote it. */
static void expectDev(const void* d, int base, const char* what) {
  int32_t h[N];
  devCopy(h, d, sizeof h);
  for (int i = 0; i < N; i++)
    if (h[i] != base + i) {
      CHECK(0, "%s: device element %d is %d, expected %d", what, i, h[i], base + i);
      return;
    }
}

static int rules(void) {
  /* buffers of GPU 0 (current now: devSetup) and of GPU 1; N * 4 elements
   * each, enough for an all-gather's recvbuff */
  int32_t* devA = devAlloc(4 * N * 4);
  int32_t* devB = devAlloc(4 * N * 4);
  if (collDevSetCurrent(1) != collSuccess) {
    printf("SKIP: GPU 1: %s\n", collGetLastError(NULL));
    return DEV_SKIP;
  }
  int32_t* devC = devAlloc(4 * N * 4);
  CHECK(collDevSetCurrent(0) == collSuccess, "GPU 0 current");
  int32_t* pinP = pinnedAlloc(4 * N * 4);
  int32_t* hostH = calloc(4 * N, 4);
  int32_t* hostK = calloc(4 * N, 4);
  int32_t h[N];
  fill(h, 100), devCopy(devA, h, sizeof h);
  fill(h, 200), devCopy(devB, h, sizeof h);
  fill(h, 300), devCopy(devC, h, sizeof h);

  collComm_t c = oneRank();
  collStream_t s = NULL;
  CHECK(collStreamCreate(c, &s) == collSuccess, "collStreamCreate");
  const char* mixed = "all buffers of one call must be host memory or on one GPU";
  struct {
    const void* s;
    void* r;
    const char* msg; /* after "<fn>: ", before "; <mixed>" */
  } cases[] = {
      {devA, hostH, "recvbuff is host memory but sendbuff is CUDA device memory of GPU 0"},
      {hostH, devB, "recvbuff is CUDA device memory of GPU 0 but sendbuff is host memory"},
      {pinP, devB, "recvbuff is CUDA device memory of GPU 0 but sendbuff is pinned host memory"},
      {devB, pinP, "recvbuff is pinned host memory but sendbuff is CUDA device memory of GPU 0"},
      {devA, devC, "recvbuff is CUDA device memory of GPU 1 but sendbuff is CUDA device memory of GPU 0"},
      {devC, devB, "recvbuff is CUDA device memory of GPU 0 but sendbuff is CUDA device memory of GPU 1"},
  };
  for (int k = 0; k < NCOLL; k++)
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
      for (int onStream = 0; onStream < 2; onStream++) {
        char what[160], msg[400];
        snprintf(what, sizeof what, "%s case %zu%s", collName[k], i, onStream ? " on a coll stream" : "");
        snprintf(msg, sizeof msg, "%s: %s; %s", collName[k], cases[i].msg, mixed);
        fill(hostH, 800);
        fill(pinP, 600);
        expectErr(issue(k, cases[i].s, cases[i].r, N, c, onStream ? s : NULL), collInvalidArgument, msg, what);
        CHECK(collStreamSynchronize(s) == collSuccess, "%s: the stream has no error", what);
        for (int e = 0; e < N; e++) CHECK(hostH[e] == 800 + e && pinP[e] == 600 + e, "%s: host buffers written", what);
      }
  expectDev(devA, 100, "devA"), expectDev(devB, 200, "devB"), expectDev(devC, 300, "devC");

  /* send/recv take one buffer: a GPU-1 send and a GPU-0 receive in one group */
  CHECK(collGroupStart() == collSuccess, "group");
  CHECK(collSend(devC, N, collInt32, 0, c, NULL) == collSuccess, "grouped send: %s", collGetLastError(NULL));
  expectErr(collRecv(devB, N, collInt32, 0, c, NULL), collInvalidArgument,
            "collRecv: recvbuff is on GPU 0 but this communicator runs on GPU 1 (bound by its first device call or "
            "CUDA stream); one communicator uses one GPU: create one per GPU",
            "grouped recv on another GPU");
  /* the send bound the comm to GPU 1 at issue: the group fails */
  CHECK(collGroupEnd() == collInvalidArgument, "group end: %s", collGetLastError(NULL));
  expectDev(devB, 200, "devB after the refused group");
  CHECK(collCommDestroy(c) == collSuccess, "destroy");

  /* a fresh comm: the first device call binds it to GPU 0, exactly */
  c = oneRank();
  CHECK(collStreamCreate(c, &s) == collSuccess, "collStreamCreate");
  CHECK(collAllReduce(devA, devB, N, collInt32, collSum, c, NULL) == collSuccess, "bind: %s", collGetLastError(NULL));
  expectDev(devB, 100, "all-reduce on GPU 0");
  expectErr(collAllReduce(devC, devC, N, collInt32, collSum, c, NULL), collInvalidArgument,
            "collAllReduce: sendbuff is on GPU 1 but this communicator runs on GPU 0 (bound by its first device call "
            "or CUDA stream); one communicator uses one GPU: create one per GPU",
            "GPU 1 buffers on a GPU 0 comm");
  expectErr(collRecv(devC, N, collInt32, 0, c, s), collInvalidArgument,
            "collRecv: recvbuff is on GPU 1 but this communicator runs on GPU 0 (bound by its first device call or "
            "CUDA stream); one communicator uses one GPU: create one per GPU",
            "GPU 1 receive on a coll stream");
  expectDev(devC, 300, "devC");
  CHECK(collDevSetCurrent(1) == collSuccess, "GPU 1 current");
  collStream_t cs = (collStream_t)1;
  expectErr(collStreamCreateCuda(c, NULL, &cs), collInvalidArgument,
            "collStreamCreateCuda: the current device is on GPU 1 but this communicator runs on GPU 0 (bound by its "
            "first device call or CUDA stream); one communicator uses one GPU: create one per GPU",
            "CUDA stream of GPU 1");
  CHECK(cs == NULL, "stream not cleared");
  CHECK(collDevSetCurrent(0) == collSuccess, "GPU 0 current");
  /* count 0: nothing looked at, whatever the buffers */
  for (int k = 0; k < NCOLL; k++)
    CHECK(issue(k, devA, devC, 0, c, NULL) == collSuccess, "%s count 0: %s", collName[k], collGetLastError(NULL));
  /* host and pinned host memory: exact results */
  fill(hostH, 800);
  fill(pinP, 600);
  CHECK(collAllReduce(pinP, hostK, N, collInt32, collSum, c, s) == collSuccess, "pinned: %s", collGetLastError(NULL));
  CHECK(collStreamSynchronize(s) == collSuccess, "sync");
  CHECK(memcmp(hostK, pinP, N * 4) == 0, "pinned -> host result");
  CHECK(collAllReduce(hostH, pinP, N, collInt32, collSum, c, NULL) == collSuccess, "host: %s", collGetLastError(NULL));
  CHECK(memcmp(hostH, pinP, N * 4) == 0, "host -> pinned result");
  collResult_t a = collInProgress;
  CHECK(collCommGetAsyncError(c, &a) == collSuccess && a == collSuccess, "the refusals failed the comm: %d", (int)a);
  CHECK(collStreamDestroy(s) == collSuccess, "stream destroy");
  CHECK(collCommDestroy(c) == collSuccess, "destroy");
  collDevFree(devA), collDevFree(devB), collDevFree(devC);
  COLL_CU(cuMemFreeHost)(pinP);
  free(hostH), free(hostK);
  return fails ? 1 : 0;
}

static int queryFail(void) {
  int32_t* devA = devAlloc(N * 4);
  int32_t* devB = devAlloc(N * 4);
  int32_t h[N];
  fill(h, 100), devCopy(devA, h, sizeof h);
  collComm_t c = oneRank();
  char msg[256];
  snprintf(msg, sizeof msg,
           "collAllReduce: sendbuff: CUDA: cuPointerGetAttributes(%p) failed: CUDA_ERROR_UNKNOWN (unknown error, CUDA "
           "error 999)",
           (void*)devA);
  expectErr(collAllReduce(devA, devB, N, collInt32, collSum, c, NULL), collSystemError, msg, "failed query");
  collResult_t a = collInProgress;
  CHECK(collCommGetAsyncError(c, &a) == collSuccess && a == collSuccess, "the refusal failed the comm: %d", (int)a);
  CHECK(collAllReduce(devA, devB, N, collInt32, collSum, c, NULL) == collSuccess, "retry: %s", collGetLastError(NULL));
  expectDev(devB, 100, "retry result");
  CHECK(collCommDestroy(c) == collSuccess, "destroy");
  collDevFree(devA), collDevFree(devB);
  return fails ? 1 : 0;
}

static int bindFail(void) {
  collComm_t c = oneRank();
  collStream_t cs = (collStream_t)1;
  expectErr(collStreamCreateCuda(c, NULL, &cs), collSystemError,
            "collStreamCreateCuda: CUDA: creating coll's staging stream (cuStreamCreate) failed: "
            "CUDA_ERROR_OUT_OF_MEMORY (out of memory, CUDA error 2)",
            "failing bind");
  CHECK(cs == NULL, "stream not cleared");
  CHECK(collStreamCreateCuda(c, NULL, &cs) == collSuccess, "second try: %s", collGetLastError(NULL));
  int32_t* devA = devAlloc(N * 4);
  int32_t* devB = devAlloc(N * 4);
  int32_t h[N];
  fill(h, 100), devCopy(devA, h, sizeof h);
  CHECK(collAllReduce(devA, devB, N, collInt32, collSum, c, cs) == collSuccess, "call: %s", collGetLastError(NULL));
  CHECK(collStreamSynchronize(cs) == collSuccess, "sync: %s", collGetLastError(NULL));
  expectDev(devB, 100, "result");
  CHECK(collStreamDestroy(cs) == collSuccess, "stream destroy");
  CHECK(collCommDestroy(c) == collSuccess, "destroy");
  collDevFree(devA), collDevFree(devB);
  return fails ? 1 : 0;
}
#endif

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "rules";
  int rc;
  if (strcmp(mode, "nodriver") == 0) rc = hostRun();
  else if (!devSetup(0)) rc = DEV_SKIP;
#ifdef COLL_HAVE_CUDA
  else if (strcmp(mode, "rules") == 0) rc = rules();
  else if (strcmp(mode, "queryfail") == 0) rc = queryFail();
  else if (strcmp(mode, "bindfail") == 0) rc = bindFail();
#endif
  else {
    printf("SKIP: mode %s needs a CUDA build\n", mode);
    rc = DEV_SKIP;
  }
  printf("%s\n", rc == 0 ? "PASS" : rc == DEV_SKIP ? "SKIP" : "FAIL");
  return rc;
}
