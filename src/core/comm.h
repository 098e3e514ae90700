/* comm.h - the communicator object shared by core, engine and streams. */
#ifndef COLL_COMM_H_
#define COLL_COMM_H_

#include <pthread.h>
#include <stdint.h>

#include "bootstrap/bootstrap.h"
#include "coll.h"
#include "coll_net.h"
#include "engine/sched.h"

#define COLL_COMM_MAGIC 0xc011c033u
#define COLL_COMM_DEAD 0xdeadc033u
#define COLL_HOST_LEN 64
#define COLL_MAX_CHANNELS 64
#define COLL_TUNE_MAX_CHANNELS 4 /* channel counts the tuner tries: 1, 2, 4 */

/* Transport kinds: between nodes (tcp, later ib) and inside a node (shm). */
enum { COLL_NET_INTER = 0, COLL_NET_INTRA = 1, COLL_NET_KINDS = 2 };

typedef struct {
  int32_t rank;
  int32_t pid;
  uint32_t version;
  uint32_t hasIntra; /* published an intra-node handle */
  uint64_t hostHash;
  uint64_t kernelHash; /* boot id: ranks that share a kernel share its cores */
  char host[COLL_HOST_LEN];
  char netHandle[COLL_NET_KINDS][COLL_NET_HANDLE_BYTES];
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
} collWork;

struct collComm {
  uint32_t magic;
  int rank, nranks;
  uint64_t commHash;
  collBootstrap boot;
  collPeerInfo* peers;
  const collNet_v2_t* nets[COLL_NET_KINDS]; /* [INTRA] NULL when unavailable */
  void* listenComms[COLL_NET_KINDS];
  uint8_t* peerKind; /* [nranks]: COLL_NET_INTER or COLL_NET_INTRA */
  int netDev;
  /* node layout (ranks grouped by host hash, COLL_HOSTID overrides) */
  int* rankNode;     /* [nranks]: node index, numbered by first rank */
  int nnodes, node, localRank;
  struct collTopo* topo; /* hwloc summaries of every rank, link classes (src/topo) */
  struct collTunerState* tuner; /* cost model inputs, plugin, decision cache (src/tuner) */
  struct collMailbox* mailbox;  /* one-shot small collectives inside a node (engine/mailbox.h); NULL: none */
  int nchannels;    /* default channel count (point-to-point striping) */
  int maxChannels;  /* channels the tuner may use; conns/channels size */
  collConn* conns; /* [maxChannels * nranks] */
  collChannel* channels;
  int timeoutSec;
  int localRanks;  /* ranks on this node (same host hash) */
  int kernelRanks; /* ranks on this kernel, >= localRanks: emulated nodes (network
                      namespaces, containers, COLL_HOSTID) share the cores */
  int spinUs;      /* polling time before sleeping, see COLL_SPIN_US */
  int yieldWait;   /* oversubscribed: sched_yield() between polls while spinning */
  int checkCalls;  /* COLL_CHECK: verify call signatures across ranks */
  size_t chunkBytes;
  volatile int abortFlag;
  collResult_t asyncError; /* atomic */
  char asyncMsg[512];
  uint64_t opCount;
  uint32_t collSeq;  /* collectives run so far: the call number in their signature (engine/sig.h) */
  char* stage;       /* working copy of float16/bfloat16 reductions (engine.c), kept between calls */
  size_t stageBytes;
  unsigned goneScan; /* next rank the connection wait checks for being gone (conn.c) */
  int initRunning;  /* non-blocking init thread still working (atomic) */
  int activeCalls;  /* threads inside API calls on this comm (atomic) */
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
};

struct collStream {
  collComm_t comm;
  uint32_t magic;
  int pending;        /* guarded by comm->qlock */
  collResult_t error; /* first error, guarded by comm->qlock */
};
#define COLL_STREAM_MAGIC 0xc0115eeau

/* Records an asynchronous error once (first wins) and aborts the comm. */
void collCommSetAsyncError(collComm_t comm, collResult_t r, const char* msg);
/* Validates a communicator handle; names `fn` in the error. */
collResult_t collCommCheck(collComm_t comm, const char* fn);
/* collCommCheck plus activeCalls++ (atomically with the registry lookup, so
 * collCommAbort on another thread waits for this call to leave). */
collResult_t collCommEnter(collComm_t comm, const char* fn);
void collCommLeave(collComm_t comm);
/* The transport that carries traffic with `peer`. */
static inline const collNet_v2_t* collPeerNet(const struct collComm* comm, int peer) {
  return comm->nets[comm->peerKind[peer]];
}
/* Host name of a rank, for messages. */
const char* collCommPeerHost(collComm_t comm, int rank);

#endif
