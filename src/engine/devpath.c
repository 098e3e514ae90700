/*
 * devpath.c - the device-resident path (issue 16): inside a node, and between
 * nodes over a network transport that reads GPU memory.
 *
 * Design. A collective whose buffers are device memory, on a communicator
 * whose ranks are all on one node, runs the usual schedule (the algorithm
 * the tuner picks, the same builders, slices and channels as on the host)
 * with three things swapped by memory type:
 *  - the local steps (copy, reduce, avg's division, and the reduction of a
 *    RECV_REDUCE) go through the device executor (exec.h): kernels of
 *    reduce_math.h enqueued on an internal non-blocking stream of the
 *    communicator. A phase of a channel counts as done once that stream is
 *    idle (cuStreamQuery, never a wait), so a later phase's sends read
 *    finished data; the call waits for the stream once at its end, before
 *    devcall.c opens the stream gate;
 *  - scratch and the RECV_REDUCE landing areas are device memory (exec.h's
 *    collExecGrow); a device buffer they replace is kept until the
 *    communicator is freed, since freeing GPU memory synchronizes the GPU,
 *    which would wait for a user stream that waits for this call's gate;
 *  - messages go over a second set of connections, the p2p transport's
 *    (transports/p2p: GPU rings shared as cuMem file descriptors, copies by
 *    the copy engine), made lazily per (peer, channel) by the engine's
 *    usual connect/accept (conn.c, collConnSet) with its deadlines,
 *    gone-peer checks and hellos. No host staging, no pinned copies;
 *  - on a communicator that spans nodes, messages with a rank on another
 *    node go over the communicator's own connection with it (its network
 *    transport: ib, a COLL_NET_PLUGIN transport) straight from and into
 *    GPU memory: the engine registers every such buffer, at any size,
 *    through its cache (engine/reg.h: regMrDmaBuf with a dma-buf fd of the
 *    range where the transport says COLL_PTR_DMABUF, else regMr with
 *    COLL_PTR_CUDA; device entries apart from host ones) and passes the
 *    handle with every isend/irecv, so the transport never copies device
 *    memory through its host bounce buffers (ib's eager path is for
 *    messages without a GPU registration); after each receive into GPU
 *    memory it calls the transport's iflush and waits for it before any
 *    later step (a kernel) reads the data (GPUDirect visibility).
 * At the first such call every rank opens a p2p listener on its GPU and
 * the ranks all-gather (one host all-gather through the engine) what each
 * can do: listener handle, GPU, pid, whether its GPU exports memory as
 * file descriptors, whether every network transport it reaches other
 * nodes with reads GPU memory (getProperties: ptrSupport & COLL_PTR_CUDA,
 * and its COLL_NET_GDR is 1). From that every rank decides the same: the
 * path is used when every rank's network transports read GPU memory,
 * every rank with a peer on its node has a listener, and every pair on
 * one node is the same GPU or has peer access and is one process or both
 * export descriptors; otherwise device calls stay staged (devcall.c),
 * said once at INFO with the first reason (e.g. "rank 3's ib device
 * mlx5_0 cannot read or write GPU memory").
 *
 * What stays staged: float16/bfloat16 sum/prod/avg (their float32 working
 * copy is host code), send/recv, all-to-all and groups of several calls.
 * Between nodes this runs on the fakes only (tests/fakecuda and a test
 * transport plugin); never yet on a GPU with an HCA.
 *
 * Failures: a CUDA error of a kernel or copy, a p2p transfer that fails
 * (the peer process died: EOF on the p2p socket within ~50 ms), a timeout
 * or an abort fail the call through the engine (collEngineFail), which
 * closes these connections with the host ones (collDevPathClose): ring
 * mappings, memfds and sockets go back at once.
 */
#include "engine/devpath.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/cuda_loader.h"
#include "device/devexec.h"
#include "engine/progress.h"
#include "misc/param.h"
#include "misc/log.h"
#include "reduce/reduce.h"
#include "transports/p2p/p2p.h"

#ifdef COLL_HAVE_CUDA

struct collDevPath {
  int state; /* first field (collDevPathWanted): 0 not decided, 1 in use, -1 unusable */
  int device;
  CUstream stream;
  collConnSet set;
  char* handles;
  collExecKeep keep;
  unsigned long long calls;
  uint8_t* viaComm; /* [nranks] (spanning nodes): 1 = a rank on another node (set.viaComm) */
};

int collDevPathWanted(collComm_t comm, const collOp* op) {
  if (op->count == 0 || op->mem.kind == COLL_MEM_HOST) return 0;
  if (collParamInt(COLL_PARAM_P2P_DISABLE)) return 0;
  if (comm->devPath && comm->devPath->state < 0) return 0;
  switch (op->fn) {
    case COLL_FN_ALLREDUCE:
    case COLL_FN_REDUCESCATTER:
    case COLL_FN_REDUCE:
      /* float16/bfloat16 sum, prod, avg: a float32 working copy, host code (engine.c) */
      return !(collTypeIsHalf(op->dtype) && (op->op == collSum || op->op == collProd || op->op == collAvg));
    case COLL_FN_ALLGATHER:
    case COLL_FN_BROADCAST: return 1;
    default: return 0;
  }
}

typedef struct {
  int32_t ok;   /* a p2p listener is open */
  int32_t dev;  /* CUDA ordinal of the rank's GPU */
  int32_t pid;
  int32_t fdOk; /* its GPU exports memory as POSIX file descriptors */
  int32_t netOk; /* every network transport it reaches other nodes with reads GPU memory (and COLL_NET_GDR=1) */
  char netWhy[256]; /* else why not, for the INFO line */
  char handle[COLL_NET_HANDLE_BYTES];
} collDevPathInfo;

/* This rank's netOk: 1 on one node; else COLL_NET_GDR=1 and the transport
 * of every rank on another node has COLL_PTR_CUDA (why: the reason not). */
static int collDevPathNetOk(collComm_t comm, char* why, size_t whySize) {
  if (comm->nnodes == 1) return 1;
  if (!collParamInt(COLL_PARAM_NET_GDR)) {
    snprintf(why, whySize, "rank %d has COLL_NET_GDR=0", comm->rank);
    return 0;
  }
  int asked[COLL_NET_SLOTS] = {0};
  for (int i = 0; i < comm->nranks; i++) {
    int slot = comm->peerKind[i];
    if (comm->rankNode[i] == comm->node || asked[slot]++) continue;
    const collNet_t* net = comm->nets[slot];
    collNetProperties_t pr;
    memset(&pr, 0, sizeof pr);
    if (net->getProperties(comm->netDev[slot], &pr) != collSuccess) {
      snprintf(why, whySize, "rank %d: the properties of its %.24s device %d: %.160s", comm->rank, net->name,
               comm->netDev[slot], collLastErrorMessage());
      collClearError();
      return 0;
    }
    if (!(pr.ptrSupport & COLL_PTR_CUDA)) {
      snprintf(why, whySize, "rank %d's %.24s device %.64s cannot read or write GPU memory (no COLL_PTR_CUDA: no "
               "dma-buf or peer-memory registration), and it carries rank %d on another node", comm->rank, net->name,
               pr.name, i);
      return 0;
    }
  }
  return 1;
}

/* Every rank computes the same answer from the same table: 1, or 0 with
 * the reason in why. */
static int collDevPathUsable(collComm_t comm, const collDevPathInfo* all, char* why, size_t whySize) {
  int n = comm->nranks;
  for (int i = 0; i < n; i++)
    if (!all[i].netOk) {
      snprintf(why, whySize, "%s", all[i].netWhy);
      return 0;
    }
  for (int i = 0; i < n; i++) {
    int local = 0; /* p2p is needed by a rank with a peer on its node */
    for (int j = 0; j < n && !local; j++) local = j != i && comm->rankNode[j] == comm->rankNode[i];
    if (local && !all[i].ok) {
      snprintf(why, whySize, "rank %d could not open a p2p listener on its GPU", i);
      return 0;
    }
  }
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) {
      if (comm->rankNode[i] != comm->rankNode[j]) continue; /* between nodes: the network transport */
      if (all[i].pid != all[j].pid && !(all[i].fdOk && all[j].fdOk)) {
        snprintf(why, whySize, "ranks %d and %d are different processes and GPU %d or %d cannot export memory as a "
                 "file descriptor", i, j, all[i].dev, all[j].dev);
        return 0;
      }
      if (all[i].dev == all[j].dev) continue;
      int ab = 0, ba = 0;
      CUdevice a, b;
      if (COLL_CU(cuDeviceGet)(&a, all[i].dev) == CUDA_SUCCESS && COLL_CU(cuDeviceGet)(&b, all[j].dev) == CUDA_SUCCESS) {
        COLL_CU(cuDeviceCanAccessPeer)(&ab, a, b);
        COLL_CU(cuDeviceCanAccessPeer)(&ba, b, a);
      }
      if (!ab || !ba) {
        snprintf(why, whySize, "GPUs %d (rank %d) and %d (rank %d) have no peer access", all[i].dev, i, all[j].dev, j);
        return 0;
      }
    }
  return 1;
}

static collResult_t collDevPathDecide(collComm_t comm, struct collDevPath* p, const collOp* op) {
  CUresult cr = COLL_CU(cuStreamCreate)(&p->stream, CU_STREAM_NON_BLOCKING);
  if (cr != CUDA_SUCCESS) {
    p->stream = NULL;
    return collCudaError(cr, "CUDA: creating coll's stream for the kernels of device calls (cuStreamCreate) failed");
  }
  size_t nconn = (size_t)comm->maxChannels * (size_t)comm->nranks;
  p->set.conns = calloc(nconn ? nconn : 1, sizeof(collConn));
  p->handles = calloc((size_t)comm->nranks, COLL_NET_HANDLE_BYTES);
  if (!p->set.conns || !p->handles) return collSetError(collSystemError, "engine: out of memory for p2p connections");
  p->set.net = &collNetP2p;
  p->set.dev = p->device;
  p->set.handles = p->handles;
  if (comm->nnodes > 1) { /* pairs on different nodes: the communicator's network connections */
    if (!(p->viaComm = calloc((size_t)comm->nranks, 1)))
      return collSetError(collSystemError, "engine: out of memory for the device path");
    for (int i = 0; i < comm->nranks; i++) p->viaComm[i] = comm->rankNode[i] != comm->node;
    p->set.viaComm = p->viaComm;
  }
  if (comm->nranks == 1) { /* no peer: kernels only */
    p->state = 1;
    return collSuccess;
  }
  collDevPathInfo mine, *all = calloc((size_t)comm->nranks, sizeof *all);
  if (!all) return collSetError(collSystemError, "engine: out of memory for the p2p handles");
  memset(&mine, 0, sizeof mine);
  mine.dev = p->device;
  mine.pid = (int32_t)getpid();
  CUdevice d;
  int fdOk = 0;
  if (COLL_CU(cuDeviceGet)(&d, p->device) == CUDA_SUCCESS)
    COLL_CU(cuDeviceGetAttribute)(&fdOk, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, d);
  mine.fdOk = fdOk != 0;
  mine.netOk = collDevPathNetOk(comm, mine.netWhy, sizeof mine.netWhy);
  char why[256] = "";
  if (collNetP2p.init(NULL) == collSuccess && collNetP2p.listen(p->device, mine.handle, &p->set.listen) == collSuccess)
    mine.ok = 1;
  else
    snprintf(why, sizeof why, "%s", collLastErrorMessage());
  collClearError();
  collOp g;
  memset(&g, 0, sizeof g);
  g.fn = COLL_FN_ALLGATHER;
  g.sendbuff = &mine;
  g.recvbuff = all;
  g.count = sizeof mine;
  g.dtype = collUint8;
  g.op = collSum;
  g.timeoutSec = op->timeoutSec;
  g.timeoutPerCall = op->timeoutPerCall;
  g.mem = (collMemInfo)COLL_MEM_HOST_INFO;
  collResult_t r = collEngineRun(comm, &g, 1);
  if (r != collSuccess) {
    free(all);
    return r;
  }
  if (collDevPathUsable(comm, all, why, sizeof why)) {
    for (int i = 0; i < comm->nranks; i++)
      memcpy(p->handles + (size_t)i * COLL_NET_HANDLE_BYTES, all[i].handle, COLL_NET_HANDLE_BYTES);
    p->state = 1;
    if (comm->nnodes > 1)
      COLL_INFO(COLL_SUB_NET, "rank %d: device buffers run device-resident: GPU kernels, p2p connections inside the "
                "node, GPU memory registered with the network transport between nodes", comm->rank);
    else
      COLL_INFO(COLL_SUB_NET, "rank %d: device buffers run device-resident: GPU kernels and p2p connections",
                comm->rank);
  } else {
    if (p->set.listen) collNetP2p.closeListen(p->set.listen);
    p->set.listen = NULL;
    p->state = -1;
    COLL_INFO(COLL_SUB_NET, "rank %d: device buffers stay staged through pinned host memory: %s", comm->rank, why);
  }
  free(all);
  return collSuccess;
}

collResult_t collDevPathRun(collComm_t comm, const collOp* op, int* ran) {
  *ran = 0;
  struct collDevPath* p = comm->devPath;
  if (!p) {
    if (!(p = calloc(1, sizeof *p)))
      return collEngineFail(comm, collSetError(collSystemError, "engine: out of memory for the device path"));
    p->device = op->mem.device;
    comm->devPath = p;
  }
  if (p->state == 0) {
    collResult_t r = collDevPathDecide(comm, p, op);
    if (r != collSuccess) {
      p->state = -1;
      return __atomic_load_n(&comm->abortFlag, __ATOMIC_ACQUIRE) ? r : collEngineFail(comm, r);
    }
  }
  if (p->state < 0) return collSuccess;
  *ran = 1;
  p->calls++;
  return collEngineRun(comm, op, 1);
}

collResult_t collDevPathFor(collComm_t comm, const collConnSet** set, void** stream) {
  struct collDevPath* p = comm->devPath;
  if (!p || p->state != 1)
    return collSetError(collInternalError, "engine: a call on device buffers reached the engine without its device "
                        "path (it should have been staged)");
  *set = &p->set;
  *stream = p->stream;
  return collSuccess;
}

collExecKeep* collDevPathKeep(collComm_t comm) { return comm->devPath ? &comm->devPath->keep : NULL; }

void collDevPathClose(collComm_t comm) {
  struct collDevPath* p = comm->devPath;
  if (!p) return;
  if (p->set.conns)
    for (int i = 0; i < comm->maxChannels * comm->nranks; i++) {
      collConn* c = &p->set.conns[i];
      if (c->sendComm) collNetP2p.closeSend(c->sendComm);
      if (c->recvComm) collNetP2p.closeRecv(c->recvComm);
      c->sendComm = c->recvComm = NULL;
    }
  if (p->set.listen) collNetP2p.closeListen(p->set.listen);
  p->set.listen = NULL;
}

void collDevPathFree(collComm_t comm) {
  struct collDevPath* p = comm->devPath;
  if (!p) return;
  collDevPathClose(comm);
  CUcontext saved = NULL;
  COLL_CU(cuCtxGetCurrent)(&saved);
  if (collDevSetCurrent(p->device) == collSuccess) {
    if (p->stream) COLL_CU(cuStreamDestroy)(p->stream);
    collExecKeepFree(&p->keep);
    for (int c = 0; comm->channels && c < comm->maxChannels; c++) {
      collChannel* ch = &comm->channels[c];
      if (ch->scratchMem == COLL_MEM_DEVICE) { /* freed here, with the GPU current */
        collExecFree(ch->scratch, ch->scratchMem);
        ch->scratch = NULL;
        ch->scratchBytes = 0;
        ch->scratchMem = COLL_MEM_HOST;
      }
      if (ch->stagingMem == COLL_MEM_DEVICE) {
        collExecFree(ch->staging, ch->stagingMem);
        ch->staging = NULL;
        ch->stagingBytes = 0;
        ch->stagingMem = COLL_MEM_HOST;
      }
    }
    CUcontext now = NULL;
    if (COLL_CU(cuCtxGetCurrent)(&now) == CUDA_SUCCESS && now != saved) COLL_CU(cuCtxSetCurrent)(saved);
  }
  free(p->keep.p);
  free(p->set.conns);
  free(p->handles);
  free(p->viaComm);
  free(p);
  comm->devPath = NULL;
}

void collDevPathStats(collComm_t comm, collDevPathStats_t* st) {
  memset(st, 0, sizeof *st);
  struct collDevPath* p = comm->devPath;
  if (!p) return;
  st->state = p->state;
  st->calls = p->calls;
  for (int i = 0; p->set.conns && i < comm->maxChannels * comm->nranks; i++) {
    collP2pStats s;
    if (p->set.conns[i].sendComm) {
      collP2pGetStats(p->set.conns[i].sendComm, &s);
      st->p2pBytesSent += s.bytes;
      st->p2pConns++;
    }
    if (p->set.conns[i].recvComm) {
      collP2pGetStats(p->set.conns[i].recvComm, &s);
      st->p2pBytesRecv += s.bytes;
      st->p2pConns++;
    }
  }
}

#else /* built without CUDA: no device call gets here */

int collDevPathWanted(collComm_t comm, const collOp* op) {
  (void)comm, (void)op;
  return 0;
}

collResult_t collDevPathRun(collComm_t comm, const collOp* op, int* ran) {
  (void)comm, (void)op;
  *ran = 0;
  return collSuccess;
}
collResult_t collDevPathFor(collComm_t comm, const collConnSet** set, void** stream) {
  (void)comm, (void)set, (void)stream;
  return collCudaLoad();
}
collExecKeep* collDevPathKeep(collComm_t comm) {
  (void)comm;
  return NULL;
}
void collDevPathClose(collComm_t comm) { (void)comm; }
void collDevPathFree(collComm_t comm) { (void)comm; }
void collDevPathStats(collComm_t comm, collDevPathStats_t* st) {
  (void)comm;
  memset(st, 0, sizeof *st);
}
#endif
