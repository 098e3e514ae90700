/* core.h - internal entry points between the core files. */
#ifndef COLL_CORE_H_
#define COLL_CORE_H_

#include "core/comm.h"
#include "engine/engine.h"

/* Runs ops now (stream NULL: blocking, after queued work drained) or queues
 * them on the stream's progress thread. */
collResult_t collSubmit(collComm_t comm, collStream_t stream, const collOp* ops, int nops);
/* Waits until every queued work item of comm finished. */
void collStreamsDrain(collComm_t comm);
/* Stops and joins the progress thread (after the queue drained or aborted). */
void collStreamsShutdown(collComm_t comm);
/* Creates a unique id whose root listens on `addr` (random key). */
collResult_t collUniqueIdAt(collUniqueId* id, const collSockAddr* addr, int bindAny);
/* collCommInitRankConfig for a rank 0 that hosts the root itself (launcher
 * mode): the communicator owns `root` (may be NULL), also on failure. */
collResult_t collCommInitRankRoot(collComm_t* comm, int nranks, collUniqueId commId, int rank, collConfig_t* config,
                                  collBootRoot* root);

#endif
