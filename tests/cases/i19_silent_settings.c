/*
 * i19_silent_settings.c - issue 19 "Settings that fail silently": every
 * value that is not used as given produces one warning through the logger,
 * visible without COLL_DEBUG, once per process (two communicators are
 * created), with the host:pid prefix, saying what is used instead; and what
 * is used is what it says. A tuner plugin that cannot be loaded fails init.
 * Each scenario runs in a fresh process (settings are read once).
 * Before the fix each of these was accepted without a word (or, for the
 * plugin, a warning shown only with COLL_DEBUG set).
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll.h"
#include "core/comm.h"
#include "helper_envchild.h"
#include "misc/param.h"

enum { NOTHING, CHECK_ON, INIT_LOGGED, INIT_FAILS };

typedef struct {
  const char* what;
  const char* env[4];
  const char* warn; /* the warning (or, for INIT_FAILS, the error) expected once */
  int effect;       /* what else must hold */
} scenarioT;

static int body(void* arg) {
  const scenarioT* s = arg;
  printf("PID %d\n", (int)getpid());
  for (int i = 0; i < 2; i++) {
    collUniqueId id;
    collComm_t c = NULL;
    if (collGetUniqueId(&id) != collSuccess) return 2;
    collResult_t r = collCommInitRank(&c, 1, id, 0);
    if (s->effect == INIT_FAILS) {
      printf("INIT %d %s\n", (int)r, collGetLastError(NULL));
      if (r == collSuccess) collCommDestroy(c);
      continue;
    }
    if (r != collSuccess) {
      printf("INIT FAILED %s\n", collGetLastError(NULL));
      return 3;
    }
    int v = 0, out = -1;
    if (collAllReduce(&v, &out, 1, collInt32, collSum, c, NULL) != collSuccess || out != 0) return 4;
    printf("CHECK %d\n", c->checkCalls);
    collCommDestroy(c);
  }
  return 0;
}

/* A CPU this process may not run on, for COLL_PROGRESS_CPU. */
static int forbiddenCpu(void) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 99;
  if (!CPU_ISSET(99, &set)) return 99;
  for (int c = CPU_SETSIZE - 1; c >= 0; c--)
    if (!CPU_ISSET(c, &set)) return c;
  return -1;
}

static int run(const scenarioT* s) {
  static char out[1 << 16];
  int rc = envChildRun(s->env, body, (void*)s, out, sizeof out, 60);
  int pid = 0;
  const char* p = strstr(out, "PID ");
  if (p) sscanf(p, "PID %d", &pid);
  int bad = rc != 0;
  int warns = envChildLines(out, "[coll] WARN");
  if (s->effect == INIT_FAILS) {
    /* both inits fail with collInvalidArgument and the message; no need for COLL_DEBUG */
    char want[512];
    snprintf(want, sizeof want, "INIT %d %s", (int)collInvalidArgument, s->warn);
    if (envChildLines(out, want) != 2) bad = 1;
  } else {
    if (envChildLines(out, s->warn) != 1 || warns != 1 || !envChildPrefixed(out, s->warn, pid)) bad = 1;
  }
  if (s->effect == CHECK_ON && envChildLines(out, "CHECK 1") != 2) bad = 1;
  if (s->effect == NOTHING && envChildLines(out, "CHECK 0") != 2) bad = 1;
  /* logging still works where the setting was replaced by the default */
  if (s->effect == INIT_LOGGED && envChildLines(out, "[coll] INFO rank 0/1 pid") != 2) bad = 1;
  printf("%-30s %d warning line(s): %s\n", s->what, warns, bad ? "FAILED" : "ok");
  if (bad) printf("  expected once: %s\n  child said:\n%s\n", s->warn, out);
  return bad;
}

int main(void) {
  char cpuEnv[64], cpuWarn[160], fileEnv[128], fileWarn[300];
  int cpu = forbiddenCpu();
  snprintf(cpuEnv, sizeof cpuEnv, "COLL_PROGRESS_CPU=%d", cpu);
  snprintf(cpuWarn, sizeof cpuWarn, "COLL_PROGRESS_CPU=%d: this process may run on CPUs ", cpu);
  snprintf(fileEnv, sizeof fileEnv, "COLL_DEBUG_FILE=/nonexistent-coll-%d/x.log", (int)getpid());
  snprintf(fileWarn, sizeof fileWarn,
           "%s: cannot open /nonexistent-coll-%d/x.log for writing (No such file or directory); logging to stderr",
           fileEnv + strlen("COLL_DEBUG_FILE="), (int)getpid());
  char fileWarnFull[400];
  snprintf(fileWarnFull, sizeof fileWarnFull, "COLL_DEBUG_FILE=%s", fileWarn);
  const scenarioT scen[] = {
      {"COLL_DEBUG=garbage", {"COLL_DEBUG=garbage", NULL},
       "COLL_DEBUG=garbage is not WARN, INFO, TRACE or VERSION; using the default", NOTHING},
      {"COLL_DEBUG_SUBSYS=NOPE", {"COLL_DEBUG=INFO", "COLL_DEBUG_SUBSYS=NOPE", NULL},
       "COLL_DEBUG_SUBSYS=NOPE: unknown subsystem \"NOPE\"", INIT_LOGGED},
      {"COLL_DEBUG_SUBSYS=INIT,NOPE", {"COLL_DEBUG=INFO", "COLL_DEBUG_SUBSYS=INIT,NOPE", NULL},
       "unknown subsystem \"NOPE\" (known: INIT, BOOT, NET, COLL, ENGINE, TUNE or TUNING, ENV, ALL; ^ excludes); "
       "using INIT",
       INIT_LOGGED},
      {"COLL_NCHANNELS=9999", {"COLL_NCHANNELS=9999", NULL}, "COLL_NCHANNELS=9999 is above the maximum 64; using 64",
       NOTHING},
      {"COLL_NSOCKS_PERTHREAD=1000", {"COLL_NSOCKS_PERTHREAD=1000", NULL},
       "COLL_NSOCKS_PERTHREAD=1000 is above the maximum 16; using 16", NOTHING},
      {"COLL_PROGRESS_CPU=<not ours>", {cpuEnv, NULL}, cpuWarn, NOTHING},
      {"COLL_CHECK=2", {"COLL_CHECK=2", NULL}, "COLL_CHECK=2 is above the maximum 1; using 1", CHECK_ON},
      {"COLL_DEBUG_FILE=<missing dir>", {"COLL_DEBUG=INFO", "COLL_DEBUG_SUBSYS=INIT", fileEnv, NULL}, fileWarnFull,
       INIT_LOGGED},
      {"COLL_TUNER_PLUGIN=<missing>", {"COLL_TUNER_PLUGIN=/nonexistent/coll-tuner.so", NULL},
       "COLL_TUNER_PLUGIN=/nonexistent/coll-tuner.so cannot be loaded: ", INIT_FAILS},
  };
  int fails = 0;
  if (cpu < 0) printf("every CPU is ours: COLL_PROGRESS_CPU scenario checks CPU -1 (skipped)\n");
  for (size_t i = 0; i < sizeof scen / sizeof scen[0]; i++) {
    if (cpu < 0 && scen[i].env[0] == cpuEnv) continue;
    fails += run(&scen[i]);
  }
  printf("i19_silent_settings: %d failed\n", fails);
  return fails ? 1 : 0;
}
