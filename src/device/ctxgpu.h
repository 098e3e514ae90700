/* ctxgpu.h - the GPU of the calling thread's current CUDA context. */
#ifndef COLL_DEVICE_CTXGPU_H_
#define COLL_DEVICE_CTXGPU_H_

#include <stddef.h>

/* The PCI bus id of the device of the calling thread's current CUDA context
 * into buf (len bytes), as "dddd:bb:dd.f" in lower-case hex (hwloc's form),
 * and its CUDA ordinal into *ordinal (may be NULL). Returns 1 on success, 0
 * (buf "") when libcoll was built without CUDA, the CUDA driver is not
 * mapped in this process (never loads it: collCudaDriverPresent), the driver
 * cannot be used, no context is current, or a driver call fails. Sets no
 * error and logs nothing. Thread-safe. */
int collCudaCurrentBusId(char* buf, size_t len, int* ordinal);

#endif
