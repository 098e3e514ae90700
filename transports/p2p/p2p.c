/*
 * p2p.c - the collNet_t table of the CUDA P2P transport and its small
 * operations (p2p.h has the design; p2p_setup.c connections, p2p_ring.c the
 * data path). Built without CUDA, every operation says so.
 */
#include "transports/p2p/p2p.h"

#include <stdio.h>
#include <string.h>

#include "device/cuda_loader.h"
#include "device/devexec.h"
#include "misc/log.h"
#include "misc/param.h"
#include "transports/p2p/p2p_internal.h"

#ifdef COLL_HAVE_CUDA
static int p2pMrToken;

/* init: the driver must load and show at least one GPU. */
static collResult_t p2pInit(const collNetCallbacks_t* cb) {
  (void)cb;
  if (collCudaLoad() != collSuccess)
    return collSetError(collSystemError, "p2p transport unavailable: %s", collCudaLoadMessage());
  int n = collDevCount();
  if (n <= 0) return collSetError(collSystemError, "p2p transport unavailable: the CUDA driver sees no GPU");
  COLL_INFO(COLL_SUB_NET, "p2p: %d GPU(s); %d slots x %lld KiB of GPU memory per connection (COLL_P2P_BUFFSIZE)",
            n, COLL_P2P_NSLOTS, (long long)(collParamInt(COLL_PARAM_P2P_BUFFSIZE) >> 10) / COLL_P2P_NSLOTS);
  return collSuccess;
}

static collResult_t p2pDevices(int* ndev) {
  if (!ndev) return collSetError(collInvalidArgument, "p2p devices: ndev is NULL");
  *ndev = collDevCount();
  return collSuccess;
}

/* getProperties: one device per GPU, named by its PCI bus id. */
static collResult_t p2pGetProperties(int dev, collNetProperties_t* props) {
  int n = collDevCount();
  if (!props || dev < 0 || dev >= n)
    return collSetError(collInvalidArgument, "p2p getProperties: bad device %d (of %d) or NULL props", dev, n);
  memset(props, 0, sizeof *props);
  char bus[32] = "";
  CUdevice d;
  if (COLL_CU(cuDeviceGet)(&d, dev) == CUDA_SUCCESS) COLL_CU(cuDeviceGetPCIBusId)(bus, (int)sizeof bus, d);
  snprintf(props->name, sizeof props->name, "cuda%d", dev);
  if (bus[0]) {
    for (char* p = bus; *p; p++)
      if (*p >= 'A' && *p <= 'F') *p = (char)(*p - 'A' + 'a'); /* sysfs spells it in lower case */
    snprintf(props->pciPath, sizeof props->pciPath, "/sys/bus/pci/devices/%s", bus);
  }
  props->ptrSupport = COLL_PTR_CUDA;
  props->speedGbps = 0; /* the topology prices NVLink and PCIe paths */
  props->latencyUs = 10.0;
  props->maxMessage = SIZE_MAX;
  return collSuccess;
}

static collResult_t p2pRegMr(void* comm, void* data, size_t size, int ptrType, void** mhandle) {
  (void)comm, (void)data, (void)size;
  if (!mhandle) return collSetError(collInvalidArgument, "p2p regMr: mhandle is NULL");
  if (!(ptrType & COLL_PTR_CUDA))
    return collSetError(collInvalidArgument, "p2p regMr: memory type %d not supported (GPU memory only)", ptrType);
  *mhandle = &p2pMrToken;
  return collSuccess;
}
static collResult_t p2pDeregMr(void* comm, void* mhandle) {
  (void)comm, (void)mhandle;
  return collSuccess;
}

static collResult_t p2pIsend(void* sendComm, const void* data, size_t size, uint64_t tag, void* mhandle,
                             void** request) {
  (void)mhandle;
  return p2pPost(sendComm, 1, (CUdeviceptr)(uintptr_t)data, size, tag, request);
}
static collResult_t p2pIrecv(void* recvComm, void* data, size_t size, uint64_t tag, void* mhandle, void** request) {
  (void)mhandle, (void)tag;
  return p2pPost(recvComm, 0, (CUdeviceptr)(uintptr_t)data, size, 0, request);
}

static collResult_t p2pIflush(void* recvComm, void* data, size_t size, void* mhandle, void** request) {
  (void)recvComm, (void)data, (void)size, (void)mhandle;
  if (!request) return collSetError(collInvalidArgument, "p2p iflush: request is NULL");
  *request = NULL; /* a completed receive's copy has finished */
  return collSuccess;
}

static collResult_t p2pGetPollFd(void* comm, int* fd) {
  if (!comm || !fd) return collSetError(collInvalidArgument, "p2p getPollFd: NULL argument");
  *fd = -1; /* GPU copies complete without a descriptor: the caller polls test */
  return collSuccess;
}

void collP2pGetStats(const void* comm, collP2pStats* st) {
  const p2pComm* c = comm;
  memset(st, 0, sizeof *st);
  if (!c) return;
  st->msgs = c->msgs;
  st->bytes = c->bytes;
  st->sameProcess = c->sameProcess;
  st->device = c->dev;
  st->peerPid = c->peerPid;
  st->slotBytes = c->slotBytes;
}

#else /* built without CUDA */

static collResult_t p2pUnavailable(const char* op) {
  return collSetError(collInvalidUsage, "p2p %s: libcoll was built without CUDA support (COLL_CUDA=OFF)", op);
}
static collResult_t p2pInit(const collNetCallbacks_t* cb) {
  (void)cb;
  collCudaLoad();
  return collSetError(collInvalidUsage, "p2p transport unavailable: %s", collCudaLoadMessage());
}
static collResult_t p2pDevices(int* ndev) {
  if (ndev) *ndev = 0;
  return collSuccess;
}
static collResult_t p2pGetProperties(int dev, collNetProperties_t* props) {
  (void)dev, (void)props;
  return p2pUnavailable("getProperties");
}
static collResult_t p2pListen(int dev, void* handle, void** listenComm) {
  (void)dev, (void)handle;
  if (listenComm) *listenComm = NULL;
  return p2pUnavailable("listen");
}
static collResult_t p2pConnect(int dev, const void* handle, void** sendComm) {
  (void)dev, (void)handle;
  if (sendComm) *sendComm = NULL;
  return p2pUnavailable("connect");
}
static collResult_t p2pAccept(void* listenComm, void** recvComm) {
  (void)listenComm;
  if (recvComm) *recvComm = NULL;
  return p2pUnavailable("accept");
}
static collResult_t p2pRegMr(void* comm, void* data, size_t size, int ptrType, void** mhandle) {
  (void)comm, (void)data, (void)size, (void)ptrType, (void)mhandle;
  return p2pUnavailable("regMr");
}
static collResult_t p2pDeregMr(void* comm, void* mhandle) {
  (void)comm, (void)mhandle;
  return collSuccess;
}
static collResult_t p2pIsend(void* sendComm, const void* data, size_t size, uint64_t tag, void* mhandle,
                             void** request) {
  (void)sendComm, (void)data, (void)size, (void)tag, (void)mhandle;
  if (request) *request = NULL;
  return p2pUnavailable("isend");
}
static collResult_t p2pIrecv(void* recvComm, void* data, size_t size, uint64_t tag, void* mhandle, void** request) {
  (void)recvComm, (void)data, (void)size, (void)tag, (void)mhandle;
  if (request) *request = NULL;
  return p2pUnavailable("irecv");
}
static collResult_t p2pTest(void* request, int* done, size_t* size, uint64_t* tag) {
  (void)request, (void)size, (void)tag;
  if (done) *done = 0;
  return p2pUnavailable("test");
}
static collResult_t p2pIflush(void* recvComm, void* data, size_t size, void* mhandle, void** request) {
  (void)recvComm, (void)data, (void)size, (void)mhandle;
  if (request) *request = NULL;
  return p2pUnavailable("iflush");
}
static collResult_t p2pGetPollFd(void* comm, int* fd) {
  (void)comm;
  if (fd) *fd = -1;
  return collSuccess;
}
static collResult_t p2pCloseComm(void* comm) {
  (void)comm;
  return collSuccess;
}
static collResult_t p2pCloseListen(void* listenComm) {
  (void)listenComm;
  return collSuccess;
}
void collP2pGetStats(const void* comm, collP2pStats* st) {
  (void)comm;
  memset(st, 0, sizeof *st);
}
#endif

/* iput: one-sided writes are not offered. */

/* regMrDmaBuf: p2p does not take dma-bufs (peers map GPU memory through
 * CUDA IPC; nothing is registered with a NIC). */
static collResult_t p2pRegMrDmaBuf(void* comm, void* data, size_t size, int ptrType, uint64_t offset, int fd,
                                   void** mhandle) {
  (void)comm; (void)data; (void)size; (void)ptrType; (void)offset; (void)fd; (void)mhandle;
  return collSetError(collInvalidUsage, "p2p: regMrDmaBuf not supported (GPU memory goes through CUDA IPC)");
}
static collResult_t p2pIput(void* sendComm, const void* data, size_t size, void* mhandle,
                            unsigned long long remoteAddr, unsigned long long remoteKey, void** request) {
  (void)sendComm, (void)data, (void)size, (void)mhandle, (void)remoteAddr, (void)remoteKey;
  if (request) *request = NULL;
  return collSetError(collInvalidUsage, "p2p: iput not supported (no one-sided writes)");
}

static collResult_t p2pFini(void) { return collSuccess; }

const collNet_t collNetP2p = {
    .size = sizeof(collNet_t), .version = COLL_NET_VERSION, .name = "p2p",
    .init = p2pInit, .devices = p2pDevices, .getProperties = p2pGetProperties,
    .listen = p2pListen, .connect = p2pConnect, .accept = p2pAccept,
    .regMr = p2pRegMr, .deregMr = p2pDeregMr, .regMrDmaBuf = p2pRegMrDmaBuf,
    .isend = p2pIsend, .irecv = p2pIrecv, .test = p2pTest,
    .iput = p2pIput, .iflush = p2pIflush, .getPollFd = p2pGetPollFd,
    .closeSend = p2pCloseComm, .closeRecv = p2pCloseComm, .closeListen = p2pCloseListen,
    .fini = p2pFini,
};
