/*
 * i19_init_info.c - issue 19 "Messages": the INFO line at init said
 * "2 channels, chunk 524288 bytes" while the tuner picks other values per
 * call. It must say what init fixes and what the tuner decides per call,
 * and how to see the tuner's choices; and what it says must hold: the TUNE
 * log (the tuner's size ladder) uses more than one channel count when
 * nothing is fixed, and only the fixed one when COLL_NCHANNELS is set.
 * Each scenario runs in a fresh process (settings are read once).
 * Before the fix the first two checks of each scenario failed.
 */
#include <stdio.h>
#include <string.h>

#include "coll.h"
#include "helper_envchild.h"

/* Two ranks as threads of this process: with one rank the tuner has only
 * one channel count to choose. */
static int body(void* arg) {
  (void)arg;
  collComm_t c[2] = {NULL, NULL};
  if (collCommInitAll(c, 2, NULL) != collSuccess) {
    printf("INIT FAILED %s\n", collGetLastError(NULL));
    return 2;
  }
  return (collCommDestroy(c[0]) != collSuccess) + (collCommDestroy(c[1]) != collSuccess);
}

typedef struct {
  const char* what;
  const char* env[5];
  const char* says;       /* in the init line */
  int channelsInLadder;   /* -1: several counts; else only this one */
} scenarioT;

static int fails;

static void expect(const char* what, int cond) {
  printf("  %-62s %s\n", what, cond ? "ok" : "FAILED");
  if (!cond) fails++;
}

static void run(const scenarioT* s) {
  static char out[1 << 17];
  int rc = envChildRun(s->env, body, NULL, out, sizeof out, 60);
  printf("%s\n", s->what);
  const char* line = strstr(out, "[coll] INFO rank 0/2 pid");
  char init[1024] = "";
  if (line) {
    size_t n = strcspn(line, "\n");
    snprintf(init, sizeof init, "%.*s", (int)(n < sizeof init - 1 ? n : sizeof init - 1), line);
  }
  expect("init succeeds and logs its line", rc == 0 && init[0]);
  expect("the line says what the tuner picks per call, and how to see it",
         strstr(init, s->says) && strstr(init, "COLL_DEBUG_SUBSYS=TUNE") && strstr(init, "--show_algo"));
  expect("no bare \"2 channels, chunk 524288 bytes\"", !strstr(init, "; 2 channels, chunk 524288 bytes"));
  int counts[5] = {0}; /* ladder decisions per channel count 1..4 */
  for (const char* p = out; (p = strstr(p, "INFO tuner: ")) != NULL; p++) {
    const char* ch = strstr(p, " channels ");
    int k = 0;
    if (ch && sscanf(ch, " channels %d", &k) == 1 && k >= 1 && k <= 4) counts[k]++;
  }
  int kinds = (counts[1] > 0) + (counts[2] > 0) + (counts[3] > 0) + (counts[4] > 0);
  printf("  tuner ladder: %d x 1, %d x 2, %d x 3, %d x 4 channels\n", counts[1], counts[2], counts[3], counts[4]);
  if (s->channelsInLadder < 0)
    expect("the tuner's choices use several channel counts", kinds >= 2);
  else
    expect("every choice of the tuner uses the fixed channel count",
           kinds == 1 && counts[s->channelsInLadder] > 0);
  if (rc != 0 || fails) printf("  child said:\n%s\n", out);
}

int main(void) {
  const scenarioT scen[] = {
      {"nothing set", {"COLL_DEBUG=INFO", "COLL_DEBUG_SUBSYS=INIT,TUNE", NULL},
       "the tuner picks the algorithm, channel count and chunk size per collective call", -1},
      {"COLL_NCHANNELS=3", {"COLL_DEBUG=INFO", "COLL_DEBUG_SUBSYS=INIT,TUNE", "COLL_NCHANNELS=3", NULL},
       "the tuner picks the algorithm and chunk size per collective call", 3},
      {"COLL_NCHANNELS=3 COLL_CHUNKSIZE=65536",
       {"COLL_DEBUG=INFO", "COLL_DEBUG_SUBSYS=INIT,TUNE", "COLL_NCHANNELS=3", "COLL_CHUNKSIZE=65536", NULL},
       "every call: 3 channels (COLL_NCHANNELS), chunk 65536 bytes (COLL_CHUNKSIZE)", 3},
  };
  for (size_t i = 0; i < sizeof scen / sizeof scen[0]; i++) run(&scen[i]);
  printf("i19_init_info: %s\n", fails ? "FAILED" : "passed");
  return fails != 0;
}
