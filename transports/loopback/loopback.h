/* loopback.h - in-process transport: ranks are threads of one process. */
#ifndef COLL_LOOPBACK_H_
#define COLL_LOOPBACK_H_

#include <stddef.h>

#include "coll_net.h"

/* Operations table of the "loopback" transport (COLL_NET=loopback). Beyond
 * coll_net.h: one device; connect and accept never block; at most
 * COLL_LB_MAX_REQUESTS requests in flight per comm (beyond that isend/irecv
 * return collSuccess with *request = NULL: retry); test returning an error
 * releases the request; iput is not supported; iflush returns *request NULL.
 * A handle made by another process is rejected (collInvalidUsage). */
extern const collNet_t collNetLoopback;

#define COLL_LB_MAX_REQUESTS 64
#define COLL_LB_EAGER_DEFAULT (64 * 1024)

/* ---- test hooks (internal, not exported from libcoll.so) ---------------- */
enum {
  COLL_LB_FAULT_NONE = 0,  /* no fault */
  COLL_LB_FAULT_DROP = 1,  /* after `arg` more isends (process-wide), the
                              connection carrying the next one breaks as if
                              its peer died: unfinished and later requests of
                              both ends fail with collRemoteError; fires once */
  COLL_LB_FAULT_DELAY = 2, /* every later message is delivered no sooner than
                              `arg` microseconds after its isend */
};
/* Sets the process-wide fault mode (resets the DROP message counter). */
void collLoopbackSetFault(int mode, long arg);
/* Messages up to `bytes` are copied into a bounce buffer at isend (the send
 * completes at once); larger ones are rendezvous (the send completes when the
 * receiver copied it). Values below 64 are raised to 64: the engine's
 * connection hello must stay eager. Default COLL_LB_EAGER_DEFAULT. */
void collLoopbackSetEagerLimit(size_t bytes);
/* Listen endpoints plus connections not yet freed (for leak checks). */
int collLoopbackLiveObjects(void);

#endif
