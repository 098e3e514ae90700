/*
 * shm_cma.c - single copy between processes (cross-memory attach) for the
 * shm transport: the read itself and the once-per-process decision whether
 * to use it at all.
 *
 * process_vm_readv copies straight from another process's memory, but it
 * pins every page on the way, which on some kernels and virtual machines
 * makes it several times slower than memcpy. Two memcpys through the ring
 * (sender and receiver working in parallel, pipelined) then beat one slow
 * copy: on the 2-core VM this was written on process_vm_readv ran at 0.3-0.5
 * of memcpy's speed and a 4-rank all-reduce of 64 MiB was 20-40% faster by
 * copying. So with COLL_SHM_CMA_THRESHOLD unset (-1) the first use measures
 * both on 4 MiB (larger than most L2 caches; best of 3, a few milliseconds,
 * once per process) and turns single copy on (from 256 KiB) only when
 * process_vm_readv reaches 70% of memcpy's speed. 0 or a size overrides it.
 *
 * That decision is this process's own: two processes of a node measure
 * separately and, near 70%, can decide differently. A connection therefore
 * uses shmCmaAgree of both ends' thresholds (exchanged at connect,
 * shm_setup.c), so its two ends always run the same protocol.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "misc/log.h"
#include "misc/param.h"
#include "misc/socket.h"
#include "transports/shm/shm_internal.h"

#define SHM_CMA_DEFAULT (256u << 10) /* threshold when single copy is worth it */
#define SHM_CAL_BYTES (4u << 20)
#define SHM_CAL_ROUNDS 3

static pthread_once_t shmCmaOnce = PTHREAD_ONCE_INIT;
static size_t shmCmaTh;
static char shmCmaWhy[200];

/* process_vm_readv in a loop over partial reads (see shm.h). */
int collShmCmaCopy(int pid, void* dst, uint64_t addr, size_t len) {
  size_t done = 0;
  while (done < len) {
    struct iovec l = {(char*)dst + done, len - done}, rm = {(void*)(uintptr_t)(addr + done), len - done};
    ssize_t n = process_vm_readv(pid, &l, 1, &rm, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EFAULT;
    done += (size_t)n;
  }
  return 0;
}

/* Measures process_vm_readv (from this process) against memcpy and sets
 * shmCmaTh and shmCmaWhy; honours COLL_SHM_CMA_THRESHOLD >= 0. */
static void shmCmaDecide(void) {
  int64_t th = collParamInt(COLL_PARAM_SHM_CMA_THRESHOLD);
  if (th >= 0) {
    shmCmaTh = (size_t)th;
    snprintf(shmCmaWhy, sizeof shmCmaWhy, "COLL_SHM_CMA_THRESHOLD=%lld", (long long)th);
    return;
  }
  char* src = malloc(SHM_CAL_BYTES);
  char* dst = malloc(SHM_CAL_BYTES);
  if (!src || !dst) {
    free(src);
    free(dst);
    shmCmaTh = SHM_CMA_DEFAULT;
    snprintf(shmCmaWhy, sizeof shmCmaWhy, "no memory to calibrate, default on");
    return;
  }
  memset(src, 1, SHM_CAL_BYTES);
  memset(dst, 2, SHM_CAL_BYTES);
  double bestCma = 1e9, bestCopy = 1e9;
  int e = 0;
  for (int i = 0; i < SHM_CAL_ROUNDS && !e; i++) {
    double t0 = collTimeNow();
    e = collShmCmaCopy((int)getpid(), dst, (uint64_t)(uintptr_t)src, SHM_CAL_BYTES);
    double t1 = collTimeNow();
    memcpy(dst, src, SHM_CAL_BYTES);
    __asm__ __volatile__("" : : "r"(dst) : "memory"); /* keep the copy */
    double t2 = collTimeNow();
    if (t1 - t0 < bestCma) bestCma = t1 - t0;
    if (t2 - t1 < bestCopy) bestCopy = t2 - t1;
  }
  free(src);
  free(dst);
  if (e) {
    shmCmaTh = 0;
    snprintf(shmCmaWhy, sizeof shmCmaWhy, "process_vm_readv fails here: %s", strerror(e));
    return;
  }
  double gbCma = SHM_CAL_BYTES / (bestCma > 1e-9 ? bestCma : 1e-9) / 1e9;
  double gbCopy = SHM_CAL_BYTES / (bestCopy > 1e-9 ? bestCopy : 1e-9) / 1e9;
  shmCmaTh = gbCma >= 0.7 * gbCopy ? SHM_CMA_DEFAULT : 0;
  snprintf(shmCmaWhy, sizeof shmCmaWhy,
           "process_vm_readv copies %.1f GB/s, memcpy %.1f GB/s on this machine%s (COLL_SHM_CMA_THRESHOLD overrides)",
           gbCma, gbCopy, shmCmaTh ? "" : ": below 70%, two copies through the ring are faster");
}

/* The decision of shmCmaDecide, taken on first use. */
size_t shmCmaThreshold(const char** why) {
  pthread_once(&shmCmaOnce, shmCmaDecide);
  if (why) *why = shmCmaWhy;
  return shmCmaTh;
}

size_t shmCmaAgree(size_t a, size_t b) {
  if (a == 0 || b == 0) return 0;
  return a > b ? a : b;
}

/* Tests (shm.h): replaces this process's decision, as a measurement would. */
void collShmCmaSetThreshold(size_t threshold) {
  pthread_once(&shmCmaOnce, shmCmaDecide);
  shmCmaTh = threshold;
  snprintf(shmCmaWhy, sizeof shmCmaWhy, "set by a test to %zu", threshold);
}
