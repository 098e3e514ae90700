/*
 * test_net_plugin.c - COLL_NET_PLUGIN: a transport built as its own shared
 * object (plugins/net_example.c) is loaded, becomes the default inter-node
 * transport, passes the shared transport checks, and carries collectives of
 * ranks as threads; the same transport built as an ABI v2 plugin
 * (collNetPlugin_v2) loads into a v3 table whose regMrDmaBuf says "not
 * supported" and carries collectives; a bad path, a library without either
 * table and one of another ABI version fail with messages that say so.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "coll.h"
#include "core/net.h"
#include "net_testlib.h"

static const collNet_t* plugin;

/* The child's side of expectLoadFailure (a fresh process: the plugin is
 * loaded once per process): 0 if the lookup of name fails with code and a
 * message containing want, and keeps failing (tcp is not silently used). */
static int childCheck(const char* path, const char* name, int code, const char* want) {
  setenv("COLL_NET_PLUGIN", path, 1);
  const collNet_t* n = NULL;
  collResult_t r = collNetGetInter(*name ? name : NULL, &n);
  int ok = (int)r == code && strstr(collGetLastError(NULL), want) != NULL;
  if (!ok) fprintf(stderr, "got %d: %s\n", (int)r, collGetLastError(NULL));
  return ok && (int)collNetGetInter("tcp", &n) == code ? 0 : 1;
}

static void expectLoadFailure(const char* path, const char* name, collResult_t code, const char* want) {
  fflush(stdout);
  pid_t p = fork();
  assert_true(p >= 0);
  if (p == 0) {
    char cs[16];
    snprintf(cs, sizeof cs, "%d", (int)code);
    execl("/proc/self/exe", "test_net_plugin", "--child", path, name ? name : "", cs, want, (char*)NULL);
    _exit(127);
  }
  int st = 0;
  assert_int_equal(waitpid(p, &st, 0), p);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_bad_plugins(void** st) {
  (void)st;
  expectLoadFailure("/nonexistent/libnet.so", NULL, collInvalidArgument,
                    "COLL_NET_PLUGIN=/nonexistent/libnet.so cannot be loaded");
  expectLoadFailure(COLL_NET_NOSYM, NULL, collInvalidArgument,
                    "exports neither collNetPlugin_v3 nor collNetPlugin_v2 (include/coll_net.h)");
  expectLoadFailure(COLL_NET_EXAMPLE_V1, "example", collInvalidArgument,
                    "collNetPlugin_v3 is transport ABI version 1; this coll needs version 3 there (collNetPlugin_v3 "
                    "of include/coll_net.h");
}

static void test_lookup(void** st) {
  (void)st;
  const collNet_t* n = NULL;
  assert_int_equal(collNetGetInter(NULL, &n), collSuccess);
  assert_ptr_equal(n, plugin);
  assert_int_equal(collNetGetInter("example", &n), collSuccess);
  assert_ptr_equal(n, plugin);
  assert_int_equal(collNetGetInter("tcp", &n), collSuccess);
  assert_string_equal(n->name, "tcp");
  assert_int_equal(collNetGetInter("nosuch", &n), collInvalidArgument);
  assert_non_null(strstr(collGetLastError(NULL), "have: tcp, loopback"));
  assert_non_null(strstr(collGetLastError(NULL), ", example"));
}

static void test_conformance(void** st) {
  (void)st;
  collNetProperties_t p;
  netCheckTable(plugin, "example", "example0", &p);
  netPair_t q;
  netMakePair(plugin, &q);
  netCheckStubs(plugin, &q);
  netCheckOversize(plugin, &q);
  /* the plugin's error went through the callbacks' setError */
  netClosePair(plugin, &q);
  netStreamOpts_t o = {100000, 1};
  netTestManyInFlight(plugin, &o);
  netTestTags(plugin, 70000);
  netTestTestDrivesEarlier(plugin);
}

/* All-reduce of 3 ranks as threads, every byte over the plugin. */
typedef struct {
  collComm_t comm;
  int rank;
  collResult_t r;
  int wrong;
} rankArg;

/* rank r contributes (r + 1) * (i % 7): the sum over n ranks is n (n + 1) / 2 times that */
static void allReduceRank(rankArg* k, int nranks) {
  enum { N = 300000 };
  float* x = malloc(N * sizeof *x);
  for (int i = 0; i < N; i++) x[i] = (float)(k->rank + 1) * (float)(i % 7);
  k->r = collAllReduce(x, x, N, collFloat, collSum, k->comm, NULL);
  const float f = (float)(nranks * (nranks + 1) / 2);
  for (int i = 0; i < N && k->r == collSuccess; i++) k->wrong += x[i] != f * (float)(i % 7);
  free(x);
}
static void* rankMain(void* a) {
  allReduceRank(a, 3);
  return NULL;
}
static void* rankMainN(void* a) {
  allReduceRank(a, 2);
  return NULL;
}

static void test_collectives(void** st) {
  (void)st;
  void* h = dlopen(COLL_NET_EXAMPLE, RTLD_NOW | RTLD_NOLOAD);
  assert_non_null(h);
  const uint64_t* sent = dlsym(h, "collNetExampleBytesSent");
  assert_non_null(sent);
  uint64_t before = *sent;
  collComm_t comms[3];
  assert_int_equal(collCommInitAll(comms, 3, NULL), collSuccess);
  rankArg a[3];
  pthread_t t[3];
  for (int i = 0; i < 3; i++) {
    a[i] = (rankArg){comms[i], i, collSuccess, 0};
    assert_int_equal(pthread_create(&t[i], NULL, rankMain, &a[i]), 0);
  }
  for (int i = 0; i < 3; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(a[i].r, collSuccess);
    assert_int_equal(a[i].wrong, 0);
  }
  for (int i = 0; i < 3; i++) assert_int_equal(collCommDestroy(comms[i]), collSuccess);
  /* a ring all-reduce sends 2 (n-1)/n of the vector per rank: 2.4 MB in all */
  assert_true(*sent - before >= 2 * 300000 * 4 * 2 / 3 * 3);
  dlclose(h);
}

/* The child's side of test_v2_plugin (a fresh process): 0 if the v2 plugin
 * loads as a v3 table, its regMrDmaBuf fails with a message and an
 * all-reduce of 2 ranks runs over it. */
static int childV2(void) {
  setenv("COLL_NET_PLUGIN", COLL_NET_EXAMPLE_V2, 1);
  char log[64];
  snprintf(log, sizeof log, "/tmp/coll_test_net_plugin_v2.%d.log", (int)getpid());
  setenv("COLL_DEBUG", "INFO", 1);
  setenv("COLL_DEBUG_FILE", log, 1);
  const collNet_t* n = NULL;
  if (collNetGetInter(NULL, &n) != collSuccess || strcmp(n->name, "example") != 0 || n->version != COLL_NET_VERSION ||
      n->size != sizeof(collNet_t)) {
    fprintf(stderr, "v2 plugin not loaded as v3: %s\n", collGetLastError(NULL));
    unlink(log);
    return 1;
  }
  /* the INFO line that says it is a v2 plugin */
  char text[8192] = "";
  FILE* f = fopen(log, "r");
  size_t got = f ? fread(text, 1, sizeof text - 1, f) : 0;
  text[got] = 0;
  if (f) fclose(f);
  unlink(log);
  if (!strstr(text, "is ABI version 2 (collNetPlugin_v2): loaded without regMrDmaBuf")) {
    fprintf(stderr, "no v2 INFO line in: %s\n", text);
    return 7;
  }
  void* mh = (void*)1;
  char buf[8];
  if (n->regMrDmaBuf(NULL, buf, 8, COLL_PTR_CUDA, 0, 3, &mh) != collInvalidUsage || mh != (void*)1 ||
      !strstr(collGetLastError(NULL), "transport plugin \"example\" is ABI version 2: regMrDmaBuf not supported")) {
    fprintf(stderr, "v2 regMrDmaBuf: %s\n", collGetLastError(NULL));
    return 2;
  }
  void* h = dlopen(COLL_NET_EXAMPLE_V2, RTLD_NOW | RTLD_NOLOAD);
  const uint64_t* sent = h ? dlsym(h, "collNetExampleBytesSent") : NULL;
  if (!sent) return 3;
  collComm_t comms[2];
  if (collCommInitAll(comms, 2, NULL) != collSuccess) return 4;
  rankArg a[2];
  pthread_t t[2];
  for (int i = 0; i < 2; i++) {
    a[i] = (rankArg){comms[i], i, collSuccess, 0};
    if (pthread_create(&t[i], NULL, rankMainN, &a[i]) != 0) return 5;
  }
  int bad = 0;
  for (int i = 0; i < 2; i++) {
    pthread_join(t[i], NULL);
    bad |= a[i].r != collSuccess || a[i].wrong != 0;
  }
  for (int i = 0; i < 2; i++) bad |= collCommDestroy(comms[i]) != collSuccess;
  /* ring all-reduce of 2 ranks: each sends the whole vector once in all */
  if (bad || *sent < 300000 * 4) {
    fprintf(stderr, "v2 all-reduce: bad %d, sent %llu\n", bad, (unsigned long long)*sent);
    return 6;
  }
  return 0;
}

static void test_v2_plugin(void** st) {
  (void)st;
  fflush(stdout);
  pid_t p = fork();
  assert_true(p >= 0);
  if (p == 0) {
    execl("/proc/self/exe", "test_net_plugin", "--child-v2", (char*)NULL);
    _exit(127);
  }
  int s = 0;
  assert_int_equal(waitpid(p, &s, 0), p);
  assert_true(WIFEXITED(s));
  assert_int_equal(WEXITSTATUS(s), 0);
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "--child-v2") == 0) return childV2();
  if (argc == 6 && strcmp(argv[1], "--child") == 0) return childCheck(argv[2], argv[3], atoi(argv[4]), argv[5]);
  setenv("COLL_NET_PLUGIN", COLL_NET_EXAMPLE, 1);
  setenv("COLL_SHM_DISABLE", "1", 1);
  setenv("COLL_MAILBOX_BYTES", "0", 1);
  setenv("COLL_SOCKET_IFNAME", "lo", 0);
  if (collNetGetInter(NULL, &plugin) != collSuccess || strcmp(plugin->name, "example") != 0) {
    fprintf(stderr, "cannot load %s: %s\n", COLL_NET_EXAMPLE, collGetLastError(NULL));
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_plugins),
      cmocka_unit_test(test_lookup),
      cmocka_unit_test(test_conformance),
      cmocka_unit_test(test_collectives),
      cmocka_unit_test(test_v2_plugin),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
