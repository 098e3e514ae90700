/*
 * vmm.c - the fake's virtual memory management (cuMem*), as transports/p2p
 * uses it (fakecuda.h). A physical allocation is a memfd named
 * "fakecuda-vmm-dev<N>"; exporting it gives a dup of that fd (a POSIX
 * file descriptor handle), so two processes that pass it over a unix socket
 * share the memory, and the importer learns the device from the name.
 * Address reservations are PROT_NONE mappings; cuMemMap maps the memfd over
 * them, still PROT_NONE (the host cannot touch device memory), plus a
 * read-write alias for the workers; cuMemSetAccess says which devices may
 * read or write, and a copy or kernel without access faults.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fakecuda.h"

#define FK_GRAN ((size_t)2 << 20)
#define FK_ALLOC_MAGIC 0x6663414cu

typedef struct fkAlloc {
  uint32_t magic;
  int fd;
  size_t size;
  int dev;
  int exportable;
  int refs; /* handles + mappings (fkVmmLock) */
} fkAlloc;

typedef struct {
  uintptr_t base;
  size_t size;
} fkReserve;

static pthread_mutex_t fkVmmLock = PTHREAD_MUTEX_INITIALIZER;
static fkReserve fkRes[256];
static int fkNRes;

static fkAlloc* fkAllocOf(CUmemGenericAllocationHandle h) {
  fkAlloc* a = (fkAlloc*)(uintptr_t)h;
  return a && a->magic == FK_ALLOC_MAGIC ? a : NULL;
}

static void fkAllocRef(fkAlloc* a, int delta) {
  pthread_mutex_lock(&fkVmmLock);
  a->refs += delta;
  int last = a->refs == 0;
  pthread_mutex_unlock(&fkVmmLock);
  if (last) {
    close(a->fd);
    a->magic = 0;
    free(a);
  }
}

CUresult fk_cuMemGetAllocationGranularity(size_t* g, const CUmemAllocationProp* prop,
                                          CUmemAllocationGranularity_flags option) {
  FK_ENTER("cuMemGetAllocationGranularity");
  (void)option;
  if (!g || !prop) return CUDA_ERROR_INVALID_VALUE;
  *g = FK_GRAN;
  return CUDA_SUCCESS;
}

CUresult fk_cuMemCreate(CUmemGenericAllocationHandle* h, size_t size, const CUmemAllocationProp* prop,
                        unsigned long long flags) {
  FK_ENTER("cuMemCreate");
  if (!h || !prop || flags) return CUDA_ERROR_INVALID_VALUE;
  *h = 0;
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      prop->location.id < 0 || prop->location.id >= fkCfg.devices)
    return fkFail(CUDA_ERROR_INVALID_VALUE, "cuMemCreate: only pinned memory of an existing device");
  if (size == 0 || size % FK_GRAN)
    return fkFail(CUDA_ERROR_INVALID_VALUE, "cuMemCreate: %zu bytes is not a multiple of the granularity", size);
  if ((prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) && fkCfg.noFd)
    return fkFail(CUDA_ERROR_NOT_SUPPORTED, "cuMemCreate: FAKECUDA_NO_FD");
  fkAlloc* a = calloc(1, sizeof *a);
  if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
  char name[32];
  snprintf(name, sizeof name, "fakecuda-vmm-dev%d", prop->location.id);
  a->fd = memfd_create(name, MFD_CLOEXEC);
  if (a->fd < 0 || ftruncate(a->fd, (off_t)size) != 0) {
    if (a->fd >= 0) close(a->fd);
    free(a);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  a->magic = FK_ALLOC_MAGIC;
  a->size = size;
  a->dev = prop->location.id;
  a->exportable = (prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0;
  a->refs = 1;
  *h = (CUmemGenericAllocationHandle)(uintptr_t)a;
  return CUDA_SUCCESS;
}

CUresult fk_cuMemRelease(CUmemGenericAllocationHandle h) {
  FK_ENTER("cuMemRelease");
  fkAlloc* a = fkAllocOf(h);
  if (!a) return CUDA_ERROR_INVALID_VALUE;
  fkAllocRef(a, -1);
  return CUDA_SUCCESS;
}

CUresult fk_cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* h, void* addr) {
  FK_ENTER("cuMemRetainAllocationHandle");
  if (!h) return CUDA_ERROR_INVALID_VALUE;
  pthread_rwlock_rdlock(&fkRegLock);
  fkRegion* r = fkRegionFind((uintptr_t)addr);
  fkAlloc* a = r && r->kind == FK_MEM_VMM ? r->alloc : NULL;
  if (a) fkAllocRef(a, +1);
  pthread_rwlock_unlock(&fkRegLock);
  if (!a) return fkFail(CUDA_ERROR_INVALID_VALUE, "cuMemRetainAllocationHandle(%p): not mapped memory", addr);
  *h = (CUmemGenericAllocationHandle)(uintptr_t)a;
  return CUDA_SUCCESS;
}

CUresult fk_cuMemExportToShareableHandle(void* out, CUmemGenericAllocationHandle h, CUmemAllocationHandleType type,
                                         unsigned long long flags) {
  FK_ENTER("cuMemExportToShareableHandle");
  fkAlloc* a = fkAllocOf(h);
  if (!out || !a || flags) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || !a->exportable)
    return fkFail(CUDA_ERROR_INVALID_VALUE, "cuMemExportToShareableHandle: not created exportable as type %d", type);
  int fd = fcntl(a->fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return CUDA_ERROR_OPERATING_SYSTEM;
  *(int*)out = fd;
  return CUDA_SUCCESS;
}

CUresult fk_cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* h, void* os, CUmemAllocationHandleType type) {
  FK_ENTER("cuMemImportFromShareableHandle");
  if (!h || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
  *h = 0;
  int fd = (int)(intptr_t)os;
  char link[64], target[128];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof target - 1);
  int dev = -1;
  struct stat st;
  if (n > 0) {
    target[n] = 0;
    if (sscanf(target, "/memfd:fakecuda-vmm-dev%d", &dev) != 1) dev = -1;
  }
  if (dev < 0 || dev >= fkCfg.devices || fstat(fd, &st) != 0 || st.st_size <= 0)
    return fkFail(CUDA_ERROR_INVALID_VALUE, "cuMemImportFromShareableHandle: fd %d is not fake device memory", fd);
  fkAlloc* a = calloc(1, sizeof *a);
  if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
  a->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (a->fd < 0) {
    free(a);
    return CUDA_ERROR_OPERATING_SYSTEM;
  }
  a->magic = FK_ALLOC_MAGIC;
  a->size = (size_t)st.st_size;
  a->dev = dev;
  a->exportable = 1;
  a->refs = 1;
  *h = (CUmemGenericAllocationHandle)(uintptr_t)a;
  return CUDA_SUCCESS;
}

CUresult fk_cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t align, CUdeviceptr addr,
                                unsigned long long flags) {
  FK_ENTER("cuMemAddressReserve");
  (void)addr; /* a hint */
  if (!ptr || flags || size == 0 || size % FK_GRAN) return CUDA_ERROR_INVALID_VALUE;
  if (align == 0) align = FK_GRAN;
  if (align & (align - 1)) return CUDA_ERROR_INVALID_VALUE;
  size_t span = size + align;
  char* p = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  uintptr_t base = ((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1);
  if (base > (uintptr_t)p) munmap(p, base - (uintptr_t)p);
  if ((uintptr_t)p + span > base + size) munmap((void*)(base + size), (uintptr_t)p + span - (base + size));
  pthread_mutex_lock(&fkVmmLock);
  int ok = fkNRes < (int)(sizeof fkRes / sizeof fkRes[0]);
  if (ok) fkRes[fkNRes++] = (fkReserve){base, size};
  pthread_mutex_unlock(&fkVmmLock);
  if (!ok) {
    munmap((void*)base, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *ptr = (CUdeviceptr)base;
  return CUDA_SUCCESS;
}

CUresult fk_cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  FK_ENTER("cuMemAddressFree");
  pthread_mutex_lock(&fkVmmLock);
  int i = 0;
  while (i < fkNRes && !(fkRes[i].base == (uintptr_t)ptr && fkRes[i].size == size)) i++;
  int ok = i < fkNRes;
  if (ok) fkRes[i] = fkRes[--fkNRes];
  pthread_mutex_unlock(&fkVmmLock);
  if (!ok) return fkFail(CUDA_ERROR_INVALID_VALUE, "cuMemAddressFree(%p, %zu): not a reservation", (void*)ptr, size);
  munmap((void*)ptr, size);
  return CUDA_SUCCESS;
}

static int fkInReservation(uintptr_t p, size_t n) {
  pthread_mutex_lock(&fkVmmLock);
  int ok = 0;
  for (int i = 0; i < fkNRes && !ok; i++) ok = p >= fkRes[i].base && p + n <= fkRes[i].base + fkRes[i].size;
  pthread_mutex_unlock(&fkVmmLock);
  return ok;
}

CUresult fk_cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                     unsigned long long flags) {
  FK_ENTER("cuMemMap");
  fkAlloc* a = fkAllocOf(h);
  if (!a || flags || size == 0 || size % FK_GRAN || offset % FK_GRAN || offset + size > a->size)
    return fkFail(CUDA_ERROR_INVALID_VALUE, "cuMemMap(%p, %zu, %zu): bad handle, size or offset", (void*)ptr, size,
                  offset);
  if (!fkInReservation((uintptr_t)ptr, size))
    return fkFail(CUDA_ERROR_INVALID_VALUE, "cuMemMap(%p, %zu): outside every reservation", (void*)ptr, size);
  pthread_rwlock_wrlock(&fkRegLock);
  if (fkRegionFind((uintptr_t)ptr) || fkRegionFind((uintptr_t)ptr + size - 1)) {
    pthread_rwlock_unlock(&fkRegLock);
    return fkFail(CUDA_ERROR_INVALID_VALUE, "cuMemMap(%p): already mapped", (void*)ptr);
  }
  void* dv = mmap((void*)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, a->fd, (off_t)offset);
  void* al = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, (off_t)offset);
  fkRegion r = {(uintptr_t)ptr, size, al, FK_MEM_VMM, a->dev, 0, 0, a, 0, -1};
  if (dv == MAP_FAILED || al == MAP_FAILED || fkRegionAdd(&r) != 0) {
    if (al != MAP_FAILED) munmap(al, size);
    mmap((void*)ptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    pthread_rwlock_unlock(&fkRegLock);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  fkAllocRef(a, +1);
  pthread_rwlock_unlock(&fkRegLock);
  return CUDA_SUCCESS;
}

CUresult fk_cuMemUnmap(CUdeviceptr ptr, size_t size) {
  FK_ENTER("cuMemUnmap");
  fkRegion r;
  pthread_rwlock_wrlock(&fkRegLock);
  fkRegion* f = fkRegionFind((uintptr_t)ptr);
  int ok = f && f->kind == FK_MEM_VMM && f->base == (uintptr_t)ptr && f->size == size &&
           fkRegionRemove((uintptr_t)ptr, &r) == 0;
  if (ok) {
    munmap(r.alias, size);
    mmap((void*)ptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  }
  pthread_rwlock_unlock(&fkRegLock);
  if (!ok) return fkFail(CUDA_ERROR_INVALID_VALUE, "cuMemUnmap(%p, %zu): not one mapping", (void*)ptr, size);
  fkAllocRef(r.alloc, -1);
  return CUDA_SUCCESS;
}

CUresult fk_cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  FK_ENTER("cuMemSetAccess");
  if (!desc || count == 0) return CUDA_ERROR_INVALID_VALUE;
  pthread_rwlock_wrlock(&fkRegLock);
  fkRegion* f = fkRegionFind((uintptr_t)ptr);
  CUresult rc = CUDA_SUCCESS;
  if (!f || f->kind != FK_MEM_VMM || f->base != (uintptr_t)ptr || f->size != size)
    rc = fkFail(CUDA_ERROR_INVALID_VALUE, "cuMemSetAccess(%p, %zu): not one mapping", (void*)ptr, size);
  for (size_t i = 0; i < count && rc == CUDA_SUCCESS; i++) {
    int d = desc[i].location.id;
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || d < 0 || d >= fkCfg.devices)
      rc = fkFail(CUDA_ERROR_INVALID_DEVICE, "cuMemSetAccess: location %d/%d", desc[i].location.type, d);
    else if (d != f->dev && fkCfg.noPeer)
      rc = fkFail(CUDA_ERROR_INVALID_DEVICE, "cuMemSetAccess: GPU %d cannot reach GPU %d (FAKECUDA_NO_PEER)", d, f->dev);
  }
  for (size_t i = 0; i < count && rc == CUDA_SUCCESS; i++) {
    unsigned bit = 1u << desc[i].location.id;
    f->readMask &= ~bit, f->writeMask &= ~bit;
    if (desc[i].flags & CU_MEM_ACCESS_FLAGS_PROT_READ) f->readMask |= bit;
    if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE) f->readMask |= bit, f->writeMask |= bit;
  }
  pthread_rwlock_unlock(&fkRegLock);
  return rc;
}
