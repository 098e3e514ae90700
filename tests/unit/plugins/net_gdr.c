/*
 * net_gdr.c - the example transport (net_example.c, included whole) as a
 * NIC that reads and writes GPU memory: properties say COLL_PTR_HOST |
 * COLL_PTR_CUDA | COLL_PTR_DMABUF, regMrDmaBuf maps the dma-buf it is given
 * (the fake CUDA driver's is the allocation's memfd, tests/fakecuda) and
 * isend/irecv move the bytes of a buffer registered that way through that
 * mapping, as a NIC's DMA would: the process's own address of GPU memory
 * (PROT_NONE on the fake) is never touched. A device buffer posted without
 * such a handle is used as is, so a host touch of GPU memory crashes here
 * as it would on a GPU. For tests/cases/i16_device_nodes.c:
 *   NETGDR_NO_CUDA=1    the properties say COLL_PTR_HOST only (a NIC without
 *                       GPUDirect)
 *   NETGDR_NO_DMABUF=1  COLL_PTR_HOST | COLL_PTR_CUDA: regMr(COLL_PTR_CUDA)
 *                       is "not supported" (no peer-memory module here)
 * Counters (exported): regMrDmaBuf registrations, iflush calls, bytes moved
 * through dma-buf mappings.
 *
 * SPDX-License-Identifier: BSD-3-Clause
 */
#define collNetPlugin_v2 collNetGdrInner_v2 /* the example's own table: not what this plugin exports */
#define collNetPlugin_v3 collNetGdrInner_v3
#include "net_example.c"
#undef collNetPlugin_v2
#undef collNetPlugin_v3

#include <sys/mman.h>

__attribute__((visibility("default"))) uint64_t collNetGdrDmaBufRegs, collNetGdrFlushes, collNetGdrDevBytes;

#define GDR_MAGIC 0x4744524d52ull /* "RMRDG" */

typedef struct {
  uint64_t magic;
  char* base;   /* data as the process sees it */
  char* alias;  /* the same bytes through the dma-buf mapping */
  char* map;    /* the mapping (page aligned) */
  size_t size, mapLen;
} gdrMr;

static int gdrEnv(const char* name) {
  const char* v = getenv(name);
  return v && atoi(v) != 0;
}

static collResult_t gdrProps(int dev, collNetProperties_t* p) {
  collResult_t r = exProps(dev, p);
  if (r != collSuccess) return r;
  snprintf(p->name, sizeof p->name, "gdr0");
  p->ptrSupport = COLL_PTR_HOST;
  if (!gdrEnv("NETGDR_NO_CUDA")) p->ptrSupport |= COLL_PTR_CUDA | (gdrEnv("NETGDR_NO_DMABUF") ? 0 : COLL_PTR_DMABUF);
  return collSuccess;
}

static collResult_t gdrRegMr(void* comm, void* data, size_t size, int type, void** mh) {
  if (type & COLL_PTR_CUDA) return FAIL(collInvalidUsage, "gdr regMr: GPU memory only as a dma-buf (regMrDmaBuf)");
  return exRegMr(comm, data, size, type, mh);
}

static collResult_t gdrRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                                   void** mh) {
  (void)comm;
  if (gdrEnv("NETGDR_NO_CUDA") || gdrEnv("NETGDR_NO_DMABUF"))
    return FAIL(collInvalidUsage, "gdr regMrDmaBuf: this device takes no dma-buf");
  if (type != COLL_PTR_CUDA || fd < 0 || size == 0)
    return FAIL(collInvalidArgument, "gdr regMrDmaBuf: bad arguments (type %d, fd %d, %zu bytes)", type, fd, size);
  size_t pg = (size_t)sysconf(_SC_PAGESIZE), skip = (size_t)(offset % pg);
  size_t len = size + skip;
  void* m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)(offset - skip));
  if (m == MAP_FAILED)
    return FAIL(collSystemError, "gdr regMrDmaBuf: mapping %zu bytes of dma-buf fd %d at offset %llu: %s", size, fd,
                (unsigned long long)offset, strerror(errno));
  gdrMr* g = calloc(1, sizeof *g);
  if (!g) {
    munmap(m, len);
    return FAIL(collSystemError, "gdr regMrDmaBuf: out of memory");
  }
  *g = (gdrMr){GDR_MAGIC, data, (char*)m + skip, m, size, len};
  __atomic_add_fetch(&collNetGdrDmaBufRegs, 1, __ATOMIC_RELAXED);
  *mh = g;
  return collSuccess;
}

static collResult_t gdrDeregMr(void* comm, void* mh) {
  gdrMr* g = mh;
  if (!g || g == (void*)&token) return exDeregMr(comm, mh);
  munmap(g->map, g->mapLen);
  free(g);
  return collSuccess;
}

/* Where the bytes of [data, data + size) are reached: through the dma-buf
 * mapping of mh, else data itself. */
static collResult_t gdrAddr(void* data, size_t size, void* mh, char** out) {
  gdrMr* g = mh;
  *out = data;
  if (!g || g == (void*)&token) return collSuccess;
  if (g->magic != GDR_MAGIC || (char*)data < g->base || (char*)data + size > g->base + g->size)
    return FAIL(collInvalidArgument, "gdr: %zu bytes at %p outside the registration of %zu bytes at %p", size, data,
                g->size, (void*)g->base);
  *out = g->alias + ((char*)data - g->base);
  __atomic_add_fetch(&collNetGdrDevBytes, (uint64_t)size, __ATOMIC_RELAXED);
  return collSuccess;
}

static collResult_t gdrIsend(void* sc, const void* data, size_t size, uint64_t tag, void* mh, void** req) {
  char* p;
  *req = NULL;
  collResult_t r = gdrAddr((void*)(uintptr_t)data, size, mh, &p);
  return r != collSuccess ? r : exIsend(sc, p, size, tag, NULL, req);
}

static collResult_t gdrIrecv(void* rc, void* data, size_t size, uint64_t tag, void* mh, void** req) {
  char* p;
  *req = NULL;
  collResult_t r = gdrAddr(data, size, mh, &p);
  return r != collSuccess ? r : exIrecv(rc, p, size, tag, NULL, req);
}

static collResult_t gdrIflush(void* rc, void* d, size_t s, void* mh, void** req) {
  __atomic_add_fetch(&collNetGdrFlushes, 1, __ATOMIC_RELAXED);
  return exIflush(rc, d, s, mh, req);
}

__attribute__((visibility("default"))) const collNet_v3_t collNetPlugin_v3 = {
    .size = sizeof(collNet_v3_t), .version = 3, .name = "gdr",
    .init = exInit, .devices = exDevices, .getProperties = gdrProps,
    .listen = exListen, .connect = exConnect, .accept = exAccept,
    .regMr = gdrRegMr, .deregMr = gdrDeregMr, .regMrDmaBuf = gdrRegMrDmaBuf,
    .isend = gdrIsend, .irecv = gdrIrecv, .test = exTest,
    .iput = exIput, .iflush = gdrIflush, .getPollFd = exPollFd,
    .closeSend = exClose, .closeRecv = exClose, .closeListen = exCloseListen,
    .fini = exFini,
};
