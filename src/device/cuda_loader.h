/*
 * cuda_loader.h - the CUDA driver API, loaded at first use.
 *
 * libcoll never links libcuda or the CUDA runtime: the driver library
 * (COLL_CUDA_LIBRARY, default libcuda.so.1) is dlopen'ed the first time a
 * device feature is needed, and every entry point is fetched with
 * cuGetProcAddress for the CUDA version of the headers coll was built with.
 * So libcoll.so loads, and every host collective runs, on a machine with no
 * GPU, no driver and no CUDA runtime; a program that never touches device
 * memory never initializes CUDA, even where a driver exists.
 *
 * Files that call the driver include <cuda.h> and this header, and call
 * COLL_CU(cuXxx)(args) after collCudaLoad() succeeded. Nothing here needs
 * <cuda.h> from the caller, except the table itself.
 */
#ifndef COLL_DEVICE_CUDA_LOADER_H_
#define COLL_DEVICE_CUDA_LOADER_H_

#include "coll.h"

/* 1 when libcoll was built with CUDA support (COLL_CUDA), 0 otherwise. */
int collCudaBuilt(void);

/* Loads the driver once per process (dlopen, cuGetProcAddress, cuInit, the
 * driver version check) and returns collSuccess, or the same error on every
 * call after a failure, with a message for collGetLastError that says why:
 *  - collInvalidUsage: libcoll was built without CUDA (COLL_CUDA=OFF);
 *  - collSystemError: the library cannot be opened ("libcuda.so.1: cannot
 *    open shared object file": no NVIDIA driver here), lacks
 *    cuGetProcAddress_v2 (driver older than CUDA 12), cuInit fails (e.g.
 *    CUDA_ERROR_NO_DEVICE, CUDA_ERROR_STUB_LIBRARY for the toolkit's stub),
 *    the driver supports an older CUDA major version than the one the
 *    kernels were built with, or an entry point is missing.
 * Thread-safe. */
collResult_t collCudaLoad(void);
/* As collCudaLoad, without recording a message (nothing is logged). */
collResult_t collCudaLoadQuiet(void);
/* Why loading failed, "" when it succeeded. Loads first if no call did. */
const char* collCudaLoadMessage(void);

/* Without loading anything: 1 when this process has the CUDA driver
 * library mapped (someone, e.g. the CUDA runtime, loaded it; coll's own
 * load is seen at once), 0 when not. While it is 0 no pointer can be
 * device memory. A library someone else maps is seen within one tick of
 * CLOCK_MONOTONIC_COARSE (1-10 ms; creating a CUDA context, needed before
 * any device memory exists, takes far longer): within a tick the answer 0
 * costs one coarse clock read (a few ns), else one dl_iterate_phdr() call
 * when nothing was loaded since the last look. Thread-safe. */
int collCudaDriverPresent(void);

/* Name and description of a CUresult ("CUDA_ERROR_NO_DEVICE", "no
 * CUDA-capable device is detected"), also for the stub library, which
 * cannot name its own errors. Never NULL. */
const char* collCudaErrorName(int cuResult);
const char* collCudaErrorString(int cuResult);

/* Records a failed driver call: collSystemError with "<what>: <name>
 * (<description>)", returned (so callers write return collCudaError(...)). */
collResult_t collCudaError(int cuResult, const char* what);

/* Driver version as cuDriverGetVersion reports it (e.g. 13000); loads the
 * driver first if no call did yet (without setting an error message); 0 when
 * loading failed. */
int collCudaDriverVersion(void);

#ifdef COLL_HAVE_CUDA
#include <cuda.h>

/* Every driver entry point coll uses. X(name) with the name <cuda.h>
 * declares (its macros pick the ABI version, e.g. cuMemAlloc_v2). */
#define COLL_CUDA_SYMBOLS(X)                                                              \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString)                   \
  X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetAttribute) X(cuDeviceGetPCIBusId)       \
  X(cuDeviceGetName)                                                                      \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxGetCurrent)             \
  X(cuCtxSetCurrent) X(cuCtxGetDevice) X(cuPointerGetAttributes)                          \
  X(cuMemAlloc) X(cuMemFree) X(cuMemcpyAsync) X(cuMemcpy) X(cuMemsetD8Async)              \
  X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemHostGetDevicePointer) X(cuMemGetAddressRange) \
  X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamQuery)            \
  X(cuStreamWaitEvent) X(cuStreamWaitValue32) X(cuStreamWriteValue32) X(cuLaunchHostFunc) \
  X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventQuery)                     \
  X(cuEventSynchronize) X(cuEventElapsedTime)                                             \
  X(cuLibraryLoadData) X(cuLibraryUnload) X(cuLibraryGetKernel) X(cuLaunchKernel)         \
  X(cuMemCreate) X(cuMemRelease) X(cuMemExportToShareableHandle)                          \
  X(cuMemImportFromShareableHandle) X(cuMemAddressReserve) X(cuMemAddressFree)            \
  X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess) X(cuMemGetAllocationGranularity)                \
  X(cuMemRetainAllocationHandle) X(cuDeviceCanAccessPeer)

/* Entry points a driver may lack: a driver without them still loads, and
 * their pointer in the table stays NULL (callers check it first).
 * cuMemGetHandleForAddressRange (CUDA 11.7+): dma-buf export (dmabuf.h);
 * cuFlushGPUDirectRDMAWrites (CUDA 11.3+): makes a NIC's writes into GPU
 * memory visible to the GPU (dmabuf.h); cuMemcpy2DAsync: evenly strided
 * segments in one copy (core/devcall.c; without it one cuMemcpyAsync per
 * segment). */
#define COLL_CUDA_OPTIONAL_SYMBOLS(X) \
  X(cuMemGetHandleForAddressRange) X(cuFlushGPUDirectRDMAWrites) X(cuMemcpy2DAsync)

#define COLL_CUDA_PFN(name) __typeof__(name)* pfn_##name;
typedef struct {
  COLL_CUDA_SYMBOLS(COLL_CUDA_PFN)
  COLL_CUDA_OPTIONAL_SYMBOLS(COLL_CUDA_PFN)
} collCudaTable;
#undef COLL_CUDA_PFN

/* Filled by a successful collCudaLoad (read-only afterwards). */
extern collCudaTable collCudaFns;
#define COLL_CU(name) (collCudaFns.pfn_##name)

/* r = COLL_CU(f)(...); if (r != CUDA_SUCCESS) return collCudaError(r, "what"); */
#define COLL_CU_CHECK(call, what)                                   \
  do {                                                              \
    CUresult collCuR_ = (call);                                     \
    if (collCuR_ != CUDA_SUCCESS) return collCudaError(collCuR_, what); \
  } while (0)
#endif

#endif
