/* core.h - internal entry points between the core files. */
#ifndef COLL_CORE_H_
#define COLL_CORE_H_

#include "core/comm.h"
#include "engine/engine.h"

/* Runs ops now (stream NULL: blocking, after queued work drained) or queues
 * them on the stream's progress thread. */
collResult_t collSubmit(collComm_t comm, collStream_t stream, const collOp* ops, int nops);
/* collSubmit on several streams of comm (a group's CUDA streams: the work
 * is ordered on each; nstreams 0: blocking). */
collResult_t collSubmitStreams(collComm_t comm, collStream_t const* streams, int nstreams, const collOp* ops,
                               int nops);
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

/* The implementations behind the public entry points of coll.h: api.c
 * defines each public function as a call of its *Impl, bracketed by
 * collApiEnter / collApiLeave (collGetLastError describes the last call). */
collResult_t collGetVersionImpl(int* version);
collResult_t collGetUniqueIdImpl(collUniqueId* uniqueId);
collResult_t collCommInitRankImpl(collComm_t* comm, int nranks, collUniqueId commId, int rank);
collResult_t collCommInitRankConfigImpl(collComm_t* comm, int nranks, collUniqueId commId, int rank,
                                        collConfig_t* config);
collResult_t collCommInitAllImpl(collComm_t* comms, int ndev, const int* devlist);
collResult_t collCommInitFromEnvImpl(collComm_t* comm, collConfig_t* config);
collResult_t collCommSplitImpl(collComm_t comm, int color, int key, collComm_t* newcomm, collConfig_t* config);
collResult_t collCommDestroyImpl(collComm_t comm);
collResult_t collCommAbortImpl(collComm_t comm);
collResult_t collCommSetTimeoutImpl(collComm_t comm, int timeoutSec);
collResult_t collCommGetTimeoutImpl(collComm_t comm, int* timeoutSec);
collResult_t collCommSetCallTimeoutImpl(collComm_t comm, int timeoutMs);
collResult_t collCommGetAsyncErrorImpl(collComm_t comm, collResult_t* asyncError);
collResult_t collCommCountImpl(const collComm_t comm, int* count);
collResult_t collCommUserRankImpl(const collComm_t comm, int* rank);
collResult_t collStreamCreateImpl(collComm_t comm, collStream_t* stream);
collResult_t collStreamSynchronizeImpl(collStream_t stream);
collResult_t collStreamQueryImpl(collStream_t stream);
collResult_t collStreamDestroyImpl(collStream_t stream);
collResult_t collAllReduceImpl(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype,
                               collRedOp_t op, collComm_t comm, collStream_t stream);
collResult_t collAllGatherImpl(const void* sendbuff, void* recvbuff, size_t sendcount, collDataType_t datatype,
                               collComm_t comm, collStream_t stream);
collResult_t collReduceScatterImpl(const void* sendbuff, void* recvbuff, size_t recvcount, collDataType_t datatype,
                                   collRedOp_t op, collComm_t comm, collStream_t stream);
collResult_t collBroadcastImpl(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, int root,
                               collComm_t comm, collStream_t stream);
collResult_t collReduceImpl(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype,
                            collRedOp_t op, int root, collComm_t comm, collStream_t stream);
collResult_t collSendImpl(const void* sendbuff, size_t count, collDataType_t datatype, int peer, collComm_t comm,
                          collStream_t stream);
collResult_t collRecvImpl(void* recvbuff, size_t count, collDataType_t datatype, int peer, collComm_t comm,
                          collStream_t stream);
collResult_t collBarrierImpl(collComm_t comm, collStream_t stream);
collResult_t collGroupStartImpl(void);
collResult_t collGroupEndImpl(void);
/* src/obs: counters and flight recorder */
collResult_t collCommGetStatsImpl(collComm_t comm, collStats_t* stats);
collResult_t collCommGetPeerStatsImpl(collComm_t comm, collPeerStats_t* peers, int npeers);
collResult_t collCommGetCollStatsImpl(collComm_t comm, collCollStats_t* rows, int max, int* nrows);
collResult_t collCommWriteStatsImpl(collComm_t comm, const char* path);
collResult_t collCommGetCallRecordsImpl(collComm_t comm, collCallRecord_t* records, int max, int* n);
collResult_t collCommDumpFlightRecorderImpl(collComm_t comm, const char* path);

#endif
