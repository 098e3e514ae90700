/* ctxgpu.c - the GPU of the calling thread's current CUDA context (ctxgpu.h). */
#include "device/ctxgpu.h"

#include <stdio.h>

#include "device/cuda_loader.h"

int collCudaCurrentBusId(char* buf, size_t len, int* ordinal) {
  if (len) buf[0] = 0;
  if (ordinal) *ordinal = -1;
#ifdef COLL_HAVE_CUDA
  if (!collCudaDriverPresent() || collCudaLoadQuiet() != collSuccess) return 0;
  CUcontext ctx = NULL;
  CUdevice dev;
  char raw[64];
  unsigned dom, bus, slot, fn;
  if (COLL_CU(cuCtxGetCurrent)(&ctx) != CUDA_SUCCESS || !ctx) return 0;
  if (COLL_CU(cuCtxGetDevice)(&dev) != CUDA_SUCCESS) return 0;
  if (COLL_CU(cuDeviceGetPCIBusId)(raw, (int)sizeof raw, dev) != CUDA_SUCCESS) return 0;
  /* The driver writes "0000:3B:00.0" (NVML-style ids have 8 domain digits). */
  if (sscanf(raw, "%x:%x:%x.%x", &dom, &bus, &slot, &fn) != 4) return 0;
  snprintf(buf, len, "%04x:%02x:%02x.%x", dom, bus, slot, fn);
  if (ordinal) *ordinal = (int)dev;
  return 1;
#else
  return 0;
#endif
}
