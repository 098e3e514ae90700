/*
 * br22_shm_size.c - BR-22 (NVIDIA/nccl#290, #342): a container's small
 * /dev/shm must not crash or hang a job whose ranks share a host.
 *
 * 4 ranks on one host, shared memory on (the default), in a mount namespace
 * whose /dev/shm is a private tmpfs of the given size:
 *   64M       recipe: all-reduce float32 x 67108864 (256 MiB), rank r value
 *             r+1, sum -> 10.0 everywhere; all-gather sendcount 16777216,
 *             rank r value r -> block r holds r
 *   1M        the same with a 1 MiB /dev/shm
 *   1M-full   extension: a 1 MiB /dev/shm that leftovers of earlier jobs
 *             filled completely (a file takes every free byte)
 *   1M-mbox   extension: 1 MiB /dev/shm and COLL_MAILBOX_BYTES=262144 (a
 *             mailbox of about 2 MiB for 4 ranks), with an all-reduce of
 *             65536 floats that fills every rank's slot
 * The extensions use 1048576 / 262144 elements. Every run also makes small
 * calls (all-reduce of 1 and 7 floats, all-gather of 3, reduce-scatter of 2,
 * barrier: the shared-memory mailbox) and checks their exact results.
 * Expected (the recipe's preferred outcome): every result exact, no SIGBUS,
 * segfault or hang (collMpRun's watchdog: 120 s), and afterwards /dev/shm
 * holds exactly what it held before. Needs root (mount namespace); exits 77
 * without. About 10 s, most of it first-touch page faults of the 256 MiB
 * buffers (4 ranks x 512 MiB at peak: 2 GiB). BR22_SCALE=k divides the
 * recipe's counts by k (the sanitizer build runs with 4).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"
#include "../integration/mp_harness.h"

typedef struct {
  const char* name;
  const char* size;     /* tmpfs size= */
  int fill;             /* fill /dev/shm before the job */
  const char* mailbox;  /* COLL_MAILBOX_BYTES, NULL = default */
  size_t count, agCount;
  size_t mbCount;       /* an extra all-reduce of this many floats (0: none) */
} scenario;

static const scenario kScen[] = {
    {"64M", "64M", 0, NULL, 67108864, 16777216, 0},
    {"1M", "1M", 0, NULL, 67108864, 16777216, 0},
    {"1M-full", "1M", 1, NULL, 1048576, 262144, 0},
    {"1M-mbox", "1M", 0, "262144", 1048576, 262144, 65536},
};

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Names in /dev/shm, sorted, joined by spaces, into buf. */
static void listShm(char* buf, size_t len) {
  struct dirent** ents = NULL;
  int n = scandir("/dev/shm", &ents, NULL, alphasort);
  size_t off = 0;
  buf[0] = 0;
  for (int i = 0; i < n; i++) {
    if (strcmp(ents[i]->d_name, ".") && strcmp(ents[i]->d_name, "..") && off < len)
      off += (size_t)snprintf(buf + off, len - off, "%s ", ents[i]->d_name);
    free(ents[i]);
  }
  free(ents);
}

static int check(int rank, const char* what, collResult_t r, const float* v, size_t n, float (*want)(size_t)) {
  if (r != collSuccess) {
    printf("rank %d: %s: %s: %s\n", rank, what, collGetErrorString(r), collGetLastError(NULL));
    return 1;
  }
  for (size_t i = 0; i < n; i++)
    if (v[i] != want(i)) {
      printf("rank %d: %s: element %zu is %g, expected %g\n", rank, what, i, (double)v[i], (double)want(i));
      return 1;
    }
  return 0;
}

static float want10(size_t i) { (void)i; return 10.0f; }
static float wantSmallAg(size_t i) { return (float)(i / 3); }
static float wantRs(size_t i) { (void)i; return 10.0f; }
static size_t gAgCount;
static float wantAg(size_t i) { return (float)(i / gAgCount); }

static int body(collComm_t comm, int rank, int nranks, void* arg) {
  const scenario* s = arg;
  int fails = 0;
  size_t n = s->count;
  size_t agCount = s->agCount;
  const char* scale = getenv("BR22_SCALE");
  if (scale && atoi(scale) > 1 && s->count > 1048576) {
    n /= (size_t)atoi(scale);
    agCount /= (size_t)atoi(scale);
  }
  float* a = malloc(n * sizeof(float));
  float* b = malloc(n * sizeof(float));
  if (!a || !b) return 1;
  for (size_t i = 0; i < n; i++) a[i] = (float)(rank + 1);
  double t0 = now();
  fails += check(rank, "allreduce", collAllReduce(a, b, n, collFloat, collSum, comm, NULL), b, n, want10);
  double t1 = now();
  gAgCount = agCount;
  for (size_t i = 0; i < agCount; i++) a[i] = (float)rank;
  fails += check(rank, "allgather", collAllGather(a, b, agCount, collFloat, comm, NULL), b,
                 agCount * (size_t)nranks, wantAg);
  double t2 = now();
  /* small calls: the shared-memory mailbox */
  float x[8], y[32];
  for (int i = 0; i < 8; i++) x[i] = (float)(rank + 1);
  fails += check(rank, "allreduce 1", collAllReduce(x, y, 1, collFloat, collSum, comm, NULL), y, 1, want10);
  fails += check(rank, "allreduce 7", collAllReduce(x, y, 7, collFloat, collSum, comm, NULL), y, 7, want10);
  for (int i = 0; i < 3; i++) x[i] = (float)rank;
  fails += check(rank, "allgather 3", collAllGather(x, y, 3, collFloat, comm, NULL), y, 3 * (size_t)nranks,
                 wantSmallAg);
  for (int i = 0; i < 8; i++) x[i] = (float)(rank + 1);
  fails += check(rank, "reducescatter 2", collReduceScatter(x, y, 2, collFloat, collSum, comm, NULL), y, 2, wantRs);
  if (s->mbCount) {
    for (size_t i = 0; i < s->mbCount; i++) a[i] = (float)(rank + 1);
    fails += check(rank, "allreduce (mailbox-sized)", collAllReduce(a, b, s->mbCount, collFloat, collSum, comm, NULL),
                   b, s->mbCount, want10);
  }
  collResult_t r = collBarrier(comm, NULL);
  if (r != collSuccess) {
    printf("rank %d: barrier: %s\n", rank, collGetLastError(NULL));
    fails++;
  }
  if (rank == 0)
    printf("  %s: all-reduce of %zu floats %.2f s, all-gather of %zu %.2f s\n", s->name, n, t1 - t0, agCount,
           t2 - t1);
  free(a);
  free(b);
  return fails;
}

/* One scenario in a child with its own mount namespace and /dev/shm. */
static int runScenario(const scenario* s) {
  if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
    printf("%s: mount namespace: %s\n", s->name, strerror(errno));
    return 1;
  }
  char opts[64];
  snprintf(opts, sizeof opts, "size=%s,mode=1777", s->size);
  if (mount("tmpfs", "/dev/shm", "tmpfs", 0, opts) != 0) {
    printf("%s: mount tmpfs on /dev/shm: %s\n", s->name, strerror(errno));
    return 1;
  }
  if (s->fill) { /* leftovers of earlier jobs: not one free byte */
    int fd = open("/dev/shm/leftover-of-an-earlier-job", O_CREAT | O_WRONLY, 0600);
    static char blk[4096];
    memset(blk, 0x5a, sizeof blk);
    while (fd >= 0 && write(fd, blk, sizeof blk) > 0) {}
    while (fd >= 0 && write(fd, blk, 1) > 0) {}
    if (fd >= 0) close(fd);
  }
  if (s->mailbox) setenv("COLL_MAILBOX_BYTES", s->mailbox, 1);
  char before[4096], after[4096];
  listShm(before, sizeof before);
  double t0 = now();
  int rc = collMpRun(4, 120, body, (void*)s);
  listShm(after, sizeof after);
  int same = strcmp(before, after) == 0;
  printf("%s: /dev/shm size %s%s: %s in %.1f s; /dev/shm before [%s] after [%s]%s\n", s->name, s->size,
         s->fill ? " (full)" : "", rc ? "FAILED" : "ok", now() - t0, before, after, same ? "" : " DIFFERENT");
  return rc || !same;
}

int main(void) {
  if (geteuid() != 0) {
    printf("br22: SKIPPED: needs root (mount namespace with a private /dev/shm)\n");
    return 77;
  }
  setvbuf(stdout, NULL, _IONBF, 0);
  setenv("COLL_TIMEOUT", "30", 0); /* an error, if any, within the recipe's 30 s */
  int fails = 0;
  for (size_t i = 0; i < sizeof kScen / sizeof kScen[0]; i++) {
    pid_t p = fork();
    if (p == 0) _exit(runScenario(&kScen[i]));
    int st = 0;
    if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      printf("%s: FAIL\n", kScen[i].name);
      fails++;
    }
  }
  printf("br22: %s\n", fails ? "FAIL" : "PASS");
  return fails ? 1 : 0;
}
