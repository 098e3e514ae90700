/*
 * engine.c - runs one collective: cuts it into slices, builds the chosen
 * algorithm's schedule per slice, and executes the steps over the transport.
 *
 * Slice k of a call goes to channel k % C; each channel runs its slices one
 * after another (phase by phase), and the C channels progress together, so
 * C slices are in flight at once. Each channel has its own connections, so
 * per-connection FIFO order always matches between the two sides.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "algorithms/patterns/renumber.h"
#include "engine/mailbox.h"
#include "engine/progress.h"
#include "misc/log.h"
#include "obs/obs.h"
#include "reduce/reduce.h"
#include "tuner/tuner.h"

typedef struct {
  void* req;
  size_t stagingOff;
  uint8_t state; /* 0 not posted, 1 posted, 2 done */
} collStepState;

/* Everything about the call that does not change between slices. */
typedef struct {
  const collOp* op;
  const collAlgo* algo;
  collReduceFn reduce;
  size_t esize, blockCount, sliceElems, nslices;
  size_t stride[2]; /* per collBufId SEND, RECV */
  char* base[2];
  int inPlace, nch;
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

/* Grows a per-channel buffer; new memory is touched once here, not per call. */
static collResult_t collGrow(char** buf, size_t* have, size_t need) {
  if (need <= *have) return collSuccess;
  char* n = realloc(*buf, need);
  if (!n) return collSetError(collSystemError, "engine: cannot allocate %zu bytes", need);
  memset(n + *have, 0, need - *have);
  *buf = n;
  *have = need;
  return collSuccess;
}

/* Field by field: collSchedArgs has padding, so memcmp would not do. */
static int collSchedArgsEqual(const collSchedArgs* p, const collSchedArgs* q) {
  return p->fn == q->fn && p->nranks == q->nranks && p->rank == q->rank && p->root == q->root &&
         p->count == q->count && p->inPlace == q->inPlace && p->rankNode == q->rankNode && p->nnodes == q->nnodes;
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
  collStepState* st = ch->stepState;
  memset(st, 0, sizeof(*st) * (size_t)s->nsteps);
  /* RECV_REDUCE steps of one phase each get their own landing area. */
  size_t need = 0;
  for (int p = 0; p < s->nphases; p++) {
    size_t off = 0;
    for (int i = 0; i < s->nsteps; i++)
      if (s->steps[i].phase == p && s->steps[i].kind == COLL_STEP_RECV_REDUCE) {
        st[i].stagingOff = off;
        off += s->steps[i].dst.count * x->esize;
      }
    if (off > need) need = off;
  }
  if ((r = collGrow(&ch->staging, &ch->stagingBytes, need)) != collSuccess) return r;
  if ((r = collGrow(&ch->scratch, &ch->scratchBytes, (size_t)s->scratchBlocks * run->sliceCount * x->esize)) !=
      collSuccess)
    return r;
  void* unused;
  for (int i = 0; i < s->nsteps; i++)
    if (s->steps[i].kind == COLL_STEP_SEND && (r = collEngineSendConn(comm, s->steps[i].peer, c, &unused)))
      return r;
  for (int i = 0; i < s->nsteps; i++) {
    int k = s->steps[i].kind;
    if ((k == COLL_STEP_RECV || k == COLL_STEP_RECV_REDUCE) &&
        (r = collEngineRecvConn(comm, s->steps[i].peer, c, &unused)))
      return r;
  }
  return collSuccess;
}

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
  for (int i = 0; i < s->nsteps; i++) {
    const collStep* step = &s->steps[i];
    if (step->phase != run->phase || st[i].state == 2) continue;
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
    collConn* conn = step->peer >= 0 ? &comm->conns[c * comm->nranks + step->peer] : NULL;
    const collNet_v2_t* net = step->peer >= 0 ? collPeerNet(comm, step->peer) : NULL;
    if (st[i].state == 0) {
      collResult_t r = collSuccess;
      if (n == 0) {
        st[i].state = 2;
      } else if (step->kind == COLL_STEP_SEND) {
        r = net->isend(conn->sendComm, collRegionPtr(x, ch, run, &step->src), bytes, 0, NULL, &st[i].req);
      } else if (step->kind == COLL_STEP_RECV) {
        r = net->irecv(conn->recvComm, collRegionPtr(x, ch, run, &step->dst), bytes, 0, NULL, &st[i].req);
      } else if (step->kind == COLL_STEP_RECV_REDUCE) {
        r = net->irecv(conn->recvComm, ch->staging + st[i].stagingOff, bytes, 0, NULL, &st[i].req);
      } else if (step->kind == COLL_STEP_COPY) {
        memmove(collRegionPtr(x, ch, run, &step->dst), collRegionPtr(x, ch, run, &step->src), bytes);
        st[i].state = 2;
      } else {
        char* d = collRegionPtr(x, ch, run, &step->dst);
        x->reduce(d, d, collRegionPtr(x, ch, run, &step->src), n);
        st[i].state = 2;
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
      int done = 0;
      size_t got = 0;
      collResult_t r = net->test(st[i].req, &done, &got, NULL);
      if (r != collSuccess) {
        *err = collSetError(r, "rank %d: transfer with rank %d (%s) failed: %s", comm->rank, step->peer,
                            collCommPeerHost(comm, step->peer), collLastErrorMessage());
        return 1;
      }
      if (done) {
        st[i].state = 2;
        progressed = 1;
        if (step->kind != COLL_STEP_SEND && got != bytes) {
          *err = collSetError(collRemoteError,
                              "rank %d: rank %d (%s) sent %zu bytes where %zu were expected "
                              "(ranks disagree on count, datatype or collective)",
                              comm->rank, step->peer, collCommPeerHost(comm, step->peer), got, bytes);
          return 1;
        }
        collObsStepDone(comm, c, i, step->peer, step->kind == COLL_STEP_SEND, bytes);
        if (step->kind == COLL_STEP_RECV_REDUCE)
          x->reduce(collRegionPtr(x, ch, run, &step->dst), ch->staging + st[i].stagingOff,
                    collRegionPtr(x, ch, run, &step->src), n);
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

static collResult_t collRunCollective(collComm_t comm, const collOp* op) {
  collExec x;
  memset(&x, 0, sizeof x);
  x.op = op;
  x.esize = collTypeSize(op->dtype);
  x.blockCount = op->count;
  if (x.blockCount == 0) return collSuccess;
  if (collMailboxFits(comm, op)) {
    collTunerNoteMailbox(comm, op->fn, op->count, op->dtype);
    collObsOpAlgo(comm, COLL_OBS_ALGO_MAILBOX, 1, 0);
    return collMailboxRun(comm, op);
  }
  collTuneChoice tune;
  collResult_t tr = collTunerChoose(comm, op->fn, op->count, op->dtype, op->algo, &tune);
  if (tr != collSuccess) return tr;
  x.algo = tune.algo;
  x.reduce = collReduceGetFn(op->dtype, op->op);
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
  collObsOpAlgo(comm, collObsAlgoId(x.algo), x.nch, tune.chunkBytes);
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
  if (op->op == collAvg && hasResult) collReduceAvgFinish(op->recvbuff, op->count, op->dtype, comm->nranks);
  return collSuccess;
}

collResult_t collRunP2p(collComm_t comm, const collOp* ops, int nops); /* p2p.c */

static collResult_t collEngineRunOps(collComm_t comm, const collOp* ops, int nops) {
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
      collObsOpBegin(comm, &ops[i]);
      r = comm->checkCalls ? collCheckSignature(comm, &ops[i]) : collSuccess;
      if (r == collSuccess) r = collRunCollective(comm, &ops[i]);
      else collEngineFail(comm, r);
      collObsOpEnd(comm, &ops[i], r);
      i++;
    }
    comm->opCount++;
    if (r != collSuccess) return r;
  }
  return collSuccess;
}

collResult_t collEngineRun(collComm_t comm, const collOp* ops, int nops) {
  collObsLaunchBegin(comm, nops);
  collResult_t r = collEngineRunOps(comm, ops, nops);
  collObsLaunchEnd(comm, r);
  return r;
}
