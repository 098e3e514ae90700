/*
 * reg.h - memory registration owned by the engine: one registration cache
 * (engine/regcache.h) per communicator and transport slot, keyed by address
 * range, for transports that need registered memory (ib, COLL_NET_PLUGIN
 * transports; not tcp, shm, loopback). The engine asks for a memory handle
 * before each isend/irecv and passes it; the transport then registers
 * nothing itself.
 *
 * The remap hazard (a user frees a buffer coll registered and a new
 * allocation reuses the addresses: a cached registration would still point
 * at the old, pinned pages) is handled by checking every cache hit against
 * the page frames the registration pinned: a pinned page cannot move, so the
 * range still maps the registered memory exactly when /proc/self/pagemap
 * shows the same frame numbers for every page of the request (a read of 8
 * bytes per page). COLL_REG_CACHE selects:
 *   -1 (default): cache with that check where frame numbers can be read
 *      (root or CAP_SYS_ADMIN), else register per message and release at
 *      completion;
 *    0: register per message;
 *    1: cache without the check (the application never frees or remaps a
 *      buffer it passed to coll while the communicator lives, as caching
 *      allocators do).
 * Device memory (the device path between nodes, engine/devpath.c) has
 * caches of its own per slot, so a host and a device entry never alias;
 * it is registered at every size (the transport must never copy it
 * through host bounce buffers: its eager path is for host memory only),
 * through regMrDmaBuf with a dma-buf fd of the range where the transport
 * says COLL_PTR_DMABUF (the fd comes from the CUDA driver and is closed
 * once registered), else through regMr with COLL_PTR_CUDA. Device entries
 * are not checked against page frames (there are none to read); they are
 * cached unless COLL_REG_CACHE=0 (a cuMemFree of a registered range while
 * the communicator lives is, as for COLL_REG_CACHE=1 on the host, what the
 * cache cannot see; the engine's own device scratch is forgotten when
 * freed).
 * A failed registration of host memory is not an error here: the handle
 * is NULL and the transport registers the buffer itself. Of device memory
 * it is: NULL with the error set (the post must fail). Not thread-safe per communicator
 * (the engine runs one operation at a time on it).
 */
#ifndef COLL_ENGINE_REG_H_
#define COLL_ENGINE_REG_H_

#include <stddef.h>

#include "core/comm.h"
#include "device/memtype.h"

/* The memory handle for [ptr, ptr + bytes) of memory type mem
 * (COLL_MEM_HOST, or COLL_MEM_DEVICE: GPU memory, see above) on the
 * transport of `peer` (tcomm: the connection's send or recv comm), or NULL:
 * host memory, no registration needed or it failed; device memory, it
 * failed (error set: collSystemError or the transport's, naming the range
 * and the transport). *token holds the reference until collEngineRegDone;
 * a token already set (a post the transport refused, retried) is reused. */
void* collEngineReg(collComm_t comm, int peer, void* tcomm, const void* ptr, size_t bytes, int mem, void** token);
/* The memory handle a token of collEngineReg holds (NULL: none). */
void* collEngineRegHandle(void* token);
/* Drops the reference of a completed post; *token becomes NULL. */
void collEngineRegDone(collComm_t comm, int peer, void** token);
/* The engine frees or moves its own buffer [ptr, ptr + bytes) (scratch,
 * staging): registrations of it are dropped. */
void collEngineRegForget(collComm_t comm, const void* ptr, size_t bytes);
/* Releases every registration of the communicator (before its connections
 * close: deregistration goes through them). */
void collEngineRegFree(collComm_t comm);
/* Counters of the communicator's caches, all slots together. */
typedef struct {
  unsigned long long hits, misses, invalidations, evictions, live;
  unsigned long long dmabufRegs, cudaRegs; /* device memory registered through regMrDmaBuf / regMr(COLL_PTR_CUDA) */
  int mode; /* 0 per message, 1 cached + frame check, 2 cached unchecked */
} collEngineRegStats;
void collEngineRegGetStats(collComm_t comm, collEngineRegStats* st);
/* Whether this process can read page frame numbers (cached). */
int collEngineRegFramesReadable(void);

#endif
