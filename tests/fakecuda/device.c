/* device.c - the fake's devices, their attributes, primary contexts and the
 * current context of each thread (fakecuda.h). */
#include <stdio.h>
#include <string.h>

#include "fakecuda.h"

static fkCtx fkPrimaryCtx[FK_MAX_DEVS];
static pthread_mutex_t fkCtxLock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local fkCtx* fkCur;

fkCtx* fkCurrent(void) { return fkCur; }
int fkCurrentDev(void) { return fkCur ? fkCur->dev : -1; }
fkCtx* fkPrimary(int dev) { return dev >= 0 && dev < fkCfg.devices ? &fkPrimaryCtx[dev] : NULL; }

static int fkDevOk(CUdevice d) { return d >= 0 && d < fkCfg.devices; }

CUresult fk_cuDeviceGetCount(int* n) {
  FK_ENTER("cuDeviceGetCount");
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  *n = fkCfg.devices;
  return CUDA_SUCCESS;
}

CUresult fk_cuDeviceGet(CUdevice* d, int ordinal) {
  FK_ENTER("cuDeviceGet");
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  if (!fkDevOk(ordinal)) return fkFail(CUDA_ERROR_INVALID_DEVICE, "cuDeviceGet(%d) of %d", ordinal, fkCfg.devices);
  *d = ordinal;
  return CUDA_SUCCESS;
}

CUresult fk_cuDeviceGetName(char* name, int len, CUdevice d) {
  FK_ENTER("cuDeviceGetName");
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!fkDevOk(d)) return CUDA_ERROR_INVALID_DEVICE;
  snprintf(name, (size_t)len, "NVIDIA H200 (fakecuda %d)", (int)d);
  return CUDA_SUCCESS;
}

CUresult fk_cuDeviceGetPCIBusId(char* bus, int len, CUdevice d) {
  FK_ENTER("cuDeviceGetPCIBusId");
  if (!bus || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!fkDevOk(d)) return CUDA_ERROR_INVALID_DEVICE;
  snprintf(bus, (size_t)len, "%s", fkCfg.pci[d]);
  return CUDA_SUCCESS;
}

CUresult fk_cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d) {
  FK_ENTER("cuDeviceGetAttribute");
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  if (!fkDevOk(d)) return CUDA_ERROR_INVALID_DEVICE;
  unsigned bus = 0, dom = 0, slot = 0;
  sscanf(fkCfg.pci[d], "%x:%x:%x", &dom, &bus, &slot);
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = fkCfg.sms; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *v = 0x7fffffff; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *v = 64; break;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1: *v = !fkCfg.noMemOps; break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: *v = !fkCfg.noFd; break;
    case CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED: *v = !fkCfg.noDmaBuf; break;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING: *v = fkCfg.rdmaOrdering; break;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS: *v = CU_FLUSH_GPU_DIRECT_RDMA_WRITES_OPTION_HOST; break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *v = (int)bus; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *v = (int)slot; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *v = (int)dom; break;
    default: *v = 0; break; /* not modelled */
  }
  return CUDA_SUCCESS;
}

CUresult fk_cuDeviceCanAccessPeer(int* can, CUdevice d, CUdevice peer) {
  FK_ENTER("cuDeviceCanAccessPeer");
  if (!can) return CUDA_ERROR_INVALID_VALUE;
  if (!fkDevOk(d) || !fkDevOk(peer)) return CUDA_ERROR_INVALID_DEVICE;
  *can = d != peer && !fkCfg.noPeer;
  return CUDA_SUCCESS;
}

CUresult fk_cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice d) {
  FK_ENTER("cuDevicePrimaryCtxRetain");
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  if (!fkDevOk(d)) return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&fkCtxLock);
  fkCtx* c = &fkPrimaryCtx[d];
  c->magic = FK_CTX_MAGIC;
  c->dev = d;
  c->refs++;
  pthread_mutex_unlock(&fkCtxLock);
  *ctx = (CUcontext)c;
  return CUDA_SUCCESS;
}

CUresult fk_cuDevicePrimaryCtxRelease(CUdevice d) {
  FK_ENTER("cuDevicePrimaryCtxRelease");
  if (!fkDevOk(d)) return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&fkCtxLock);
  CUresult r = fkPrimaryCtx[d].refs > 0 ? (fkPrimaryCtx[d].refs--, CUDA_SUCCESS) : CUDA_ERROR_INVALID_CONTEXT;
  pthread_mutex_unlock(&fkCtxLock);
  return r; /* the context stays usable: nothing is torn down */
}

CUresult fk_cuCtxGetCurrent(CUcontext* ctx) {
  FK_ENTER("cuCtxGetCurrent");
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  *ctx = (CUcontext)fkCur;
  return CUDA_SUCCESS;
}

CUresult fk_cuCtxSetCurrent(CUcontext ctx) {
  FK_ENTER("cuCtxSetCurrent");
  fkCtx* c = (fkCtx*)ctx;
  if (c && (c < fkPrimaryCtx || c >= fkPrimaryCtx + FK_MAX_DEVS || c->magic != FK_CTX_MAGIC))
    return fkFail(CUDA_ERROR_INVALID_CONTEXT, "cuCtxSetCurrent(%p): not a context", (void*)ctx);
  fkCur = c;
  return CUDA_SUCCESS;
}

CUresult fk_cuCtxGetDevice(CUdevice* d) {
  FK_ENTER("cuCtxGetDevice");
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  if (!fkCur) return fkFail(CUDA_ERROR_INVALID_CONTEXT, "cuCtxGetDevice without a current context");
  *d = fkCur->dev;
  return CUDA_SUCCESS;
}

static atomic_long fkFlushes; /* successful cuFlushGPUDirectRDMAWrites calls */

/* How many times cuFlushGPUDirectRDMAWrites succeeded in this process: tests
 * read it (dlsym) to see that received GPU data was flushed. */
FK_EXPORT long fakecudaFlushes(void) { return atomic_load(&fkFlushes); }

/* The fake's NIC writes are CPU stores, visible at once: the flush checks
 * its arguments and that a context is current (as the driver does), and
 * counts. */
CUresult fk_cuFlushGPUDirectRDMAWrites(CUflushGPUDirectRDMAWritesTarget target, CUflushGPUDirectRDMAWritesScope scope) {
  FK_ENTER("cuFlushGPUDirectRDMAWrites");
  if (target != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX ||
      (scope != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER && scope != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_ALL_DEVICES))
    return fkFail(CUDA_ERROR_INVALID_VALUE, "cuFlushGPUDirectRDMAWrites(%d, %d): bad target or scope", (int)target,
                  (int)scope);
  if (fkCurrentDev() < 0) return fkFail(CUDA_ERROR_INVALID_CONTEXT, "cuFlushGPUDirectRDMAWrites: no current context");
  atomic_fetch_add(&fkFlushes, 1);
  return CUDA_SUCCESS;
}
