/*
 * p2p_ring.c - data path of the p2p transport: the sender copies chunks of
 * its messages into free ring slots on its stream and publishes each slot
 * (head) when its copy finished; the receiver copies published slots out
 * into the posted buffers on its stream and releases each slot (tail) when
 * that copy finished. Slots are used in order, so every counter moves in
 * order and one event per slot tells when its copy is done.
 */
#ifdef COLL_HAVE_CUDA
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "misc/log.h"
#include "misc/socket.h"
#include "transports/p2p/p2p_internal.h"

CUcontext p2pEnterCtx(CUcontext ctx) {
  CUcontext cur = NULL;
  if (COLL_CU(cuCtxGetCurrent)(&cur) != CUDA_SUCCESS) cur = NULL;
  if (ctx && cur != ctx) COLL_CU(cuCtxSetCurrent)(ctx);
  return cur;
}

void p2pLeaveCtx(CUcontext prev) {
  CUcontext cur = NULL;
  if (COLL_CU(cuCtxGetCurrent)(&cur) == CUDA_SUCCESS && cur != prev) COLL_CU(cuCtxSetCurrent)(prev);
}

/* Fails the comm for good: every later call returns the same error. */
__attribute__((format(printf, 3, 4))) static collResult_t p2pFail(p2pComm* c, collResult_t code, const char* fmt,
                                                                  ...) {
  if (c->err == collSuccess) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->errMsg, sizeof c->errMsg, fmt, ap);
    va_end(ap);
    c->err = code;
  }
  return collSetError(c->err, "%s", c->errMsg);
}

collResult_t p2pPost(p2pComm* c, int isSend, CUdeviceptr data, size_t size, uint64_t tag, void** request) {
  if (!c || c->tag != P2P_TAG_COMM || !request)
    return collSetError(collInvalidArgument, "p2p %s: not a p2p comm, or request is NULL", isSend ? "isend" : "irecv");
  if (c->isSend != isSend)
    return collSetError(collInvalidUsage, "p2p %s on a %s comm", isSend ? "isend" : "irecv", c->isSend ? "send" : "recv");
  *request = NULL;
  if (c->err != collSuccess) return collSetError(c->err, "%s", c->errMsg);
  if (c->qPost - c->qDone >= COLL_P2P_MAX_REQUESTS) return collSuccess; /* full: retry */
  p2pReq* r = NULL;
  for (int i = 0; i < COLL_P2P_MAX_REQUESTS && !r; i++)
    if (c->reqs[i].state == P2P_REQ_FREE) r = &c->reqs[i];
  if (!r) return collSuccess; /* completed ones not tested yet: retry */
  memset(r, 0, sizeof *r);
  r->comm = c;
  r->state = P2P_REQ_ACTIVE;
  r->data = data;
  r->size = size;
  r->len = isSend ? size : 0;
  r->tag = isSend ? tag : 0;
  c->queue[c->qPost % COLL_P2P_MAX_REQUESTS] = r;
  c->qPost++;
  *request = r;
  return collSuccess;
}

/* Finishes the request whose last chunk left slot s. */
static void p2pFinish(p2pComm* c, int s) {
  if (!c->slotLast[s]) return;
  p2pReq* r = c->slotReq[s];
  r->state = P2P_REQ_DONE;
  c->msgs++;
  c->bytes += r->len;
  c->qDone++;
}

/* Retires finished copies in slot order: publishes (sender) or releases
 * (receiver) their slots. Returns 1 if any finished, -1 on a failure. */
static int p2pRetire(p2pComm* c) {
  int moved = 0;
  while (c->mine < c->issued) {
    int s = (int)(c->mine % COLL_P2P_NSLOTS);
    CUresult q = COLL_CU(cuEventQuery)(c->ev[s]);
    if (q == CUDA_ERROR_NOT_READY) break;
    if (q != CUDA_SUCCESS) {
      p2pFail(c, collSystemError, "p2p: a copy %s the ring on GPU %d failed: %s (%s)", c->isSend ? "into" : "out of",
              c->dev, collCudaErrorName(q), collCudaErrorString(q));
      return -1;
    }
    c->mine++;
    atomic_store_explicit(c->isSend ? &c->hdr->head : &c->hdr->tail, c->mine, memory_order_release);
    p2pFinish(c, s);
    moved = 1;
  }
  return moved;
}

/* Enqueues a copy of n bytes and the slot's event; -1 on a failure. */
static int p2pCopy(p2pComm* c, int s, CUdeviceptr dst, CUdeviceptr src, size_t n) {
  CUresult r = n ? COLL_CU(cuMemcpyAsync)(dst, src, n, c->stream) : CUDA_SUCCESS;
  if (r == CUDA_SUCCESS) r = COLL_CU(cuEventRecord)(c->ev[s], c->stream);
  if (r != CUDA_SUCCESS) {
    p2pFail(c, collSystemError, "p2p: enqueueing a %zu-byte copy %s the ring on GPU %d failed: %s (%s)", n,
            c->isSend ? "into" : "out of", c->dev, collCudaErrorName(r), collCudaErrorString(r));
    return -1;
  }
  return 0;
}

/* Sender: fills free slots with the next chunks of posted messages. */
static int p2pIssueSends(p2pComm* c) {
  int moved = 0;
  while (c->qWork < c->qPost) {
    uint64_t tail = atomic_load_explicit(&c->hdr->tail, memory_order_acquire);
    if (c->issued - tail >= COLL_P2P_NSLOTS) break; /* ring full */
    p2pReq* r = c->queue[c->qWork % COLL_P2P_MAX_REQUESTS];
    int s = (int)(c->issued % COLL_P2P_NSLOTS);
    size_t n = r->size - r->off < c->slotBytes ? r->size - r->off : c->slotBytes;
    p2pSlot* d = &c->hdr->slots[s];
    d->kind = r->off == 0 ? P2P_SLOT_FIRST : P2P_SLOT_CONT;
    d->msgLen = r->size;
    d->chunkLen = n;
    d->tag = r->tag;
    if (p2pCopy(c, s, c->ring + (CUdeviceptr)s * c->slotBytes, r->data + r->off, n) != 0) return -1;
    r->off += n;
    c->slotReq[s] = r;
    c->slotLast[s] = r->off == r->size;
    c->issued++;
    if (c->slotLast[s]) c->qWork++;
    moved = 1;
  }
  return moved;
}

/* Receiver: copies published slots out into the posted buffers. */
static int p2pIssueRecvs(p2pComm* c) {
  int moved = 0;
  while (c->qWork < c->qPost) {
    uint64_t head = atomic_load_explicit(&c->hdr->head, memory_order_acquire);
    if (c->issued >= head) break; /* nothing published */
    if (head - c->issued > COLL_P2P_NSLOTS) {
      p2pFail(c, collRemoteError, "p2p: the sender (process %d) published %llu slots ahead of a %d-slot ring",
              c->peerPid, (unsigned long long)(head - c->issued), COLL_P2P_NSLOTS);
      return -1;
    }
    int s = (int)(c->issued % COLL_P2P_NSLOTS);
    p2pSlot d = c->hdr->slots[s];
    p2pReq* r = c->queue[c->qWork % COLL_P2P_MAX_REQUESTS];
    if (!r->started) {
      if (d.kind != P2P_SLOT_FIRST) {
        p2pFail(c, collRemoteError, "p2p: the sender (process %d) broke the protocol (slot kind %u)", c->peerPid,
                d.kind);
        return -1;
      }
      if (d.msgLen > r->size) {
        p2pFail(c, collRemoteError,
                "p2p: peer sent %llu bytes, receiver posted %zu (process %d; ranks disagree on count, datatype "
                "or collective)",
                (unsigned long long)d.msgLen, r->size, c->peerPid);
        return -1;
      }
      r->started = 1;
      r->len = (size_t)d.msgLen;
      r->tag = d.tag;
    } else if (d.kind != P2P_SLOT_CONT) {
      p2pFail(c, collRemoteError, "p2p: the sender (process %d) broke the protocol (slot kind %u)", c->peerPid, d.kind);
      return -1;
    }
    if (d.chunkLen > c->slotBytes || d.chunkLen > r->len - r->off) {
      p2pFail(c, collRemoteError, "p2p: the sender (process %d) broke the protocol (chunk of %llu bytes)", c->peerPid,
              (unsigned long long)d.chunkLen);
      return -1;
    }
    if (p2pCopy(c, s, r->data + r->off, c->ring + (CUdeviceptr)s * c->slotBytes, (size_t)d.chunkLen) != 0) return -1;
    r->off += (size_t)d.chunkLen;
    c->slotReq[s] = r;
    c->slotLast[s] = r->off == r->len;
    c->issued++;
    if (c->slotLast[s]) c->qWork++;
    moved = 1;
  }
  return moved;
}

/* While waiting: is the peer still there? EOF on the socket means it closed
 * or died; that is an error only when this end still needs it. */
static void p2pCheckPeer(p2pComm* c) {
  double now = collTimeNow();
  if (now - c->lastCheck < P2P_CHECK_S) return;
  c->lastCheck = now;
  char b;
  ssize_t n = recv(c->sock, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  int gone = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
  int closed = atomic_load(c->isSend ? &c->hdr->recvClosed : &c->hdr->sendClosed) != P2P_OPEN;
  if (!gone && !closed) return;
  if (c->isSend) {
    if (c->qWork < c->qPost) /* data left to send and nobody to take it */
      p2pFail(c, collRemoteError, "p2p: the receiving process %d closed the connection or exited", c->peerPid);
  } else if (c->qWork < c->qPost && c->issued >= atomic_load(&c->hdr->head)) {
    p2pFail(c, collRemoteError, "p2p: the sending process %d closed the connection or exited", c->peerPid);
  }
}

collResult_t p2pTest(void* request, int* done, size_t* size, uint64_t* tag) {
  p2pReq* r = request;
  if (!r || !done || r->state == P2P_REQ_FREE || !r->comm)
    return collSetError(collInvalidArgument, "p2p test: NULL or already completed request");
  p2pComm* c = r->comm;
  *done = 0;
  if (c->err == collSuccess && r->state != P2P_REQ_DONE) {
    CUcontext prev = p2pEnterCtx(c->ctx);
    int a = p2pRetire(c);
    int b = a < 0 ? -1 : c->isSend ? p2pIssueSends(c) : p2pIssueRecvs(c);
    int d = b < 0 ? -1 : p2pRetire(c);
    p2pLeaveCtx(prev);
    if (a == 0 && b == 0 && d == 0) p2pCheckPeer(c);
  }
  if (r->state == P2P_REQ_DONE) {
    *done = 1;
    if (size) *size = r->len;
    if (tag) *tag = r->tag;
    r->state = P2P_REQ_FREE;
    return collSuccess;
  }
  if (c->err != collSuccess) {
    r->state = P2P_REQ_FREE; /* an error releases the request */
    return collSetError(c->err, "%s", c->errMsg);
  }
  return collSuccess;
}
#else
typedef int collNoP2pRing; /* built without CUDA: see p2p.c */
#endif
