/*
 * dmabuf.h - GPU memory exported as a Linux dma-buf, so a NIC registers it
 * directly (collNet_t.regMrDmaBuf, COLL_PTR_DMABUF) instead of staging it
 * through pinned host memory. The CUDA side of NCCL's dma-buf path:
 * CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED and cuMemGetHandleForAddressRange
 * (an optional driver entry point, cuda_loader.h). Never run on a GPU here:
 * tested on the fake driver (tests/fakecuda).
 */
#ifndef COLL_DEVICE_DMABUF_H_
#define COLL_DEVICE_DMABUF_H_

#include <stddef.h>
#include <stdint.h>

#include "coll.h"

/* 1 when GPU memory of this process can be exported as dma-bufs: the CUDA
 * driver is mapped in the process already (collCudaDriverPresent; nothing
 * is loaded for a host-only program, where no pointer is device memory),
 * it loads, it has cuMemGetHandleForAddressRange, and every device reports
 * CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED and either orders a NIC's writes
 * itself (GPU_DIRECT_RDMA_WRITES_ORDERING at least OWNER) or can flush them
 * (cuFlushGPUDirectRDMAWrites present, FLUSH_WRITES_OPTIONS has
 * OPTION_HOST): a GPU that can do neither might read stale data after a
 * completion, so its memory is staged instead. 0 otherwise (also without CUDA in
 * the build). Decided once the driver is mapped; thread-safe. */
int collCudaDmaBufSupported(void);

/* Exports the allocation holding [ptr, ptr + size) (bytes; device memory of
 * cuMemAlloc / cudaMalloc, or a fully mapped cuMemAddressReserve range) as a
 * dma-buf: as NCCL does, the exported range starts at the allocation's base
 * (cuMemGetAddressRange) and ends at ptr + size rounded up to the host page
 * size; *fd gets the dma-buf and *offset = ptr - base, the range's offset
 * in it (what regMrDmaBuf takes). The caller owns *fd and closes it (a
 * registration made from it keeps its own reference). Errors:
 * collInvalidArgument (NULL fd/offset/ptr, size 0, the range is not inside
 * one CUDA allocation), collInvalidUsage (no dma-buf export here: built
 * without CUDA, no driver, the driver lacks cuMemGetHandleForAddressRange
 * or says CUDA_ERROR_NOT_SUPPORTED), collSystemError (another driver
 * failure, named); each with a message. *fd and *offset are untouched on
 * error. Thread-safe. */
collResult_t collCudaDmaBufFd(const void* ptr, size_t size, int* fd, uint64_t* offset);

/* Where NIC writes into one GPU buffer are made visible to that GPU's
 * kernels and copies (NCCL's iflush for GPU memory), decided once for a
 * registration (collCudaRdmaFlushOf) so that each flush (collCudaRdmaFlushRun)
 * asks the driver nothing about the pointer. */
typedef struct {
  void* ctx;   /* CUcontext the flush runs in (flush only): the memory's, or the device's primary one */
  int dev;     /* the memory's device ordinal */
  int flush;   /* 1: the GPU needs cuFlushGPUDirectRDMAWrites; 0: it orders NIC writes itself */
  int primary; /* ctx is the device's primary context, retained until collCudaRdmaFlushRelease */
} collCudaRdmaFlush;

/* Fills *f for the GPU memory at ptr: its device, whether that GPU needs a
 * flush (GPU_DIRECT_RDMA_WRITES_ORDERING below OWNER, as probed by
 * collCudaDmaBufSupported) and, when it does, the context to flush in (the
 * pointer's; for cuMem memory, which has none, the device's primary context,
 * retained). One cuPointerGetAttributes. Errors: collInvalidUsage (no
 * dma-buf path in this process, collCudaDmaBufSupported is 0; built without
 * CUDA), collInvalidArgument (ptr is not GPU memory, f NULL),
 * collSystemError (a driver call failed, named); each with a message; *f is
 * untouched on error. Thread-safe. */
collResult_t collCudaRdmaFlushOf(const void* ptr, collCudaRdmaFlush* f);

/* Makes every NIC write into f's memory that has completed visible to its
 * GPU: cuFlushGPUDirectRDMAWrites, scope OWNER, in f's context (the calling
 * thread's current context is restored); no driver call at all when the GPU
 * orders such writes itself. Blocks until done (microseconds). Errors:
 * collSystemError (a driver call failed, named), with a message.
 * Thread-safe. */
collResult_t collCudaRdmaFlushRun(const collCudaRdmaFlush* f);

/* Releases what collCudaRdmaFlushOf retained (the primary context); f
 * flushes nothing afterwards. */
void collCudaRdmaFlushRelease(collCudaRdmaFlush* f);

#endif
