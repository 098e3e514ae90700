/*
 * loopback.c - the in-process "loopback" transport: every rank is a thread of
 * one process and data moves by memcpy, with no socket on the data path.
 *
 * Endpoints. listen registers an endpoint in a process-global table (one
 * mutex) under a fresh id; the handle carries {magic, id, pid}, so a handle
 * from another process, or a stale one, is rejected with a clear error.
 * connect creates a connection and appends it to the endpoint's pending list;
 * accept pops the oldest one.
 *
 * Connections. A connection has a send end and a recv end (the sendComm and
 * recvComm handles), one mutex, and per end a ring of COLL_LB_MAX_REQUESTS
 * request slots indexed by sequence number: the k-th isend matches the k-th
 * irecv (FIFO). Whichever thread runs lbMatch under the lock copies queued
 * messages into posted buffers. Messages up to the eager limit are copied into
 * a bounce buffer by isend, whose request completes at once (the engine's
 * connection hello needs this: two ranks may connect to each other before
 * either accepts); larger ones are rendezvous: the send completes when the
 * receiver's buffer got the data, copied straight from the sender's buffer.
 * Copies run under the lock, so a close never races a copy.
 *
 * Errors. A message larger than the posted buffer, a closed receiver or an
 * injected fault breaks the connection: a sticky collRemoteError for both
 * ends, nothing written. A closed sender leaves its eager messages deliverable
 * (as TCP delivers data sent before close) and the receive after the last of
 * them fails. Memory is freed once both ends are closed; closeListen closes
 * the recv end of connections never accepted.
 *
 * Waiting. Each end and each endpoint has an eventfd for getPollFd. Recv ends
 * and endpoints are polled for POLLIN: rung = counter > 0. Send ends are
 * polled for POLLOUT, so they are quieted by setting the counter to its
 * maximum (not writable) and rung by draining it. A thread quiets its end
 * under the lock just before test reports "not done"; the peer rings it under
 * the same lock after every change that thread may wait for: no lost wake-up.
 * A flag per bell limits the syscalls to one per change of state.
 */
#include "transports/loopback/loopback.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "misc/log.h"
#include "misc/socket.h"

#define LB_MAGIC 0x636f6c6c4c4f4f50ULL /* "collLOOP" */
#define LB_QUIET 0xfffffffffffffffeULL /* eventfd counter maximum: not writable */
#define LB_N COLL_LB_MAX_REQUESTS
enum { LB_KIND_LISTEN = 0x4c42, LB_KIND_END };

/* First member of ends and endpoints: the eventfd behind getPollFd. */
typedef struct { int kind, bell, pollOut, rung; } lbHead;
struct lbEnd;
typedef struct {
  struct lbEnd* end;
  int live, queued, done; /* handed out and not released by test; waiting to
                             be matched; complete (an eager send: at once) */
  char *data, *bounce;    /* user buffer; eager send: private copy */
  size_t size, len;       /* send: length, recv: capacity; bytes delivered */
  uint64_t tag;           /* send: posted; recv: the sender's, once delivered */
  double readyAt;         /* delay fault: not delivered before this time */
} lbReq;
typedef struct lbConn lbConn;
typedef struct lbEnd {
  lbHead h;
  int isSend, closed;
  lbConn* conn;
  uint64_t posted; /* requests posted so far (next sequence number) */
  lbReq reqs[LB_N];
} lbEnd;
struct lbConn {
  pthread_mutex_t lock;
  lbEnd end[2];        /* [0] send end, [1] recv end */
  uint64_t matched;    /* messages delivered: head sequence of both ends */
  collResult_t err;    /* sticky failure of the connection */
  char errMsg[256];
  uint64_t errTag;     /* the sender's tag of a message refused as too large (reported by test) */
  lbConn* nextPending; /* endpoint's pending-accept list */
};
typedef struct lbListen {
  lbHead h;
  uint64_t id;
  lbConn *head, *tail;
  struct lbListen* next;
} lbListen;
typedef struct { uint64_t magic, id; int64_t pid; } lbHandle;
_Static_assert(sizeof(lbHandle) <= COLL_NET_HANDLE_BYTES, "loopback handle too large");

static pthread_mutex_t lbLock = PTHREAD_MUTEX_INITIALIZER; /* endpoint table */
static lbListen* lbListens;
static uint64_t lbNextId = 1;
static int lbLive, lbFaultMode, lbMrToken; /* atomics except lbMrToken */
static long lbFaultArg, lbFaultSent;
static size_t lbEager = COLL_LB_EAGER_DEFAULT;

/* Opens h's eventfd: counter 0 is quiet for POLLIN, rung for POLLOUT. */
static int lbBellOpen(lbHead* h, int kind, int pollOut) {
  *h = (lbHead){kind, eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), pollOut, pollOut};
  return h->bell;
}

/* Rings h (under its owner's lock): the thread waiting on it looks again. */
static void lbRing(lbHead* h) {
  uint64_t v = 1;
  if (h->rung) return;
  h->rung = 1;
  if (h->pollOut ? read(h->bell, &v, sizeof v) < 0 : write(h->bell, &v, sizeof v) < 0) { /* cannot fail */ }
}

/* Quiets h (under its owner's lock) before its thread sleeps on it. */
static void lbQuiet(lbHead* h) {
  uint64_t v = LB_QUIET;
  if (!h->rung) return;
  h->rung = 0;
  if (read(h->bell, &v, sizeof v) < 0) { /* was drained already */ }
  v = LB_QUIET;
  if (h->pollOut && write(h->bell, &v, sizeof v) < 0) { /* cannot fail: counter is 0 */ }
}

/* Forgets the message or buffer of slot q (lock held). */
static void lbDrop(lbReq* q) {
  q->queued = 0;
  free(q->bounce);
  q->bounce = NULL;
}

/* Breaks c (lock held): unfinished and later requests of both ends fail. */
__attribute__((format(printf, 2, 3))) static void lbBreak(lbConn* c, const char* fmt, ...) {
  if (c->err == collSuccess) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->errMsg, sizeof c->errMsg, fmt, ap);
    va_end(ap);
    c->err = collRemoteError;
  }
  for (int i = 0; i < 2 * LB_N; i++) lbDrop(&c->end[i / LB_N].reqs[i % LB_N]);
  lbRing(&c->end[0].h);
  lbRing(&c->end[1].h);
}

/* The failure unfinished requests of end e see now (lock held), or success. */
static collResult_t lbFailure(const lbConn* c, const lbEnd* e, const char** msg) {
  *msg = c->errMsg;
  if (c->err != collSuccess) return c->err;
  *msg = "loopback: the sender closed the connection (peer gone) before sending this message";
  return !e->isSend && c->end[0].closed && c->matched == c->end[0].posted ? collRemoteError : collSuccess;
}

/* Delivers queued messages into posted receives in FIFO order (lock held). */
static void lbMatch(lbConn* c) {
  lbEnd *s = &c->end[0], *r = &c->end[1];
  int moved = 0;
  while (c->err == collSuccess && c->matched < s->posted && c->matched < r->posted) {
    lbReq *m = &s->reqs[c->matched % LB_N], *b = &r->reqs[c->matched % LB_N];
    if (m->readyAt > 0 && collTimeNow() < m->readyAt) break;
    if (m->size > b->size) {
      c->errTag = m->tag;
      lbBreak(c, "loopback: peer sent %zu bytes, receiver posted %zu (nothing written)", m->size, b->size);
      return;
    }
    if (m->size) memcpy(b->data, m->bounce ? m->bounce : m->data, m->size);
    b->len = m->size;
    b->tag = m->tag;
    b->done = m->done = 1;
    lbDrop(m);
    lbDrop(b);
    c->matched++;
    moved = 1;
  }
  if (moved) {
    lbRing(&s->h);
    lbRing(&r->h);
  }
}

/* Releases c's lock; frees c once both ends are closed. */
static void lbUnlockOrFree(lbConn* c) {
  int both = c->end[0].closed && c->end[1].closed;
  pthread_mutex_unlock(&c->lock);
  if (!both) return;
  for (int i = 0; i < 2 * LB_N; i++) free(c->end[i / LB_N].reqs[i % LB_N].bounce);
  close(c->end[0].h.bell);
  close(c->end[1].h.bell);
  pthread_mutex_destroy(&c->lock);
  free(c);
  __atomic_sub_fetch(&lbLive, 1, __ATOMIC_RELAXED);
}

/* init, fini, devices, getProperties: one device, nothing global to set up
 * or release (endpoints belong to their comms). */
static collResult_t lbInit(const collNetCallbacks_t* cb) { (void)cb; return collSuccess; }
static collResult_t lbFini(void) { return collSuccess; }
static collResult_t lbDevices(int* ndev) {
  if (!ndev) return collSetError(collInvalidArgument, "loopback devices: ndev is NULL");
  return *ndev = 1, collSuccess;
}
static collResult_t lbGetProperties(int dev, collNetProperties_t* props) {
  if (!props || dev != 0)
    return collSetError(collInvalidArgument, "loopback getProperties: bad device %d or NULL props", dev);
  *props = (collNetProperties_t){.name = "loopback", .ptrSupport = COLL_PTR_HOST, .speedGbps = 100.0,
                                 .latencyUs = 1.0, .maxMessage = SIZE_MAX};
  return collSuccess;
}

/* listen: registers a new endpoint; handle = {magic, id, pid}. */
static collResult_t lbListenFn(int dev, void* handle, void** listenComm) {
  if (!handle || !listenComm || dev != 0)
    return collSetError(collInvalidArgument, "loopback listen: bad device %d or NULL argument", dev);
  *listenComm = NULL;
  lbListen* l = calloc(1, sizeof *l);
  if (!l || lbBellOpen(&l->h, LB_KIND_LISTEN, 0) < 0) {
    free(l);
    return collSetError(collSystemError, "loopback listen: out of memory or eventfd failed: %s", strerror(errno));
  }
  pthread_mutex_lock(&lbLock);
  l->id = lbNextId++;
  l->next = lbListens;
  lbListens = l;
  pthread_mutex_unlock(&lbLock);
  __atomic_add_fetch(&lbLive, 1, __ATOMIC_RELAXED);
  lbHandle h = {LB_MAGIC, l->id, (int64_t)getpid()};
  memset(handle, 0, COLL_NET_HANDLE_BYTES);
  memcpy(handle, &h, sizeof h);
  *listenComm = l;
  return collSuccess;
}

/* connect: checks the handle, then queues a new connection on the endpoint.
 * Never blocks; a closed endpoint is collRemoteError. */
static collResult_t lbConnect(int dev, const void* handle, void** sendComm) {
  (void)dev;
  if (!handle || !sendComm) return collSetError(collInvalidArgument, "loopback connect: NULL argument");
  *sendComm = NULL;
  lbHandle h;
  memcpy(&h, handle, sizeof h);
  if (h.magic != LB_MAGIC)
    return collSetError(collInvalidArgument, "loopback connect: not a loopback handle (all ranks COLL_NET=loopback?)");
  if (h.pid != (int64_t)getpid())
    return collSetError(collInvalidUsage, "loopback connect: the handle comes from process %lld, this is process %d; "
                        "loopback only connects ranks that are threads of one process (use COLL_NET=tcp)",
                        (long long)h.pid, (int)getpid());
  lbConn* c = calloc(1, sizeof *c);
  if (!c || lbBellOpen(&c->end[0].h, LB_KIND_END, 1) < 0 || lbBellOpen(&c->end[1].h, LB_KIND_END, 0) < 0) {
    int e = errno;
    if (c && c->end[0].h.bell >= 0) close(c->end[0].h.bell);
    free(c);
    return collSetError(collSystemError, "loopback connect: out of memory or eventfd failed: %s", strerror(e));
  }
  c->end[0].isSend = 1;
  c->end[0].conn = c->end[1].conn = c;
  pthread_mutex_init(&c->lock, NULL);
  __atomic_add_fetch(&lbLive, 1, __ATOMIC_RELAXED);
  pthread_mutex_lock(&lbLock);
  lbListen* l = lbListens;
  while (l && l->id != h.id) l = l->next;
  if (l) {
    *(l->tail ? &l->tail->nextPending : &l->head) = c;
    l->tail = c;
    lbRing(&l->h);
  }
  pthread_mutex_unlock(&lbLock);
  if (l) return *sendComm = &c->end[0], collSuccess;
  pthread_mutex_lock(&c->lock);
  c->end[0].closed = c->end[1].closed = 1;
  lbUnlockOrFree(c);
  return collSetError(collRemoteError, "loopback connect: endpoint %llu is closed (its rank is gone)",
                      (unsigned long long)h.id);
}

/* accept: pops the oldest pending connection; *recvComm NULL if none. */
static collResult_t lbAccept(void* listenComm, void** recvComm) {
  lbListen* l = listenComm;
  if (!l || l->h.kind != LB_KIND_LISTEN || !recvComm)
    return collSetError(collInvalidArgument, "loopback accept: NULL or bad argument");
  pthread_mutex_lock(&lbLock);
  lbConn* c = l->head;
  if (c && !(l->head = c->nextPending)) l->tail = NULL;
  if (!l->head) lbQuiet(&l->h);
  pthread_mutex_unlock(&lbLock);
  *recvComm = c ? &c->end[1] : NULL;
  return collSuccess;
}

/* regMr/deregMr: host memory needs no registration. */
static collResult_t lbRegMr(void* comm, void* data, size_t size, int ptrType, void** mhandle) {
  (void)comm; (void)data; (void)size;
  if (!mhandle || !(ptrType & COLL_PTR_HOST))
    return collSetError(collInvalidArgument, "loopback regMr: NULL mhandle or memory type %d (host only)", ptrType);
  *mhandle = &lbMrToken;
  return collSuccess;
}
static collResult_t lbDeregMr(void* comm, void* mhandle) { (void)comm; (void)mhandle; return collSuccess; }

/* Posts a send or receive on end e (isend and irecv). An eager send is
 * copied and complete at once; a full ring returns *request NULL (retry). */
static collResult_t lbPost(lbEnd* e, int isSend, void* data, size_t size, uint64_t tag, void** request) {
  const char* what = isSend ? "isend" : "irecv";
  if (!e || e->h.kind != LB_KIND_END || !request || (!data && size > 0))
    return collSetError(collInvalidArgument, "loopback %s: NULL or bad comm, request or buffer", what);
  if (e->isSend != isSend)
    return collSetError(collInvalidUsage, "loopback %s on a %s comm", what, e->isSend ? "send" : "recv");
  *request = NULL;
  lbConn* c = e->conn;
  char msg[256];
  const char* why;
  pthread_mutex_lock(&c->lock);
  collResult_t r = lbFailure(c, e, &why);
  lbReq* q = &e->reqs[e->posted % LB_N];
  int eager = isSend && size <= __atomic_load_n(&lbEager, __ATOMIC_RELAXED);
  int mode = __atomic_load_n(&lbFaultMode, __ATOMIC_RELAXED);
  long arg = __atomic_load_n(&lbFaultArg, __ATOMIC_RELAXED);
  if (r != collSuccess) {
    snprintf(msg, sizeof msg, "%s", why);
  } else if (!q->live && !q->queued) {
    *q = (lbReq){.end = e, .live = 1, .queued = 1, .done = eager, .data = data, .size = size,
                 .tag = isSend ? tag : 0};
    if (eager && size && !(q->bounce = malloc(size))) {
      q->live = q->queued = 0;
      r = collSystemError;
      snprintf(msg, sizeof msg, "loopback isend: out of memory for a %zu-byte message", size);
    } else {
      if (q->bounce) memcpy(q->bounce, data, size);
      if (isSend && mode == COLL_LB_FAULT_DELAY) q->readyAt = collTimeNow() + (double)arg * 1e-6;
      e->posted++;
      *request = q;
      if (isSend && mode == COLL_LB_FAULT_DROP && __atomic_add_fetch(&lbFaultSent, 1, __ATOMIC_RELAXED) > arg &&
          __atomic_exchange_n(&lbFaultMode, COLL_LB_FAULT_NONE, __ATOMIC_RELAXED) == COLL_LB_FAULT_DROP)
        lbBreak(c, "loopback: connection dropped (fault injection after %ld messages): peer died", arg);
      lbMatch(c);
    }
  }
  pthread_mutex_unlock(&c->lock);
  return r == collSuccess ? collSuccess : collSetError(r, "%s", msg);
}

/* isend/irecv: see lbPost. */
static collResult_t lbIsend(void* sendComm, const void* data, size_t size, uint64_t tag, void* mhandle,
                            void** request) {
  (void)mhandle; return lbPost(sendComm, 1, (void*)(uintptr_t)data, size, tag, request);
}
static collResult_t lbIrecv(void* recvComm, void* data, size_t size, uint64_t tag, void* mhandle,
                            void** request) {
  (void)mhandle; (void)tag; return lbPost(recvComm, 0, data, size, 0, request);
}

/* test: matches what it can, then reports on the request; a finished or
 * failed request is released. Quiets the end's bell when not done. */
static collResult_t lbTest(void* request, int* done, size_t* size, uint64_t* tag) {
  lbReq* q = request;
  if (!q || !done || !q->live) return collSetError(collInvalidArgument, "loopback test: NULL or released request");
  lbEnd* e = q->end;
  lbConn* c = e->conn;
  char msg[256];
  const char* why;
  collResult_t r = collSuccess;
  *done = 0;
  pthread_mutex_lock(&c->lock);
  lbMatch(c);
  if (q->done) {
    *done = 1;
    if (size) *size = e->isSend ? q->size : q->len;
    if (tag) *tag = q->tag;
    q->live = 0;
  } else if ((r = lbFailure(c, e, &why)) != collSuccess) {
    snprintf(msg, sizeof msg, "%s", why);
    if (tag && !e->isSend && c->errTag) *tag = c->errTag;
    q->live = 0;
    lbDrop(q);
  } else {
    lbQuiet(&e->h);
  }
  pthread_mutex_unlock(&c->lock);
  return r == collSuccess ? collSuccess : collSetError(r, "%s", msg);
}

/* iput: one-sided writes are not supported. iflush: host memory is visible
 * at once, *request = NULL means done. */

/* regMrDmaBuf: loopback does not take dma-bufs (host memory only). */
static collResult_t lbRegMrDmaBuf(void* comm, void* data, size_t size, int ptrType, uint64_t offset, int fd,
                                  void** mhandle) {
  (void)comm; (void)data; (void)size; (void)ptrType; (void)offset; (void)fd; (void)mhandle;
  return collSetError(collInvalidUsage, "loopback: regMrDmaBuf not supported (host memory only)");
}
static collResult_t lbIput(void* sendComm, const void* data, size_t size, void* mhandle,
                           unsigned long long remoteAddr, unsigned long long remoteKey, void** request) {
  (void)sendComm; (void)data; (void)size; (void)mhandle; (void)remoteAddr; (void)remoteKey;
  if (request) *request = NULL;
  return collSetError(collInvalidUsage, "loopback: iput not supported");
}
static collResult_t lbIflush(void* recvComm, void* data, size_t size, void* mhandle, void** request) {
  (void)recvComm; (void)data; (void)size; (void)mhandle;
  if (!request) return collSetError(collInvalidArgument, "loopback iflush: request is NULL");
  return *request = NULL, collSuccess;
}

/* getPollFd: the eventfd of an end or endpoint (see the header comment). */
static collResult_t lbGetPollFd(void* comm, int* fd) {
  lbHead* h = comm;
  if (!h || !fd || (h->kind != LB_KIND_END && h->kind != LB_KIND_LISTEN))
    return collSetError(collInvalidArgument, "loopback getPollFd: NULL or bad argument");
  *fd = h->bell;
  return collSuccess;
}

/* closeSend: abandons unfinished (rendezvous) sends and every message after
 * the first of them; earlier eager messages stay deliverable. */
static collResult_t lbCloseSend(void* sendComm) {
  lbEnd* e = sendComm;
  if (!e) return collSuccess;
  if (e->h.kind != LB_KIND_END || !e->isSend || e->closed)
    return collSetError(collInvalidArgument, "loopback closeSend: not an open send comm");
  lbConn* c = e->conn;
  pthread_mutex_lock(&c->lock);
  e->closed = 1;
  uint64_t keep = c->matched;
  while (keep < e->posted && e->reqs[keep % LB_N].done) keep++;
  for (uint64_t k = keep; k < e->posted; k++) lbDrop(&e->reqs[k % LB_N]);
  e->posted = keep;
  lbRing(&c->end[1].h);
  lbUnlockOrFree(c);
  return collSuccess;
}

/* Closes the recv end of c: the sender's requests fail from now on. */
static void lbCloseRecvEnd(lbConn* c, const char* why) {
  pthread_mutex_lock(&c->lock);
  c->end[1].closed = 1;
  lbBreak(c, "loopback: %s", why);
  lbUnlockOrFree(c);
}

/* closeRecv: breaks the connection for the sender, frees when both closed. */
static collResult_t lbCloseRecv(void* recvComm) {
  lbEnd* e = recvComm;
  if (!e) return collSuccess;
  if (e->h.kind != LB_KIND_END || e->isSend || e->closed)
    return collSetError(collInvalidArgument, "loopback closeRecv: not an open recv comm");
  lbCloseRecvEnd(e->conn, "the receiver closed the connection (peer gone)");
  return collSuccess;
}

/* closeListen: unregisters the endpoint, refuses its pending connections. */
static collResult_t lbCloseListen(void* listenComm) {
  lbListen* l = listenComm;
  if (!l) return collSuccess;
  if (l->h.kind != LB_KIND_LISTEN) return collSetError(collInvalidArgument, "loopback closeListen: not an endpoint");
  pthread_mutex_lock(&lbLock);
  lbListen** p = &lbListens;
  while (*p && *p != l) p = &(*p)->next;
  if (*p) *p = l->next;
  for (lbConn *c = l->head, *next; c; c = next) {
    next = c->nextPending;
    lbCloseRecvEnd(c, "the peer closed its endpoint before accepting this connection");
  }
  pthread_mutex_unlock(&lbLock);
  close(l->h.bell);
  free(l);
  __atomic_sub_fetch(&lbLive, 1, __ATOMIC_RELAXED);
  return collSuccess;
}

/* Test hooks, see loopback.h. */
void collLoopbackSetFault(int mode, long arg) {
  __atomic_store_n(&lbFaultArg, arg, __ATOMIC_RELAXED);
  __atomic_store_n(&lbFaultSent, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&lbFaultMode, mode, __ATOMIC_RELAXED);
}
void collLoopbackSetEagerLimit(size_t bytes) { __atomic_store_n(&lbEager, bytes < 64 ? 64 : bytes, __ATOMIC_RELAXED); }
int collLoopbackLiveObjects(void) { return __atomic_load_n(&lbLive, __ATOMIC_RELAXED); }

const collNet_t collNetLoopback = {
    .size = sizeof(collNet_t), .version = COLL_NET_VERSION, .name = "loopback",
    .init = lbInit, .devices = lbDevices, .getProperties = lbGetProperties,
    .listen = lbListenFn, .connect = lbConnect, .accept = lbAccept,
    .regMr = lbRegMr, .deregMr = lbDeregMr, .regMrDmaBuf = lbRegMrDmaBuf,
    .isend = lbIsend, .irecv = lbIrecv, .test = lbTest,
    .iput = lbIput, .iflush = lbIflush, .getPollFd = lbGetPollFd,
    .closeSend = lbCloseSend, .closeRecv = lbCloseRecv, .closeListen = lbCloseListen,
    .fini = lbFini,
};
