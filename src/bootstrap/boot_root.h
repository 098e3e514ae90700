/* boot_root.h - the bootstrap root thread (boot_root.c). */
#ifndef COLL_BOOT_ROOT_H_
#define COLL_BOOT_ROOT_H_

#include "bootstrap/boot_proto.h"
#include "coll.h"

typedef struct collBootRoot collBootRoot;
/* Called on the root thread when a communicator this root formed must fail
 * (a rank of it joined again from another process). */
typedef void (*collBootRootFailFn)(void* ctx, collResult_t r, const char* msg);

typedef struct {
  const uint8_t* key; /* COLL_BOOT_KEY_BYTES */
  int nranks;         /* ranks of the job; <= 0: from the first hello */
  double timeoutSec;  /* init timeout (COLL_INIT_TIMEOUT); 0: none. Counted from the start, and for a
                         non-lingering root again from the first hello */
  int linger;         /* 1: keep listening after the communicator formed until collBootRootStop */
  const char* what;   /* how the user named the address, for messages (NULL: none) */
} collBootRootCfg;

/* Listens on addr (bindAny: every interface of its family) and starts the
 * root thread. addr gets the bound port. out NULL: the root is detached and
 * ends on its own (formed, failed, timed out); else the caller owns it and
 * must call collBootRootStop. *inUse (may be NULL) = 1 when the address was
 * taken (EADDRINUSE). Errors: collSystemError. */
collResult_t collBootRootStart(const collBootRootCfg* cfg, collSockAddr* addr, int bindAny, collBootRoot** out,
                               int* inUse);
/* Who to fail when a rank joins a formed communicator twice. */
void collBootRootSetOwner(collBootRoot* root, collBootRootFailFn fn, void* ctx);
/* Stops the root and releases the caller's reference; its listener is
 * closed when this returns. A root still collecting ranks fails them with
 * `reason` (NULL: a default). A root that failed early (not a timeout)
 * first tells every rank that has not heard yet, waiting for them up to
 * 5 s. NULL is accepted. */
void collBootRootStop(collBootRoot* root, const char* reason);

#endif
