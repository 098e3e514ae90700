/*
 * i19_launcher_vars.c - issue 19, "Launcher variables": a wrong launcher
 * variable is an error that names the variable and its value, never a
 * 1-rank job, a hang or a silently used default.
 *
 * Each scenario is one rank process started as torchrun starts it
 * (helper_launch), with the scenario's variables changed before
 * collCommInitFromEnv; it must fail at once with collInvalidArgument and a
 * message containing every expected fragment. The same for allreduce_perf
 * run under those variables (no -np): it must exit non-zero and print the
 * variable. A valid 1-rank and 2-rank job are the controls.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll.h"
#include "helper_launch.h"

typedef struct {
  const char* set[4][2]; /* name, value (NULL value: unset) */
  const char* expect[3]; /* fragments of the message */
} scenario;

static const scenario cases[] = {
    {{{"WORLD_SIZE", "0"}}, {"WORLD_SIZE=0"}},
    {{{"WORLD_SIZE", NULL}}, {"RANK=0", "WORLD_SIZE"}},
    {{{"RANK", NULL}}, {"WORLD_SIZE=1", "RANK"}},
    {{{"RANK", "2"}, {"WORLD_SIZE", "2"}}, {"RANK=2", "WORLD_SIZE=2"}},
    {{{"RANK", "-1"}}, {"RANK=-1"}},
    {{{"RANK", "abc"}}, {"RANK=abc"}},
    {{{"WORLD_SIZE", "99999999999"}}, {"WORLD_SIZE=99999999999"}},
    {{{"WORLD_SIZE", "4x"}}, {"WORLD_SIZE=4x"}},
    {{{"MASTER_PORT", "abc"}}, {"MASTER_PORT=abc"}},
    {{{"MASTER_PORT", "65535"}}, {"MASTER_PORT=65535"}},
    {{{"MASTER_PORT", "0"}}, {"MASTER_PORT=0"}},
    {{{"MASTER_PORT", "-5"}}, {"MASTER_PORT=-5"}},
    {{{"MASTER_PORT", "80x"}}, {"MASTER_PORT=80x"}},
    {{{"MASTER_PORT", "99999999999999999999"}}, {"MASTER_PORT=99999999999999999999"}},
    {{{"MASTER_PORT", NULL}}, {"MASTER_ADDR=127.0.0.1", "MASTER_PORT"}},
    {{{"MASTER_ADDR", NULL}}, {"MASTER_PORT=", "MASTER_ADDR"}},
    {{{"RANK", NULL}, {"WORLD_SIZE", NULL}, {"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "0"}},
     {"OMPI_COMM_WORLD_SIZE=0"}},
    {{{"RANK", NULL}, {"WORLD_SIZE", NULL}, {"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "2"}},
     {"SLURM_PROCID=3", "SLURM_NTASKS=2"}},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static void setupCase(int rank, int nranks, void* arg) {
  const scenario* s = arg;
  (void)rank;
  (void)nranks;
  for (int i = 0; i < 4 && s->set[i][0]; i++) {
    if (s->set[i][1]) setenv(s->set[i][0], s->set[i][1], 1);
    else unsetenv(s->set[i][0]);
  }
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* In the rank: init must fail at once with the expected message. */
static int bodyExpectError(int rank, int nranks, void* arg) {
  const scenario* s = arg;
  collComm_t comm = NULL;
  double t0 = now();
  collResult_t r = collCommInitFromEnv(&comm, NULL);
  double dt = now() - t0;
  const char* msg = collGetLastError(NULL);
  int bad = 0;
  if (r == collSuccess) {
    printf("init succeeded (a %d-rank job?)\n", nranks);
    collCommDestroy(comm);
    return 1;
  }
  if (r != collInvalidArgument) {
    printf("result %d (%s), expected collInvalidArgument\n", r, collGetErrorString(r));
    bad++;
  }
  for (int i = 0; i < 3 && s->expect[i]; i++)
    if (!strstr(msg, s->expect[i])) {
      printf("message lacks '%s'\n", s->expect[i]);
      bad++;
    }
  if (dt > 2.0) {
    printf("took %.2f s\n", dt);
    bad++;
  }
  printf("message: %s\n", msg);
  return bad ? 1 : 0;
}

static int bodyOk(int rank, int nranks, void* arg) {
  (void)arg;
  collComm_t comm;
  collResult_t r = collCommInitFromEnv(&comm, NULL);
  if (r != collSuccess) {
    printf("rank %d: init failed: %s\n", rank, collGetLastError(NULL));
    return 1;
  }
  float x = (float)(rank + 1), y = 0;
  r = collAllReduce(&x, &y, 1, collFloat, collSum, comm, NULL);
  int bad = r != collSuccess || y != (float)(nranks * (nranks + 1) / 2);
  if (bad) printf("rank %d: allreduce %d gave %g\n", rank, r, y);
  return collCommDestroy(comm) != collSuccess || bad;
}

int main(void) {
  int fails = 0;
  for (int i = 0; i < NCASES; i++) {
    collLaunchSpec spec = {.nranks = 1, .timeoutSec = 20, .capture = 1, .body = bodyExpectError,
                           .setup = setupCase, .arg = (void*)&cases[i]};
    collLaunch* L = collLaunchStart(&spec);
    int bad = !L || collLaunchWait(L, 0) != 0;
    printf("case %2d (%s=%s ...): %s\n", i, cases[i].set[0][0], cases[i].set[0][1] ? cases[i].set[0][1] : "<unset>",
           bad ? "FAIL" : "ok");
    if (bad && L) collLaunchReport(L);
    else if (L) fputs(collLaunchOutput(L, 0), stdout);
    collLaunchFree(L);
    fails += bad;
  }
  /* the benchmark under the same variables: an error naming them, not a 1-rank run */
  for (int i = 0; i < 3; i++) {
    char* argv[] = {COLL_BENCH_DIR "/allreduce_perf", "-b", "8", "-e", "8", "-n", "1", "-w", "0", "-c", "1", NULL};
    collLaunchSpec spec = {.nranks = 1, .timeoutSec = 20, .capture = 1, .argv = argv, .setup = setupCase,
                           .arg = (void*)&cases[i]};
    collLaunch* L = collLaunchStart(&spec);
    int bad = !L;
    if (L) {
      collLaunchWait(L, 0);
      const char* out = collLaunchOutput(L, 0);
      bad = collLaunchExitCode(L, 0) == 0 || !strstr(out, cases[i].expect[0]);
      if (bad) collLaunchReport(L);
    }
    printf("allreduce_perf case %d: %s\n", i, bad ? "FAIL" : "ok");
    collLaunchFree(L);
    fails += bad;
  }
  /* controls: valid jobs */
  for (int n = 1; n <= 2; n++) {
    collLaunchSpec spec = {.nranks = n, .timeoutSec = 60, .capture = 1, .body = bodyOk};
    int bad = collLaunchRun(&spec) != 0;
    printf("valid %d-rank job: %s\n", n, bad ? "FAIL" : "ok");
    fails += bad;
  }
  printf("%d passed, %d failed\n", NCASES + 5 - fails, fails);
  return fails ? 1 : 0;
}
