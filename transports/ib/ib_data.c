/*
 * ib_data.c - the data path of the ib transport (protocol: ib_internal.h).
 *
 * Requests live in a ring of IB_DEPTH slots per comm, indexed by message
 * number. Send WRs are signaled only where the completion is awaited (the
 * record of a send written into the posted buffer: its completion means all
 * the message's RDMA writes were placed) and at least every IB_SIG_EVERY-th
 * of a QP (a completion covers the WRs before it, which frees their send
 * queue slots): on one core, rxe's completion work and the wake-ups of a
 * sleeping rank for completions nobody waits for took the core from the
 * ranks (an unsignaled WR that fails still completes, in error). Receive
 * WRs (no buffer: they only take immediates) are reposted as they complete.
 * test() polls the CQ (ibv_poll_cq, the classic API: rdma-core before v55
 * loses completions of rxe with the extended one) and moves every message of
 * the comm; when nothing is done it checks the side channel every IB_CHECK_S
 * and serves incoming connections every millisecond.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ib_internal.h"
#include "misc/log.h"

#define WRID(seq, q, kind) ((((uint64_t)(seq) & IB_WR_SEQ) << 24) | ((uint64_t)(q) << 4) | (uint64_t)(kind))
#define IB_WR_SEQ ((1ull << 40) - 1)
#define REG_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

static collIbCts* ctsEntry(collIbComm* c, uint64_t k) { return (collIbCts*)c->ctrl + k % IB_DEPTH; }
static char* slot(collIbComm* c, uint64_t k) {
  return c->ctrl + IB_DEPTH * sizeof(collIbCts) + (size_t)(k % IB_DEPTH) * IB_SLOT;
}
/* RTS entry k: the receiver's, or the sender's source of it */
static collIbRts* rtsEntry(collIbComm* c, uint64_t k) {
  return (collIbRts*)(c->ctrl + IB_DEPTH * (sizeof(collIbCts) + IB_SLOT)) + k % IB_DEPTH;
}
/* The message number of an immediate, from the base of its window, or
 * IB_DEPTH and up when outside [base, base + IB_DEPTH). */
static uint32_t immDelta(uint32_t imm, uint64_t base) { return (imm - (uint32_t)base) & IB_IMM_SEQ; }

const char* collIbWcHint(enum ibv_wc_status s) {
  switch (s) {
    case IBV_WC_RETRY_EXC_ERR:
      return "the peer's port never acknowledged: it is gone, or unreachable with this addressing (RoCE: "
             "COLL_IB_GID_INDEX, IP routes, VLAN, MTU; IB: subnet manager); COLL_IB_TIMEOUT and COLL_IB_RETRY_CNT "
             "set how long it retries";
    case IBV_WC_REM_ACCESS_ERR:
      return "the peer refused the memory key: its buffer was deregistered or freed while in flight";
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_ACCESS_ERR:
      return "a local buffer's registration does not cover it: memory freed or remapped while in flight "
             "(COLL_IB_REG_CACHE=0 registers per message)";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "the peer had no receive posted (protocol error)";
    case IBV_WC_WR_FLUSH_ERR: return "the queue pair was already in error (an earlier failure on it)";
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_REM_INV_REQ_ERR: return "the peer's queue pair failed the operation (peer in error or gone)";
    default: return "see ibv_poll_cq(3)";
  }
}

int collIbPostRecvs(collIbComm* c, int i, int n) {
  struct ibv_recv_wr wr[16], *bad = NULL;
  while (n > 0) {
    int k = n < 16 ? n : 16;
    memset(wr, 0, sizeof wr);
    for (int j = 0; j < k; j++) {
      wr[j].wr_id = WRID(0, i, IB_WR_RECV);
      wr[j].next = j + 1 < k ? &wr[j + 1] : NULL;
    }
    if (collIb.v->postRecv(c->qp[i], wr, &bad) != 0) return -1;
    n -= k;
  }
  return 0;
}

/* Send queue slots of QP q not taken by WRs posted and not known complete. */
static int sqRoom(const collIbComm* c, int q) { return IB_SQ_DEPTH - (int)(c->sqPosted[q] - c->sqDone[q]); }

/* One RDMA write (with immediate when imm >= 0), signaled when sig is set or
 * IB_SIG_EVERY - 1 unsignaled ones precede it; the wr_id carries the QP's
 * send count after it. */
static collResult_t postWrite(collIbComm* c, int q, uint64_t wrid, void* src, size_t len, uint32_t lkey,
                              uint64_t raddr, uint32_t rkey, int64_t imm, int sig) {
  struct ibv_sge sge = {(uint64_t)(uintptr_t)src, (uint32_t)len, lkey};
  struct ibv_send_wr wr, *bad = NULL;
  memset(&wr, 0, sizeof wr);
  sig = sig || c->sqUnsig[q] + 1 >= IB_SIG_EVERY;
  wr.wr_id = wrid | (((c->sqPosted[q] + 1) & 0xffff) << 8);
  wr.sg_list = len ? &sge : NULL;
  wr.num_sge = len ? 1 : 0;
  wr.opcode = imm >= 0 ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.send_flags = sig ? IBV_SEND_SIGNALED : 0;
  if (imm >= 0) wr.imm_data = htonl((uint32_t)imm);
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  int e = collIb.v->postSend(c->qp[q], &wr, &bad);
  if (e != 0)
    return collIbFail(c, collSystemError, "ib: ibv_post_send on QP %u (%s:%d) to %s failed: %s", c->qp[q]->qp_num,
                      c->dev->name, c->dev->port, c->peerDesc, strerror(e));
  c->sqPosted[q]++;
  c->sqUnsig[q] = sig ? 0 : c->sqUnsig[q] + 1;
  return collSuccess;
}

/* A signaled zero-byte write (no immediate: the peer sees nothing) on every
 * QP whose last WRs were unsignaled, so that writesInFlight can reach 0. */
static void markTails(collIbComm* c) {
  for (int q = 0; q < c->nqps && c->err == collSuccess; q++)
    if (c->sqUnsig[q] > 0 && sqRoom(c, q) >= 1)
      postWrite(c, q, WRID(c->sqPosted[q], q, IB_WR_MARK), NULL, 0, 0, c->remAddr, c->remKey, -1, 1);
}

static void releaseReg(collIbComm* c, collIbReq* r) {
  if (r->reg) collRegCachePut(c->dev->hca->reg, r->reg);
  r->reg = NULL;
}

/* Registration of a request's buffer (unless the caller gave one). */
static collResult_t regBuf(collIbComm* c, collIbReq* r, void* mhandle) {
  if (mhandle) {
    collRegEntry* e = mhandle;
    uintptr_t a = (uintptr_t)r->data;
    if (a < e->start || a + r->size > e->end)
      return collSetError(collInvalidArgument, "ib: the memory handle does not cover [%p, +%zu)", (void*)r->data, r->size);
    r->lkey = ((struct ibv_mr*)e->handle)->lkey;
    r->dstKey = ((struct ibv_mr*)e->handle)->rkey;
    r->keyed = 1;
    return collSuccess;
  }
  int e = collRegCacheGet(c->dev->hca->reg, r->data, r->size, REG_ACCESS, &r->reg);
  if (e != 0)
    return collSetError(collSystemError, "ib: registering %zu bytes at %p on %s failed: %s%s", r->size, (void*)r->data,
                        c->dev->name, strerror(e), e == ENOMEM ? " (locked-memory limit: ulimit -l)" : "");
  r->lkey = ((struct ibv_mr*)r->reg->handle)->lkey;
  r->dstKey = ((struct ibv_mr*)r->reg->handle)->rkey;
  r->keyed = 1;
  return collSuccess;
}

/* ---- completions -------------------------------------------------------- */

static const char* wrWhat(int kind) {
  return kind == IB_WR_DATA ? "RDMA write of message" : kind == IB_WR_REC ? "record write of message"
       : kind == IB_WR_CTS ? "clear-to-send write for message" : kind == IB_WR_RTS ? "request-to-send for message"
       : kind == IB_WR_MARK ? "completion marker write at send" : "receive";
}

static void handleWc(collIbComm* c, const struct ibv_wc* wc, int* progressed) {
  int kind = (int)(wc->wr_id & 0xf), q = (int)((wc->wr_id >> 4) & 0xf);
  uint64_t seq = wc->wr_id >> 24;
  if (q >= c->nqps) q = 0;
  if (wc->status != IBV_WC_SUCCESS) {
    if (c->err != collSuccess) return; /* flushed behind the first failure */
    char num[32] = "";
    if (kind != IB_WR_RECV) snprintf(num, sizeof num, " %llu", (unsigned long long)seq);
    collIbFail(c, collRemoteError,
               "ib: %s%s %s %s failed on QP %u (%s:%d): %s (status %d, vendor error 0x%x); %s", wrWhat(kind), num,
               kind == IB_WR_RECV ? "from" : "to", c->peerDesc, wc->qp_num, c->dev->name, c->dev->port,
               collIbvWcStatusStr(wc->status), (int)wc->status, wc->vendor_err, collIbWcHint(wc->status));
    return;
  }
  *progressed = 1;
  if (kind != IB_WR_RECV) {
    /* the QP's send count after this WR, from its low 16 bits (fewer than
     * IB_SQ_DEPTH WRs are outstanding) */
    uint64_t done = c->sqPosted[q] - ((c->sqPosted[q] - (wc->wr_id >> 8)) & 0xffff);
    if (done > c->sqDone[q]) c->sqDone[q] = done;
    if (kind == IB_WR_REC) {
      collIbReq* r = &c->reqs[seq % IB_DEPTH];
      if (r->state == IB_REQ_ISSUED && (r->seq & IB_WR_SEQ) == seq) {
        r->state = IB_REQ_DONE;
        releaseReg(c, r);
      }
    }
    return;
  }
  if (collIbPostRecvs(c, q, 1) != 0) {
    collIbFail(c, collSystemError, "ib: ibv_post_recv on QP %u failed: %s", c->qp[q]->qp_num, strerror(errno));
    return;
  }
  uint32_t imm = ntohl(wc->imm_data);
  if (c->isSend && (imm & IB_IMM_CREDIT)) { /* the receiver's consumed count */
    uint64_t v = c->issued - ((((uint32_t)c->issued & IB_IMM_SEQ) - (imm & IB_IMM_SEQ)) & IB_IMM_SEQ);
    if (v > c->consumed && v <= c->issued) c->consumed = v;
  } else if (c->isSend) { /* a clear-to-send entry arrived */
    uint32_t d = immDelta(imm, c->issued);
    if (d >= IB_DEPTH) return; /* for a message already sent eagerly */
    uint64_t k = c->issued + d;
    const collIbCts* e = ctsEntry(c, k);
    if (e->seq != (uint32_t)(k + 1)) {
      collIbFail(c, collRemoteError, "ib: protocol error: clear-to-send %llu from %s holds entry %u",
                 (unsigned long long)k, c->peerDesc, e->seq);
      return;
    }
    c->ctsSeen[k % IB_DEPTH] = k + 1;
    if (e->consumed > c->consumed && e->consumed <= c->issued) c->consumed = e->consumed;
  } else if (imm & IB_IMM_RTS) { /* a request-to-send arrived */
    uint32_t d = immDelta(imm, c->consumed);
    uint64_t k = c->consumed + d;
    if (d >= IB_DEPTH || rtsEntry(c, k)->seq != (uint32_t)k) {
      collIbFail(c, collRemoteError, "ib: protocol error: request-to-send %u from %s outside the window at %llu",
                 imm & IB_IMM_SEQ, c->peerDesc, (unsigned long long)c->consumed);
      return;
    }
    c->rtsSeen[k % IB_DEPTH] = k + 1;
    c->newArrivals = 1;
  } else { /* a record arrived */
    uint32_t d = immDelta(imm, c->consumed);
    uint64_t k = c->consumed + d;
    const collIbRec* h = (const collIbRec*)slot(c, k);
    if (d >= IB_DEPTH || h->seq != (uint32_t)k) {
      collIbFail(c, collRemoteError, "ib: protocol error: record %u from %s outside the window at %llu", imm,
                 c->peerDesc, (unsigned long long)c->consumed);
      return;
    }
    c->recSeen[k % IB_DEPTH] = k + 1;
    c->newArrivals = 1;
  }
}

static void pollCq(collIbComm* c, int* progressed) {
  struct ibv_wc wc[16];
  for (int round = 0; round < 8; round++) {
    int n = collIb.v->pollCq(c->cq, 16, wc);
    if (n < 0) {
      collIbFail(c, collSystemError, "ib: ibv_poll_cq on %s failed (%d)", c->dev->name, n);
      return;
    }
    for (int i = 0; i < n; i++) handleWc(c, &wc[i], progressed);
    if (n < 16) return;
  }
}

/* ---- sender --------------------------------------------------------------- */

static void issueSends(collIbComm* c, int* progressed) {
  while (c->err == collSuccess && c->issued < c->posted) {
    uint64_t k = c->issued;
    collIbReq* r = &c->reqs[k % IB_DEPTH];
    int q = (int)(k % (uint64_t)c->nqps);
    int cts = c->ctsSeen[k % IB_DEPTH] == k + 1;
    if (r->state == IB_REQ_POSTED) {
      int eager = !r->direct && sizeof(collIbRec) + r->size <= c->dev->maxMsg;
      if (eager && (cts || k < c->consumed + IB_DEPTH)) {
        if (sqRoom(c, q) < 1) return;
        char* st = c->ctrl + IB_DEPTH * sizeof(collIbCts) + (size_t)(k % IB_DEPTH) * IB_SLOT;
        collIbRec* h = (collIbRec*)st;
        memset(h, 0, sizeof *h);
        h->size = r->size;
        h->tag = r->tag;
        h->seq = (uint32_t)k;
        h->flags = IB_REC_EAGER;
        if (r->size) memcpy(st + sizeof *h, r->data, r->size);
        if (postWrite(c, q, WRID(k, q, IB_WR_REC), st, sizeof *h + r->size, c->ctrlMr->lkey,
                      c->remAddr + (k % IB_DEPTH) * IB_SLOT, c->remKey, (int64_t)(k & IB_IMM_SEQ), 0) != collSuccess)
          return;
        /* done now: the payload is in the staging slot, which no later
         * message reuses before this one left it (message k + IB_DEPTH needs
         * CTS k + IB_DEPTH or credit k + 1, both of which say the receiver
         * has consumed message k). Waiting for the write's completion would
         * add the link's round trip (its acknowledgement) to every small
         * send; a failure of the write still fails the comm. */
        r->state = IB_REQ_DONE;
        c->issued++;
        *progressed = 1;
        continue;
      }
      if (!cts) {
        /* larger than a slot: tell a receiver that may have posted a small
         * buffer (it sends no CTS for one) what is coming, then wait */
        if (!eager && !r->rtsSent && k < c->consumed + IB_DEPTH && sqRoom(c, q) >= 1 &&
            collTimeNow() > r->postedAt + IB_RTS_DELAY_S) {
          collIbRts* t = rtsEntry(c, k);
          memset(t, 0, sizeof *t);
          t->size = r->size;
          t->seq = (uint32_t)k;
          t->tag = r->tag;
          if (postWrite(c, q, WRID(k, q, IB_WR_RTS), t, sizeof *t, c->ctrlMr->lkey,
                        c->remAddr + IB_DEPTH * (uint64_t)IB_SLOT + (k % IB_DEPTH) * sizeof *t, c->remKey,
                        (int64_t)((k & IB_IMM_SEQ) | IB_IMM_RTS), 0) != collSuccess)
            return;
          r->rtsSent = 1;
          *progressed = 1;
        }
        return; /* wait for the receiver */
      }
      const collIbCts* e = ctsEntry(c, k);
      r->dstAddr = e->addr;
      uint32_t rkey = e->rkey;
      r->tooBig = r->size > e->size;
      if (!r->tooBig && r->size > 0 && !r->keyed && regBuf(c, r, NULL) != collSuccess) {
        collIbFail(c, collSystemError, "%s", collLastErrorMessage());
        return;
      }
      r->dstKey = rkey;
      r->off = 0;
      r->state = IB_REQ_DATA;
    }
    /* IB_REQ_DATA: payload in pieces of at most the port's max message size */
    while (!r->tooBig && r->off < r->size) {
      if (sqRoom(c, q) < 2) return; /* one stays for the record */
      size_t n = r->size - r->off;
      if (n > c->dev->maxMsg) n = c->dev->maxMsg;
      if (postWrite(c, q, WRID(k, q, IB_WR_DATA), r->data + r->off, n, r->lkey, r->dstAddr + r->off, r->dstKey,
                    -1, 0) != collSuccess)
        return;
      r->off += n;
      *progressed = 1;
    }
    if (sqRoom(c, q) < 1) return;
    char* st = c->ctrl + IB_DEPTH * sizeof(collIbCts) + (size_t)(k % IB_DEPTH) * IB_SLOT;
    collIbRec* h = (collIbRec*)st;
    memset(h, 0, sizeof *h);
    h->size = r->size;
    h->tag = r->tag;
    h->seq = (uint32_t)k;
    h->flags = r->tooBig ? IB_REC_TOOBIG : IB_REC_DIRECT;
    if (postWrite(c, q, WRID(k, q, IB_WR_REC), st, sizeof *h, c->ctrlMr->lkey, c->remAddr + (k % IB_DEPTH) * IB_SLOT,
                  c->remKey, (int64_t)(k & IB_IMM_SEQ), 1) != collSuccess)
      return;
    r->state = IB_REQ_ISSUED;
    c->issued++;
    *progressed = 1;
  }
}

/* ---- receiver ------------------------------------------------------------- */

static void postCts(collIbComm* c, int* progressed) {
  while (c->err == collSuccess && c->issued < c->posted) {
    uint64_t k = c->issued;
    collIbReq* r = &c->reqs[k % IB_DEPTH];
    if (r->seq != k || r->state != IB_REQ_POSTED || c->recSeen[k % IB_DEPTH] == k + 1 || !r->direct) {
      c->issued++; /* arrived eagerly already, or will (small): no CTS */
      continue;
    }
    int q = (int)(k % (uint64_t)c->nqps);
    if (sqRoom(c, q) < 1) return;
    collIbCts* e = ctsEntry(c, k);
    memset(e, 0, sizeof *e);
    e->addr = (uint64_t)(uintptr_t)r->data;
    e->size = r->size;
    e->tag = r->tag;
    e->consumed = c->consumed; /* a bonus: the sender drops stale entries, so only credit writes count */
    e->rkey = r->dstKey;
    e->seq = (uint32_t)(k + 1);
    if (postWrite(c, q, WRID(k, q, IB_WR_CTS), e, sizeof *e, c->ctrlMr->lkey, c->remAddr + (k % IB_DEPTH) * sizeof *e,
                  c->remKey, (int64_t)(k & IB_IMM_SEQ), 0) != collSuccess)
      return;
    c->issued++;
    *progressed = 1;
  }
}

/* Reports the consumed count once it moved half a window past the last
 * report (a zero-byte write: its immediate carries the count). */
static void sendCredit(collIbComm* c, int* progressed) {
  if (c->err != collSuccess || c->consumed < c->lastReported + IB_DEPTH / 2 || sqRoom(c, 0) < 1 ||
      atomic_load_explicit(&c->state, memory_order_acquire) != IB_CONNECTED)
    return;
  if (postWrite(c, 0, WRID(c->consumed, 0, IB_WR_CTS), NULL, 0, 0, c->remAddr, c->remKey,
                (int64_t)((c->consumed & IB_IMM_SEQ) | IB_IMM_CREDIT), 0) != collSuccess)
    return;
  c->lastReported = c->consumed;
  *progressed = 1;
}

static void finishRecv(collIbComm* c, collIbReq* r) {
  const collIbRec* h = (const collIbRec*)slot(c, r->seq);
  if ((h->flags & IB_REC_TOOBIG) || h->size > r->size) {
    c->errTag = h->tag;
    collIbFail(c, collRemoteError, "ib: message from %s: peer sent %llu bytes, receiver posted %zu", c->peerDesc,
               (unsigned long long)h->size, r->size);
    return;
  }
  if (h->flags & IB_REC_EAGER) {
    if (h->size > IB_EAGER) {
      collIbFail(c, collRemoteError, "ib: protocol error: eager message of %llu bytes from %s",
                 (unsigned long long)h->size, c->peerDesc);
      return;
    }
    if (r->gpu) {
      collIbFail(c, collRemoteError,
                 "ib: message from %s: %llu bytes of host memory came eagerly for a GPU buffer (dma-buf); both ends "
                 "of a connection must pass GPU memory, or neither", c->peerDesc, (unsigned long long)h->size);
      return;
    }
    if (h->size) memcpy(r->data, (const char*)h + sizeof *h, h->size);
  } else if (!(h->flags & IB_REC_DIRECT)) {
    collIbFail(c, collRemoteError, "ib: protocol error: record flags %u from %s", h->flags, c->peerDesc);
    return;
  }
  r->len = (size_t)h->size;
  r->tag = h->tag;
  r->state = IB_REQ_DONE;
  c->doneSeq[r->seq % IB_DEPTH] = r->seq + 1;
  releaseReg(c, r);
}

static void finishRecvs(collIbComm* c, int* progressed) {
  c->newArrivals = 0;
  uint64_t end = c->posted < c->consumed + IB_DEPTH ? c->posted : c->consumed + IB_DEPTH;
  for (uint64_t k = c->consumed; k < end && c->err == collSuccess; k++) {
    collIbReq* r = &c->reqs[k % IB_DEPTH];
    if (r->seq != k || r->state != IB_REQ_POSTED) continue;
    if (c->recSeen[k % IB_DEPTH] == k + 1) {
      finishRecv(c, r);
      *progressed = 1;
    } else if (c->rtsSeen[k % IB_DEPTH] == k + 1 && rtsEntry(c, k)->size > r->size) {
      c->errTag = rtsEntry(c, k)->tag;
      collIbFail(c, collRemoteError, "ib: message from %s: peer sent %llu bytes, receiver posted %zu", c->peerDesc,
                 (unsigned long long)rtsEntry(c, k)->size, r->size);
      *progressed = 1;
    } else if (c->rtsSeen[k % IB_DEPTH] == k + 1 && !r->direct) {
      c->errTag = rtsEntry(c, k)->tag;
      collIbFail(c, collRemoteError,
                 "ib: message from %s: %llu bytes of GPU memory (dma-buf) for a host buffer of %zu bytes, which takes "
                 "small messages eagerly; both ends of a connection must pass GPU memory, or neither", c->peerDesc,
                 (unsigned long long)rtsEntry(c, k)->size, r->size);
      *progressed = 1;
    }
  }
  while (c->doneSeq[c->consumed % IB_DEPTH] > c->consumed) c->consumed++;
}

/* ---- progress ------------------------------------------------------------- */

collResult_t collIbProgress(collIbComm* c, int* progressed) {
  if (c->err != collSuccess) return c->err;
  if (atomic_load_explicit(&c->failed, memory_order_acquire)) return collIbFail(c, collRemoteError, "%s", c->failMsg);
  if (atomic_load_explicit(&c->state, memory_order_acquire) != IB_CONNECTED && collIbHandshake(c) != collSuccess)
    return c->err;
  pollCq(c, progressed);
  if (!c->isSend && c->newArrivals) finishRecvs(c, progressed);
  if (c->err == collSuccess && atomic_load_explicit(&c->state, memory_order_acquire) == IB_CONNECTED) {
    if (c->isSend) {
      issueSends(c, progressed);
    } else {
      postCts(c, progressed);
      sendCredit(c, progressed);
    }
  }
  return c->err;
}

void collIbArm(collIbComm* c, int* progressed) {
  if (c->err == collSuccess && !atomic_load_explicit(&c->armed, memory_order_acquire)) {
    atomic_store_explicit(&c->armed, 1, memory_order_release);
    if (collIb.v->reqNotifyCq(c->cq, 0) != 0) atomic_store(&c->armed, 0);
  }
  collIbProgress(c, progressed); /* what arrived before the CQ was armed raises no event */
}

static int writesInFlight(const collIbComm* c) {
  int n = 0;
  for (int i = 0; i < c->nqps; i++) n += IB_SQ_DEPTH - sqRoom(c, i);
  return n;
}

void collIbDrain(collIbComm* c, double sec) {
  double end = collTimeNow() + sec;
  int prog = 0;
  while (c->isSend && c->err == collSuccess && atomic_load_explicit(&c->state, memory_order_acquire) == IB_CONNECTED &&
         writesInFlight(c) > 0 && collTimeNow() < end) {
    markTails(c); /* again once a full queue has room */
    pollCq(c, &prog);
    if (writesInFlight(c) > 0) sched_yield();
  }
}

/* Looks at the side channel: garbage fails the comm; the peer's close does
 * once the writes already posted completed (their acknowledgements may
 * still be on the way when the close arrives) or IB_GONE_GRACE_S passed.
 * Records that landed before the close are in the CQ already (a receiver's
 * completion precedes the sender's). */
static void checkPeer(collIbComm* c, double now) {
  if (c->goneAt == 0) {
    struct pollfd p = {c->sock, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0) return;
    char b;
    ssize_t n = recv(c->sock, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n > 0) {
      collIbFail(c, collRemoteError, "ib: %s sent unexpected bytes on the side channel", c->peerDesc);
      return;
    }
    c->goneAt = now;
  }
  markTails(c); /* completes once the peer's QP acknowledged what came before */
  int prog = 0;
  collIbProgress(c, &prog);
  if (c->err == collSuccess && (writesInFlight(c) == 0 || now > c->goneAt + IB_GONE_GRACE_S))
    collIbFail(c, collRemoteError,
               "ib: connection with %s lost: the peer closed its side channel (process exited or connection closed)",
               c->peerDesc);
}

static collResult_t post(collIbComm* c, int isSend, void* data, size_t size, uint64_t tag, void* mhandle,
                         void** request) {
  const char* what = isSend ? "isend" : "irecv";
  if (!c || !request || (!data && size > 0))
    return collSetError(collInvalidArgument, "ib %s: NULL comm, request or buffer", what);
  if ((c->tag != IB_TAG_SEND && c->tag != IB_TAG_RECV) || c->isSend != isSend)
    return collSetError(collInvalidUsage, "ib %s on a %s comm", what,
                        c->tag == IB_TAG_SEND ? "send" : c->tag == IB_TAG_RECV ? "recv" : "non-ib");
  *request = NULL;
  int prog = 0;
  collIbReq* r = &c->reqs[c->posted % IB_DEPTH];
  if (r->state != IB_REQ_FREE || c->err != collSuccess || atomic_load_explicit(&c->failed, memory_order_acquire))
    collIbProgress(c, &prog);
  if (c->err != collSuccess) return collSetError(c->err, "%s", c->errMsg);
  if (r->state != IB_REQ_FREE) return collSuccess; /* ring full: retry */
  memset(r, 0, sizeof *r);
  r->comm = c;
  r->seq = c->posted;
  r->data = data;
  r->size = size;
  r->tag = tag;
  r->gpu = mhandle && (((const collRegEntry*)mhandle)->access & IB_REG_DMABUF);
  r->direct = size > IB_EAGER || r->gpu;
  if (r->direct && (!isSend || mhandle)) { /* a receive: the sender writes straight into the buffer */
    collResult_t e = regBuf(c, r, mhandle);
    if (e != collSuccess) return e;
  }
  if (isSend && r->direct) r->postedAt = collTimeNow();
  r->state = IB_REQ_POSTED;
  c->posted++;
  if (!isSend) c->newArrivals = 1; /* its record may be there already (eager) */
  collIbProgress(c, &prog); /* errors surface in test */
  *request = r;
  return collSuccess;
}

collResult_t collIbIsend(void* sendComm, const void* data, size_t size, uint64_t tag, void* mhandle,
                         void** request) {
  return post(sendComm, 1, (void*)(uintptr_t)data, size, tag, mhandle, request);
}

collResult_t collIbIrecv(void* recvComm, void* data, size_t size, uint64_t tag, void* mhandle, void** request) {
  return post(recvComm, 0, data, size, tag, mhandle, request);
}

collResult_t collIbTest(void* request, int* done, size_t* size, uint64_t* tag) {
  collIbReq* r = request;
  if (!r || !done || r->state == IB_REQ_FREE || !r->comm)
    return collSetError(collInvalidArgument, "ib test: NULL or released request");
  collIbComm* c = r->comm;
  *done = 0;
  int prog = 0;
  if (r->state != IB_REQ_DONE) collIbProgress(c, &prog);
  if (r->state != IB_REQ_DONE && c->err == collSuccess) {
    double now = collTimeNow();
    /* the handshake reads the side channel itself until connected */
    if ((now >= c->nextCheck || c->goneAt > 0) &&
        atomic_load_explicit(&c->state, memory_order_acquire) == IB_CONNECTED) {
      c->nextCheck = now + IB_CHECK_S;
      checkPeer(c, now);
    }
    if (now >= c->nextService) {
      c->nextService = now + 1e-3;
      collIbService(0);
    }
  }
  if (r->state == IB_REQ_DONE) {
    *done = 1;
    if (size) *size = c->isSend ? r->size : r->len;
    if (tag) *tag = r->tag;
    r->state = IB_REQ_FREE;
    return collSuccess;
  }
  if (c->err != collSuccess) {
    releaseReg(c, r);
    r->state = IB_REQ_FREE;
    if (tag && c->errTag) *tag = c->errTag;
    return collSetError(c->err, "%s", c->errMsg);
  }
  return collSuccess;
}
