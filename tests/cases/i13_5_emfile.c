/*
 * i13_5_emfile - issue 13 point 5: at the open-file limit (ulimit -n 32),
 * the descriptors a shared-memory connection passes with SCM_RIGHTS are
 * dropped (MSG_CTRUNC). That must be "Too many open files" on both sides at
 * once, not both waiting for COLL_TIMEOUT.
 *
 * Recipe: RLIMIT_NOFILE 32, COLL_TIMEOUT=30.
 *  a) 8 ranks of `allreduce_perf -b 1M -e 1M -n 2 -c 1` started as torchrun
 *     starts them: every rank fails within 10 s; some receiver reports the
 *     dropped descriptors ("MSG_CTRUNC): Too many open files") naming the
 *     sender's pid, and that sender reports "process <receiver's pid>
 *     rejected this shared-memory connection ... Too many open files".
 *  b) `allreduce_perf -np 8` (its own launcher, which stops the other ranks
 *     after the first failure): fails with "Too many open files", not by a
 *     timeout (both within 100 s, start-up included: the sanitizer build
 *     starts 8 ranks slowly).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "helper_fail.h"

#define NR 8

static void lowLimit(int rank, int nranks, void* arg) {
  (void)rank, (void)nranks, (void)arg;
  struct rlimit rl = {32, 32};
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = 32;
  setrlimit(RLIMIT_NOFILE, &rl);
  setenv("COLL_TIMEOUT", "120", 1);
}

/* Rank of the pid named right after `key` in text, -1 if none. */
static int rankOfPidAfter(const pid_t* pids, const char* text, const char* key) {
  const char* p = strstr(text, key);
  if (!p) return -1;
  int pid = atoi(p + strlen(key));
  for (int k = 0; k < NR; k++)
    if (pids[k] == pid) return k;
  return -1;
}

static int torchrunStyle(void) {
  char* argv[] = {COLL_BENCH_DIR "/allreduce_perf", "-b", "1M", "-e", "1M", "-n", "2", "-c", "1", NULL};
  collLaunchSpec spec = {.nranks = NR, .timeoutSec = 60, .capture = 1, .argv = argv, .setup = lowLimit};
  collLaunch* L = collLaunchStart(&spec);
  if (!L) return 1;
  pid_t pids[NR];
  for (int k = 0; k < NR; k++) pids[k] = collLaunchPid(L, k);
  /* "at once": from the first rank's failure to the last one's (start-up,
   * slow under sanitizers, is not counted) */
  double t0 = failNow(), first = 0;
  int left;
  while ((left = collLaunchPoll(L)) > 0 && failNow() - t0 < 100 && (!first || failNow() - first < 10)) {
    if (!first && left < NR) first = failNow();
    usleep(5000);
  }
  if (!first) first = failNow();
  double took = failNow() - first;
  collLaunchWait(L, 1);
  int fails = 0, pairs = 0, failed = 0;
  const char* dropped = "were dropped by the kernel (MSG_CTRUNC): Too many open files";
  for (int r = 0; r < NR; r++) {
    const char* out = collLaunchOutput(L, r);
    failed += collLaunchExitCode(L, r) > 0 && !collLaunchTimedOut(L, r);
    if (strstr(out, "timed out")) {
      printf("rank %d timed out instead of failing at once\n", r);
      fails++;
    }
    if (!strstr(out, dropped)) continue;
    int s = rankOfPidAfter(pids, out, "a connection from process ");
    char want[96];
    snprintf(want, sizeof want, "process %d rejected this shared-memory connection", (int)pids[r]);
    const char* sout = s >= 0 ? collLaunchOutput(L, s) : "";
    int told = strstr(sout, want) && strstr(strstr(sout, want), "Too many open files");
    printf("rank %d (receiver) dropped the descriptors of rank %d; the sender %s\n", r, s,
           told ? "reports the rejection with \"Too many open files\"" : "does NOT report it");
    pairs += told;
  }
  printf("torchrun-style: %d of %d ranks failed, the last %.2f s after the first; %d receiver/sender pair(s) agree\n",
         failed, NR, took, pairs);
  if (failed != NR || took >= 10 || pairs == 0) fails++;
  if (fails) collLaunchReport(L);
  collLaunchFree(L);
  return fails;
}

static int ownLauncher(void) {
  char* argv[] = {COLL_BENCH_DIR "/allreduce_perf", "-np", "8", "-b", "1M", "-e", "1M", "-n", "2", "-c", "1", NULL};
  collLaunchSpec spec = {.nranks = 1, .timeoutSec = 60, .capture = 1, .argv = argv, .setup = lowLimit};
  collLaunch* L = collLaunchStart(&spec);
  if (!L) return 1;
  double t0 = failNow();
  while (collLaunchPoll(L) > 0 && failNow() - t0 < 100) usleep(5000);
  double took = failNow() - t0;
  collLaunchWait(L, 1);
  const char* out = collLaunchOutput(L, 0);
  int ok = collLaunchExitCode(L, 0) > 0 && !strstr(out, "timed out") && strstr(out, "Too many open files");
  printf("-np 8: exit %d after %.2f s, \"Too many open files\" %s\n", collLaunchExitCode(L, 0), took,
         strstr(out, "Too many open files") ? "reported" : "NOT reported");
  if (!ok) collLaunchReport(L);
  collLaunchFree(L);
  return !ok;
}

int main(void) {
  int fails = torchrunStyle() + ownLauncher();
  printf("%s\n", fails ? "FAILED" : "PASSED");
  return fails ? 1 : 0;
}
