/* memtype.c - memory type of a pointer through the driver's pointer
 * attributes (memtype.h). */
#include "device/memtype.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "device/cuda_loader.h"
#include "misc/log.h"

int collMemAllHost(void) { return !collCudaDriverPresent(); }

const char* collMemDescribe(const collMemInfo* m, char* buf, int size) {
  if (m->kind == COLL_MEM_DEVICE) snprintf(buf, (size_t)size, "CUDA device memory of GPU %d", m->device);
  else if (m->kind == COLL_MEM_MANAGED) snprintf(buf, (size_t)size, "CUDA managed memory of GPU %d", m->device);
  else snprintf(buf, (size_t)size, "%s", m->pinned ? "pinned host memory" : "host memory");
  return buf;
}

collResult_t collMemQuery(const void* p, collMemInfo* info) {
  if (!info) return collSetError(collInvalidArgument, "collMemQuery: info is NULL");
  info->kind = COLL_MEM_HOST;
  info->device = -1;
  info->pinned = 0;
  if (!p || !collCudaDriverPresent()) return collSuccess;
#ifdef COLL_HAVE_CUDA
  if (collCudaLoadQuiet() != collSuccess) {
    static atomic_int told;
    if (!atomic_exchange(&told, 1))
      COLL_INFO(COLL_SUB_INIT, "CUDA driver mapped but not usable, so every buffer is host memory: %s",
                collCudaLoadMessage());
    return collSuccess;
  }
  /* zero-filled: the driver may write fewer bytes than an int (a bool) */
  unsigned int memType = 0, managed = 0;
  int ordinal = -1;
  CUpointer_attribute attrs[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                  CU_POINTER_ATTRIBUTE_IS_MANAGED};
  void* data[3] = {&memType, &ordinal, &managed};
  CUresult r = COLL_CU(cuPointerGetAttributes)(3, attrs, data, (CUdeviceptr)(uintptr_t)p);
  if (r != CUDA_SUCCESS) {
    char what[96];
    snprintf(what, sizeof what, "CUDA: cuPointerGetAttributes(%p) failed", p);
    return collCudaError(r, what);
  }
  if (managed) {
    info->kind = COLL_MEM_MANAGED;
    info->device = ordinal;
  } else if (memType == CU_MEMORYTYPE_DEVICE) {
    info->kind = COLL_MEM_DEVICE;
    info->device = ordinal;
  } else if (memType == CU_MEMORYTYPE_HOST) {
    info->pinned = 1;
  }
#endif
  return collSuccess;
}

collResult_t collMemCheckCall(const char* fn, int n, const void* const* bufs, const char* const* names,
                              collMemInfo* info) {
  collMemInfo first = {COLL_MEM_HOST, -1, 0}, m;
  int firstIdx = -1;
  if (collMemAllHost()) n = 0; /* the host-only process: no query per buffer */
  for (int i = 0; i < n; i++) {
    if (!bufs[i]) continue;
    collResult_t r = collMemQuery(bufs[i], &m);
    if (r != collSuccess) return collSetError(r, "%s: %s: %s", fn, names[i], collLastErrorMessage());
    if (firstIdx < 0) {
      first = m;
      firstIdx = i;
      continue;
    }
    int hostA = first.kind == COLL_MEM_HOST, hostB = m.kind == COLL_MEM_HOST;
    if (hostA != hostB || (!hostA && first.device != m.device)) {
      char a[64], b[64];
      return collSetError(collInvalidArgument,
                          "%s: %s is %s but %s is %s; all buffers of one call must be host memory or on one GPU", fn,
                          names[i], collMemDescribe(&m, b, sizeof b), names[firstIdx],
                          collMemDescribe(&first, a, sizeof a));
    }
  }
  if (info) *info = first;
  return collSuccess;
}
