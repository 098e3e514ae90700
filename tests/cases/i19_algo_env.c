/*
 * i19_algo_env.c - issue 19: COLL_ALGO is validated at init and accepts
 * NCCL_ALGO's lists and '^' exclusion, also per collective.
 *  - an unknown name, an unknown collective, a name the collective lacks, or
 *    a list that excludes every algorithm of a collective: init fails with
 *    collInvalidArgument and a message that lists the valid names;
 *  - "^ring", "allreduce:^ring,tree", "allreduce:tree,rhd", "ring", a later
 *    entry replacing an earlier one, mixed case and blanks: init succeeds on
 *    3 ranks (threads) and the tuner's choice for every collective and size
 *    from 8 B to 8 MiB (x16) obeys the list; a 1M-float all-reduce under it is
 *    exact.
 * Each scenario runs in a fresh process (COLL_ALGO is read once).
 * Before the fix: typos were found only at the first collective (without the
 * valid names) and '^' was taken as an algorithm name.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll.h"
#include "core/comm.h"
#include "helper_envchild.h"
#include "tuner/tuner.h"

#define NR 3
static const char* const kFn[] = {"allreduce", "allgather", "reducescatter", "broadcast", "reduce"};

typedef struct {
  const char* algo;        /* COLL_ALGO */
  const char* error;       /* expected init error text, or NULL */
  const char* allowed[5];  /* per collective: "" any, else "|a|b|" allowed names, or "^|a|" excluded */
} scenarioT;

typedef struct {
  collComm_t comm;
  float* buf;
  collResult_t r;
} arArg;

static void* arThread(void* p) {
  arArg* a = p;
  a->r = collAllReduce(a->buf, a->buf, (1u << 20) + 3, collFloat, collSum, a->comm, NULL);
  return NULL;
}

static int body(void* arg) {
  const scenarioT* s = arg;
  if (s->error) {
    collUniqueId id;
    collComm_t c = NULL;
    if (collGetUniqueId(&id) != collSuccess) return 2;
    collResult_t r = collCommInitRank(&c, 1, id, 0);
    printf("INIT %d %s\n", (int)r, collGetLastError(NULL));
    if (r == collSuccess) collCommDestroy(c);
    return 0;
  }
  collComm_t comms[NR];
  if (collCommInitAll(comms, NR, NULL) != collSuccess) {
    printf("INIT FAILED %s\n", collGetLastError(NULL));
    return 3;
  }
  for (int fn = 0; fn < 5; fn++) {
    const char* ov = collAlgoOverride((collFunc)fn);
    for (size_t bytes = 8; bytes <= ((size_t)64 << 20); bytes *= 16) {
      collTuneChoice c;
      collResult_t r = collTunerChoose(comms[0], (collFunc)fn, bytes / 4, collFloat, ov, 0, &c);
      printf("CHOICE %s %zu %s\n", kFn[fn], bytes, r == collSuccess && c.algo ? c.algo->name : "ERROR");
    }
  }
  arArg a[NR];
  pthread_t th[NR];
  size_t n = (1u << 20) + 3;
  for (int r = 0; r < NR; r++) {
    a[r].comm = comms[r];
    a[r].buf = malloc(n * sizeof(float));
    if (!a[r].buf) return 4;
    for (size_t i = 0; i < n; i++) a[r].buf[i] = (float)(r + 1) * (float)(i % 5);
    pthread_create(&th[r], NULL, arThread, &a[r]);
  }
  int wrong = 0;
  for (int r = 0; r < NR; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < NR; r++) {
    if (a[r].r != collSuccess) wrong++;
    for (size_t i = 0; i < n && !wrong; i++)
      if (a[r].buf[i] != 6.0f * (float)(i % 5)) wrong++;
    free(a[r].buf);
  }
  printf("ALLREDUCE %s\n", wrong ? "WRONG" : "EXACT");
  for (int r = 0; r < NR; r++) collCommDestroy(comms[r]);
  return 0;
}

/* 1 when name obeys the rule ("" any; "|a|b|" one of; "^|a|" none of). */
static int obeys(const char* rule, const char* name) {
  if (!rule[0]) return strcmp(name, "ERROR") != 0;
  char key[80];
  snprintf(key, sizeof key, "|%.64s|", name);
  int listed = strstr(rule, key) != NULL;
  return rule[0] == '^' ? !listed && strcmp(name, "ERROR") != 0 : listed;
}

static int run(const scenarioT* s) {
  static char out[1 << 16];
  char env[300];
  snprintf(env, sizeof env, "COLL_ALGO=%s", s->algo);
  const char* envs[] = {env, NULL};
  int rc = envChildRun(envs, body, (void*)s, out, sizeof out, 120);
  int bad = rc != 0, choices = 0;
  if (s->error) {
    char init[32];
    snprintf(init, sizeof init, "INIT %d COLL_ALGO=", (int)collInvalidArgument);
    if (envChildLines(out, init) != 1 || envChildLines(out, s->error) != 1) bad = 1;
  } else {
    for (const char* line = strstr(out, "CHOICE "); line; line = strstr(line + 1, "CHOICE ")) {
      char fn[32], name[64];
      size_t bytes;
      if (sscanf(line, "CHOICE %31s %zu %63s", fn, &bytes, name) != 3) continue;
      choices++;
      for (int f = 0; f < 5; f++)
        if (strcmp(fn, kFn[f]) == 0 && !obeys(s->allowed[f], name)) {
          printf("  %s %zu bytes -> %s breaks \"%s\"\n", fn, bytes, name, s->allowed[f]);
          bad = 1;
        }
    }
    if (choices != 5 * 6 || envChildLines(out, "ALLREDUCE EXACT") != 1) bad = 1;
  }
  printf("COLL_ALGO=%-40s %s\n", s->algo, bad ? "FAILED" : "ok");
  if (bad) printf("  child said:\n%s\n", out);
  return bad;
}

int main(void) {
  static const scenarioT scen[] = {
      {"rnig",
       "COLL_ALGO=\"rnig\": no collective has an algorithm \"rnig\"; algorithms: allreduce: ring, hier, tree, rhd",
       {0}},
      {"rnig", "; allgather: ring, hier, bruck, direct, zerocopy; reducescatter: ring, hier, rhd, direct, zerocopy; broadcast: "
               "chain, binomial; reduce: chain, binomial", {0}},
      {"allredcue:ring",
       "COLL_ALGO=\"allredcue:ring\": unknown collective \"allredcue\"; collectives: allreduce, allgather, "
       "reducescatter, broadcast, reduce",
       {0}},
      {"allgather:tree",
       "COLL_ALGO=\"allgather:tree\": no algorithm tree for allgather (COLL_ALGO); allgather algorithms: ring, hier, "
       "bruck, direct",
       {0}},
      {"^chain,binomial", "COLL_ALGO=\"^chain,binomial\" excludes every broadcast algorithm (chain, binomial)", {0}},
      {"broadcast:^chain,binomial", "excludes every broadcast algorithm", {0}},
      {"ring;reduce:", "no algorithm named for reduce", {0}},
      {"^ring", NULL, {"^|ring|", "^|ring|", "^|ring|", "", ""}},
      {"allreduce:^ring,tree", NULL, {"^|ring|tree|", "", "", "", ""}},
      {"allreduce:tree,rhd", NULL, {"|tree|rhd|", "", "", "", ""}},
      {"ring", NULL, {"|ring|", "|ring|", "|ring|", "", ""}},
      {"allreduce:ring;allreduce:direct;broadcast:binomial", NULL, {"|direct|", "", "", "|binomial|", ""}},
      {" AllReduce : Tree ; broadcast:^ CHAIN ", NULL, {"|tree|", "", "", "|binomial|", ""}},
  };
  int fails = 0;
  for (size_t i = 0; i < sizeof scen / sizeof scen[0]; i++) fails += run(&scen[i]);
  printf("i19_algo_env: %d failed\n", fails);
  return fails ? 1 : 0;
}
