/*
 * i14_4_cma_agree.c - issue 14 point 4: the shared-memory single-copy
 * (process_vm_readv) decision is agreed per connection. Two processes that
 * decided differently (one on, one off; or different thresholds) connect
 * both ways; each end of each connection must report the same threshold
 * and on/off state right after connect, and move the same messages the same
 * way (1 MiB + 3 and 128 KiB each way, every byte checked).
 *
 * The processes' own decisions are forced with COLL_SHM_CMA_THRESHOLD (read
 * once per process, after the fork) and, for the measured path, with the
 * test hook collShmCmaSetThreshold (as if the two measurements differed).
 * Before the fix each process used its own decision: the sender announced
 * single copy that the receiver refused (or never offered what it would
 * accept), so the ends disagreed.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "transports/shm/shm.h"

static const collNet_t* N = &collNetShm;
static const size_t kMsgs[2] = {(1u << 20) + 3, 128u << 10};

typedef struct {
  collShmStats send, recv; /* right after connect */
  collShmStats sendEnd, recvEnd; /* after the messages */
  int ok;                  /* data correct */
} sideReport;

static int writeAll(int fd, const void* p, size_t n) {
  const char* c = p;
  while (n) {
    ssize_t k = write(fd, c, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    c += k;
    n -= (size_t)k;
  }
  return 0;
}

static int readAll(int fd, void* p, size_t n) {
  char* c = p;
  while (n) {
    ssize_t k = read(fd, c, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    c += k;
    n -= (size_t)k;
  }
  return 0;
}

static unsigned char pattern(int from, size_t msg, size_t i) { return (unsigned char)(from * 7 + msg * 13 + i * 31); }

/* Runs one side: listen, swap handles over (rd, wr), connect to the other,
 * accept, exchange kMsgs both ways. me: 0 parent, 1 child. */
static int side(int me, long envThreshold, long hookThreshold, int rd, int wr, sideReport* rep) {
  memset(rep, 0, sizeof *rep);
  if (envThreshold >= 0) {
    char v[32];
    snprintf(v, sizeof v, "%ld", envThreshold);
    setenv("COLL_SHM_CMA_THRESHOLD", v, 1);
  }
  if (N->init(NULL) != collSuccess) return 1;
  if (hookThreshold >= 0) collShmCmaSetThreshold((size_t)hookThreshold);
  char mine[COLL_NET_HANDLE_BYTES], other[COLL_NET_HANDLE_BYTES];
  void *l = NULL, *s = NULL, *r = NULL;
  if (N->listen(0, mine, &l) != collSuccess) return 2;
  if (writeAll(wr, mine, sizeof mine) || readAll(rd, other, sizeof other)) return 3;
  if (N->connect(0, other, &s) != collSuccess || !s) return 4;
  for (int i = 0; i < 10000 && !r; i++) {
    if (N->accept(l, &r) != collSuccess) return 5;
    if (!r) poll(NULL, 0, 1);
  }
  if (!r) return 6;
  collShmGetStats(s, &rep->send);
  collShmGetStats(r, &rep->recv);
  rep->ok = 1;
  for (int m = 0; m < 2; m++) {
    size_t n = kMsgs[m];
    unsigned char* out = malloc(n);
    unsigned char* in = malloc(n);
    if (!out || !in) return 7;
    for (size_t i = 0; i < n; i++) out[i] = pattern(me, n, i);
    memset(in, 0, n);
    void *sq = NULL, *rq = NULL;
    if (N->isend(s, out, n, 0, NULL, &sq) != collSuccess || !sq) return 8;
    if (N->irecv(r, in, n, 0, NULL, &rq) != collSuccess || !rq) return 9;
    int sd = 0, rdn = 0;
    size_t got = 0, sent = 0;
    for (long spins = 0; !(sd && rdn); spins++) {
      if (!sd && N->test(sq, &sd, &sent, NULL) != collSuccess) return 10;
      if (!rdn && N->test(rq, &rdn, &got, NULL) != collSuccess) return 11;
      if (spins > 2000000) return 12;
      if (spins % 64 == 63) poll(NULL, 0, 1);
    }
    if (got != n) rep->ok = 0;
    for (size_t i = 0; i < n && rep->ok; i++)
      if (in[i] != pattern(!me, n, i)) rep->ok = 0;
    free(out);
    free(in);
  }
  collShmGetStats(s, &rep->sendEnd);
  collShmGetStats(r, &rep->recvEnd);
  /* both ends are done reading before either closes */
  char b = 0;
  if (writeAll(wr, &b, 1) || readAll(rd, &b, 1)) return 13;
  N->closeSend(s);
  N->closeRecv(r);
  N->closeListen(l);
  return 0;
}

static int same(const char* what, const collShmStats* a, const collShmStats* b, size_t expectTh, int expectCma) {
  int bad = a->cmaThreshold != b->cmaThreshold || a->cmaEnabled != b->cmaEnabled || a->cmaMsgs != b->cmaMsgs ||
            a->copyMsgs != b->copyMsgs || a->cmaThreshold != expectTh || (int)a->cmaMsgs != expectCma;
  if (bad)
    fprintf(stderr,
            "  %s: sender threshold %zu on %d cma %llu copy %llu / receiver threshold %zu on %d cma %llu copy %llu "
            "(expected threshold %zu, %d by single copy)\n",
            what, a->cmaThreshold, a->cmaEnabled, a->cmaMsgs, a->copyMsgs, b->cmaThreshold, b->cmaEnabled, b->cmaMsgs,
            b->copyMsgs, expectTh, expectCma);
  return bad;
}

/* One scenario between this process ("parent") and a child, each deciding
 * by env or hook (-1 = not used). Runs in a fresh process per scenario:
 * parameters and the decision are read once per process. */
static int scenarioBody(const char* name, long envP, long envC, long hookP, long hookC, size_t expectTh) {
  int p2c[2], c2p[2];
  if (pipe(p2c) || pipe(c2p)) return 1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    alarm(60);
    close(p2c[1]);
    close(c2p[0]);
    sideReport rep;
    int rc = side(1, envC, hookC, p2c[0], c2p[1], &rep);
    if (rc == 0 && writeAll(c2p[1], &rep, sizeof rep)) rc = 20;
    _exit(rc);
  }
  close(p2c[0]);
  close(c2p[1]);
  sideReport mine, theirs;
  int rc = side(0, envP, hookP, c2p[0], p2c[1], &mine);
  if (rc == 0 && readAll(c2p[0], &theirs, sizeof theirs)) rc = 21;
  int st = 0;
  for (int i = 0; i < 600 && waitpid(pid, &st, WNOHANG) == 0; i++) poll(NULL, 0, 100);
  if (waitpid(pid, &st, WNOHANG) == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    rc = rc ? rc : 22;
  }
  close(p2c[1]);
  close(c2p[0]);
  if (rc == 0 && (!WIFEXITED(st) || WEXITSTATUS(st) != 0)) rc = 30 + (WIFEXITED(st) ? WEXITSTATUS(st) : 99);
  int bad = rc != 0;
  if (rc) fprintf(stderr, "  %s: setup failed (code %d)\n", name, rc);
  if (!bad) {
    int cma = expectTh && kMsgs[0] >= expectTh ? 1 : 0;
    cma += expectTh && kMsgs[1] >= expectTh ? 1 : 0;
    bad |= same("parent->child at connect", &mine.send, &theirs.recv, expectTh, 0);
    bad |= same("child->parent at connect", &theirs.send, &mine.recv, expectTh, 0);
    bad |= same("parent->child after 2 messages", &mine.sendEnd, &theirs.recvEnd, expectTh, cma);
    bad |= same("child->parent after 2 messages", &theirs.sendEnd, &mine.recvEnd, expectTh, cma);
    if (!mine.ok || !theirs.ok) {
      fprintf(stderr, "  %s: wrong data\n", name);
      bad = 1;
    }
  }
  printf("%-52s %s\n", name, bad ? "FAILED" : "ok");
  return bad;
}

static int scenario(const char* name, long envP, long envC, long hookP, long hookC, size_t expectTh) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    alarm(90);
    int bad = scenarioBody(name, envP, envC, hookP, hookC, expectTh);
    fflush(NULL);
    _exit(bad ? 1 : 0);
  }
  int st = 0;
  if (waitpid(pid, &st, 0) != pid) return 1;
  if (!WIFEXITED(st)) printf("%-52s FAILED (killed by signal %d)\n", name, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  return !WIFEXITED(st) || WEXITSTATUS(st) != 0;
}

int main(void) {
  alarm(240);
  unsetenv("COLL_SHM_BUFFSIZE");
  unsetenv("COLL_SHM_CMA_THRESHOLD");
  int fails = 0;
  fails += scenario("env: parent on (262144), child off (0)", 262144, 0, -1, -1, 0);
  fails += scenario("env: parent off (0), child on (262144)", 0, 262144, -1, -1, 0);
  fails += scenario("env: parent 65536, child 262144", 65536, 262144, -1, -1, 262144);
  fails += scenario("env: both 65536", 65536, 65536, -1, -1, 65536);
  fails += scenario("measured: parent on (262144), child off", 262144, 262144, -1, 0, 0);
  fails += scenario("measured: parent off, child on (131072)", 262144, 262144, 0, 131072, 0);
  fails += scenario("measured: parent 65536, child 131072", 262144, 262144, 65536, 131072, 131072);
  printf("i14_4_cma_agree: %d failed\n", fails);
  return fails ? 1 : 0;
}
