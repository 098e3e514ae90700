/* reg.c - memory registration owned by the engine (reg.h): a registration
 * cache per communicator and transport slot, with every hit checked against
 * the page frames the registration pinned. */
#include "engine/reg.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/cuda_loader.h"
#include "device/dmabuf.h"
#include "engine/regcache.h"
#include "misc/log.h"
#include "misc/param.h"

/* Messages this small go through the transports' own bounce buffers (ib's
 * eager path copies up to COLL_IB_EAGER_BYTES): nothing to register. */
#define COLL_REG_MIN_BYTES 16385
#define COLL_REG_ENTRIES 256 /* cached registrations per transport slot */

#define PM_PFN_MASK ((1ull << 55) - 1)
#define PM_PRESENT (1ull << 63)

typedef struct {
  void* mh;         /* the transport's memory handle */
  uintptr_t start;  /* registered range (page aligned) */
  size_t npages;
  uint64_t* frames; /* [npages] pagemap entries (frame | present); NULL: unchecked */
  int fresh;        /* registered by the get that returns it */
  int dev;          /* device memory (the cache it belongs to) */
} regHandle;

typedef struct {
  collComm_t comm;
  int slot;
  int dev;     /* 1: the cache of device memory (COLL_MEM_DEVICE) */
  void* tcomm; /* a live connection of the slot: regMr/deregMr go through it */
} regCtx;

/* Host and device memory of a slot have caches of their own ([slot][dev]):
 * an entry of one type is never found for the other. */
struct collEngineReg {
  int mode; /* 0 per message, 1 checked, 2 unchecked */
  int warned;
  int ptrSupport[COLL_NET_SLOTS]; /* of the slot's device (getProperties), 0: not asked yet */
  unsigned long long dmabufRegs, cudaRegs; /* device registrations made through regMrDmaBuf / regMr(CUDA) */
  collRegCache* cache[COLL_NET_SLOTS][2];
  regCtx ctx[COLL_NET_SLOTS][2];
};

static pthread_once_t pmOnce = PTHREAD_ONCE_INIT;
static int pmFd = -1;
static int pmReadable;
static uintptr_t pmPage = 4096;

static int readFrames(uintptr_t start, size_t npages, uint64_t* out) {
  size_t want = npages * sizeof(uint64_t), got = 0;
  off_t off = (off_t)(start / pmPage * sizeof(uint64_t));
  while (got < want) {
    ssize_t n = pread(pmFd, (char*)out + got, want - got, off + (off_t)got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    got += (size_t)n;
  }
  for (size_t i = 0; i < npages; i++) out[i] &= PM_PFN_MASK | PM_PRESENT;
  return 0;
}

static void pmInit(void) {
  long p = sysconf(_SC_PAGESIZE);
  if (p > 0) pmPage = (uintptr_t)p;
  pmFd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (pmFd < 0) return;
  static volatile char probe[1];
  probe[0] = 1; /* present */
  uint64_t v = 0;
  pmReadable = readFrames((uintptr_t)probe, 1, &v) == 0 && (v & PM_PRESENT) && (v & PM_PFN_MASK) != 0;
}

int collEngineRegFramesReadable(void) {
  pthread_once(&pmOnce, pmInit);
  return pmReadable;
}

/* The CUDA allocation holding ptr: [*base, *base + *size). */
static collResult_t devAllocation(const void* ptr, uintptr_t* base, size_t* size) {
#ifdef COLL_HAVE_CUDA
  CUdeviceptr b = 0;
  CUresult cr = COLL_CU(cuMemGetAddressRange)(&b, size, (CUdeviceptr)(uintptr_t)ptr);
  if (cr != CUDA_SUCCESS)
    return collCudaError(cr, "engine: the GPU allocation of a buffer to register (cuMemGetAddressRange)");
  *base = (uintptr_t)b;
  return collSuccess;
#else
  (void)ptr, (void)base, (void)size;
  return collSetError(collInvalidUsage, "engine: device memory in a build without CUDA");
#endif
}

/* Registers device memory [addr, addr + len) on the slot's transport:
 * with COLL_PTR_DMABUF through regMrDmaBuf and a dma-buf fd of the range
 * from the CUDA driver (collCudaDmaBufFd; closed here once registered),
 * else (or where the driver exports no dma-buf) regMr with COLL_PTR_CUDA
 * (the nv_peer_mem way). */
static collResult_t regDevice(collComm_t comm, int slot, void* tcomm, void* addr, size_t len, void** mh) {
  struct collEngineReg* R = comm->reg;
  const collNet_t* net = comm->nets[slot];
  if (!R->ptrSupport[slot]) {
    collNetProperties_t p;
    memset(&p, 0, sizeof p);
    collResult_t r = net->getProperties(comm->netDev[slot], &p);
    if (r != collSuccess) return r;
    R->ptrSupport[slot] = p.ptrSupport | COLL_PTR_HOST;
  }
  /* the cache asks for whole pages; the allocation may end inside the last one */
  uintptr_t base = 0;
  size_t asz = 0;
  collResult_t ar = devAllocation(addr, &base, &asz);
  if (ar != collSuccess) return ar;
  if ((uintptr_t)addr + len > base + asz) len = base + asz - (uintptr_t)addr;
  if (!(R->ptrSupport[slot] & COLL_PTR_DMABUF) || !collCudaDmaBufSupported()) {
    collResult_t r = net->regMr(tcomm, addr, len, COLL_PTR_CUDA, mh);
    if (r == collSuccess) R->cudaRegs++;
    return r;
  }
  int fd = -1;
  uint64_t off = 0;
  collResult_t r = collCudaDmaBufFd(addr, len, &fd, &off);
  if (r != collSuccess) return r;
  r = net->regMrDmaBuf(tcomm, addr, len, COLL_PTR_CUDA, off, fd, mh);
  close(fd);
  if (r == collSuccess) R->dmabufRegs++;
  return r;
}

static int regCb(void* ctx, void* addr, size_t len, int access, void** handle) {
  (void)access;
  regCtx* x = ctx;
  regHandle* h = calloc(1, sizeof *h);
  if (!h) return ENOMEM;
  const collNet_t* net = x->comm->nets[x->slot];
  collResult_t r = x->dev ? regDevice(x->comm, x->slot, x->tcomm, addr, len, &h->mh)
                          : net->regMr(x->tcomm, addr, len, COLL_PTR_HOST, &h->mh);
  if (r != collSuccess) {
    free(h);
    return EIO;
  }
  h->start = (uintptr_t)addr;
  h->npages = len / pmPage;
  h->fresh = 1;
  h->dev = x->dev;
  if (x->comm->reg->mode == 1 && !x->dev) { /* the frames the registration pinned (host pages only) */
    h->frames = malloc(h->npages * sizeof(uint64_t));
    if (!h->frames || readFrames(h->start, h->npages, h->frames) != 0) {
      net->deregMr(x->tcomm, h->mh);
      free(h->frames);
      free(h);
      return EIO;
    }
  }
  *handle = h;
  return 0;
}

static void deregCb(void* ctx, void* handle) {
  regCtx* x = ctx;
  regHandle* h = handle;
  if (x->comm->nets[x->slot]->deregMr(x->tcomm, h->mh) != collSuccess) collClearError();
  free(h->frames);
  free(h);
}

/* Does [ptr, ptr + bytes) still map the pages entry h pinned? */
static int framesMatch(const regHandle* h, const void* ptr, size_t bytes) {
  uintptr_t s = (uintptr_t)ptr & ~(pmPage - 1), t = ((uintptr_t)ptr + bytes + pmPage - 1) & ~(pmPage - 1);
  size_t first = (s - h->start) / pmPage, n = (t - s) / pmPage;
  uint64_t buf[512];
  for (size_t i = 0; i < n; i += 512) {
    size_t k = n - i < 512 ? n - i : 512;
    if (readFrames(s + i * pmPage, k, buf) != 0) return 0;
    if (memcmp(buf, h->frames + first + i, k * sizeof(uint64_t)) != 0) return 0;
  }
  return 1;
}

static struct collEngineReg* regState(collComm_t comm) {
  if (comm->reg) return comm->reg;
  struct collEngineReg* R = calloc(1, sizeof *R);
  if (!R) return NULL;
  int64_t want = collParamInt(COLL_PARAM_REG_CACHE);
  R->mode = want == 0 ? 0 : want > 0 ? 2 : collEngineRegFramesReadable() ? 1 : 0;
  if (want < 0 && !R->mode) /* the default degraded: say it once per process, without COLL_DEBUG */
    COLL_WARN_ONCE(COLL_SUB_NET, "rank %d: registration cache off: /proc/self/pagemap gives this process no page "
                   "frames (it needs CAP_SYS_ADMIN, which root normally has), so the default COLL_REG_CACHE=-1 "
                   "cannot check reuse; messages above 16 KiB are registered per message (slower); "
                   "COLL_REG_CACHE=0 chooses that without this warning, COLL_REG_CACHE=1 caches unchecked (safe "
                   "only if buffers are never freed and reallocated while the communicator lives)", comm->rank);
  comm->reg = R;
  return R;
}

void* collEngineReg(collComm_t comm, int peer, void* tcomm, const void* ptr, size_t bytes, int mem, void** token) {
  int slot = comm->peerKind[peer], dev = mem != COLL_MEM_HOST;
  if (*token) return collEngineRegHandle(*token);
  if (dev && !tcomm) {
    collSetError(collInternalError, "engine: registering device memory for rank %d without its connection", peer);
    return NULL;
  }
  if (!dev && (!comm->netReg[slot] || bytes < COLL_REG_MIN_BYTES || !tcomm)) return NULL;
  struct collEngineReg* R = regState(comm);
  if (!R) {
    if (dev) collSetError(collSystemError, "engine: out of memory for the registration cache");
    return NULL;
  }
  pthread_once(&pmOnce, pmInit);
  if (!R->cache[slot][dev]) {
    R->ctx[slot][dev] = (regCtx){comm, slot, dev, tcomm};
    /* device memory: cached unless COLL_REG_CACHE=0 (no page frames to check; cuMemFree of a registered
     * range is what the cache cannot see, as for host memory in mode 2) */
    int entries = (dev ? R->mode || collParamInt(COLL_PARAM_REG_CACHE) != 0 : R->mode) ? COLL_REG_ENTRIES : 0;
    R->cache[slot][dev] = collRegCacheCreate(regCb, deregCb, &R->ctx[slot][dev], entries);
    if (!R->cache[slot][dev]) {
      if (dev) collSetError(collSystemError, "engine: out of memory for the registration cache");
      return NULL;
    }
  }
  R->ctx[slot][dev].tcomm = tcomm;
  if (dev) { /* the whole allocation, registered once (a user buffer, the engine's scratch) */
    uintptr_t base = 0;
    size_t asz = 0;
    if (devAllocation(ptr, &base, &asz) != collSuccess) {
      collSetError(collSystemError, "rank %d: registering GPU memory at %p for rank %d: %s", comm->rank, ptr, peer,
                   collLastErrorMessage());
      return NULL;
    }
    ptr = (const void*)base;
    bytes = asz;
  }
  collRegEntry* e = NULL;
  for (int attempt = 0; attempt < 2; attempt++) {
    if (collRegCacheGet(R->cache[slot][dev], ptr, bytes, 1, &e) != 0) {
      if (dev) { /* a device buffer cannot fall back to the transport's host path: the post fails */
        collSetError(collSystemError, "rank %d: registering %zu bytes of GPU memory at %p with %s for rank %d failed: %s", comm->rank,
                     bytes, ptr, comm->nets[slot]->name, peer, collLastErrorMessage());
        return NULL;
      }
      if (!R->warned++)
        COLL_INFO(COLL_SUB_NET, "rank %d: registering %zu bytes for rank %d failed (%s); the transport registers "
                  "its buffers itself", comm->rank, bytes, peer, collLastErrorMessage());
      collClearError();
      return NULL;
    }
    regHandle* h = e->handle;
    if (h->fresh || !h->frames || framesMatch(h, ptr, bytes)) break;
    collRegCacheInvalidate(R->cache[slot][dev], e); /* freed and mapped again since: register anew */
    e = NULL;
  }
  if (!e) return NULL;
  ((regHandle*)e->handle)->fresh = 0;
  *token = e;
  return ((regHandle*)e->handle)->mh;
}

void* collEngineRegHandle(void* token) {
  return token ? ((regHandle*)((collRegEntry*)token)->handle)->mh : NULL;
}

void collEngineRegDone(collComm_t comm, int peer, void** token) {
  if (!*token) return;
  struct collEngineReg* R = comm->reg;
  collRegEntry* e = *token;
  collRegCachePut(R->cache[comm->peerKind[peer]][((regHandle*)e->handle)->dev], e);
  *token = NULL;
}

void collEngineRegForget(collComm_t comm, const void* ptr, size_t bytes) {
  struct collEngineReg* R = comm->reg;
  if (!R) return;
  for (int k = 0; k < COLL_NET_SLOTS; k++)
    for (int d = 0; d < 2; d++) collRegCacheForget(R->cache[k][d], ptr, bytes);
}

void collEngineRegFree(collComm_t comm) {
  struct collEngineReg* R = comm->reg;
  if (!R) return;
  collEngineRegStats s;
  collEngineRegGetStats(comm, &s);
  static const char* const modes[] = {"per message", "cached, checked against page frames", "cached unchecked"};
  COLL_INFO(COLL_SUB_NET, "rank %d: registrations (%s): %llu hits, %llu registered, %llu invalidated, %llu evicted",
            comm->rank, modes[s.mode], s.hits, s.misses, s.invalidations, s.evictions);
  for (int k = 0; k < COLL_NET_SLOTS; k++)
    for (int d = 0; d < 2; d++) collRegCacheDestroy(R->cache[k][d]);
  free(R);
  comm->reg = NULL;
}

void collEngineRegGetStats(collComm_t comm, collEngineRegStats* st) {
  memset(st, 0, sizeof *st);
  struct collEngineReg* R = comm->reg;
  if (!R) return;
  st->mode = R->mode;
  st->dmabufRegs = R->dmabufRegs;
  st->cudaRegs = R->cudaRegs;
  for (int k = 0; k < 2 * COLL_NET_SLOTS; k++) {
    collRegCache* c = R->cache[k / 2][k % 2];
    if (!c) continue;
    collRegStats s;
    collRegCacheStats(c, &s);
    st->hits += s.hits;
    st->misses += s.misses;
    st->invalidations += s.invalidations;
    st->evictions += s.evictions;
    st->live += s.live;
  }
}
