/*
 * shm.c - the collNet_t table of the shared-memory transport between
 * processes of one node, and its small operations.
 *
 * The transport in brief (details in the other files):
 *  - shm_setup.c: listen on an abstract AF_UNIX socket; the sender creates
 *    each connection's memory with memfd_create and passes it with two
 *    eventfds over that socket, so nothing ever appears in /dev/shm, a crash
 *    leaves nothing behind and Docker's 64 MiB /dev/shm limit does not apply;
 *  - shm_ring.c: a single-producer/single-consumer ring of slots with C11
 *    atomics; small messages are copied in and out, large ones can be read
 *    straight from the sender's buffer (process_vm_readv, single copy), with
 *    a fall back to copying when the kernel refuses; eventfd wake-ups armed
 *    by a sleeping flag so a busy pair makes no syscalls; a dead peer shows
 *    as EOF on the connection's socket and becomes collRemoteError;
 *  - shm_cma.c: whether single copy is worth it on this machine.
 */
#include "transports/shm/shm.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h> /* memfd_create */
#include <sys/socket.h>
#include <unistd.h>

#include "misc/log.h"
#include "transports/shm/shm_internal.h"

static int shmMrToken;

/* init: checks once that the kernel offers what the transport needs
 * (memfd_create, eventfd, abstract AF_UNIX sockets) so a refusal (seccomp,
 * old kernel) turns into a clean fallback to the network transport. */
static collResult_t shmInit(const collNetCallbacks_t* cb) {
  (void)cb;
  int m = memfd_create("coll-shm-probe", MFD_CLOEXEC);
  if (m < 0) return collSetError(collSystemError, "shm: memfd_create failed: %s", strerror(errno));
  close(m);
  int e = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (e < 0) return collSetError(collSystemError, "shm: eventfd failed: %s", strerror(errno));
  close(e);
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return collSetError(collSystemError, "shm: AF_UNIX socket failed: %s", strerror(errno));
  close(s);
  size_t slot, off, total;
  shmSizes(&slot, &off, &total);
  const char* why;
  size_t th = shmCmaThreshold(&why);
  COLL_INFO(COLL_SUB_NET, "shm: %d slots x %zu KiB per connection in memfd memory (nothing in /dev/shm)",
            COLL_SHM_NSLOTS, slot >> 10);
  if (th) COLL_INFO(COLL_SUB_NET, "shm: single-copy (CMA) from %zu bytes: %s", th, why);
  else COLL_INFO(COLL_SUB_NET, "shm: single-copy (CMA) disabled: %s", why);
  return collSuccess;
}

/* devices: one device, the node's memory. */
static collResult_t shmDevices(int* ndev) {
  if (!ndev) return collSetError(collInvalidArgument, "shm devices: ndev is NULL");
  *ndev = 1;
  return collSuccess;
}

/* getProperties: name "shm", memory-copy speed and latency estimates. */
static collResult_t shmGetProperties(int dev, collNetProperties_t* props) {
  if (!props || dev != 0)
    return collSetError(collInvalidArgument, "shm getProperties: bad device %d or NULL props", dev);
  memset(props, 0, sizeof *props);
  snprintf(props->name, sizeof props->name, "shm");
  props->ptrSupport = COLL_PTR_HOST;
  props->speedGbps = 100.0;
  props->latencyUs = 1.0;
  props->maxMessage = SIZE_MAX;
  return collSuccess; /* hasPut = 0 */
}

/* regMr/deregMr: host memory needs no registration. */
static collResult_t shmRegMr(void* comm, void* data, size_t size, int ptrType, void** mhandle) {
  (void)comm; (void)data; (void)size;
  if (!mhandle) return collSetError(collInvalidArgument, "shm regMr: mhandle is NULL");
  if (!(ptrType & COLL_PTR_HOST))
    return collSetError(collInvalidArgument, "shm regMr: memory type %d not supported (host only)", ptrType);
  *mhandle = &shmMrToken;
  return collSuccess;
}
static collResult_t shmDeregMr(void* comm, void* mhandle) { (void)comm; (void)mhandle; return collSuccess; }

/* isend: queues size bytes of data behind earlier sends of the comm. */
static collResult_t shmIsend(void* sendComm, const void* data, size_t size, uint64_t tag, void* mhandle,
                             void** request) {
  (void)mhandle;
  return shmPost(sendComm, 1, (void*)(uintptr_t)data, size, tag, NULL, NULL, 0, request);
}

/* irecv: posts a buffer of size bytes for the next message of the comm. */
static collResult_t shmIrecv(void* recvComm, void* data, size_t size, uint64_t tag, void* mhandle,
                             void** request) {
  (void)mhandle;
  (void)tag;
  return shmPost(recvComm, 0, data, size, 0, NULL, NULL, 0, request);
}

collResult_t collShmIrecvReduce(void* recvComm, void* dst, const void* local, size_t size, collShmReduceFn reduce,
                                size_t esize, void** request) {
  if (!reduce || esize == 0 || size % esize || (!local && size > 0)) {
    if (request) *request = NULL;
    return collSetError(collInvalidArgument, "shm irecvReduce: no reduction, element size %zu for %zu bytes, or "
                        "no local input", esize, size);
  }
  return shmPost(recvComm, 0, dst, size, 0, reduce, local, esize, request);
}

/* iput: one-sided writes are not offered. */

/* regMrDmaBuf: shm does not take dma-bufs (host memory only). */
static collResult_t shmRegMrDmaBuf(void* comm, void* data, size_t size, int ptrType, uint64_t offset, int fd,
                                   void** mhandle) {
  (void)comm; (void)data; (void)size; (void)ptrType; (void)offset; (void)fd; (void)mhandle;
  return collSetError(collInvalidUsage, "shm: regMrDmaBuf not supported (host memory only)");
}
static collResult_t shmIput(void* sendComm, const void* data, size_t size, void* mhandle,
                            unsigned long long remoteAddr, unsigned long long remoteKey, void** request) {
  (void)sendComm; (void)data; (void)size; (void)mhandle; (void)remoteAddr; (void)remoteKey;
  if (request) *request = NULL;
  return collSetError(collInvalidUsage, "shm: iput not supported (no one-sided writes)");
}

/* iflush: host memory is visible at once; *request = NULL means done. */
static collResult_t shmIflush(void* recvComm, void* data, size_t size, void* mhandle, void** request) {
  (void)recvComm; (void)data; (void)size; (void)mhandle;
  if (!request) return collSetError(collInvalidArgument, "shm iflush: request is NULL");
  *request = NULL;
  return collSuccess;
}

/* getPollFd: for a send or recv comm, arms the wake-up (see shm_ring.c)
 * and returns its eventfd; for a listen comm, the listen socket. */
static collResult_t shmGetPollFd(void* comm, int* fd) {
  if (!comm || !fd) return collSetError(collInvalidArgument, "shm getPollFd: NULL argument");
  uint32_t tag;
  memcpy(&tag, comm, sizeof tag);
  if (tag == SHM_TAG_LISTEN) *fd = shmListenFd(comm);
  else if (tag == SHM_TAG_COMM) *fd = shmArm(comm);
  else return collSetError(collInvalidArgument, "shm getPollFd: not a shm comm");
  return collSuccess;
}

/* fini: nothing global to release. */
static collResult_t shmFini(void) { return collSuccess; }

/* Counters of a send or recv comm (shm.h). */
void collShmGetStats(const void* comm, collShmStats* st) {
  const shmComm* c = comm;
  memset(st, 0, sizeof *st);
  if (!c) return;
  st->copyMsgs = c->copyMsgs;
  st->cmaMsgs = c->cmaMsgs;
  st->reduceMsgs = c->reduceMsgs;
  st->cmaEnabled = c->cmaOn;
  st->peerPid = c->peerPid;
  st->cmaThreshold = c->cmaThreshold;
}

/* The table (coll_net.h); listen/connect/accept/close live in shm_setup.c. */
const collNet_t collNetShm = {
    .size = sizeof(collNet_t), .version = COLL_NET_VERSION, .name = "shm",
    .init = shmInit, .devices = shmDevices, .getProperties = shmGetProperties,
    .listen = shmListenFn, .connect = shmConnect, .accept = shmAccept,
    .regMr = shmRegMr, .deregMr = shmDeregMr, .regMrDmaBuf = shmRegMrDmaBuf,
    .isend = shmIsend, .irecv = shmIrecv, .test = shmTest,
    .iput = shmIput, .iflush = shmIflush, .getPollFd = shmGetPollFd,
    .closeSend = shmCloseComm, .closeRecv = shmCloseComm, .closeListen = shmCloseListen,
    .fini = shmFini,
};
