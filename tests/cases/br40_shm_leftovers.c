/*
 * br40_shm_leftovers.c - BR-40 (open-mpi/ompi#10040): shared-memory segments
 * must not pile up in /dev/shm (or in SysV shm) over many runs, however a
 * job ends.
 *
 * 4 ranks on one host, shared memory on, in a private mount namespace whose
 * /dev/shm is a 256 MiB tmpfs and a private IPC namespace (so other jobs on
 * the machine neither disturb nor are disturbed). Before and after every
 * scenario the test lists /dev/shm and /proc/sysvipc/shm (what `ipcs -m`
 * reads):
 *   (a) init, 100 all-reduces of 1 MiB (262144 floats, rank r value r+1,
 *       every result checked: 10.0), destroy, exit
 *   (b) the same, then exit without destroy
 *   (c) SIGKILL all four ranks in the middle of their all-reduces
 *   (d) SIGKILL rank 2 mid-call; the others must get an error within 30 s,
 *       destroy and exit
 *   (e) (c) repeated BR40_RUNS times (default 20 here; by hand 200, see the
 *       report): every run must initialize (no ENOSPC). Extension: after
 *       each of them one more run kills the ranks at a random moment of
 *       their init instead.
 * Expected: after every scenario both lists are exactly what they were
 * before. Extension: nothing is ever created in /dev/shm at all (inotify
 * watch during every scenario), so no moment of death can leave anything.
 * Needs root (namespaces); exits 77 without. About 7 s (BR40_RUNS=200: 60 s).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"

#define NR 4
#define COUNT 262144 /* 1 MiB of floats */

enum { MODE_DESTROY, MODE_NODESTROY, MODE_LOOP };

typedef struct {
  volatile int inited[NR];
  volatile int iters[NR];
  volatile int err[NR];      /* collResult_t of a failed call, 0 = none */
  volatile int wrong[NR];    /* wrong results seen */
  volatile double errAt[NR]; /* when the error came */
} shared;

static shared* sh;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void rankMain(int mode, int rank, int idFd) {
  alarm(120); /* never outlive the test */
  collUniqueId id;
  size_t got = 0;
  while (got < sizeof id) {
    ssize_t k = read(idFd, (char*)&id + got, sizeof id - got);
    if (k <= 0) _exit(3);
    got += (size_t)k;
  }
  close(idFd);
  collComm_t comm;
  collResult_t r = collCommInitRank(&comm, NR, id, rank);
  if (r != collSuccess) {
    printf("  rank %d: init: %s: %s\n", rank, collGetErrorString(r), collGetLastError(NULL));
    _exit(2);
  }
  sh->inited[rank] = 1;
  float* a = malloc(COUNT * sizeof(float));
  float* b = malloc(COUNT * sizeof(float));
  for (size_t i = 0; i < COUNT; i++) a[i] = (float)(rank + 1);
  for (int it = 0; mode == MODE_LOOP || it < 100; it++) {
    r = collAllReduce(a, b, COUNT, collFloat, collSum, comm, NULL);
    if (r != collSuccess) {
      sh->errAt[rank] = now();
      sh->err[rank] = r;
      collCommDestroy(comm);
      _exit(0);
    }
    if (b[0] != 10.0f || b[COUNT / 2] != 10.0f || b[COUNT - 1] != 10.0f) sh->wrong[rank]++;
    sh->iters[rank] = it + 1;
  }
  if (mode == MODE_DESTROY && collCommDestroy(comm) != collSuccess) _exit(4);
  fflush(stdout);
  exit(sh->wrong[rank] ? 1 : 0); /* as a return from main: atexit handlers run */
}

/* Forks NR ranks, then creates the id and hands it to them. */
static int spawn(int mode, pid_t* pids) {
  memset(sh, 0, sizeof *sh);
  int fds[NR];
  fflush(stdout);
  for (int r = 0; r < NR; r++) {
    int p[2];
    if (pipe(p) != 0) return -1;
    pids[r] = fork();
    if (pids[r] == 0) {
      close(p[1]);
      for (int k = 0; k < r; k++) close(fds[k]);
      rankMain(mode, r, p[0]);
    }
    close(p[0]);
    fds[r] = p[1];
  }
  collUniqueId id;
  collResult_t r = collGetUniqueId(&id);
  for (int k = 0; k < NR; k++) {
    if (r == collSuccess && write(fds[k], &id, sizeof id) != (ssize_t)sizeof id) r = collSystemError;
    close(fds[k]);
  }
  if (r != collSuccess) printf("  collGetUniqueId: %s\n", collGetLastError(NULL));
  return r == collSuccess ? 0 : -1;
}

/* Reaps the ranks (SIGKILL after limit seconds). Returns the number that
 * did not exit 0 (a SIGKILL we sent counts as expected when killedOk == 1;
 * with killedOk == 2 any end is fine: a rank whose peer was killed during
 * init may fail its init before its own SIGKILL arrives). */
static int reap(pid_t* pids, double limit, int killedOk) {
  double t0 = now();
  int bad = 0, left = NR;
  while (left > 0) {
    int st;
    pid_t p = waitpid(-1, &st, WNOHANG);
    if (p > 0) {
      int r = 0;
      while (r < NR && pids[r] != p) r++;
      if (r == NR) continue;
      pids[r] = 0;
      left--;
      int ok = (WIFEXITED(st) && WEXITSTATUS(st) == 0) || (killedOk && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) ||
               killedOk == 2;
      if (!ok) {
        printf("  rank %d %s %d\n", r, WIFEXITED(st) ? "exited with" : "died of signal",
               WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        bad++;
      }
      continue;
    }
    if (now() - t0 > limit) {
      printf("  %d rank(s) still running after %.0f s: killing them\n", left, limit);
      for (int r = 0; r < NR; r++)
        if (pids[r]) kill(pids[r], SIGKILL);
      bad += left;
      limit = 1e9;
    }
    usleep(2000);
  }
  return bad;
}

static void killAll(pid_t* pids) {
  for (int r = 0; r < NR; r++)
    if (pids[r] > 0) kill(pids[r], SIGKILL);
}

/* Waits until cond(rank) holds for every rank (or 60 s). */
static int waitAll(int (*cond)(int), double limit) {
  double t0 = now();
  for (;;) {
    int all = 1;
    for (int r = 0; r < NR; r++) all &= cond(r);
    if (all) return 1;
    if (now() - t0 > limit) return 0;
    usleep(500);
  }
}
static int isInited(int r) { return sh->inited[r]; }
static int hasIters(int r) { return sh->iters[r] >= 2; }

/* /dev/shm names and SysV segment keys+ids, one string. */
static void snapshot(char* buf, size_t len) {
  size_t off = (size_t)snprintf(buf, len, "/dev/shm: ");
  DIR* d = opendir("/dev/shm");
  struct dirent* e;
  while (d && (e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && off < len)
      off += (size_t)snprintf(buf + off, len - off, "%s ", e->d_name);
  if (d) closedir(d);
  if (off < len) off += (size_t)snprintf(buf + off, len - off, "| sysv shm: ");
  FILE* f = fopen("/proc/sysvipc/shm", "r");
  char line[512];
  int first = 1;
  while (f && fgets(line, sizeof line, f)) {
    if (first) { first = 0; continue; } /* header */
    long key, id;
    if (sscanf(line, "%ld %ld", &key, &id) == 2 && off < len)
      off += (size_t)snprintf(buf + off, len - off, "%ld/%ld ", key, id);
  }
  if (f) fclose(f);
}

static int gInotify = -1;

/* Names created in /dev/shm since the last call (inotify), into buf. */
static int drainCreated(char* buf, size_t len) {
  char ev[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
  size_t off = 0;
  int n = 0;
  buf[0] = 0;
  for (;;) {
    ssize_t k = read(gInotify, ev, sizeof ev);
    if (k <= 0) break;
    for (char* p = ev; p < ev + k;) {
      struct inotify_event* ie = (struct inotify_event*)(void*)p;
      if (ie->len && off < len) off += (size_t)snprintf(buf + off, len - off, "%s ", ie->name);
      n++;
      p += sizeof *ie + ie->len;
    }
  }
  return n;
}

static int gFails;

static void verdict(const char* name, const char* before, int bad, double secs) {
  char after[4096], created[4096];
  snapshot(after, sizeof after);
  int ncreated = drainCreated(created, sizeof created);
  int same = strcmp(before, after) == 0;
  printf("(%s) %s in %.1f s; before [%s] after [%s]%s; created in /dev/shm meanwhile: %d%s%s\n", name,
         bad ? "FAIL" : "ranks ok", secs, before, after, same ? "" : " DIFFERENT", ncreated, ncreated ? ": " : "",
         created);
  if (bad || !same || ncreated) gFails++;
}

int main(void) {
  if (geteuid() != 0) {
    printf("br40: SKIPPED: needs root (mount and IPC namespaces)\n");
    return 77;
  }
  setvbuf(stdout, NULL, _IONBF, 0);
  if (unshare(CLONE_NEWNS | CLONE_NEWIPC) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
      mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=256M,mode=1777") != 0) {
    printf("br40: SKIPPED: cannot make private namespaces with a 256M /dev/shm: %s\n", strerror(errno));
    return 77;
  }
  gInotify = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (gInotify < 0 || inotify_add_watch(gInotify, "/dev/shm", IN_CREATE | IN_MOVED_TO) < 0) {
    printf("br40: inotify: %s\n", strerror(errno));
    return 1;
  }
  setenv("COLL_TIMEOUT", "20", 0);
  sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) return 1;
  int runs = 2 * (getenv("BR40_RUNS") ? atoi(getenv("BR40_RUNS")) : 20);
  pid_t pids[NR];
  char before[4096];
  double t0;

  /* (a), (b) */
  for (int mode = MODE_DESTROY; mode <= MODE_NODESTROY; mode++) {
    snapshot(before, sizeof before);
    t0 = now();
    int bad = spawn(mode, pids) != 0;
    bad += reap(pids, 60, 0);
    for (int r = 0; r < NR; r++) bad += sh->iters[r] != 100 || sh->wrong[r] != 0;
    verdict(mode == MODE_DESTROY ? "a: destroy" : "b: no destroy", before, bad, now() - t0);
  }

  /* (c) */
  snapshot(before, sizeof before);
  t0 = now();
  int bad = spawn(MODE_LOOP, pids) != 0;
  if (!waitAll(hasIters, 60)) { printf("  ranks did not start their all-reduces\n"); bad++; }
  killAll(pids);
  bad += reap(pids, 30, 1);
  verdict("c: SIGKILL all mid-call", before, bad, now() - t0);

  /* (d) */
  snapshot(before, sizeof before);
  t0 = now();
  bad = spawn(MODE_LOOP, pids) != 0;
  if (!waitAll(hasIters, 60)) { printf("  ranks did not start their all-reduces\n"); bad++; }
  double killedAt = now();
  kill(pids[2], SIGKILL);
  bad += reap(pids, 40, 1);
  double worst = 0;
  for (int r = 0; r < NR; r++) {
    if (r == 2) continue;
    if (!sh->err[r]) { printf("  rank %d got no error\n", r); bad++; continue; }
    if (sh->errAt[r] - killedAt > worst) worst = sh->errAt[r] - killedAt;
  }
  if (worst > 30) { printf("  an error took %.1f s\n", worst); bad++; }
  printf("  survivors' errors within %.2f s of the kill\n", worst);
  verdict("d: SIGKILL one mid-call", before, bad, now() - t0);

  /* (e) */
  snapshot(before, sizeof before);
  t0 = now();
  bad = 0;
  int initialized = 0, recipeRuns = 0;
  double initTime = 0.05;
  srand((unsigned)getpid());
  for (int i = 0; i < runs; i++) {
    double s0 = now();
    if (spawn(MODE_LOOP, pids) != 0) { bad++; break; }
    if (i % 2 == 0) { /* the recipe: every run initializes, killed mid-call */
      recipeRuns++;
      if (waitAll(isInited, 60)) {
        initialized++;
        initTime = now() - s0;
      }
      waitAll(hasIters, 10);
    } else { /* extension: killed at a random moment of init */
      usleep((useconds_t)((double)rand() / RAND_MAX * initTime * 1e6));
    }
    killAll(pids);
    bad += reap(pids, 30, i % 2 == 0 ? 1 : 2);
  }
  if (initialized != recipeRuns) { printf("  only %d of %d runs initialized\n", initialized, recipeRuns); bad++; }
  printf("  %d runs: %d of %d recipe runs initialized, %d killed during init\n", runs, initialized, recipeRuns,
         runs - recipeRuns);
  verdict("e: repeated SIGKILL", before, bad, now() - t0);

  printf("br40: %s\n", gFails ? "FAIL" : "PASS");
  return gFails ? 1 : 0;
}
