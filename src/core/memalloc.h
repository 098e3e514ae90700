/*
 * memalloc.h - collMemAlloc memory (memfd segments the ranks of a node can
 * map) and collCommRegister's registrations (memalloc.c), as the engine's
 * zero-copy path (engine/zerocopy.h) sees them.
 */
#ifndef COLL_CORE_MEMALLOC_H_
#define COLL_CORE_MEMALLOC_H_

#include <stddef.h>
#include <stdint.h>

#include "coll.h"

/* What a peer needs to map the allocation that holds a buffer. */
typedef struct {
  uint64_t id;     /* unique in this process, never reused */
  uint64_t ino;    /* the memfd's inode: a peer checks it after opening fd */
  uint64_t bytes;  /* mapped size of the allocation */
  uint64_t offset; /* of the buffer in the allocation */
  int32_t fd;      /* this process's descriptor of the memfd */
  int32_t pad;
} collMemSeg;

/* 1 and *seg when [ptr, ptr + bytes) lies inside one live collMemAlloc
 * allocation of this process (bytes 0 counts as 1), else 0. Thread-safe. */
int collMemFind(const void* ptr, size_t bytes, collMemSeg* seg);

/* collMemAlloc, collMemFree, collCommRegister, collCommDeregister (coll.h),
 * called by api.c between collApiEnter and collApiLeave. */
collResult_t collMemAllocImpl(void** ptr, size_t size);
collResult_t collMemFreeImpl(void* ptr);
collResult_t collCommRegisterImpl(collComm_t comm, void* buff, size_t size, void** handle);
collResult_t collCommDeregisterImpl(collComm_t comm, void* handle);

/* Releases every registration of comm (it is being freed). */
void collMemRegDropComm(collComm_t comm);

#endif
