/*
 * net_example.c - a transport plugin built as its own shared object, the way
 * a third party writes one (include/coll_net.h only, no coll internals):
 * COLL_NET_PLUGIN=libcoll_net_example.so. One Unix stream socket per
 * connection in the abstract namespace (so: one machine), a 16-byte header
 * {length, tag} before each message, requests completed in order. Errors
 * go through the callbacks' setError. test_net_plugin.c loads it, runs the
 * shared transport checks on it and runs collectives over it.
 *
 * It exports collNetPlugin_v3. EXAMPLE_VERSION (default COLL_NET_VERSION)
 * builds a variant that claims another ABI version, for the loader's check;
 * EXAMPLE_V2 builds the same transport as a version-2 plugin
 * (collNetPlugin_v2, no regMrDmaBuf) for the loader's v2 path.
 *
 * SPDX-License-Identifier: BSD-3-Clause
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "coll_net.h"

#ifndef EXAMPLE_VERSION
#define EXAMPLE_VERSION COLL_NET_VERSION
#endif
#define MAXREQ 64 /* the shared stream tests keep 64 in flight */
#define MAGIC 0x4558414d504c4531ull /* "1ELPMAXE" */

static const collNetCallbacks_t* cb;
/* payload bytes sent, for the test to see that traffic went through here */
__attribute__((visibility("default"))) uint64_t collNetExampleBytesSent;
static unsigned counter;

#define FAIL(code, ...) (cb && cb->setError ? cb->setError(__VA_ARGS__) : (void)0, (code))

struct comm;
typedef struct {
  struct comm* c;
  int state; /* 0 free, 1 active, 2 done */
  char* data;
  size_t size, len, off;
  uint8_t hdr[16];
  size_t hoff;
  uint64_t tag;
} req_t;

typedef struct comm {
  int fd, isSend;
  uint64_t posted, head;
  collResult_t err;
  char msg[200];
  req_t reqs[MAXREQ];
} comm_t;

typedef struct {
  uint64_t magic;
  char name[64];
} handle_t;

static int token;

static collResult_t exInit(const collNetCallbacks_t* c) {
  if (c) cb = c; /* init(NULL) (a test's) keeps coll's callbacks */
  return collSuccess;
}
static collResult_t exDevices(int* n) {
  *n = 1;
  return collSuccess;
}
static collResult_t exProps(int dev, collNetProperties_t* p) {
  if (dev != 0 || !p) return FAIL(collInvalidArgument, "example: no device %d", dev);
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "example0");
  p->ptrSupport = COLL_PTR_HOST;
  p->speedGbps = 10;
  p->latencyUs = 5;
  p->maxMessage = SIZE_MAX;
  return collSuccess;
}

static socklen_t addrOf(const char* name, struct sockaddr_un* a) {
  memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  size_t n = strlen(name);
  memcpy(a->sun_path + 1, name, n); /* abstract: leading NUL */
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static collResult_t exListen(int dev, void* handle, void** listenComm) {
  (void)dev;
  handle_t h = {MAGIC, ""};
  snprintf(h.name, sizeof h.name, "coll-example-%d-%u-%p", (int)getpid(), __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED),
           (void*)&h);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  struct sockaddr_un a;
  socklen_t al = addrOf(h.name, &a);
  if (fd < 0 || bind(fd, (struct sockaddr*)&a, al) != 0 || listen(fd, 128) != 0) {
    int e = errno;
    if (fd >= 0) close(fd);
    return FAIL(collSystemError, "example listen: %s", strerror(e));
  }
  memset(handle, 0, COLL_NET_HANDLE_BYTES);
  memcpy(handle, &h, sizeof h);
  int* l = malloc(sizeof *l);
  *l = fd;
  *listenComm = l;
  return collSuccess;
}

static comm_t* newComm(int fd, int isSend) {
  comm_t* c = calloc(1, sizeof *c);
  if (c) {
    c->fd = fd;
    c->isSend = isSend;
  }
  return c;
}

static collResult_t exConnect(int dev, const void* handle, void** sendComm) {
  (void)dev;
  handle_t h;
  memcpy(&h, handle, sizeof h);
  *sendComm = NULL;
  if (h.magic != MAGIC) return FAIL(collInvalidArgument, "example connect: not an example handle");
  h.name[sizeof h.name - 1] = 0;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un a;
  socklen_t al = addrOf(h.name, &a);
  if (fd < 0 || connect(fd, (struct sockaddr*)&a, al) != 0) {
    int e = errno;
    if (fd >= 0) close(fd);
    return FAIL(collRemoteError, "example connect to %s: %s", h.name, strerror(e));
  }
  /* the socket stays blocking: every send/recv above passes MSG_DONTWAIT */
  *sendComm = newComm(fd, 1);
  return collSuccess;
}

static collResult_t exAccept(void* listenComm, void** recvComm) {
  int fd = accept4(*(int*)listenComm, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  *recvComm = NULL;
  if (fd < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return collSuccess;
    return FAIL(collSystemError, "example accept: %s", strerror(errno));
  }
  *recvComm = newComm(fd, 0);
  return collSuccess;
}

static collResult_t exRegMr(void* comm, void* data, size_t size, int type, void** mh) {
  (void)comm; (void)data; (void)size;
  if (!(type & COLL_PTR_HOST)) return FAIL(collInvalidArgument, "example regMr: host memory only");
  *mh = &token;
  return collSuccess;
}
static collResult_t exDeregMr(void* comm, void* mh) {
  (void)comm; (void)mh;
  return collSuccess;
}

static void put64(uint8_t* p, uint64_t v) { memcpy(p, &v, 8); }
static uint64_t get64(const uint8_t* p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

/* Moves the head requests as far as the socket allows. */
static void progress(comm_t* c) {
  while (c->err == collSuccess && c->head < c->posted) {
    req_t* r = &c->reqs[c->head % MAXREQ];
    for (;;) {
      int inHdr = r->hoff < 16;
      char* p = inHdr ? (char*)r->hdr + r->hoff : r->data + r->off;
      size_t n = inHdr ? 16 - r->hoff : r->len - r->off;
      if (!inHdr && n == 0) break;
      ssize_t k = c->isSend ? send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) : recv(c->fd, p, n, MSG_DONTWAIT);
      if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        snprintf(c->msg, sizeof c->msg, "example: connection closed (%s)", k == 0 ? "EOF" : strerror(errno));
        c->err = collRemoteError;
        return;
      }
      if (k < 0) return;
      if (inHdr) {
        r->hoff += (size_t)k;
        if (r->hoff == 16 && !c->isSend) {
          r->len = get64(r->hdr);
          r->tag = get64(r->hdr + 8);
          if (r->len > r->size) {
            snprintf(c->msg, sizeof c->msg, "example: peer sent %zu bytes, receiver posted %zu", r->len, r->size);
            c->err = collRemoteError;
            return;
          }
        }
      } else {
        r->off += (size_t)k;
        if (c->isSend) __atomic_add_fetch(&collNetExampleBytesSent, (uint64_t)k, __ATOMIC_RELAXED);
      }
    }
    r->state = 2;
    c->head++;
  }
}

static collResult_t post(comm_t* c, int isSend, void* data, size_t size, uint64_t tag, void** request) {
  *request = NULL;
  if (c->isSend != isSend) return FAIL(collInvalidUsage, "example: %s on a %s comm", isSend ? "isend" : "irecv", c->isSend ? "send" : "recv");
  if (c->err) return FAIL(c->err, "%s", c->msg);
  req_t* r = &c->reqs[c->posted % MAXREQ];
  if (r->state != 0) return collSuccess;
  memset(r, 0, sizeof *r);
  r->c = c;
  r->state = 1;
  r->data = data;
  r->size = size;
  r->len = isSend ? size : 0;
  r->tag = tag;
  if (isSend) {
    put64(r->hdr, size);
    put64(r->hdr + 8, tag);
  }
  c->posted++;
  progress(c);
  *request = r;
  return collSuccess;
}

static collResult_t exIsend(void* sc, const void* data, size_t size, uint64_t tag, void* mh, void** req) {
  (void)mh;
  return post(sc, 1, (void*)(uintptr_t)data, size, tag, req);
}
static collResult_t exIrecv(void* rc, void* data, size_t size, uint64_t tag, void* mh, void** req) {
  (void)mh; (void)tag;
  return post(rc, 0, data, size, 0, req);
}

static collResult_t exTest(void* request, int* done, size_t* size, uint64_t* tag) {
  req_t* r = request;
  *done = 0;
  if (!r || r->state == 0) return FAIL(collInvalidArgument, "example test: released request");
  comm_t* c = r->c;
  progress(c);
  if (r->state == 2) {
    *done = 1;
    if (size) *size = r->len;
    if (tag) *tag = r->tag;
    r->state = 0;
    return collSuccess;
  }
  if (c->err) {
    r->state = 0;
    return FAIL(c->err, "%s", c->msg);
  }
  return collSuccess;
}

static collResult_t exIput(void* sc, const void* d, size_t s, void* mh, unsigned long long a, unsigned long long k,
                           void** req) {
  (void)sc; (void)d; (void)s; (void)mh; (void)a; (void)k;
  *req = NULL;
  return FAIL(collInvalidUsage, "example: iput not supported");
}
#ifndef EXAMPLE_V2
static collResult_t exRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                                  void** mh) {
  (void)comm; (void)data; (void)size; (void)type; (void)offset; (void)fd; (void)mh;
  return FAIL(collInvalidUsage, "example: regMrDmaBuf not supported (host memory only)");
}
#endif
static collResult_t exIflush(void* rc, void* d, size_t s, void* mh, void** req) {
  (void)rc; (void)d; (void)s; (void)mh;
  *req = NULL;
  return collSuccess;
}
static collResult_t exPollFd(void* comm, int* fd) {
  *fd = *(int*)comm; /* fd is the first member of comm_t and of the listen int */
  return collSuccess;
}
static collResult_t exClose(void* comm) {
  comm_t* c = comm;
  if (c) {
    close(c->fd);
    free(c);
  }
  return collSuccess;
}
static collResult_t exCloseListen(void* l) {
  if (l) {
    close(*(int*)l);
    free(l);
  }
  return collSuccess;
}
static collResult_t exFini(void) { return collSuccess; }

#ifdef EXAMPLE_V2
__attribute__((visibility("default"))) const collNet_v2_t collNetPlugin_v2 = {
    .size = sizeof(collNet_v2_t), .version = 2, .name = "example",
    .regMr = exRegMr, .deregMr = exDeregMr,
#else
__attribute__((visibility("default"))) const collNet_t collNetPlugin_v3 = {
    .size = sizeof(collNet_t), .version = EXAMPLE_VERSION, .name = "example",
    .regMr = exRegMr, .deregMr = exDeregMr, .regMrDmaBuf = exRegMrDmaBuf,
#endif
    .init = exInit, .devices = exDevices, .getProperties = exProps,
    .listen = exListen, .connect = exConnect, .accept = exAccept,
    .isend = exIsend, .irecv = exIrecv, .test = exTest,
    .iput = exIput, .iflush = exIflush, .getPollFd = exPollFd,
    .closeSend = exClose, .closeRecv = exClose, .closeListen = exCloseListen,
    .fini = exFini,
};
