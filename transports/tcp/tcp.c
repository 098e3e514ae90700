/*
 * tcp.c - the TCP transport behind the collNet_t table.
 *
 * Wire format. A connection is COLL_NSOCKS_PERTHREAD sockets (n). Each socket
 * first carries a 24-byte hello {magic, n, index, connection id} so the
 * listener can group sockets of one connection even when several peers
 * connect at once. Each message is a 16-byte header on socket 0 (length and
 * the sender's tag, little-endian 64-bit each) followed by the payload: messages < COLL_TCP_STRIPE_MIN (or n == 1)
 * go whole on socket 0; larger ones are cut into n nearly equal parts, part i
 * on socket i (both sides compute the split from the header length).
 *
 * Requests live in a ring of COLL_TCP_MAX_REQUESTS slots per comm, indexed by
 * sequence number. Only the oldest unfinished request (the head) moves bytes;
 * when it is finished the next one becomes the head. So requests complete in
 * FIFO order, a later message never overtakes an earlier one on any socket,
 * and testing any request drives all earlier ones. A slot is reused only
 * after its request was tested done, i.e. 64 sequence numbers later.
 */
#include "tcp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "misc/log.h"
#include "misc/param.h"
#include "misc/socket.h"

#define TCP_HANDLE_MAGIC 0x636f6c6c54435031ULL /* "collTCP1" */
#define TCP_HELLO_MAGIC 0x434f4c48u
#define TCP_HELLO_BYTES 24
#define TCP_HELLO_WAIT_S 10.0 /* how long accept waits for a hello */
#define TCP_CONNECT_SLICE_S 1.0 /* how long one connect call retries a refusing listener */

enum { REQ_FREE = 0, REQ_ACTIVE, REQ_DONE };

struct tcpComm;
typedef struct {
  struct tcpComm* comm;
  int state;
  char* data;
  size_t size;   /* posted size (send: message length; recv: capacity) */
  size_t len;    /* message length (recv: known once the header arrived) */
  uint8_t hdr[16]; /* message length, then the sender's tag (little-endian 64-bit each) */
  size_t hdrOff; /* header bytes moved so far */
  uint64_t tag;  /* send: posted; recv: the sender's, once the header arrived */
  size_t off[COLL_TCP_MAX_SOCKS]; /* payload bytes moved on socket i */
} tcpReq;

typedef struct tcpComm {
  int isSend;
  int nsocks;
  int fds[COLL_TCP_MAX_SOCKS];
  char peer[80];
  uint64_t posted;     /* next sequence number to hand out */
  uint64_t progressed; /* every request below this one is finished */
  collResult_t err;    /* sticky failure of the connection */
  char errMsg[512];
  uint64_t errTag;     /* the sender's tag of a message refused as too large (reported by test) */
  tcpReq reqs[COLL_TCP_MAX_REQUESTS];
} tcpComm;

typedef struct { /* a connection whose sockets are still arriving */
  uint64_t id;
  int nsocks, have, fds[COLL_TCP_MAX_SOCKS];
} tcpPending;

typedef struct { int fd; collSockAddr addr; tcpPending* pend; int npend; } tcpListen;
typedef struct { uint64_t magic; collSockAddr addr; } tcpHandle;
_Static_assert(sizeof(tcpHandle) <= COLL_NET_HANDLE_BYTES, "tcp handle too large");

static collSockAddr tcpAddr;
static char tcpIfName[64];
static collResult_t tcpIfResult = collInternalError;
static char tcpIfError[512];
static pthread_once_t tcpOnce = PTHREAD_ONCE_INIT;
static int tcpMrToken;

static void put64(uint8_t* p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint64_t get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

/* Finds the interface once; later calls replay the result. */
static void tcpFindOnce(void) {
  tcpIfResult = collSocketFindInterface(&tcpAddr, tcpIfName, sizeof tcpIfName);
  if (tcpIfResult != collSuccess) snprintf(tcpIfError, sizeof tcpIfError, "%s", collLastErrorMessage());
}
static collResult_t tcpFindIf(void) {
  pthread_once(&tcpOnce, tcpFindOnce);
  if (tcpIfResult != collSuccess) return collSetError(tcpIfResult, "tcp: %s", tcpIfError);
  return collSuccess;
}

/* Part of a len-byte message carried by socket i (see the header comment). */
static void tcpPart(size_t len, int nsocks, int i, size_t* off, size_t* cnt) {
  if (nsocks == 1 || len < COLL_TCP_STRIPE_MIN) { *off = 0; *cnt = i == 0 ? len : 0; return; }
  size_t q = len / (size_t)nsocks, r = len % (size_t)nsocks, ui = (size_t)i;
  *cnt = q + (ui < r ? 1 : 0);
  *off = q * ui + (ui < r ? ui : r);
}

/* Records the sticky failure of a comm (message kept for later tests). */
__attribute__((format(printf, 3, 4)))
static collResult_t tcpFail(tcpComm* c, collResult_t code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->errMsg, sizeof c->errMsg, fmt, ap);
  va_end(ap);
  return c->err = code;
}

/* One non-blocking send/recv on socket i. Returns bytes moved, 0 if it
 * would block, -1 after recording the failure in c. */
static ssize_t tcpIo(tcpComm* c, int i, char* p, size_t n) {
  for (;;) {
    ssize_t r = c->isSend ? send(c->fds[i], p, n, MSG_NOSIGNAL) : recv(c->fds[i], p, n, 0);
    if (r > 0) return r;
    if (r == 0) {
      tcpFail(c, collRemoteError, "tcp: connection with %s (socket %d) closed by peer", c->peer, i);
      return -1;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    int e = errno;
    int remote = e == ECONNRESET || e == EPIPE || e == ENOTCONN || e == ETIMEDOUT;
    tcpFail(c, remote ? collRemoteError : collSystemError, "tcp: %s on connection with %s (socket %d) failed: %s",
            c->isSend ? "send" : "recv", c->peer, i, strerror(e));
    return -1;
  }
}

/* Moves bytes of request r as far as the sockets allow. *done = 1 when the
 * whole message moved. Errors are recorded in c (sticky). */
static collResult_t tcpAdvance(tcpComm* c, tcpReq* r, int* done) {
  *done = 0;
  while (r->hdrOff < sizeof r->hdr) {
    ssize_t m = tcpIo(c, 0, (char*)r->hdr + r->hdrOff, sizeof r->hdr - r->hdrOff);
    if (m < 0) return c->err;
    if (m == 0) return collSuccess;
    r->hdrOff += (size_t)m;
    if (r->hdrOff == sizeof r->hdr && !c->isSend) {
      uint64_t len = get64(r->hdr);
      if (len > r->size) {
        c->errTag = get64(r->hdr + 8);
        return tcpFail(c, collRemoteError, "tcp: message from %s: peer sent %llu bytes, receiver posted %zu",
                       c->peer, (unsigned long long)len, r->size);
      }
      r->len = (size_t)len;
      r->tag = get64(r->hdr + 8);
    }
  }
  int all = 1;
  for (int i = 0; i < c->nsocks; i++) {
    size_t po, pc;
    tcpPart(r->len, c->nsocks, i, &po, &pc);
    while (r->off[i] < pc) {
      ssize_t m = tcpIo(c, i, r->data + po + r->off[i], pc - r->off[i]);
      if (m < 0) return c->err;
      if (m == 0) break;
      r->off[i] += (size_t)m;
    }
    if (r->off[i] < pc) all = 0;
  }
  *done = all;
  return collSuccess;
}

/* Advances the head requests of c in FIFO order until one would block. */
static void tcpProgress(tcpComm* c) {
  while (c->err == collSuccess && c->progressed < c->posted) {
    tcpReq* r = &c->reqs[c->progressed % COLL_TCP_MAX_REQUESTS];
    int done = 0;
    if (tcpAdvance(c, r, &done) != collSuccess || !done) return;
    r->state = REQ_DONE;
    c->progressed++;
  }
}

/* Allocates a comm from connected fds. */
static collResult_t tcpNewComm(int isSend, int nsocks, const int* fds, tcpComm** out) {
  tcpComm* c = calloc(1, sizeof *c);
  if (!c) return collSetError(collSystemError, "tcp: out of memory for a connection");
  c->isSend = isSend;
  c->nsocks = nsocks;
  memcpy(c->fds, fds, (size_t)nsocks * sizeof(int));
  collSockAddr a;
  socklen_t sl = sizeof a;
  memset(&a, 0, sizeof a);
  if (getpeername(fds[0], &a.sa, &sl) == 0) collSockAddrStr(&a, c->peer, sizeof c->peer);
  else snprintf(c->peer, sizeof c->peer, "<unknown peer>");
  *out = c;
  return collSuccess;
}

/* init: nothing to set up (logging goes through coll's own logger). */
static collResult_t tcpInit(const collNetCallbacks_t* cb) { (void)cb; return collSuccess; }

/* devices: one device, the chosen interface. */
static collResult_t tcpDevices(int* ndev) {
  if (!ndev) return collSetError(collInvalidArgument, "tcp devices: ndev is NULL");
  collResult_t r = tcpFindIf();
  *ndev = r == collSuccess ? 1 : 0;
  return r;
}

/* getProperties: name, speed from sysfs (Mb/s), latency estimate. */
static collResult_t tcpGetProperties(int dev, collNetProperties_t* props) {
  if (!props || dev != 0)
    return collSetError(collInvalidArgument, "tcp getProperties: bad device %d or NULL props", dev);
  collResult_t r = tcpFindIf();
  if (r != collSuccess) return r;
  memset(props, 0, sizeof *props);
  snprintf(props->name, sizeof props->name, "%s", tcpIfName);
  int loop = (tcpAddr.sa.sa_family == AF_INET && (ntohl(tcpAddr.sin.sin_addr.s_addr) >> 24) == 127) ||
             (tcpAddr.sa.sa_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&tcpAddr.sin6.sin6_addr));
  props->speedGbps = loop ? 100.0 : 10.0;
  char path[128];
  snprintf(path, sizeof path, "/sys/class/net/%s/speed", tcpIfName);
  FILE* f = fopen(path, "re"); /* Mb/s; unreadable or -1 for lo and some virtual NICs */
  long mbps = 0;
  if (f && fscanf(f, "%ld", &mbps) == 1 && mbps > 0) props->speedGbps = (double)mbps / 1000.0;
  if (f) fclose(f);
  props->latencyUs = loop ? 10.0 : 50.0;
  props->ptrSupport = COLL_PTR_HOST;
  props->maxMessage = SIZE_MAX;
  return collSuccess; /* hasPut = 0 */
}

/* listen: opens a listening socket on the device; handle = magic + address. */
static collResult_t tcpListenFn(int dev, void* handle, void** listenComm) {
  if (!handle || !listenComm || dev != 0)
    return collSetError(collInvalidArgument, "tcp listen: bad device %d or NULL argument", dev);
  *listenComm = NULL;
  collResult_t r = tcpFindIf();
  if (r != collSuccess) return r;
  tcpListen* l = calloc(1, sizeof *l);
  if (!l) return collSetError(collSystemError, "tcp listen: out of memory");
  l->addr = tcpAddr;
  if ((r = collSocketListen(&l->addr, &l->fd)) != collSuccess) { free(l); return r; }
  tcpHandle h = {TCP_HANDLE_MAGIC, l->addr};
  memset(handle, 0, COLL_NET_HANDLE_BYTES);
  memcpy(handle, &h, sizeof h);
  *listenComm = l;
  return collSuccess;
}

/* connect: opens nsocks sockets to the handle's address and sends a hello
 * on each. The first socket gets TCP_CONNECT_SLICE_S: a listener that still
 * refuses then is "not yet" (*sendComm NULL, nothing kept), so the caller
 * decides how long to retry (and notices an abort meanwhile); the others,
 * once the listener took the first, get COLL_CONNECT_TIMEOUT_MS. */
static collResult_t tcpConnect(int dev, const void* handle, void** sendComm) {
  (void)dev;
  if (!handle || !sendComm) return collSetError(collInvalidArgument, "tcp connect: NULL argument");
  *sendComm = NULL;
  tcpHandle h;
  memcpy(&h, handle, sizeof h);
  if (h.magic != TCP_HANDLE_MAGIC)
    return collSetError(collInvalidArgument, "tcp connect: handle is not a tcp handle (bad magic)");
  int64_t ns = collParamInt(COLL_PARAM_NSOCKS);
  int nsocks = ns < 1 ? 1 : ns > COLL_TCP_MAX_SOCKS ? COLL_TCP_MAX_SOCKS : (int)ns;
  uint64_t id = 0;
  if (getrandom(&id, sizeof id, GRND_NONBLOCK) != (ssize_t)sizeof id)
    id = ((uint64_t)getpid() << 32) ^ (uint64_t)(collTimeNow() * 1e9) ^ (uint64_t)(uintptr_t)&h;
  double deadline = collTimeNow() + (double)collParamInt(COLL_PARAM_CONNECT_RETRY_MS) * 1e-3;
  int fds[COLL_TCP_MAX_SOCKS];
  collResult_t r = collSuccess;
  int n;
  for (n = 0; n < nsocks; n++) {
    double until = n == 0 && collTimeNow() + TCP_CONNECT_SLICE_S < deadline ? collTimeNow() + TCP_CONNECT_SLICE_S
                                                                          : deadline;
    if ((r = collSocketConnect(&h.addr, &fds[n], until, NULL)) != collSuccess) {
      if (n == 0 && r == collTimeout && until < deadline) { /* refused (or no answer) so far: not yet */
        collClearError();
        return collSuccess;
      }
      break;
    }
    uint8_t hello[TCP_HELLO_BYTES];
    put64(hello, ((uint64_t)(unsigned)nsocks << 32) | TCP_HELLO_MAGIC);
    put64(hello + 8, (uint64_t)(unsigned)n);
    put64(hello + 16, id);
    r = collSocketSendAll(fds[n], hello, sizeof hello, deadline, NULL);
    if (r != collSuccess) { close(fds[n]); break; }
  }
  if (r == collSuccess && (r = tcpNewComm(1, nsocks, fds, (tcpComm**)sendComm)) == collSuccess)
    return collSuccess;
  for (int i = 0; i < n; i++) close(fds[i]);
  return r;
}

/* Drops pending entry k of l (closing its sockets if closeFds). */
static void tcpDropPending(tcpListen* l, int k, int closeFds) {
  for (int i = 0; closeFds && i < l->pend[k].nsocks; i++)
    if (l->pend[k].fds[i] >= 0) close(l->pend[k].fds[i]);
  l->pend[k] = l->pend[--l->npend];
}

/* accept: takes every pending connection from the listen socket without
 * waiting; returns a recvComm once all sockets of one connection arrived.
 * A socket that sends no valid hello within TCP_HELLO_WAIT_S is dropped. */
static collResult_t tcpAccept(void* listenComm, void** recvComm) {
  tcpListen* l = listenComm;
  if (!l || !recvComm) return collSetError(collInvalidArgument, "tcp accept: NULL argument");
  *recvComm = NULL;
  for (;;) {
    int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return collSuccess; /* nothing pending */
      return collSetError(collSystemError, "tcp accept on %s failed: %s",
                          collSockAddrStr(&l->addr, (char[80]){0}, 80), strerror(errno));
    }
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    uint8_t hello[TCP_HELLO_BYTES] = {0};
    collResult_t r = collSocketRecvAll(fd, hello, sizeof hello, collTimeNow() + TCP_HELLO_WAIT_S, NULL);
    uint64_t w0 = get64(hello), idx = get64(hello + 8), id = get64(hello + 16);
    int nsocks = (int)(w0 >> 32);
    if (r != collSuccess || (uint32_t)w0 != TCP_HELLO_MAGIC || nsocks < 1 ||
        nsocks > COLL_TCP_MAX_SOCKS || idx >= (uint64_t)nsocks) {
      COLL_WARN(COLL_SUB_NET, "tcp accept: dropping a connection without a valid hello");
      close(fd);
      continue;
    }
    int k = 0;
    while (k < l->npend && l->pend[k].id != id) k++;
    if (k == l->npend) {
      tcpPending* p = realloc(l->pend, (size_t)(l->npend + 1) * sizeof *p);
      if (!p) { close(fd); return collSetError(collSystemError, "tcp accept: out of memory"); }
      l->pend = p;
      memset(&p[k], 0, sizeof p[k]);
      p[k].id = id;
      p[k].nsocks = nsocks;
      for (int i = 0; i < COLL_TCP_MAX_SOCKS; i++) p[k].fds[i] = -1;
      l->npend++;
    }
    tcpPending* p = &l->pend[k];
    if (p->nsocks != nsocks || p->fds[idx] >= 0) {
      COLL_WARN(COLL_SUB_NET, "tcp accept: inconsistent hello (socket %llu of %d), dropped",
                (unsigned long long)idx, nsocks);
      close(fd);
      continue;
    }
    p->fds[idx] = fd;
    if (++p->have < p->nsocks) continue;
    r = tcpNewComm(0, p->nsocks, p->fds, (tcpComm**)recvComm);
    tcpDropPending(l, k, r != collSuccess);
    return r;
  }
}

/* regMr/deregMr: host memory needs no registration. */
static collResult_t tcpRegMr(void* comm, void* data, size_t size, int ptrType, void** mhandle) {
  (void)comm; (void)data; (void)size;
  if (!mhandle) return collSetError(collInvalidArgument, "tcp regMr: mhandle is NULL");
  if (!(ptrType & COLL_PTR_HOST))
    return collSetError(collInvalidArgument, "tcp regMr: memory type %d not supported (host only)", ptrType);
  *mhandle = &tcpMrToken;
  return collSuccess;
}
static collResult_t tcpDeregMr(void* comm, void* mhandle) { (void)comm; (void)mhandle; return collSuccess; }

/* Posts a request on c (shared by isend and irecv). */
static collResult_t tcpPost(tcpComm* c, int isSend, void* data, size_t size, uint64_t tag, void** request) {
  const char* what = isSend ? "isend" : "irecv";
  if (!c || !request || (!data && size > 0))
    return collSetError(collInvalidArgument, "tcp %s: NULL comm, request or buffer", what);
  if (c->isSend != isSend)
    return collSetError(collInvalidUsage, "tcp %s on a %s comm", what, c->isSend ? "send" : "recv");
  *request = NULL;
  if (c->err != collSuccess) return collSetError(c->err, "%s", c->errMsg);
  tcpReq* r = &c->reqs[c->posted % COLL_TCP_MAX_REQUESTS];
  if (r->state != REQ_FREE) return collSuccess; /* pool exhausted: retry */
  *r = (tcpReq){.comm = c, .state = REQ_ACTIVE, .data = data, .size = size, .len = isSend ? size : 0};
  if (isSend) {
    put64(r->hdr, (uint64_t)size);
    put64(r->hdr + 8, tag);
    r->tag = tag;
  }
  c->posted++;
  tcpProgress(c); /* eager start; failures surface in test */
  *request = r;
  return collSuccess;
}

/* isend: queues size bytes of data behind earlier sends of the comm. */
static collResult_t tcpIsend(void* sendComm, const void* data, size_t size, uint64_t tag, void* mhandle,
                             void** request) {
  (void)mhandle; return tcpPost(sendComm, 1, (void*)(uintptr_t)data, size, tag, request);
}

/* irecv: posts a buffer of size bytes for the next message of the comm. */
static collResult_t tcpIrecv(void* recvComm, void* data, size_t size, uint64_t tag, void* mhandle,
                             void** request) {
  (void)mhandle; (void)tag; return tcpPost(recvComm, 0, data, size, 0, request);
}

/* test: drives the comm's FIFO, then reports on this request. Done or
 * failed requests are released. */
static collResult_t tcpTest(void* request, int* done, size_t* size, uint64_t* tag) {
  tcpReq* r = request;
  if (!r || !done || r->state == REQ_FREE)
    return collSetError(collInvalidArgument, "tcp test: NULL or released request");
  tcpComm* c = r->comm;
  *done = 0;
  tcpProgress(c);
  if (r->state == REQ_DONE) {
    *done = 1;
    if (size) *size = r->len;
    if (tag) *tag = r->tag;
    r->state = REQ_FREE;
    return collSuccess;
  }
  if (c->err != collSuccess) {
    r->state = REQ_FREE;
    if (tag && c->errTag) *tag = c->errTag;
    return collSetError(c->err, "%s", c->errMsg);
  }
  return collSuccess;
}

/* iput: one-sided writes need RDMA. */

/* regMrDmaBuf: tcp does not take dma-bufs (host memory only). */
static collResult_t tcpRegMrDmaBuf(void* comm, void* data, size_t size, int ptrType, uint64_t offset, int fd,
                                   void** mhandle) {
  (void)comm; (void)data; (void)size; (void)ptrType; (void)offset; (void)fd; (void)mhandle;
  return collSetError(collInvalidUsage, "tcp: regMrDmaBuf not supported (host memory only)");
}
static collResult_t tcpIput(void* sendComm, const void* data, size_t size, void* mhandle,
                            unsigned long long remoteAddr, unsigned long long remoteKey, void** request) {
  (void)sendComm; (void)data; (void)size; (void)mhandle; (void)remoteAddr; (void)remoteKey;
  if (request) *request = NULL;
  return collSetError(collInvalidUsage, "tcp: iput not supported (no one-sided writes over TCP)");
}

/* iflush: host memory is visible at once; *request = NULL means done. */
static collResult_t tcpIflush(void* recvComm, void* data, size_t size, void* mhandle, void** request) {
  (void)recvComm; (void)data; (void)size; (void)mhandle;
  if (!request) return collSetError(collInvalidArgument, "tcp iflush: request is NULL");
  *request = NULL;
  return collSuccess;
}

/* getPollFd: the first socket of a send or recv comm. */
static collResult_t tcpGetPollFd(void* comm, int* fd) {
  if (!comm || !fd) return collSetError(collInvalidArgument, "tcp getPollFd: NULL argument");
  *fd = ((tcpComm*)comm)->fds[0];
  return collSuccess;
}

/* closeSend/closeRecv: closes every socket and frees the comm (and with it
 * every request still outstanding). NULL is accepted. */
static collResult_t tcpCloseComm(void* comm) {
  tcpComm* c = comm;
  if (!c) return collSuccess;
  for (int i = 0; i < c->nsocks; i++) close(c->fds[i]);
  free(c);
  return collSuccess;
}

/* closeListen: closes the listen socket and half-arrived connections. */
static collResult_t tcpCloseListen(void* listenComm) {
  tcpListen* l = listenComm;
  if (!l) return collSuccess;
  while (l->npend > 0) tcpDropPending(l, 0, 1);
  free(l->pend);
  close(l->fd);
  free(l);
  return collSuccess;
}

/* fini: nothing global to release. */
static collResult_t tcpFini(void) { return collSuccess; }

const collNet_t collNetTcp = {
    .size = sizeof(collNet_t), .version = COLL_NET_VERSION, .name = "tcp",
    .init = tcpInit, .devices = tcpDevices, .getProperties = tcpGetProperties,
    .listen = tcpListenFn, .connect = tcpConnect, .accept = tcpAccept,
    .regMr = tcpRegMr, .deregMr = tcpDeregMr, .regMrDmaBuf = tcpRegMrDmaBuf,
    .isend = tcpIsend, .irecv = tcpIrecv, .test = tcpTest,
    .iput = tcpIput, .iflush = tcpIflush, .getPollFd = tcpGetPollFd,
    .closeSend = tcpCloseComm, .closeRecv = tcpCloseComm, .closeListen = tcpCloseListen,
    .fini = tcpFini,
};
