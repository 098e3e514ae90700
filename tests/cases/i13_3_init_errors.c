/*
 * i13_3_init_errors.c - issue 13 point 3: init never hangs silently. Ranks
 * are started as torchrun starts them (helper_launch), each calls
 * collCommInitFromEnv; the bootstrap root (in rank 0) tells every rank what
 * is wrong as soon as it knows it:
 *  A  one rank has another WORLD_SIZE        -> every rank: "says the job has 4 ranks, but the job has 3"
 *  A' rank 0 has the other WORLD_SIZE        -> the same, the other way round
 *  B  two processes claim RANK=1             -> every rank: "rank 1 joined twice"
 *  C  rank 3 never starts (COLL_INIT_TIMEOUT=3) -> ranks 0-2: "3 of 4 ranks joined ...; missing: 3"
 *  C' ranks 3 and 5 of 6 never start          -> "4 of 6 ranks joined ...; missing: 3, 5"
 *  D  an authentic hello with rank 5 of 4 (crafted here with the job's key)
 *                                             -> every rank: "bad hello ... rank 5 is out of range"
 *  E  COLL_INIT_TIMEOUT is its own knob: COLL_TIMEOUT=1 and rank 1 joins 3 s
 *     late -> success (the sum is right)
 * Bounds: A, B, D within 5 s of the start (COLL_INIT_TIMEOUT=60, so only an
 * answer from the root can be that fast), rank 0 within 12 s (its root
 * first waits up to 5 s for ranks that have not heard yet, e.g. the rank
 * that no process claimed in B); C within COLL_INIT_TIMEOUT + 5 s.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "coll.h"
#include "helper_launch.h"

typedef struct {
  const char* name;
  int nranks;
  int absent[2];      /* ranks that never call init (-1: none) */
  int wsRank, wsValue; /* this rank gets WORLD_SIZE=wsValue (-1: none) */
  int dupOf;          /* process `nranks-1` gets RANK=dupOf (-1: none) */
  const char* initTimeout;
  const char* expect; /* fragment every rank that calls init must print; NULL: success */
  double bound;       /* seconds from launch until every rank exited */
  int crafted;        /* D: the test sends an authentic out-of-range hello */
  int lateRank;       /* E: this rank sleeps 3 s first (-1: none) */
} scenario;

static const scenario cases[] = {
    {"A: WORLD_SIZE differs on rank 2", 3, {-1, -1}, 2, 4, -1, "60", "says the job has 4 ranks, but the job has 3", 5, 0, -1},
    {"A': WORLD_SIZE differs on rank 0", 3, {-1, -1}, 0, 2, -1, "60", "but the job has 2", 5, 0, -1},
    {"B: RANK=1 twice", 3, {-1, -1}, -1, 0, 1, "60", "rank 1 joined twice", 5, 0, -1},
    {"C: rank 3 never starts", 4, {3, -1}, -1, 0, -1, "3", "3 of 4 ranks joined", 8, 0, -1},
    {"C': ranks 3 and 5 never start", 6, {3, 5}, -1, 0, -1, "3", "missing: 3, 5", 8, 0, -1},
    {"D: authentic hello, rank 5 of 4", 4, {3, -1}, -1, 0, -1, "60", "rank 5 is out of range [0, 4)", 5, 1, -1},
    {"E: COLL_TIMEOUT=1, rank 1 joins 3 s late", 2, {-1, -1}, -1, 0, -1, "60", NULL, 15, 0, 1},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void setup(int rank, int nranks, void* arg) {
  const scenario* s = arg;
  (void)nranks;
  setenv("COLL_INIT_TIMEOUT", s->initTimeout, 1);
  if (s->lateRank >= 0) setenv("COLL_TIMEOUT", "1", 1);
  if (rank == s->wsRank) {
    char v[16];
    snprintf(v, sizeof v, "%d", s->wsValue);
    setenv("WORLD_SIZE", v, 1);
  }
  if (s->dupOf >= 0 && rank == s->nranks - 1) {
    char v[16];
    snprintf(v, sizeof v, "%d", s->dupOf);
    setenv("RANK", v, 1);
    setenv("WORLD_SIZE", "3", 1);
  }
}

static int body(int rank, int nranks, void* arg) {
  const scenario* s = arg;
  if (rank == s->absent[0] || rank == s->absent[1]) return 0; /* never joins */
  if (rank == s->lateRank) sleep(3);
  double t0 = now();
  collComm_t comm = NULL;
  collResult_t r = collCommInitFromEnv(&comm, NULL);
  double dt = now() - t0;
  if (!s->expect) {
    if (r != collSuccess) {
      printf("rank %d: init failed: %s\n", rank, collGetLastError(NULL));
      return 1;
    }
    float x = (float)rank + 1, y = 0;
    r = collAllReduce(&x, &y, 1, collFloat, collSum, comm, NULL);
    int bad = r != collSuccess || y != (float)(nranks * (nranks + 1) / 2);
    if (bad) printf("rank %d: allreduce %d -> %g: %s\n", rank, r, y, collGetLastError(comm));
    collCommDestroy(comm);
    return bad;
  }
  if (r == collSuccess) {
    printf("rank %d: init succeeded\n", rank);
    collCommDestroy(comm);
    return 1;
  }
  const char* msg = collGetLastError(NULL);
  printf("rank %d after %.2f s: %s\n", rank, dt, msg);
  if (!strstr(msg, s->expect)) {
    printf("rank %d: message lacks '%s'\n", rank, s->expect);
    return 1;
  }
  return 0;
}

/* D: an authentic hello (the launcher key is derived from the job id and the
 * rendezvous address, which this process knows too) with rank 5 of 4. */
static int sendCrafted(int port) {
  char hostport[64];
  snprintf(hostport, sizeof hostport, "127.0.0.1:%d", port + 1);
  collBootId id;
  memset(&id, 0, sizeof id);
  collBootDeriveKey(NULL, hostport, id.key);
  if (collSocketParseAddr(hostport, &id.root) != collSuccess) return 1;
  int fd;
  if (collSocketConnect(&id.root, &fd, now() + 20, NULL) != collSuccess) return 1;
  collBootHelloMsg h;
  memset(&h, 0, sizeof h);
  h.rank = 5;
  h.nranks = 4;
  h.ringAddr = id.root;
  collBootSealHello(&h, id.key);
  collSocketSendAll(fd, &h, sizeof h, now() + 5, NULL);
  collBootReplyMsg m;
  int got = collSocketRecvAll(fd, &m, sizeof m, now() + 10, NULL) == collSuccess && m.kind == COLL_BOOT_REPLY_ERR;
  close(fd);
  return got ? 0 : 1;
}

int main(void) {
  int fails = 0;
  for (int i = 0; i < NCASES; i++) {
    const scenario* s = &cases[i];
    collLaunchSpec spec = {.nranks = s->nranks, .timeoutSec = 60, .capture = 1, .body = body, .setup = setup,
                           .arg = (void*)s};
    double t0 = now();
    collLaunch* L = collLaunchStart(&spec);
    int bad = !L;
    if (L) {
      if (s->crafted) bad |= sendCrafted(collLaunchMasterPort(L));
      bad |= collLaunchWait(L, 0) != 0;
      for (int r = 0; r < s->nranks; r++) {
        double bound = r == 0 && s->expect && s->bound < 12 ? 12 : s->bound;
        if (collLaunchExitTime(L, r) > bound) {
          printf("%s: rank %d exited after %.2f s (bound %.0f s)\n", s->name, r, collLaunchExitTime(L, r), bound);
          bad = 1;
        }
      }
      printf("%-40s %s (%.2f s)\n", s->name, bad ? "FAIL" : "ok", now() - t0);
      for (int r = 0; r < s->nranks; r++) {
        const char* o = collLaunchOutput(L, r);
        if (*o) printf("    %s", o);
      }
      if (bad) collLaunchReport(L);
    }
    collLaunchFree(L);
    fails += bad;
  }
  printf("%d passed, %d failed\n", NCASES - fails, fails);
  return fails ? 1 : 0;
}
