/*
 * i17_3_allgather_cma_refused.c - the single-copy all-gather
 * (engine/cmagather.c) when a rank's memory cannot be read: every rank
 * falls back to the usual path in that call (exact results) and the
 * communicator never tries single copy again (comm->cmaGatherOff), even
 * after the reads would work.
 *
 * A real refusal, not a fault hook: the last rank makes itself not dumpable
 * (prctl PR_SET_DUMPABLE 0), and every rank has dropped CAP_SYS_PTRACE (main,
 * before the fork; as root it would override), so process_vm_readv of the
 * last rank's memory by the others fails with EPERM. Each step is checked
 * by a read of its own (a variable at the same address in every forked
 * rank), so the case cannot pass with reads that were never refused.
 *
 * 2 and 3 ranks, COLL_SHM_CMA_THRESHOLD=262144 (single copy on whatever this
 * machine measures), blocks of 1 MiB (int32 r * 7919 + i):
 *   1. last rank not dumpable: the others' probe read gets EPERM; an
 *      all-gather is exact, no call under "zerocopy", cmaGatherOff set on
 *      every rank;
 *   2. last rank dumpable again: the probe reads work; two more all-gathers
 *      are exact, still no call under "zerocopy" (none tried again: with
 *      cmaGatherOff ignored they would run single copy and count).
 */
#include <errno.h>
#include <linux/capability.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../integration/mp_harness.h"
#include "core/comm.h"
#include "helper_check.h"
#include "helper_zc.h"
#include "transports/shm/shm.h"

#define COUNT ((size_t)1 << 18) /* int32 per rank: 1 MiB */

static volatile uint64_t probe = 0x70726f6265ull; /* read by the probes: the same address in every rank */

/* Drops CAP_SYS_PTRACE from this thread's effective and permitted sets (the
 * children and their threads inherit it); 0 or an errno value. */
static int dropPtraceCap(void) {
  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct d[2];
  if (syscall(SYS_capget, &h, d) != 0) return errno;
  d[CAP_SYS_PTRACE / 32].effective &= ~(1u << (CAP_SYS_PTRACE % 32));
  d[CAP_SYS_PTRACE / 32].permitted &= ~(1u << (CAP_SYS_PTRACE % 32));
  return syscall(SYS_capset, &h, d) == 0 ? 0 : errno;
}

/* Every rank waits for all (a one-int all-reduce through the mailbox). */
static collResult_t barrier(collComm_t comm) {
  int v = 1;
  return collAllReduce(&v, &v, 1, collInt32, collSum, comm, NULL);
}

/* One all-gather of COUNT int32 per rank: 0 or the number of wrong elements
 * (a failed call counts as 1). */
static size_t gather(collComm_t comm, int32_t* send, int32_t* recv, int rank, int nranks) {
  for (size_t i = 0; i < COUNT; i++) send[i] = (int32_t)((uint32_t)rank * 7919u + (uint32_t)i);
  memset(recv, 0xee, COUNT * sizeof(int32_t) * (size_t)nranks);
  if (collAllGather(send, recv, COUNT, collInt32, comm, NULL) != collSuccess) {
    printf("rank %d: all-gather failed: %s\n", rank, collGetLastError(comm));
    return 1;
  }
  size_t wrong = 0;
  for (int q = 0; q < nranks; q++)
    for (size_t i = 0; i < COUNT; i++) wrong += recv[(size_t)q * COUNT + i] != (int32_t)((uint32_t)q * 7919u + (uint32_t)i);
  return wrong;
}

static int body(collComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  int fails = 0, last = nranks - 1;
  int32_t* send = malloc(COUNT * sizeof(int32_t));
  int32_t* recv = malloc(COUNT * sizeof(int32_t) * (size_t)nranks);
  if (!send || !recv) return 1;
  uint64_t seen = 0;
  /* 1: the last rank cannot be read */
  if (rank == last) CHECK_RANKED(prctl(PR_SET_DUMPABLE, 0) == 0, "PR_SET_DUMPABLE 0: %s", strerror(errno));
  CHECK_RANKED(barrier(comm) == collSuccess, "barrier: %s", collGetLastError(comm));
  int want = rank == last ? 0 : EPERM, got = collShmCmaCopy((int)comm->peers[last].pid, &seen, (uint64_t)(uintptr_t)&probe,
                                                            sizeof seen);
  CHECK_RANKED(got == want, "probe read of rank %d not dumpable: %s, want %s", last, strerror(got), strerror(want));
  CHECK_RANKED(!comm->cmaGatherOff, "single copy off before any all-gather");
  size_t wrong = gather(comm, send, recv, rank, nranks);
  CHECK_RANKED(wrong == 0, "all-gather with rank %d unreadable: %zu elements wrong", last, wrong);
  CHECK_RANKED(zcCalls(comm) == 0, "%llu calls under zerocopy with rank %d unreadable, want 0",
               (unsigned long long)zcCalls(comm), last);
  CHECK_RANKED(comm->cmaGatherOff == 1, "cmaGatherOff %d after a refused read, want 1", comm->cmaGatherOff);
  /* 2: readable again; the communicator does not try again */
  CHECK_RANKED(barrier(comm) == collSuccess, "barrier: %s", collGetLastError(comm));
  if (rank == last) CHECK_RANKED(prctl(PR_SET_DUMPABLE, 1) == 0, "PR_SET_DUMPABLE 1: %s", strerror(errno));
  CHECK_RANKED(barrier(comm) == collSuccess, "barrier: %s", collGetLastError(comm));
  seen = 0;
  got = collShmCmaCopy((int)comm->peers[last].pid, &seen, (uint64_t)(uintptr_t)&probe, sizeof seen);
  CHECK_RANKED(got == 0 && seen == probe, "probe read of rank %d dumpable again: %s", last, strerror(got));
  for (int k = 0; k < 2; k++) {
    wrong = gather(comm, send, recv, rank, nranks);
    CHECK_RANKED(wrong == 0, "all-gather %d after the refusal: %zu elements wrong", k + 2, wrong);
  }
  CHECK_RANKED(zcCalls(comm) == 0, "%llu calls under zerocopy after the refusal, want 0 (tried again)",
               (unsigned long long)zcCalls(comm));
  free(send);
  free(recv);
  return fails;
}

int main(void) {
  int e = dropPtraceCap();
  if (e) {
    printf("i17_3_allgather_cma_refused: cannot drop CAP_SYS_PTRACE: %s\n", strerror(e));
    return 1;
  }
  int rc = 0;
  for (int n = 2; n <= 3 && rc == 0; n++) rc = collMpRun(n, 120, body, NULL);
  printf("i17_3_allgather_cma_refused: %s\n", rc ? "FAILED" : "passed");
  return rc;
}
