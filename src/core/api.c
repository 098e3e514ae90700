/*
 * api.c - the public entry points of coll.h. Each calls its *Impl (core.h)
 * between collApiEnter and collApiLeave, so that collGetLastError reports
 * the failure of the last call on this thread and is empty after a call that
 * succeeded (a failure of an earlier call does not linger); after
 * collCommGetAsyncError reported a failed communicator, it is that failure's
 * message. Inits first
 * check the process-wide settings that would make them fail anyway
 * (COLL_ALGO), before anything connects.
 */
#include "coll.h"
#include "core/comm.h"
#include "core/core.h"
#include "core/devcall.h"
#include "core/memalloc.h"
#include "misc/log.h"
#include "tuner/algo_env.h"

#define COLL_API(call)       \
  do {                       \
    collApiEnter();          \
    return collApiLeave(call); \
  } while (0)

/* Settings checked before any init starts. */
static collResult_t collInitChecks(void) {
  collLogInit();
  return collAlgoCheckEnv();
}

#define COLL_API_INIT(call)                                        \
  do {                                                             \
    collApiEnter();                                                \
    collResult_t checked_ = collInitChecks();                      \
    return collApiLeave(checked_ != collSuccess ? checked_ : call); \
  } while (0)

collResult_t collGetVersion(int* version) { COLL_API(collGetVersionImpl(version)); }

collResult_t collGetUniqueId(collUniqueId* uniqueId) { COLL_API(collGetUniqueIdImpl(uniqueId)); }

collResult_t collCommInitRank(collComm_t* comm, int nranks, collUniqueId commId, int rank) {
  if (comm) *comm = NULL;
  COLL_API_INIT(collCommInitRankImpl(comm, nranks, commId, rank));
}

collResult_t collCommInitRankConfig(collComm_t* comm, int nranks, collUniqueId commId, int rank, collConfig_t* config) {
  if (comm) *comm = NULL;
  COLL_API_INIT(collCommInitRankConfigImpl(comm, nranks, commId, rank, config));
}

collResult_t collCommInitAll(collComm_t* comms, int ndev, const int* devlist) {
  COLL_API_INIT(collCommInitAllImpl(comms, ndev, devlist));
}

collResult_t collCommInitFromEnv(collComm_t* comm, collConfig_t* config) {
  if (comm) *comm = NULL;
  COLL_API_INIT(collCommInitFromEnvImpl(comm, config));
}

collResult_t collCommSplit(collComm_t comm, int color, int key, collComm_t* newcomm, collConfig_t* config) {
  COLL_API(collCommSplitImpl(comm, color, key, newcomm, config));
}

collResult_t collCommDestroy(collComm_t comm) { COLL_API(collCommDestroyImpl(comm)); }

collResult_t collCommAbort(collComm_t comm) { COLL_API(collCommAbortImpl(comm)); }

collResult_t collCommSetTimeout(collComm_t comm, int timeoutSec) { COLL_API(collCommSetTimeoutImpl(comm, timeoutSec)); }

collResult_t collCommGetTimeout(collComm_t comm, int* timeoutSec) { COLL_API(collCommGetTimeoutImpl(comm, timeoutSec)); }

collResult_t collCommSetCallTimeout(collComm_t comm, int timeoutMs) { COLL_API(collCommSetCallTimeoutImpl(comm, timeoutMs)); }

/* When it reports that comm failed, the message is that failure's. */
collResult_t collCommGetAsyncError(collComm_t comm, collResult_t* asyncError) {
  collApiEnter();
  collResult_t r = collApiLeave(collCommGetAsyncErrorImpl(comm, asyncError));
  if (r == collSuccess && *asyncError != collSuccess && *asyncError != collInProgress)
    collSetError(*asyncError, "%s", comm->asyncMsg[0] ? comm->asyncMsg : "the communicator failed");
  return r;
}

collResult_t collCommCount(const collComm_t comm, int* count) { COLL_API(collCommCountImpl(comm, count)); }

collResult_t collCommUserRank(const collComm_t comm, int* rank) { COLL_API(collCommUserRankImpl(comm, rank)); }

collResult_t collStreamCreate(collComm_t comm, collStream_t* stream) { COLL_API(collStreamCreateImpl(comm, stream)); }

collResult_t collStreamCreateCuda(collComm_t comm, void* cudaStream, collStream_t* stream) {
  COLL_API(collStreamCreateCudaImpl(comm, cudaStream, stream));
}

collResult_t collMemAlloc(void** ptr, size_t size) { COLL_API(collMemAllocImpl(ptr, size)); }

collResult_t collMemFree(void* ptr) { COLL_API(collMemFreeImpl(ptr)); }

collResult_t collCommRegister(collComm_t comm, void* buff, size_t size, void** handle) {
  COLL_API(collCommRegisterImpl(comm, buff, size, handle));
}

collResult_t collCommDeregister(collComm_t comm, void* handle) { COLL_API(collCommDeregisterImpl(comm, handle)); }

collResult_t collStreamSynchronize(collStream_t stream) { COLL_API(collStreamSynchronizeImpl(stream)); }

collResult_t collStreamQuery(collStream_t stream) { COLL_API(collStreamQueryImpl(stream)); }

collResult_t collStreamDestroy(collStream_t stream) { COLL_API(collStreamDestroyImpl(stream)); }

collResult_t collAllReduce(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype,
                           collRedOp_t op, collComm_t comm, collStream_t stream) {
  COLL_API(collAllReduceImpl(sendbuff, recvbuff, count, datatype, op, comm, stream));
}

collResult_t collAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, collDataType_t datatype,
                           collComm_t comm, collStream_t stream) {
  COLL_API(collAllGatherImpl(sendbuff, recvbuff, sendcount, datatype, comm, stream));
}

collResult_t collReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, collDataType_t datatype,
                               collRedOp_t op, collComm_t comm, collStream_t stream) {
  COLL_API(collReduceScatterImpl(sendbuff, recvbuff, recvcount, datatype, op, comm, stream));
}

collResult_t collBroadcast(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, int root,
                           collComm_t comm, collStream_t stream) {
  COLL_API(collBroadcastImpl(sendbuff, recvbuff, count, datatype, root, comm, stream));
}

collResult_t collReduce(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, collRedOp_t op,
                        int root, collComm_t comm, collStream_t stream) {
  COLL_API(collReduceImpl(sendbuff, recvbuff, count, datatype, op, root, comm, stream));
}

collResult_t collSend(const void* sendbuff, size_t count, collDataType_t datatype, int peer, collComm_t comm,
                      collStream_t stream) {
  COLL_API(collSendImpl(sendbuff, count, datatype, peer, comm, stream));
}

collResult_t collRecv(void* recvbuff, size_t count, collDataType_t datatype, int peer, collComm_t comm,
                      collStream_t stream) {
  COLL_API(collRecvImpl(recvbuff, count, datatype, peer, comm, stream));
}

collResult_t collBarrier(collComm_t comm, collStream_t stream) { COLL_API(collBarrierImpl(comm, stream)); }

collResult_t collGroupStart(void) { COLL_API(collGroupStartImpl()); }

collResult_t collGroupEnd(void) { COLL_API(collGroupEndImpl()); }

collResult_t collCommGetStats(collComm_t comm, collStats_t* stats) { COLL_API(collCommGetStatsImpl(comm, stats)); }

collResult_t collCommGetPeerStats(collComm_t comm, collPeerStats_t* peers, int npeers) {
  COLL_API(collCommGetPeerStatsImpl(comm, peers, npeers));
}

collResult_t collCommGetCollStats(collComm_t comm, collCollStats_t* rows, int max, int* nrows) {
  COLL_API(collCommGetCollStatsImpl(comm, rows, max, nrows));
}

collResult_t collCommWriteStats(collComm_t comm, const char* path) { COLL_API(collCommWriteStatsImpl(comm, path)); }

collResult_t collCommGetCallRecords(collComm_t comm, collCallRecord_t* records, int max, int* n) {
  COLL_API(collCommGetCallRecordsImpl(comm, records, max, n));
}

collResult_t collCommDumpFlightRecorder(collComm_t comm, const char* path) {
  COLL_API(collCommDumpFlightRecorderImpl(comm, path));
}
