/*
 * engine.c - runs one collective: cuts it into slices, builds the chosen
 * algorithm's schedule per slice, and executes the steps over the transport.
 *
 * Slice k of a call goes to channel k % C; each channel runs its slices one
 * after another (phase by phase), and the C channels progress together, so
 * C slices are in flight at once. Each channel has its own connections, so
 * per-connection FIFO order always matches between the two sides.
 *
 * Every message carries the call's signature as its tag (sig.h); a receive
 * whose tag differs from this rank's is a mismatched call and fails it.
 *
 * float16/bfloat16 sum, prod and avg (collEngineWide) run on a float32
 * working copy, in pieces of COLL_STAGE_BYTES: the piece is widened, the
 * schedule runs as a float32 collective in place on it (partial results
 * travel as float32), and the result is rounded once (avg: divided first).
 * COLL_HALF_ACCUM=native runs them in their own type, rounding at every
 * step; its avg pre-multiplies a working copy of the input by 1/nranks
 * (NCCL), so the sum of an average cannot overflow.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "algorithms/algorithms.h"
#include "algorithms/patterns/renumber.h"
#include "engine/devpath.h"
#include "engine/exec.h"
#include "engine/mailbox.h"
#include "engine/progress.h"
#include "engine/reg.h"
#include "engine/sig.h"
#include "engine/cmagather.h"
#include "engine/zerocopy.h"
#include "misc/log.h"
#include "misc/param.h"
#include "obs/obs.h"
#include "reduce/reduce.h"
#include "tuner/tuner.h"

typedef struct {
  void* req;
  void* reg; /* registration of the buffer (engine/reg.h) until done */
  size_t stagingOff;
  uint8_t state; /* 0 not posted, 1 posted, 2 done */
  uint8_t fused; /* RECV_REDUCE the transport reduces as it reads (no staging) */
} collStepState;

/* Everything about the call that does not change between slices. */
typedef struct {
  const collOp* op;
  const collAlgo* algo;
  collExecutor ex; /* runs the local steps, by the buffers' memory type */
  const collConnSet* set; /* device buffers: the p2p connections (devpath.h); NULL: comm->conns */
  collConn* conns;        /* set->conns or comm->conns */
  size_t esize, blockCount, sliceElems, nslices;
  size_t stride[2]; /* per collBufId SEND, RECV */
  char* base[2];
  int inPlace, nch;
  uint64_t tag;       /* the call's signature: sent with every message, expected on every receive */
  const collSig* sig; /* the user's call, for messages */
} collExec;

/* Per-channel progress of the call. */
typedef struct {
  int active, phase;
  size_t slice, sliceOff, sliceCount;
} collChanRun;

static char* collRegionPtr(const collExec* x, const collChannel* ch, const collChanRun* run,
                           const collRegion* r) {
  if (r->buf == COLL_BUF_SCRATCH) return ch->scratch + ((size_t)r->blk * run->sliceCount + r->off) * x->esize;
  return x->base[r->buf] + ((size_t)r->blk * x->stride[r->buf] + run->sliceOff + r->off) * x->esize;
}

/* Field by field: collSchedArgs has padding, so memcmp would not do. */
static int collSchedArgsEqual(const collSchedArgs* p, const collSchedArgs* q) {
  return p->fn == q->fn && p->nranks == q->nranks && p->rank == q->rank && p->root == q->root &&
         p->count == q->count && p->inPlace == q->inPlace && p->rankNode == q->rankNode && p->nnodes == q->nnodes;
}

/* A RECV_REDUCE on host memory from a peer whose transport reduces as it
 * reads (comm->netIrecvReduce: shm, from the ring's slots or from the
 * sender's buffer a cache-sized piece at a time) lands in no staging copy:
 * per result byte the receiver reads the peer's and its own input and
 * writes the result, 3 bytes of memory traffic where the landing copy made 5. */
static int collStepFused(collComm_t comm, const collExec* x, const collStep* s) {
  return s->kind == COLL_STEP_RECV_REDUCE && x->ex.mem == COLL_MEM_HOST && !x->set && s->peer >= 0 &&
         comm->netIrecvReduce[comm->peerKind[s->peer]];
}

/* Builds the schedule of the channel's next slice and readies its memory and
 * connections (all sends connected before any accept: no circular wait). */
static collResult_t collStartSlice(collComm_t comm, const collExec* x, int c, collChanRun* run) {
  collChannel* ch = &comm->channels[c];
  run->sliceOff = run->slice * x->sliceElems;
  run->sliceCount = x->blockCount - run->sliceOff < x->sliceElems ? x->blockCount - run->sliceOff : x->sliceElems;
  run->phase = 0;
  /* channel c runs the schedule over ranks renumbered by perm_c (renumber.h);
   * node-aware rows and point-to-point keep the real numbering (pc = 0) */
  int pc = x->algo->nodeAware || x->op->fn == COLL_FN_SEND || x->op->fn == COLL_FN_RECV ? 0 : c;
  collSchedArgs a = {x->op->fn, comm->nranks, comm->rank, x->op->root, run->sliceCount, x->inPlace,
                     comm->rankNode, comm->nnodes};
  if (ch->schedAlgo != (const void*)x->algo || ch->schedPerm != pc || !collSchedArgsEqual(&ch->schedArgs, &a)) {
    ch->schedAlgo = NULL;
    collSchedReset(&ch->sched);
    collResult_t e = collSchedBuildChannel(x->algo->build, &a, pc, &ch->sched);
    if (e != collSuccess) return collSetError(e, "engine: algorithm %s failed to build a schedule", x->algo->name);
    ch->schedAlgo = x->algo;
    ch->schedArgs = a;
    ch->schedPerm = pc;
  }
  collSched* s = &ch->sched;
  collResult_t r;
  if (s->nsteps > ch->stepStateCap) {
    void* n = realloc(ch->stepState, sizeof(collStepState) * (size_t)s->nsteps);
    if (!n) return collSetError(collSystemError, "engine: out of memory");
    ch->stepState = n;
    ch->stepStateCap = s->nsteps;
  }
  collStepState* st = ch->stepState; /* NULL while no schedule had a step (1 rank, in place) */
  if (s->nsteps > 0) memset(st, 0, sizeof(*st) * (size_t)s->nsteps);
  /* RECV_REDUCE steps of one phase each get their own landing area (none
   * for those the transport reduces as it reads). */
  size_t need = 0;
  for (int i = 0; i < s->nsteps; i++) st[i].fused = (uint8_t)collStepFused(comm, x, &s->steps[i]);
  for (int p = 0; p < s->nphases; p++) {
    size_t off = 0;
    for (int i = 0; i < s->nsteps; i++)
      if (s->steps[i].phase == p && s->steps[i].kind == COLL_STEP_RECV_REDUCE && !st[i].fused) {
        st[i].stagingOff = off;
        off += s->steps[i].dst.count * x->esize;
      }
    if (off > need) need = off;
  }
  size_t scratchNeed = (size_t)s->scratchBlocks * run->sliceCount * x->esize;
  if (collExecGrowMoves(&x->ex, ch->stagingBytes, ch->stagingMem, need)) /* moves */
    collEngineRegForget(comm, ch->staging, ch->stagingBytes);
  if (collExecGrowMoves(&x->ex, ch->scratchBytes, ch->scratchMem, scratchNeed))
    collEngineRegForget(comm, ch->scratch, ch->scratchBytes);
  if ((r = collExecGrow(&x->ex, &ch->staging, &ch->stagingBytes, &ch->stagingMem, need)) != collSuccess) return r;
  if ((r = collExecGrow(&x->ex, &ch->scratch, &ch->scratchBytes, &ch->scratchMem, scratchNeed)) != collSuccess)
    return r;
  /* receives connect when first posted, after the phase's sends went out:
   * a peer that runs another collective and never connects to us still gets
   * our data, sees its signature and fails (then we stop waiting) */
  void* unused;
  for (int i = 0; i < s->nsteps; i++) /* empty steps are no-ops on both sides: no connection */
    if (s->steps[i].kind == COLL_STEP_SEND && s->steps[i].src.count > 0 &&
        (r = collEngineSendConnSet(comm, x->set, s->steps[i].peer, c, &unused)))
      return r;
  return collSuccess;
}

/* The memory handle of a post's buffer p on the connection tcomm with
 * peer: none over the set's own transport (p2p registers nothing), else
 * through the engine's cache (reg.h) by the call's memory type. Device
 * memory always gets one (the transport then never copies it through its
 * host bounce buffers) or the post fails (collSystemError, the message of
 * collEngineReg). */
static collResult_t collStepReg(collComm_t comm, const collExec* x, const collConnSet* ps, int peer, void* tcomm,
                                void* p, size_t bytes, void** token, void** mh) {
  *mh = NULL;
  if (ps) return collSuccess;
  *mh = collEngineReg(comm, peer, tcomm, p, bytes, x->ex.mem, token);
  return *mh || x->ex.mem == COLL_MEM_HOST ? collSuccess : collSystemError;
}

/* After a receive into GPU memory over a network transport completed: its
 * iflush (GPUDirect: the NIC's writes reach the GPU before a kernel reads
 * them; NCCL's gdrFlush), waited for here, bounded by the abort flag. The
 * token is the receive's registration (its memory handle). */
static collResult_t collStepFlush(collComm_t comm, const collNet_t* net, void* recvComm, void* p, size_t bytes,
                                  void* token) {
  void* mh = collEngineRegHandle(token);
  void* req = NULL;
  collResult_t r = net->iflush(recvComm, p, bytes, mh, &req);
  for (int done = 0; r == collSuccess && req && !done;) {
    if (__atomic_load_n(&comm->abortFlag, __ATOMIC_ACQUIRE))
      return collSetError(collRemoteError, "communicator aborted");
    r = net->test(req, &done, NULL, NULL);
  }
  return r;
}

static int collStepIsRecv(const collStep* s) { return s->kind == COLL_STEP_RECV || s->kind == COLL_STEP_RECV_REDUCE; }

#define COLL_MAX_STALLED 32

static int collConnKey(const collStep* s) { return 2 * s->peer + (s->kind == COLL_STEP_SEND ? 0 : 1); }

/* Does the step's connection hold a refused post (key -1: all do)? Local
 * steps never stall. */
static int collStalled(const int* keys, int n, const collStep* s) {
  if (s->peer < 0) return 0;
  int k = collConnKey(s);
  for (int i = 0; i < n; i++)
    if (keys[i] == k || keys[i] == -1) return 1;
  return 0;
}

/* Posts or completes the steps of the current phase. *waitPeer gets a peer
 * still pending (for timeout messages). Returns 1 if anything moved. */
static int collChannelProgress(collComm_t comm, const collExec* x, int c, collChanRun* run, collIdle* idle,
                               int* waitPeer, collResult_t* err) {
  collChannel* ch = &comm->channels[c];
  collSched* s = &ch->sched;
  collStepState* st = ch->stepState;
  int progressed = 0, pending = 0, nstalled = 0;
  int stalled[COLL_MAX_STALLED]; /* connections (2 * peer + isRecv) that refused a post this pass */
  for (int k = 0; k < 2 * s->nsteps; k++) { /* pass 0: sends and local steps; pass 1: receives */
    int pass = k >= s->nsteps, i = pass ? k - s->nsteps : k;
    const collStep* step = &s->steps[i];
    if (step->phase != run->phase || st[i].state == 2 || collStepIsRecv(step) != pass) continue;
    /* once a post was refused (transport queue full), post nothing more on
     * that connection this pass: a later step must never overtake it there.
     * Other connections go on (receives from a peer must not wait behind a
     * full send queue to it, or two ranks could wait on each other). */
    if (st[i].state == 0 && nstalled > 0 && collStalled(stalled, nstalled, step)) {
      pending = 1;
      continue;
    }
    size_t n = step->kind == COLL_STEP_SEND ? step->src.count : step->dst.count;
    size_t bytes = n * x->esize;
    const collConnSet* ps = step->peer < 0 ? NULL : collConnSetFor(x->set, step->peer);
    collConn* conn = step->peer >= 0 ? &(ps ? ps->conns : comm->conns)[c * comm->nranks + step->peer] : NULL;
    const collNet_t* net = step->peer < 0 ? NULL : ps ? ps->net : collPeerNet(comm, step->peer);
    if (st[i].state == 0) {
      collResult_t r = collSuccess;
      void* unused;
      if (n == 0) {
        st[i].state = 2;
      } else if (pass && !conn->recvComm &&
                 (r = collEngineRecvConnSet(comm, x->set, step->peer, c, &unused)) != collSuccess) {
        *err = r;
        return 1;
      } else if (step->kind == COLL_STEP_SEND) {
        char* p = collRegionPtr(x, ch, run, &step->src);
        void* mh = NULL;
        r = collStepReg(comm, x, ps, step->peer, conn->sendComm, p, bytes, &st[i].reg, &mh);
        if (r == collSuccess) r = net->isend(conn->sendComm, p, bytes, x->tag, mh, &st[i].req);
      } else if (st[i].fused) { /* dst = message op src, reduced by the transport as it reads */
        r = comm->netIrecvReduce[comm->peerKind[step->peer]](conn->recvComm, collRegionPtr(x, ch, run, &step->dst),
                               collRegionPtr(x, ch, run, &step->src), bytes, x->ex.hostReduce, x->esize, &st[i].req);
      } else if (step->kind == COLL_STEP_RECV || step->kind == COLL_STEP_RECV_REDUCE) {
        char* p = step->kind == COLL_STEP_RECV ? collRegionPtr(x, ch, run, &step->dst) : ch->staging + st[i].stagingOff;
        void* mh = NULL;
        r = collStepReg(comm, x, ps, step->peer, conn->recvComm, p, bytes, &st[i].reg, &mh);
        if (r == collSuccess) r = net->irecv(conn->recvComm, p, bytes, x->tag, mh, &st[i].req);
      } else if (step->kind == COLL_STEP_COPY) {
        r = collExecCopy(&x->ex, collRegionPtr(x, ch, run, &step->dst), collRegionPtr(x, ch, run, &step->src), bytes);
        st[i].state = 2;
      } else {
        char* d = collRegionPtr(x, ch, run, &step->dst);
        r = collExecReduce(&x->ex, d, d, collRegionPtr(x, ch, run, &step->src), n);
        st[i].state = 2;
      }
      if (r != collSuccess && step->peer < 0) {
        *err = collSetError(r, "rank %d: a local %s step failed: %s", comm->rank,
                            step->kind == COLL_STEP_COPY ? "copy" : "reduce", collLastErrorMessage());
        return 1;
      }
      if (r != collSuccess) {
        *err = collSetError(r, "rank %d: posting to rank %d (%s) failed: %s", comm->rank, step->peer,
                            collCommPeerHost(comm, step->peer), collLastErrorMessage());
        return 1;
      }
      if (st[i].state == 0 && st[i].req) st[i].state = 1;
      if (st[i].state == 1) collObsStepPost(comm, c, i, step->kind, step->peer, bytes, run->phase, run->slice);
      if (st[i].state) progressed = 1;
      else if (nstalled < COLL_MAX_STALLED) stalled[nstalled++] = collConnKey(step);
      else stalled[0] = -1; /* list full: stop posting anything (old rule, still safe) */
    }
    if (st[i].state == 1) {
      int done = 0, isRecv = step->kind != COLL_STEP_SEND;
      size_t got = 0;
      uint64_t tag = 0;
      collResult_t r = net->test(st[i].req, &done, &got, &tag);
      if (r != collSuccess) {
        /* a transport names the sender's tag of a message it refused (too large) */
        if (isRecv && tag != 0 && tag != x->tag) *err = collSigMismatch(comm, step->peer, tag, x->tag, x->sig);
        else
          *err = collSetError(r, "rank %d: transfer with rank %d (%s) failed: %s", comm->rank, step->peer,
                              collCommPeerHost(comm, step->peer), collLastErrorMessage());
        return 1;
      }
      if (done) {
        st[i].state = 2;
        progressed = 1;
        /* a receive into GPU memory over a network transport: visible to the kernels that read it next */
        if (isRecv && !ps && x->ex.mem != COLL_MEM_HOST && tag == x->tag && got == bytes &&
            (r = collStepFlush(comm, net, conn->recvComm,
                               step->kind == COLL_STEP_RECV ? collRegionPtr(x, ch, run, &step->dst)
                                                            : ch->staging + st[i].stagingOff,
                               bytes, st[i].reg)) != collSuccess) {
          *err = collSetError(r, "rank %d: making what rank %d (%s) sent visible to the GPU (%s iflush) failed: %s",
                              comm->rank, step->peer, collCommPeerHost(comm, step->peer), net->name,
                              collLastErrorMessage());
          return 1;
        }
        collEngineRegDone(comm, step->peer, &st[i].reg);
        if (isRecv && tag != x->tag) {
          *err = collSigMismatch(comm, step->peer, tag, x->tag, x->sig);
          return 1;
        }
        if (isRecv && got != bytes) {
          *err = collSetError(collRemoteError,
                              "rank %d: rank %d (%s) sent %zu bytes where %zu were expected "
                              "(the same call, cut differently: ranks disagree on COLL_CHUNKSIZE, COLL_NCHANNELS "
                              "or COLL_ALGO)",
                              comm->rank, step->peer, collCommPeerHost(comm, step->peer), got, bytes);
          return 1;
        }
        collObsStepDone(comm, c, i, step->peer, step->kind == COLL_STEP_SEND, bytes);
        if (step->kind == COLL_STEP_RECV_REDUCE && !st[i].fused &&
            (r = collExecReduce(&x->ex, collRegionPtr(x, ch, run, &step->dst), ch->staging + st[i].stagingOff,
                                collRegionPtr(x, ch, run, &step->src), n)) != collSuccess) {
          *err = collSetError(r, "rank %d: reducing what rank %d sent failed: %s", comm->rank, step->peer,
                              collLastErrorMessage());
          return 1;
        }
      }
    }
    if (st[i].state != 2) {
      pending = 1;
      *waitPeer = step->peer;
      collObsPending(comm, c, run->phase, i);
      collIdleAdd(idle, net, step->kind == COLL_STEP_SEND ? conn->sendComm : conn->recvComm,
                  step->kind == COLL_STEP_SEND ? POLLOUT : POLLIN);
    }
  }
  if (!pending && x->ex.mem != COLL_MEM_HOST) { /* the phase's local steps run on the GPU: done when they are */
    int idleNow = collExecIdle(&x->ex);
    if (idleNow < 0) {
      *err = collSetError(collSystemError, "rank %d: %s", comm->rank, collLastErrorMessage());
      return 1;
    }
    pending = !idleNow;
  }
  if (!pending) {
    progressed = 1;
    if (++run->phase >= s->nphases) {
      run->slice += (size_t)x->nch;
      if (run->slice >= x->nslices) {
        run->active = 0;
      } else {
        collResult_t r = collStartSlice(comm, x, c, run);
        if (r != collSuccess) *err = r;
      }
    }
  }
  return progressed;
}

static const char* collFuncName(collFunc fn) {
  static const char* names[] = {"all-reduce", "all-gather", "reduce-scatter", "broadcast", "reduce", "send", "recv"};
  return fn < COLL_FN_COUNT ? names[fn] : "?";
}

/* Runs op (already checked and signed) through its schedule. */
/* obsOp: the user's call, recorded with the algorithm (NULL: already was). */
static collResult_t collRunSched(collComm_t comm, const collOp* op, const collOp* obsOp, uint64_t tag,
                                 const collSig* sig) {
  collExec x;
  memset(&x, 0, sizeof x);
  x.op = op;
  x.tag = tag;
  x.sig = sig;
  x.esize = collTypeSize(op->dtype);
  x.blockCount = op->count;
  collTuneChoice tune;
  int device = op->mem.kind != COLL_MEM_HOST; /* device-resident (devpath.c): staged calls pass host memory */
  collResult_t tr = collTunerChoose(comm, op->fn, op->count, op->dtype, op->algo, device, &tune);
  if (tr != collSuccess) return tr;
  x.algo = tune.algo;
  void* stream = NULL;
  if (device && (tr = collDevPathFor(comm, &x.set, &stream)) != collSuccess)
    return collEngineFail(comm, tr);
  x.conns = x.set ? x.set->conns : comm->conns;
  if ((tr = collExecInit(&x.ex, &op->mem, stream, op->dtype, op->op)) != collSuccess) return collEngineFail(comm, tr);
  if (comm->devPath) x.ex.keep = collDevPathKeep(comm); /* a device call ran: its buffers may be replaced */
  x.base[COLL_BUF_SEND] = (char*)op->sendbuff;
  x.base[COLL_BUF_RECV] = op->recvbuff;
  size_t rankOff = (size_t)comm->rank * op->count * x.esize;
  switch (op->fn) {
    case COLL_FN_ALLGATHER:
      x.stride[COLL_BUF_RECV] = op->count;
      x.inPlace = (const char*)op->sendbuff == (const char*)op->recvbuff + rankOff;
      break;
    case COLL_FN_REDUCESCATTER:
      x.stride[COLL_BUF_SEND] = op->count;
      x.inPlace = (const char*)op->sendbuff + rankOff == (const char*)op->recvbuff;
      break;
    default:
      x.inPlace = op->sendbuff == op->recvbuff;
  }
  size_t chunkElems = tune.chunkBytes / x.esize ? tune.chunkBytes / x.esize : 1;
  x.sliceElems = op->fn == COLL_FN_ALLREDUCE ? chunkElems * (size_t)comm->nranks : chunkElems;
  x.nslices = (x.blockCount + x.sliceElems - 1) / x.sliceElems;
  x.nch = x.nslices < (size_t)tune.nchannels ? (int)x.nslices : tune.nchannels;
  if (obsOp) collObsOpAlgo(comm, obsOp, collObsAlgoId(x.algo), x.nch, tune.chunkBytes);
  collChanRun runs[64];
  collResult_t err = collSuccess;
  for (int c = 0; c < x.nch && err == collSuccess; c++) {
    runs[c].active = 1;
    runs[c].slice = (size_t)c;
    err = collStartSlice(comm, &x, c, &runs[c]);
  }
  collIdle idle;
  collIdleInit(comm, &idle);
  int active = x.nch;
  while (err == collSuccess && active > 0) {
    int progressed = 0, waitPeer = -1;
    active = 0;
    for (int c = 0; c < x.nch && err == collSuccess; c++) {
      if (!runs[c].active) continue;
      progressed |= collChannelProgress(comm, &x, c, &runs[c], &idle, &waitPeer, &err);
      active += runs[c].active;
    }
    if (err == collSuccess && active) err = collIdleStep(comm, &idle, progressed, collFuncName(op->fn), waitPeer);
  }
  if (err != collSuccess) return collEngineFail(comm, err);
  int hasResult = op->fn == COLL_FN_ALLREDUCE || op->fn == COLL_FN_REDUCESCATTER ||
                  (op->fn == COLL_FN_REDUCE && comm->rank == op->root);
  if (op->op == collAvg && hasResult &&
      (err = collExecAvgFinish(&x.ex, op->recvbuff, op->count, comm->nranks)) != collSuccess)
    return collEngineFail(comm, err);
  if (x.ex.mem != COLL_MEM_HOST && (err = collExecSync(&x.ex)) != collSuccess) /* results in place on return */
    return collEngineFail(comm, collSetError(err, "rank %d: %s", comm->rank, collLastErrorMessage()));
  return collSuccess;
}

/* ---- float16/bfloat16 reductions on a working copy -------------------------- */

/* Bytes of one piece of the working copy (per call, whatever its size). */
#define COLL_STAGE_BYTES ((size_t)16 << 20)

static int collHalfNative;
static pthread_once_t collHalfOnce = PTHREAD_ONCE_INIT;

/* param.c checked the value at init (and warned): anything but native is float. */
static void collHalfLoad(void) {
  const char* v = collParamStr(COLL_SPARAM_HALF_ACCUM);
  collHalfNative = v && strcasecmp(v, "native") == 0;
}

static int collHalfReducing(const collOp* op) {
  return collTypeIsHalf(op->dtype) && (op->op == collSum || op->op == collProd || op->op == collAvg) &&
         (op->fn == COLL_FN_ALLREDUCE || op->fn == COLL_FN_REDUCESCATTER || op->fn == COLL_FN_REDUCE);
}

int collEngineWide(const collOp* op) {
  if (!collHalfReducing(op)) return 0;
  pthread_once(&collHalfOnce, collHalfLoad);
  return !collHalfNative;
}

/* Runs op piece by piece on comm->stage: float32 (wide) or, for a native
 * avg, op's own type pre-multiplied by 1/nranks; then rounds (or copies)
 * each piece's result into recvbuff. Every rank cuts the same pieces. */
static collResult_t collRunStaged(collComm_t comm, const collOp* op, uint64_t tag, const collSig* sig, int wide) {
  int n = comm->nranks, me = comm->rank, rs = op->fn == COLL_FN_REDUCESCATTER;
  size_t es = collTypeSize(op->dtype), wes = wide ? sizeof(float) : es, blocks = rs ? (size_t)n : 1;
  size_t piece = COLL_STAGE_BYTES / wes / blocks;
  if (piece == 0) piece = 1;
  if (piece > op->count) piece = op->count;
  size_t need = blocks * piece * wes;
  if (need > comm->stageBytes) {
    char* b = realloc(comm->stage, need);
    if (!b) return collEngineFail(comm, collSetError(collSystemError, "engine: cannot allocate %zu bytes", need));
    comm->stage = b;
    comm->stageBytes = need;
  }
  collOp w = *op;
  w.dtype = wide ? collFloat32 : op->dtype;
  w.op = op->op == collAvg ? collSum : op->op;
  int hasResult = op->fn != COLL_FN_REDUCE || me == op->root;
  const char* send = op->sendbuff;
  char* recv = op->recvbuff;
  for (size_t off = 0; off < op->count; off += piece) {
    size_t m = op->count - off < piece ? op->count - off : piece;
    for (size_t b = 0; b < blocks; b++) {
      const char* src = send + (b * op->count + off) * es;
      char* dst = comm->stage + b * m * wes;
      if (wide) collReduceWiden((float*)dst, src, m, op->dtype);
      else collReducePreMul(dst, src, m, op->dtype, n);
    }
    char* result = comm->stage + (rs ? (size_t)me * m * wes : 0);
    w.count = m;
    w.sendbuff = comm->stage;
    w.recvbuff = result;
    collResult_t r = collRunSched(comm, &w, off == 0 ? op : NULL, tag, sig);
    if (r != collSuccess) return r;
    if (!hasResult) continue;
    if (wide) collReduceNarrow(recv + off * es, (const float*)result, m, op->dtype, op->op == collAvg ? n : 1);
    else memcpy(recv + off * es, result, m * es);
  }
  return collSuccess;
}

static inline __attribute__((always_inline)) collResult_t collRunCollective(collComm_t comm, const collOp* op) {
  int wide = collEngineWide(op);
  collSig sig;
  collSigOf(op, comm->collSeq++, wide, &sig);
  uint64_t tag = collSigTag(&sig, comm->nranks);
  collMailboxAnnounce(comm, sig.seq, tag);
  if (op->count == 0) return collObsOpEmpty(comm, op);
  int host = op->mem.kind == COLL_MEM_HOST; /* the mailbox and the working copies are host memory */
  if (host && collMailboxFits(comm, op)) {
    collTunerNoteMailbox(comm, op->fn, op->count, op->dtype);
    if (collObsMailbox(comm, op)) return collMailboxRun(comm, op, tag, &sig); /* counted (obs.h) */
    return collObsOpEnd(comm, op, collMailboxRun(comm, op, tag, &sig));     /* a timed one */
  }
  int zc = host && collZeroCopyWanted(comm, op); /* every rank's buffers collMemAlloc memory? */
  int cg = host && !zc && collCmaGatherWanted(comm, op); /* all-gather read by single copy */
  int staged = wide || (op->op == collAvg && collHalfReducing(op));
  /* zc and cg are 0 here: neither is wanted by a one-rank communicator */
  if (comm->nranks == 1 && !staged && collObsSolo(comm, op))
    return collRunSched(comm, op, NULL, tag, &sig); /* counted (obs.h) */
  collObsOpBegin(comm, op);
  if (zc) { /* read the peers' buffers in place; ran 0: some rank's were not such memory */
    int ran = 0;
    collResult_t r = collZeroCopyRun(comm, op, tag, &sig, &ran);
    if (r != collSuccess || ran) return collObsOpEnd(comm, op, r);
  }
  if (cg) { /* ran 0: some rank cannot read its peers by process_vm_readv */
    int ran = 0;
    collResult_t r = collCmaGatherRun(comm, op, tag, &sig, &ran);
    if (r != collSuccess || ran) return collObsOpEnd(comm, op, r);
  }
  if (staged) {
    if (!host)
      return collObsOpEnd(comm, op, collEngineFail(comm, collSetError(collInternalError,
                                               "engine: float16/bfloat16 working copies run on host memory only")));
    return collObsOpEnd(comm, op, collRunStaged(comm, op, tag, &sig, wide));
  }
  return collObsOpEnd(comm, op, collRunSched(comm, op, op, tag, &sig));
}

collResult_t collRunP2p(collComm_t comm, const collOp* ops, int nops); /* p2p.c */

/* inlined into both callers: the untraced launch pays no call */
static inline __attribute__((always_inline)) collResult_t collEngineRunOps(collComm_t comm, const collOp* ops,
                                                                         int nops) {
  int i = 0;
  while (i < nops) {
    collResult_t r;
    /* a failed communicator connects nowhere and waits on no one again */
    if (__atomic_load_n(&comm->abortFlag, __ATOMIC_ACQUIRE)) return collCommFailedError(comm, collFuncName(ops[i].fn));
    comm->runTimeoutSec = ops[i].timeoutSec;
    comm->runTimeoutPerCall = ops[i].timeoutPerCall;
    if (ops[i].fn == COLL_FN_SEND || ops[i].fn == COLL_FN_RECV) {
      int j = i;
      while (j < nops && (ops[j].fn == COLL_FN_SEND || ops[j].fn == COLL_FN_RECV)) j++;
      collObsP2pBegin(comm, ops + i, j - i);
      r = collRunP2p(comm, ops + i, j - i);
      collObsP2pEnd(comm, ops + i, j - i, r);
      i = j;
    } else {
      r = comm->checkCalls ? collCheckSignature(comm, &ops[i]) : collSuccess;
      if (r == collSuccess) {
        r = collRunCollective(comm, &ops[i]);
      } else {
        collObsOpBegin(comm, &ops[i]);
        collObsOpEnd(comm, &ops[i], collEngineFail(comm, r));
      }
      i++;
    }
    comm->opCount++;
    if (r != collSuccess) return r;
  }
  return collSuccess;
}

/* A launch with events (trace, profiler): bracketed by its begin and end. */
static __attribute__((noinline)) collResult_t collEngineRunTraced(collComm_t comm, const collOp* ops, int nops) {
  collObsLaunchBegin(comm, nops);
  collResult_t r = collEngineRunOps(comm, ops, nops);
  collObsLaunchEnd(comm, r);
  return r;
}

collResult_t collEngineRun(collComm_t comm, const collOp* ops, int nops) {
  if (collObsLaunchTraced(comm)) return collEngineRunTraced(comm, ops, nops); /* one flag test per launch */
  return collEngineRunOps(comm, ops, nops);
}
