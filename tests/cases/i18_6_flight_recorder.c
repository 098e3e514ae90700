/*
 * i18_6_flight_recorder.c - issue 18, tests: the flight recorder answers
 * "who stopped, and where". 3 processes run 5 all-reduces; then rank 2
 * stays away while ranks 0 and 1 enter a 6th (256 KiB, a schedule) with a
 * 1.5 s per-call timeout. Their timeouts dump the flight recorder to
 * COLL_FR_FILE by themselves (reason "timeout"); rank 2 dumps on
 * COLL_FR_SIGNAL (it raises the signal on itself). From the three files
 * tools/coll_report fr names rank 2 as the rank the others waited for, and
 * says rank 2's last collective is #4; each dump of ranks 0 and 1 holds
 * collective #5 as failed with the peer it waited on.
 * Before issue 18 there was no flight recorder (the test did not build).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll.h"
#include "../integration/mp_harness.h"

#define N 3
#define LARGE 65536

static char dir[64];

static int body(collComm_t comm, int rank, int n, void* arg) {
  (void)arg;
  (void)n;
  static float in[LARGE], out[LARGE];
  for (int i = 0; i < 5; i++)
    if (collAllReduce(in, out, i < 3 ? 64 : LARGE, collFloat, collSum, comm, NULL) != collSuccess) return 1;
  if (rank == 2) {
    raise(SIGUSR1); /* COLL_FR_SIGNAL=10: the dump thread writes COLL_FR_FILE */
    char path[128], p0[128], p1[128];
    snprintf(path, sizeof path, "%s/fr.2.json", dir);
    snprintf(p0, sizeof p0, "%s/fr.0.json", dir);
    snprintf(p1, sizeof p1, "%s/fr.1.json", dir);
    for (int i = 0; i < 3000 && access(path, R_OK) != 0; i++) usleep(10000);
    /* stays away from collective #5 until the others timed out: their
     * timeouts write their dumps; while this rank is here nothing else fails
     * them (a fixed 3 s stands in for that on a quiet machine only) */
    for (int i = 0; i < 6000 && (access(p0, R_OK) != 0 || access(p1, R_OK) != 0); i++) usleep(10000);
    return access(path, R_OK) != 0;
  }
  collCommSetCallTimeout(comm, 1500);
  collResult_t r = collAllReduce(in, out, LARGE, collFloat, collSum, comm, NULL);
  if (r != collTimeout && r != collRemoteError) {
    printf("rank %d: collective #5 returned %d, want a timeout\n", rank, (int)r);
    return 1;
  }
  collCallRecord_t rec[8];
  int k = 0;
  collCommGetCallRecords(comm, rec, 8, &k);
  if (k != 6 || strcmp(rec[5].state, "failed") != 0 || rec[5].seq != 5 || rec[5].waitPeer < 0) {
    printf("rank %d: last record: %d records, state %s seq %llu waitPeer %d\n", rank, k, k ? rec[k - 1].state : "-",
           k ? (unsigned long long)rec[k - 1].seq : 0ull, k ? rec[k - 1].waitPeer : -9);
    return 1;
  }
  return 0;
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/coll_i18_6.%d", (int)getpid());
  char cmd[512], spec[128];
  snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
  if (system(cmd) != 0) return 1;
  snprintf(spec, sizeof spec, "%s/fr.%%r.json", dir);
  setenv("COLL_FR_FILE", spec, 1);
  setenv("COLL_FR_SIGNAL", "10", 1);
  int fails = collMpRun(N, 120, body, NULL) != 0;
  snprintf(cmd, sizeof cmd, "%s/tools/coll_report fr %s/fr.0.json %s/fr.1.json %s/fr.2.json > %s/report.txt 2>&1",
           COLL_SOURCE_DIR, dir, dir, dir, dir);
  int rc = system(cmd);
  snprintf(cmd, sizeof cmd, "cat %s/report.txt", dir);
  if (system(cmd) != 0) fails++;
  snprintf(cmd, sizeof cmd,
           "grep -q '^waited for: rank 2 .*ranks \\[0, 1\\] wait in collective #5 .*its last collective is #4' %s/report.txt && "
           "grep -q '\"reason\":\"timeout\"' %s/fr.0.json && grep -q '\"reason\":\"signal\"' %s/fr.2.json",
           dir, dir, dir);
  if (rc != 0 || system(cmd) != 0) {
    printf("the report does not name rank 2 (or a dump's reason is wrong)\n");
    fails++;
  }
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fails++;
  printf("%s\n", fails ? "FAIL" : "PASS");
  return fails != 0;
}
