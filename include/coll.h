/*
 * coll.h - public C API of coll, a collective communication library.
 *
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Conventions for every function below:
 *  - counts are in ELEMENTS of the given collDataType_t, never bytes;
 *  - every function returns a collResult_t; on failure a human-readable
 *    message naming the offending argument is available from
 *    collGetLastError() on the calling thread;
 *  - semantics, argument order and in-place rules follow NCCL's.
 *  - a communicator may be used by one thread at a time for issuing
 *    operations (as in NCCL); collCommAbort and collCommGetAsyncError may be
 *    called from any thread at any time.
 */
#ifndef COLL_H_
#define COLL_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Only the functions declared here are exported from libcoll.so. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define COLL_MAJOR 0
#define COLL_MINOR 1
#define COLL_PATCH 0
/* Version code: major*10000 + minor*100 + patch. */
#define COLL_VERSION_CODE (COLL_MAJOR * 10000 + COLL_MINOR * 100 + COLL_PATCH)

/** Result codes. */
typedef enum {
  collSuccess = 0,
  collSystemError = 2,      /* an OS call failed (socket, mmap, thread) */
  collInternalError = 3,    /* a bug in coll */
  collInvalidArgument = 4,  /* a bad argument (NULL buffer, bad type...) */
  collInvalidUsage = 5,     /* a valid argument used wrongly (destroyed comm,
                               unbalanced group calls) */
  collRemoteError = 6,      /* a peer failed or closed its connection */
  collInProgress = 7,       /* non-blocking operation still running */
  collTimeout = 8,          /* a wait passed its deadline (COLL_TIMEOUT) */
  collNumResults = 9
} collResult_t;

/** Element types (values equal NCCL's). */
typedef enum {
  collInt8 = 0, collChar = 0,
  collUint8 = 1,
  collInt32 = 2, collInt = 2,
  collUint32 = 3,
  collInt64 = 4,
  collUint64 = 5,
  collFloat16 = 6, collHalf = 6,
  collFloat32 = 7, collFloat = 7,
  collFloat64 = 8, collDouble = 8,
  collBfloat16 = 9,
  collNumTypes = 10
} collDataType_t;

/** Reduction operations (values equal NCCL's). avg of integers truncates
 *  toward zero; float16/bfloat16 accumulate in float32 and round to nearest
 *  even once per reduction step. */
typedef enum {
  collSum = 0,
  collProd = 1,
  collMax = 2,
  collMin = 3,
  collAvg = 4,
  collNumOps = 5
} collRedOp_t;

#define COLL_UNIQUE_ID_BYTES 128
/** Opaque rendezvous handle; rank 0 creates it and hands it to every rank
 *  (by MPI, a file, a store...). Contains the root address and the job's
 *  random secret: treat it as a credential. */
typedef struct {
  char internal[COLL_UNIQUE_ID_BYTES];
} collUniqueId;

typedef struct collComm* collComm_t;
typedef struct collStream* collStream_t;

/** Config for collCommInitRankConfig. Initialise with COLL_CONFIG_INITIALIZER
 *  and set only what you need; fields left at COLL_CONFIG_UNDEF take the
 *  environment value or the default. */
#define COLL_CONFIG_UNDEF (-2147483647 - 1)
typedef struct {
  size_t size;        /* sizeof(collConfig_t), set by the initializer */
  unsigned int magic; /* set by the initializer */
  unsigned int version;
  int blocking;       /* 1 (default): init blocks; 0: init returns
                         collInProgress, poll collCommGetAsyncError */
  int timeoutSec;     /* per-operation deadline in seconds (COLL_TIMEOUT,
                         default 1800); 0 = no deadline */
  const char* netName;/* transport for inter-process traffic, e.g. "tcp"
                         (COLL_NET); NULL = automatic */
} collConfig_t;

#define COLL_CONFIG_MAGIC 0xc011c0f1u
#define COLL_CONFIG_INITIALIZER                                              \
  { sizeof(collConfig_t), COLL_CONFIG_MAGIC, COLL_VERSION_CODE,             \
    COLL_CONFIG_UNDEF, COLL_CONFIG_UNDEF, NULL }

/* ------------------------------------------------------------------------ */
/* Version and errors                                                       */

/** Writes COLL_VERSION_CODE of the loaded library to *version.
 *  Errors: collInvalidArgument if version is NULL. Thread-safe. */
collResult_t collGetVersion(int* version);

/** Returns a static string describing result. Never NULL. Thread-safe. */
const char* collGetErrorString(collResult_t result);

/** Returns the message of the last failure on the calling thread (empty
 *  string if none). The pointer stays valid until the next coll call on this
 *  thread. comm may be NULL. Thread-safe (thread-local storage). */
const char* collGetLastError(collComm_t comm);

/* ------------------------------------------------------------------------ */
/* Communicators                                                            */

/** Creates a new unique id: opens the rendezvous listener on this process
 *  (interface per COLL_SOCKET_IFNAME, port per COLL_COMM_ID if set) and draws
 *  a 64-bit random secret. Call once per communicator, on one process only.
 *  Errors: collInvalidArgument (NULL), collSystemError (no interface, bind).
 *  Thread-safe. */
collResult_t collGetUniqueId(collUniqueId* uniqueId);

/** Creates the communicator of rank `rank` among `nranks` (1 <= nranks <=
 *  65536, 0 <= rank < nranks) that share `commId`. Collective: every rank
 *  must call it; blocks until all ranks joined or the timeout passes.
 *  Errors: collInvalidArgument (NULL comm, bad rank/nranks, malformed id),
 *  collSystemError (sockets), collRemoteError (a peer vanished or sent a
 *  wrong secret), collTimeout. Thread-safe for distinct comm pointers. */
collResult_t collCommInitRank(collComm_t* comm, int nranks, collUniqueId commId,
                              int rank);

/** As collCommInitRank with a config (may be NULL for defaults). With
 *  config->blocking == 0 it returns collInProgress at once (or collSuccess)
 *  and finishes in the background; poll collCommGetAsyncError.
 *  Errors: as collCommInitRank, plus collInvalidArgument for a config whose
 *  size/magic does not match. */
collResult_t collCommInitRankConfig(collComm_t* comm, int nranks,
                                    collUniqueId commId, int rank,
                                    collConfig_t* config);

/** Creates `ndev` communicators of one job in this process, one per rank,
 *  initialised concurrently by `ndev` threads. comms is an array of ndev
 *  collComm_t. devlist is ignored for host memory and may be NULL.
 *  Errors: collInvalidArgument (NULL comms, ndev < 1), plus those of
 *  collCommInitRank. Thread-safe. */
collResult_t collCommInitAll(collComm_t* comms, int ndev, const int* devlist);

/** Creates a communicator from what a launcher put in the environment:
 *  rank/size from RANK/WORLD_SIZE (torchrun), OMPI_COMM_WORLD_RANK/_SIZE
 *  (Open MPI), PMI_RANK/PMI_SIZE (MPICH, Hydra), SLURM_PROCID/SLURM_NTASKS
 *  (srun), in that order; rendezvous from COLL_COMM_ID=host:port or
 *  MASTER_ADDR/MASTER_PORT. Rank 0 listens there, the others connect.
 *  config may be NULL.
 *  Errors: collInvalidUsage (no launcher variables, no rendezvous address),
 *  collInvalidArgument (unparsable values), plus those of collCommInitRank. */
collResult_t collCommInitFromEnv(collComm_t* comm, collConfig_t* config);

/** Splits comm (NCCL semantics): ranks passing the same color form a new
 *  communicator, ordered by key then parent rank; color COLL_SPLIT_NOCOLOR
 *  returns *newcomm = NULL. Collective over comm.
 *  Errors: collInvalidArgument (NULL newcomm, color < -1), collInvalidUsage
 *  (destroyed comm), plus those of collCommInitRank. */
#define COLL_SPLIT_NOCOLOR (-1)
collResult_t collCommSplit(collComm_t comm, int color, int key,
                           collComm_t* newcomm, collConfig_t* config);

/** Waits for issued operations, then frees every resource of comm (threads,
 *  sockets, memory). comm must not be used afterwards. NULL is accepted.
 *  Errors: collInvalidUsage (already destroyed). Not thread-safe with other
 *  calls on the same comm. */
collResult_t collCommDestroy(collComm_t comm);

/** Aborts every pending operation of comm (they return collRemoteError or
 *  collTimeout) and frees it without waiting for peers. May be called from
 *  any thread. NULL is accepted. */
collResult_t collCommAbort(collComm_t comm);

/** Writes the communicator's asynchronous state to *asyncError without
 *  blocking: collSuccess, collInProgress (non-blocking init running) or the
 *  error that aborted it. Errors: collInvalidArgument (NULL). Any thread. */
collResult_t collCommGetAsyncError(collComm_t comm, collResult_t* asyncError);

/** Writes the number of ranks to *count. Errors: collInvalidArgument. */
collResult_t collCommCount(const collComm_t comm, int* count);

/** Writes the caller's rank to *rank. Errors: collInvalidArgument. */
collResult_t collCommUserRank(const collComm_t comm, int* rank);

/* ------------------------------------------------------------------------ */
/* Streams: completion domains for asynchronous calls                       */

/** Creates a stream bound to comm. Operations issued on it return at once and
 *  run in issue order on comm's progress thread. Errors: collInvalidArgument
 *  (NULL), collInvalidUsage (destroyed comm), collSystemError. */
collResult_t collStreamCreate(collComm_t comm, collStream_t* stream);

/** Blocks until every operation issued on stream finished; returns the
 *  first error any of them hit (collRemoteError, collTimeout...). */
collResult_t collStreamSynchronize(collStream_t stream);

/** collSuccess if every operation on stream finished, collInProgress if not,
 *  or the first error. Never blocks. */
collResult_t collStreamQuery(collStream_t stream);

/** Synchronizes, then frees stream. NULL is accepted. */
collResult_t collStreamDestroy(collStream_t stream);

/* ------------------------------------------------------------------------ */
/* Collectives. stream NULL = blocking call. All ranks must issue the same
 * collectives in the same order with the same count, datatype, op, root.
 * Each message carries the call's signature: a rank that receives data of
 * another call (collective, count, datatype, op, root, position in the
 * sequence of collectives) fails with collInvalidUsage naming both calls;
 * its peers fail at their next call at the latest (COLL_CHECK=1 compares
 * before any data moves). float16/bfloat16 sum, prod and avg carry partial
 * results in float32 and round once (COLL_HALF_ACCUM=native: per step).     */

/** recvbuff[i] = op over ranks of sendbuff[i], for i < count, on every rank.
 *  sendbuff, recvbuff: count elements of datatype; in-place if equal.
 *  Algorithm: ring reduce-scatter + all-gather (Patarasuk & Yuan 2009).
 *  Errors: collInvalidArgument (NULL buffer with count > 0, bad datatype/op,
 *  byte size overflow), collInvalidUsage (destroyed/aborted comm, stream of
 *  another comm, mismatched call), collRemoteError, collTimeout. */
collResult_t collAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           collDataType_t datatype, collRedOp_t op,
                           collComm_t comm, collStream_t stream);

/** recvbuff[r*sendcount + i] = sendbuff of rank r [i]. sendbuff: sendcount
 *  elements; recvbuff: nranks*sendcount elements. In-place when sendbuff ==
 *  recvbuff + rank*sendcount. Algorithm: ring. Errors: as collAllReduce. */
collResult_t collAllGather(const void* sendbuff, void* recvbuff,
                           size_t sendcount, collDataType_t datatype,
                           collComm_t comm, collStream_t stream);

/** recvbuff[i] = op over ranks of sendbuff[rank*recvcount + i]. sendbuff:
 *  nranks*recvcount elements; recvbuff: recvcount elements. In-place when
 *  sendbuff + rank*recvcount == recvbuff. Algorithm: ring. Errors: as
 *  collAllReduce. */
collResult_t collReduceScatter(const void* sendbuff, void* recvbuff,
                               size_t recvcount, collDataType_t datatype,
                               collRedOp_t op, collComm_t comm,
                               collStream_t stream);

/** Copies root's sendbuff (count elements) into every rank's recvbuff (count
 *  elements). sendbuff is read on root only. Algorithm: pipelined chain.
 *  Errors: as collAllReduce, plus collInvalidArgument for root out of
 *  range. */
collResult_t collBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           collDataType_t datatype, int root, collComm_t comm,
                           collStream_t stream);

/** recvbuff on root = op over ranks of sendbuff (count elements each).
 *  recvbuff is written on root only. Algorithm: pipelined chain. Errors: as
 *  collBroadcast. */
collResult_t collReduce(const void* sendbuff, void* recvbuff, size_t count,
                        collDataType_t datatype, collRedOp_t op, int root,
                        collComm_t comm, collStream_t stream);

/** Sends count elements to rank peer, matched by a collRecv of the same
 *  count and datatype on peer. Inside collGroupStart/End, sends and receives run
 *  concurrently. Errors: as collAllReduce, plus collInvalidArgument for a
 *  peer out of range. */
collResult_t collSend(const void* sendbuff, size_t count,
                      collDataType_t datatype, int peer, collComm_t comm,
                      collStream_t stream);

/** Receives count elements from rank peer into recvbuff. A send of another
 *  count or datatype is an error on the receiver (collInvalidUsage naming
 *  both), never a write past recvbuff. Errors: as collSend. */
collResult_t collRecv(void* recvbuff, size_t count, collDataType_t datatype,
                      int peer, collComm_t comm, collStream_t stream);

/** Blocks until every rank of comm reached the barrier. Errors: as
 *  collAllReduce. */
collResult_t collBarrier(collComm_t comm, collStream_t stream);

/** Opens a group: operations issued until the matching collGroupEnd are
 *  launched together (send/recv pairs run concurrently). Groups nest.
 *  Thread-local. Errors: none. */
collResult_t collGroupStart(void);

/** Closes a group and launches its operations. Errors: collInvalidUsage
 *  without a matching collGroupStart, plus those of the grouped calls. */
collResult_t collGroupEnd(void);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif
#endif /* COLL_H_ */
