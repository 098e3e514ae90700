/* ib.c - the "ib" transport's operations table (ib.h): init, devices,
 * properties, registration, poll fds; the rest is in ib_connect.c and
 * ib_data.c. */
#include "ib.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "device/dmabuf.h"
#include "ib_internal.h"
#include "misc/log.h"
#include "misc/param.h"

collIbState collIb = {.lock = PTHREAD_MUTEX_INITIALIZER, .epfd = -1, .wakeFd = -1};
collIbConfig collIbCfg;

static int clampi(int64_t v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : (int)v; }

void collIbConfigLoad(collIbConfig* cfg) {
  cfg->gidIndex = (int)collParamInt(COLL_PARAM_IB_GID_INDEX);
  cfg->tc = clampi(collParamInt(COLL_PARAM_IB_TC), 0, 255);
  cfg->sl = clampi(collParamInt(COLL_PARAM_IB_SL), 0, 15);
  cfg->timeout = clampi(collParamInt(COLL_PARAM_IB_TIMEOUT), 1, 31);
  cfg->retryCnt = clampi(collParamInt(COLL_PARAM_IB_RETRY_CNT), 0, 7);
  cfg->nqps = clampi(collParamInt(COLL_PARAM_IB_QPS_PER_CONN), 1, IB_MAX_QPS);
  cfg->regCache = clampi(collParamInt(COLL_PARAM_IB_REG_CACHE), 0, 1 << 20);
  cfg->dmabuf = clampi(collParamInt(COLL_PARAM_IB_DMABUF), 0, 1);
  cfg->hca = collParamStr(COLL_SPARAM_IB_HCA);
}

collResult_t collIbStart(void) {
  pthread_mutex_lock(&collIb.lock);
  collResult_t r = collSuccess;
  if (collIb.ready) goto out;
  if ((r = collIbvGet(&collIb.v)) != collSuccess) goto out;
  collIb.epfd = epoll_create1(EPOLL_CLOEXEC);
  collIb.wakeFd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (collIb.epfd < 0 || collIb.wakeFd < 0) {
    r = collSetError(collSystemError, "ib: epoll/eventfd: %s", strerror(errno));
    goto fail;
  }
  collIb.epWake = IB_EP_WAKE;
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &collIb.epWake};
  epoll_ctl(collIb.epfd, EPOLL_CTL_ADD, collIb.wakeFd, &ev);
  if ((r = collIbDiscover()) != collSuccess) goto fail;
  collIb.ready = 1;
  goto out;
fail:
  if (collIb.epfd >= 0) close(collIb.epfd);
  if (collIb.wakeFd >= 0) close(collIb.wakeFd);
  collIb.epfd = collIb.wakeFd = -1;
out:
  pthread_mutex_unlock(&collIb.lock);
  return r;
}

/* init: the COLL_IB_* variables, libibverbs, the devices (once). */
static collResult_t ibInit(const collNetCallbacks_t* cb) {
  (void)cb; /* a built-in transport logs and sets errors through coll itself */
  pthread_mutex_lock(&collIb.lock);
  int ready = collIb.ready;
  if (!ready) collIbConfigLoad(&collIbCfg);
  pthread_mutex_unlock(&collIb.lock);
  return ready ? collSuccess : collIbStart();
}

/* fini: closes the devices; refused while comms are open. */
static collResult_t ibFini(void) {
  pthread_mutex_lock(&collIb.lock);
  collResult_t r = collSuccess;
  if (collIb.comms || collIb.listens) {
    r = collSetError(collInvalidUsage, "ib fini: connections are still open");
  } else if (collIb.ready) {
    collIbCloseDevices();
    close(collIb.epfd);
    close(collIb.wakeFd);
    collIb.epfd = collIb.wakeFd = -1;
    collIb.ready = 0;
  }
  pthread_mutex_unlock(&collIb.lock);
  return r;
}

static collResult_t ibDevices(int* ndev) {
  if (!ndev) return collSetError(collInvalidArgument, "ib devices: ndev is NULL");
  pthread_mutex_lock(&collIb.lock);
  *ndev = collIb.ready ? collIb.ndev : 0;
  int ready = collIb.ready;
  pthread_mutex_unlock(&collIb.lock);
  return ready ? collSuccess : collSetError(collInvalidUsage, "ib devices: transport not initialized");
}

/* Whether h takes dma-bufs, probed once as NCCL does: ibv_reg_dmabuf_mr of
 * fd -1 fails with EOPNOTSUPP / EPROTONOSUPPORT (or ENOSYS) where the
 * kernel driver lacks dma-buf support, with another errno (EBADF) where it
 * has it. Caller holds collIb.lock. */
static int ibDmaBufProbe(collIbHca* h) {
  if (h->dmabufProbed) return h->dmabuf;
  h->dmabufProbed = 1;
  const collIbvOps* v = collIb.v;
  if (!v->regDmaBufMr) {
    COLL_INFO(COLL_SUB_NET, "ib: %s: no dma-buf registration (libibverbs has no ibv_reg_dmabuf_mr: rdma-core < 34)",
              h->name);
    return h->dmabuf = 0;
  }
  errno = 0;
  struct ibv_mr* mr = v->regDmaBufMr(h->pd, 0, 0, 0, -1, 0);
  int e = errno;
  if (mr) v->deregMr(mr); /* no driver should accept fd -1; nothing to keep if one did */
  h->dmabufErrno = e;
  h->dmabuf = !mr && e != EOPNOTSUPP && e != EPROTONOSUPPORT && e != ENOSYS;
  COLL_INFO(COLL_SUB_NET, "ib: %s: dma-buf registration %s (probe with fd -1: %s)", h->name,
            h->dmabuf ? "supported" : "not supported by the kernel driver", e ? strerror(e) : "accepted");
  return h->dmabuf;
}

static collResult_t ibGetProperties(int dev, collNetProperties_t* props) {
  /* outside the lock: may load the CUDA driver (only if the process mapped it) */
  int cudaDmaBuf = collIbCfg.dmabuf && collCudaDmaBufSupported();
  pthread_mutex_lock(&collIb.lock);
  int ok = props && collIb.ready && dev >= 0 && dev < collIb.ndev;
  if (ok) {
    const collIbDev* d = &collIb.devs[dev];
    memset(props, 0, sizeof *props);
    snprintf(props->name, sizeof props->name, "%s", d->name);
    props->ptrSupport = COLL_PTR_HOST;
    if (cudaDmaBuf && ibDmaBufProbe(d->hca)) props->ptrSupport |= COLL_PTR_CUDA | COLL_PTR_DMABUF;
    props->speedGbps = d->gbps;
    props->latencyUs = d->linkLayer == IBV_LINK_LAYER_ETHERNET ? 5.0 : 2.0;
    props->maxMessage = SIZE_MAX; /* larger messages are split */
    props->hasPut = 0;
    snprintf(props->pciPath, sizeof props->pciPath, "%s", d->pciPath);
    props->guid = d->guid;
    props->port = d->port;
  }
  int n = collIb.ready ? collIb.ndev : 0;
  pthread_mutex_unlock(&collIb.lock);
  if (!ok) return collSetError(collInvalidArgument, "ib getProperties: bad device %d (%d devices) or NULL props", dev, n);
  return collSuccess;
}

static collIbComm* dataComm(void* comm) {
  collIbComm* c = comm;
  return c && (c->tag == IB_TAG_SEND || c->tag == IB_TAG_RECV) ? c : NULL;
}

static collResult_t ibRegMr(void* comm, void* data, size_t size, int ptrType, void** mhandle) {
  collIbComm* c = dataComm(comm);
  if (!c || !mhandle || (!data && size)) return collSetError(collInvalidArgument, "ib regMr: bad comm or NULL argument");
  if (!(ptrType & COLL_PTR_HOST))
    return collSetError(collInvalidArgument, "ib regMr: memory type %d not supported (host memory only)", ptrType);
  collRegEntry* e = NULL;
  /* not through ib's own cache: the caller (the engine) keeps registrations
   * for reuse itself and checks them (COLL_REG_CACHE); a hit here would
   * hand it a registration of pages that may be gone */
  int rc = collRegCacheGet(c->dev->hca->regDirect, data, size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &e);
  if (rc != 0)
    return collSetError(collSystemError, "ib regMr: registering %zu bytes on %s failed: %s", size, c->dev->name,
                        strerror(rc));
  *mhandle = e;
  return collSuccess;
}

static collResult_t ibDeregMr(void* comm, void* mhandle) {
  collIbComm* c = dataComm(comm);
  if (!c) return collSetError(collInvalidArgument, "ib deregMr: bad comm");
  collRegEntry* e = mhandle;
  if (e && (e->access & IB_REG_DMABUF)) { /* regMrDmaBuf's: not from a cache */
    collIbDmaBufReg* g = (collIbDmaBufReg*)e;
    collIb.v->deregMr(e->handle);
    collCudaRdmaFlushRelease(&g->flush);
    free(g);
    return collSuccess;
  }
  collRegCachePut(c->dev->hca->regDirect, mhandle);
  return collSuccess;
}

/* regMrDmaBuf: ibv_reg_dmabuf_mr(pd, offset, size, iova = data, fd) with
 * regMr's access, so the addresses the engine posts (data...) are the MR's.
 * The handle is a collIbDmaBufReg: a collRegEntry like regMr's (the data
 * path reads its range and keys), marked IB_REG_DMABUF, and the GPU's flush
 * target (collCudaRdmaFlushOf: asked of the driver here, once, not at every
 * iflush). The fd stays the caller's: the kernel keeps its own reference to
 * the dma-buf for the MR's life. */
static collResult_t ibRegMrDmaBuf(void* comm, void* data, size_t size, int ptrType, uint64_t offset, int fd,
                                  void** mhandle) {
  collIbComm* c = dataComm(comm);
  if (!c || !mhandle || !data || !size)
    return collSetError(collInvalidArgument, "ib regMrDmaBuf: bad comm, NULL argument or size 0");
  if (ptrType != COLL_PTR_CUDA)
    return collSetError(collInvalidArgument, "ib regMrDmaBuf: memory type %d; dma-bufs are GPU memory (COLL_PTR_CUDA)",
                        ptrType);
  if (fd < 0) return collSetError(collInvalidArgument, "ib regMrDmaBuf: bad dma-buf fd %d", fd);
  collIbHca* h = c->dev->hca;
  if (!collIbCfg.dmabuf)
    return collSetError(collInvalidUsage, "ib regMrDmaBuf: regMrDmaBuf not supported: dma-buf registration is off "
                        "(COLL_IB_DMABUF=0)");
  /* the condition getProperties puts COLL_PTR_DMABUF under */
  if (!collCudaDmaBufSupported())
    return collSetError(collInvalidUsage, "ib regMrDmaBuf: regMrDmaBuf not supported on %s: the CUDA driver exports "
                        "no dma-bufs in this process (not loaded, no cuMemGetHandleForAddressRange, or a GPU without "
                        "CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED)", c->dev->name);
  pthread_mutex_lock(&collIb.lock);
  int ok = ibDmaBufProbe(h), pe = h->dmabufErrno;
  pthread_mutex_unlock(&collIb.lock);
  if (!ok)
    return collSetError(collInvalidUsage, "ib regMrDmaBuf: regMrDmaBuf not supported on %s: %s", c->dev->name,
                        !collIb.v->regDmaBufMr ? "libibverbs has no ibv_reg_dmabuf_mr (rdma-core 34 or newer has it)"
                        : pe == ENOSYS ? "the kernel lacks dma-buf registration (ENOSYS)"
                                       : "its kernel driver does not take dma-bufs (EOPNOTSUPP)");
  collIbDmaBufReg* g = calloc(1, sizeof *g);
  if (!g) return collSetError(collSystemError, "ib regMrDmaBuf: out of memory");
  collResult_t fr = collCudaRdmaFlushOf(data, &g->flush);
  if (fr != collSuccess) {
    free(g);
    return collSetError(fr, "ib regMrDmaBuf: [%p, +%zu) on %s: %s", data, size, c->dev->name, collLastErrorMessage());
  }
  collRegEntry* e = &g->e;
  errno = 0;
  struct ibv_mr* mr = collIb.v->regDmaBufMr(h->pd, offset, size, (uint64_t)(uintptr_t)data, fd,
                                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!mr) {
    int er = errno ? errno : EINVAL;
    collCudaRdmaFlushRelease(&g->flush);
    free(g);
    return collSetError(er == EBADF ? collInvalidArgument : collSystemError,
                        "ib regMrDmaBuf: registering [%p, +%zu) (dma-buf fd %d, offset %llu) on %s failed: %s "
                        "(errno %d)%s", data, size, fd, (unsigned long long)offset, c->dev->name, strerror(er), er,
                        er == EBADF ? ": fd is not a dma-buf (or not open)"
                                    : "; the GPU or HCA driver or the kernel may lack dma-buf support for this memory "
                                      "(COLL_IB_DMABUF=0 keeps GPU data staged through host memory)");
  }
  e->start = (uintptr_t)data;
  e->end = (uintptr_t)data + size;
  e->access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IB_REG_DMABUF;
  e->handle = mr;
  e->refs = 1;
  *mhandle = e;
  return collSuccess;
}

static collResult_t ibIput(void* sendComm, const void* data, size_t size, void* mhandle,
                           unsigned long long remoteAddr, unsigned long long remoteKey, void** request) {
  (void)sendComm; (void)data; (void)size; (void)mhandle; (void)remoteAddr; (void)remoteKey;
  if (request) *request = NULL;
  return collSetError(collInvalidUsage, "ib: iput not supported yet");
}

/* iflush: host memory is visible once the completion arrived; GPU memory
 * (a regMrDmaBuf registration) is flushed at once through the CUDA driver
 * as its registration says (device/dmabuf.h: nothing for a GPU that orders
 * NIC writes itself), so the request is always NULL (done). */
static collResult_t ibIflush(void* recvComm, void* data, size_t size, void* mhandle, void** request) {
  (void)recvComm, (void)data;
  if (!request) return collSetError(collInvalidArgument, "ib iflush: request is NULL");
  *request = NULL;
  const collRegEntry* e = mhandle;
  if (!e || !(e->access & IB_REG_DMABUF) || !size) return collSuccess;
  return collCudaRdmaFlushRun(&((const collIbDmaBufReg*)e)->flush);
}

/* getPollFd: drains events, arms the comm's CQ, and returns the process's
 * wait fd (-1 for send comms, see ib.h). Work found right after arming wakes
 * the fd at once. */
static collResult_t ibGetPollFd(void* comm, int* fd) {
  if (!comm || !fd) return collSetError(collInvalidArgument, "ib getPollFd: NULL argument");
  uint32_t tag;
  memcpy(&tag, comm, sizeof tag);
  if (tag == IB_TAG_LISTEN) {
    collIbService(1);
    *fd = collIb.epfd;
    return collSuccess;
  }
  collIbComm* c = dataComm(comm);
  if (!c) return collSetError(collInvalidArgument, "ib getPollFd: not an ib comm");
  collIbService(1);
  int prog = 0;
  collIbArm(c, &prog);
  if (prog || c->err != collSuccess) {
    uint64_t one = 1;
    if (write(collIb.wakeFd, &one, sizeof one) < 0) { /* counter full: already readable */ }
  }
  *fd = c->isSend ? -1 : collIb.epfd;
  return collSuccess;
}

const collNet_t collNetIb = {
    .size = sizeof(collNet_t), .version = COLL_NET_VERSION, .name = "ib",
    .init = ibInit, .devices = ibDevices, .getProperties = ibGetProperties,
    .listen = collIbListenFn, .connect = collIbConnectFn, .accept = collIbAcceptFn,
    .regMr = ibRegMr, .deregMr = ibDeregMr, .regMrDmaBuf = ibRegMrDmaBuf,
    .isend = collIbIsend, .irecv = collIbIrecv, .test = collIbTest,
    .iput = ibIput, .iflush = ibIflush, .getPollFd = ibGetPollFd,
    .closeSend = collIbCloseComm, .closeRecv = collIbCloseComm, .closeListen = collIbCloseListenFn,
    .fini = ibFini,
};
