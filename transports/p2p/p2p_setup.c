/*
 * p2p_setup.c - connections of the p2p transport: listen, connect, accept,
 * close, and the ring's GPU memory (p2p.h has the design).
 *
 * Listen: an AF_UNIX stream socket in the abstract namespace named
 * "coll-p2p-<pid>-<random>" (no file, gone with the process). Handle:
 * {magic, pid, process nonce, GPU, name}.
 *
 * Connect (the sender): makes its GPU current, allocates the ring
 * (cuMemCreate, exportable as a POSIX fd where the GPU supports it, mapped
 * read-write for its GPU), the header page (memfd) and a non-blocking
 * stream with one event per slot, connects and sends {hello, header memfd,
 * ring fd}. Accept (the receiver): takes one pending connection, reads the
 * hello (waiting up to 10 s for a connection already made), maps the header,
 * gets a handle to the ring (the fd's import, or, for a sender in this
 * process, cuMemRetainAllocationHandle on the sender's address), maps it
 * readable for its own GPU and drops the handle (the mapping keeps the
 * memory). A GPU that cannot reach the sender's (no peer access) fails
 * accept with a message naming both.
 */
#ifdef COLL_HAVE_CUDA
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "device/devexec.h"
#include "misc/log.h"
#include "misc/param.h"
#include "misc/socket.h"
#include "transports/p2p/p2p_internal.h"

#define P2P_HANDLE_MAGIC 0x636f6c6c50325041ULL /* "collP2PA" */
#define P2P_HELLO_MAGIC 0x636f6c6c5032504fULL  /* "collP2PO" */
#define P2P_HELLO_WAIT_S 10.0
#define P2P_NAME_MAX 36 /* "coll-p2p-<pid>-<16 hex>" */

typedef struct {
  uint64_t magic;
  int32_t pid;
  int32_t dev;
  uint64_t nonce;
  uint32_t nameLen;
  char name[P2P_NAME_MAX + 4];
} p2pHandle;
_Static_assert(sizeof(p2pHandle) <= COLL_NET_HANDLE_BYTES, "p2p handle too large");

typedef struct { /* sent by connect with the header memfd and, if exported, the ring fd */
  uint64_t magic;
  int32_t pid;
  int32_t dev;       /* the sender's GPU (holds the ring) */
  uint64_t nonce;
  uint64_t ringBytes, slotBytes, hdrBytes;
  uint64_t ringAddr; /* the sender's address of the ring (same-process mapping) */
  uint32_t nslots;
  uint32_t hasFd;    /* the ring fd follows the header memfd */
} p2pHello;

typedef struct {
  uint32_t tag; /* P2P_TAG_LISTEN */
  int fd;
  int dev;
  char name[P2P_NAME_MAX + 4];
} p2pListenComm;

/* A random 64-bit value drawn once per process: with the pid it tells a
 * peer in this very process from one with the same pid elsewhere. */
static uint64_t p2pNonceValue;
static pthread_once_t p2pNonceOnce = PTHREAD_ONCE_INIT;
static void p2pNonceInit(void) {
  if (getrandom(&p2pNonceValue, sizeof p2pNonceValue, GRND_NONBLOCK) != (ssize_t)sizeof p2pNonceValue)
    p2pNonceValue = (uint64_t)(collTimeNow() * 1e9) ^ ((uint64_t)getpid() << 32);
}
static uint64_t p2pNonce(void) {
  pthread_once(&p2pNonceOnce, p2pNonceInit);
  return p2pNonceValue;
}

static socklen_t p2pAddr(struct sockaddr_un* a, const char* name, size_t len) {
  memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  memcpy(a->sun_path + 1, name, len); /* abstract */
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
}

collResult_t p2pListen(int dev, void* handle, void** listenComm) {
  if (!handle || !listenComm) return collSetError(collInvalidArgument, "p2p listen: NULL argument");
  *listenComm = NULL;
  if (collCudaLoad() != collSuccess) return collSetError(collSystemError, "p2p listen: %s", collCudaLoadMessage());
  int ndev = collDevCount();
  if (dev < 0 || dev >= ndev)
    return collSetError(collInvalidArgument, "p2p listen: GPU %d does not exist (this process sees %d)", dev, ndev);
  p2pListenComm* l = calloc(1, sizeof *l);
  if (!l) return collSetError(collSystemError, "p2p listen: out of memory");
  l->tag = P2P_TAG_LISTEN;
  l->dev = dev;
  l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (l->fd < 0) {
    free(l);
    return collSetError(collSystemError, "p2p listen: socket(AF_UNIX) failed: %s", strerror(errno));
  }
  int rc = -1;
  for (int attempt = 0; attempt < 8 && rc != 0; attempt++) {
    unsigned long long rnd = 0;
    if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
      rnd = (unsigned long long)(collTimeNow() * 1e9) ^ (unsigned)attempt;
    snprintf(l->name, sizeof l->name, "coll-p2p-%d-%016llx", (int)getpid(), rnd);
    struct sockaddr_un a;
    socklen_t al = p2pAddr(&a, l->name, strlen(l->name));
    rc = bind(l->fd, (struct sockaddr*)&a, al);
    if (rc != 0 && errno != EADDRINUSE) break;
  }
  if (rc != 0 || listen(l->fd, SOMAXCONN) != 0) {
    int e = errno;
    close(l->fd);
    free(l);
    return collSetError(collSystemError, "p2p listen: cannot bind/listen an abstract AF_UNIX socket: %s", strerror(e));
  }
  p2pHandle h;
  memset(&h, 0, sizeof h);
  h.magic = P2P_HANDLE_MAGIC;
  h.pid = (int32_t)getpid();
  h.dev = dev;
  h.nonce = p2pNonce();
  h.nameLen = (uint32_t)strlen(l->name);
  memcpy(h.name, l->name, h.nameLen);
  memset(handle, 0, COLL_NET_HANDLE_BYTES);
  memcpy(handle, &h, sizeof h);
  *listenComm = l;
  return collSuccess;
}

/* A comm with its context, stream and events (ring and header set later). */
static collResult_t p2pNewComm(int isSend, int dev, p2pComm** out) {
  *out = NULL;
  collResult_t r = collDevSetCurrent(dev);
  if (r != collSuccess) return r;
  p2pComm* c = calloc(1, sizeof *c);
  if (!c) return collSetError(collSystemError, "p2p: out of memory for a connection");
  c->tag = P2P_TAG_COMM;
  c->isSend = isSend;
  c->dev = dev;
  c->sock = -1;
  c->lastCheck = collTimeNow();
  CUresult cr = COLL_CU(cuCtxGetCurrent)(&c->ctx);
  if (cr == CUDA_SUCCESS) cr = COLL_CU(cuStreamCreate)(&c->stream, CU_STREAM_NON_BLOCKING);
  for (int i = 0; i < COLL_P2P_NSLOTS && cr == CUDA_SUCCESS; i++)
    cr = COLL_CU(cuEventCreate)(&c->ev[i], CU_EVENT_DISABLE_TIMING);
  if (cr != CUDA_SUCCESS) {
    r = collCudaError(cr, "p2p: creating the connection's stream and events failed");
    p2pCloseComm(c);
    return r;
  }
  *out = c;
  return collSuccess;
}

/* The sender's ring: COLL_P2P_BUFFSIZE rounded up to the allocation
 * granularity, exportable as a POSIX fd when the GPU supports it (*fd, else
 * -1), mapped read-write for dev. */
static collResult_t p2pAllocRing(p2pComm* c, int* fd) {
  *fd = -1;
  CUdevice dev;
  COLL_CU_CHECK(COLL_CU(cuDeviceGet)(&dev, c->dev), "p2p: cuDeviceGet failed");
  int fdOk = 0;
  COLL_CU(cuDeviceGetAttribute)(&fdOk, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev);
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = c->dev;
  prop.requestedHandleTypes = fdOk ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
  size_t gran = 0;
  COLL_CU_CHECK(COLL_CU(cuMemGetAllocationGranularity)(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                "p2p: cuMemGetAllocationGranularity failed");
  if (gran == 0) gran = 2u << 20;
  size_t want = (size_t)collParamInt(COLL_PARAM_P2P_BUFFSIZE);
  c->ringBytes = (want + gran - 1) / gran * gran;
  c->slotBytes = c->ringBytes / COLL_P2P_NSLOTS;
  char what[160];
  snprintf(what, sizeof what, "p2p: cuMemCreate of the %zu-byte ring on GPU %d failed (COLL_P2P_BUFFSIZE=%zu)",
           c->ringBytes, c->dev, want);
  COLL_CU_CHECK(COLL_CU(cuMemCreate)(&c->alloc, c->ringBytes, &prop, 0), what);
  CUresult cr = COLL_CU(cuMemAddressReserve)(&c->ring, c->ringBytes, gran, 0, 0);
  if (cr != CUDA_SUCCESS) {
    c->ring = 0;
    return collCudaError(cr, "p2p: cuMemAddressReserve failed");
  }
  if ((cr = COLL_CU(cuMemMap)(c->ring, c->ringBytes, 0, c->alloc, 0)) != CUDA_SUCCESS) {
    COLL_CU(cuMemAddressFree)(c->ring, c->ringBytes);
    c->ring = 0;
    return collCudaError(cr, "p2p: cuMemMap of the ring failed");
  }
  CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, c->dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  COLL_CU_CHECK(COLL_CU(cuMemSetAccess)(c->ring, c->ringBytes, &acc, 1), "p2p: cuMemSetAccess of the ring failed");
  if (fdOk) {
    int x = -1;
    cr = COLL_CU(cuMemExportToShareableHandle)(&x, c->alloc, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (cr == CUDA_SUCCESS) *fd = x;
    else COLL_INFO(COLL_SUB_NET, "p2p: GPU %d memory cannot be exported as a file descriptor (%s): peers in other "
                   "processes cannot connect", c->dev, collCudaErrorName(cr));
  }
  return collSuccess;
}

/* The header page in a memfd, initialized. *mfd stays open (to pass it). */
static collResult_t p2pCreateHdr(p2pComm* c, int* mfd) {
  c->hdrBytes = (sizeof(p2pHdr) + 4095) & ~(size_t)4095;
  int fd = memfd_create("coll-p2p", MFD_CLOEXEC);
  if (fd < 0) return collSetError(collSystemError, "p2p: memfd_create failed: %s", strerror(errno));
  if (ftruncate(fd, (off_t)c->hdrBytes) != 0) {
    int e = errno;
    close(fd);
    return collSetError(collSystemError, "p2p: ftruncate of the header failed: %s", strerror(e));
  }
  void* p = mmap(NULL, c->hdrBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    close(fd);
    return collSetError(collSystemError, "p2p: mmap of the header failed: %s", strerror(e));
  }
  memset(p, 0, c->hdrBytes);
  c->hdr = p;
  c->hdr->magic = P2P_HDR_MAGIC;
  c->hdr->ringBytes = c->ringBytes;
  c->hdr->slotBytes = c->slotBytes;
  c->hdr->nslots = COLL_P2P_NSLOTS;
  c->hdr->senderPid = (int32_t)getpid();
  *mfd = fd;
  return collSuccess;
}

static collResult_t p2pConnectSock(int sock, const p2pHandle* h) {
  struct sockaddr_un a;
  socklen_t al = p2pAddr(&a, h->name, h->nameLen);
  double deadline = collTimeNow() + (double)collParamInt(COLL_PARAM_CONNECT_RETRY_MS) * 1e-3;
  for (;;) {
    if (connect(sock, (struct sockaddr*)&a, al) == 0) return collSuccess;
    if (errno == EINTR) continue;
    if ((errno == EAGAIN || errno == EWOULDBLOCK) && collTimeNow() < deadline) {
      poll(NULL, 0, 1); /* backlog full: the receiver has not accepted yet */
      continue;
    }
    return collSetError(errno == ECONNREFUSED ? collRemoteError : collSystemError,
                        "p2p connect: cannot reach the listener of process %d (%.*s): %s", h->pid, (int)h->nameLen,
                        h->name, strerror(errno));
  }
}

static collResult_t p2pSendHello(int sock, const p2pHello* hello, const int* fds, int nfds) {
  char cbuf[CMSG_SPACE(2 * sizeof(int))];
  memset(cbuf, 0, sizeof cbuf);
  struct iovec iov = {(void*)hello, sizeof *hello};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                     .msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int))};
  struct cmsghdr* cm = CMSG_FIRSTHDR(&m);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
  memcpy(CMSG_DATA(cm), fds, (size_t)nfds * sizeof(int));
  double deadline = collTimeNow() + P2P_HELLO_WAIT_S;
  for (;;) {
    ssize_t n = sendmsg(sock, &m, MSG_NOSIGNAL);
    if (n == (ssize_t)sizeof *hello) return collSuccess;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && collTimeNow() < deadline) {
      struct pollfd p = {sock, POLLOUT, 0};
      poll(&p, 1, 10);
      continue;
    }
    return collSetError(collRemoteError, "p2p connect: sending the connection's descriptors failed: %s",
                        n < 0 ? strerror(errno) : "short write");
  }
}

static collResult_t p2pConnectIn(int dev, const void* handle, void** sendComm) {
  p2pHandle h;
  memcpy(&h, handle, sizeof h);
  if (h.magic != P2P_HANDLE_MAGIC || h.nameLen == 0 || h.nameLen > P2P_NAME_MAX)
    return collSetError(collInvalidArgument, "p2p connect: handle is not a p2p handle (bad magic or name)");
  p2pComm* c = NULL;
  collResult_t r = p2pNewComm(1, dev, &c);
  if (r != collSuccess) return r;
  int mfd = -1, rfd = -1;
  if ((r = p2pAllocRing(c, &rfd)) != collSuccess || (r = p2pCreateHdr(c, &mfd)) != collSuccess) goto fail;
  int samePeer = h.pid == (int32_t)getpid() && h.nonce == p2pNonce();
  if (rfd < 0 && !samePeer) {
    r = collSetError(collSystemError,
                     "p2p connect: GPU %d memory cannot be exported as a file descriptor here, so process %d cannot "
                     "map it (ranks in one process can)", c->dev, h.pid);
    goto fail;
  }
  c->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c->sock < 0) {
    r = collSetError(collSystemError, "p2p connect: socket(AF_UNIX) failed: %s", strerror(errno));
    goto fail;
  }
  if ((r = p2pConnectSock(c->sock, &h)) != collSuccess) goto fail;
  p2pHello hello = {P2P_HELLO_MAGIC, (int32_t)getpid(), c->dev, p2pNonce(), c->ringBytes, c->slotBytes,
                    c->hdrBytes, (uint64_t)c->ring, COLL_P2P_NSLOTS, rfd >= 0};
  int fds[2] = {mfd, rfd};
  if ((r = p2pSendHello(c->sock, &hello, fds, rfd >= 0 ? 2 : 1)) != collSuccess) goto fail;
  close(mfd); /* the receiver has its own descriptors now */
  if (rfd >= 0) close(rfd);
  c->sameProcess = samePeer;
  c->peerPid = h.pid;
  COLL_INFO(COLL_SUB_NET, "p2p: sender on GPU %d connected to process %d (GPU %d) via P2P/CUMEM%s, ring %zu KiB",
            c->dev, h.pid, h.dev, samePeer ? "/same-process" : "/fd", c->ringBytes >> 10);
  *sendComm = c;
  return collSuccess;
fail:
  if (mfd >= 0) close(mfd);
  if (rfd >= 0) close(rfd);
  p2pCloseComm(c);
  return r;
}

/* Reads the hello and up to two descriptors (waits up to P2P_HELLO_WAIT_S).
 * Returns the number of descriptors, or -1 with all of them closed. */
static int p2pRecvHello(int fd, p2pHello* hello, int fds[2]) {
  size_t got = 0;
  int nfds = 0;
  double deadline = collTimeNow() + P2P_HELLO_WAIT_S;
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
          if (nfds < 2) fds[nfds++] = x;
          else close(x);
        }
      }
      if (m.msg_flags & MSG_CTRUNC) break;
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

/* Maps the sender's ring for c's GPU: a handle from the fd or (same
 * process) from the sender's address, a fresh address range, read access. */
static collResult_t p2pMapRing(p2pComm* c, const p2pHello* hello, int rfd) {
  CUmemGenericAllocationHandle h = 0;
  CUresult cr;
  if (c->sameProcess) {
    cr = COLL_CU(cuMemRetainAllocationHandle)(&h, (void*)(uintptr_t)hello->ringAddr);
    if (cr != CUDA_SUCCESS) return collCudaError(cr, "p2p accept: cuMemRetainAllocationHandle of the sender's ring failed");
  } else {
    if (rfd < 0)
      return collSetError(collSystemError, "p2p accept: process %d sent no descriptor for its GPU memory", hello->pid);
    cr = COLL_CU(cuMemImportFromShareableHandle)(&h, (void*)(uintptr_t)rfd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (cr != CUDA_SUCCESS) {
      char what[160];
      snprintf(what, sizeof what,
               "p2p accept: importing the GPU memory of process %d failed (containers need a shared PID/IPC "
               "namespace and the peer's GPU visible)", hello->pid);
      return collCudaError(cr, what);
    }
  }
  c->ringBytes = hello->ringBytes;
  c->slotBytes = hello->slotBytes;
  cr = COLL_CU(cuMemAddressReserve)(&c->ring, c->ringBytes, 0, 0, 0);
  if (cr == CUDA_SUCCESS && (cr = COLL_CU(cuMemMap)(c->ring, c->ringBytes, 0, h, 0)) != CUDA_SUCCESS) {
    COLL_CU(cuMemAddressFree)(c->ring, c->ringBytes);
  }
  COLL_CU(cuMemRelease)(h); /* the mapping holds the memory from here on */
  if (cr != CUDA_SUCCESS) {
    c->ring = 0;
    return collCudaError(cr, "p2p accept: mapping the sender's ring failed");
  }
  CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, c->dev}, CU_MEM_ACCESS_FLAGS_PROT_READ};
  cr = COLL_CU(cuMemSetAccess)(c->ring, c->ringBytes, &acc, 1);
  if (cr != CUDA_SUCCESS) {
    int can = -1;
    CUdevice a, b;
    if (COLL_CU(cuDeviceGet)(&a, c->dev) == CUDA_SUCCESS && COLL_CU(cuDeviceGet)(&b, hello->dev) == CUDA_SUCCESS)
      COLL_CU(cuDeviceCanAccessPeer)(&can, a, b);
    char what[160];
    snprintf(what, sizeof what, "p2p accept: GPU %d cannot read the ring on GPU %d (peer access %s)", c->dev,
             hello->dev, can == 1 ? "reported possible" : can == 0 ? "not possible" : "unknown");
    return collCudaError(cr, what);
  }
  return collSuccess;
}

/* Checks the hello against the header page and maps it; NULL if off. */
static p2pHdr* p2pMapHdr(const p2pHello* hello, int mfd) {
  struct stat st;
  if (hello->magic != P2P_HELLO_MAGIC || hello->nslots != COLL_P2P_NSLOTS || hello->slotBytes == 0 ||
      hello->slotBytes % 256 || hello->ringBytes != hello->slotBytes * COLL_P2P_NSLOTS ||
      hello->hdrBytes < sizeof(p2pHdr) || hello->hdrBytes > (1u << 20) || fstat(mfd, &st) != 0 ||
      (uint64_t)st.st_size != hello->hdrBytes)
    return NULL;
  void* p = mmap(NULL, hello->hdrBytes, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
  if (p == MAP_FAILED) return NULL;
  p2pHdr* h = p;
  if (h->magic != P2P_HDR_MAGIC || h->ringBytes != hello->ringBytes || h->slotBytes != hello->slotBytes ||
      h->nslots != COLL_P2P_NSLOTS) {
    munmap(p, hello->hdrBytes);
    return NULL;
  }
  return h;
}

/* Wraps a setup call: checks the driver, and leaves the caller's thread
 * with the context it had (setup makes the comm's GPU current). */
collResult_t p2pConnect(int dev, const void* handle, void** sendComm) {
  if (!handle || !sendComm) return collSetError(collInvalidArgument, "p2p connect: NULL argument");
  *sendComm = NULL;
  if (collCudaLoad() != collSuccess) return collSetError(collSystemError, "p2p connect: %s", collCudaLoadMessage());
  CUcontext prev = p2pEnterCtx(NULL);
  collResult_t r = p2pConnectIn(dev, handle, sendComm);
  p2pLeaveCtx(prev);
  return r;
}

static collResult_t p2pAcceptIn(p2pListenComm* l, void** recvComm);
collResult_t p2pAccept(void* listenComm, void** recvComm) {
  p2pListenComm* l = listenComm;
  if (!l || !recvComm) return collSetError(collInvalidArgument, "p2p accept: NULL argument");
  *recvComm = NULL;
  if (collCudaLoad() != collSuccess) return collSetError(collSystemError, "p2p accept: %s", collCudaLoadMessage());
  CUcontext prev = p2pEnterCtx(NULL);
  collResult_t r = p2pAcceptIn(l, recvComm);
  p2pLeaveCtx(prev);
  return r;
}

static collResult_t p2pAcceptIn(p2pListenComm* l, void** recvComm) {
  for (;;) {
    int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return collSuccess; /* nothing pending */
      return collSetError(collSystemError, "p2p accept on %s failed: %s", l->name, strerror(errno));
    }
    p2pHello hello;
    int fds[2] = {-1, -1};
    int n = p2pRecvHello(fd, &hello, fds);
    p2pHdr* hdr = n >= 1 && n == 1 + (int)(hello.hasFd != 0) ? p2pMapHdr(&hello, fds[0]) : NULL;
    if (!hdr) {
      COLL_WARN(COLL_SUB_NET, "p2p accept: dropping a connection without a valid hello and header");
      for (int i = 0; i < (n > 0 ? n : 0); i++) close(fds[i]);
      close(fd);
      continue;
    }
    close(fds[0]);
    p2pComm* c = NULL;
    collResult_t r = p2pNewComm(0, l->dev, &c);
    if (r == collSuccess) {
      c->hdr = hdr;
      c->hdrBytes = hello.hdrBytes;
      c->sock = fd;
      c->peerPid = hello.pid;
      c->sameProcess = hello.pid == (int32_t)getpid() && hello.nonce == p2pNonce();
      r = p2pMapRing(c, &hello, fds[1]);
    } else {
      munmap(hdr, hello.hdrBytes);
      close(fd);
    }
    if (fds[1] >= 0) close(fds[1]);
    if (r != collSuccess) {
      p2pCloseComm(c);
      return r;
    }
    COLL_INFO(COLL_SUB_NET, "p2p: receiver on GPU %d accepted process %d (GPU %d) via P2P/CUMEM%s", c->dev, hello.pid,
              hello.dev, c->sameProcess ? "/same-process" : "/fd");
    *recvComm = c;
    return collSuccess;
  }
}

collResult_t p2pCloseComm(void* comm) {
  p2pComm* c = comm;
  if (!c) return collSuccess;
  if (c->hdr) {
    if (c->isSend) atomic_store(&c->hdr->sendClosed, P2P_CLOSED);
    else atomic_store(&c->hdr->recvClosed, P2P_CLOSED);
  }
  if (c->ctx) {
    CUcontext prev = p2pEnterCtx(c->ctx);
    if (c->stream) COLL_CU(cuStreamSynchronize)(c->stream); /* our copies touch the ring: let them end */
    for (int i = 0; i < COLL_P2P_NSLOTS; i++)
      if (c->ev[i]) COLL_CU(cuEventDestroy)(c->ev[i]);
    if (c->stream) COLL_CU(cuStreamDestroy)(c->stream);
    if (c->ring) {
      COLL_CU(cuMemUnmap)(c->ring, c->ringBytes);
      COLL_CU(cuMemAddressFree)(c->ring, c->ringBytes);
    }
    if (c->alloc) COLL_CU(cuMemRelease)(c->alloc); /* freed once the receiver's mapping is gone too */
    p2pLeaveCtx(prev);
  }
  if (c->hdr) munmap(c->hdr, c->hdrBytes);
  if (c->sock >= 0) close(c->sock);
  free(c);
  return collSuccess;
}

collResult_t p2pCloseListen(void* listenComm) {
  p2pListenComm* l = listenComm;
  if (!l) return collSuccess;
  close(l->fd);
  free(l);
  return collSuccess;
}
#else
typedef int collNoP2pSetup; /* built without CUDA: see p2p.c */
#endif
