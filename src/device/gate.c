/* gate.c - stream waits on a pinned host counter (gate.h). */
#include "device/gate.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "device/cuda_loader.h"
#include "misc/log.h"

struct collDevGate {
  _Atomic uint32_t* word; /* pinned host memory, device mapped */
  uint64_t devPtr;        /* the same word as the GPU addresses it */
  atomic_int memOps;      /* 1: cuStreamWaitValue32 works; 0: host-function fallback */
};

void collDevGateOpen(collDevGate* g, uint32_t v) { atomic_store_explicit(g->word, v, memory_order_release); }

uint32_t collDevGateValue(const collDevGate* g) { return atomic_load_explicit(g->word, memory_order_acquire); }

int collDevGateUsesMemOps(const collDevGate* g) { return atomic_load(&g->memOps); }

#ifdef COLL_HAVE_CUDA
collResult_t collDevGateCreate(collDevGate** out) {
  if (!out) return collSetError(collInvalidArgument, "collDevGateCreate: gate is NULL");
  *out = NULL;
  collResult_t r = collCudaLoad();
  if (r != collSuccess) return r;
  collDevGate* g = calloc(1, sizeof *g);
  if (!g) return collSetError(collSystemError, "collDevGateCreate: out of memory");
  void* p = NULL;
  CUresult cr = COLL_CU(cuMemHostAlloc)(&p, 64, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
  if (cr != CUDA_SUCCESS) {
    free(g);
    return collCudaError(cr, "CUDA: cuMemHostAlloc of a stream gate failed");
  }
  CUdeviceptr d = 0;
  if ((cr = COLL_CU(cuMemHostGetDevicePointer)(&d, p, 0)) != CUDA_SUCCESS) {
    COLL_CU(cuMemFreeHost)(p);
    free(g);
    return collCudaError(cr, "CUDA: cuMemHostGetDevicePointer of a stream gate failed");
  }
  g->word = p;
  atomic_store(g->word, 0);
  g->devPtr = (uint64_t)d;
  atomic_store(&g->memOps, 1);
  *out = g;
  return collSuccess;
}

typedef struct {
  collDevGate* gate;
  uint32_t v;
} collGateHostWait;

/* Runs on the driver's callback thread: polls until the gate reaches v. */
static void CUDA_CB collDevGateHostFn(void* arg) {
  collGateHostWait* w = arg;
  while ((int32_t)(collDevGateValue(w->gate) - w->v) < 0) sched_yield();
  free(w);
}

collResult_t collDevGateWait(collDevGate* g, uint32_t v, void* stream) {
  if (atomic_load(&g->memOps)) {
    CUresult r = COLL_CU(cuStreamWaitValue32)((CUstream)stream, (CUdeviceptr)g->devPtr, v, CU_STREAM_WAIT_VALUE_GEQ);
    if (r == CUDA_SUCCESS) return collSuccess;
    if (r != CUDA_ERROR_NOT_SUPPORTED) return collCudaError(r, "CUDA: cuStreamWaitValue32 failed");
    atomic_store(&g->memOps, 0);
    COLL_INFO(COLL_SUB_INIT, "CUDA: stream memory operations not supported here; streams wait in a host function");
  }
  collGateHostWait* w = malloc(sizeof *w);
  if (!w) return collSetError(collSystemError, "collDevGateWait: out of memory");
  w->gate = g;
  w->v = v;
  CUresult r = COLL_CU(cuLaunchHostFunc)((CUstream)stream, collDevGateHostFn, w);
  if (r != CUDA_SUCCESS) {
    free(w);
    return collCudaError(r, "CUDA: cuLaunchHostFunc failed");
  }
  return collSuccess;
}

void collDevGateDestroy(collDevGate* g) {
  if (!g) return;
  COLL_CU(cuMemFreeHost)((void*)g->word);
  free(g);
}
#else
collResult_t collDevGateCreate(collDevGate** out) {
  if (out) *out = NULL;
  return collCudaLoad();
}
collResult_t collDevGateWait(collDevGate* g, uint32_t v, void* stream) {
  (void)g, (void)v, (void)stream;
  return collCudaLoad();
}
void collDevGateDestroy(collDevGate* g) { (void)g; }
#endif
