/*
 * test_memcheck.c - the memory-type rule at every call that takes buffers
 * (issue 16): collAllReduce, collAllGather, collReduceScatter,
 * collBroadcast, collReduce, collSend, collRecv (alone, in groups, on a coll
 * stream). A fake memory-type provider (collMemSetQueryHook) declares some
 * host arrays to be CUDA device memory of GPU 0 or 1, managed memory, pinned
 * host memory, or a pointer whose query fails; since they are really host
 * memory, a call that the check lets through runs and writes them, which the
 * test sees. Device buffers are refused while the CUDA driver cannot be
 * used (not here: no driver), naming the buffer and why; mixed types or two GPUs are refused naming both;
 * pinned and plain host memory run as before, with exact results; buffers a
 * rank does not use (count 0, a non-root's broadcast sendbuff and reduce
 * recvbuff) are not looked at. Without the hook, no CUDA driver is mapped
 * here: the host path is unchanged.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "coll.h"
#include "device/cuda_loader.h"
#include "device/memtype.h"
#include "misc/log.h"

enum { N = 16 };
/* what the fake provider says they are */
static int32_t devA[N], devB[N]; /* CUDA device memory of GPU 0 */
static int32_t devC[N];          /* CUDA device memory of GPU 1 */
static int32_t manD[N], manE[N]; /* CUDA managed memory of GPU 0 */
static int32_t pinP[N];          /* pinned host memory */
static int32_t badF[N];          /* the driver's query fails */
static int32_t hostH[N], hostK[N]; /* not known to the provider: host memory */

static atomic_int hookCalls;

static int in(const void* p, const int32_t* a) { return (const char*)p >= (const char*)a && (const char*)p < (const char*)(a + N); }

static collResult_t fakeQuery(const void* p, collMemInfo* info) {
  hookCalls++;
  if (in(p, devA) || in(p, devB)) *info = (collMemInfo){COLL_MEM_DEVICE, 0, 0};
  else if (in(p, devC)) *info = (collMemInfo){COLL_MEM_DEVICE, 1, 0};
  else if (in(p, manD) || in(p, manE)) *info = (collMemInfo){COLL_MEM_MANAGED, 0, 0};
  else if (in(p, pinP)) *info = (collMemInfo){COLL_MEM_HOST, -1, 1};
  else if (in(p, badF))
    return collSetError(collSystemError, "CUDA: cuPointerGetAttributes(%p) failed: CUDA_ERROR_INVALID_CONTEXT", p);
  return collSuccess;
}

static collComm_t one(void) {
  collUniqueId id;
  collComm_t c = NULL;
  assert_int_equal(collGetUniqueId(&id), collSuccess);
  assert_int_equal(collCommInitRank(&c, 1, id, 0), collSuccess);
  return c;
}

static void fill(int32_t* a, int32_t base) {
  for (int i = 0; i < N; i++) a[i] = base + i;
}

static void fillAll(void) {
  fill(devA, 100), fill(devB, 200), fill(devC, 300), fill(manD, 400), fill(manE, 500), fill(pinP, 600);
  fill(badF, 700), fill(hostH, 800), fill(hostK, 900);
}

/* Every array still holds what fillAll put there: a refused call wrote nothing. */
static void expectUntouched(const char* what) {
  const int32_t* arrs[] = {devA, devB, devC, manD, manE, pinP, badF, hostH, hostK};
  for (int k = 0; k < 9; k++)
    for (int i = 0; i < N; i++)
      if (arrs[k][i] != 100 * (k + 1) + i) fail_msg("%s: array %d element %d is %d, was %d", what, k, i, arrs[k][i], 100 * (k + 1) + i);
}

static void expectMsg(collResult_t got, collResult_t want, const char* pattern, const char* what) {
  if (got != want) fail_msg("%s: returned %d (%s), expected %d", what, (int)got, collGetLastError(NULL), (int)want);
  const char* m = collGetLastError(NULL);
  char msg[2048];
  const char* at = strchr(pattern, '@');
  if (at) snprintf(msg, sizeof msg, "%.*s%s%s", (int)(at - pattern), pattern, collCudaLoadMessage(), at + 1);
  else snprintf(msg, sizeof msg, "%s", pattern);
  if (strcmp(m, msg) != 0) fail_msg("%s: message\n  \"%s\"\nexpected\n  \"%s\"", what, m, msg);
}

/* The five collectives with a sendbuff and a recvbuff, on one rank. */
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

/* "@" stands for why the driver cannot be used here (collCudaLoadMessage) */
#define HOSTONLY "this communicator runs host memory only: @"
#define MIXED "all buffers of one call must be host memory or on one GPU; this communicator runs host memory only"

typedef struct {
  const void* s;
  int32_t* r;
  collResult_t want;
  const char* msg; /* after "<fn>: " */
} mixCase;

static void test_every_call_every_mix(void** st) {
  (void)st;
  collMemSetQueryHook(fakeQuery);
  collComm_t c = one();
  collStream_t s;
  assert_int_equal(collStreamCreate(c, &s), collSuccess);
  const mixCase cases[] = {
      {devA, devB, collInvalidArgument, "sendbuff and recvbuff are CUDA device memory of GPU 0; " HOSTONLY},
      {devA, devA, collInvalidArgument, "sendbuff and recvbuff are CUDA device memory of GPU 0; " HOSTONLY},
      {manD, manE, collInvalidArgument, "sendbuff and recvbuff are CUDA managed memory of GPU 0; " HOSTONLY},
      {devA, manD, collInvalidArgument,
       "sendbuff is CUDA device memory of GPU 0 and recvbuff is CUDA managed memory of GPU 0; " HOSTONLY},
      {devA, hostH, collInvalidArgument, "recvbuff is host memory but sendbuff is CUDA device memory of GPU 0; " MIXED},
      {hostH, devB, collInvalidArgument, "recvbuff is CUDA device memory of GPU 0 but sendbuff is host memory; " MIXED},
      {pinP, devB, collInvalidArgument,
       "recvbuff is CUDA device memory of GPU 0 but sendbuff is pinned host memory; " MIXED},
      {devA, devC, collInvalidArgument,
       "recvbuff is CUDA device memory of GPU 1 but sendbuff is CUDA device memory of GPU 0; " MIXED},
      {devC, manD, collInvalidArgument,
       "recvbuff is CUDA managed memory of GPU 0 but sendbuff is CUDA device memory of GPU 1; " MIXED},
      {manD, hostH, collInvalidArgument, "recvbuff is host memory but sendbuff is CUDA managed memory of GPU 0; " MIXED},
      {badF, hostH, collSystemError, "sendbuff: CUDA: cuPointerGetAttributes(%p) failed: CUDA_ERROR_INVALID_CONTEXT"},
      {hostH, badF, collSystemError, "recvbuff: CUDA: cuPointerGetAttributes(%p) failed: CUDA_ERROR_INVALID_CONTEXT"},
  };
  for (int k = 0; k < NCOLL; k++) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      for (int onStream = 0; onStream < 2; onStream++) {
        char what[160], msg[600], detail[400];
        snprintf(what, sizeof what, "%s case %zu%s", collName[k], i, onStream ? " on a coll stream" : "");
        snprintf(detail, sizeof detail, cases[i].msg, (void*)badF);
        snprintf(msg, sizeof msg, "%s: %s", collName[k], detail);
        fillAll();
        hookCalls = 0;
        expectMsg(issue(k, cases[i].s, cases[i].r, N, c, onStream ? s : NULL), cases[i].want, msg, what);
        if (onStream) assert_int_equal(collStreamSynchronize(s), collSuccess);
        expectUntouched(what);
        assert_true(hookCalls >= 1);
      }
    }
    /* host memory, pinned or not: runs as before, exact results */
    const int32_t* srcs[3] = {hostH, pinP, pinP};
    int32_t* dsts[3] = {hostK, hostK, pinP}; /* the last in place */
    for (int i = 0; i < 3; i++) {
      fillAll();
      int32_t want[N];
      memcpy(want, srcs[i], sizeof want);
      assert_int_equal(issue(k, srcs[i], dsts[i], N, c, i == 1 ? s : NULL), collSuccess);
      assert_int_equal(collStreamSynchronize(s), collSuccess);
      assert_memory_equal(dsts[i], want, sizeof want);
    }
    /* count 0: no buffer is looked at, even device ones */
    hookCalls = 0;
    assert_int_equal(issue(k, devA, devC, 0, c, NULL), collSuccess);
    assert_int_equal(hookCalls, 0);
  }
  assert_int_equal(collStreamDestroy(s), collSuccess);
  assert_int_equal(collCommDestroy(c), collSuccess);
  collMemSetQueryHook(NULL);
}

/* collSend / collRecv (one buffer each), alone and in a group (all-to-all
 * is a group of them). */
static void test_send_recv(void** st) {
  (void)st;
  collMemSetQueryHook(fakeQuery);
  collComm_t c = one();
  fillAll();
  expectMsg(collSend(devA, N, collInt32, 0, c, NULL), collInvalidArgument,
            "collSend: sendbuff is CUDA device memory of GPU 0; " HOSTONLY, "send");
  expectMsg(collRecv(devC, N, collInt32, 0, c, NULL), collInvalidArgument,
            "collRecv: recvbuff is CUDA device memory of GPU 1; " HOSTONLY, "recv");
  expectMsg(collRecv(manE, N, collInt32, 0, c, NULL), collInvalidArgument,
            "collRecv: recvbuff is CUDA managed memory of GPU 0; " HOSTONLY, "recv managed");
  char msg[200];
  snprintf(msg, sizeof msg, "collSend: sendbuff: CUDA: cuPointerGetAttributes(%p) failed: CUDA_ERROR_INVALID_CONTEXT",
           (void*)badF);
  expectMsg(collSend(badF, N, collInt32, 0, c, NULL), collSystemError, msg, "send, failed query");
  assert_int_equal(collGroupStart(), collSuccess);
  expectMsg(collSend(devB, N, collInt32, 0, c, NULL), collInvalidArgument,
            "collSend: sendbuff is CUDA device memory of GPU 0; " HOSTONLY, "grouped send");
  expectMsg(collRecv(devA, N, collInt32, 0, c, NULL), collInvalidArgument,
            "collRecv: recvbuff is CUDA device memory of GPU 0; " HOSTONLY, "grouped recv");
  assert_int_equal(collGroupEnd(), collInvalidArgument); /* a refused call fails its group */
  expectUntouched("send/recv");
  /* host and pinned host memory: a send to itself arrives */
  assert_int_equal(collGroupStart(), collSuccess);
  assert_int_equal(collSend(pinP, N, collInt32, 0, c, NULL), collSuccess);
  assert_int_equal(collRecv(hostK, N, collInt32, 0, c, NULL), collSuccess);
  assert_int_equal(collGroupEnd(), collSuccess);
  assert_memory_equal(hostK, pinP, sizeof hostK);
  hookCalls = 0;
  assert_int_equal(collGroupStart(), collSuccess);
  assert_int_equal(collSend(devA, 0, collInt32, 0, c, NULL), collSuccess);
  assert_int_equal(collRecv(devC, 0, collInt32, 0, c, NULL), collSuccess);
  assert_int_equal(collGroupEnd(), collSuccess);
  assert_int_equal(hookCalls, 0);
  assert_int_equal(collCommDestroy(c), collSuccess);
  collMemSetQueryHook(NULL);
}

/* Buffers a rank does not use are not looked at: a non-root's broadcast
 * sendbuff and reduce recvbuff may be anything, device memory included. */
typedef struct {
  collComm_t comm;
  int rank;
  collResult_t bc, rd;
  int32_t bcOut[N], rdOut[N];
} rootArgs;

static void* rootWorker(void* p) {
  rootArgs* a = p;
  int32_t mine[N];
  for (int i = 0; i < N; i++) mine[i] = (a->rank + 1) * (i + 1);
  a->bc = collBroadcast(a->rank == 0 ? (const void*)mine : devA, a->bcOut, N, collInt32, 0, a->comm, NULL);
  a->rd = collReduce(mine, a->rank == 0 ? a->rdOut : devC, N, collInt32, collSum, 0, a->comm, NULL);
  return NULL;
}

static void test_unused_buffers(void** st) {
  (void)st;
  collMemSetQueryHook(fakeQuery);
  fillAll();
  collComm_t comms[2];
  assert_int_equal(collCommInitAll(comms, 2, NULL), collSuccess);
  rootArgs a[2];
  pthread_t th[2];
  for (int r = 0; r < 2; r++) {
    memset(&a[r], 0, sizeof a[r]);
    a[r].comm = comms[r];
    a[r].rank = r;
    pthread_create(&th[r], NULL, rootWorker, &a[r]);
  }
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < 2; r++) {
    assert_int_equal(a[r].bc, collSuccess);
    assert_int_equal(a[r].rd, collSuccess);
    for (int i = 0; i < N; i++) assert_int_equal(a[r].bcOut[i], i + 1);
  }
  for (int i = 0; i < N; i++) assert_int_equal(a[0].rdOut[i], 3 * (i + 1));
  expectUntouched("unused buffers");
  for (int r = 0; r < 2; r++) assert_int_equal(collCommDestroy(comms[r]), collSuccess);
  collMemSetQueryHook(NULL);
}

/* Without the hook: no CUDA driver is mapped in this process, every buffer
 * is host memory without a query, and the host path is unchanged. */
static void test_no_driver_host_path(void** st) {
  (void)st;
  if (collCudaDriverPresent()) {
    print_message("skipped: a CUDA driver is mapped in this process\n");
    skip();
  }
  collComm_t c = one();
  fillAll();
  assert_int_equal(collAllReduce(devA, devB, N, collInt32, collSum, c, NULL), collSuccess);
  assert_memory_equal(devB, devA, sizeof devA);
  assert_int_equal(collCudaDriverPresent(), 0);
  assert_int_equal(collCommDestroy(c), collSuccess);
  /* the cost of the whole rule for two host buffers (reported, not
   * asserted: the machine is shared) */
  const void* bufs[2] = {hostH, hostK};
  const char* names[2] = {"sendbuff", "recvbuff"};
  collMemInfo mi;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < 100000; i++) assert_int_equal(collMemCheckCall("x", 2, bufs, names, &mi), collSuccess);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / 100000;
  print_message("collMemCheckCall of two host buffers without a driver: %.0f ns per call\n", ns);
  assert_int_equal(mi.kind, COLL_MEM_HOST);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_call_every_mix),
      cmocka_unit_test(test_send_recv),
      cmocka_unit_test(test_unused_buffers),
      cmocka_unit_test(test_no_driver_host_path),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
