/*
 * i13_8_root_reply.c - issue 13 point 8: the bootstrap root's reply is
 * authenticated and validated before use, and a rank never sends anything
 * to an address that came from a reply it could not authenticate.
 *
 * This process plays the root: it listens on MASTER_PORT+1, a rank process
 * (RANK=1 of 2, started as torchrun starts it) sends its hello, and the fake
 * root answers with one forgery per scenario. Every forged "next" address
 * points at a trap listener of this process. Checks per scenario: the rank
 * fails within 5 s with the expected words, its message is printable text,
 * the trap saw no connection; the hello does not carry the job key. The
 * control (a reply sealed with the right key) must make the rank connect to
 * the trap, and the ring hello it sends there must not carry the key either.
 */
#include <signal.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "coll.h"
#include "helper_launch.h"

enum { F_GARBAGE, F_OTHER_KEY, F_REPLAY, F_BAD_FAMILY, F_ZERO_PORT, F_UNAUTH_JUNK, F_SHORT, F_CONTROL, F_COUNT };
static const char* names[F_COUNT] = {"garbage of the right size", "sealed with another job's key",
                                     "authentic reply to another hello", "next address of family AF_UNIX",
                                     "next address with port 0", "unauthenticated rejection with control bytes",
                                     "truncated reply, then close", "control: authentic reply"};
static const char* expect[F_COUNT] = {"invalid reply", "wrong MAC", "another hello", "unusable next address",
                                      "unusable next address", "not this job's bootstrap root", "init timeout", NULL};

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void setup(int rank, int nranks, void* arg) {
  (void)rank;
  (void)nranks;
  (void)arg;
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("COLL_INIT_TIMEOUT", "3", 1);
  const char* jobVars[] = {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "PMI_ID", "SLURM_JOB_ID",
                           "TORCHELASTIC_RUN_ID", "COLL_COMM_ID"};
  for (size_t i = 0; i < sizeof jobVars / sizeof jobVars[0]; i++) unsetenv(jobVars[i]);
}

static int body(int rank, int nranks, void* arg) {
  (void)rank;
  (void)nranks;
  int f = *(int*)arg;
  collComm_t comm;
  collResult_t r = collCommInitFromEnv(&comm, NULL);
  const char* msg = collGetLastError(NULL);
  printf("init: %s\n", r == collSuccess ? "success" : msg);
  if (f == F_CONTROL) return 0; /* the trap never completes the ring: any outcome */
  if (r == collSuccess) return 1;
  for (const char* p = msg; *p; p++)
    if (*p < 0x20 || *p >= 0x7f) {
      printf("message has a control byte 0x%02x\n", (unsigned char)*p);
      return 1;
    }
  return strstr(msg, expect[f]) ? 0 : 1;
}

static int listenAt(collSockAddr* a) {
  int fd;
  return collSocketListen(a, &fd) == collSuccess ? fd : -1;
}

static int acceptWithin(int lfd, double sec) {
  int fd;
  return collSocketAccept(lfd, &fd, now() + sec, NULL) == collSuccess ? fd : -1;
}

static int scenario(int f) {
  int port = collLaunchFreePort();
  char hostport[64];
  snprintf(hostport, sizeof hostport, "127.0.0.1:%d", port + 1);
  collSockAddr rootAddr, trapAddr;
  collSocketParseAddr(hostport, &rootAddr);
  collSocketParseAddr("127.0.0.1:0", &trapAddr);
  int lfd = listenAt(&rootAddr), tfd = listenAt(&trapAddr);
  if (lfd < 0 || tfd < 0) return 1;
  uint8_t key[COLL_BOOT_KEY_BYTES], otherKey[COLL_BOOT_KEY_BYTES];
  collBootDeriveKey(NULL, hostport, key);
  collBootDeriveKey("another job", hostport, otherKey);
  int arg = f;
  collLaunchSpec spec = {.nranks = 1, .masterPort = port, .timeoutSec = 30, .capture = 1, .body = body,
                         .setup = setup, .arg = &arg};
  collLaunch* L = collLaunchStart(&spec);
  int bad = !L;
  double t0 = now();
  int fd = L ? acceptWithin(lfd, 10) : -1;
  collBootHelloMsg h;
  if (fd < 0 || collSocketRecvAll(fd, &h, sizeof h, now() + 5, NULL) != collSuccess) {
    printf("no hello\n");
    bad = 1;
  } else {
    if (memmem(&h, sizeof h, key, sizeof key) || memmem(&h, sizeof h, key, 8)) {
      printf("the hello carries the job key\n");
      bad = 1;
    }
    collBootReplyMsg m;
    memset(&m, 0, sizeof m);
    m.kind = COLL_BOOT_REPLY_OK;
    m.rank = h.rank;
    m.nranks = h.nranks;
    m.rankNonce = h.rankNonce;
    m.jobNonce = 0x1234;
    m.next = trapAddr;
    const uint8_t* k = key;
    switch (f) {
      case F_GARBAGE: memset(&m, 0x5a, sizeof m); break;
      case F_OTHER_KEY: k = otherKey; break;
      case F_REPLAY: m.rankNonce ^= 1; break;
      case F_BAD_FAMILY: m.next.sa.sa_family = AF_UNIX; break;
      case F_ZERO_PORT: m.next.sin.sin_port = 0; break;
      case F_UNAUTH_JUNK:
        m.kind = COLL_BOOT_REPLY_UNAUTH;
        memset(m.reason, 0x07, sizeof m.reason); /* bells, unterminated */
        break;
      default: break;
    }
    if (f != F_GARBAGE) collBootSealReply(&m, k);
    if (f == F_UNAUTH_JUNK) memset(m.reason, 0x07, sizeof m.reason);
    collSocketSendAll(fd, &m, f == F_SHORT ? sizeof m / 2 : sizeof m, now() + 5, NULL);
    close(fd);
  }
  /* F_SHORT: the rank retries (launcher mode) until COLL_INIT_TIMEOUT; keep
   * refusing it by answering nothing more: close every later connection */
  int trapped = 0, ringKey = 0;
  while (L && collLaunchPoll(L) > 0 && now() - t0 < 20) {
    int extra = acceptWithin(lfd, 0.05);
    if (extra >= 0) close(extra);
    int t = acceptWithin(tfd, 0.01);
    if (t >= 0) {
      trapped++;
      collBootRingMsg rm;
      if (collSocketRecvAll(t, &rm, sizeof rm, now() + 5, NULL) == collSuccess && memmem(&rm, sizeof rm, key, 8))
        ringKey = 1;
      close(t);
      if (f == F_CONTROL) collLaunchKill(L, 0, SIGKILL);
    }
  }
  if (L) collLaunchWait(L, 1);
  double dt = L ? collLaunchExitTime(L, 0) : -1;
  if (f != F_CONTROL && trapped) printf("the rank connected to the forged next address\n");
  if (f == F_CONTROL && trapped != 1) printf("control: the rank did not use an authentic reply (%d)\n", trapped);
  if (ringKey) printf("the ring hello carries the job key\n");
  bad |= (f == F_CONTROL) != (trapped == 1) || ringKey;
  if (L && f != F_CONTROL && (collLaunchExitCode(L, 0) != 0 || dt > (f == F_SHORT ? 10 : 5))) bad = 1;
  printf("%-48s %s (%.2f s) %s", names[f], bad ? "FAIL" : "ok", dt, L ? collLaunchOutput(L, 0) : "\n");
  collLaunchFree(L);
  close(lfd);
  close(tfd);
  return bad;
}

int main(void) {
  int fails = 0;
  for (int f = 0; f < F_COUNT; f++) fails += scenario(f);
  printf("%d passed, %d failed\n", F_COUNT - fails, fails);
  return fails ? 1 : 0;
}
