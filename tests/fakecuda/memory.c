/*
 * memory.c - device memory the host cannot touch, pinned host memory, the
 * region table and pointer attributes (fakecuda.h).
 *
 * cuMemAlloc: a memfd mapped twice, PROT_NONE at the address coll gets
 * (a host dereference faults, as on a GPU) and read-write where the
 * fake's workers reach it (fkTranslate). The region keeps the exact size
 * asked for, so a copy or kernel that runs past it is a fault even inside
 * the last page. cuMemHostAlloc: ordinary host memory, registered as pinned
 * (the device pointer is the host pointer, as with unified addressing).
 * cuMemGetHandleForAddressRange exports a whole cuMemAlloc allocation as a
 * "dma-buf": a dup of its memfd, so whoever maps it (the fake HCA,
 * tests/unit/ibfake.c) sees the device memory.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fakecuda.h"

pthread_rwlock_t fkRegLock = PTHREAD_RWLOCK_INITIALIZER;
static fkRegion* fkRegs;
static int fkNRegs, fkCapRegs;
static atomic_ullong fkNextId = 1;
static size_t fkUsed[FK_MAX_DEVS];
static size_t fkPinned; /* bytes of cuMemHostAlloc held (FAKECUDA_PINNED_KB), under fkRegLock */

static size_t fkPages(size_t n) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  return (n + pg - 1) / pg * pg;
}

int fkRegionAdd(const fkRegion* r) {
  if (fkNRegs == fkCapRegs) {
    int cap = fkCapRegs ? 2 * fkCapRegs : 64;
    fkRegion* p = realloc(fkRegs, (size_t)cap * sizeof *p);
    if (!p) return -1;
    fkRegs = p, fkCapRegs = cap;
  }
  fkRegs[fkNRegs] = *r;
  fkRegs[fkNRegs].id = atomic_fetch_add(&fkNextId, 1);
  fkNRegs++;
  return 0;
}

fkRegion* fkRegionFind(uintptr_t p) {
  for (int i = 0; i < fkNRegs; i++) {
    fkRegion* r = &fkRegs[i];
    if (p >= r->base && p - r->base < (r->size ? r->size : 1)) return r;
  }
  return NULL;
}

int fkRegionRemove(uintptr_t base, fkRegion* out) {
  for (int i = 0; i < fkNRegs; i++)
    if (fkRegs[i].base == base) {
      if (out) *out = fkRegs[i];
      fkRegs[i] = fkRegs[--fkNRegs];
      return 0;
    }
  return -1;
}

void* fkTranslate(uintptr_t p, size_t n, int dev, int write, int hostOk) {
  fkRegion* r = fkRegionFind(p);
  if (!r) return hostOk ? (void*)p : NULL;
  if (n > r->size - (p - r->base)) return NULL; /* runs past the allocation */
  if (r->kind == FK_MEM_VMM) {
    unsigned m = write ? r->writeMask : r->readMask;
    if (dev < 0 || !(m & (1u << dev))) return NULL;
  } else if (r->kind == FK_MEM_DEVICE && !hostOk && r->dev != dev) {
    return NULL; /* a kernel on another GPU: no peer access is enabled */
  }
  return r->alias + (p - r->base);
}

CUresult fk_cuMemAlloc(CUdeviceptr* dptr, size_t bytes) {
  FK_ENTER("cuMemAlloc");
  if (!dptr) return CUDA_ERROR_INVALID_VALUE;
  *dptr = 0;
  int dev = fkCurrentDev();
  if (dev < 0) return fkFail(CUDA_ERROR_INVALID_CONTEXT, "cuMemAlloc without a current context");
  if (bytes == 0) return fkFail(CUDA_ERROR_INVALID_VALUE, "cuMemAlloc of 0 bytes");
  size_t map = fkPages(bytes);
  pthread_rwlock_wrlock(&fkRegLock);
  if (fkUsed[dev] + map > fkCfg.memBytes) {
    pthread_rwlock_unlock(&fkRegLock);
    return fkFail(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc of %zu bytes: FAKECUDA_MEM_MB exhausted", bytes);
  }
  int fd = memfd_create("fakecuda-mem", MFD_CLOEXEC);
  void *dv = MAP_FAILED, *al = MAP_FAILED;
  if (fd >= 0 && ftruncate(fd, (off_t)map) == 0) {
    dv = mmap(NULL, map, PROT_NONE, MAP_SHARED, fd, 0);
    al = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  fkRegion r = {(uintptr_t)dv, bytes, al, FK_MEM_DEVICE, dev, 0, 0, NULL, 0, fd}; /* fd: kept for dma-buf exports */
  if (dv == MAP_FAILED || al == MAP_FAILED || fkRegionAdd(&r) != 0) {
    if (dv != MAP_FAILED) munmap(dv, map);
    if (al != MAP_FAILED) munmap(al, map);
    if (fd >= 0) close(fd);
    pthread_rwlock_unlock(&fkRegLock);
    return fkFail(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc of %zu bytes: %s", bytes, strerror(errno));
  }
  fkUsed[dev] += map;
  pthread_rwlock_unlock(&fkRegLock);
  *dptr = (CUdeviceptr)(uintptr_t)dv;
  return CUDA_SUCCESS;
}

CUresult fk_cuMemFree(CUdeviceptr d) {
  FK_ENTER("cuMemFree");
  if (!d) return CUDA_SUCCESS;
  pthread_rwlock_rdlock(&fkRegLock);
  fkRegion* f = fkRegionFind((uintptr_t)d);
  int ok = f && f->base == (uintptr_t)d && f->kind == FK_MEM_DEVICE, dev = ok ? f->dev : -1;
  pthread_rwlock_unlock(&fkRegLock);
  if (!ok) return fkFail(CUDA_ERROR_INVALID_VALUE, "cuMemFree(%p): not the start of a cuMemAlloc allocation", (void*)d);
  fkSyncDevice(dev, "cuMemFree"); /* as cudaFree: pending work on the device ends first */
  fkRegion r;
  pthread_rwlock_wrlock(&fkRegLock);
  int gone = fkRegionRemove((uintptr_t)d, &r);
  if (gone == 0) fkUsed[r.dev] -= fkPages(r.size);
  pthread_rwlock_unlock(&fkRegLock);
  if (gone != 0) return CUDA_ERROR_INVALID_VALUE; /* freed twice at once */
  munmap((void*)r.base, fkPages(r.size));
  munmap(r.alias, fkPages(r.size));
  close(r.fd); /* dma-bufs exported from it are dups: they keep the pages */
  return CUDA_SUCCESS;
}

CUresult fk_cuMemHostAlloc(void** pp, size_t bytes, unsigned int flags) {
  FK_ENTER("cuMemHostAlloc");
  (void)flags;
  if (!pp) return CUDA_ERROR_INVALID_VALUE;
  *pp = NULL;
  int dev = fkCurrentDev();
  if (dev < 0) return fkFail(CUDA_ERROR_INVALID_CONTEXT, "cuMemHostAlloc without a current context");
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  void* p = mmap(NULL, fkPages(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  fkRegion r = {(uintptr_t)p, bytes, p, FK_MEM_HOST, dev, 0, 0, NULL, 0, -1};
  pthread_rwlock_wrlock(&fkRegLock);
  int over = fkCfg.pinnedBytes && fkPinned + bytes > fkCfg.pinnedBytes;
  int rc = over ? -1 : fkRegionAdd(&r);
  if (rc == 0) fkPinned += bytes;
  size_t held = fkPinned;
  pthread_rwlock_unlock(&fkRegLock);
  if (rc != 0) {
    munmap(p, fkPages(bytes));
    if (over)
      return fkFail(CUDA_ERROR_OUT_OF_MEMORY, "cuMemHostAlloc of %zu bytes: FAKECUDA_PINNED_KB exhausted (%zu held)",
                    bytes, held);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *pp = p;
  return CUDA_SUCCESS;
}

CUresult fk_cuMemFreeHost(void* p) {
  FK_ENTER("cuMemFreeHost");
  pthread_rwlock_rdlock(&fkRegLock);
  fkRegion* f = fkRegionFind((uintptr_t)p);
  int ok = f && f->base == (uintptr_t)p && f->kind == FK_MEM_HOST, dev = ok ? f->dev : -1;
  pthread_rwlock_unlock(&fkRegLock);
  if (!ok) return fkFail(CUDA_ERROR_INVALID_VALUE, "cuMemFreeHost(%p): not from cuMemHostAlloc", p);
  fkSyncDevice(dev, "cuMemFreeHost"); /* as cudaFreeHost */
  fkRegion r;
  pthread_rwlock_wrlock(&fkRegLock);
  int gone = fkRegionRemove((uintptr_t)p, &r);
  if (gone == 0) fkPinned -= r.size;
  pthread_rwlock_unlock(&fkRegLock);
  if (gone != 0) return CUDA_ERROR_INVALID_VALUE;
  munmap(p, fkPages(r.size));
  return CUDA_SUCCESS;
}

CUresult fk_cuMemHostGetDevicePointer(CUdeviceptr* d, void* p, unsigned int flags) {
  FK_ENTER("cuMemHostGetDevicePointer");
  if (!d || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  pthread_rwlock_rdlock(&fkRegLock);
  fkRegion* f = fkRegionFind((uintptr_t)p);
  int ok = f && f->kind == FK_MEM_HOST;
  pthread_rwlock_unlock(&fkRegLock);
  if (!ok) return fkFail(CUDA_ERROR_INVALID_VALUE, "cuMemHostGetDevicePointer(%p): not pinned host memory", p);
  *d = (CUdeviceptr)(uintptr_t)p; /* unified addressing */
  return CUDA_SUCCESS;
}

CUresult fk_cuMemGetAddressRange(CUdeviceptr* base, size_t* size, CUdeviceptr d) {
  FK_ENTER("cuMemGetAddressRange");
  pthread_rwlock_rdlock(&fkRegLock);
  fkRegion* f = fkRegionFind((uintptr_t)d);
  if (f) {
    if (base) *base = (CUdeviceptr)f->base;
    if (size) *size = f->size;
  }
  pthread_rwlock_unlock(&fkRegLock);
  return f ? CUDA_SUCCESS : fkFail(CUDA_ERROR_NOT_FOUND, "cuMemGetAddressRange(%p): not CUDA memory", (void*)d);
}

/* Unregistered host memory gets the driver's defaults ("default NULL
 * values", CUDA_SUCCESS): memory type 0, no context, not managed; the
 * device ordinal -2, as cudaPointerGetAttributes reports for it. */
CUresult fk_cuPointerGetAttributes(unsigned int n, CUpointer_attribute* attrs, void** data, CUdeviceptr ptr) {
  FK_ENTER("cuPointerGetAttributes");
  if (!attrs || !data) return CUDA_ERROR_INVALID_VALUE;
  pthread_rwlock_rdlock(&fkRegLock);
  fkRegion* f = fkRegionFind((uintptr_t)ptr);
  fkRegion r = f ? *f : (fkRegion){0};
  pthread_rwlock_unlock(&fkRegLock);
  for (unsigned i = 0; i < n; i++) {
    void* v = data[i];
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    switch (attrs[i]) {
      case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned*)v = !f ? 0u : r.kind == FK_MEM_HOST ? (unsigned)CU_MEMORYTYPE_HOST : (unsigned)CU_MEMORYTYPE_DEVICE;
        break;
      case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int*)v = f ? r.dev : -2; break;
      case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned*)v = 0; break;
      case CU_POINTER_ATTRIBUTE_MAPPED: *(unsigned*)v = f != NULL; break;
      case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext*)v = f ? (CUcontext)fkPrimary(r.dev) : NULL; break;
      case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr*)v = f ? ptr : 0; break;
      case CU_POINTER_ATTRIBUTE_HOST_POINTER: *(void**)v = f && r.kind == FK_MEM_HOST ? (void*)ptr : NULL; break;
      case CU_POINTER_ATTRIBUTE_BUFFER_ID: *(unsigned long long*)v = f ? r.id : 0; break;
      case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr*)v = f ? (CUdeviceptr)r.base : 0; break;
      case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t*)v = f ? r.size : 0; break;
      default: return fkFail(CUDA_ERROR_INVALID_VALUE, "cuPointerGetAttributes: attribute %d not modelled", attrs[i]);
    }
  }
  return CUDA_SUCCESS;
}

/* A dma-buf of [d, d + size): only whole cuMemAlloc allocations from their
 * start (the fd's offset 0 is d), size page-aligned and within the pages of
 * the allocation, as the driver asks (host page alignment). */
CUresult fk_cuMemGetHandleForAddressRange(void* handle, CUdeviceptr d, size_t size, CUmemRangeHandleType type,
                                          unsigned long long flags) {
  FK_ENTER("cuMemGetHandleForAddressRange");
  if (!handle || type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (fkCfg.noDmaBuf) return fkFail(CUDA_ERROR_NOT_SUPPORTED, "cuMemGetHandleForAddressRange: FAKECUDA_NO_DMABUF");
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  pthread_rwlock_rdlock(&fkRegLock);
  fkRegion* f = fkRegionFind((uintptr_t)d);
  int ok = f && f->kind == FK_MEM_DEVICE && f->base == (uintptr_t)d && size && size % pg == 0 &&
           size <= fkPages(f->size);
  int fd = ok ? dup(f->fd) : -1;
  pthread_rwlock_unlock(&fkRegLock);
  if (!ok)
    return fkFail(CUDA_ERROR_INVALID_VALUE, "cuMemGetHandleForAddressRange(%p, %zu): not a page-aligned range from "
                  "the start of a cuMemAlloc allocation", (void*)d, size);
  if (fd < 0) return fkFail(CUDA_ERROR_OUT_OF_MEMORY, "cuMemGetHandleForAddressRange: dup: %s", strerror(errno));
  *(int*)handle = fd;
  return CUDA_SUCCESS;
}
