/* comm.h - the communicator object shared by core, engine and streams. */
#ifndef COLL_COMM_H_
#define COLL_COMM_H_

#include <pthread.h>
#include <stdint.h>

#include "bootstrap/bootstrap.h"
#include "coll.h"
#include "coll_net.h"
#include "engine/sched.h"
#include "obs/obs_hot.h"

#define COLL_COMM_MAGIC 0xc011c033u
#define COLL_COMM_DEAD 0xdeadc033u
#define COLL_HOST_LEN 64
#define COLL_MAX_CHANNELS 64
#define COLL_TUNE_MAX_CHANNELS 4 /* channel counts the tuner tries: 1, 2, 4 */

/* A communicator's transports, in order of preference (core/net.h): slot 0
 * is the intra-node transport (shm; NULL when off), then the network
 * transports (a COLL_NET_PLUGIN transport, ib, tcp; or the one COLL_NET
 * names). Each pair of ranks uses the first slot both published whose
 * canConnect accepts the pair (collNetPairSlot). */
#define COLL_NET_SLOTS 4
enum { COLL_NET_INTRA = 0 };

/* A built-in transport's receive that reduces as it reads: the next message
 * m of recvComm gives dst[i] = reduce(m[i], local[i]) for size / esize
 * elements of host memory (shm's collShmIrecvReduce documents the rest). */
typedef collResult_t (*collNetIrecvReduceFn)(void* recvComm, void* dst, const void* local, size_t size,
                                             void (*reduce)(void* dst, const void* a, const void* b, size_t n),
                                             size_t esize, void** request);

typedef struct {
  int32_t rank;
  int32_t pid;
  uint32_t version;
  uint32_t hasIntra; /* published an intra-node handle (slot 0) */
  uint64_t hostHash;
  uint64_t kernelHash; /* boot id: ranks that share a kernel share its cores */
  char host[COLL_HOST_LEN];
  uint64_t netId[COLL_NET_SLOTS]; /* per slot: hash of the transport's name (collNetId), 0: none published */
  char netHandle[COLL_NET_SLOTS][COLL_NET_HANDLE_BYTES];
} collPeerInfo;

typedef struct {
  void* sendComm; /* to peer, this channel */
  void* recvComm; /* from peer, this channel */
} collConn;

/* Per-channel engine memory, allocated on first use and kept. */
typedef struct {
  char* scratch;       /* schedule scratch blocks */
  size_t scratchBytes;
  char* staging;       /* RECV_REDUCE landing area */
  size_t stagingBytes;
  int scratchMem, stagingMem; /* their memory types (engine/exec.h: collExecGrow) */
  collSched sched;
  /* what sched was built from (schedules are pure functions of these): a
   * repeated call reuses it instead of rebuilding; schedAlgo NULL: none */
  const void* schedAlgo;
  collSchedArgs schedArgs;
  int schedPerm;
  void* stepState;     /* engine-private per-step state */
  int stepStateCap;
} collChannel;

struct collStream;

/* One queued unit of work for the progress thread (a group's operations). */
typedef struct collWork {
  struct collWork* next;
  struct collStream* stream;
  int nops;
  struct collOp* ops;
  struct collDevWork* dev;  /* device buffers or CUDA streams (core/devcall.h); NULL: host work */
  struct collStream** extra; /* a group's further CUDA streams of this comm (each counts it pending) */
  int nextra;
} collWork;

struct collComm {
  uint32_t magic;
  int rank, nranks;
  uint64_t commHash;
  collBootstrap boot;
  collPeerInfo* peers;
  const collNet_t* nets[COLL_NET_SLOTS]; /* ordered transports; NULL: slot unused */
  void* listenComms[COLL_NET_SLOTS];
  uint8_t* peerKind; /* [nranks]: the slot of nets[] that carries traffic with each rank */
  int netDev[COLL_NET_SLOTS]; /* device of each transport this rank listens and connects on */
  int interSlot;     /* the network transport of most of this rank's pairs (its NIC: topology, tuner) */
  uint8_t netReg[COLL_NET_SLOTS]; /* the transport needs registered memory (engine/reg.h) */
  collNetIrecvReduceFn netIrecvReduce[COLL_NET_SLOTS]; /* its receive that reduces as it reads, or NULL (net.h) */
  struct collEngineReg* reg;      /* registration caches (engine/reg.c); NULL until first needed */
  /* node layout (ranks grouped by host hash, COLL_HOSTID overrides) */
  int* rankNode;     /* [nranks]: node index, numbered by first rank */
  int nnodes, node, localRank;
  struct collTopo* topo; /* hwloc summaries of every rank, link classes (src/topo) */
  struct collTunerState* tuner; /* cost model inputs, plugin, decision cache (src/tuner) */
  struct collMailbox* mailbox;  /* one-shot small collectives inside a node (engine/mailbox.h); NULL: none */
  struct collZeroCopy* zc;      /* peers' collMemAlloc segments mapped by engine/zerocopy.c; NULL: none yet */
  int cmaGatherOff;             /* engine/cmagather.c: a rank could not read a peer; every rank set it in the same call */
  struct collObs* obs;          /* counters, flight recorder, trace, profiler (src/obs/obs.h) */
  collObsHot obsHot;            /* the open run of mailbox calls, event flag (src/obs/obs_hot.h): here, beside
                                   mailbox, for the engine's one hook per call */
  int nchannels;    /* default channel count (point-to-point striping) */
  int maxChannels;  /* channels the tuner may use; conns/channels size */
  collConn* conns; /* [maxChannels * nranks] */
  collChannel* channels;
  int timeoutSec;
  int localRanks;  /* ranks on this node (same host hash) */
  int kernelRanks; /* ranks on this kernel, >= localRanks: emulated nodes (network
                      namespaces, containers, COLL_HOSTID) share the cores */
  int spinUs;      /* polling time before sleeping, see COLL_SPIN_US */
  int yieldWait;   /* oversubscribed: waits yield from their first idle poll */
  /* adaptive waiting (engine/progress.c), used by the thread running the engine */
  double waitPureSec;     /* the polling-without-yield window of the next wait */
  int waitEscalated;      /* the last wait: 0 never idle, 1 ended inside that window, 2 outlasted it */
  double waitBusyUntil;   /* until then waits sleep after that window instead of yielding */
  double waitBusyBackoff; /* the length of that period, doubled by each long yield that ends one */
  double waitOwnUntil;    /* until then a long yield is taken as one to our own ranks, without reading /proc */
  int checkCalls;  /* COLL_CHECK: verify call signatures across ranks */
  size_t chunkBytes;
  volatile int abortFlag;
  int userAborted; /* the first error was collCommAbort's: peers see this rank closed, not failed */
  collResult_t asyncError; /* atomic; set with asyncMsg under errLock */
  char asyncMsg[1024];
  pthread_mutex_t errLock;
  uint64_t opCount;
  uint32_t collSeq;  /* collectives run so far: the call number in their signature (engine/sig.h) */
  char* stage;       /* working copy of float16/bfloat16 reductions (engine.c), kept between calls */
  size_t stageBytes;
  unsigned goneScan; /* next rank the connection wait checks for being gone (conn.c) */
  int initRunning;  /* non-blocking init thread still working (atomic) */
  int activeCalls;  /* threads inside API calls on this comm (atomic) */
  /* lifecycle and misuse (comm.c) */
  int destroying;         /* collCommDestroy/Abort began: new calls are refused (under the registry lock) */
  unsigned forkGen;       /* collForkGeneration() at creation: another value means a fork() child */
  int issuerTid;          /* thread inside an issuing call (collectives, groups); 0: none (atomic) */
  int issuerDepth;        /* nesting of that thread's issuing calls */
  const char* issuerFn;   /* the outermost of them, for the message to a second thread */
  struct collStream** streams; /* live streams (orphaned when comm is freed), under the registry lock */
  int nstreams, capStreams;
  /* timeouts: timeoutSec is the communicator's (collCommSetTimeout); each
   * operation takes its deadline when issued (collOp.timeoutSec) and the
   * engine runs it under runTimeoutSec */
  int callTimeoutMs;      /* collCommSetCallTimeout for the next launch; -1: none */
  double runTimeoutSec;   /* of the operation the engine runs now; 0: none */
  int runTimeoutPerCall;  /* it came from collCommSetCallTimeout */
  char barrierBuf[2];

  /* progress thread and its queue (created with the first stream) */
  pthread_mutex_t qlock;
  pthread_cond_t qcond;     /* work arrived / state changed */
  pthread_cond_t qdone;     /* a work item finished */
  collWork *qhead, *qtail;
  int qbusy;                /* items queued or running */
  int qrunning;             /* an item is being run (by the progress thread or a waiter) */
  int threadStarted, stopping;
  pthread_t progress;
  struct collDevComm* dev; /* the GPU this comm is bound to and its staging (core/devcall.c); NULL: none yet */
  struct collDevPath* devPath; /* device-resident path: p2p connections, stream (engine/devpath.c); NULL: none yet */
};

struct collStream {
  collComm_t comm;    /* NULL once the communicator was destroyed (under the registry lock) */
  int pending;        /* guarded by comm->qlock */
  collResult_t error; /* first error, guarded by comm->qlock */
  int cuda;           /* made by collStreamCreateCuda: calls are ordered on cuStream */
  void* cuStream;     /* that CUstream (NULL: the legacy default stream) */
};

/* Records an asynchronous error once (first wins) and aborts the comm;
 * returns 1 when this call recorded it, 0 when an error was there already. */
int collCommSetAsyncError(collComm_t comm, collResult_t r, const char* msg);
/* Replaces the message of the error recorded by the call of
 * collCommSetAsyncError that returned 1 (the first failure), once the
 * failing thread knows more (what the peers said, which rank stopped). */
void collCommRefineAsyncError(collComm_t comm, const char* msg);
/* Copies the communicator's error message (empty if none) into buf. */
void collCommErrorMessage(collComm_t comm, char* buf, size_t size);
/* The error of a failed communicator (collSuccess if it did not fail), with
 * "`fn`: communicator failed earlier: <message>" set as the thread's error. */
collResult_t collCommFailedError(collComm_t comm, const char* fn);
/* Incremented in every fork() child (pthread_atfork): a communicator whose
 * forkGen differs was created by another process. */
unsigned collForkGeneration(void);
/* Validates a communicator handle; names `fn` in the error. */
collResult_t collCommCheck(collComm_t comm, const char* fn);
/* collCommCheck plus activeCalls++ (atomically with the registry lookup, so
 * collCommAbort on another thread waits for this call to leave). */
collResult_t collCommEnter(collComm_t comm, const char* fn);
void collCommLeave(collComm_t comm);
/* collCommEnter without the failure check: for reading the state of a
 * communicator that failed (counters, flight recorder). */
collResult_t collCommEnterAny(collComm_t comm, const char* fn);
/* collCommEnter for calls that issue operations (collectives, send/recv,
 * groups): also refuses a second thread while one is inside such a call
 * (collInvalidUsage naming both calls). collCommLeaveIssue undoes both. */
collResult_t collCommEnterIssue(collComm_t comm, const char* fn);
void collCommLeaveIssue(collComm_t comm);
/* Enters the stream's communicator without the failure check (waiting for
 * a failed comm's operations is allowed): *comm gets it. collInvalidUsage
 * once the communicator was destroyed (the stream is then orphaned). */
collResult_t collStreamEnter(collStream_t s, collComm_t* comm, const char* fn);
/* For a call that issues on stream s of comm (NULL: ok): collInvalidUsage if
 * s was destroyed (it is not read) or belongs to another communicator. */
collResult_t collStreamCheckUse(collComm_t comm, collStream_t s, const char* fn);
/* 1 if s was created and not destroyed (s is not read). */
int collStreamIsLive(collStream_t s);
/* Registers / unregisters a stream with its communicator and the set of live
 * streams (under the registry lock); a communicator being freed orphans its
 * streams. */
collResult_t collStreamRegister(collComm_t comm, collStream_t s);
void collStreamUnregister(collStream_t s);
/* The transport that carries traffic with `peer`. */
static inline const collNet_t* collPeerNet(const struct collComm* comm, int peer) {
  return comm->nets[comm->peerKind[peer]];
}
/* The handle `peer` published for the transport of the pair (its slot of
 * the same transport may differ from this rank's). */
static inline const char* collPeerHandle(const struct collComm* comm, int peer) {
  uint64_t id = comm->peers[comm->rank].netId[comm->peerKind[peer]];
  for (int s = 0; s < COLL_NET_SLOTS; s++)
    if (comm->peers[peer].netId[s] == id) return comm->peers[peer].netHandle[s];
  return comm->peers[peer].netHandle[0]; /* not reached: the pair's slot was chosen from both lists */
}
/* Calls fn(comm, arg) for every live communicator of this process, with
 * the registry lock held (no communicator is freed meanwhile; fn must not
 * call into the registry). For flight-recorder dumps on a signal. */
void collCommForEach(void (*fn)(collComm_t comm, void* arg), void* arg);
/* Host name of a rank, for messages. */
const char* collCommPeerHost(collComm_t comm, int rank);

#endif
