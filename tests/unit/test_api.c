/*
 * test_api.c - the public API in one process: argument checks and their
 * messages, count 0, ranks as threads (collCommInitAll), streams, split,
 * non-blocking init, abort from another thread, timeouts, and
 * collCommInitFromEnv under launcher variables (forked ranks), every
 * collective on one rank.
 * All traffic stays on loopback.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static collComm_t one(void) {
  collUniqueId id;
  collComm_t c = NULL;
  assert_int_equal(collGetUniqueId(&id), collSuccess);
  assert_int_equal(collCommInitRank(&c, 1, id, 0), collSuccess);
  return c;
}

static void test_version_and_strings(void** st) {
  (void)st;
  int v = 0;
  assert_int_equal(collGetVersion(&v), collSuccess);
  assert_int_equal(v, COLL_VERSION_CODE);
  assert_int_equal(collGetVersion(NULL), collInvalidArgument);
  assert_non_null(strstr(collGetLastError(NULL), "version"));
  assert_non_null(strstr(collGetErrorString(collTimeout), "timeout"));
  assert_non_null(strstr(collGetErrorString((collResult_t)99), "unknown"));
}

static void expectError(collResult_t got, collResult_t want, const char* needle) {
  assert_int_equal(got, want);
  const char* msg = collGetLastError(NULL);
  if (!strstr(msg, needle)) fail_msg("message \"%s\" does not contain \"%s\"", msg, needle);
}

static void test_bad_arguments(void** st) {
  (void)st;
  collComm_t c = one(), other = one();
  float buf[4] = {0};
  expectError(collAllReduce(NULL, buf, 4, collFloat, collSum, c, NULL), collInvalidArgument, "sendbuff is NULL");
  expectError(collAllReduce(buf, NULL, 4, collFloat, collSum, c, NULL), collInvalidArgument, "recvbuff is NULL");
  expectError(collAllReduce(buf, buf, 4, (collDataType_t)99, collSum, c, NULL), collInvalidArgument, "datatype 99");
  expectError(collAllReduce(buf, buf, 4, collFloat, (collRedOp_t)7, c, NULL), collInvalidArgument, "op 7");
  expectError(collAllReduce(buf, buf, SIZE_MAX / 2, collFloat, collSum, c, NULL), collInvalidArgument, "overflows");
  expectError(collBroadcast(buf, buf, 4, collFloat, 5, c, NULL), collInvalidArgument, "root 5");
  expectError(collReduce(buf, buf, 4, collFloat, collSum, -1, c, NULL), collInvalidArgument, "root -1");
  expectError(collSend(buf, 4, collFloat, 1, c, NULL), collInvalidArgument, "peer 1");
  expectError(collRecv(buf, 4, collFloat, -3, c, NULL), collInvalidArgument, "peer -3");
  expectError(collAllReduce(buf, buf, 4, collFloat, collSum, NULL, NULL), collInvalidArgument, "comm is NULL");
  expectError(collGroupEnd(), collInvalidUsage, "collGroupStart");
  collStream_t s;
  assert_int_equal(collStreamCreate(other, &s), collSuccess);
  expectError(collAllReduce(buf, buf, 4, collFloat, collSum, c, s), collInvalidUsage, "another communicator");
  assert_int_equal(collStreamDestroy(s), collSuccess);
  expectError(collCommInitRank(NULL, 1, (collUniqueId){{0}}, 0), collInvalidArgument, "comm is NULL");
  collComm_t x;
  expectError(collCommInitRank(&x, 2, (collUniqueId){{0}}, 2), collInvalidArgument, "rank 2");
  expectError(collCommInitRank(&x, 2, (collUniqueId){{0}}, 0), collInvalidArgument, "unique id");
  collConfig_t cfg = COLL_CONFIG_INITIALIZER;
  cfg.magic = 0;
  expectError(collCommInitRankConfig(&x, 1, (collUniqueId){{0}}, 0, &cfg), collInvalidArgument, "COLL_CONFIG_INITIALIZER");
  /* count 0 with NULL buffers does nothing and succeeds */
  assert_int_equal(collAllReduce(NULL, NULL, 0, collFloat, collSum, c, NULL), collSuccess);
  assert_int_equal(collAllGather(NULL, NULL, 0, collInt8, c, NULL), collSuccess);
  assert_int_equal(collBroadcast(NULL, NULL, 0, collInt8, 0, c, NULL), collSuccess);
  assert_int_equal(collCommDestroy(other), collSuccess);
  assert_int_equal(collCommDestroy(c), collSuccess);
  expectError(collAllReduce(buf, buf, 4, collFloat, collSum, c, NULL), collInvalidUsage, "destroyed");
  expectError(collCommDestroy(c), collInvalidUsage, "destroyed");
  int n;
  expectError(collCommCount(c, &n), collInvalidUsage, "destroyed");
}

/* ---- ranks as threads ------------------------------------------------------ */
#define NT 4
typedef struct {
  collComm_t comm;
  int rank;
  int failures;
} thr;

static void* streamWorker(void* p) {
  thr* t = p;
  collStream_t s;
  if (collStreamCreate(t->comm, &s) != collSuccess) { t->failures++; return NULL; }
  enum { K = 8, N = 1000 };
  static _Thread_local int32_t in[K][N], out[K][N];
  for (int k = 0; k < K; k++)
    for (int i = 0; i < N; i++) in[k][i] = (t->rank + 1) * (i + k);
  for (int k = 0; k < K; k++)
    if (collAllReduce(in[k], out[k], N, collInt32, collSum, t->comm, s) != collSuccess) t->failures++;
  collResult_t q = collStreamQuery(s);
  if (q != collSuccess && q != collInProgress) t->failures++;
  if (collStreamSynchronize(s) != collSuccess) t->failures++;
  for (int k = 0; k < K; k++)
    for (int i = 0; i < N; i++)
      if (out[k][i] != (NT * (NT + 1) / 2) * (i + k)) t->failures++;
  if (collStreamQuery(s) != collSuccess) t->failures++;
  collStreamDestroy(s);
  /* split into even/odd ranks, reversed order by key */
  collComm_t sub = NULL;
  int color = t->rank == 3 ? COLL_SPLIT_NOCOLOR : t->rank % 2;
  if (collCommSplit(t->comm, color, -t->rank, &sub, NULL) != collSuccess) { t->failures++; return NULL; }
  if (color == COLL_SPLIT_NOCOLOR) {
    if (sub) t->failures++;
    return NULL;
  }
  int sn = 0, sr = 0;
  collCommCount(sub, &sn);
  collCommUserRank(sub, &sr);
  int wantN = color == 0 ? 2 : 1; /* ranks {0,2} and {1} (3 opted out) */
  if (sn != wantN) t->failures++;
  if (color == 0 && sr != (t->rank == 2 ? 0 : 1)) t->failures++;
  int64_t v = t->rank, r = -1;
  if (collAllReduce(&v, &r, 1, collInt64, collMax, sub, NULL) != collSuccess) t->failures++;
  if (r != (color == 0 ? 2 : 1)) t->failures++;
  collCommDestroy(sub);
  return NULL;
}

static void test_init_all_streams_split(void** st) {
  (void)st;
  collComm_t comms[NT];
  assert_int_equal(collCommInitAll(comms, NT, NULL), collSuccess);
  thr t[NT];
  pthread_t th[NT];
  for (int i = 0; i < NT; i++) {
    int r = -1, n = -1;
    assert_int_equal(collCommUserRank(comms[i], &r), collSuccess);
    assert_int_equal(collCommCount(comms[i], &n), collSuccess);
    assert_int_equal(r, i);
    assert_int_equal(n, NT);
    t[i] = (thr){comms[i], i, 0};
    pthread_create(&th[i], NULL, streamWorker, &t[i]);
  }
  for (int i = 0; i < NT; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < NT; i++) {
    assert_int_equal(t[i].failures, 0);
    assert_int_equal(collCommDestroy(comms[i]), collSuccess);
  }
}

static void test_nonblocking_init(void** st) {
  (void)st;
  collUniqueId id;
  assert_int_equal(collGetUniqueId(&id), collSuccess);
  collConfig_t cfg = COLL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  collComm_t c = NULL;
  collResult_t r = collCommInitRankConfig(&c, 1, id, 0, &cfg);
  assert_true(r == collInProgress || r == collSuccess);
  collResult_t a = collInProgress;
  double t0 = now();
  while (a == collInProgress && now() - t0 < 10) collCommGetAsyncError(c, &a);
  assert_int_equal(a, collSuccess);
  int x = 3, y = 0;
  assert_int_equal(collAllReduce(&x, &y, 1, collInt32, collSum, c, NULL), collSuccess);
  assert_int_equal(y, 3);
  assert_int_equal(collCommDestroy(c), collSuccess);
}

typedef struct {
  collComm_t comm;
  collResult_t result;
  double elapsed;
} lonely;

static void* lonelyAllReduce(void* p) {
  lonely* l = p;
  float v[16] = {1}, o[16];
  double t0 = now();
  l->result = collAllReduce(v, o, 16, collFloat, collSum, l->comm, NULL);
  l->elapsed = now() - t0;
  return NULL;
}

/* Rank 0 waits for a rank that never comes; another thread aborts it. */
static void test_abort_from_other_thread(void** st) {
  (void)st;
  collComm_t comms[2];
  assert_int_equal(collCommInitAll(comms, 2, NULL), collSuccess);
  lonely l = {comms[0], collSuccess, 0};
  pthread_t th;
  pthread_create(&th, NULL, lonelyAllReduce, &l);
  usleep(300 * 1000);
  double t0 = now();
  assert_int_equal(collCommAbort(comms[0]), collSuccess);
  double abortTook = now() - t0;
  pthread_join(th, NULL);
  assert_int_equal(l.result, collRemoteError);
  assert_true(abortTook < 2.0);
  assert_true(l.elapsed < 3.0);
  assert_int_equal(collCommDestroy(comms[1]), collSuccess);
}

typedef struct {
  collComm_t comm;
  int rank;
  collUniqueId id;
  collConfig_t* cfg;
  collResult_t result;
} initArg;

static void* initRankThread(void* p) {
  initArg* a = p;
  a->result = collCommInitRankConfig(&a->comm, 2, a->id, a->rank, a->cfg);
  return NULL;
}

/* A collective nobody else joins fails with collTimeout after timeoutSec,
 * and every later call on that communicator fails too. */
static void test_timeout(void** st) {
  (void)st;
  collConfig_t cfg = COLL_CONFIG_INITIALIZER;
  cfg.timeoutSec = 1;
  initArg a[2];
  pthread_t th[2];
  collUniqueId id;
  assert_int_equal(collGetUniqueId(&id), collSuccess);
  for (int i = 0; i < 2; i++) {
    a[i] = (initArg){NULL, i, id, &cfg, collInternalError};
    pthread_create(&th[i], NULL, initRankThread, &a[i]);
  }
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  assert_int_equal(a[0].result, collSuccess);
  assert_int_equal(a[1].result, collSuccess);
  float v = 1, o = 0;
  double t0 = now();
  collResult_t r = collAllReduce(&v, &o, 1, collFloat, collSum, a[0].comm, NULL);
  double took = now() - t0;
  assert_int_equal(r, collTimeout);
  if (!strstr(collGetLastError(NULL), "timed out")) fail_msg("message: %s", collGetLastError(NULL));
  assert_true(took >= 0.9 && took < 5.0);
  collResult_t async = collSuccess;
  assert_int_equal(collCommGetAsyncError(a[0].comm, &async), collSuccess);
  assert_int_equal(async, collTimeout);
  assert_int_equal(collAllReduce(&v, &o, 1, collFloat, collSum, a[0].comm, NULL), collTimeout);
  assert_int_equal(collCommDestroy(a[0].comm), collSuccess);
  assert_int_equal(collCommDestroy(a[1].comm), collSuccess);
}

/* Three forked ranks find each other from torchrun-style variables. */
static void test_init_from_env(void** st) {
  (void)st;
  enum { N = 3 };
  char port[16];
  snprintf(port, sizeof port, "%d", 20000 + (int)(getpid() % 20000));
  pid_t pids[N];
  for (int r = 0; r < N; r++) {
    pids[r] = fork();
    assert_true(pids[r] >= 0);
    if (pids[r] == 0) {
      alarm(60);
      char rs[8];
      snprintf(rs, sizeof rs, "%d", r);
      setenv("RANK", rs, 1);
      setenv("WORLD_SIZE", "3", 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", port, 1);
      collComm_t c;
      if (collCommInitFromEnv(&c, NULL) != collSuccess) {
        fprintf(stderr, "rank %d: %s\n", r, collGetLastError(NULL));
        _exit(2);
      }
      int n = 0, me = -1;
      collCommCount(c, &n);
      collCommUserRank(c, &me);
      double v = r + 1, sum = 0;
      collResult_t res = collAllReduce(&v, &sum, 1, collDouble, collSum, c, NULL);
      collCommDestroy(c);
      _exit(res == collSuccess && n == N && me == r && sum == 6.0 ? 0 : 3);
    }
  }
  for (int r = 0; r < N; r++) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }
  /* and no launcher at all is a clear error */
  unsetenv("RANK");
  collComm_t c;
  expectError(collCommInitFromEnv(&c, NULL), collInvalidUsage, "no launcher variables");
}

/* A 1-rank communicator runs every collective with no peer and no schedule
 * step (the engine must not touch its empty step state: UBSan flagged a
 * memset of a NULL pointer here), float16 avg through the float32 working
 * copy included. */
static void test_one_rank_collectives(void** st) {
  (void)st;
  collComm_t c = one();
  enum { N = 100000 }; /* more than one slice */
  float* in = malloc(N * sizeof(float));
  float* out = malloc(N * sizeof(float));
  assert_non_null(in);
  assert_non_null(out);
  for (int i = 0; i < N; i++) in[i] = (float)i;
  for (int k = 0; k < 10; k++) { /* in place first (a schedule without steps), then out of place */
    const float* src = k < 5 ? out : in;
    if (k < 5) memcpy(out, in, N * sizeof(float));
    else memset(out, 0xff, N * sizeof(float));
    collResult_t r = k % 5 == 0   ? collAllReduce(src, out, N, collFloat, collSum, c, NULL)
                     : k % 5 == 1 ? collAllGather(src, out, N, collFloat, c, NULL)
                     : k % 5 == 2 ? collReduceScatter(src, out, N, collFloat, collMax, c, NULL)
                     : k % 5 == 3 ? collBroadcast(src, out, N, collFloat, 0, c, NULL)
                                  : collReduce(src, out, N, collFloat, collAvg, 0, c, NULL);
    assert_int_equal(r, collSuccess);
    assert_memory_equal(out, in, N * sizeof(float));
  }
  uint16_t h[3] = {0x7753 /* 30000 */, 0x0001 /* 2^-24 */, 0xbc00 /* -1 */}, ho[3];
  assert_int_equal(collAllReduce(h, ho, 3, collFloat16, collAvg, c, NULL), collSuccess);
  assert_memory_equal(ho, h, sizeof h);
  free(in);
  free(out);
  assert_int_equal(collCommDestroy(c), collSuccess);
}

/* A call that fails inside a group fails the group: collGroupEnd returns
 * its error, says so, and launches none of the group's valid calls. */
static void test_group_error_fails_group(void** st) {
  (void)st;
  collComm_t c = one();
  float x[4] = {1, 2, 3, 4}, y[4] = {0};
  assert_int_equal(collGroupStart(), collSuccess);
  assert_int_equal(collAllReduce(x, y, 4, collFloat, collSum, c, NULL), collSuccess);
  assert_int_equal(collAllReduce(x, y, 4, (collDataType_t)99, collSum, c, NULL), collInvalidArgument);
  assert_int_equal(collBroadcast(x, y, 4, collFloat, 0, c, NULL), collSuccess);
  assert_int_equal(collGroupEnd(), collInvalidArgument);
  const char* m = collGetLastError(NULL);
  assert_non_null(strstr(m, "collGroupEnd: nothing of the group was launched"));
  assert_non_null(strstr(m, "datatype 99 is not a collDataType_t"));
  for (int i = 0; i < 4; i++) assert_true(y[i] == 0.0f); /* the valid calls did not run */
  /* the next group is fresh */
  assert_int_equal(collGroupStart(), collSuccess);
  assert_int_equal(collAllReduce(x, y, 4, collFloat, collSum, c, NULL), collSuccess);
  assert_int_equal(collGroupEnd(), collSuccess);
  for (int i = 0; i < 4; i++) assert_true(y[i] == x[i]);
  assert_int_equal(collCommDestroy(c), collSuccess);
}

int main(void) {
  setenv("COLL_SOCKET_IFNAME", "lo", 0);
  alarm(240);
  const struct CMUnitTest tests[] = {
      /* first: it forks, and a process should fork before coll started threads */
      cmocka_unit_test(test_init_from_env),
      cmocka_unit_test(test_version_and_strings), cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_init_all_streams_split), cmocka_unit_test(test_nonblocking_init),
      cmocka_unit_test(test_abort_from_other_thread), cmocka_unit_test(test_timeout),
      cmocka_unit_test(test_one_rank_collectives),
      cmocka_unit_test(test_group_error_fails_group),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
