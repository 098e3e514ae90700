/* bootstrap.c - root rendezvous, TCP ring and ring allgather (see .h). */
#include "bootstrap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "misc/log.h"
#include "misc/param.h"

typedef struct {
  uint32_t magic;
  uint32_t version;
  uint64_t secret;
  int32_t rank;
  int32_t nranks;
  collSockAddr ringAddr;
} collBootHello;

typedef struct {
  uint32_t magic;
  int32_t rank;
  uint64_t secret;
} collBootRingHello;

typedef struct {
  int listenFd;
  uint64_t secret;
} collBootRootArgs;

int collBootHelloValid(const void* buf, size_t len, uint64_t secret, int nranks, int* rank, int* helloNranks) {
  collBootHello h;
  if (len != sizeof h) return 0;
  memcpy(&h, buf, sizeof h);
  if (h.magic != COLL_BOOT_MAGIC || h.secret != secret || h.version != COLL_VERSION_CODE || h.nranks < 1 ||
      h.nranks > 65536 || h.rank < 0 || h.rank >= h.nranks || (nranks > 0 && h.nranks != nranks))
    return 0;
  int fam = h.ringAddr.sa.sa_family;
  if (fam != AF_INET && fam != AF_INET6) return 0;
  *rank = h.rank;
  *helloNranks = h.nranks;
  return 1;
}

uint64_t collRandom64(void) {
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) {
    v = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ (uint64_t)(collTimeNow() * 1e9);
  }
  return v;
}

static double collBootDeadline(double timeoutSec) {
  return timeoutSec > 0 ? collTimeNow() + timeoutSec : 0;
}

/* Root thread: collects nranks hellos with the right secret, answers each with
 * the table of ring addresses. Strangers and wrong secrets are dropped. */
static void* collBootRootThread(void* arg) {
  collBootRootArgs a = *(collBootRootArgs*)arg;
  free(arg);
  double deadline = collBootDeadline((double)collParamInt(COLL_PARAM_TIMEOUT));
  int nranks = -1, joined = 0;
  int* fds = NULL;
  collSockAddr* addrs = NULL;
  while (nranks < 0 || joined < nranks) {
    int fd;
    if (collSocketAccept(a.listenFd, &fd, deadline, NULL) != collSuccess) {
      COLL_WARN(COLL_SUB_BOOT, "bootstrap root: gave up after %d of %d ranks joined", joined, nranks);
      goto out;
    }
    collBootHello h;
    int hr, hn;
    if (collSocketRecvAll(fd, &h, sizeof h, collTimeNow() + 5.0, NULL) != collSuccess ||
        !collBootHelloValid(&h, sizeof h, a.secret, nranks, &hr, &hn)) {
      COLL_WARN(COLL_SUB_BOOT,
                "bootstrap root: dropped a connection with a bad hello (wrong secret, version or rank)");
      close(fd);
      continue;
    }
    if (nranks < 0) {
      nranks = h.nranks;
      fds = malloc(sizeof(int) * (size_t)nranks);
      addrs = calloc((size_t)nranks, sizeof *addrs);
      if (!fds || !addrs) { close(fd); goto out; }
      for (int i = 0; i < nranks; i++) fds[i] = -1;
    }
    if (fds[h.rank] >= 0) {
      COLL_WARN(COLL_SUB_BOOT, "bootstrap root: rank %d joined twice; dropping the second", h.rank);
      close(fd);
      continue;
    }
    fds[h.rank] = fd;
    addrs[h.rank] = h.ringAddr;
    joined++;
  }
  for (int r = 0; r < nranks; r++)
    if (collSocketSendAll(fds[r], addrs, sizeof(*addrs) * (size_t)nranks, collTimeNow() + 30, NULL) != collSuccess)
      COLL_WARN(COLL_SUB_BOOT, "bootstrap root: could not answer rank %d", r);
out:
  if (fds)
    for (int r = 0; r < nranks; r++)
      if (fds[r] >= 0) close(fds[r]);
  free(fds);
  free(addrs);
  close(a.listenFd);
  return NULL;
}

collResult_t collBootCreateRoot(collBootId* id, const collSockAddr* addr, uint64_t secret, int bindAny) {
  memset(id, 0, sizeof *id);
  id->magic = COLL_BOOT_MAGIC;
  id->version = COLL_VERSION_CODE;
  id->secret = secret ? secret : collRandom64();
  id->root = *addr;
  collSockAddr bindAddr = *addr;
  if (bindAny && bindAddr.sa.sa_family == AF_INET) bindAddr.sin.sin_addr.s_addr = htonl(INADDR_ANY);
  if (bindAny && bindAddr.sa.sa_family == AF_INET6) bindAddr.sin6.sin6_addr = in6addr_any;
  int fd;
  collResult_t r = collSocketListen(&bindAddr, &fd);
  if (r != collSuccess) return r;
  if (id->root.sa.sa_family == AF_INET) id->root.sin.sin_port = bindAddr.sin.sin_port;
  else id->root.sin6.sin6_port = bindAddr.sin6.sin6_port;
  collBootRootArgs* a = malloc(sizeof *a);
  if (!a) { close(fd); return collSetError(collSystemError, "bootstrap: out of memory"); }
  a->listenFd = fd;
  a->secret = id->secret;
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int e = pthread_create(&t, &attr, collBootRootThread, a);
  pthread_attr_destroy(&attr);
  if (e) {
    close(fd);
    free(a);
    return collSetError(collSystemError, "bootstrap: cannot start the root thread: %s", strerror(e));
  }
  char s[80];
  COLL_INFO(COLL_SUB_BOOT, "bootstrap root listening on %s", collSockAddrStr(&id->root, s, sizeof s));
  return collSuccess;
}

/* Accepts connections on lfd until one says it is rank `want` with our secret. */
static collResult_t collBootAcceptPeer(collBootstrap* b, int lfd, int want, int* out, double deadline) {
  for (;;) {
    int fd;
    collResult_t r = collSocketAccept(lfd, &fd, deadline, b->abortFlag);
    if (r != collSuccess) return r;
    collBootRingHello h;
    if (collSocketRecvAll(fd, &h, sizeof h, collTimeNow() + 5.0, b->abortFlag) == collSuccess &&
        h.magic == COLL_BOOT_MAGIC && h.secret == b->secret && h.rank == want) {
      *out = fd;
      return collSuccess;
    }
    COLL_WARN(COLL_SUB_BOOT, "rank %d: dropped a ring connection with a bad hello (expected rank %d)", b->rank, want);
    close(fd);
  }
}

collResult_t collBootInit(collBootstrap* b, const collBootId* id, int rank, int nranks,
                          volatile int* abortFlag, double timeoutSec) {
  memset(b, 0, sizeof *b);
  b->rank = rank;
  b->nranks = nranks;
  b->secret = id->secret;
  b->nextFd = b->prevFd = -1;
  b->abortFlag = abortFlag;
  b->timeoutSec = timeoutSec;
  if (id->magic != COLL_BOOT_MAGIC)
    return collSetError(collInvalidArgument, "unique id is not a coll id (bad magic 0x%x)", id->magic);
  if (id->version != COLL_VERSION_CODE)
    return collSetError(collInvalidUsage, "unique id from coll version %u, this library is %d",
                        id->version, COLL_VERSION_CODE);
  double deadline = collBootDeadline(timeoutSec);
  /* Our ring listener on the interface that reaches the root. */
  collSockAddr ringAddr = id->root;
  if (ringAddr.sa.sa_family == AF_INET) ringAddr.sin.sin_port = 0;
  else ringAddr.sin6.sin6_port = 0;
  collSockAddr local;
  char ifname[64];
  if (collSocketFindInterface(&local, ifname, sizeof ifname) == collSuccess &&
      local.sa.sa_family == ringAddr.sa.sa_family)
    ringAddr = local;
  int lfd = -1, rootFd = -1;
  collResult_t r = collSocketListen(&ringAddr, &lfd);
  if (r != collSuccess) return r;
  collSockAddr* addrs = NULL;
  r = collSocketConnect(&id->root, &rootFd, deadline, abortFlag);
  if (r != collSuccess) goto done;
  collBootHello h = {COLL_BOOT_MAGIC, COLL_VERSION_CODE, id->secret, rank, nranks, ringAddr};
  if ((r = collSocketSendAll(rootFd, &h, sizeof h, deadline, abortFlag)) != collSuccess) goto done;
  addrs = calloc((size_t)nranks, sizeof *addrs);
  if (!addrs) { r = collSetError(collSystemError, "bootstrap: out of memory"); goto done; }
  r = collSocketRecvAll(rootFd, addrs, sizeof(*addrs) * (size_t)nranks, deadline, abortFlag);
  if (r != collSuccess) {
    char s[80];
    collSetError(r, "rank %d: no answer from the bootstrap root %s (did every rank of %d start with the same id?)",
                 rank, collSockAddrStr(&id->root, s, sizeof s), nranks);
    goto done;
  }
  if (nranks > 1) {
    int next = (rank + 1) % nranks, prev = (rank - 1 + nranks) % nranks;
    if ((r = collSocketConnect(&addrs[next], &b->nextFd, deadline, abortFlag)) != collSuccess) goto done;
    collBootRingHello rh = {COLL_BOOT_MAGIC, rank, id->secret};
    if ((r = collSocketSendAll(b->nextFd, &rh, sizeof rh, deadline, abortFlag)) != collSuccess) goto done;
    if ((r = collBootAcceptPeer(b, lfd, prev, &b->prevFd, deadline)) != collSuccess) goto done;
  }
  COLL_INFO(COLL_SUB_BOOT, "rank %d/%d: bootstrap ring ready", rank, nranks);
done:
  free(addrs);
  if (rootFd >= 0) close(rootFd);
  if (lfd >= 0) close(lfd);
  if (r != collSuccess) collBootClose(b);
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

void collBootClose(collBootstrap* b) {
  if (b->nextFd >= 0) close(b->nextFd);
  if (b->prevFd >= 0) close(b->prevFd);
  b->nextFd = b->prevFd = -1;
}
