/*
 * p2p.c - runs a batch of send/recv operations (one group) concurrently.
 *
 * Transfers to one peer in one direction keep their issue order (as NCCL:
 * the k-th send to a peer matches the peer's k-th receive from us). Each
 * transfer is cut into chunk-size slices (collP2pChunk: larger over ib);
 * slice k travels on channel k % C,
 * so both sides derive the same message sequence per connection from the
 * count alone. Every transfer sends at least one (possibly empty) message,
 * tagged with the transfer's signature (sig.h: count and data type), so a
 * receiver whose count or type disagrees with the sender's gets an error that
 * names both at the first message, never a write past its buffer. Self
 * send/recv pairs are copied locally.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/exec.h"
#include "engine/mailbox.h"
#include "engine/progress.h"
#include "engine/reg.h"
#include "engine/sig.h"
#include "misc/log.h"
#include "misc/param.h"
#include "obs/obs.h"
#include "reduce/reduce.h"

typedef struct {
  int peer, isRecv, channel;
  int* ops; /* indices into the batch, issue order (shared per peer/dir) */
  int nops;
  int qi;      /* current transfer */
  size_t k;    /* current slice of it */
  void* req;
  void* reg;   /* registration of the slice's buffer (engine/reg.h) until done */
} collLane;

static size_t collP2pBytes(const collOp* o) { return o->count * collTypeSize(o->dtype); }

/* The tag of a transfer: a send and its receive have the same one. */
static uint64_t collP2pTag(collComm_t comm, const collOp* o, collSig* s) {
  collSigOf(o, 0, 0, s);
  return collSigTag(s, comm->nranks);
}

static size_t collP2pSlices(size_t bytes, size_t chunk) {
  return bytes == 0 ? 1 : (bytes + chunk - 1) / chunk;
}

/* The most bytes one slice carries when the transport places them in the
 * receiver's buffer itself (collP2pChunk). */
#define COLL_P2P_ZC_MAX_SLICE ((size_t)16 << 20)

/* Bytes per slice of a transfer of `bytes` with peer: the chunk size; but
 * over a transport that writes into the receiver's registered buffer (ib),
 * slices save no staging and each costs the receiver's clear-to-send round
 * trip with nothing else in flight on its channel, so unless COLL_CHUNKSIZE
 * is set each channel carries its share in one slice (up to
 * COLL_P2P_ZC_MAX_SLICE). Both sides compute the same from the count (the
 * pair's transport is the same on both). */
static size_t collP2pChunk(collComm_t comm, int peer, size_t bytes, int nch) {
  size_t chunk = comm->chunkBytes;
  if (!comm->netReg[comm->peerKind[peer]] || collParamIsSet(COLL_PARAM_CHUNKSIZE)) return chunk;
  size_t share = (bytes + (size_t)nch - 1) / (size_t)nch;
  if (share > COLL_P2P_ZC_MAX_SLICE) share = COLL_P2P_ZC_MAX_SLICE;
  return share > chunk ? share : chunk;
}

/* Pairs self sends with self receives in order and copies them. */
static collResult_t collP2pSelf(collComm_t comm, const collOp* ops, int nops) {
  int s = 0, r = 0;
  for (;;) {
    while (s < nops && !(ops[s].fn == COLL_FN_SEND && ops[s].peer == comm->rank)) s++;
    while (r < nops && !(ops[r].fn == COLL_FN_RECV && ops[r].peer == comm->rank)) r++;
    if (s == nops && r == nops) return collSuccess;
    if (s == nops || r == nops)
      return collSetError(collInvalidUsage, "rank %d: a send to self has no matching receive from self in the group",
                          comm->rank);
    collSig ss, rs;
    if (collP2pTag(comm, &ops[s], &ss) != collP2pTag(comm, &ops[r], &rs))
      return collSetError(collInvalidUsage, "rank %d: send to self of %llu x %s but receive from self of %llu x %s",
                          comm->rank, (unsigned long long)ss.count, collSigTypeName(ss.dtype),
                          (unsigned long long)rs.count, collSigTypeName(rs.dtype));
    collExecutor ex;
    collResult_t e = collExecInit(&ex, &ops[r].mem, NULL, ops[r].dtype, collSum);
    if (e == collSuccess) e = collExecCopy(&ex, ops[r].recvbuff, ops[s].sendbuff, collP2pBytes(&ops[s]));
    if (e != collSuccess) return e;
    s++;
    r++;
  }
}

/* Moves one lane forward; returns 1 if something happened. */
static int collLaneProgress(collComm_t comm, const collOp* ops, collLane* l, int nch, collIdle* idle,
                            collResult_t* err) {
  int progressed = 0;
  while (l->qi < l->nops) {
    const collOp* o = &ops[l->ops[l->qi]];
    size_t bytes = collP2pBytes(o), chunk = collP2pChunk(comm, l->peer, bytes, nch), ns = collP2pSlices(bytes, chunk);
    if (l->k >= ns) { /* this channel has no (more) slices of this transfer */
      l->qi++;
      l->k = (size_t)l->channel;
      continue;
    }
    size_t off = l->k * chunk, len = bytes - off < chunk ? bytes - off : chunk;
    collConn* conn = &comm->conns[l->channel * comm->nranks + l->peer];
    void* nc = l->isRecv ? conn->recvComm : conn->sendComm;
    const collNet_t* net = collPeerNet(comm, l->peer);
    collSig sig;
    uint64_t tag = collP2pTag(comm, o, &sig), rtag = 0;
    if (!l->req) {
      char* p = l->isRecv ? (char*)o->recvbuff + off : (char*)(uintptr_t)o->sendbuff + off;
      void* mh = collEngineReg(comm, l->peer, nc, p, len, COLL_MEM_HOST, &l->reg);
      collResult_t r = l->isRecv ? net->irecv(nc, p, len, tag, mh, &l->req) : net->isend(nc, p, len, tag, mh, &l->req);
      if (r != collSuccess) {
        *err = collSetError(r, "rank %d: posting to rank %d (%s) failed: %s", comm->rank, l->peer,
                            collCommPeerHost(comm, l->peer), collLastErrorMessage());
        return 1;
      }
      if (!l->req) break;
      collObsStepPost(comm, l->channel, 2 * l->peer + l->isRecv, l->isRecv ? COLL_STEP_RECV : COLL_STEP_SEND, l->peer,
                      len, l->ops[l->qi], l->k);
      progressed = 1;
    }
    int done = 0;
    size_t got = 0;
    collResult_t r = net->test(l->req, &done, &got, &rtag);
    if (r != collSuccess) {
      /* a transport names the sender's tag of a message it refused (too large) */
      if (l->isRecv && rtag != 0 && rtag != tag) *err = collSigMismatch(comm, l->peer, rtag, tag, &sig);
      else
        *err = collSetError(r, "rank %d: %s rank %d (%s) failed: %s", comm->rank,
                            l->isRecv ? "receive from" : "send to", l->peer, collCommPeerHost(comm, l->peer),
                            collLastErrorMessage());
      return 1;
    }
    if (!done) {
      collObsPending(comm, l->channel, l->ops[l->qi], 2 * l->peer + l->isRecv);
      collIdleAdd(idle, net, nc, l->isRecv ? POLLIN : POLLOUT);
      break;
    }
    collEngineRegDone(comm, l->peer, &l->reg);
    if (l->isRecv && rtag != tag) {
      *err = collSigMismatch(comm, l->peer, rtag, tag, &sig);
      return 1;
    }
    if (l->isRecv && got != len) {
      *err = collSetError(collRemoteError,
                          "rank %d: rank %d (%s) sent %zu bytes where the receive expected %zu (count mismatch)",
                          comm->rank, l->peer, collCommPeerHost(comm, l->peer), got, len);
      return 1;
    }
    collObsStepDone(comm, l->channel, 2 * l->peer + l->isRecv, l->peer, !l->isRecv, len);
    l->req = NULL;
    l->k += (size_t)nch;
    progressed = 1;
  }
  return progressed;
}

/* A peer that failed with an error (the mailbox says so: one load per
 * transfer) fails the transfer at once: a send to it would "succeed" into a
 * connection nobody reads (e.g. after its receive did not match our send). */
static collResult_t collP2pPeersAlive(collComm_t comm, const collOp* ops, int nops) {
  for (int i = 0; i < nops; i++) {
    int p = ops[i].peer;
    if (p == comm->rank || !collMailboxPeerErrored(comm, p)) continue;
    collSig s;
    char what[160];
    collSigOf(&ops[i], 0, 0, &s);
    collSigDescribe(&s, what, sizeof what);
    return collSetError(collRemoteError,
                        "rank %d: %s %s rank %d: rank %d (%s, pid %d) failed earlier (its communicator reported an "
                        "error, e.g. a receive that did not match this rank's send)",
                        comm->rank, what, ops[i].fn == COLL_FN_SEND ? "to" : "from", p, p, collCommPeerHost(comm, p),
                        (int)comm->peers[p].pid);
  }
  return collSuccess;
}

static int collAddrCmp(const void* a, const void* b) {
  uintptr_t x = *(const uintptr_t*)a, y = *(const uintptr_t*)b;
  return x < y ? -1 : x > y;
}

/* A send to another rank that reads the very range a receive of the same
 * batch writes (an in-place all-to-all: the send to peer p and the receive
 * from p at the same offset; collGroupEnd refuses partial overlaps, so an
 * equal start means the same range) would send bytes already overwritten:
 * such sends go from a copy. Returns the batch to run (ops itself when
 * nothing needs a copy) and in *copy the memory to free (NULL if none).
 * Receive starts sorted once, a binary search per send: O(n log n). */
static collResult_t collP2pStageInPlace(collComm_t comm, const collOp* ops, int nops, const collOp** run,
                                        char** copy) {
  *run = ops;
  *copy = NULL;
  int nr = 0, ns = 0;
  for (int i = 0; i < nops; i++) {
    nr += ops[i].fn == COLL_FN_RECV && ops[i].count > 0;
    ns += ops[i].fn == COLL_FN_SEND && ops[i].count > 0 && ops[i].peer != comm->rank;
  }
  if (nr == 0 || ns == 0) return collSuccess;
  uintptr_t* starts = malloc(sizeof *starts * (size_t)nr);
  if (!starts) return collSetError(collSystemError, "p2p: out of memory");
  nr = 0;
  for (int i = 0; i < nops; i++)
    if (ops[i].fn == COLL_FN_RECV && ops[i].count > 0) starts[nr++] = (uintptr_t)ops[i].recvbuff;
  qsort(starts, (size_t)nr, sizeof *starts, collAddrCmp);
  size_t need = 0;
  collOp* mine = NULL;
  for (int pass = 0; pass < 2; pass++) { /* 0: the bytes to copy; 1: copy them */
    size_t off = sizeof(collOp) * (size_t)nops;
    if (pass == 1) {
      if (!need) break;
      char* mem = malloc(off + need);
      if (!mem) {
        free(starts);
        return collSetError(collSystemError, "p2p: cannot allocate %zu bytes for the copy of in-place sends", need);
      }
      mine = (collOp*)mem;
      memcpy(mine, ops, off);
      *copy = mem;
    }
    for (int i = 0; i < nops; i++) {
      if (ops[i].fn != COLL_FN_SEND || ops[i].peer == comm->rank || ops[i].count == 0) continue;
      uintptr_t key = (uintptr_t)ops[i].sendbuff;
      if (!bsearch(&key, starts, (size_t)nr, sizeof *starts, collAddrCmp)) continue;
      size_t bytes = collP2pBytes(&ops[i]), padded = (bytes + 15) & ~(size_t)15;
      if (pass == 0) {
        need += padded;
        continue;
      }
      memcpy(*copy + off, ops[i].sendbuff, bytes);
      mine[i].sendbuff = *copy + off;
      off += padded;
    }
  }
  free(starts);
  if (mine) *run = mine;
  return collSuccess;
}

collResult_t collRunP2p(collComm_t comm, const collOp* userOps, int nops) {
  const collOp* ops;
  char* inPlaceCopy;
  collResult_t err = collP2pStageInPlace(comm, userOps, nops, &ops, &inPlaceCopy);
  if (err != collSuccess) return collEngineFail(comm, err);
  err = collP2pSelf(comm, ops, nops);
  if (err != collSuccess) {
    free(inPlaceCopy);
    return err;
  }
  if (err != collSuccess) return err;
  if ((err = collP2pPeersAlive(comm, ops, nops)) != collSuccess) {
    free(inPlaceCopy);
    return collEngineFail(comm, err);
  }
  int n = comm->nranks, nch = comm->nchannels;
  /* order[dir][peer] lists the batch's transfers per peer and direction. */
  int* order = malloc(sizeof(int) * (size_t)nops * 2 + 1);
  int* cnt = calloc((size_t)n * 2, sizeof(int));
  int* start = calloc((size_t)n * 2 + 1, sizeof(int));
  collLane* lanes = calloc((size_t)n * 2 * (size_t)nch + 1, sizeof(collLane));
  if (!order || !cnt || !start || !lanes) {
    err = collSetError(collSystemError, "p2p: out of memory");
    goto out;
  }
  for (int i = 0; i < nops; i++)
    if (ops[i].peer != comm->rank) cnt[(ops[i].fn == COLL_FN_RECV) * n + ops[i].peer]++;
  for (int q = 0; q < 2 * n; q++) start[q + 1] = start[q] + cnt[q];
  memset(cnt, 0, sizeof(int) * (size_t)n * 2);
  for (int i = 0; i < nops; i++) {
    if (ops[i].peer == comm->rank) continue;
    int q = (ops[i].fn == COLL_FN_RECV) * n + ops[i].peer;
    order[start[q] + cnt[q]++] = i;
  }
  int nl = 0;
  void* unused;
  for (int pass = 0; pass < 2 && err == collSuccess; pass++) /* all sends connect before any accept */
    for (int p = 0; p < n && err == collSuccess; p++) {
      int q = pass * n + p;
      if (!cnt[q]) continue;
      for (int c = 0; c < nch && err == collSuccess; c++) {
        collLane* l = &lanes[nl++];
        l->peer = p;
        l->isRecv = pass;
        l->channel = c;
        l->ops = order + start[q];
        l->nops = cnt[q];
        l->k = (size_t)c;
        err = pass ? collEngineRecvConn(comm, p, c, &unused) : collEngineSendConn(comm, p, c, &unused);
      }
    }
  collIdle idle;
  collIdleInit(comm, &idle);
  for (;;) {
    if (err != collSuccess) break;
    int progressed = 0, active = 0, waitPeer = -1;
    for (int i = 0; i < nl && err == collSuccess; i++) {
      if (lanes[i].qi >= lanes[i].nops) continue;
      progressed |= collLaneProgress(comm, ops, &lanes[i], nch, &idle, &err);
      if (lanes[i].qi < lanes[i].nops) {
        active++;
        waitPeer = lanes[i].peer;
      }
    }
    if (err != collSuccess || !active) break;
    err = collIdleStep(comm, &idle, progressed, "send/recv", waitPeer);
  }
  if (err != collSuccess) err = collEngineFail(comm, err);
out:
  free(order);
  free(cnt);
  free(start);
  free(lanes);
  free(inPlaceCopy);
  return err;
}
