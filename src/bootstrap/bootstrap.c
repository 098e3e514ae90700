/* bootstrap.c - a rank's side of the rendezvous, the TCP ring and the ring
 * allgather (see bootstrap.h; messages in boot_proto.h, root in boot_root.c). */
#include "bootstrap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "misc/log.h"
#include "misc/param.h"

_Static_assert(sizeof(collBootId) <= COLL_UNIQUE_ID_BYTES, "collBootId must fit in collUniqueId");

#define COLL_BOOT_GONE_SEC 3.0   /* collGetUniqueId ids: how long a refused root is retried */
#define COLL_BOOT_GRACE_SEC 5.0  /* beyond the root's own deadline, for its verdict to arrive */
#define COLL_BOOT_BACKOFF_MAX_MS 500

uint64_t collRandom64(void) {
  uint64_t v = 0;
  collRandomBytes(&v, sizeof v);
  return v;
}

void collRandomBytes(void* buf, size_t len) {
  if (getrandom(buf, len, 0) == (ssize_t)len) return;
  /* getrandom cannot fail for <= 256 bytes once the pool is ready; keep a
   * fallback that is at least different per process and call */
  static uint64_t ctr;
  uint64_t x = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ (uint64_t)(collTimeNow() * 1e9) ^
               __atomic_add_fetch(&ctr, 0x632be59bd9b4e019ull, __ATOMIC_RELAXED);
  for (size_t i = 0; i < len; i++) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 29;
    ((uint8_t*)buf)[i] = (uint8_t)x;
  }
}

/* ---- what this process joined before, per rendezvous address ------------ */
/* A process that joins the same address again (init/destroy cycles) says
 * which communicator it was in, so a lingering root answers BUSY instead of
 * taking it for another job's rank. */
#define COLL_BOOT_MEMORY 16
static pthread_mutex_t collBootMemLock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  collSockAddr root;
  uint64_t nonce;
} collBootMem[COLL_BOOT_MEMORY];
static int collBootMemNext;

static uint64_t collBootRecall(const collSockAddr* root) {
  uint64_t n = 0;
  pthread_mutex_lock(&collBootMemLock);
  for (int i = 0; i < COLL_BOOT_MEMORY; i++)
    if (collBootMem[i].nonce && memcmp(&collBootMem[i].root, root, sizeof *root) == 0) n = collBootMem[i].nonce;
  pthread_mutex_unlock(&collBootMemLock);
  return n;
}

static void collBootRemember(const collSockAddr* root, uint64_t nonce) {
  pthread_mutex_lock(&collBootMemLock);
  int slot = -1;
  for (int i = 0; i < COLL_BOOT_MEMORY && slot < 0; i++)
    if (memcmp(&collBootMem[i].root, root, sizeof *root) == 0) slot = i;
  if (slot < 0) slot = collBootMemNext++ % COLL_BOOT_MEMORY;
  collBootMem[slot].root = *root;
  collBootMem[slot].nonce = nonce;
  pthread_mutex_unlock(&collBootMemLock);
}

/* ---- ids ------------------------------------------------------------------ */
collResult_t collBootCreateRoot(collBootId* id, const collSockAddr* addr, int bindAny) {
  memset(id, 0, sizeof *id);
  id->magic = COLL_BOOT_MAGIC;
  id->version = COLL_VERSION_CODE;
  id->flags = COLL_BOOT_ROOT_FIRST;
  collRandomBytes(id->key, sizeof id->key);
  id->root = *addr;
  collBootRootCfg cfg = {id->key, 0, (double)collParamInt(COLL_PARAM_INIT_TIMEOUT), 0, NULL};
  return collBootRootStart(&cfg, &id->root, bindAny, NULL, NULL);
}

/* ---- rendezvous ------------------------------------------------------------ */
static double collBootDeadline(double timeoutSec) {
  return timeoutSec > 0 ? collTimeNow() + timeoutSec : 0;
}

static int collBootNap(int ms, volatile int* abortFlag) {
  while (ms > 0) {
    if (abortFlag && *abortFlag) return 1;
    int s = ms < 50 ? ms : 50;
    struct timespec ts = {0, (long)s * 1000000L};
    nanosleep(&ts, NULL);
    ms -= s;
  }
  return abortFlag && *abortFlag;
}

/* Connects to the root, retrying refusals and timeouts until `until` (0:
 * forever). goneAfter > 0: give up once the root refused every attempt for
 * that long (a root that listened before its id existed is gone then; SYNs
 * lost on a loaded machine are not a refusal). */
static collResult_t collBootConnectRoot(const collSockAddr* root, int* fd, double until, double goneAfter,
                                        volatile int* abortFlag, int* refused) {
  double refusedSince = 0;
  *refused = 0;
  for (;;) {
    double slice = collTimeNow() + (goneAfter > 0 ? 0.5 : 60.0);
    double d = until > 0 && until < slice ? until : slice;
    int err = 0;
    collResult_t r = collSocketConnectErr(root, fd, d, abortFlag, &err);
    if (r == collSuccess || (abortFlag && *abortFlag)) return r;
    double now = collTimeNow();
    if (err == ECONNREFUSED) {
      if (!refusedSince) refusedSince = now;
      if (goneAfter > 0 && now - refusedSince >= goneAfter) {
        *refused = 1;
        return r;
      }
    } else {
      refusedSince = 0;
    }
    if (r != collTimeout || (until > 0 && now >= until)) return r;
  }
}

/* When this process started, in CLOCK_REALTIME microseconds (now, less the
 * time since its start: /proc/self/stat's start in clock ticks after boot,
 * against CLOCK_BOOTTIME); 0 if /proc says nothing. The root tells a late
 * duplicate (a process started after its communicator formed: another job
 * or a retried pod) from a rank of a mixed rendezvous. */
static uint64_t collBootProcessStartUs(void) {
  char st[1024];
  FILE* f = fopen("/proc/self/stat", "r");
  if (!f) return 0;
  size_t n = fread(st, 1, sizeof st - 1, f);
  fclose(f);
  st[n] = 0;
  const char* p = strrchr(st, ')'); /* after the command name, which may hold spaces */
  long hz = sysconf(_SC_CLK_TCK);
  unsigned long long ticks = 0;
  /* after ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime
   * cstime priority nice threads itrealvalue starttime (field 22) */
  if (!p || hz <= 0 ||
      sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &ticks) != 1)
    return 0;
  struct timespec rt, bt;
  if (clock_gettime(CLOCK_REALTIME, &rt) != 0 || clock_gettime(CLOCK_BOOTTIME, &bt) != 0) return 0;
  double sinceStart = (double)bt.tv_sec + 1e-9 * (double)bt.tv_nsec - (double)ticks / (double)hz;
  double start = (double)rt.tv_sec + 1e-9 * (double)rt.tv_nsec - (sinceStart > 0 ? sinceStart : 0);
  return start > 0 ? (uint64_t)(start * 1e6) : 0;
}

typedef struct {
  collReplyVerdict verdict;
  int status;
  uint64_t jobNonce;
  collBootNext next;
  char reason[COLL_BOOT_REASON_BYTES];
} collBootAnswer;

/* One attempt: hello to the root on fd, then its reply (or why none came). */
static collResult_t collBootAsk(int fd, const collBootId* id, int rank, int nranks, const collSockAddr* ringAddr,
                                const char* unixName, double replyDeadline, volatile int* abortFlag,
                                collBootAnswer* a) {
  collBootHelloMsg h;
  memset(&h, 0, sizeof h);
  h.rank = rank;
  h.nranks = nranks;
  h.pid = (uint32_t)getpid();
  h.rankNonce = collRandom64();
  h.prevNonce = collBootRecall(&id->root);
  h.startedUs = collBootProcessStartUs();
  if (ringAddr) h.ringAddr = *ringAddr;
  if (unixName && unixName[0]) {
    h.nsId = collBootNsId();
    snprintf(h.unixName, sizeof h.unixName, "%s", unixName);
  }
  collBootSealHello(&h, id->key);
  collResult_t r = collSocketSendAll(fd, &h, sizeof h, replyDeadline, abortFlag);
  if (r != collSuccess) return r;
  collBootReplyMsg m;
  if ((r = collSocketRecvAll(fd, &m, sizeof m, replyDeadline, abortFlag)) != collSuccess) return r;
  a->verdict = collBootCheckReply(&m, sizeof m, id->key, &h, &a->jobNonce, &a->next, &a->status, a->reason,
                                  sizeof a->reason);
  return collSuccess;
}

void collBootProbeHolder(const collBootId* id, int rank, int nranks, char* buf, size_t len) {
  int fd;
  collSockAddr dummy = id->root;
  if (collSocketConnect(&id->root, &fd, collTimeNow() + 1.0, NULL) != collSuccess) {
    snprintf(buf, len, "nothing answers there either");
    return;
  }
  collBootAnswer a;
  memset(&a, 0, sizeof a);
  collResult_t r = collBootAsk(fd, id, rank, nranks, &dummy, NULL, collTimeNow() + 2.0, NULL, &a);
  close(fd);
  if (r != collSuccess) snprintf(buf, len, "the process holding it is not a coll root (no reply to a hello)");
  else if (a.verdict == COLL_REPLY_UNAUTH) snprintf(buf, len, "it is another job's coll root (it said: %s)", a.reason);
  else if (a.verdict == COLL_REPLY_INVALID) snprintf(buf, len, "the process holding it is not a coll root (%s)", a.reason);
  else if (a.verdict == COLL_REPLY_BUSY) snprintf(buf, len, "a previous communicator of this job still holds it (destroy it first)");
  else snprintf(buf, len, "a coll root with this job's key holds it and refused this rank: %s", a.reason);
}

static collResult_t collBootRendezvous(collBootstrap* b, const collBootId* id, const collSockAddr* ringAddr,
                                       const char* unixName, double deadline, double initTimeout,
                                       collBootNext* next) {
  char rs[96];
  collSockAddrStr(&id->root, rs, sizeof rs);
  int rootFirst = (id->flags & COLL_BOOT_ROOT_FIRST) != 0;
  int backoff = 50;
  for (;;) {
    int fd = -1, refused = 0;
    /* the root of a collGetUniqueId id listened before the id existed */
    collResult_t r =
        collBootConnectRoot(&id->root, &fd, deadline, rootFirst ? COLL_BOOT_GONE_SEC : 0, b->abortFlag, &refused);
    if (r != collSuccess) {
      if (b->abortFlag && *b->abortFlag) return collSetError(collRemoteError, "rank %d: init aborted", b->rank);
      if (refused)
        return collSetError(collRemoteError,
                            "rank %d: the bootstrap root %s refused the connection: it is gone (the root of a "
                            "collGetUniqueId id serves one communicator and stops when it formed, failed or after "
                            "COLL_INIT_TIMEOUT: was the id used twice, or did the process that made it exit?)",
                            b->rank, rs);
      return collSetError(collTimeout,
                          "rank %d: init timeout: the bootstrap root %s never answered within COLL_INIT_TIMEOUT=%g s "
                          "(%s): is rank 0 running, with the same MASTER_ADDR/MASTER_PORT (or COLL_COMM_ID)?",
                          b->rank, rs, initTimeout, collLastErrorMessage());
    }
    /* The root's verdict comes at its own deadline at the latest, which is
     * at most initTimeout after it started listening, i.e. before now. */
    double replyDeadline = initTimeout > 0 ? collTimeNow() + initTimeout + COLL_BOOT_GRACE_SEC : 0;
    if (deadline > replyDeadline && replyDeadline > 0) replyDeadline = deadline;
    collBootAnswer a;
    memset(&a, 0, sizeof a);
    r = collBootAsk(fd, id, b->rank, b->nranks, ringAddr, unixName, replyDeadline, b->abortFlag, &a);
    close(fd);
    if (r == collTimeout)
      return collSetError(collTimeout, "rank %d: init timeout: the bootstrap root %s accepted the connection but "
                          "never answered (a stopped or overloaded process?)", b->rank, rs);
    if (r != collSuccess) {
      if (b->abortFlag && *b->abortFlag) return collSetError(collRemoteError, "rank %d: init aborted", b->rank);
      if (rootFirst)
        return collSetError(collRemoteError, "rank %d: the bootstrap root %s closed the connection without an answer (%s)",
                            b->rank, rs, collLastErrorMessage());
      /* launcher mode: an old listener closing, or a root restarting: retry */
    } else if (a.verdict == COLL_REPLY_OK) {
      b->jobNonce = a.jobNonce;
      *next = a.next;
      return collSuccess;
    } else if (a.verdict == COLL_REPLY_ERR) {
      return collSetError((collResult_t)a.status, "rank %d: the bootstrap root %s refused this rank: %s", b->rank, rs,
                          a.reason);
    } else if (a.verdict == COLL_REPLY_UNAUTH) {
      return collSetError(collInvalidUsage,
                          "rank %d: the process at %s is not this job's bootstrap root: it rejected our hello (%s); "
                          "another job uses this rendezvous address (MASTER_ADDR:MASTER_PORT+1 or COLL_COMM_ID)?",
                          b->rank, rs, a.reason);
    } else if (a.verdict == COLL_REPLY_INVALID) {
      return collSetError(collRemoteError, "rank %d: invalid reply from %s, ignored (%s): not a coll bootstrap root?",
                          b->rank, rs, a.reason);
    }
    /* BUSY, or closed early in launcher mode: try again a little later */
    if (deadline > 0 && collTimeNow() >= deadline)
      return collSetError(collTimeout, "rank %d: init timeout: the bootstrap root %s stayed busy with a previous "
                          "communicator of this job for COLL_INIT_TIMEOUT=%g s (%s)", b->rank, rs, initTimeout,
                          a.reason[0] ? a.reason : "closed without an answer");
    if (collBootNap(backoff, b->abortFlag)) return collSetError(collRemoteError, "rank %d: init aborted", b->rank);
    if (backoff < COLL_BOOT_BACKOFF_MAX_MS) backoff *= 2;
  }
}

/* ---- the ring ------------------------------------------------------------- */
/* An abstract AF_UNIX listener named coll-ring-<random> (no file, no port). */
static int collBootUnixListen(char name[COLL_BOOT_UNIX_BYTES]) {
  snprintf(name, COLL_BOOT_UNIX_BYTES, "coll-ring-%016llx", (unsigned long long)collRandom64());
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  size_t n = strlen(name);
  memcpy(a.sun_path + 1, name, n); /* sun_path[0] = 0: abstract */
  socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
  if (bind(fd, (struct sockaddr*)&a, len) != 0 || listen(fd, SOMAXCONN) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static int collBootUnixConnect(const char* name) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  size_t n = strnlen(name, COLL_BOOT_UNIX_BYTES - 1);
  memcpy(a.sun_path + 1, name, n);
  socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
  int fl;
  if (connect(fd, (struct sockaddr*)&a, len) != 0 || (fl = fcntl(fd, F_GETFL)) < 0 ||
      fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Connects to rank+1: over its abstract socket when it is in this network
 * namespace, else (or if that fails) over TCP. A refusal there means rank+1
 * gave up (its listeners existed before the root answered), so it is not
 * retried for long. */
static collResult_t collBootConnectNext(collBootstrap* b, const collBootNext* next, double deadline) {
  if (next->unixName[0] && next->nsId && next->nsId == collBootNsId() && (b->nextFd = collBootUnixConnect(next->unixName)) >= 0)
    return collSuccess;
  double soon = collTimeNow() + 2.0;
  return collSocketConnect(&next->addr, &b->nextFd, deadline > 0 && deadline < soon ? deadline : soon, b->abortFlag);
}

/* Accepts connections on either listener until one is rank `want` of this
 * communicator. */
static collResult_t collBootAcceptPeer(collBootstrap* b, int lfd, int ufd, int want, int* out, double deadline) {
  for (;;) {
    if (b->abortFlag && *b->abortFlag) return collSetError(collRemoteError, "rank %d: init aborted", b->rank);
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0 && ufd >= 0) fd = accept4(ufd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
        return collSetError(collSystemError, "rank %d: accept on the bootstrap ring listener failed: %s", b->rank,
                            strerror(errno));
      double left = deadline > 0 ? deadline - collTimeNow() : 1.0;
      if (left <= 0)
        return collSetError(collTimeout, "rank %d: init timeout: rank %d never connected the bootstrap ring",
                            b->rank, want);
      struct pollfd p[2] = {{lfd, POLLIN, 0}, {ufd, POLLIN, 0}};
      int ms = left > 0.1 ? 100 : (int)(left * 1000) + 1;
      (void)poll(p, ufd >= 0 ? 2 : 1, ms);
      continue;
    }
    collBootRingMsg m;
    if (collSocketRecvAll(fd, &m, sizeof m, collTimeNow() + 5.0, b->abortFlag) == collSuccess &&
        collBootCheckRing(&m, sizeof m, b->key, want, b->jobNonce)) {
      *out = fd;
      return collSuccess;
    }
    COLL_WARN(COLL_SUB_BOOT, "rank %d: dropped a ring connection with a bad hello (expected rank %d)", b->rank, want);
    close(fd);
  }
}

collResult_t collBootInit(collBootstrap* b, const collBootId* id, int rank, int nranks, volatile int* abortFlag,
                          double initTimeoutSec) {
  b->rank = rank;
  b->nranks = nranks;
  b->nextFd = b->prevFd = -1;
  b->abortFlag = abortFlag;
  memcpy(b->key, id->key, sizeof b->key);
  if (id->magic != COLL_BOOT_MAGIC)
    return collSetError(collInvalidArgument, "unique id is not a coll id (bad magic 0x%x)", id->magic);
  if (id->version != COLL_VERSION_CODE)
    return collSetError(collInvalidUsage, "unique id from coll version %u, this library is %d", id->version,
                        COLL_VERSION_CODE);
  if (!collBootAddrUsable(&id->root))
    return collSetError(collInvalidArgument, "unique id holds no usable root address");
  double deadline = collBootDeadline(initTimeoutSec);
  /* Our ring listener on the interface that reaches the root. */
  collSockAddr ringAddr = id->root;
  if (ringAddr.sa.sa_family == AF_INET) ringAddr.sin.sin_port = 0;
  else ringAddr.sin6.sin6_port = 0;
  collSockAddr local;
  char ifname[64];
  if (collSocketFindInterface(&local, ifname, sizeof ifname) == collSuccess &&
      local.sa.sa_family == ringAddr.sa.sa_family)
    ringAddr = local;
  int lfd = -1, ufd = -1;
  collResult_t r = collSocketListen(&ringAddr, &lfd);
  if (r != collSuccess) return r;
  char unixName[COLL_BOOT_UNIX_BYTES] = "";
  if (nranks > 1 && collBootNsId() && (ufd = collBootUnixListen(unixName)) < 0) unixName[0] = 0;
  collBootNext next;
  memset(&next, 0, sizeof next);
  if ((r = collBootRendezvous(b, id, &ringAddr, unixName, deadline, initTimeoutSec, &next)) != collSuccess)
    goto done;
  b->secret = collBootConnToken(b->key, b->jobNonce);
  if (nranks > 1) {
    int nextRank = (rank + 1) % nranks, prev = (rank - 1 + nranks) % nranks;
    if ((r = collBootConnectNext(b, &next, deadline)) != collSuccess) {
      collSetError(r, "rank %d: cannot connect the bootstrap ring to rank %d (did it fail its init?): %s", rank,
                   nextRank, collLastErrorMessage());
      goto done;
    }
    collBootRingMsg m;
    memset(&m, 0, sizeof m);
    m.rank = rank;
    m.jobNonce = b->jobNonce;
    collBootSealRing(&m, b->key);
    if ((r = collSocketSendAll(b->nextFd, &m, sizeof m, deadline, abortFlag)) != collSuccess) goto done;
    if ((r = collBootAcceptPeer(b, lfd, ufd, prev, &b->prevFd, deadline)) != collSuccess) goto done;
  }
  if (!(id->flags & COLL_BOOT_ROOT_FIRST)) collBootRemember(&id->root, b->jobNonce);
  COLL_INFO(COLL_SUB_BOOT, "rank %d/%d: bootstrap ring ready", rank, nranks);
done:
  if (lfd >= 0) close(lfd);
  if (ufd >= 0) close(ufd);
  if (r != collSuccess) {
    /* the ring is useless now; an owned root tells ranks still joining why */
    if (b->nextFd >= 0) close(b->nextFd);
    if (b->prevFd >= 0) close(b->prevFd);
    b->nextFd = b->prevFd = -1;
  }
  return r;
}

collResult_t collBootAllGather(collBootstrap* b, void* all, size_t bytes) {
  int n = b->nranks;
  char* base = all;
  double deadline = collBootDeadline(b->timeoutSec);
  for (int s = 0; s < n - 1; s++) {
    int sendBlk = (b->rank - s + n) % n, recvBlk = (b->rank - s - 1 + n) % n;
    collResult_t r = collSocketSendRecv(b->nextFd, base + (size_t)sendBlk * bytes, bytes, b->prevFd,
                                        base + (size_t)recvBlk * bytes, bytes, deadline, b->abortFlag);
    if (r != collSuccess) return r;
  }
  return collSuccess;
}

collResult_t collBootBarrier(collBootstrap* b) {
  if (b->nranks == 1) return collSuccess;
  char* tmp = calloc((size_t)b->nranks, 1);
  if (!tmp) return collSetError(collSystemError, "bootstrap: out of memory");
  collResult_t r = collBootAllGather(b, tmp, 1);
  free(tmp);
  return r;
}

void collBootClose(collBootstrap* b, const char* reason) {
  if (b->nextFd >= 0) close(b->nextFd);
  if (b->prevFd >= 0) close(b->prevFd);
  b->nextFd = b->prevFd = -1;
  collBootRootStop(b->root, reason);
  b->root = NULL;
}
