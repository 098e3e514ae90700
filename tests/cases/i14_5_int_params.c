/*
 * i14_5_int_params.c - issue 14 point 5: integer parameters are 64-bit end
 * to end. Each scenario runs in a fresh process (settings are read once per
 * process) with COLL_DEBUG unset, creates two 1-rank communicators and
 * prints the values in force: the parameter table's and the communicator's
 * (timeout, spin, channels). Expected, per scenario: the exact value in
 * force, and exactly one warning line from the logger (host:pid prefix)
 * saying what is used instead, or none for a valid value. Then, with
 * COLL_DEBUG=INFO, the printed table shows the value in force and a range
 * that holds the default and the value, on every integer row.
 * Before the fix: COLL_TIMEOUT=4294967297 gave a 1 s timeout,
 * COLL_SPIN_US=99999999999 a spin of 1215752191 us, and nothing was said.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll.h"
#include "core/comm.h"
#include "helper_envchild.h"
#include "misc/param.h"

typedef struct {
  const char* env;    /* NAME=VALUE */
  collIntParam param; /* the row it sets */
  long long value;    /* expected value in force */
  const char* warn;   /* expected warning text, NULL: none */
} scenarioT;

static const scenarioT kScen[] = {
    {"COLL_TIMEOUT=4294967297", COLL_PARAM_TIMEOUT, 2147483647,
     "COLL_TIMEOUT=4294967297 is above the maximum 2147483647; using 2147483647"},
    {"COLL_SPIN_US=99999999999", COLL_PARAM_SPIN, 10000000,
     "COLL_SPIN_US=99999999999 is above the maximum 10000000; using 10000000"},
    {"COLL_SPIN_US=99999999999999999999999", COLL_PARAM_SPIN, 10000000,
     "COLL_SPIN_US=99999999999999999999999 is above the maximum 10000000; using 10000000"},
    {"COLL_NCHANNELS=9999", COLL_PARAM_NCHANNELS, 64, "COLL_NCHANNELS=9999 is above the maximum 64; using 64"},
    {"COLL_TIMEOUT=abc", COLL_PARAM_TIMEOUT, 1800, "COLL_TIMEOUT=\"abc\" is not an integer; using the default 1800"},
    {"COLL_TIMEOUT=12abc", COLL_PARAM_TIMEOUT, 1800, "COLL_TIMEOUT=\"12abc\" is not an integer; using the default 1800"},
    {"COLL_TIMEOUT=", COLL_PARAM_TIMEOUT, 1800, "COLL_TIMEOUT is set but empty; using the default 1800"},
    {"COLL_TIMEOUT=-5", COLL_PARAM_TIMEOUT, 1800, "COLL_TIMEOUT=-5 is below the minimum 0; using the default 1800"},
    {"COLL_CHUNKSIZE=1e6", COLL_PARAM_CHUNKSIZE, 524288,
     "COLL_CHUNKSIZE=\"1e6\" is not an integer; using the default (the tuner decides per call)"},
    {"COLL_SHM_CMA_THRESHOLD=-7", COLL_PARAM_SHM_CMA_THRESHOLD, -1,
     "COLL_SHM_CMA_THRESHOLD=-7 is below the minimum -1; using the default -1"},
    {"COLL_TIMEOUT=0x20", COLL_PARAM_TIMEOUT, 32, NULL},
    {"COLL_TIMEOUT= 42 ", COLL_PARAM_TIMEOUT, 42, NULL},
    {"COLL_SPIN_US=5000000000", COLL_PARAM_SPIN, 10000000,
     "COLL_SPIN_US=5000000000 is above the maximum 10000000; using 10000000"},
};

/* The child: two communicators, then the values in force. */
static int body(void* arg) {
  const scenarioT* s = arg;
  printf("PID %d\n", (int)getpid());
  collComm_t c[2] = {NULL, NULL};
  for (int i = 0; i < 2; i++) {
    collUniqueId id;
    if (collGetUniqueId(&id) != collSuccess || collCommInitRank(&c[i], 1, id, 0) != collSuccess) {
      printf("INIT FAILED %s\n", collGetLastError(NULL));
      return 2;
    }
  }
  printf("VALUE %lld SET %d\n", (long long)collParamInt(s->param), collParamIsSet(s->param));
  printf("COMM timeout %d spin %d channels %d\n", c[0]->timeoutSec, c[0]->spinUs, c[0]->nchannels);
  for (int i = 0; i < 2; i++) collCommDestroy(c[i]);
  return 0;
}

static int checkScenario(const scenarioT* s) {
  static char out[1 << 16];
  const char* env[] = {s->env, NULL};
  int rc = envChildRun(env, body, (void*)s, out, sizeof out, 60);
  int pid = 0;
  long long v = 0;
  int timeout = 0, spin = 0, ch = 0, set = 0;
  const char* p = strstr(out, "PID ");
  if (p) sscanf(p, "PID %d", &pid);
  p = strstr(out, "VALUE ");
  int haveValue = p && sscanf(p, "VALUE %lld SET %d", &v, &set) == 2;
  p = strstr(out, "COMM ");
  int haveComm = p && sscanf(p, "COMM timeout %d spin %d channels %d", &timeout, &spin, &ch) == 3;
  int bad = rc != 0 || !haveValue || !haveComm || v != s->value;
  /* the communicator uses the same value (64-bit end to end, no truncation) */
  if (s->param == COLL_PARAM_TIMEOUT && timeout != s->value) bad = 1;
  if (s->param == COLL_PARAM_SPIN && spin != (s->value < 0 ? 1000 : s->value)) bad = 1;
  if (s->param == COLL_PARAM_NCHANNELS && ch != s->value) bad = 1;
  int warnings = envChildLines(out, "[coll] WARN");
  if (s->warn) {
    if (envChildLines(out, s->warn) != 1 || warnings != 1 || !envChildPrefixed(out, s->warn, pid)) bad = 1;
  } else if (warnings != 0) {
    bad = 1;
  }
  printf("%-40s value %lld (comm: timeout %d spin %d channels %d), %d warning(s): %s\n", s->env, v, timeout, spin, ch,
         warnings, bad ? "FAILED" : "ok");
  if (bad) printf("  expected value %lld, warning: %s\n  child said:\n%s\n", s->value, s->warn ? s->warn : "(none)", out);
  return bad;
}

/* COLL_DEBUG=INFO: the table shows the value in force; every integer row's
 * range holds its default and its value. */
static int checkTable(void) {
  static char out[1 << 17];
  const char* env[] = {"COLL_DEBUG=INFO", "COLL_DEBUG_SUBSYS=ENV", "COLL_TIMEOUT=4294967297", NULL};
  int rc = envChildRun(env, body, (void*)&kScen[0], out, sizeof out, 60);
  int bad = rc != 0;
  int rows = 0, rowsOk = 0, timeoutRow = 0;
  for (const char* line = out; line && *line;) {
    const char* end = strchr(line, '\n');
    const char* t = strstr(line, " int    default ");
    if (t && (!end || t < end)) {
      char name[64] = "";
      long long d, val, lo, hi;
      const char* nm = strstr(line, "[coll] INFO ");
      const char* r = strstr(t, " range [");
      rows++;
      if (nm && r && (!end || r < end) && sscanf(nm, "[coll] INFO %63s", name) == 1 &&
          sscanf(t, " int default %lld value %lld", &d, &val) == 2 && sscanf(r, " range [%lld, %lld]", &lo, &hi) == 2 &&
          lo <= d && d <= hi && lo <= val && val <= hi)
        rowsOk++;
      if (strcmp(name, "COLL_TIMEOUT") == 0 && val == 2147483647 && strstr(t, "(env)") && (!end || strstr(t, "(env)") < end))
        timeoutRow = 1;
    }
    line = end ? end + 1 : NULL;
  }
  /* printed by each of the two inits */
  if (rows != 2 * COLL_PARAM_COUNT_INT || rowsOk != rows || !timeoutRow) bad = 1;
  printf("COLL_DEBUG=INFO table (2 inits): %d of %d integer rows with a range that holds default and value, COLL_TIMEOUT "
         "shows 2147483647 (env): %s\n",
         rowsOk, rows, bad ? "FAILED" : "ok");
  if (bad) printf("  child said:\n%s\n", out);
  return bad;
}

int main(void) {
  int fails = 0;
  for (size_t i = 0; i < sizeof kScen / sizeof kScen[0]; i++) fails += checkScenario(&kScen[i]);
  fails += checkTable();
  printf("i14_5_int_params: %d failed\n", fails);
  return fails ? 1 : 0;
}
