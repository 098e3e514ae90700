/*
 * comm.c - communicator lifecycle: init (blocking or not), destroy, abort,
 * async errors, and the registry that turns a destroyed handle into an error
 * instead of a use-after-free.
 */
#include "core/comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/core.h"
#include "core/devcall.h"
#include "engine/engine.h"
#include "engine/mailbox.h"
#include "misc/log.h"
#include "misc/param.h"
#include "core/net.h"
#include "obs/obs.h"
#include "tuner/tuner.h"
#include "topo/topo.h"

/* ---- registry of live communicators ---------------------------------- */
static pthread_mutex_t collRegLock = PTHREAD_MUTEX_INITIALIZER;
static collComm_t* collReg;
static int collRegN, collRegCap;

/* ---- fork() detection ----------------------------------------------------
 * A child of fork() inherits every communicator's memory, its sockets and
 * its shared-memory rings, but none of its threads. Used there, a
 * communicator would take its peers' messages meant for the parent (or write
 * into the parent's rings), so every call on it in the child is refused.
 * The child handler bumps a generation number that each communicator
 * recorded when it was created. The registry lock is held across fork() so a
 * child never inherits it locked. */
static unsigned collForkGen;
static _Thread_local int collTidCache;
static pthread_once_t collAtforkOnce = PTHREAD_ONCE_INIT;

static void collAtforkPrepare(void) { pthread_mutex_lock(&collRegLock); }
static void collAtforkParent(void) { pthread_mutex_unlock(&collRegLock); }
static void collAtforkChild(void) {
  __atomic_add_fetch(&collForkGen, 1, __ATOMIC_RELAXED);
  collTidCache = 0;
  pthread_mutex_unlock(&collRegLock);
}
static void collAtforkRegister(void) { pthread_atfork(collAtforkPrepare, collAtforkParent, collAtforkChild); }

unsigned collForkGeneration(void) {
  pthread_once(&collAtforkOnce, collAtforkRegister);
  return __atomic_load_n(&collForkGen, __ATOMIC_RELAXED);
}

static int collSelfTid(void) {
  if (!collTidCache) collTidCache = (int)syscall(SYS_gettid);
  return collTidCache;
}

static int collRegAdd(collComm_t c) {
  c->forkGen = collForkGeneration();
  c->callTimeoutMs = -1;
  pthread_mutex_init(&c->errLock, NULL);
  pthread_mutex_lock(&collRegLock);
  if (collRegN == collRegCap) {
    int ncap = collRegCap ? collRegCap * 2 : 16;
    collComm_t* n = realloc(collReg, sizeof(*n) * (size_t)ncap);
    if (!n) { pthread_mutex_unlock(&collRegLock); return -1; }
    collReg = n;
    collRegCap = ncap;
  }
  collReg[collRegN++] = c;
  pthread_mutex_unlock(&collRegLock);
  return 0;
}

/* With collRegLock held. */
static int collRegFind(collComm_t c) {
  for (int i = 0; i < collRegN; i++)
    if (collReg[i] == c) return i;
  return -1;
}

/* Removes c and orphans its streams (their later calls fail cleanly). */
static int collRegRemove(collComm_t c) {
  pthread_mutex_lock(&collRegLock);
  int i = collRegFind(c);
  if (i >= 0) {
    collReg[i] = collReg[--collRegN];
    for (int k = 0; k < c->nstreams; k++) c->streams[k]->comm = NULL;
    c->nstreams = 0;
  }
  pthread_mutex_unlock(&collRegLock);
  return i >= 0;
}

static int collRegHas(collComm_t c) {
  pthread_mutex_lock(&collRegLock);
  int found = collRegFind(c) >= 0;
  pthread_mutex_unlock(&collRegLock);
  return found;
}

static collResult_t collForkError(collComm_t comm, const char* fn) {
  return collSetError(collInvalidUsage,
                      "%s: communicator %p was created by another process (this process %d is a fork() child of "
                      "it): a communicator can only be used by the process that created it",
                      fn, (void*)comm, (int)getpid());
}

static int collIsForeign(collComm_t comm) {
  return comm->forkGen != __atomic_load_n(&collForkGen, __ATOMIC_RELAXED);
}

void collCommErrorMessage(collComm_t comm, char* buf, size_t size) {
  pthread_mutex_lock(&comm->errLock);
  snprintf(buf, size, "%s", comm->asyncMsg);
  pthread_mutex_unlock(&comm->errLock);
}

collResult_t collCommFailedError(collComm_t comm, const char* fn) {
  collResult_t e = __atomic_load_n(&comm->asyncError, __ATOMIC_ACQUIRE);
  /* a call on a communicator whose non-blocking init still runs waits for
   * the init (bounded by COLL_INIT_TIMEOUT), then goes on or fails with it */
  while (e == collInProgress && __atomic_load_n(&comm->initRunning, __ATOMIC_ACQUIRE)) {
    usleep(200);
    e = __atomic_load_n(&comm->asyncError, __ATOMIC_ACQUIRE);
  }
  if (e == collInProgress) return collSetError(collInvalidUsage, "%s: communicator is still initializing", fn);
  if (e == collSuccess && !__atomic_load_n(&comm->abortFlag, __ATOMIC_ACQUIRE)) return collSuccess;
  char msg[sizeof comm->asyncMsg];
  collCommErrorMessage(comm, msg, sizeof msg);
  return collSetError(e != collSuccess ? e : collInvalidUsage, "%s: communicator failed earlier: %s", fn,
                      msg[0] ? msg : "collCommAbort was called");
}

collResult_t collCommCheck(collComm_t comm, const char* fn) {
  if (!comm) return collSetError(collInvalidArgument, "%s: comm is NULL", fn);
  if (!collRegHas(comm))
    return collSetError(collInvalidUsage, "%s: communicator %p was destroyed or never created", fn, (void*)comm);
  if (collIsForeign(comm)) return collForkError(comm, fn);
  return collCommFailedError(comm, fn);
}

/* Registry lookup, fork and teardown checks and activeCalls++, atomically
 * with respect to collCommDestroy/Abort (which set destroying under the
 * same lock and then wait for activeCalls to drop to 0). issue: also take
 * the issuing-thread slot. */
static collResult_t collRegEnter(collComm_t comm, const char* fn, int issue) {
  if (!comm) return collSetError(collInvalidArgument, "%s: comm is NULL", fn);
  int tid = issue ? collSelfTid() : 0;
  pthread_mutex_lock(&collRegLock);
  if (collRegFind(comm) < 0) {
    pthread_mutex_unlock(&collRegLock);
    return collSetError(collInvalidUsage, "%s: communicator %p was destroyed or never created", fn, (void*)comm);
  }
  if (collIsForeign(comm)) {
    pthread_mutex_unlock(&collRegLock);
    return collForkError(comm, fn);
  }
  if (comm->destroying) {
    pthread_mutex_unlock(&collRegLock);
    return collSetError(collInvalidUsage, "%s: communicator %p is being destroyed (collCommDestroy or collCommAbort "
                        "on another thread)", fn, (void*)comm);
  }
  if (issue) {
    int owner = __atomic_load_n(&comm->issuerTid, __ATOMIC_ACQUIRE);
    if (owner && owner != tid) {
      const char* other = comm->issuerFn;
      pthread_mutex_unlock(&collRegLock);
      return collSetError(collInvalidUsage,
                          "%s: refused: another thread (tid %d) is inside %s on this communicator; a communicator "
                          "takes operations from one thread at a time (serialize the calls, or give each thread "
                          "its own communicator)", fn, owner, other ? other : "a call");
    }
    if (!owner) {
      comm->issuerFn = fn;
      comm->issuerDepth = 0;
      __atomic_store_n(&comm->issuerTid, tid, __ATOMIC_RELEASE);
    }
    comm->issuerDepth++;
  }
  __atomic_add_fetch(&comm->activeCalls, 1, __ATOMIC_ACQ_REL);
  pthread_mutex_unlock(&collRegLock);
  return collSuccess;
}

collResult_t collCommEnter(collComm_t comm, const char* fn) {
  collResult_t r = collRegEnter(comm, fn, 0);
  if (r != collSuccess) return r;
  if ((r = collCommFailedError(comm, fn)) != collSuccess) collCommLeave(comm);
  return r;
}

collResult_t collCommEnterAny(collComm_t comm, const char* fn) { return collRegEnter(comm, fn, 0); }

void collCommLeave(collComm_t comm) { __atomic_sub_fetch(&comm->activeCalls, 1, __ATOMIC_ACQ_REL); }

collResult_t collCommEnterIssue(collComm_t comm, const char* fn) {
  collResult_t r = collRegEnter(comm, fn, 1);
  if (r != collSuccess) return r;
  if ((r = collCommFailedError(comm, fn)) != collSuccess) collCommLeaveIssue(comm);
  return r;
}

/* Only the issuing thread changes issuerDepth; issuerTid is cleared last. */
void collCommLeaveIssue(collComm_t comm) {
  if (--comm->issuerDepth == 0) __atomic_store_n(&comm->issuerTid, 0, __ATOMIC_RELEASE);
  collCommLeave(comm);
}

/* Every stream created and not yet destroyed (orphans included), so a handle
 * is judged without reading what it points to; under collRegLock. */
static collStream_t* collLiveStreams;
static int collLiveN, collLiveCap;

static int collStreamLiveLocked(collStream_t s) {
  for (int i = collLiveN - 1; i >= 0; i--)
    if (collLiveStreams[i] == s) return 1;
  return 0;
}

static collResult_t collStreamGoneError(collStream_t s, const char* fn) {
  return collSetError(collInvalidUsage, "%s: stream %p was already destroyed (or never created by collStreamCreate)",
                      fn, (void*)s);
}

collResult_t collStreamCheckUse(collComm_t comm, collStream_t s, const char* fn) {
  if (!s) return collSuccess;
  pthread_mutex_lock(&collRegLock);
  collResult_t r = collSuccess;
  if (!collStreamLiveLocked(s)) r = collStreamGoneError(s, fn);
  else if (s->comm != comm)
    r = collSetError(collInvalidUsage, "%s: stream %p belongs to another communicator%s", fn, (void*)s,
                     s->comm ? "" : " (one that was destroyed)");
  pthread_mutex_unlock(&collRegLock);
  return r;
}

int collStreamIsLive(collStream_t s) {
  pthread_mutex_lock(&collRegLock);
  int live = collStreamLiveLocked(s);
  pthread_mutex_unlock(&collRegLock);
  return live;
}

collResult_t collStreamEnter(collStream_t s, collComm_t* out, const char* fn) {
  pthread_mutex_lock(&collRegLock);
  if (!collStreamLiveLocked(s)) {
    pthread_mutex_unlock(&collRegLock);
    return collStreamGoneError(s, fn);
  }
  collComm_t comm = s->comm;
  if (!comm) {
    pthread_mutex_unlock(&collRegLock);
    return collSetError(collInvalidUsage, "%s: the stream's communicator was destroyed", fn);
  }
  if (collIsForeign(comm)) {
    pthread_mutex_unlock(&collRegLock);
    return collForkError(comm, fn);
  }
  __atomic_add_fetch(&comm->activeCalls, 1, __ATOMIC_ACQ_REL);
  pthread_mutex_unlock(&collRegLock);
  *out = comm;
  return collSuccess;
}

collResult_t collStreamRegister(collComm_t comm, collStream_t s) {
  pthread_mutex_lock(&collRegLock);
  if (comm->nstreams == comm->capStreams) {
    int ncap = comm->capStreams ? comm->capStreams * 2 : 4;
    collStream_t* n = realloc(comm->streams, sizeof(*n) * (size_t)ncap);
    if (!n) {
      pthread_mutex_unlock(&collRegLock);
      return collSetError(collSystemError, "collStreamCreate: out of memory");
    }
    comm->streams = n;
    comm->capStreams = ncap;
  }
  if (collLiveN == collLiveCap) {
    int ncap = collLiveCap ? collLiveCap * 2 : 16;
    collStream_t* n = realloc(collLiveStreams, sizeof(*n) * (size_t)ncap);
    if (!n) {
      pthread_mutex_unlock(&collRegLock);
      return collSetError(collSystemError, "collStreamCreate: out of memory");
    }
    collLiveStreams = n;
    collLiveCap = ncap;
  }
  collLiveStreams[collLiveN++] = s;
  comm->streams[comm->nstreams++] = s;
  pthread_mutex_unlock(&collRegLock);
  return collSuccess;
}

void collStreamUnregister(collStream_t s) {
  pthread_mutex_lock(&collRegLock);
  collComm_t comm = s->comm;
  for (int k = 0; comm && k < comm->nstreams; k++)
    if (comm->streams[k] == s) {
      comm->streams[k] = comm->streams[--comm->nstreams];
      break;
    }
  s->comm = NULL;
  for (int i = 0; i < collLiveN; i++)
    if (collLiveStreams[i] == s) {
      collLiveStreams[i] = collLiveStreams[--collLiveN];
      break;
    }
  pthread_mutex_unlock(&collRegLock);
}

void collCommForEach(void (*fn)(collComm_t comm, void* arg), void* arg) {
  pthread_mutex_lock(&collRegLock);
  for (int i = 0; i < collRegN; i++)
    if (!collIsForeign(collReg[i]) && !collReg[i]->destroying) fn(collReg[i], arg);
  pthread_mutex_unlock(&collRegLock);
}

const char* collCommPeerHost(collComm_t comm, int rank) {
  if (!comm->peers || rank < 0 || rank >= comm->nranks) return "?";
  return comm->peers[rank].host;
}

int collCommSetAsyncError(collComm_t comm, collResult_t r, const char* msg) {
  int first = 0;
  pthread_mutex_lock(&comm->errLock);
  if (__atomic_load_n(&comm->asyncError, __ATOMIC_ACQUIRE) == collSuccess) {
    snprintf(comm->asyncMsg, sizeof comm->asyncMsg, "%s", msg ? msg : "");
    __atomic_store_n(&comm->asyncError, r, __ATOMIC_RELEASE);
    first = 1;
  }
  pthread_mutex_unlock(&comm->errLock);
  __atomic_store_n(&comm->abortFlag, 1, __ATOMIC_RELEASE);
  return first;
}

void collCommRefineAsyncError(collComm_t comm, const char* msg) {
  pthread_mutex_lock(&comm->errLock);
  snprintf(comm->asyncMsg, sizeof comm->asyncMsg, "%s", msg);
  pthread_mutex_unlock(&comm->errLock);
}

/* ---- init -------------------------------------------------------------- */
/* Everything after the arguments were checked; runs on the caller's thread or
 * on the non-blocking init thread. */
static collResult_t collCommInitBody(collComm_t comm, const collBootId* id, const char* netName) {
  int n = comm->nranks;
  collSocketSetRootHint(&id->root); /* interfaces: prefer the one that reaches the root */
  collNetList list;
  collResult_t r = collNetGetList(netName, &list);
  if (r != collSuccess) return r;
  comm->peers = calloc((size_t)n, sizeof(collPeerInfo));
  comm->peerKind = calloc((size_t)n, 1);
  comm->rankNode = calloc((size_t)n, sizeof(int));
  if (!comm->peers || !comm->peerKind || !comm->rankNode) return collSetError(collSystemError, "init: out of memory");
  collPeerInfo* me = &comm->peers[comm->rank];
  for (int k = 0; k < COLL_NET_SLOTS; k++) {
    const collNet_t* net = list.nets[k];
    if (!net) continue;
    comm->netDev[k] = collNetPickDev(net, comm->rank);
    r = net->listen(comm->netDev[k], me->netHandle[k], &comm->listenComms[k]);
    int later = 0; /* a network transport after this one */
    for (int j = k + 1; j < COLL_NET_SLOTS; j++) later |= list.nets[j] != NULL;
    if (r != collSuccess && (k == COLL_NET_INTRA || later)) { /* the next transport carries its pairs */
      COLL_INFO(COLL_SUB_INIT, "rank %d: %s transport unavailable (%s); the next one in the list carries its pairs",
                comm->rank, net->name, collLastErrorMessage());
      collClearError();
      list.nets[k] = NULL;
      continue;
    }
    if (r != collSuccess) return r;
    comm->nets[k] = net;
    comm->netReg[k] = (uint8_t)list.needsReg[k];
    comm->netIrecvReduce[k] = list.irecvReduce[k];
    me->netId[k] = collNetId(net->name);
  }
  me->hasIntra = comm->nets[COLL_NET_INTRA] != NULL;
  /* the rendezvous and the allgathers of init are bounded by COLL_INIT_TIMEOUT,
   * later bootstrap operations (split) by the communicator's timeout */
  double initTimeout = (double)collParamInt(COLL_PARAM_INIT_TIMEOUT);
  comm->boot.timeoutSec = initTimeout;
  if ((r = collBootInit(&comm->boot, id, comm->rank, n, &comm->abortFlag, initTimeout)) != collSuccess) return r;
  me->rank = comm->rank;
  me->pid = (int32_t)getpid();
  me->version = COLL_VERSION_CODE;
  me->hostHash = collTopoHostHash();
  me->kernelHash = collTopoKernelHash();
  snprintf(me->host, sizeof me->host, "%s", collHostName());
  if ((r = collBootAllGather(&comm->boot, comm->peers, sizeof(collPeerInfo))) != collSuccess) return r;
  for (int i = 0; i < n; i++)
    if (comm->peers[i].version != COLL_VERSION_CODE || comm->peers[i].rank != i)
      return collSetError(collInvalidUsage, "rank %d on %s runs coll version %u, this rank runs %d", i,
                          comm->peers[i].host, comm->peers[i].version, COLL_VERSION_CODE);
  collTopoNodes(comm);
  if ((r = collNetPickPairs(comm, &list)) != collSuccess) return r;
  if ((r = collTopoInit(comm)) != collSuccess) return r;
  int64_t spin = collParamInt(COLL_PARAM_SPIN);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  /* more ranks than cores: waits yield at once (a peer that has work gets
   * the core) instead of polling first, then sleep as usual (progress.c) */
  comm->yieldWait = spin < 0 && comm->kernelRanks > cores;
  comm->spinUs = spin >= 0 ? (int)spin : 1000;
  comm->conns = calloc((size_t)comm->maxChannels * (size_t)n, sizeof(collConn));
  comm->channels = calloc((size_t)comm->maxChannels, sizeof(collChannel));
  if (!comm->conns || !comm->channels) return collSetError(collSystemError, "init: out of memory");
  comm->commHash = comm->boot.secret; /* per communicator: derived from the root's nonce */
  if ((r = collObsInit(comm)) != collSuccess) return r;
  if ((r = collTunerInit(comm)) != collSuccess) return r;
  if ((r = collMailboxInit(comm)) != collSuccess) return r;
  if ((r = collObsStart(comm)) != collSuccess) return r;
  if (comm->rank == 0) collParamDump();
  char pairs[512];
  collNetPairsText(comm, pairs, sizeof pairs);
  /* what is fixed at init, and what the tuner picks per call instead */
  int fixCh = collParamIsSet(COLL_PARAM_NCHANNELS), fixChunk = collParamIsSet(COLL_PARAM_CHUNKSIZE);
  char fixedNote[112] = "";
  if (fixCh && fixChunk)
    snprintf(fixedNote, sizeof fixedNote, "; every call: %d channels (COLL_NCHANNELS), chunk %zu bytes (COLL_CHUNKSIZE)",
             comm->nchannels, comm->chunkBytes);
  else if (fixCh)
    snprintf(fixedNote, sizeof fixedNote, "; every call: %d channels (COLL_NCHANNELS)", comm->nchannels);
  else if (fixChunk)
    snprintf(fixedNote, sizeof fixedNote, "; every call: chunk %zu bytes (COLL_CHUNKSIZE)", comm->chunkBytes);
  const char* picked = fixCh && fixChunk ? "" : fixCh ? " and chunk size" : fixChunk ? " and channel count"
                                                                                   : ", channel count and chunk size";
  COLL_INFO(COLL_SUB_INIT,
            "rank %d/%d pid %d on %s: node %d of %d, local rank %d of %d; transports: %s; "
            "the tuner picks the algorithm%s per collective call (COLL_DEBUG_SUBSYS=TUNE, allreduce_perf "
            "--show_algo 1 and coll_info show its choices)%s; send/recv: %d channels, chunk %zu bytes; timeout %d s; "
            "waits spin %d us%s",
            comm->rank, n, (int)getpid(), collHostName(), comm->node, comm->nnodes, comm->localRank,
            comm->localRanks, pairs, picked, fixedNote, comm->nchannels, comm->chunkBytes, comm->timeoutSec,
            comm->spinUs,
            comm->yieldWait ? ", yielding the CPU between polls (more ranks than cores), then sleep" : ", then sleep");
  comm->boot.timeoutSec = comm->timeoutSec;
  return collSuccess;
}

typedef struct {
  collComm_t comm;
  collBootId id;
  const char* netName;
} collInitJob;

static void collCommFreeResources(collComm_t comm) {
  collStreamsShutdown(comm);
  collObsFree(comm); /* writes COLL_STATS_FILE / COLL_TRACE_FILE: before what it reads is freed */
  collEngineFree(comm);
  collDevCommFree(comm); /* after the engine: its registrations may cover the staging */
  collMailboxFree(comm);
  collTunerFree(comm);
  for (int k = 0; k < COLL_NET_SLOTS; k++)
    if (comm->listenComms[k]) comm->nets[k]->closeListen(comm->listenComms[k]);
  collBootClose(&comm->boot, NULL);
  collTopoFree(comm);
  free(comm->peers);
  free(comm->peerKind);
  free(comm->rankNode);
  pthread_mutex_destroy(&comm->qlock);
  pthread_cond_destroy(&comm->qcond);
  pthread_cond_destroy(&comm->qdone);
  pthread_mutex_destroy(&comm->errLock);
  free(comm->streams);
  comm->magic = COLL_COMM_DEAD;
  free(comm);
}

static void* collInitThread(void* arg) {
  collInitJob* j = arg;
  collResult_t r = collCommInitBody(j->comm, &j->id, j->netName);
  if (r == collSuccess) {
    collResult_t expect = collInProgress;
    __atomic_compare_exchange_n(&j->comm->asyncError, &expect, collSuccess, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  } else {
    collBootRootStop(j->comm->boot.root, collLastErrorMessage()); /* ranks still joining learn why */
    j->comm->boot.root = NULL;
    __atomic_store_n(&j->comm->asyncError, collSuccess, __ATOMIC_RELEASE);
    collCommSetAsyncError(j->comm, r, collLastErrorMessage());
  }
  __atomic_store_n(&j->comm->initRunning, 0, __ATOMIC_RELEASE);
  free(j);
  return NULL;
}

/* A root that the failed init owned tells ranks still joining why. */
static collResult_t collInitFail(collBootRoot* root, collResult_t r) {
  collBootRootStop(root, collLastErrorMessage());
  return r;
}

static void collCommRootFail(void* ctx, collResult_t r, const char* msg) { collCommSetAsyncError(ctx, r, msg); }

collResult_t collCommInitRankRoot(collComm_t* out, int nranks, collUniqueId commId, int rank, collConfig_t* config,
                                  collBootRoot* root) {
  collLogInit();
  if (!out) return collInitFail(root, collSetError(collInvalidArgument, "collCommInitRank: comm is NULL"));
  *out = NULL;
  if (nranks < 1 || nranks > 65536)
    return collInitFail(root, collSetError(collInvalidArgument,
                                           "collCommInitRank: nranks %d is out of range [1, 65536]", nranks));
  if (rank < 0 || rank >= nranks)
    return collInitFail(root, collSetError(collInvalidArgument, "collCommInitRank: rank %d is out of range [0, %d)",
                                           rank, nranks));
  if (config && (config->size != sizeof(collConfig_t) || config->magic != COLL_CONFIG_MAGIC))
    return collInitFail(root, collSetError(collInvalidArgument, "collCommInitRankConfig: config was not initialized "
                                                                "with COLL_CONFIG_INITIALIZER"));
  collBootId id;
  memcpy(&id, commId.internal, sizeof id);
  if (id.magic != COLL_BOOT_MAGIC)
    return collInitFail(root, collSetError(collInvalidArgument,
                                           "collCommInitRank: commId is not a coll unique id (bad magic)"));
  int blocking = 1;
  int timeout = (int)collParamInt(COLL_PARAM_TIMEOUT);
  const char* netName = collParamStr(COLL_SPARAM_NET);
  if (config) {
    if (config->blocking != COLL_CONFIG_UNDEF) blocking = config->blocking;
    if (config->timeoutSec != COLL_CONFIG_UNDEF) {
      if (config->timeoutSec < 0)
        return collInitFail(root, collSetError(collInvalidArgument, "collCommInitRankConfig: timeoutSec %d < 0",
                                               config->timeoutSec));
      timeout = config->timeoutSec;
    }
    if (config->netName) netName = config->netName;
  }
  collComm_t comm = calloc(1, sizeof *comm);
  if (!comm) return collInitFail(root, collSetError(collSystemError, "collCommInitRank: out of memory"));
  comm->magic = COLL_COMM_MAGIC;
  comm->rank = rank;
  comm->nranks = nranks;
  comm->timeoutSec = timeout;
  comm->boot.nextFd = comm->boot.prevFd = -1;
  int64_t nch = collParamInt(COLL_PARAM_NCHANNELS);
  comm->nchannels = nch > COLL_MAX_CHANNELS ? COLL_MAX_CHANNELS : (int)nch;
  /* connections are made lazily, so room for the tuner's largest channel
   * count costs only the arrays */
  comm->maxChannels = collParamIsSet(COLL_PARAM_NCHANNELS) || comm->nchannels >= COLL_TUNE_MAX_CHANNELS
                          ? comm->nchannels
                          : COLL_TUNE_MAX_CHANNELS;
  comm->chunkBytes = (size_t)collParamInt(COLL_PARAM_CHUNKSIZE);
  comm->checkCalls = collParamInt(COLL_PARAM_CHECK) != 0;
  pthread_mutex_init(&comm->qlock, NULL);
  pthread_cond_init(&comm->qcond, NULL);
  pthread_cond_init(&comm->qdone, NULL);
  if (collRegAdd(comm) != 0) {
    free(comm);
    return collInitFail(root, collSetError(collSystemError, "collCommInitRank: out of memory"));
  }
  comm->boot.root = root; /* freed with the communicator from here on */
  collBootRootSetOwner(root, collCommRootFail, comm);
  if (!blocking) {
    collInitJob* j = malloc(sizeof *j);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    comm->asyncError = collInProgress;
    comm->initRunning = 1;
    if (j) *j = (collInitJob){comm, id, netName};
    if (!j || pthread_create(&t, &attr, collInitThread, j) != 0) {
      free(j);
      pthread_attr_destroy(&attr);
      collRegRemove(comm);
      collCommFreeResources(comm);
      return collSetError(collSystemError, "collCommInitRankConfig: cannot start the init thread");
    }
    pthread_attr_destroy(&attr);
    *out = comm;
    return collInProgress;
  }
  collResult_t r = collCommInitBody(comm, &id, netName);
  if (r != collSuccess) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", collLastErrorMessage());
    collBootClose(&comm->boot, msg); /* an owned root tells ranks still joining why */
    collRegRemove(comm);
    collCommFreeResources(comm);
    return collSetError(r, "%s", msg);
  }
  *out = comm;
  return collSuccess;
}

collResult_t collCommInitRankConfigImpl(collComm_t* out, int nranks, collUniqueId commId, int rank,
                                        collConfig_t* config) {
  return collCommInitRankRoot(out, nranks, commId, rank, config, NULL);
}

collResult_t collCommInitRankImpl(collComm_t* comm, int nranks, collUniqueId commId, int rank) {
  return collCommInitRankConfig(comm, nranks, commId, rank, NULL);
}

/* ---- teardown ------------------------------------------------------------
 * collCommDestroy and collCommAbort mark the communicator `destroying` under
 * the registry lock, so no call enters it any more, and free it only once
 * every thread inside a call on it (activeCalls) has left: nothing is ever
 * freed under a running call. A call in flight on another thread when
 * destroy begins is failed (collInvalidUsage), not waited for: waiting could
 * last until its timeout. Neither runs in a fork() child (it would write
 * into the parent's shared rings). */
static collResult_t collBeginTeardown(collComm_t comm, const char* fn, int* already) {
  *already = 0;
  pthread_mutex_lock(&collRegLock);
  if (collRegFind(comm) < 0) {
    pthread_mutex_unlock(&collRegLock);
    return collSetError(collInvalidUsage, "%s: communicator %p was already destroyed", fn, (void*)comm);
  }
  if (collIsForeign(comm)) {
    pthread_mutex_unlock(&collRegLock);
    return collSetError(collInvalidUsage,
                        "%s: communicator %p was created by another process (this process %d is a fork() child "
                        "of it); its memory is released when this process exits or execs",
                        fn, (void*)comm, (int)getpid());
  }
  *already = comm->destroying;
  comm->destroying = 1;
  pthread_mutex_unlock(&collRegLock);
  return collSuccess;
}

/* Wakes every thread waiting on the comm's queue (after an abort). */
static void collCommWakeAll(collComm_t comm) {
  pthread_mutex_lock(&comm->qlock);
  pthread_cond_broadcast(&comm->qcond);
  pthread_cond_broadcast(&comm->qdone);
  pthread_mutex_unlock(&comm->qlock);
}

static void collWaitCallsLeft(collComm_t comm) {
  while (__atomic_load_n(&comm->initRunning, __ATOMIC_ACQUIRE) || __atomic_load_n(&comm->activeCalls, __ATOMIC_ACQUIRE))
    usleep(1000);
}

collResult_t collCommDestroyImpl(collComm_t comm) {
  if (!comm) return collSuccess;
  int already;
  collResult_t r = collBeginTeardown(comm, "collCommDestroy", &already);
  if (r != collSuccess) return r;
  if (already)
    return collSetError(collInvalidUsage, "collCommDestroy: communicator %p is already being destroyed or aborted "
                        "by another thread", (void*)comm);
  while (__atomic_load_n(&comm->initRunning, __ATOMIC_ACQUIRE)) usleep(1000);
  int busy = __atomic_load_n(&comm->activeCalls, __ATOMIC_ACQUIRE);
  if (busy > 0) {
    const char* fn = __atomic_load_n(&comm->issuerTid, __ATOMIC_ACQUIRE) ? comm->issuerFn : NULL;
    char msg[256];
    if (fn)
      snprintf(msg, sizeof msg, "collCommDestroy was called on another thread while this call (%s) was in flight", fn);
    else
      snprintf(msg, sizeof msg, "collCommDestroy was called on another thread while this call was in flight");
    COLL_WARN(COLL_SUB_INIT, "collCommDestroy: %d call(s) in flight on other threads are failed (%s)", busy,
              fn ? fn : "a call");
    collCommSetAsyncError(comm, collInvalidUsage, msg);
    collCommWakeAll(comm);
  }
  collStreamsDrain(comm); /* issued work runs to its end (at once if the comm failed) */
  collWaitCallsLeft(comm);
  collRegRemove(comm);
  collCommFreeResources(comm);
  return collSuccess;
}

collResult_t collCommAbortImpl(collComm_t comm) {
  if (!comm) return collSuccess;
  int already;
  collResult_t r = collBeginTeardown(comm, "collCommAbort", &already);
  if (r != collSuccess) return r;
  /* marked before the error is set, so that no teardown sees the error first */
  if (__atomic_load_n(&comm->asyncError, __ATOMIC_ACQUIRE) == collSuccess)
    __atomic_store_n(&comm->userAborted, 1, __ATOMIC_RELEASE);
  collCommSetAsyncError(comm, collRemoteError, "collCommAbort was called");
  collCommWakeAll(comm);
  if (already) return collSuccess; /* the destroy or abort under way frees it, now without waiting */
  collWaitCallsLeft(comm);
  collRegRemove(comm);
  collCommFreeResources(comm);
  return collSuccess;
}

collResult_t collCommGetAsyncErrorImpl(collComm_t comm, collResult_t* asyncError) {
  if (!asyncError) return collSetError(collInvalidArgument, "collCommGetAsyncError: asyncError is NULL");
  if (!comm) return collSetError(collInvalidArgument, "collCommGetAsyncError: comm is NULL");
  if (!collRegHas(comm))
    return collSetError(collInvalidUsage, "collCommGetAsyncError: communicator %p was destroyed", (void*)comm);
  if (collIsForeign(comm)) return collForkError(comm, "collCommGetAsyncError");
  *asyncError = __atomic_load_n(&comm->asyncError, __ATOMIC_ACQUIRE);
  return collSuccess;
}

collResult_t collCommCountImpl(const collComm_t comm, int* count) {
  if (!count) return collSetError(collInvalidArgument, "collCommCount: count is NULL");
  collResult_t r = collCommCheck(comm, "collCommCount");
  if (r == collSuccess) *count = comm->nranks;
  return r;
}

collResult_t collCommUserRankImpl(const collComm_t comm, int* rank) {
  if (!rank) return collSetError(collInvalidArgument, "collCommUserRank: rank is NULL");
  collResult_t r = collCommCheck(comm, "collCommUserRank");
  if (r == collSuccess) *rank = comm->rank;
  return r;
}

/* ---- timeouts ------------------------------------------------------------ */
collResult_t collCommSetTimeoutImpl(collComm_t comm, int timeoutSec) {
  if (timeoutSec < 0) return collSetError(collInvalidArgument, "collCommSetTimeout: timeoutSec %d < 0", timeoutSec);
  collResult_t r = collRegEnter(comm, "collCommSetTimeout", 0);
  if (r != collSuccess) return r;
  __atomic_store_n(&comm->timeoutSec, timeoutSec, __ATOMIC_RELEASE);
  collCommLeave(comm);
  return collSuccess;
}

collResult_t collCommGetTimeoutImpl(collComm_t comm, int* timeoutSec) {
  if (!timeoutSec) return collSetError(collInvalidArgument, "collCommGetTimeout: timeoutSec is NULL");
  collResult_t r = collRegEnter(comm, "collCommGetTimeout", 0);
  if (r != collSuccess) return r;
  *timeoutSec = __atomic_load_n(&comm->timeoutSec, __ATOMIC_ACQUIRE);
  collCommLeave(comm);
  return collSuccess;
}

collResult_t collCommSetCallTimeoutImpl(collComm_t comm, int timeoutMs) {
  if (timeoutMs < -1)
    return collSetError(collInvalidArgument, "collCommSetCallTimeout: timeoutMs %d < -1 (-1 clears it)", timeoutMs);
  collResult_t r = collRegEnter(comm, "collCommSetCallTimeout", 0);
  if (r != collSuccess) return r;
  __atomic_store_n(&comm->callTimeoutMs, timeoutMs, __ATOMIC_RELEASE);
  collCommLeave(comm);
  return collSuccess;
}
