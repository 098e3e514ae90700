/*
 * algo_env.c - COLL_ALGO (algo_env.h): parsed once per process into one
 * list per collective, checked at every init so that a typo fails init with
 * the valid names instead of changing nothing or failing later calls.
 */
#include "tuner/algo_env.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "algorithms/algorithms.h"
#include "misc/log.h"
#include "misc/param.h"

#define ALGO_FNS (COLL_FN_REDUCE + 1) /* the collectives that have registry rows */
#define ALGO_SPEC_MAX 512
#define ALGO_MSG_MAX 1000

static const char* const kFnKeys[COLL_FN_COUNT] = {"allreduce", "allgather", "reducescatter", "broadcast",
                                                   "reduce",    "send",      "recv"};

static char algoSpec[ALGO_FNS][ALGO_SPEC_MAX]; /* "" = every algorithm */
static char algoError[ALGO_MSG_MAX];
static pthread_once_t algoOnce = PTHREAD_ONCE_INIT;

static int rowBuilds(int row, int fn) { return (collAlgoTable[row].funcMask & (1u << (unsigned)fn)) != 0; }

/* Row of the algorithm called name[0..len) among those that build fn, or -1. */
static int rowOf(int fn, const char* name, size_t len) {
  for (int i = 0; collAlgoTable[i].name; i++)
    if (rowBuilds(i, fn) && strlen(collAlgoTable[i].name) == len && strncasecmp(collAlgoTable[i].name, name, len) == 0)
      return i;
  return -1;
}

static uint64_t rowsOf(int fn) {
  uint64_t m = 0;
  for (int i = 0; collAlgoTable[i].name && i < 64; i++)
    if (rowBuilds(i, fn)) m |= 1ull << i;
  return m;
}

/* "ring, hier, tree": the names of the rows in mask. */
static void formatRows(uint64_t mask, char* buf, size_t len) {
  size_t o = 0;
  buf[0] = 0;
  for (int i = 0; collAlgoTable[i].name && i < 64; i++)
    if (mask & (1ull << i))
      o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%s%s", o ? ", " : "", collAlgoTable[i].name);
}

/* Calls fn(tok, len, arg) for each ','-separated, blank-trimmed, non-empty
 * name of list (after an optional '^', reported in *excl). Stops at the
 * first nonzero return and returns it. */
static int forEachName(const char* list, int* excl, int (*fn)(const char*, size_t, void*), void* arg) {
  while (*list == ' ' || *list == '\t') list++;
  *excl = *list == '^';
  if (*excl) list++;
  for (const char* p = list; *p;) {
    while (*p == ' ' || *p == '\t' || *p == ',') p++;
    const char* e = p;
    while (*e && *e != ',') e++;
    size_t len = (size_t)(e - p);
    while (len && (p[len - 1] == ' ' || p[len - 1] == '\t')) len--;
    if (len) {
      int r = fn(p, len, arg);
      if (r) return r;
    }
    p = e;
  }
  return 0;
}

typedef struct {
  int fn;
  uint64_t named;
  int count;
  const char* bad; /* first name that is not an algorithm of fn */
  size_t badLen;
} nameScan;

static int scanName(const char* tok, size_t len, void* arg) {
  nameScan* s = arg;
  int r = rowOf(s->fn, tok, len);
  s->count++;
  if (r < 0) {
    s->bad = tok;
    s->badLen = len;
    return 1;
  }
  s->named |= 1ull << r;
  return 0;
}

/* collAlgoSpecMask without setting the last error: the message goes to msg. */
static int specMask(int fn, const char* spec, uint64_t* mask, char* msg, size_t len) {
  char names[400];
  if (fn < 0 || fn >= ALGO_FNS) {
    snprintf(msg, len, "%s has no algorithms to choose from (point-to-point runs directly)",
             fn >= 0 && fn < COLL_FN_COUNT ? kFnKeys[fn] : "?");
    return -1;
  }
  formatRows(rowsOf(fn), names, sizeof names);
  nameScan s = {fn, 0, 0, NULL, 0};
  int excl;
  if (forEachName(spec, &excl, scanName, &s)) {
    snprintf(msg, len, "no algorithm %.*s for %s (COLL_ALGO); %s algorithms: %s", (int)s.badLen, s.bad, kFnKeys[fn],
             kFnKeys[fn], names);
    return -1;
  }
  if (s.count == 0) {
    snprintf(msg, len, "no algorithm named for %s in \"%s\" (COLL_ALGO); %s algorithms: %s", kFnKeys[fn], spec,
             kFnKeys[fn], names);
    return -1;
  }
  *mask = excl ? rowsOf(fn) & ~s.named : s.named;
  if (*mask == 0) {
    snprintf(msg, len, "\"%s\" excludes every %s algorithm (COLL_ALGO); %s algorithms: %s", spec, kFnKeys[fn],
             kFnKeys[fn], names);
    return -1;
  }
  return 0;
}

collResult_t collAlgoSpecMask(collFunc fn, const char* spec, uint64_t* mask) {
  char msg[ALGO_MSG_MAX];
  if (specMask((int)fn, spec ? spec : "", mask, msg, sizeof msg) != 0)
    return collSetError(collInvalidArgument, "%s", msg);
  return collSuccess;
}

typedef struct {
  const char* name;
  int found;
} nameFind;

static int findName(const char* tok, size_t len, void* arg) {
  nameFind* f = arg;
  if (strlen(f->name) == len && strncasecmp(f->name, tok, len) == 0) f->found = 1;
  return f->found;
}

/* 1 when list (with or without '^') names name. */
static int listHas(const char* list, const char* name) {
  nameFind f = {name, 0};
  int excl;
  forEachName(list, &excl, findName, &f);
  return f.found;
}

int collAlgoSpecAllows(const char* spec, const char* name) {
  if (!spec) return 1;
  int excl = spec[strspn(spec, " \t")] == '^';
  return listHas(spec, name) != excl;
}

/* ---- COLL_ALGO as a whole ---------------------------------------------------- */
static void algoFail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void algoFail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(algoError, sizeof algoError, fmt, ap);
  va_end(ap);
  memset(algoSpec, 0, sizeof algoSpec);
}

/* "^ring,tree" or "ring,tree" from the rows in named (canonical names). */
static void canonical(int excl, uint64_t named, char* buf, size_t len) {
  size_t o = (size_t)snprintf(buf, len, "%s", excl ? "^" : "");
  for (int i = 0; collAlgoTable[i].name && i < 64; i++)
    if (named & (1ull << i))
      o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%s%s", o > (size_t)excl ? "," : "", collAlgoTable[i].name);
}

/* "allreduce: ring, hier, ...; allgather: ..." */
static void formatAll(char* buf, size_t len) {
  size_t o = 0;
  char names[400];
  for (int f = 0; f < ALGO_FNS; f++) {
    formatRows(rowsOf(f), names, sizeof names);
    o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%s%s: %s", f ? "; " : "", kFnKeys[f], names);
  }
}

typedef struct {
  int known;
  const char* bad;
  size_t badLen;
} anyScan;

static int scanAny(const char* tok, size_t len, void* arg) {
  anyScan* s = arg;
  for (int f = 0; f < ALGO_FNS; f++)
    if (rowOf(f, tok, len) >= 0) {
      s->known++;
      return 0;
    }
  s->bad = tok;
  s->badLen = len;
  return 1;
}

/* An entry without a collective: applies to each collective that has one
 * of the names. */
static int applyBare(const char* env, const char* list) {
  anyScan a = {0, NULL, 0};
  int excl;
  if (forEachName(list, &excl, scanAny, &a)) {
    char all[ALGO_MSG_MAX];
    formatAll(all, sizeof all);
    algoFail("COLL_ALGO=\"%s\": no collective has an algorithm \"%.*s\"; algorithms: %s", env, (int)a.badLen, a.bad,
             all);
    return -1;
  }
  if (!a.known) {
    algoFail("COLL_ALGO=\"%s\": \"%s\" names no algorithm", env, list);
    return -1;
  }
  for (int f = 0; f < ALGO_FNS; f++) {
    /* the names of this entry that f has (the others are f's business) */
    uint64_t named = 0;
    for (int i = 0; collAlgoTable[i].name && i < 64; i++)
      if (rowBuilds(i, f) && listHas(list, collAlgoTable[i].name)) named |= 1ull << i;
    if (!named) continue;
    if (excl && (rowsOf(f) & ~named) == 0) {
      char names[400];
      formatRows(rowsOf(f), names, sizeof names);
      algoFail("COLL_ALGO=\"%s\" excludes every %s algorithm (%s)", env, kFnKeys[f], names);
      return -1;
    }
    canonical(excl, named, algoSpec[f], sizeof algoSpec[f]);
  }
  return 0;
}

static void algoLoad(void) {
  const char* env = collParamStr(COLL_SPARAM_ALGO);
  if (!env) return;
  char buf[ALGO_SPEC_MAX];
  if (strlen(env) >= sizeof buf) {
    algoFail("COLL_ALGO is longer than %zu characters", sizeof buf - 1);
    return;
  }
  snprintf(buf, sizeof buf, "%s", env);
  char* save = NULL;
  for (char* tok = strtok_r(buf, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
    while (*tok == ' ' || *tok == '\t') tok++;
    if (!*tok) continue;
    char* colon = strchr(tok, ':');
    if (!colon) {
      if (applyBare(env, tok) != 0) return;
      continue;
    }
    *colon = 0;
    char* key = tok;
    size_t kl = strlen(key);
    while (kl && (key[kl - 1] == ' ' || key[kl - 1] == '\t')) key[--kl] = 0;
    int f;
    for (f = 0; f < COLL_FN_COUNT; f++)
      if (strcasecmp(key, kFnKeys[f]) == 0) break;
    if (f == COLL_FN_COUNT) {
      algoFail("COLL_ALGO=\"%s\": unknown collective \"%s\"; collectives: allreduce, allgather, reducescatter, "
               "broadcast, reduce",
               env, key);
      return;
    }
    uint64_t mask;
    char msg[ALGO_MSG_MAX];
    if (specMask(f, colon + 1, &mask, msg, sizeof msg) != 0) {
      algoFail("COLL_ALGO=\"%s\": %s", env, msg);
      return;
    }
    int excl = colon[1 + strspn(colon + 1, " \t")] == '^';
    canonical(excl, excl ? rowsOf(f) & ~mask : mask, algoSpec[f], sizeof algoSpec[f]);
  }
}

const char* collAlgoOverride(collFunc fn) {
  pthread_once(&algoOnce, algoLoad);
  return (unsigned)fn < ALGO_FNS && algoSpec[fn][0] ? algoSpec[fn] : NULL;
}

collResult_t collAlgoCheckEnv(void) {
  pthread_once(&algoOnce, algoLoad);
  if (algoError[0]) return collSetError(collInvalidArgument, "%s", algoError);
  static int logged;
  if (collParamStr(COLL_SPARAM_ALGO) && !__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
    for (int f = 0; f < ALGO_FNS; f++)
      COLL_INFO(COLL_SUB_TUNE, "COLL_ALGO: %s uses %s", kFnKeys[f], algoSpec[f][0] ? algoSpec[f] : "every algorithm");
  return collSuccess;
}
