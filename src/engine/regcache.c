/* regcache.c - registrations by address range, MRU list (regcache.h). */
#include "engine/regcache.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

struct collRegCache {
  pthread_mutex_t lock;
  collRegFn reg;
  collDeregFn dereg;
  void* ctx;
  int max;
  int count; /* live entries */
  uintptr_t page;
  collRegEntry* head; /* most recently used */
  collRegEntry* tail;
  collRegEntry* limbo; /* entries no longer findable that still have references */
  collRegStats st;
};

collRegCache* collRegCacheCreate(collRegFn reg, collDeregFn dereg, void* ctx, int maxEntries) {
  collRegCache* c = calloc(1, sizeof *c);
  if (!c) return NULL;
  pthread_mutex_init(&c->lock, NULL);
  c->reg = reg;
  c->dereg = dereg;
  c->ctx = ctx;
  c->max = maxEntries < 0 ? 0 : maxEntries;
  long p = sysconf(_SC_PAGESIZE);
  c->page = p > 0 ? (uintptr_t)p : 4096;
  return c;
}

static void unlink_(collRegCache* c, collRegEntry* e) {
  if (e->prev) e->prev->next = e->next;
  else c->head = e->next;
  if (e->next) e->next->prev = e->prev;
  else c->tail = e->prev;
  e->prev = e->next = NULL;
}

static void limboAdd(collRegCache* c, collRegEntry* e) {
  e->prev = NULL;
  e->next = c->limbo;
  if (c->limbo) c->limbo->prev = e;
  c->limbo = e;
}

static void limboRemove(collRegCache* c, collRegEntry* e) {
  if (e->prev) e->prev->next = e->next;
  else c->limbo = e->next;
  if (e->next) e->next->prev = e->prev;
  e->prev = e->next = NULL;
}

static void pushFront(collRegCache* c, collRegEntry* e) {
  e->prev = NULL;
  e->next = c->head;
  if (c->head) c->head->prev = e;
  c->head = e;
  if (!c->tail) c->tail = e;
}

/* Drops unreferenced live entries from the LRU end while over the limit. */
static void evict(collRegCache* c) {
  collRegEntry* e = c->tail;
  while (c->count > c->max && e) {
    collRegEntry* prev = e->prev;
    if (e->refs == 0) {
      unlink_(c, e);
      c->count--;
      c->st.evictions++;
      c->dereg(c->ctx, e->handle);
      free(e);
    }
    e = prev;
  }
}

int collRegCacheGet(collRegCache* c, const void* addr, size_t len, int access, collRegEntry** entry) {
  uintptr_t a = (uintptr_t)addr, b = a + (len ? len : 1);
  uintptr_t s = a & ~(c->page - 1), t = (b + c->page - 1) & ~(c->page - 1);
  pthread_mutex_lock(&c->lock);
  for (collRegEntry* e = c->head; e; e = e->next) {
    if (e->start <= s && t <= e->end && (e->access & access) == access) {
      if (e != c->head) {
        unlink_(c, e);
        pushFront(c, e);
      }
      e->refs++;
      c->st.hits++;
      *entry = e;
      pthread_mutex_unlock(&c->lock);
      return 0;
    }
  }
  c->st.misses++;
  collRegEntry* e = calloc(1, sizeof *e);
  if (!e) {
    pthread_mutex_unlock(&c->lock);
    return 12; /* ENOMEM */
  }
  int rc = c->reg(c->ctx, (void*)s, t - s, access, &e->handle);
  if (rc != 0) {
    free(e);
    pthread_mutex_unlock(&c->lock);
    return rc;
  }
  e->start = s;
  e->end = t;
  e->access = access;
  e->refs = 1;
  e->live = c->max > 0;
  if (e->live) {
    pushFront(c, e);
    c->count++;
    evict(c);
  } else {
    limboAdd(c, e);
  }
  *entry = e;
  pthread_mutex_unlock(&c->lock);
  return 0;
}

void collRegCachePut(collRegCache* c, collRegEntry* e) {
  if (!e) return;
  pthread_mutex_lock(&c->lock);
  if (--e->refs == 0 && !e->live) {
    limboRemove(c, e);
    c->dereg(c->ctx, e->handle);
    free(e);
  } else if (e->refs == 0) {
    evict(c);
  }
  pthread_mutex_unlock(&c->lock);
}

void collRegCacheInvalidate(collRegCache* c, collRegEntry* e) {
  if (!e) return;
  pthread_mutex_lock(&c->lock);
  if (e->live) {
    unlink_(c, e);
    c->count--;
    e->live = 0;
    c->st.invalidations++;
    limboAdd(c, e);
  }
  if (--e->refs == 0) {
    limboRemove(c, e);
    c->dereg(c->ctx, e->handle);
    free(e);
  }
  pthread_mutex_unlock(&c->lock);
}

void collRegCacheForget(collRegCache* c, const void* addr, size_t len) {
  uintptr_t a = (uintptr_t)addr, b = a + len;
  if (!c || !addr || !len) return;
  pthread_mutex_lock(&c->lock);
  for (collRegEntry* e = c->head; e;) {
    collRegEntry* next = e->next;
    if (e->start < b && a < e->end) {
      unlink_(c, e);
      c->count--;
      e->live = 0;
      c->st.invalidations++;
      if (e->refs) {
        limboAdd(c, e);
      } else {
        c->dereg(c->ctx, e->handle);
        free(e);
      }
    }
    e = next;
  }
  pthread_mutex_unlock(&c->lock);
}

void collRegCacheStats(collRegCache* c, collRegStats* st) {
  pthread_mutex_lock(&c->lock);
  *st = c->st;
  st->live = (uint64_t)c->count;
  pthread_mutex_unlock(&c->lock);
}

void collRegCacheDestroy(collRegCache* c) {
  if (!c) return;
  while (c->head) {
    collRegEntry* e = c->head;
    unlink_(c, e);
    c->dereg(c->ctx, e->handle);
    free(e);
  }
  while (c->limbo) {
    collRegEntry* e = c->limbo;
    limboRemove(c, e);
    c->dereg(c->ctx, e->handle);
    free(e);
  }
  pthread_mutex_destroy(&c->lock);
  free(c);
}
