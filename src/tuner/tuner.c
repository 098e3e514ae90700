/* tuner.c - COLL_ALGO parsing (NCCL_ALGO-like syntax). */
#include "tuner/tuner.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "misc/log.h"
#include "misc/param.h"

static char collForced[COLL_FN_COUNT][32];
static pthread_once_t collTunerOnce = PTHREAD_ONCE_INIT;
static const char* collFnKeys[COLL_FN_COUNT] = {"allreduce", "allgather", "reducescatter", "broadcast",
                                                "reduce",    "send",      "recv"};

static void collTunerLoad(void) {
  const char* env = collParamStr(COLL_SPARAM_ALGO);
  if (!env || !*env) return;
  char buf[512];
  snprintf(buf, sizeof buf, "%s", env);
  char* save = NULL;
  for (char* tok = strtok_r(buf, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
    char* colon = strchr(tok, ':');
    if (!colon) { /* one name for every collective */
      for (int f = 0; f < COLL_FN_COUNT; f++) snprintf(collForced[f], sizeof collForced[f], "%s", tok);
      continue;
    }
    *colon = 0;
    int matched = 0;
    for (int f = 0; f < COLL_FN_COUNT; f++)
      if (strcasecmp(tok, collFnKeys[f]) == 0) {
        snprintf(collForced[f], sizeof collForced[f], "%s", colon + 1);
        matched = 1;
      }
    if (!matched) COLL_WARN(COLL_SUB_TUNE, "COLL_ALGO: unknown collective \"%s\" ignored", tok);
  }
}

const char* collTunerDefault(collFunc fn, int nranks, int nnodes) {
  int hierFn = fn == COLL_FN_ALLREDUCE || fn == COLL_FN_ALLGATHER || fn == COLL_FN_REDUCESCATTER;
  return hierFn && nnodes > 1 && nranks > nnodes ? "hier" : NULL;
}

const char* collAlgoOverride(collFunc fn) {
  pthread_once(&collTunerOnce, collTunerLoad);
  return collForced[fn][0] ? collForced[fn] : NULL;
}
