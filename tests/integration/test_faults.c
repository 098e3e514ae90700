/*
 * test_faults.c - faults must become errors, never hangs or corruption.
 *
 *  killed  : 4 ranks loop over collectives with idle pauses; the parent
 *            SIGKILLs one rank at a random moment (20 trials); every survivor
 *            must return an error within the bound and then destroy its
 *            communicator without blocking; the worst time-to-error is printed.
 *  mismatch: one rank calls all-gather while the others call all-reduce;
 *            one rank passes a smaller count. Every rank returns an error
 *            within COLL_TIMEOUT and no guard byte changes. Detection without
 *            COLL_CHECK relies on message sizes differing, so ctest runs it
 *            with COLL_ALGO=ring (a direct all-gather and all-reduce of one
 *            count exchange messages of equal size).
 *  garbage : strangers connect to the bootstrap root (garbage, wrong
 *            secret); the job still initializes and runs.
 *  many    : 64 communicators (collCommSplit) alive at once per process,
 *            used, destroyed in shuffled order; afterwards the process has
 *            the same fds and threads as before, and this job's /dev/shm
 *            entries (mapped or open here, or named after one of its
 *            processes) are back to what they were: entries of other
 *            processes on the machine do not count.
 *  check   : the same mismatch with COLL_CHECK=1 fails before any data moves
 *            with collInvalidUsage naming the differing rank on every rank.
 * Usage: test_faults killed|mismatch|check|garbage|many
 */
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "coll.h"
#include "misc/socket.h"
#include "mp_harness.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- killed ----------------------------------------------------------------- */
#define KILL_RANKS 4
#define KILL_TRIALS 20
#define KILL_BOUND_S 10.0

typedef struct {
  double errorAt[KILL_RANKS]; /* CLOCK_MONOTONIC time a rank saw its error, 0 = none */
  int code[KILL_RANKS];
  int ready[KILL_RANKS];
} killShared;

/* Runs collectives until one fails; records when. */
static int killedBody(collComm_t comm, int rank, int nranks, void* arg) {
  killShared* sh = arg;
  size_t n = 1 << 18;
  float* a = malloc(n * sizeof(float));
  float* b = malloc(n * sizeof(float) * (size_t)nranks);
  for (size_t i = 0; i < n; i++) a[i] = 1.0f;
  __atomic_store_n(&sh->ready[rank], 1, __ATOMIC_RELEASE);
  for (unsigned it = 0;; it++) {
    if (it % 7 == 6) usleep(20000); /* idle stretches: a peer may die while we wait for nothing */
    size_t count = (size_t)1 << (it % 19); /* 1 element .. 1 MiB */
    collResult_t r = it % 3 == 0   ? collAllReduce(a, b, count, collFloat, collSum, comm, NULL)
                     : it % 3 == 1 ? collAllGather(a, b, count / 4 + 1, collFloat, comm, NULL)
                                   : collBroadcast(a, b, count, collFloat, (int)(it % (unsigned)nranks), comm, NULL);
    if (r != collSuccess) {
      sh->errorAt[rank] = now();
      sh->code[rank] = r;
      /* destroying a failed communicator must not block on the dead peer */
      double t0 = now();
      collResult_t d = collCommDestroy(comm);
      if (d != collSuccess || now() - t0 > 5.0) sh->code[rank] = -1;
      _exit(0); /* the harness would destroy comm again */
    }
  }
}

static int runKilled(void) {
  killShared* sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  double worst = 0;
  int failed = 0;
  srand((unsigned)getpid());
  for (int trial = 0; trial < KILL_TRIALS; trial++) {
    memset(sh, 0, sizeof *sh);
    int victim = rand() % KILL_RANKS;
    useconds_t delay = (useconds_t)(rand() % 400000);
    fflush(stdout);
    pid_t runner = fork();
    if (runner == 0) { /* a sub-harness: its children are the ranks */
      setpgid(0, 0);
      _exit(collMpRun(KILL_RANKS, 60, killedBody, sh));
    }
    /* wait until every rank runs, then kill the victim after a random delay */
    double t0 = now();
    while (now() - t0 < 30) {
      int all = 1;
      for (int r = 0; r < KILL_RANKS; r++) all &= __atomic_load_n(&sh->ready[r], __ATOMIC_ACQUIRE);
      if (all) break;
      usleep(1000);
    }
    usleep(delay);
    /* the victim is the rank process whose parent is runner: find it by scanning /proc */
    pid_t victimPid = 0;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "pgrep -P %d", (int)runner);
    FILE* p = popen(cmd, "r");
    int idx = 0, pid;
    while (p && fscanf(p, "%d", &pid) == 1) {
      if (idx++ == victim) victimPid = pid;
    }
    if (p) pclose(p);
    double killedAt = now();
    if (victimPid > 0) kill(victimPid, SIGKILL);
    int status;
    waitpid(runner, &status, 0);
    double trialWorst = 0;
    int survivorsErrored = 0, survivors = KILL_RANKS - 1;
    for (int r = 0; r < KILL_RANKS; r++) {
      if (sh->errorAt[r] > 0) {
        survivorsErrored++;
        double dt = sh->errorAt[r] - killedAt;
        if (dt > trialWorst) trialWorst = dt;
        if (sh->code[r] != collRemoteError && sh->code[r] != collTimeout) failed = 1;
      }
    }
    if (survivorsErrored < survivors || trialWorst > KILL_BOUND_S) {
      fprintf(stderr, "trial %d: victim index %d after %u us: %d of %d survivors errored, worst %.3f s\n", trial,
              victim, (unsigned)delay, survivorsErrored, survivors, trialWorst);
      failed = 1;
    }
    if (trialWorst > worst) worst = trialWorst;
  }
  printf("killed-rank trials: %d, worst time to error on a survivor: %.3f s (bound %.0f s)\n", KILL_TRIALS, worst,
         KILL_BOUND_S);
  munmap(sh, sizeof *sh);
  return failed;
}

/* ---- mismatch ------------------------------------------------------------ */
#define GUARD 256
static int mismatchBody(collComm_t comm, int rank, int nranks, void* arg) {
  int mode = *(int*)arg;
  size_t count = 1000;
  size_t bytes = count * sizeof(float) * (size_t)nranks;
  unsigned char* buf = malloc(bytes + GUARD);
  float* send = malloc(count * sizeof(float));
  for (size_t i = 0; i < count; i++) send[i] = 1.0f;
  memset(buf, 0, bytes);
  memset(buf + bytes, 0xA5, GUARD);
  collResult_t r;
  double t0 = now();
  if (mode != 1) /* rank 0 all-gathers, the others all-reduce */
    r = rank == 0 ? collAllGather(send, buf, count, collFloat, comm, NULL)
                  : collAllReduce(send, buf, count, collFloat, collSum, comm, NULL);
  else /* the last rank passes a smaller count */
    r = collAllReduce(send, buf, rank == nranks - 1 ? count - 7 : count, collFloat, collSum, comm, NULL);
  double took = now() - t0;
  int fails = 0;
  for (int i = 0; i < GUARD; i++) fails += buf[bytes + i] != 0xA5;
  if (fails) fprintf(stderr, "rank %d: %d guard bytes overwritten\n", rank, fails);
  if (r == collSuccess) {
    fprintf(stderr, "rank %d: mismatched call returned success\n", rank);
    fails++;
  } else if (mode == 2 && (r != collInvalidUsage || !strstr(collGetLastError(comm), "COLL_CHECK: rank 1"))) {
    fprintf(stderr, "rank %d: COLL_CHECK should name rank 1, got %s: %s\n", rank, collGetErrorString(r),
            collGetLastError(comm));
    fails++;
  } else {
    printf("rank %d: %s after %.2f s: %s\n", rank, collGetErrorString(r), took, collGetLastError(comm));
  }
  if (took > 15) fails++;
  free(buf);
  free(send);
  return fails;
}

/* ---- garbage --------------------------------------------------------------- */
static int garbageBody(collComm_t comm, int rank, int nranks, void* arg) {
  collUniqueId* id = arg;
  collComm_t c;
  collResult_t r = collCommInitRank(&c, nranks, *id, rank);
  if (r != collSuccess) {
    fprintf(stderr, "rank %d: init after garbage failed: %s\n", rank, collGetLastError(NULL));
    return 1;
  }
  int v = rank + 1, s = 0;
  r = collAllReduce(&v, &s, 1, collInt32, collSum, c, NULL);
  collCommDestroy(c);
  (void)comm;
  return r != collSuccess || s != nranks * (nranks + 1) / 2;
}

/* Runs in the harness parent after the fork: creates the id, then connects
 * three strangers to its root (garbage, wrong secret, silence). */
static int garbagePrepare(collUniqueId* id, void* arg) {
  int* fds = arg;
  if (collGetUniqueId(id) != collSuccess) return 1;
  collBootId bid;
  memcpy(&bid, id->internal, sizeof bid);
  for (int k = 0; k < 3; k++)
    if (collSocketConnect(&bid.root, &fds[k], now() + 5, NULL) != collSuccess) return 1;
  char junk[64];
  memset(junk, 0x5a, sizeof junk);
  collSocketSendAll(fds[0], junk, sizeof junk, now() + 5, NULL);
  collBootHelloMsg hello; /* well formed, sealed with another job's key */
  memset(&hello, 0, sizeof hello);
  hello.rank = 0;
  hello.nranks = 2;
  hello.ringAddr = bid.root;
  bid.key[0] ^= 1;
  collBootSealHello(&hello, bid.key);
  collSocketSendAll(fds[1], &hello, sizeof hello, now() + 5, NULL);
  return 0;
}

static int runGarbage(void) {
  int fds[3] = {-1, -1, -1};
  int rc = collMpRunRaw(2, 60, garbageBody, garbagePrepare, fds);
  for (int k = 0; k < 3; k++)
    if (fds[k] >= 0) close(fds[k]);
  printf("garbage: %s\n", rc ? "FAILED" : "job initialized and ran despite 3 bad connections");
  return rc;
}

/* ---- many communicators ----------------------------------------------------- */
static int countDir(const char* path) {
  DIR* d = opendir(path);
  int n = 0;
  if (!d) return -1;
  for (struct dirent* e; (e = readdir(d));) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

/* 1 when name ends in "-<pid>" (or has "-<pid>-" / "-<pid>."), as coll names
 * its shared-memory segments after the process that creates them. */
static int namedAfter(const char* name, int pid) {
  char tag[32];
  int n = snprintf(tag, sizeof tag, "-%d", pid);
  for (const char* p = strstr(name, tag); p; p = strstr(p + 1, tag))
    if (p[n] == 0 || p[n] == '-' || p[n] == '.') return 1;
  return 0;
}

/* This job's use of /dev/shm: files there that this process maps or holds
 * open, and entries named after one of the job's processes. */
static int ownShm(const int* pids, int npids) {
  int n = 0;
  char line[4096];
  FILE* f = fopen("/proc/self/maps", "r");
  while (f && fgets(line, sizeof line, f)) n += strstr(line, " /dev/shm/") != NULL;
  if (f) fclose(f);
  DIR* d = opendir("/proc/self/fd");
  for (struct dirent* e; d && (e = readdir(d));) {
    char path[300], link[4096];
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    ssize_t k = readlink(path, link, sizeof link - 1);
    if (k > 0 && (link[k] = 0, strncmp(link, "/dev/shm/", 9) == 0)) n++;
  }
  if (d) closedir(d);
  d = opendir("/dev/shm");
  for (struct dirent* e; d && (e = readdir(d));)
    for (int i = 0; i < npids; i++)
      if (namedAfter(e->d_name, pids[i])) {
        n++;
        break;
      }
  if (d) closedir(d);
  return n;
}

#define NCOMMS 64
static int manyBody(collComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  int fails = 0;
  int32_t me = (int32_t)getpid(), pids[64];
  if (nranks > 64 || collAllGather(&me, pids, 1, collInt32, comm, NULL) != collSuccess) {
    fprintf(stderr, "rank %d: cannot gather the job's pids: %s\n", rank, collGetLastError(comm));
    return 1;
  }
  int fd0 = countDir("/proc/self/fd"), th0 = countDir("/proc/self/task"), shm0 = ownShm(pids, nranks);
  collComm_t c[NCOMMS];
  for (int i = 0; i < NCOMMS; i++) {
    if (collCommSplit(comm, 0, rank, &c[i], NULL) != collSuccess) {
      fprintf(stderr, "rank %d: split %d failed: %s\n", rank, i, collGetLastError(comm));
      return 1;
    }
  }
  for (int i = 0; i < NCOMMS; i++) {
    int v = i + rank, s = -1;
    collStream_t st;
    if (collStreamCreate(c[i], &st) != collSuccess) { fails++; continue; }
    if (collAllReduce(&v, &s, 1, collInt32, collSum, c[i], st) != collSuccess) fails++;
    if (collStreamDestroy(st) != collSuccess) fails++;
    if (s != nranks * i + nranks * (nranks - 1) / 2) fails++;
  }
  /* destroy in an order every rank agrees on, but not creation order */
  for (int k = 0; k < NCOMMS; k++) {
    int i = (k * 37) % NCOMMS;
    if (collCommDestroy(c[i]) != collSuccess) fails++;
  }
  int fd1 = countDir("/proc/self/fd"), th1 = countDir("/proc/self/task"), shm1 = ownShm(pids, nranks);
  if (fd1 != fd0 || th1 != th0 || shm1 != shm0) {
    fprintf(stderr, "rank %d: leaked: fds %d -> %d, threads %d -> %d, this job's /dev/shm entries %d -> %d\n", rank,
            fd0, fd1, th0, th1, shm0, shm1);
    fails++;
  }
  return fails;
}

int main(int argc, char** argv) {
  setenv("COLL_SOCKET_IFNAME", "lo", 0);
  const char* what = argc > 1 ? argv[1] : "";
  int rc;
  if (strcmp(what, "killed") == 0) {
    rc = runKilled();
  } else if (strcmp(what, "mismatch") == 0) {
    setenv("COLL_TIMEOUT", "5", 1);
    int m0 = 0, m1 = 1;
    rc = collMpRun(3, 60, mismatchBody, &m0);
    rc |= collMpRun(3, 60, mismatchBody, &m1);
  } else if (strcmp(what, "check") == 0) {
    setenv("COLL_CHECK", "1", 1);
    int m2 = 2;
    rc = collMpRun(3, 60, mismatchBody, &m2);
  } else if (strcmp(what, "garbage") == 0) {
    rc = runGarbage();
  } else if (strcmp(what, "many") == 0) {
    rc = collMpRun(2, 240, manyBody, NULL);
  } else {
    fprintf(stderr, "usage: %s killed|mismatch|check|garbage|many\n", argv[0]);
    return 2;
  }
  printf("faults %s: %d passed, %d failed\n", what, rc ? 0 : 1, rc ? 1 : 0);
  return rc ? 1 : 0;
}
