/*
 * dmabuf.c - dma-buf export of GPU memory (dmabuf.h).
 */
#include "device/dmabuf.h"

#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "device/cuda_loader.h"
#include "misc/log.h"

#ifdef COLL_HAVE_CUDA
static pthread_once_t collDmaBufOnce = PTHREAD_ONCE_INIT;
static int collDmaBufOk;
/* Bit d: GPU d needs cuFlushGPUDirectRDMAWrites before it reads what a NIC
 * wrote (its GPU_DIRECT_RDMA_WRITES_ORDERING is below OWNER); GPUs from 64
 * on are always flushed. */
static uint64_t collDmaBufFlushMask;

/* Whether GPU d can take a NIC's writes safely: it orders them itself, or
 * the driver flushes them on request (cuFlushGPUDirectRDMAWrites). Sets
 * *flush when a flush is needed. */
static int collDmaBufOrdered(CUdevice d, int i, int* flush) {
  int order = 0, opts = 0;
  if (COLL_CU(cuDeviceGetAttribute)(&order, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING, d) != CUDA_SUCCESS)
    order = CU_GPU_DIRECT_RDMA_WRITES_ORDERING_NONE;
  *flush = order < CU_GPU_DIRECT_RDMA_WRITES_ORDERING_OWNER;
  if (!*flush) return 1;
  if (!COLL_CU(cuFlushGPUDirectRDMAWrites)) {
    COLL_INFO(COLL_SUB_INIT, "CUDA: no dma-buf path (GPU %d does not order NIC writes and the driver has no "
              "cuFlushGPUDirectRDMAWrites)", i);
    return 0;
  }
  if (COLL_CU(cuDeviceGetAttribute)(&opts, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS, d) != CUDA_SUCCESS ||
      !(opts & CU_FLUSH_GPU_DIRECT_RDMA_WRITES_OPTION_HOST)) {
    COLL_INFO(COLL_SUB_INIT, "CUDA: no dma-buf path (GPU %d does not order NIC writes and cannot flush them: "
              "GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS lacks OPTION_HOST)", i);
    return 0;
  }
  return 1;
}

static void collDmaBufProbe(void) {
  if (collCudaLoadQuiet() != collSuccess) return;
  if (!COLL_CU(cuMemGetHandleForAddressRange)) {
    COLL_INFO(COLL_SUB_INIT, "CUDA: no dma-buf export (the driver has no cuMemGetHandleForAddressRange)");
    return;
  }
  int n = 0;
  if (COLL_CU(cuDeviceGetCount)(&n) != CUDA_SUCCESS || n <= 0) return;
  uint64_t mask = 0;
  for (int i = 0; i < n; i++) {
    CUdevice d;
    int v = 0, flush = 0;
    if (COLL_CU(cuDeviceGet)(&d, i) != CUDA_SUCCESS ||
        COLL_CU(cuDeviceGetAttribute)(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, d) != CUDA_SUCCESS || !v) {
      COLL_INFO(COLL_SUB_INIT, "CUDA: no dma-buf export (GPU %d: CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0)", i);
      return;
    }
    if (!collDmaBufOrdered(d, i, &flush)) return;
    if (flush && i < 64) mask |= (uint64_t)1 << i;
  }
  collDmaBufFlushMask = mask;
  collDmaBufOk = 1;
  COLL_INFO(COLL_SUB_INIT, "CUDA: GPU memory can be exported as dma-bufs (%d device(s), %d flushed after NIC writes)",
            n, __builtin_popcountll(mask) + (n > 64 ? n - 64 : 0));
}
#endif

int collCudaDmaBufSupported(void) {
#ifdef COLL_HAVE_CUDA
  if (!collCudaDriverPresent()) return 0;
  pthread_once(&collDmaBufOnce, collDmaBufProbe);
  return collDmaBufOk;
#else
  return 0;
#endif
}

collResult_t collCudaDmaBufFd(const void* ptr, size_t size, int* fd, uint64_t* offset) {
  if (!ptr || !size || !fd || !offset)
    return collSetError(collInvalidArgument, "dma-buf export: NULL pointer/fd/offset or size 0 (ptr %p, %zu bytes)",
                        ptr, size);
#ifdef COLL_HAVE_CUDA
  if (collCudaLoad() != collSuccess)
    return collSetError(collInvalidUsage, "dma-buf export of %p: %s", ptr, collCudaLoadMessage());
  if (!COLL_CU(cuMemGetHandleForAddressRange))
    return collSetError(collInvalidUsage, "dma-buf export of %p: the CUDA driver (%d) has no "
                        "cuMemGetHandleForAddressRange (needs CUDA 11.7 or newer)", ptr, collCudaDriverVersion());
  CUdeviceptr base = 0;
  size_t baseSize = 0;
  CUresult r = COLL_CU(cuMemGetAddressRange)(&base, &baseSize, (CUdeviceptr)(uintptr_t)ptr);
  uintptr_t p = (uintptr_t)ptr;
  if (r != CUDA_SUCCESS || p - (uintptr_t)base > baseSize || size > baseSize - (p - (uintptr_t)base))
    return collSetError(collInvalidArgument, "dma-buf export of [%p, +%zu): not inside one CUDA allocation (%s)", ptr,
                        size, r != CUDA_SUCCESS ? collCudaErrorName(r) : "runs past its end");
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  size_t len = (p - (uintptr_t)base + size + pg - 1) / pg * pg;
  int f = -1;
  r = COLL_CU(cuMemGetHandleForAddressRange)(&f, base, len, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
  if (r == CUDA_ERROR_NOT_SUPPORTED)
    return collSetError(collInvalidUsage, "dma-buf export of [%p, +%zu): the CUDA driver does not support it "
                        "(CUDA_ERROR_NOT_SUPPORTED: needs the open GPU kernel modules and a kernel with dma-buf)",
                        ptr, size);
  if (r != CUDA_SUCCESS) return collCudaError(r, "dma-buf export: cuMemGetHandleForAddressRange");
  *fd = f;
  *offset = (uint64_t)(p - (uintptr_t)base);
  return collSuccess;
#else
  return collSetError(collInvalidUsage, "dma-buf export of %p: libcoll was built without CUDA support", ptr);
#endif
}

collResult_t collCudaRdmaFlushOf(const void* ptr, collCudaRdmaFlush* f) {
  if (!f) return collSetError(collInvalidArgument, "GPUDirect RDMA flush target of %p: NULL target", ptr);
#ifdef COLL_HAVE_CUDA
  if (!collCudaDmaBufSupported())
    return collSetError(collInvalidUsage, "GPUDirect RDMA flush of %p: this process has no dma-buf path", ptr);
  CUcontext ctx = NULL;
  int dev = -2;
  CUpointer_attribute at[2] = {CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  void* val[2] = {&ctx, &dev};
  COLL_CU_CHECK(COLL_CU(cuPointerGetAttributes)(2, at, val, (CUdeviceptr)(uintptr_t)ptr),
                "GPUDirect RDMA flush: cuPointerGetAttributes");
  if (dev < 0) return collSetError(collInvalidArgument, "GPUDirect RDMA flush of %p: not GPU memory", ptr);
  collCudaRdmaFlush t = {NULL, dev, dev >= 64 || (collDmaBufFlushMask >> dev & 1), 0};
  if (t.flush && !ctx) { /* cuMem (VMM) memory has no context of its own: the device's primary one */
    CUdevice d = 0;
    COLL_CU_CHECK(COLL_CU(cuDeviceGet)(&d, dev), "GPUDirect RDMA flush: cuDeviceGet");
    COLL_CU_CHECK(COLL_CU(cuDevicePrimaryCtxRetain)(&ctx, d), "GPUDirect RDMA flush: cuDevicePrimaryCtxRetain");
    t.primary = 1;
  }
  if (t.flush) t.ctx = ctx;
  *f = t;
  return collSuccess;
#else
  return collSetError(collInvalidUsage, "GPUDirect RDMA flush of %p: libcoll was built without CUDA support", ptr);
#endif
}

collResult_t collCudaRdmaFlushRun(const collCudaRdmaFlush* f) {
  if (!f->flush) return collSuccess; /* the GPU orders NIC writes itself */
#ifdef COLL_HAVE_CUDA
  CUcontext ctx = f->ctx, old = NULL;
  CUresult r = COLL_CU(cuCtxGetCurrent)(&old);
  if (r == CUDA_SUCCESS && old != ctx) r = COLL_CU(cuCtxSetCurrent)(ctx);
  if (r == CUDA_SUCCESS) {
    r = COLL_CU(cuFlushGPUDirectRDMAWrites)(CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
                                            CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER);
    if (old != ctx) (void)COLL_CU(cuCtxSetCurrent)(old);
  }
  if (r != CUDA_SUCCESS) return collCudaError(r, "GPUDirect RDMA flush: cuFlushGPUDirectRDMAWrites");
  return collSuccess;
#else
  return collSetError(collInvalidUsage, "GPUDirect RDMA flush: libcoll was built without CUDA support");
#endif
}

void collCudaRdmaFlushRelease(collCudaRdmaFlush* f) {
#ifdef COLL_HAVE_CUDA
  CUdevice d = 0;
  if (f->primary && COLL_CU(cuDeviceGet)(&d, f->dev) == CUDA_SUCCESS) (void)COLL_CU(cuDevicePrimaryCtxRelease)(d);
#endif
  f->primary = 0;
  f->ctx = NULL;
  f->flush = 0;
}
