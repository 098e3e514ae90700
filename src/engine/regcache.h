/*
 * regcache.h - a cache of memory registrations keyed by address range.
 *
 * Generic: the owner supplies reg/dereg callbacks (the engine passes a
 * transport's regMr/deregMr, engine/reg.h; the ib transport, for callers
 * that give no memory handle, ibv_reg_mr/ibv_dereg_mr on its protection
 * domain); nothing here knows verbs. Ranges are whole pages. A lookup returns an entry whose range covers
 * the request with at least the requested access, most recently used first,
 * with a reference held until collRegCachePut. Unreferenced entries beyond
 * `maxEntries` are released, least recently used first; maxEntries 0 caches
 * nothing (every get registers, the last put releases).
 *
 * What the cache cannot see: memory the user frees while coll holds a
 * registration of it. The registration pins the old pages. If the allocator
 * keeps the pages mapped (small malloc), the addresses still map to them and
 * a later buffer there works. If it unmapped them (large malloc, munmap) and
 * a new allocation reuses the addresses, a cached entry would send from /
 * receive into the old pages, silently (test_collectives does exactly this:
 * each case mmaps fresh buffers; on Soft-RoCE with the cache on, its
 * reduce-scatter of 4 MiB read garbage). Releasing pages back to the kernel
 * (MADV_DONTNEED, heap trimming) has the same effect. The engine's owner of
 * this cache (engine/reg.h) therefore checks every hit against the page
 * frames the registration pinned (/proc/self/pagemap) and invalidates the
 * entry when they differ; where the frames cannot be read (no
 * CAP_SYS_ADMIN) it registers per message unless told otherwise.
 *
 * Thread-safe (one mutex).
 */
#ifndef COLL_ENGINE_REGCACHE_H_
#define COLL_ENGINE_REGCACHE_H_

#include <stddef.h>
#include <stdint.h>

/* reg: registers [addr, addr + len) with `access` (owner-defined bits);
 * returns 0 and *handle, or an errno value. dereg releases a handle. */
typedef int (*collRegFn)(void* ctx, void* addr, size_t len, int access, void** handle);
typedef void (*collDeregFn)(void* ctx, void* handle);

typedef struct collRegEntry {
  uintptr_t start, end; /* page-aligned [start, end) */
  int access;
  void* handle;
  int refs;
  int live; /* still findable (not evicted) */
  struct collRegEntry *prev, *next; /* MRU list */
} collRegEntry;

typedef struct collRegCache collRegCache;

typedef struct {
  uint64_t hits, misses, evictions, invalidations, live;
} collRegStats;

collRegCache* collRegCacheCreate(collRegFn reg, collDeregFn dereg, void* ctx, int maxEntries);
/* Entry covering [addr, addr + len) (len 0 counts as 1 byte) with access
 * bits including `access`: 0 and *entry, or the reg callback's errno. */
int collRegCacheGet(collRegCache* c, const void* addr, size_t len, int access, collRegEntry** entry);
void collRegCachePut(collRegCache* c, collRegEntry* e);
/* Like Put, and the entry is no longer found (the memory behind it changed):
 * released once its last reference goes. */
void collRegCacheInvalidate(collRegCache* c, collRegEntry* e);
/* Every entry that overlaps [addr, addr + len) is no longer found (memory
 * the owner frees); referenced ones go with their last reference. */
void collRegCacheForget(collRegCache* c, const void* addr, size_t len);
void collRegCacheStats(collRegCache* c, collRegStats* st);
/* Releases every entry, also those still referenced (the references held
 * become invalid). */
void collRegCacheDestroy(collRegCache* c);

#endif
