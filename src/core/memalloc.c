/*
 * memalloc.c - collMemAlloc / collMemFree and collCommRegister /
 * collCommDeregister (coll.h).
 *
 * An allocation is a memfd ("coll-mem") of whole pages, every page reserved
 * with fallocate (memory that runs short fails the allocation, never a
 * later SIGBUS), mapped shared. The process keeps the descriptor open for
 * the allocation's life, so peers of its node can open the same memory
 * through /proc/<pid>/fd/<fd> at any time (engine/zerocopy.c) and check the
 * inode. Allocations and registrations are two process-wide lists under one
 * mutex; a handle is the address of a registration record, only ever
 * compared with the list's entries (a wrong handle is an error, never a
 * dereference).
 */
#include "core/memalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/comm.h"
#include "misc/log.h"

typedef struct collMemAllocRec {
  char* base;
  size_t bytes; /* mapped (whole pages) */
  size_t asked; /* the caller's size */
  int fd;
  uint64_t ino, id;
  int regs; /* live registrations inside it */
  struct collMemAllocRec* next;
} collMemAllocRec;

typedef struct collMemReg {
  collComm_t comm;
  char* buff;
  size_t size;
  collMemAllocRec* alloc;
  struct collMemReg* next;
} collMemReg;

static pthread_mutex_t memLock = PTHREAD_MUTEX_INITIALIZER;
static collMemAllocRec* memAllocs;
static collMemReg* memRegs;
static uint64_t memNextId = 1;

/* The allocation that holds [p, p + n) entirely (*partial: the one that holds
 * p when the range runs past its end). Under memLock. */
static collMemAllocRec* memLookup(const void* p, size_t n, collMemAllocRec** partial) {
  uintptr_t a = (uintptr_t)p;
  if (partial) *partial = NULL;
  for (collMemAllocRec* r = memAllocs; r; r = r->next) {
    uintptr_t b = (uintptr_t)r->base;
    if (a < b || a >= b + r->bytes) continue;
    if (n <= b + r->bytes - a) return r;
    if (partial) *partial = r;
    return NULL;
  }
  return NULL;
}

collResult_t collMemAllocImpl(void** ptr, size_t size) {
  if (!ptr) return collSetError(collInvalidArgument, "collMemAlloc: ptr is NULL");
  *ptr = NULL;
  if (size == 0) return collSetError(collInvalidArgument, "collMemAlloc: size is 0");
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  if (size > SIZE_MAX - page) return collSetError(collInvalidArgument, "collMemAlloc: size %zu is too large", size);
  size_t bytes = (size + page - 1) / page * page;
  collMemAllocRec* rec = calloc(1, sizeof *rec);
  if (!rec) return collSetError(collSystemError, "collMemAlloc: out of memory");
  const char* step = "memfd_create";
  int fd = memfd_create("coll-mem", MFD_CLOEXEC), rc = fd < 0 ? -1 : 0;
  if (rc == 0) {
    step = "ftruncate";
    rc = ftruncate(fd, (off_t)bytes);
  }
  if (rc == 0) {
    step = "fallocate";
    rc = fallocate(fd, 0, 0, (off_t)bytes);
    if (rc != 0 && (errno == EOPNOTSUPP || errno == ENOSYS)) rc = 0; /* lazily backed then */
  }
  struct stat st;
  if (rc == 0) {
    step = "fstat";
    rc = fstat(fd, &st);
  }
  void* base = MAP_FAILED;
  if (rc == 0) {
    step = "mmap";
    base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) rc = -1;
  }
  if (rc != 0) {
    int e = errno;
    if (fd >= 0) close(fd);
    free(rec);
    return collSetError(collSystemError, "collMemAlloc: %s for %zu bytes failed: %s", step, bytes, strerror(e));
  }
  rec->base = base;
  rec->bytes = bytes;
  rec->asked = size;
  rec->fd = fd;
  rec->ino = (uint64_t)st.st_ino;
  pthread_mutex_lock(&memLock);
  rec->id = memNextId++;
  rec->next = memAllocs;
  memAllocs = rec;
  pthread_mutex_unlock(&memLock);
  *ptr = base;
  return collSuccess;
}

collResult_t collMemFreeImpl(void* ptr) {
  if (!ptr) return collSuccess;
  pthread_mutex_lock(&memLock);
  collMemAllocRec** pp = &memAllocs;
  while (*pp && (*pp)->base != (char*)ptr) pp = &(*pp)->next;
  collMemAllocRec* rec = *pp;
  if (!rec) {
    collMemAllocRec* inside = memLookup(ptr, 1, NULL);
    pthread_mutex_unlock(&memLock);
    if (inside)
      return collSetError(collInvalidArgument,
                          "collMemFree: %p is inside the allocation at %p, not its start (pass what collMemAlloc "
                          "returned)",
                          ptr, (void*)inside->base);
    return collSetError(collInvalidArgument,
                        "collMemFree: %p was not returned by collMemAlloc, or was freed already", ptr);
  }
  if (rec->regs > 0) {
    int n = rec->regs;
    pthread_mutex_unlock(&memLock);
    return collSetError(collInvalidUsage,
                        "collMemFree: %p (%zu bytes) is still registered %d time%s with a communicator; "
                        "collCommDeregister first (nothing was freed)",
                        ptr, rec->asked, n, n == 1 ? "" : "s");
  }
  *pp = rec->next;
  pthread_mutex_unlock(&memLock);
  munmap(rec->base, rec->bytes);
  close(rec->fd);
  free(rec);
  return collSuccess;
}

int collMemFind(const void* ptr, size_t bytes, collMemSeg* seg) {
  if (!ptr) return 0;
  pthread_mutex_lock(&memLock);
  collMemAllocRec* r = memLookup(ptr, bytes ? bytes : 1, NULL);
  if (r) {
    seg->id = r->id;
    seg->ino = r->ino;
    seg->bytes = r->bytes;
    seg->offset = (uint64_t)((const char*)ptr - r->base);
    seg->fd = r->fd;
    seg->pad = 0;
  }
  pthread_mutex_unlock(&memLock);
  return r != NULL;
}

collResult_t collCommRegisterImpl(collComm_t comm, void* buff, size_t size, void** handle) {
  if (handle) *handle = NULL;
  if (!handle) return collSetError(collInvalidArgument, "collCommRegister: handle is NULL");
  if (!buff) return collSetError(collInvalidArgument, "collCommRegister: buff is NULL");
  if (size == 0) return collSetError(collInvalidArgument, "collCommRegister: size is 0");
  collResult_t r = collCommEnterAny(comm, "collCommRegister");
  if (r != collSuccess) return r;
  collMemReg* reg = calloc(1, sizeof *reg);
  pthread_mutex_lock(&memLock);
  collMemAllocRec* partial;
  collMemAllocRec* a = memLookup(buff, size, &partial);
  collMemReg* dup = NULL;
  for (collMemReg* g = memRegs; a && g; g = g->next)
    if (g->comm == comm && g->buff == (char*)buff && g->size == size) dup = g;
  if (!reg) {
    r = collSetError(collSystemError, "collCommRegister: out of memory");
  } else if (partial) {
    r = collSetError(collInvalidArgument,
                     "collCommRegister: %zu bytes at %p run %zu bytes beyond the end of their collMemAlloc "
                     "allocation (%zu bytes at %p)",
                     size, buff, (size_t)((uintptr_t)buff + size - (uintptr_t)(partial->base + partial->asked)),
                     partial->asked, (void*)partial->base);
  } else if (!a) {
    r = collSetError(collInvalidArgument,
                     "collCommRegister: %p is not memory of collMemAlloc in this process (only collMemAlloc "
                     "memory can be registered: the node's peers map it; memory of malloc or mmap, or an "
                     "address of another process, cannot be)",
                     buff);
  } else if (dup) {
    r = collSetError(collInvalidUsage,
                     "collCommRegister: %zu bytes at %p are already registered with this communicator (handle "
                     "%p)",
                     size, buff, (void*)dup);
  } else if ((char*)buff + size > a->base + a->asked) {
    /* inside the last page, past the size asked for: still the caller's error */
    r = collSetError(collInvalidArgument,
                     "collCommRegister: %zu bytes at %p run %zu bytes beyond the end of their collMemAlloc "
                     "allocation (%zu bytes at %p)",
                     size, buff, (size_t)((char*)buff + size - (a->base + a->asked)), a->asked, (void*)a->base);
  } else {
    reg->comm = comm;
    reg->buff = buff;
    reg->size = size;
    reg->alloc = a;
    reg->next = memRegs;
    memRegs = reg;
    a->regs++;
    *handle = reg;
    reg = NULL;
  }
  pthread_mutex_unlock(&memLock);
  free(reg);
  collCommLeave(comm);
  return r;
}

collResult_t collCommDeregisterImpl(collComm_t comm, void* handle) {
  if (!handle) return collSetError(collInvalidArgument, "collCommDeregister: handle is NULL");
  collResult_t r = collCommEnterAny(comm, "collCommDeregister");
  if (r != collSuccess) return r;
  pthread_mutex_lock(&memLock);
  collMemReg** pp = &memRegs;
  while (*pp && !(*pp == (collMemReg*)handle && (*pp)->comm == comm)) pp = &(*pp)->next;
  collMemReg* g = *pp;
  if (g) {
    *pp = g->next;
    g->alloc->regs--;
  }
  pthread_mutex_unlock(&memLock);
  if (!g)
    r = collSetError(collInvalidArgument,
                     "collCommDeregister: handle %p is not a live registration of this communicator (never "
                     "returned by collCommRegister on it, or deregistered already)",
                     handle);
  free(g);
  collCommLeave(comm);
  return r;
}

void collMemRegDropComm(collComm_t comm) {
  pthread_mutex_lock(&memLock);
  collMemReg** pp = &memRegs;
  while (*pp) {
    collMemReg* g = *pp;
    if (g->comm != comm) {
      pp = &g->next;
      continue;
    }
    *pp = g->next;
    g->alloc->regs--;
    free(g);
  }
  pthread_mutex_unlock(&memLock);
}
