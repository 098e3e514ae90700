/*
 * newuser2 finding 10, single-process messages:
 *  - a torchrun-style launch of 1 rank without a rendezvous address fails
 *    with "torchrun launched 1 rank but no rendezvous address" (was "1 ranks");
 *    2 ranks still read "2 ranks";
 *  - collGetErrorString(collTimeout) names no particular deadline (it said
 *    COLL_TIMEOUT also for init timeouts, which COLL_INIT_TIMEOUT bounds):
 *    the message of collGetLastError names the one that expired.
 * Instant.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"

static int fails;
#define CHECK(c, ...)                     \
  do {                                    \
    if (!(c)) {                           \
      fprintf(stderr, "FAIL: " __VA_ARGS__); \
      fprintf(stderr, "\n");              \
      fails++;                            \
    }                                     \
  } while (0)

static void initExpect(const char* size, const char* want) {
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", size, 1);
  collComm_t comm = NULL;
  collResult_t r = collCommInitFromEnv(&comm, NULL);
  const char* msg = collGetLastError(NULL);
  CHECK(r == collInvalidUsage, "WORLD_SIZE=%s: result %d (%s), want collInvalidUsage", size, (int)r,
        collGetErrorString(r));
  CHECK(strstr(msg, want) != NULL, "WORLD_SIZE=%s: message \"%s\" lacks \"%s\"", size, msg, want);
  printf("WORLD_SIZE=%s: %s\n", size, msg);
  if (r == collSuccess) collCommDestroy(comm);
}

int main(void) {
  static const char* const unset[] = {"COLL_COMM_ID", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
                                      "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "PMI_ID", "SLURM_JOB_ID",
                                      "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                      "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS"};
  for (size_t i = 0; i < sizeof unset / sizeof unset[0]; i++) unsetenv(unset[i]);
  initExpect("1", "torchrun launched 1 rank but no rendezvous address");
  initExpect("2", "torchrun launched 2 ranks but no rendezvous address");
  const char* t = collGetErrorString(collTimeout);
  printf("collTimeout: %s\n", t);
  CHECK(strncmp(t, "timeout", 7) == 0, "collTimeout's string \"%s\" does not start with \"timeout\"", t);
  CHECK(!strstr(t, "COLL_TIMEOUT") && !strstr(t, "collCommSetTimeout"),
        "collTimeout's string \"%s\" names one deadline (init timeouts are COLL_INIT_TIMEOUT's)", t);
  printf("%s\n", fails ? "FAILED" : "all passed");
  return fails ? 1 : 0;
}
