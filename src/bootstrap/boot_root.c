/*
 * boot_root.c - the bootstrap root: a thread that collects every rank's
 * hello and answers with authenticated replies (boot_proto.h).
 *
 * States: RENDEZVOUS (collecting) -> FORMED (every rank answered OK) or
 * FAILED (an error answered to every rank that joined).
 *  - A hello without this job's key, or from another coll version, gets an
 *    UNAUTH reply (the sender fails at once; the job goes on).
 *  - An authentic hello that contradicts the job (another nranks, a rank
 *    that already joined, an out-of-range field) fails the job: every rank
 *    that joined and every rank that joins in the next COLL_BOOT_FAIL_LINGER
 *    seconds gets the reason.
 *  - At the init timeout the job fails with "k of n ranks joined; missing:".
 *  - A lingering root (launcher mode: it serves MASTER_ADDR:MASTER_PORT+1
 *    while its communicator lives) answers an authentic hello for a formed
 *    communicator with BUSY if the rank's process was a member of it (the
 *    next init of the same job). A newcomer whose process started more than
 *    COLL_BOOT_LATE_MARGIN after the communicator formed (another job on the
 *    address, a retried pod) is refused alone: the communicator goes on.
 *    Else it is a rank that joined twice (the rendezvous may have mixed two
 *    jobs): the owner communicator is failed and the newcomer told why.
 * The thread sleeps in poll() on the listener and an eventfd; it never spins.
 */
#include "bootstrap/boot_root.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "misc/log.h"

#define COLL_BOOT_FAIL_LINGER 5.0 /* seconds a failed root keeps telling newcomers why */
#define COLL_BOOT_HELLO_WAIT 2.0   /* seconds a connection may take to send its hello */
#define COLL_BOOT_LATE_MARGIN 1.0  /* seconds of clock skew between hosts a late duplicate's start must exceed */

enum { ROOT_RENDEZVOUS, ROOT_FORMED, ROOT_FAILED };

/* snprintf that may cut the text (reasons are bounded by the wire format). */
__attribute__((format(printf, 3, 4))) static void collFmt(char* dst, size_t len, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(dst, len, fmt, ap);
  va_end(ap);
}

struct collBootRoot {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int refs;          /* thread + owner */
  int stop;          /* owner asked to stop */
  char stopReason[COLL_BOOT_REASON_BYTES];
  collBootRootFailFn failFn;
  void* failCtx;
  /* thread-owned below */
  int listenFd, wakeFd;
  uint8_t key[COLL_BOOT_KEY_BYTES];
  int nranks, linger;
  double timeoutSec;
  char where[96];
  uint64_t jobNonce;
  int state;
  int joined;
  int* fds;
  collBootHelloMsg* hellos;
  collSockAddr* from;
  int failStatus;
  char failReason[COLL_BOOT_REASON_BYTES];
  int lingerWanted;  /* failed early: wait a little for the ranks not told yet */
  uint8_t* told;     /* [COLL_BOOT_MAX_RANKS]: rank got the error */
  int claimed;       /* the largest nranks any hello claimed */
  int dupSeen;       /* a rank joined twice: who else claims a rank is unknown, linger in full */
  uint64_t formedUs; /* CLOCK_REALTIME (us) when every rank had joined */
  int late;          /* late duplicates refused (their processes started after the communicator formed) */
  int strangers;
  char strangerFrom[64];
};

static void collRootUnref(struct collBootRoot* R) {
  pthread_mutex_lock(&R->lock);
  int last = --R->refs == 0;
  pthread_mutex_unlock(&R->lock);
  if (!last) return;
  pthread_mutex_destroy(&R->lock);
  pthread_cond_destroy(&R->cond);
  free(R);
}

static const char* collPeerName(int fd, char* buf, size_t len) {
  collSockAddr a;
  socklen_t sl = sizeof a;
  memset(&a, 0, sizeof a);
  if (getpeername(fd, &a.sa, &sl) != 0) {
    collFmt(buf, len, "?");
    return buf;
  }
  return collSockAddrStr(&a, buf, len);
}

/* Sends one reply (best effort: the peer may be gone) and closes fd. */
static void collRootAnswer(struct collBootRoot* R, int fd, const collBootHelloMsg* h, int kind, int status,
                           const char* reason, const collBootHelloMsg* next) {
  collBootReplyMsg m;
  memset(&m, 0, sizeof m);
  m.kind = (uint32_t)kind;
  m.status = status;
  if (h) {
    m.rank = h->rank;
    m.nranks = h->nranks;
    m.rankNonce = h->rankNonce;
  }
  m.jobNonce = R->jobNonce;
  if (next) {
    m.next = next->ringAddr;
    m.nextNsId = next->nsId;
    memcpy(m.nextUnix, next->unixName, sizeof m.nextUnix);
  }
  if (reason) collFmt(m.reason, sizeof m.reason, "%s", reason);
  collBootSealReply(&m, R->key);
  (void)collSocketSendAll(fd, &m, sizeof m, collTimeNow() + 5.0, NULL);
  close(fd);
  if (kind == COLL_BOOT_REPLY_ERR && h && R->told && h->rank >= 0 && h->rank < COLL_BOOT_MAX_RANKS)
    R->told[h->rank] = 1;
}

/* "3, 5-9, 12" (as much as fits) */
static void collMissingList(const struct collBootRoot* R, char* buf, size_t len) {
  size_t o = 0;
  int shown = 0, missing = R->nranks - R->joined;
  buf[0] = 0;
  for (int r = 0; r < R->nranks; r++) {
    if (R->fds[r] >= 0) continue;
    int e = r;
    while (e + 1 < R->nranks && R->fds[e + 1] < 0) e++;
    char item[32];
    if (e > r) collFmt(item, sizeof item, "%s%d-%d", o ? ", " : "", r, e);
    else collFmt(item, sizeof item, "%s%d", o ? ", " : "", r);
    if (o + strlen(item) + 24 >= len) {
      collFmt(buf + o, len - o, " and %d more", missing - shown);
      return;
    }
    collFmt(buf + o, len - o, "%s", item);
    o += strlen(buf + o);
    shown += e - r + 1;
    r = e;
  }
}

/* Every rank that joined (and `extra`, a rank that is not in the table) gets
 * the error; later hellos get it too while the root lingers. */
static void collRootFail(struct collBootRoot* R, int status, const char* reason, int extraFd,
                         const collBootHelloMsg* extra) {
  R->state = ROOT_FAILED;
  R->lingerWanted = status != collTimeout; /* after a timeout the missing ranks are missing */
  if (!R->told) R->told = calloc(COLL_BOOT_MAX_RANKS, 1);
  R->failStatus = status;
  collFmt(R->failReason, sizeof R->failReason, "%s", reason);
  COLL_WARN(COLL_SUB_BOOT, "bootstrap root %s: %s", R->where, R->failReason);
  for (int r = 0; R->fds && r < R->nranks; r++)
    if (R->fds[r] >= 0) {
      collRootAnswer(R, R->fds[r], &R->hellos[r], COLL_BOOT_REPLY_ERR, status, R->failReason, NULL);
      R->fds[r] = -1;
    }
  if (extraFd >= 0) collRootAnswer(R, extraFd, extra, COLL_BOOT_REPLY_ERR, status, R->failReason, NULL);
}

static void collRootFormed(struct collBootRoot* R) {
  int n = R->nranks;
  for (int r = 0; r < n; r++) {
    collRootAnswer(R, R->fds[r], &R->hellos[r], COLL_BOOT_REPLY_OK, 0, NULL, &R->hellos[(r + 1) % n]);
    R->fds[r] = -1;
  }
  R->state = ROOT_FORMED;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  R->formedUs = (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000u;
  COLL_INFO(COLL_SUB_BOOT, "bootstrap root %s: all %d ranks joined", R->where, n);
}

/* Reads and judges one connection's hello. */
static void collRootHandle(struct collBootRoot* R, int fd) {
  char peer[64], why[COLL_BOOT_REASON_BYTES], msg[COLL_BOOT_REASON_BYTES];
  collPeerName(fd, peer, sizeof peer);
  union {
    collBootHelloMsg h;
    uint32_t hdr[2];
  } in;
  double dl = collTimeNow() + COLL_BOOT_HELLO_WAIT;
  if (collSocketRecvAll(fd, in.hdr, sizeof in.hdr, dl, NULL) != collSuccess) {
    close(fd);
    return;
  }
  size_t len = sizeof in.hdr;
  if (in.hdr[0] == COLL_BOOT_MAGIC && in.hdr[1] == COLL_VERSION_CODE) {
    if (collSocketRecvAll(fd, (char*)&in + len, sizeof in.h - len, dl, NULL) != collSuccess) {
      close(fd);
      return;
    }
    len = sizeof in.h;
  }
  collBootHelloMsg h;
  uint32_t version = 0;
  collHelloVerdict v = collBootCheckHello(&in, len, R->key, &h, &version, why, sizeof why);
  if (v == COLL_HELLO_OK && h.nranks > R->claimed) R->claimed = h.nranks;
  if (v == COLL_HELLO_GARBAGE || v == COLL_HELLO_VERSION || v == COLL_HELLO_BADMAC) {
    R->strangers++;
    collFmt(R->strangerFrom, sizeof R->strangerFrom, "%s", peer);
    if (v == COLL_HELLO_GARBAGE) collFmt(msg, sizeof msg, "not a coll bootstrap hello");
    else if (v == COLL_HELLO_VERSION)
      collFmt(msg, sizeof msg, "the bootstrap root %s runs coll version %d, the hello came from version %u", R->where,
               COLL_VERSION_CODE, version);
    else
      collFmt(msg, sizeof msg,
               "the bootstrap root %s belongs to another job (the hello's key differs: another unique id, job id or "
               "rendezvous address)",
               R->where);
    COLL_WARN(COLL_SUB_BOOT, "bootstrap root %s: rejected a connection from %s: %s", R->where, peer, msg);
    collRootAnswer(R, fd, NULL, COLL_BOOT_REPLY_UNAUTH, 0, msg, NULL);
    return;
  }
  if (v == COLL_HELLO_RANGE) {
    collFmt(msg, sizeof msg, "bad hello from %s: %s", peer, why);
    if (R->state == ROOT_RENDEZVOUS) collRootFail(R, collInvalidUsage, msg, fd, NULL);
    else collRootAnswer(R, fd, NULL, COLL_BOOT_REPLY_ERR, collInvalidUsage, msg, NULL);
    return;
  }
  if (R->state == ROOT_FAILED) {
    collRootAnswer(R, fd, &h, COLL_BOOT_REPLY_ERR, R->failStatus, R->failReason, NULL);
    return;
  }
  if (R->state == ROOT_FORMED) {
    if (h.prevNonce == R->jobNonce) {
      collRootAnswer(R, fd, &h, COLL_BOOT_REPLY_BUSY, 0, "the previous communicator on this address still runs", NULL);
      return;
    }
    if (h.startedUs > R->formedUs + (uint64_t)(COLL_BOOT_LATE_MARGIN * 1e6)) {
      /* the newcomer's process started after this communicator formed: it cannot
       * be one of its ranks (another job, a retried pod): refuse it alone */
      collFmt(msg, sizeof msg,
               "the rendezvous address %s serves a running communicator of %d ranks (formed %.1f s before this "
               "process started) that already has a rank %d: another job on the same address? give each job its "
               "own MASTER_PORT, or a job id (TORCHELASTIC_RUN_ID, SLURM_JOB_ID, ...)",
               R->where, R->nranks, (double)(h.startedUs - R->formedUs) / 1e6, (int)h.rank);
      if (R->late++ == 0)
        COLL_WARN(COLL_SUB_BOOT, "bootstrap root %s: refused %s (pid %u) asking to join as rank %d of %d: its process "
                  "started after this communicator formed (another job on this address); this communicator goes on",
                  R->where, peer, h.pid, (int)h.rank, (int)h.nranks);
      collRootAnswer(R, fd, &h, COLL_BOOT_REPLY_ERR, collInvalidUsage, msg, NULL);
      return;
    }
    collFmt(msg, sizeof msg,
             "rank %d joined twice: the communicator of %s already has a rank %d, and %s (pid %u) asked to join as "
             "rank %d of %d: two jobs on one rendezvous address (MASTER_ADDR:MASTER_PORT+1), or two processes with "
             "the same RANK",
             (int)h.rank, R->where, (int)h.rank, peer, h.pid, (int)h.rank, (int)h.nranks);
    pthread_mutex_lock(&R->lock);
    if (R->failFn) R->failFn(R->failCtx, collInvalidUsage, msg);
    pthread_mutex_unlock(&R->lock);
    /* from now on a failed root: newcomers (the other job's ranks) hear why */
    R->dupSeen = 1;
    collRootFail(R, collInvalidUsage, msg, fd, &h);
    return;
  }
  if (R->nranks < 0) R->nranks = h.nranks;
  if (!R->fds) {
    R->fds = malloc(sizeof(int) * (size_t)R->nranks);
    R->hellos = calloc((size_t)R->nranks, sizeof *R->hellos);
    R->from = calloc((size_t)R->nranks, sizeof *R->from);
    if (!R->fds || !R->hellos || !R->from) {
      free(R->fds);
      R->fds = NULL;
      collRootFail(R, collSystemError, "the bootstrap root ran out of memory", fd, &h);
      return;
    }
    for (int r = 0; r < R->nranks; r++) R->fds[r] = -1;
  }
  if (h.nranks != R->nranks) {
    collFmt(msg, sizeof msg,
             "rank %d (%s, pid %u) says the job has %d ranks, but the job has %d (WORLD_SIZE differs between ranks?)",
             (int)h.rank, peer, h.pid, (int)h.nranks, R->nranks);
    collRootFail(R, collInvalidUsage, msg, fd, &h);
    return;
  }
  if (R->fds[h.rank] >= 0) {
    R->dupSeen = 1;
    char first[64];
    collSockAddrStr(&R->from[h.rank], first, sizeof first);
    collFmt(msg, sizeof msg,
             "rank %d joined twice: from %s (pid %u) and from %s (pid %u): two jobs on the rendezvous address %s, "
             "or two processes with the same RANK",
             (int)h.rank, first, R->hellos[h.rank].pid, peer, h.pid, R->where);
    collRootFail(R, collInvalidUsage, msg, fd, &h);
    return;
  }
  R->fds[h.rank] = fd;
  R->hellos[h.rank] = h;
  socklen_t sl = sizeof R->from[h.rank];
  if (getpeername(fd, &R->from[h.rank].sa, &sl) != 0) memset(&R->from[h.rank], 0, sizeof R->from[h.rank]);
  R->joined++;
  if (R->joined == R->nranks) collRootFormed(R);
}

static void collRootTimeout(struct collBootRoot* R) {
  char missing[200], msg[COLL_BOOT_REASON_BYTES], extra[128] = "";
  if (R->strangers)
    collFmt(extra, sizeof extra, "; rejected %d connection(s) of another job or version (last from %s)",
             R->strangers, R->strangerFrom);
  if (R->nranks < 0) {
    collFmt(msg, sizeof msg, "init timeout: no rank joined the bootstrap root %s within COLL_INIT_TIMEOUT=%g s%s",
             R->where, R->timeoutSec, extra);
  } else {
    collMissingList(R, missing, sizeof missing);
    collFmt(msg, sizeof msg,
             "init timeout: %d of %d ranks joined the bootstrap root %s within COLL_INIT_TIMEOUT=%g s; missing: %s%s",
             R->joined, R->nranks, R->where, R->timeoutSec, missing, extra);
  }
  collRootFail(R, collTimeout, msg, -1, NULL);
}

static void* collRootThread(void* arg) {
  struct collBootRoot* R = arg;
  double start = collTimeNow();
  double deadline = R->timeoutSec > 0 ? start + R->timeoutSec : 0, lingerEnd = 0;
  int firstSeen = 0;
  for (;;) {
    pthread_mutex_lock(&R->lock);
    int stop = R->stop;
    char reason[COLL_BOOT_REASON_BYTES];
    collFmt(reason, sizeof reason, "%s", R->stopReason);
    pthread_mutex_unlock(&R->lock);
    double now = collTimeNow();
    if (stop && R->state == ROOT_RENDEZVOUS) {
      collRootFail(R, collRemoteError, reason[0] ? reason : "rank 0 stopped before every rank joined", -1, NULL);
    }
    if (R->state == ROOT_RENDEZVOUS && deadline > 0 && now >= deadline) collRootTimeout(R);
    if (R->state == ROOT_FAILED && lingerEnd == 0) lingerEnd = now + (R->lingerWanted ? COLL_BOOT_FAIL_LINGER : 0);
    int allTold = R->told != NULL && !R->dupSeen;
    int expect = R->nranks > R->claimed ? R->nranks : R->claimed;
    for (int r = 0; allTold && r < expect; r++) allTold = R->told[r];
    int done = (R->state == ROOT_FORMED && (!R->linger || stop)) ||
               (R->state == ROOT_FAILED && (now >= lingerEnd || allTold));
    if (done || (stop && R->state != ROOT_FAILED)) {
      close(R->listenFd);
      R->listenFd = -1;
    }
    if (stop) {
      pthread_mutex_lock(&R->lock);
      R->failFn = NULL;
      pthread_mutex_unlock(&R->lock);
    }
    if (R->listenFd < 0) break;
    double until = R->state == ROOT_RENDEZVOUS ? deadline : R->state == ROOT_FAILED ? lingerEnd : 0;
    int ms = -1;
    if (until > 0) ms = until - now > 0 ? (int)((until - now) * 1000.0) + 1 : 0;
    struct pollfd p[2] = {{R->listenFd, POLLIN, 0}, {R->wakeFd, POLLIN, 0}};
    int k = poll(p, 2, ms);
    if (k < 0 && errno != EINTR) {
      collRootFail(R, collSystemError, "the bootstrap root's poll failed", -1, NULL);
      continue;
    }
    if (k > 0 && (p[1].revents & POLLIN)) {
      uint64_t x;
      if (read(R->wakeFd, &x, sizeof x) < 0) { /* nothing to do: the flag is read above */
      }
    }
    if (k > 0 && (p[0].revents & POLLIN)) {
      int fd;
      if (collSocketAccept(R->listenFd, &fd, collTimeNow() + 0.01, NULL) == collSuccess) {
        collRootHandle(R, fd);
        /* an id made by collGetUniqueId: its clock starts again at the first hello */
        if (!firstSeen && R->nranks > 0 && R->timeoutSec > 0 && !R->linger) deadline = collTimeNow() + R->timeoutSec;
        firstSeen = 1;
      }
    }
  }
  if (R->fds)
    for (int r = 0; r < R->nranks; r++)
      if (R->fds[r] >= 0) close(R->fds[r]);
  free(R->fds);
  free(R->hellos);
  free(R->from);
  free(R->told);
  pthread_mutex_lock(&R->lock);
  close(R->wakeFd); /* under the lock: collBootRootStop writes to it */
  R->wakeFd = -1;
  pthread_cond_broadcast(&R->cond);
  pthread_mutex_unlock(&R->lock);
  collRootUnref(R);
  return NULL;
}

/* Binds and listens; *inUse = 1 when the address is taken. */
static collResult_t collRootListen(collSockAddr* addr, int* fd, int* inUse) {
  char s[80];
  *inUse = 0;
  int f = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (f < 0) return collSetError(collSystemError, "socket() for %s failed: %s", collSockAddrStr(addr, s, sizeof s), strerror(errno));
  int one = 1;
  (void)setsockopt(f, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  socklen_t sl = sizeof *addr;
  if (bind(f, &addr->sa, collSockAddrLen(addr)) != 0 || listen(f, SOMAXCONN) != 0 ||
      getsockname(f, &addr->sa, &sl) != 0) {
    int e = errno;
    close(f);
    *inUse = e == EADDRINUSE;
    return collSetError(collSystemError, "cannot listen on %s: %s", collSockAddrStr(addr, s, sizeof s), strerror(e));
  }
  *fd = f;
  return collSuccess;
}

collResult_t collBootRootStart(const collBootRootCfg* cfg, collSockAddr* addr, int bindAny, collBootRoot** out,
                               int* inUse) {
  collSockAddr bindAddr = *addr;
  if (bindAny && bindAddr.sa.sa_family == AF_INET) bindAddr.sin.sin_addr.s_addr = htonl(INADDR_ANY);
  if (bindAny && bindAddr.sa.sa_family == AF_INET6) bindAddr.sin6.sin6_addr = in6addr_any;
  int lfd = -1, busy = 0;
  collResult_t r = collRootListen(&bindAddr, &lfd, &busy);
  if (inUse) *inUse = busy;
  if (r != collSuccess) return r;
  if (addr->sa.sa_family == AF_INET) addr->sin.sin_port = bindAddr.sin.sin_port;
  else addr->sin6.sin6_port = bindAddr.sin6.sin6_port;
  struct collBootRoot* R = calloc(1, sizeof *R);
  int wfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (!R || wfd < 0) {
    free(R);
    if (wfd >= 0) close(wfd);
    close(lfd);
    return collSetError(collSystemError, "bootstrap root: out of memory or eventfd failed");
  }
  pthread_mutex_init(&R->lock, NULL);
  pthread_cond_init(&R->cond, NULL);
  R->refs = out ? 2 : 1;
  R->listenFd = lfd;
  R->wakeFd = wfd;
  memcpy(R->key, cfg->key, sizeof R->key);
  R->nranks = cfg->nranks > 0 ? cfg->nranks : -1;
  R->linger = cfg->linger;
  R->timeoutSec = cfg->timeoutSec;
  collSockAddrStr(addr, R->where, sizeof R->where);
  if (cfg->what) {
    char w[96];
    collFmt(w, sizeof w, "%s (%s)", R->where, cfg->what);
    collFmt(R->where, sizeof R->where, "%s", w);
  }
  do R->jobNonce = collRandom64();
  while (R->jobNonce == 0);
  R->state = ROOT_RENDEZVOUS;
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int e = pthread_create(&t, &attr, collRootThread, R);
  pthread_attr_destroy(&attr);
  if (e) {
    close(lfd);
    close(wfd);
    pthread_mutex_destroy(&R->lock);
    pthread_cond_destroy(&R->cond);
    free(R);
    return collSetError(collSystemError, "bootstrap: cannot start the root thread: %s", strerror(e));
  }
  if (out) *out = R;
  char s[96];
  COLL_INFO(COLL_SUB_BOOT, "bootstrap root listening on %s", collSockAddrStr(addr, s, sizeof s));
  return collSuccess;
}

void collBootRootSetOwner(collBootRoot* R, collBootRootFailFn fn, void* ctx) {
  if (!R) return;
  pthread_mutex_lock(&R->lock);
  R->failFn = fn;
  R->failCtx = ctx;
  pthread_mutex_unlock(&R->lock);
}

void collBootRootStop(collBootRoot* R, const char* reason) {
  if (!R) return;
  pthread_mutex_lock(&R->lock);
  R->stop = 1;
  R->failFn = NULL;
  if (reason) collFmt(R->stopReason, sizeof R->stopReason, "%s", reason);
  uint64_t one = 1;
  if (R->wakeFd >= 0 && write(R->wakeFd, &one, sizeof one) < 0) { /* the eventfd cannot be full */
  }
  /* until the thread has closed everything it holds (its listener, the ranks'
   * connections, the eventfd: a caller counting fds after destroy sees them
   * all back); a failed root first tells the ranks that have not heard yet
   * (a few s) */
  while (R->wakeFd >= 0) pthread_cond_wait(&R->cond, &R->lock);
  pthread_mutex_unlock(&R->lock);
  collRootUnref(R);
}
