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
 *    operations (as in NCCL): a second thread that calls a collective,
 *    send/recv or collGroupEnd on it while another thread is inside one is
 *    refused with collInvalidUsage ("another thread ... is inside ...") and
 *    the first call goes on; collCommAbort, collCommDestroy,
 *    collCommGetAsyncError and the stream functions may be called from any
 *    thread at any time;
 *  - a communicator belongs to the process that created it: in a child of
 *    fork() every call on an inherited communicator or stream fails with
 *    collInvalidUsage and touches nothing the parent uses (a child that
 *    never calls coll is not affected; it may create communicators of its
 *    own);
 *  - timeouts: every wait of an operation has a deadline, taken when the
 *    operation is issued (see collCommSetTimeout and collCommSetCallTimeout);
 *    a timeout or a failed peer aborts the communicator, after which every
 *    queued and later operation fails at once with the same error.
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
  collTimeout = 8,          /* a wait passed its deadline (COLL_TIMEOUT,
                               collCommSetTimeout, collCommSetCallTimeout) */
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

/** Returns the message of the last coll call on the calling thread if it
 *  failed: empty after a call that succeeded (or returned collInProgress),
 *  and after collCommGetAsyncError reported a failed communicator, that
 *  failure's message. (ncclGetLastError instead keeps the last warning of
 *  the thread until another replaces it.) The pointer stays valid until the
 *  next coll call on this thread. comm may be NULL. Thread-safe
 *  (thread-local storage). */
const char* collGetLastError(collComm_t comm);

/* ------------------------------------------------------------------------ */
/* Communicators                                                            */

/** Creates a new unique id: opens the rendezvous listener on this process
 *  (interface per COLL_SOCKET_IFNAME, port per COLL_COMM_ID if set) and draws
 *  a 64-bit random secret. Call once per communicator, on one process only.
 *  Errors: collInvalidArgument (NULL; COLL_SOCKET_IFNAME/COLL_SOCKET_FAMILY
 *  that select no interface, the message lists the interfaces; COLL_COMM_ID
 *  not host:port or its host does not resolve), collInvalidUsage (no
 *  interface is up with an address), collSystemError (bind, or the name
 *  service did not answer). Thread-safe. */
collResult_t collGetUniqueId(collUniqueId* uniqueId);

/** Creates the communicator of rank `rank` among `nranks` (1 <= nranks <=
 *  65536, 0 <= rank < nranks) that share `commId`. Collective: every rank
 *  must call it; blocks until all ranks joined or COLL_INIT_TIMEOUT (seconds,
 *  default 300, 0 = never) passes. An id serves one communicator.
 *  Errors: collInvalidArgument (NULL comm, bad rank/nranks, malformed id),
 *  collInvalidUsage (the ranks disagree: another nranks, a rank twice;
 *  another job's rendezvous), collSystemError (sockets), collRemoteError (a
 *  peer vanished, the id's root is gone), collTimeout (COLL_INIT_TIMEOUT: the
 *  message lists the ranks that never joined). Thread-safe for distinct comm
 *  pointers. */
collResult_t collCommInitRank(collComm_t* comm, int nranks, collUniqueId commId,
                              int rank);

/** As collCommInitRank with a config (may be NULL for defaults). With
 *  config->blocking == 0 it returns collInProgress at once (or collSuccess)
 *  and finishes in the background; poll collCommGetAsyncError. A call on the
 *  communicator issued before the init finished waits for it, then runs (or
 *  fails with the init's error).
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

/** Waits for the operations issued on comm's streams (each ends by its
 *  deadline; at once if the communicator failed), then frees every resource
 *  of comm (threads, sockets, memory). comm must not be used afterwards.
 *  NULL is accepted. A call that another thread is inside when destroy
 *  begins (a blocking collective, collStreamSynchronize...) is not waited
 *  for: it fails with collInvalidUsage ("collCommDestroy was called on
 *  another thread while this call ... was in flight"), and comm is freed
 *  only after every such call returned; calls that begin later are refused.
 *  On a communicator that saw no error, ranks of this node whose last
 *  collective differed from this rank's (a mismatch no call read, e.g.
 *  broadcasts with different roots) or that failed after the last call with
 *  them are named in a WARN on stderr; the result stays collSuccess.
 *  Errors: collInvalidUsage (already destroyed, being destroyed or aborted
 *  by another thread, or inherited by a fork() child). Thread-safe. */
collResult_t collCommDestroy(collComm_t comm);

/** Aborts every pending operation of comm (queued ones and any call inside
 *  comm on another thread return collRemoteError "... collCommAbort was
 *  called", or the error that failed comm before) and frees it without
 *  waiting for peers, once those calls returned. Returns within
 *  milliseconds of every pending call noticing the abort. Also ends a
 *  collCommDestroy that is waiting for queued operations. NULL is accepted.
 *  Errors: collInvalidUsage (already destroyed, or inherited by a fork()
 *  child). Thread-safe. */
collResult_t collCommAbort(collComm_t comm);

/** Sets comm's timeout: every wait of an operation issued after this call
 *  may last at most timeoutSec seconds (0 = no deadline) before comm aborts
 *  with collTimeout ("... timed out after N s ..."). Operations already
 *  issued (queued on a stream or running) keep the deadline they were
 *  issued with. The initial value is collConfig_t.timeoutSec or
 *  COLL_TIMEOUT (default 1800). Works on a failed communicator too.
 *  Errors: collInvalidArgument (timeoutSec < 0, NULL comm),
 *  collInvalidUsage (destroyed comm). Thread-safe. */
collResult_t collCommSetTimeout(collComm_t comm, int timeoutSec);

/** Writes comm's timeout in seconds (0 = none) to *timeoutSec.
 *  Errors: collInvalidArgument (NULL), collInvalidUsage (destroyed comm).
 *  Thread-safe. */
collResult_t collCommGetTimeout(collComm_t comm, int* timeoutSec);

/** Per-call timeout: the next launch on comm, i.e. the next collective or
 *  send/recv issued outside a group, or the next collGroupEnd that launches
 *  operations of comm (then for all of them), gets a deadline of timeoutMs
 *  milliseconds (0 = none) instead of the communicator's timeout, which is
 *  unchanged for the launches after it. timeoutMs = -1 cancels a pending
 *  one. As with the communicator's timeout, it is taken at issue time.
 *  Errors: collInvalidArgument (timeoutMs < -1, NULL comm),
 *  collInvalidUsage (destroyed comm). */
collResult_t collCommSetCallTimeout(collComm_t comm, int timeoutMs);

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

/** Wraps a CUDA stream (a cudaStream_t or CUstream; NULL = the legacy
 *  default stream) as a coll stream of comm, with NCCL's stream semantics.
 *  A call issued on it returns at once and never blocks the host: it starts
 *  once the work enqueued on cudaStream before it has finished (an event
 *  recorded at issue, polled by comm's progress thread), and work enqueued on
 *  cudaStream after it runs once its results are in place (at issue the
 *  stream gets a wait on a counter in pinned host memory, cuStreamWaitValue32,
 *  that the progress thread opens when the call is done). Host buffers on
 *  such a stream are ordered the same way. In a group, one communicator's
 *  calls may use several such streams: the group starts when every one of
 *  them reached it, and every one of them waits for the whole group.
 *  collStreamSynchronize / collStreamQuery report completion and the first
 *  error as for any coll stream (they do not wait for cudaStream itself).
 *  When a call fails (a failed CUDA call, a dead peer, a timeout), the
 *  communicator fails as with host buffers and the stream is still released,
 *  so it never hangs: work after the call then sees recvbuff unchanged or
 *  partly written; collStreamQuery and collCommGetAsyncError report the
 *  error. Device buffers on a collStreamCreate stream are read when the
 *  progress thread runs the call (make them ready before issuing, e.g. with
 *  cudaStreamSynchronize) and written when collStreamSynchronize says it is
 *  done; with stream NULL a call on device buffers waits for the legacy
 *  default stream, runs, and returns when the results are in device memory.
 *  A communicator runs on one GPU: the device current here (or GPU 0 when
 *  no CUDA context is current) unless an earlier device call or CUDA stream
 *  bound it already; buffers of another GPU later are collInvalidArgument.
 *  cudaStream must belong to that GPU's primary context (the CUDA runtime's
 *  context) and outlive every call issued on the coll stream.
 *  Errors: collInvalidArgument (comm or stream NULL; the current GPU is not
 *  the one comm is bound to, both named), collInvalidUsage (destroyed comm;
 *  libcoll built without CUDA), collSystemError (no CUDA driver or device
 *  here, or a CUDA call failed: the message names it). Thread-safe. */
collResult_t collStreamCreateCuda(collComm_t comm, void* cudaStream, collStream_t* stream);

/** Blocks until every operation issued on stream finished; returns the
 *  first error any of them hit (collRemoteError, collTimeout...). Each
 *  operation ends by its own deadline; collCommAbort on another thread ends
 *  the wait at once. collInvalidUsage if the stream's communicator was
 *  destroyed, or the stream itself was ("stream 0x... was already
 *  destroyed": the handle is not read). Thread-safe. */
collResult_t collStreamSynchronize(collStream_t stream);

/** collSuccess if every operation on stream finished, collInProgress if not,
 *  or the first error. Never blocks. collInvalidUsage if the stream's
 *  communicator or the stream was destroyed. */
collResult_t collStreamQuery(collStream_t stream);

/** Synchronizes, then frees stream. NULL is accepted. A stream whose
 *  communicator was already destroyed is just freed (collSuccess); a stream
 *  destroyed twice is collInvalidUsage. */
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
 *  byte size overflow, sendbuff and recvbuff partly overlapping: neither
 *  disjoint nor the in-place form), collInvalidUsage (destroyed/aborted comm, stream of
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

/** Closes a group and launches its operations. Operations on different
 *  communicators progress concurrently (a receive on one never waits for
 *  an operation on another); without streams the call returns when all of
 *  them finished. Errors: collInvalidUsage without a matching
 *  collGroupStart, collInvalidArgument when a receive of the group partly
 *  overlaps a send of it (an all-to-all with overlapping buffers), plus
 *  those of the grouped calls. */
collResult_t collGroupEnd(void);

/* ------------------------------------------------------------------------ */
/* What a communicator did: counters, flight recorder                       */
/*
 * Counters are always on. Units: bytes (payload, as the user's buffers hold
 * it), messages (one per transport send or receive: each pipeline slice of a
 * step is one), nanoseconds. Every function below works on a communicator
 * that failed or was aborted by a peer (what was counted before the failure
 * is kept) and may be called from any thread while operations run: each
 * number is read whole, numbers read in one call may be a few transfers
 * apart. Errors: collInvalidArgument (NULL pointer, npeers/max < 0),
 * collInvalidUsage (destroyed communicator, fork() child).
 */
#define COLL_STATS_NAME_LEN 24
#define COLL_STATS_MAX_LINKS 8

/** Traffic of this rank with one peer. */
typedef struct {
  uint64_t bytesSent;   /* bytes this rank sent to the peer */
  uint64_t bytesRecv;   /* bytes it received from the peer */
  uint64_t msgsSent;    /* messages (the shared-memory mailbox: calls) */
  uint64_t msgsRecv;
  uint64_t waitNs;      /* time this rank waited for the peer (waits longer
                           than about 1 us: 64 polls; counted to the peer that
                           was awaited when the wait ended) */
  uint64_t mailboxBytes;/* of bytesSent and of bytesRecv, through the mailbox */
  char link[COLL_STATS_NAME_LEN]; /* transport to the peer: "shm", "tcp",
                           "loopback", "p2p", ...; "self" */
} collPeerStats_t;

/** Traffic of this rank over one link class (a transport, or "mailbox"). */
typedef struct {
  char name[COLL_STATS_NAME_LEN];
  uint64_t bytesSent, bytesRecv, msgsSent, msgsRecv, waitNs;
} collLinkStats_t;

/** Totals of this rank on the communicator. */
typedef struct {
  int rank, nranks;
  uint64_t ops;         /* operations run: each collective, barrier, send, receive */
  uint64_t failedOps;   /* of them, those that returned an error */
  uint64_t bytesSent, bytesRecv, msgsSent, msgsRecv, waitNs; /* over all peers */
  uint64_t callNs;      /* time inside operations (the measured ones, plus
                           the mailbox calls that were not timed at their
                           measured mean) */
  uint64_t elapsedNs;   /* since the communicator was created */
  int nlinks;           /* entries of links[] in use */
  collLinkStats_t links[COLL_STATS_MAX_LINKS];
} collStats_t;

/** Operations of one (collective, algorithm) pair. */
typedef struct {
  char coll[COLL_STATS_NAME_LEN]; /* "all-reduce", "all-gather", "reduce-scatter",
                                     "broadcast", "reduce", "send", "recv", "barrier" */
  char algo[COLL_STATS_NAME_LEN]; /* "ring", "tree", ..., "mailbox", "p2p", "none"
                                     (count 0) */
  uint64_t calls;       /* operations (including failed ones) */
  uint64_t failed;
  uint64_t bytes;       /* sum of count x type size as passed (all-gather:
                           sendcount, reduce-scatter: recvcount) */
  uint64_t timedCalls;  /* calls whose duration was measured: all, except
                           through the mailbox and on one rank (calls of
                           0.2-0.4 us): the first and one in 256 */
  uint64_t timeNs;      /* total duration of the timed calls */
} collCollStats_t;

/** Totals and per link class. Errors: see above. */
collResult_t collCommGetStats(collComm_t comm, collStats_t* stats);

/** Writes peers[0..npeers) for ranks 0..npeers-1 (npeers <= nranks; pass
 *  nranks for all). Errors: see above. */
collResult_t collCommGetPeerStats(collComm_t comm, collPeerStats_t* peers, int npeers);

/** Writes up to max rows with calls > 0 to rows, *nrows = how many rows
 *  exist (may exceed max). Errors: see above. */
collResult_t collCommGetCollStats(collComm_t comm, collCollStats_t* rows, int max, int* nrows);

/** Writes every counter of this rank as JSON (the format of COLL_STATS_FILE,
 *  which tools/coll_report reads) to path (%h host, %p pid, %r rank, %c
 *  communicator id are expanded); NULL: COLL_STATS_FILE. Errors: as above,
 *  plus collInvalidArgument (path NULL and COLL_STATS_FILE unset),
 *  collSystemError (the file cannot be written). */
collResult_t collCommWriteStats(collComm_t comm, const char* path);

/** One entry of the flight recorder: an operation as this rank ran it. */
typedef struct {
  uint64_t seq;         /* collectives: number on this communicator (equal on
                           every rank); send/recv: number of the batch */
  char coll[COLL_STATS_NAME_LEN]; /* as collCollStats_t */
  char algo[COLL_STATS_NAME_LEN];
  char state[COLL_STATS_NAME_LEN]; /* "running", "completed", "failed" */
  size_t count;         /* elements as passed */
  size_t bytes;         /* count x type size */
  collDataType_t datatype;
  collRedOp_t op;
  int peer;             /* root (broadcast, reduce), peer (send, recv), else -1 */
  int nchannels;
  int waitPeer;         /* the peer its last wait of two clock reads or more (~1 us
                           of polling) was on, -1: none */
  int waitChannel, waitPhase, waitStep; /* the step of that wait (send/recv: phase =
                           operation of the batch) */
  double startUs;       /* wall clock (us since 1970) when it started, 0: not measured */
  double durationUs;    /* -1: running or not measured */
  double waitStartUs;   /* when its last long wait began, 0: none */
} collCallRecord_t;

/** The flight recorder: the last COLL_FR_ENTRIES (default 256) operations of
 *  this rank, oldest first. Writes up to max entries (the newest ones) to
 *  records, *n = how many were written. Errors: see above. */
collResult_t collCommGetCallRecords(collComm_t comm, collCallRecord_t* records, int max, int* n);

/** Writes the flight recorder as JSON (tools/coll_report --fr reads the files
 *  of all ranks and names the rank the others waited for) to path (%h %p %r
 *  %c expanded); NULL: COLL_FR_FILE. Also done automatically, to
 *  COLL_FR_FILE, when the communicator fails or is aborted, and on
 *  COLL_FR_SIGNAL. Errors: as collCommWriteStats. */
collResult_t collCommDumpFlightRecorder(collComm_t comm, const char* path);


/* ---- memory that the ranks of a node share (zero copy) ----------------------
 * Host memory only. (A device variant will get its own names, e.g. with
 * "Device" in them; these stay host memory.)
 *
 * collMemAlloc memory is a memfd segment the process keeps open, so that the
 * other ranks of its node can map the same pages (they open it through
 * /proc/<pid>/fd: the same user, a dumpable process and one pid namespace;
 * kernel.yama.ptrace_scope does not matter, since opening a descriptor there
 * is not a ptrace attach). An all-reduce or reduce-scatter of at least
 * 1 MiB (any size when COLL_ALGO forces "zerocopy") whose send and receive
 * buffers lie in collMemAlloc memory on every rank of a one-node
 * communicator then reads the peers' inputs where they are: the ranks take
 * pieces of the result from a shared counter (whichever rank runs does the
 * work), reduce each from all inputs and store it straight into the receive
 * buffers that want it (all of them for all-reduce). Otherwise (any rank's
 * buffers elsewhere, several nodes, no shared-memory mailbox) the call runs
 * its usual algorithm, with the same results. Each such call decides this
 * with its peers through the node's mailbox. Peers keep mappings of up to 8
 * allocations per rank (least recently used are unmapped) until the
 * communicator is destroyed or fails. */

/** Allocates size bytes (rounded up to whole pages, every page reserved:
 *  no SIGBUS later when memory runs short), zero-filled, page-aligned, in a
 *  segment other ranks of this node can map; *ptr gets its address. Costs
 *  one file descriptor until collMemFree. Errors: collInvalidArgument (ptr
 *  NULL, size 0), collSystemError (memfd_create, fallocate or mmap failed:
 *  the message says which and why). Thread-safe. */
collResult_t collMemAlloc(void** ptr, size_t size);

/** Frees memory of collMemAlloc (ptr: the address it returned; NULL: no-op).
 *  Errors: collInvalidArgument (ptr is not an address collMemAlloc returned,
 *  or was freed already), collInvalidUsage (part of it is still registered
 *  with a communicator: collCommDeregister first; nothing is freed).
 *  Thread-safe. */
collResult_t collMemFree(void* ptr);

/** Registers [buff, buff + size) (bytes) with comm; *handle identifies the
 *  registration for collCommDeregister. Only collMemAlloc memory can be
 *  registered: peers map it directly, which memory of malloc or mmap does
 *  not allow (reading that would need process_vm_readv, a ptrace attach
 *  that kernel.yama.ptrace_scope >= 1 refuses between sibling processes, and
 *  is still one copy: the shm transport does that already). Registering is
 *  optional for the zero-copy path (every collMemAlloc buffer qualifies);
 *  it checks the range and keeps the allocation from being freed while
 *  comm may use it (collMemFree refuses). Destroying comm releases its
 *  registrations. Errors: collInvalidArgument (comm invalid, buff or handle
 *  NULL, size 0, buff not in collMemAlloc memory of this process, or the
 *  range extends beyond its allocation: the message gives both sizes),
 *  collInvalidUsage (the same range is already registered with comm),
 *  collSystemError (out of memory). Thread-safe. */
collResult_t collCommRegister(collComm_t comm, void* buff, size_t size, void** handle);

/** Releases a registration of collCommRegister. Errors: collInvalidArgument
 *  (comm invalid; handle NULL or not a live registration of comm).
 *  Thread-safe. */
collResult_t collCommDeregister(collComm_t comm, void* handle);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif
#endif /* COLL_H_ */
