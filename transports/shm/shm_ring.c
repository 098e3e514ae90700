/*
 * shm_ring.c - data path of the shm transport: the single-producer /
 * single-consumer slot ring, single copy (CMA), wake-ups and failures.
 *
 * Messages. A message below the sender's CMA threshold is copied into the
 * ring: its first slot is FIRST {msgLen, chunkLen}, the rest CONT; a zero-byte
 * message is one empty FIRST slot. A larger message is one CMA slot {msgLen,
 * addr}: the receiver reads the payload straight from the sender's buffer
 * with process_vm_readv (memcpy when both ends are one process), sets the
 * slot's status OK and releases the slot; that release is the sender's ack.
 * Several CMA descriptors may be in flight (up to the ring size), but the
 * sender never copies a message into the ring behind a descriptor still
 * unanswered. So when the receiver answers NACK (CMA not permitted: ptrace
 * rules, another pid namespace; whether to use CMA at all was agreed at
 * connect, shm_setup.c), it
 * answers NACK to every later descriptor too, keeps its receive posted, and
 * the sender, which turns CMA off for the connection, re-sends each NACKed
 * message through the ring in order: the k-th message the receiver accepts
 * is still the k-th one sent. A receiver whose posted size is too small
 * fails with collRemoteError without writing; for a CMA slot it answers
 * TOOBIG (with its posted size) so the sender fails too.
 *
 * A reducing receive (collShmIrecvReduce) is the same protocol: the
 * receiver only combines what it reads with its local input instead of
 * copying it, from the ring slot or, for a CMA slot, from pieces of the
 * sender's buffer read into a cache-sized bounce buffer.
 *
 * Requests complete in FIFO order per comm: the receiver moves only its
 * oldest unfinished request (as tcp.c); the sender walks its requests in
 * order and stops at the first that cannot move, except that one waiting for
 * its CMA answer lets later descriptors go out. Testing any request drives
 * all earlier ones; a later message never overtakes an earlier one.
 *
 * Waiting. The engine polls the fd getPollFd returns (shmArm): a receiver
 * POLLIN on dataFd (an eventfd the sender writes), a sender POLLOUT on
 * spaceFd, an eventfd kept at its maximum count (not writable) that the
 * receiver drains to make it writable. shmArm resets its eventfd, sets this
 * side's sleeping flag (seq_cst), then re-reads the peer's counter and closed
 * flag and wakes itself if they moved; the peer stores its counter (seq_cst),
 * then reads the flag and only makes the syscall when it is set. One of the
 * two always sees the other (store->load ordering of seq_cst), so no wake-up
 * is lost, and a peer that is not sleeping costs no syscall. test() clears
 * the flag and marks the eventfd stale: a wake-up that arrives late (from a
 * peer that read the flag just before we cleared it) causes at most one
 * spurious return of poll, never a busy loop.
 *
 * Failures. A peer that closes marks its closed flag and wakes us; a peer
 * that dies closes its end of the AF_UNIX socket kept per connection, which
 * an idle side checks every SHM_CHECK_S. Both become collRemoteError. A comm
 * that fails marks itself SHM_FAILED so the peer stops waiting on it.
 */
#include "transports/shm/shm_internal.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "misc/log.h"
#include "misc/socket.h"

#define N COLL_SHM_NSLOTS

static atomic_int shmCmaLogged; /* bit 0: "enabled" logged, bit 1: "disabled" logged */

/* Logs the process's CMA state once per kind (COLL_DEBUG=INFO). */
static void shmCmaLog(int enabled, const char* why) {
  int bit = enabled ? 1 : 2;
  if (atomic_fetch_or(&shmCmaLogged, bit) & bit) return;
  COLL_INFO(COLL_SUB_NET, "shm: single-copy (CMA) %s: %s", enabled ? "enabled" : "disabled", why);
}

/* Records the sticky failure of c, marks it failed in the shared header and
 * wakes the peer so it does not wait on us. Returns -1 for the advance loops. */
__attribute__((format(printf, 3, 4)))
static int shmFail(shmComm* c, collResult_t code, const char* fmt, ...) {
  if (c->err != collSuccess) return -1; /* keep the first cause */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->errMsg, sizeof c->errMsg, fmt, ap);
  va_end(ap);
  c->err = code;
  atomic_store(c->isSend ? &c->hdr->sendClosed : &c->hdr->recvClosed, SHM_FAILED);
  uint64_t v = 1;
  if (c->isSend) {
    if (write(c->dataFd, &v, sizeof v) < 0) { /* full or gone: the peer is awake anyway */ }
  } else {
    if (read(c->spaceFd, &v, sizeof v) < 0) { /* already drained */ }
  }
  return -1;
}

/* Sender: makes head = c->mine visible, then wakes a sleeping receiver. */
static void shmPublish(shmComm* c) {
  atomic_store(&c->hdr->head, ++c->mine);
  if (atomic_load(&c->hdr->recvSleeping)) {
    uint64_t one = 1;
    if (write(c->dataFd, &one, sizeof one) < 0) { /* count saturated: still readable */ }
  }
}

/* Receiver: releases the slot at tail, then wakes a sleeping sender. */
static void shmRelease(shmComm* c) {
  atomic_store(&c->hdr->tail, ++c->mine);
  if (atomic_load(&c->hdr->sendSleeping)) {
    uint64_t v;
    if (read(c->spaceFd, &v, sizeof v) < 0) { /* already writable */ }
  }
}

/* 1 if the peer's end of the connection socket is gone (EOF or error). */
static int shmPeerGone(shmComm* c) {
  struct pollfd p = {c->sock, POLLIN, 0};
  if (poll(&p, 1, 0) <= 0) return 0;
  char b;
  ssize_t n = recv(c->sock, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* Receiver: did the sender publish since c->peer was loaded? A sender may
 * publish, close and exit between the caller's look at the ring and the
 * checks below; what it published is still delivered. */
static int shmNewData(shmComm* c) { return !c->isSend && atomic_load(&c->hdr->head) != c->peer; }

int shmPeerRejected(shmComm* c, char* why, size_t whySize) {
  shmNak nak;
  ssize_t n = recv(c->sock, &nak, sizeof nak, MSG_PEEK | MSG_DONTWAIT);
  if (n != (ssize_t)sizeof nak || nak.magic != SHM_NAK_MAGIC) return 0;
  snprintf(why, whySize,
           "shm: process %d rejected this shared-memory connection: it could not receive the connection's "
           "descriptors: %s (raise the open-file limit, ulimit -n, of that process)",
           (int)nak.pid, strerror(nak.err));
  return 1;
}

/* Called when the head request cannot move: turns a closed, failed, dead or
 * rejecting peer into collRemoteError. Returns 0 (keep waiting) or -1. */
static int shmBlocked(shmComm* c) {
  uint32_t closed = atomic_load(c->isSend ? &c->hdr->recvClosed : &c->hdr->sendClosed);
  if (closed != SHM_OPEN && !shmNewData(c))
    return shmFail(c, collRemoteError, "shm: peer process %d %s the shared-memory connection", c->peerPid,
                   closed == SHM_FAILED ? "failed and closed" : "closed");
  if (closed != SHM_OPEN) return 0; /* the caller reads what came first */
  double now = collTimeNow();
  if (now - c->lastCheck < SHM_CHECK_S) return 0;
  c->lastCheck = now;
  char why[sizeof c->errMsg];
  if (c->isSend && shmPeerRejected(c, why, sizeof why)) return shmFail(c, collRemoteError, "%s", why);
  if (shmPeerGone(c) && !shmNewData(c))
    return shmFail(c, collRemoteError, "shm: peer process %d closed the shared-memory connection (process exited?)",
                   c->peerPid);
  return 0;
}

/* Sender: reloads tail and records the receiver's answer to every CMA
 * descriptor it passed (before the slot can be reused). Returns -1 if the
 * counter makes no sense (corrupt segment). */
static int shmLoadTail(shmComm* c) {
  uint64_t t = atomic_load_explicit(&c->hdr->tail, memory_order_acquire);
  if (t < c->peer || t > c->mine)
    return shmFail(c, collRemoteError, "shm: corrupt ring from process %d (tail %llu, head %llu)", c->peerPid,
                   (unsigned long long)t, (unsigned long long)c->mine);
  for (uint64_t i = c->peer; i < t; i++) {
    shmReq* o = c->slotOwner[i % N];
    if (o) {
      o->cmaStatus = c->hdr->slots[i % N].status;
      o->cmaPosted = (size_t)c->hdr->slots[i % N].chunkLen;
      c->slotOwner[i % N] = NULL;
    }
  }
  c->peer = t;
  return 0;
}

/* Sender: the descriptor of the next free slot, or NULL if the ring is full
 * (or the segment is corrupt: c->err is then set). */
static shmSlot* shmFreeSlot(shmComm* c) {
  if (c->mine - c->peer >= N && (shmLoadTail(c) < 0 || c->mine - c->peer >= N)) return NULL;
  return &c->hdr->slots[c->mine % N];
}

/* Sender: moves request r. canCopy is 0 while an earlier request waits for
 * the answer to its CMA descriptor: nothing may be copied into the ring
 * behind it (see the file header). Returns 1 done, 2 waiting for the answer
 * to its own descriptor (later requests may go on), 0 blocked, -1 failed. */
static int shmSendAdvance(shmComm* c, shmReq* r, int canCopy) {
  for (;;) {
    if (c->err != collSuccess) return -1;
    if (r->phase == SHM_PH_NEW) {
      if (atomic_load_explicit(&c->hdr->recvClosed, memory_order_relaxed) != SHM_OPEN) return shmBlocked(c);
      r->phase = c->cmaOn && c->cmaThreshold > 0 && r->len >= c->cmaThreshold ? SHM_PH_CMA : SHM_PH_COPY;
    } else if (r->phase == SHM_PH_CMA) {
      shmSlot* s = shmFreeSlot(c);
      if (!s) return shmBlocked(c);
      *s = (shmSlot){.kind = SHM_SLOT_CMA, .status = SHM_CMA_PENDING, .msgLen = r->len,
                     .addr = (uint64_t)(uintptr_t)r->data, .tag = r->tag};
      r->cmaStatus = SHM_CMA_PENDING;
      c->slotOwner[c->mine % N] = r;
      shmPublish(c);
      r->phase = SHM_PH_CMA_WAIT;
    } else if (r->phase == SHM_PH_CMA_WAIT) {
      if (r->cmaStatus == SHM_CMA_PENDING && shmLoadTail(c) < 0) return -1;
      if (r->cmaStatus == SHM_CMA_PENDING) return shmBlocked(c) < 0 ? -1 : 2;
      if (r->cmaStatus == SHM_CMA_OK) {
        c->cmaMsgs++;
        r->phase = SHM_PH_DONE;
        return 1;
      }
      if (r->cmaStatus == SHM_CMA_TOOBIG)
        return shmFail(c, collRemoteError, "shm: peer process %d posted a %zu-byte receive for a %zu-byte message",
                       c->peerPid, r->cmaPosted, r->len);
      if (r->cmaStatus != SHM_CMA_NACK)
        return shmFail(c, collRemoteError, "shm: peer process %d answered a single-copy message with status %u",
                       c->peerPid, (unsigned)r->cmaStatus);
      c->cmaOn = 0; /* NACK: the receiver cannot read our memory; copy from now on */
      r->phase = SHM_PH_COPY;
    } else if (r->phase == SHM_PH_COPY) {
      if (!canCopy) return 0;
      while (!r->started || r->off < r->len) {
        shmSlot* s = shmFreeSlot(c);
        if (!s) return shmBlocked(c);
        size_t n = r->len - r->off < c->slotBytes ? r->len - r->off : c->slotBytes;
        *s = (shmSlot){.kind = r->started ? SHM_SLOT_CONT : SHM_SLOT_FIRST, .msgLen = r->len, .chunkLen = n,
                       .tag = r->tag};
        if (n) memcpy(c->data + (c->mine % N) * c->slotBytes, r->data + r->off, n);
        shmPublish(c);
        r->off += n;
        r->started = 1;
      }
      c->copyMsgs++;
      r->phase = SHM_PH_DONE;
      return 1;
    } else { /* SHM_PH_DONE: answered while an earlier answer was not yet read */
      return 1;
    }
  }
}

/* Sender: walks the requests in FIFO order. Done requests complete in
 * order; a request waiting for its CMA answer lets later ones publish their
 * descriptors (so several single-copy messages are in flight) but no copy. */
static void shmSendProgress(shmComm* c) {
  int canCopy = 1;
  for (uint64_t j = c->progressed; j < c->posted && c->err == collSuccess; j++) {
    shmReq* r = &c->reqs[j % COLL_SHM_MAX_REQUESTS];
    int k = shmSendAdvance(c, r, canCopy);
    if (k == 1 && j == c->progressed) {
      r->state = SHM_REQ_DONE;
      c->progressed++;
    } else if (k == 2) {
      canCopy = 0;
    } else {
      return; /* blocked, failed, or done behind an unfinished one (marked on a later pass) */
    }
  }
}

/* Receiver: reads len bytes at the sender's addr into dst. Returns 0 or an
 * errno value. */
static int shmCmaRead(shmComm* c, char* dst, uint64_t addr, size_t len) {
  if (c->peerPid == (int)getpid()) { /* one process (threads): plain copy */
    if (len) memcpy(dst, (const void*)(uintptr_t)addr, len);
    return 0;
  }
  if (c->peerPid <= 0) return ESRCH;
  return collShmCmaCopy(c->peerPid, dst, addr, len);
}

/* Receiver of a reducing receive: r->data = reduce(the sender's bytes at
 * addr, r->local), read SHM_RR_PIECE at a time into c->bounce (the sender's
 * own memory when both ends are one process). Returns 0, an errno value of
 * the first piece (nothing written yet: the caller may answer NACK), or -1
 * (failed: a later piece could not be read, or no bounce buffer). */
static int shmCmaReduce(shmComm* c, shmReq* r, uint64_t addr) {
  if (c->peerPid == (int)getpid()) {
    if (r->len) r->reduce(r->data, (const void*)(uintptr_t)addr, r->local, r->len / r->esize);
    return 0;
  }
  if (c->peerPid <= 0) return ESRCH;
  if (!c->bounce && !(c->bounce = malloc(SHM_RR_PIECE)))
    return shmFail(c, collSystemError, "shm: no memory for a %zu-byte bounce buffer", SHM_RR_PIECE);
  size_t piece = SHM_RR_PIECE - SHM_RR_PIECE % r->esize;
  for (size_t off = 0; off < r->len; off += piece) {
    size_t n = r->len - off < piece ? r->len - off : piece;
    int e = collShmCmaCopy(c->peerPid, c->bounce, addr + off, n);
    if (e && off == 0) return e;
    if (e)
      return shmFail(c, collRemoteError, "shm: reading from process %d failed during a transfer: %s", c->peerPid,
                     strerror(e));
    r->reduce(r->data + off, c->bounce, r->local + off, n / r->esize);
  }
  return 0;
}

/* Receiver: handles the CMA slot s of request r (already size-checked).
 * Returns 1 done, 0 to go on with the ring (NACK sent), -1 failed. */
static int shmRecvCma(shmComm* c, shmReq* r, shmSlot* s, uint64_t addr) {
  char why[160];
  int e = r->reduce ? shmCmaReduce(c, r, addr) : shmCmaRead(c, r->data, addr, r->len);
  if (e < 0) return -1;
  if (e == 0) {
    if (atomic_load(&c->hdr->sendClosed) != SHM_OPEN) /* its buffer may be gone: do not trust the bytes */
      return shmFail(c, collRemoteError, "shm: peer process %d closed the shared-memory connection during a transfer",
                     c->peerPid);
    if (c->peerPid != (int)getpid()) {
      if (shmPeerGone(c)) /* the pid may have been reused by now: the bytes could be anyone's */
        return shmFail(c, collRemoteError, "shm: peer process %d exited during a transfer", c->peerPid);
      snprintf(why, sizeof why, "process_vm_readv from process %d works", c->peerPid);
      shmCmaLog(1, why);
    }
    s->status = SHM_CMA_OK;
    shmRelease(c);
    c->cmaMsgs++;
    c->reduceMsgs += r->reduce != NULL;
    return 1;
  }
  if (e == ESRCH && c->peerPid > 0)
    return shmFail(c, collRemoteError, "shm: peer process %d exited during a transfer", c->peerPid);
  if (c->peerPid <= 0) snprintf(why, sizeof why, "the sender is in another pid namespace");
  else snprintf(why, sizeof why, "process_vm_readv from process %d failed: %s; large messages are copied through "
                "the ring", c->peerPid, strerror(e));
  shmCmaLog(0, why);
  c->cmaOn = 0;             /* for good: every later descriptor gets NACK too */
  s->status = SHM_CMA_NACK; /* the sender re-sends this message by copy */
  shmRelease(c);
  r->started = 0;
  return 0;
}

/* Receiver: moves request r. Returns 1 done, 0 blocked, -1 failed. */
static int shmRecvAdvance(shmComm* c, shmReq* r) {
  shmHdr* h = c->hdr;
  for (;;) {
    if (c->mine == c->peer) {
      c->peer = atomic_load(&h->head);
      if (c->mine == c->peer) {
        if (atomic_load(&h->sendClosed) == SHM_OPEN) return shmBlocked(c);
        c->peer = atomic_load(&h->head); /* messages published before the close are still delivered */
        if (c->mine == c->peer) return shmBlocked(c);
      }
    }
    if (c->peer - c->mine > N)
      return shmFail(c, collRemoteError, "shm: corrupt ring from process %d (head %llu, tail %llu)", c->peerPid,
                     (unsigned long long)c->peer, (unsigned long long)c->mine);
    shmSlot* s = &h->slots[c->mine % N];
    uint32_t kind = s->kind;
    uint64_t msgLen = s->msgLen, chunk = s->chunkLen, addr = s->addr, tag = s->tag;
    if (!r->started) {
      if (kind != SHM_SLOT_FIRST && kind != SHM_SLOT_CMA)
        return shmFail(c, collRemoteError, "shm: corrupt ring from process %d (slot kind %u at a message start)",
                       c->peerPid, (unsigned)kind);
      if (kind == SHM_SLOT_CMA && !c->cmaOn) { /* NACK: it comes again by copy (sizes are checked then) */
        s->status = SHM_CMA_NACK;
        shmRelease(c);
        continue;
      }
      if (msgLen > r->size) {
        c->errTag = tag;
        if (kind == SHM_SLOT_CMA) {
          s->chunkLen = r->size;
          s->status = SHM_CMA_TOOBIG;
          shmRelease(c);
        }
        return shmFail(c, collRemoteError, "shm: message from process %d: peer sent %llu bytes, receiver posted %zu",
                       c->peerPid, (unsigned long long)msgLen, r->size);
      }
      if (r->reduce && msgLen % r->esize)
        return shmFail(c, collRemoteError, "shm: message from process %d: %llu bytes, not whole %zu-byte elements",
                       c->peerPid, (unsigned long long)msgLen, r->esize);
      r->len = (size_t)msgLen;
      r->off = 0;
      r->tag = tag;
      r->started = 1;
      if (kind == SHM_SLOT_CMA) {
        int k = shmRecvCma(c, r, s, addr);
        if (k != 0) return k;
        continue;
      }
    } else if (kind != SHM_SLOT_CONT) {
      return shmFail(c, collRemoteError, "shm: corrupt ring from process %d (slot kind %u inside a message)",
                     c->peerPid, (unsigned)kind);
    }
    if (chunk > c->slotBytes || chunk > r->len - r->off || (chunk == 0 && r->len > 0))
      return shmFail(c, collRemoteError, "shm: corrupt ring from process %d (chunk of %llu bytes)", c->peerPid,
                     (unsigned long long)chunk);
    const char* slot = c->data + (c->mine % N) * c->slotBytes;
    if (r->reduce && chunk % r->esize)
      return shmFail(c, collRemoteError, "shm: corrupt ring from process %d (chunk of %llu bytes, %zu-byte elements)",
                     c->peerPid, (unsigned long long)chunk, r->esize);
    if (chunk && r->reduce) r->reduce(r->data + r->off, slot, r->local + r->off, (size_t)chunk / r->esize);
    else if (chunk) memcpy(r->data + r->off, slot, (size_t)chunk);
    r->off += (size_t)chunk;
    shmRelease(c);
    if (r->off == r->len) {
      c->copyMsgs++;
      c->reduceMsgs += r->reduce != NULL;
      return 1;
    }
  }
}

/* Advances the requests of c in FIFO order until one cannot move. */
static void shmProgress(shmComm* c) {
  if (c->isSend) {
    shmSendProgress(c);
    return;
  }
  while (c->err == collSuccess && c->progressed < c->posted) {
    shmReq* r = &c->reqs[c->progressed % COLL_SHM_MAX_REQUESTS];
    if (shmRecvAdvance(c, r) <= 0) return;
    r->state = SHM_REQ_DONE;
    c->progressed++;
  }
}

/* isend/irecv: queues a request on c and starts it (see shm_internal.h). */
collResult_t shmPost(shmComm* c, int isSend, void* data, size_t size, uint64_t tag, collShmReduceFn reduce,
                     const void* local, size_t esize, void** request) {
  const char* what = isSend ? "isend" : "irecv";
  if (!c || !request || (!data && size > 0))
    return collSetError(collInvalidArgument, "shm %s: NULL comm, request or buffer", what);
  if (c->tag != SHM_TAG_COMM)
    return collSetError(collInvalidArgument, "shm %s: not a send/recv comm of the shm transport", what);
  if (c->isSend != isSend)
    return collSetError(collInvalidUsage, "shm %s on a %s comm", what, c->isSend ? "send" : "recv");
  *request = NULL;
  if (c->err != collSuccess) return collSetError(c->err, "%s", c->errMsg);
  shmReq* r = &c->reqs[c->posted % COLL_SHM_MAX_REQUESTS];
  if (r->state != SHM_REQ_FREE) return collSuccess; /* pool exhausted: retry */
  if (reduce && isSend) return collSetError(collInvalidUsage, "shm: a reducing receive on a send comm");
  *r = (shmReq){.comm = c, .state = SHM_REQ_ACTIVE, .data = data, .size = size, .len = isSend ? size : 0,
                .tag = isSend ? tag : 0, .reduce = reduce, .local = local, .esize = esize};
  c->posted++;
  shmProgress(c); /* eager start; failures surface in test */
  *request = r;
  return collSuccess;
}

/* test: wakes up (clears the sleeping flag), drives the FIFO, reports. */
collResult_t shmTest(void* request, int* done, size_t* size, uint64_t* tag) {
  shmReq* r = request;
  if (!r || !done || r->state == SHM_REQ_FREE)
    return collSetError(collInvalidArgument, "shm test: NULL or released request");
  shmComm* c = r->comm;
  *done = 0;
  if (c->armed) { /* awake again: the peer need not make syscalls for us */
    atomic_store_explicit(c->isSend ? &c->hdr->sendSleeping : &c->hdr->recvSleeping, 0, memory_order_relaxed);
    c->armed = 0;
    c->stale = 1;
  }
  shmProgress(c);
  if (r->state == SHM_REQ_DONE) {
    *done = 1;
    if (size) *size = r->len;
    if (tag) *tag = r->tag;
    r->state = SHM_REQ_FREE;
    return collSuccess;
  }
  if (c->err != collSuccess) {
    r->state = SHM_REQ_FREE;
    if (tag && c->errTag) *tag = c->errTag;
    return collSetError(c->err, "%s", c->errMsg);
  }
  return collSuccess;
}

/* getPollFd of a send/recv comm: resets a stale eventfd, sets the sleeping
 * flag, and wakes itself when the peer moved meanwhile (file header). */
int shmArm(shmComm* c) {
  shmHdr* h = c->hdr;
  uint64_t v;
  if (c->isSend) {
    if (!c->armed) {
      if (c->stale) { /* re-prime: at the full count the eventfd is not writable */
        v = SHM_EFD_FULL;
        if (write(c->spaceFd, &v, sizeof v) < 0) { /* EAGAIN: already full */ }
        c->stale = 0;
      }
      atomic_store(&h->sendSleeping, 1);
      c->armed = 1;
    }
    if (atomic_load(&h->tail) != c->peer || atomic_load(&h->recvClosed) != SHM_OPEN || c->err != collSuccess) {
      if (read(c->spaceFd, &v, sizeof v) < 0) { /* already writable */ }
    }
    return c->spaceFd;
  }
  if (!c->armed) {
    if (c->stale) { /* drain */
      if (read(c->dataFd, &v, sizeof v) < 0) { /* EAGAIN: nothing to drain */ }
      c->stale = 0;
    }
    atomic_store(&h->recvSleeping, 1);
    c->armed = 1;
  }
  if (atomic_load(&h->head) != c->peer || atomic_load(&h->sendClosed) != SHM_OPEN || c->err != collSuccess) {
    v = 1;
    if (write(c->dataFd, &v, sizeof v) < 0) { /* saturated: readable anyway */ }
  }
  return c->dataFd;
}

/* close: tells the peer (closed flag + an unconditional wake-up). */
void shmMarkClosed(shmComm* c) {
  shmHdr* h = c->hdr;
  uint64_t v = 1;
  if (c->isSend) {
    uint32_t open = SHM_OPEN;
    atomic_compare_exchange_strong(&h->sendClosed, &open, SHM_CLOSED);
    if (write(c->dataFd, &v, sizeof v) < 0) { /* readable anyway */ }
  } else {
    uint32_t open = SHM_OPEN;
    atomic_compare_exchange_strong(&h->recvClosed, &open, SHM_CLOSED);
    if (read(c->spaceFd, &v, sizeof v) < 0) { /* writable anyway */ }
  }
}
