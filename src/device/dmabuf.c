/*
 * dmabuf.c - dma-buf export of GPU memory (dmabuf.h).
 */
#include "device/dmabuf.h"

#include <pthread.h>
#include <unistd.h>

#include "device/cuda_loader.h"
#include "misc/log.h"

#ifdef COLL_HAVE_CUDA
static pthread_once_t collDmaBufOnce = PTHREAD_ONCE_INIT;
static int collDmaBufOk;

static void collDmaBufProbe(void) {
  if (collCudaLoadQuiet() != collSuccess) return;
  if (!COLL_CU(cuMemGetHandleForAddressRange)) {
    COLL_INFO(COLL_SUB_INIT, "CUDA: no dma-buf export (the driver has no cuMemGetHandleForAddressRange)");
    return;
  }
  int n = 0;
  if (COLL_CU(cuDeviceGetCount)(&n) != CUDA_SUCCESS || n <= 0) return;
  for (int i = 0; i < n; i++) {
    CUdevice d;
    int v = 0;
    if (COLL_CU(cuDeviceGet)(&d, i) != CUDA_SUCCESS ||
        COLL_CU(cuDeviceGetAttribute)(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, d) != CUDA_SUCCESS || !v) {
      COLL_INFO(COLL_SUB_INIT, "CUDA: no dma-buf export (GPU %d: CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0)", i);
      return;
    }
  }
  collDmaBufOk = 1;
  COLL_INFO(COLL_SUB_INIT, "CUDA: GPU memory can be exported as dma-bufs (%d device(s))", n);
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
