/*
 * shm_setup.c - connection setup and teardown of the shm transport: listen,
 * connect, accept, close (the table is in shm.c, the data path in
 * shm_ring.c).
 *
 * Listen: an AF_UNIX stream socket in the abstract namespace, named
 * "coll-shm-<pid>-<random>": no file on disk, gone with the process. The
 * 64-byte handle is {magic, pid, name length, name, single-copy threshold}.
 *
 * Single copy is agreed per connection before any data moves: the sender
 * combines its own threshold with the one in the receiver's handle
 * (shmCmaAgree: on only when both are on, from the larger threshold) and
 * writes the result into the segment header; the receiver takes it from
 * there. Both ends of a connection thus run one protocol even when their
 * processes measured process_vm_readv differently (shm_cma.c).
 *
 * Connect: the SENDER creates the connection's memory with memfd_create and
 * reserves it with fallocate (so a lack of memory is an error here, not a
 * SIGBUS later), maps it and touches every page (both sides map it with
 * MAP_POPULATE: no page faults in the data path), creates two eventfds for wake-ups, connects to the
 * receiver's socket and passes {hello, memfd, dataFd, spaceFd} with
 * SCM_RIGHTS. The segment is anonymous memory owned by whoever maps it:
 * nothing ever appears in /dev/shm, a crash leaves nothing behind, and
 * Docker's 64 MiB /dev/shm limit does not apply. Size: COLL_SHM_NSLOTS slots
 * of COLL_SHM_BUFFSIZE / COLL_SHM_NSLOTS bytes (page multiples) plus a 4 KiB
 * header, per connection and direction.
 *
 * Accept: takes one connection from the listen socket without waiting for
 * new ones, reads the hello and the descriptors (waiting up to 10 s for a
 * connection that is already there), checks the segment, maps it and reads
 * every page once. Bad
 * connections are dropped with a warning. The peer's pid comes from
 * SO_PEERCRED (valid in our pid namespace), which is what single-copy reads
 * (process_vm_readv) need.
 *
 * Each connection keeps its AF_UNIX socket open: when the peer process dies
 * the socket reports EOF, which the data path turns into collRemoteError.
 *
 * A receiver at its open-file limit gets the hello without the descriptors
 * (MSG_CTRUNC). It then writes a NAK {magic, errno, pid} on the socket,
 * closes it and fails its accept ("Too many open files"); the sender reads
 * the NAK when it next checks the socket (while blocked, and on close) and
 * fails with the receiver's reason, so both sides report the same cause.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "misc/log.h"
#include "misc/param.h"
#include "misc/socket.h"
#include "transports/shm/shm_internal.h"

#define SHM_HANDLE_MAGIC 0x636f6c6c53484d48ULL /* "collSHMH" */
#define SHM_HELLO_MAGIC 0x636f6c6c53484d4fULL  /* "collSHMO" */
#define SHM_HELLO_WAIT_S 10.0                  /* how long accept waits for a hello */
#define SHM_NAME_MAX 36 /* "coll-shm-<pid>-<16 hex>" */

typedef struct {
  uint64_t magic;
  int32_t pid;
  uint32_t nameLen;
  char name[SHM_NAME_MAX + 4];
  uint64_t cmaThreshold; /* the listener's own single-copy threshold (shmCmaThreshold; 0: never) */
} shmHandle;
_Static_assert(sizeof(shmHandle) <= COLL_NET_HANDLE_BYTES, "shm handle too large");

typedef struct { /* sent by connect with the three descriptors */
  uint64_t magic, totalBytes, slotBytes, dataOff;
  uint32_t nslots;
  int32_t pid;
} shmHello;

struct shmListen {
  uint32_t tag; /* SHM_TAG_LISTEN */
  int fd;
  int pid;
  char name[SHM_NAME_MAX + 4];
};

/* sockaddr of an abstract-namespace name; returns its length. */
static socklen_t shmAddr(struct sockaddr_un* a, const char* name, size_t len) {
  memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  memcpy(a->sun_path + 1, name, len); /* sun_path[0] = 0: abstract */
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
}

/* Slot bytes, data offset and total bytes of a new segment (COLL_SHM_BUFFSIZE). */
void shmSizes(size_t* slotBytes, size_t* dataOff, size_t* total) {
  size_t buff = (size_t)collParamInt(COLL_PARAM_SHM_BUFFSIZE);
  size_t slot = (buff / COLL_SHM_NSLOTS + 4095) & ~(size_t)4095;
  *slotBytes = slot;
  *dataOff = (sizeof(shmHdr) + 4095) & ~(size_t)4095;
  *total = *dataOff + slot * COLL_SHM_NSLOTS;
}

/* Allocates a comm around a mapped segment and its descriptors. */
static collResult_t shmNewComm(int isSend, shmHdr* hdr, size_t mapBytes, size_t slotBytes, size_t dataOff, int sock,
                               int dataFd, int spaceFd, size_t cmaThreshold, shmComm** out) {
  shmComm* c = calloc(1, sizeof *c);
  if (!c) return collSetError(collSystemError, "shm: out of memory for a connection");
  c->tag = SHM_TAG_COMM;
  c->isSend = isSend;
  c->hdr = hdr;
  c->mapBytes = mapBytes;
  c->data = (char*)hdr + dataOff;
  c->slotBytes = slotBytes;
  c->sock = sock;
  c->dataFd = dataFd;
  c->spaceFd = spaceFd;
  struct ucred cr;
  socklen_t cl = sizeof cr;
  c->peerPid = getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0 ? (int)cr.pid : 0;
  c->cmaThreshold = cmaThreshold; /* agreed by both ends (see the top of this file) */
  c->cmaOn = cmaThreshold > 0;
  c->lastCheck = collTimeNow();
  c->stale = 1; /* the first arm resets the eventfd */
  *out = c;
  return collSuccess;
}

/* listen: binds a non-blocking AF_UNIX socket to a fresh abstract name. */
collResult_t shmListenFn(int dev, void* handle, void** listenComm) {
  if (!handle || !listenComm || dev != 0)
    return collSetError(collInvalidArgument, "shm listen: bad device %d or NULL argument", dev);
  *listenComm = NULL;
  shmListen* l = calloc(1, sizeof *l);
  if (!l) return collSetError(collSystemError, "shm listen: out of memory");
  l->tag = SHM_TAG_LISTEN;
  l->pid = (int)getpid();
  l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (l->fd < 0) {
    free(l);
    return collSetError(collSystemError, "shm listen: socket(AF_UNIX) failed: %s", strerror(errno));
  }
  int rc = -1;
  for (int attempt = 0; attempt < 8 && rc != 0; attempt++) {
    unsigned long long rnd = 0;
    if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
      rnd = (unsigned long long)(collTimeNow() * 1e9) ^ ((unsigned long long)(uintptr_t)l << 16) ^ (unsigned)attempt;
    snprintf(l->name, sizeof l->name, "coll-shm-%d-%016llx", l->pid, rnd);
    struct sockaddr_un a;
    socklen_t al = shmAddr(&a, l->name, strlen(l->name));
    rc = bind(l->fd, (struct sockaddr*)&a, al);
    if (rc != 0 && errno != EADDRINUSE) break;
  }
  if (rc != 0 || listen(l->fd, SOMAXCONN) != 0) {
    int e = errno;
    close(l->fd);
    free(l);
    return collSetError(collSystemError, "shm listen: cannot bind/listen an abstract AF_UNIX socket: %s", strerror(e));
  }
  shmHandle h;
  memset(&h, 0, sizeof h);
  h.magic = SHM_HANDLE_MAGIC;
  h.pid = l->pid;
  h.nameLen = (uint32_t)strlen(l->name);
  memcpy(h.name, l->name, h.nameLen);
  h.cmaThreshold = shmCmaThreshold(NULL);
  memset(handle, 0, COLL_NET_HANDLE_BYTES);
  memcpy(handle, &h, sizeof h);
  *listenComm = l;
  return collSuccess;
}

/* Creates, reserves and maps the sender's segment; initializes the header.
 * *mfd keeps the memfd open (to pass it). */
static collResult_t shmCreateSegment(int peerPid, uint64_t cmaThreshold, shmHdr** out, int* mfd, size_t* slotBytes,
                                     size_t* dataOff, size_t* total) {
  shmSizes(slotBytes, dataOff, total);
  long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  if (pages > 0 && psz > 0 && *total > (size_t)pages / 2 * (size_t)psz)
    return collSetError(collSystemError,
                        "shm: a connection to process %d needs %zu bytes of shared memory, more than half of this "
                        "node's memory; lower COLL_SHM_BUFFSIZE (now %lld)",
                        peerPid, *total, (long long)collParamInt(COLL_PARAM_SHM_BUFFSIZE));
  int fd = memfd_create("coll-shm", MFD_CLOEXEC);
  if (fd < 0) return collSetError(collSystemError, "shm: memfd_create failed: %s", strerror(errno));
  const char* step = "ftruncate";
  int rc = ftruncate(fd, (off_t)*total);
  if (rc == 0) {
    step = "fallocate";
    rc = fallocate(fd, 0, 0, (off_t)*total);
    if (rc != 0 && (errno == EOPNOTSUPP || errno == ENOSYS)) rc = 0; /* lazily backed then */
  }
  if (rc != 0) {
    int e = errno;
    close(fd);
    return collSetError(collSystemError,
                        "shm: cannot allocate the %zu bytes of shared memory a connection to process %d needs "
                        "(%s: %s); free memory or lower COLL_SHM_BUFFSIZE (now %lld), or set COLL_SHM_DISABLE=1",
                        *total, peerPid, step, strerror(e), (long long)collParamInt(COLL_PARAM_SHM_BUFFSIZE));
  }
  void* p = mmap(NULL, *total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    close(fd);
    return collSetError(collSystemError, "shm: mmap of %zu bytes failed: %s", *total, strerror(e));
  }
  /* Touch every page now: first touches are slow (page faults; ~10 us a
   * page on some VMs), and this happens once at connect instead of inside
   * the first transfers. The memory is reserved by fallocate anyway. */
  memset(p, 0, *total);
  shmHdr* h = p;
  h->magic = SHM_SEG_MAGIC;
  h->totalBytes = *total;
  h->slotBytes = *slotBytes;
  h->dataOff = *dataOff;
  h->nslots = COLL_SHM_NSLOTS;
  h->senderPid = (int32_t)getpid();
  h->cmaThreshold = cmaThreshold;
  *out = h;
  *mfd = fd;
  return collSuccess;
}

/* Connects sock to the abstract name. A full backlog (the receiver has not
 * accepted yet) is not an error: *later = 1, try again later. */
static collResult_t shmConnectSock(int sock, const shmHandle* h, int* later) {
  struct sockaddr_un a;
  socklen_t al = shmAddr(&a, h->name, h->nameLen);
  *later = 0;
  for (;;) {
    if (connect(sock, (struct sockaddr*)&a, al) == 0) return collSuccess;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      *later = 1;
      return collSuccess;
    }
    return collSetError(errno == ECONNREFUSED ? collRemoteError : collSystemError,
                        "shm connect: cannot reach the listener of process %d (%.*s): %s", h->pid, (int)h->nameLen,
                        h->name, strerror(errno));
  }
}

/* Sends the hello with the three descriptors (waiting up to the deadline
 * for socket space, which a fresh socket always has). */
static collResult_t shmSendHello(int sock, const shmHello* hello, const int fds[3]) {
  char cbuf[CMSG_SPACE(3 * sizeof(int))];
  memset(cbuf, 0, sizeof cbuf);
  struct iovec iov = {(void*)hello, sizeof *hello};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
  struct cmsghdr* cm = CMSG_FIRSTHDR(&m);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(3 * sizeof(int));
  memcpy(CMSG_DATA(cm), fds, 3 * sizeof(int));
  double deadline = collTimeNow() + SHM_HELLO_WAIT_S;
  for (;;) {
    ssize_t n = sendmsg(sock, &m, MSG_NOSIGNAL);
    if (n == (ssize_t)sizeof *hello) return collSuccess;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && collTimeNow() < deadline) {
      struct pollfd p = {sock, POLLOUT, 0};
      poll(&p, 1, 10);
      continue;
    }
    return collSetError(collRemoteError, "shm connect: sending the connection descriptors failed: %s",
                        n < 0 ? strerror(errno) : "short write");
  }
}

/* connect: connects the socket first (nothing else is made while the
 * receiver's backlog is full: *sendComm stays NULL, call again), then
 * creates the segment and eventfds and hands them over. Every failure
 * closes and unmaps what this call made. */
collResult_t shmConnect(int dev, const void* handle, void** sendComm) {
  (void)dev;
  if (!handle || !sendComm) return collSetError(collInvalidArgument, "shm connect: NULL argument");
  *sendComm = NULL;
  shmHandle h;
  memcpy(&h, handle, sizeof h);
  if (h.magic != SHM_HANDLE_MAGIC || h.nameLen == 0 || h.nameLen > SHM_NAME_MAX)
    return collSetError(collInvalidArgument, "shm connect: handle is not a shm handle (bad magic or name)");
  shmHdr* hdr = NULL;
  int mfd = -1, fds[3] = {-1, -1, -1}, dataFd = -1, spaceFd = -1, later = 0;
  size_t slotBytes, dataOff, total = 0;
  int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (sock < 0) return collSetError(collSystemError, "shm connect: socket(AF_UNIX) failed: %s", strerror(errno));
  collResult_t r = shmConnectSock(sock, &h, &later);
  if (r != collSuccess || later) goto fail;
  size_t cma = shmCmaAgree(shmCmaThreshold(NULL), h.cmaThreshold);
  if ((r = shmCreateSegment(h.pid, cma, &hdr, &mfd, &slotBytes, &dataOff, &total)) != collSuccess) goto fail;
  dataFd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  spaceFd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  uint64_t full = SHM_EFD_FULL;
  if (dataFd < 0 || spaceFd < 0 || write(spaceFd, &full, sizeof full) != (ssize_t)sizeof full) {
    r = collSetError(collSystemError, "shm connect: eventfd failed: %s", strerror(errno));
    goto fail;
  }
  shmHello hello = {SHM_HELLO_MAGIC, total, slotBytes, dataOff, COLL_SHM_NSLOTS, (int32_t)getpid()};
  fds[0] = mfd;
  fds[1] = dataFd;
  fds[2] = spaceFd;
  if ((r = shmSendHello(sock, &hello, fds)) != collSuccess) goto fail;
  close(mfd); /* the mapping keeps the memory; the receiver has its own descriptor */
  mfd = -1;
  shmComm* c = NULL;
  if ((r = shmNewComm(1, hdr, total, slotBytes, dataOff, sock, dataFd, spaceFd, cma, &c)) != collSuccess) goto fail;
  if (c->peerPid <= 0) c->peerPid = h.pid;
  *sendComm = c;
  return collSuccess;
fail:
  if (mfd >= 0) close(mfd);
  if (dataFd >= 0) close(dataFd);
  if (spaceFd >= 0) close(spaceFd);
  close(sock);
  if (hdr) munmap(hdr, total);
  return r;
}

/* Receives the hello and up to three descriptors from fd (waits up to
 * SHM_HELLO_WAIT_S). Returns the number of descriptors in fds, or -1 with
 * every received descriptor closed; *truncated = 1 when the kernel dropped
 * descriptors (MSG_CTRUNC: this process is at its open-file limit). */
static int shmRecvHello(int fd, shmHello* hello, int fds[3], int* truncated) {
  size_t got = 0;
  int nfds = 0;
  *truncated = 0;
  double deadline = collTimeNow() + SHM_HELLO_WAIT_S;
  while (got < sizeof *hello) {
    char cbuf[CMSG_SPACE(4 * sizeof(int))];
    struct iovec iov = {(char*)hello + got, sizeof *hello - got};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
    ssize_t n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n > 0) {
      for (struct cmsghdr* cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
        int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (int i = 0; i < k; i++) {
          int x;
          memcpy(&x, CMSG_DATA(cm) + (size_t)i * sizeof(int), sizeof x);
          if (nfds < 3) fds[nfds++] = x;
          else close(x);
        }
      }
      if (m.msg_flags & MSG_CTRUNC) {
        *truncated = 1;
        break;
      }
      got += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && collTimeNow() < deadline) {
      struct pollfd p = {fd, POLLIN, 0};
      poll(&p, 1, 10);
      continue;
    }
    break;
  }
  if (got == sizeof *hello) return nfds;
  for (int i = 0; i < nfds; i++) close(fds[i]);
  return -1;
}

/* A receiver that could not take a connection's descriptors tells the
 * sender why on the connection's socket, then fails its accept. */
static collResult_t shmRejectTruncated(shmListen* l, int fd) {
  struct ucred cr;
  socklen_t cl = sizeof cr;
  int pid = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0 ? (int)cr.pid : 0;
  /* With room for 4 descriptors, MSG_CTRUNC means the kernel could not
   * install them: EMFILE, unless taking 3 now fails otherwise (ENFILE) */
  int e = EMFILE, t[3], nt = 0;
  for (; nt < 3; nt++)
    if ((t[nt] = dup(fd)) < 0) {
      if (errno != EMFILE) e = errno;
      break;
    }
  while (nt > 0) close(t[--nt]);
  shmNak nak = {SHM_NAK_MAGIC, (int32_t)e, (int32_t)getpid()};
  if (send(fd, &nak, sizeof nak, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof nak) { /* gone: EOF does */ }
  close(fd);
  struct rlimit rl;
  char lim[48] = "?";
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) snprintf(lim, sizeof lim, "%llu", (unsigned long long)rl.rlim_cur);
  return collSetError(collSystemError,
                      "shm accept on %s: the descriptors of a connection from process %d were dropped by the kernel "
                      "(MSG_CTRUNC): %s; raise the open-file limit (ulimit -n, now %s) or set COLL_SHM_DISABLE=1",
                      l->name, pid, strerror(e), lim);
}

/* Checks the hello and the memfd, maps the segment. NULL if anything is off. */
static shmHdr* shmMapSegment(const shmHello* hello, int mfd) {
  size_t minData = (sizeof(shmHdr) + 4095) & ~(size_t)4095;
  struct stat st;
  if (hello->magic != SHM_HELLO_MAGIC || hello->nslots != COLL_SHM_NSLOTS || hello->slotBytes == 0 ||
      hello->slotBytes % 64 || hello->dataOff < minData || hello->slotBytes > (1ULL << 40) ||
      hello->totalBytes < hello->dataOff + hello->slotBytes * COLL_SHM_NSLOTS || fstat(mfd, &st) != 0 ||
      (uint64_t)st.st_size != hello->totalBytes)
    return NULL;
  void* p = mmap(NULL, hello->totalBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, mfd, 0);
  if (p == MAP_FAILED) return NULL;
  shmHdr* h = p;
  if (h->magic != SHM_SEG_MAGIC || h->totalBytes != hello->totalBytes || h->slotBytes != hello->slotBytes ||
      h->dataOff != hello->dataOff || h->nslots != COLL_SHM_NSLOTS) {
    munmap(p, hello->totalBytes);
    return NULL;
  }
  /* Read every page once now, as the sender wrote them at creation: the
   * first access from a process is slow on some VMs (~5 us a page even when
   * mapped), and this way it is paid at connect, not in the first transfers. */
  const volatile uint8_t* v = p;
  for (size_t i = 0; i < hello->totalBytes; i += 4096) (void)v[i];
  return h;
}

/* accept: takes pending connections without waiting for new ones; returns
 * a recvComm for the first with a valid hello. Bad ones are dropped. */
collResult_t shmAccept(void* listenComm, void** recvComm) {
  shmListen* l = listenComm;
  if (!l || !recvComm) return collSetError(collInvalidArgument, "shm accept: NULL argument");
  *recvComm = NULL;
  for (;;) {
    int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return collSuccess; /* nothing pending */
      return collSetError(collSystemError, "shm accept on %s failed: %s", l->name, strerror(errno));
    }
    shmHello hello;
    int fds[3] = {-1, -1, -1}, truncated;
    int n = shmRecvHello(fd, &hello, fds, &truncated);
    if (truncated) return shmRejectTruncated(l, fd);
    /* the wake-up descriptors come from the peer: never let them block us */
    int bad = 0;
    for (int i = 1; i < n; i++)
      if (fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK) != 0) bad = 1;
    shmHdr* h = n == 3 && !bad ? shmMapSegment(&hello, fds[0]) : NULL;
    if (!h) {
      COLL_WARN(COLL_SUB_NET, "shm accept: dropping a connection without a valid hello and segment");
      for (int i = 0; i < (n > 0 ? n : 0); i++) close(fds[i]);
      close(fd);
      continue;
    }
    close(fds[0]);
    /* the sender's agreement, read once: it includes our own threshold, so
     * ours being 0 means a sender that did not agree (then NACK) */
    size_t cma = shmCmaThreshold(NULL) ? (size_t)h->cmaThreshold : 0;
    shmComm* c = NULL;
    collResult_t r = shmNewComm(0, h, hello.totalBytes, hello.slotBytes, hello.dataOff, fd, fds[1], fds[2], cma, &c);
    if (r != collSuccess) {
      munmap(h, hello.totalBytes);
      close(fds[1]);
      close(fds[2]);
      close(fd);
      return r;
    }
    *recvComm = c;
    return collSuccess;
  }
}

/* closeSend/closeRecv: marks the comm closed for the peer, then unmaps and
 * closes everything (requests still outstanding are dropped). NULL is ok.
 * A send comm whose receiver rejected it (shm.h) still frees everything and
 * then returns collRemoteError with the receiver's reason. */
collResult_t shmCloseComm(void* comm) {
  shmComm* c = comm;
  if (!c) return collSuccess;
  char why[sizeof c->errMsg] = "";
  if (!c->isSend || c->err != collSuccess || !shmPeerRejected(c, why, sizeof why)) why[0] = 0; /* else not told yet */
  shmMarkClosed(c);
  munmap(c->hdr, c->mapBytes);
  close(c->sock);
  close(c->dataFd);
  close(c->spaceFd);
  free(c->bounce);
  free(c);
  if (why[0]) return collSetError(collRemoteError, "%s", why);
  return collSuccess;
}

/* closeListen: closes the listen socket; connections not yet accepted are
 * reset by the kernel (their senders see the peer gone). */
collResult_t shmCloseListen(void* listenComm) {
  shmListen* l = listenComm;
  if (!l) return collSuccess;
  close(l->fd);
  free(l);
  return collSuccess;
}

/* The fd getPollFd returns for a listen comm: readable when a peer connects. */
int shmListenFd(const shmListen* l) { return l->fd; }
