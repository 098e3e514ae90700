/*
 * enqueue.c - the collective and point-to-point entry points: argument
 * checks (each failure names the argument and its value), group handling,
 * and hand-off to collSubmit.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/devcall.h"
#include "core/memcheck.h"
#include "misc/log.h"
#include "reduce/reduce.h"
#include "tuner/tuner.h"

/* ---- deadlines ------------------------------------------------------------
 * An operation takes its deadline when it is issued: the communicator's
 * timeout (collCommSetTimeout, COLL_TIMEOUT) or, for the next launch after
 * collCommSetCallTimeout, that one (consumed by it). A later change of the
 * communicator's timeout leaves issued operations as they are. */
static void collTakeTimeout(collComm_t comm, collOp* op) {
  op->timeoutSec = __atomic_load_n(&comm->timeoutSec, __ATOMIC_ACQUIRE);
  op->timeoutPerCall = 0;
}

/* Applies a pending collCommSetCallTimeout to the n ops of one launch. */
static void collTakeCallTimeout(collComm_t comm, collOp* ops, int n) {
  if (__atomic_load_n(&comm->callTimeoutMs, __ATOMIC_ACQUIRE) < 0) return;
  int ms = __atomic_exchange_n(&comm->callTimeoutMs, -1, __ATOMIC_ACQ_REL);
  for (int i = 0; ms >= 0 && i < n; i++) {
    ops[i].timeoutSec = ms * 1e-3;
    ops[i].timeoutPerCall = 1;
  }
}

/* ---- groups (thread-local) --------------------------------------------- */
typedef struct {
  collComm_t comm;
  collStream_t stream;
  collOp op;
} collGroupItem;

static _Thread_local int collGroupDepth;
static _Thread_local collGroupItem* collGroupItems;
static _Thread_local int collGroupN, collGroupCap;
static _Thread_local collResult_t collGroupError;
static _Thread_local char collGroupErrorMsg[512];

/* A call that fails inside a group fails the whole group: collGroupEnd
 * launches none of it and returns the first such error (as NCCL's
 * ncclGroupEnd), instead of running the rest while this rank's part of
 * it is missing (its peers would wait for it until their timeout). */
static collResult_t collGroupNoteError(collResult_t r) {
  if (r != collSuccess && collGroupDepth > 0 && collGroupError == collSuccess) {
    collGroupError = r;
    snprintf(collGroupErrorMsg, sizeof collGroupErrorMsg, "%s", collLastErrorMessage());
  }
  return r;
}

collResult_t collGroupStartImpl(void) {
  if (collGroupDepth == 0) collGroupError = collSuccess;
  collGroupDepth++;
  return collSuccess;
}

static collResult_t collGroupAdd(collComm_t comm, collStream_t stream, const collOp* op) {
  if (collGroupN == collGroupCap) {
    int ncap = collGroupCap ? collGroupCap * 2 : 16;
    collGroupItem* n = realloc(collGroupItems, sizeof(*n) * (size_t)ncap);
    if (!n) return collSetError(collSystemError, "collGroupEnd: out of memory");
    collGroupItems = n;
    collGroupCap = ncap;
  }
  collGroupItems[collGroupN++] = (collGroupItem){comm, stream, *op};
  return collSuccess;
}

/* 1 when the group's operations use more than one communicator. */
static int collGroupMultiComm(void) {
  for (int i = 1; i < collGroupN; i++)
    if (collGroupItems[i].comm != collGroupItems[0].comm) return 1;
  return 0;
}

/* Waits for and frees a private stream of collGroupEnd; names the
 * communicator's rank in the error. */
static collResult_t collGroupWait(collStream_t s) {
  collComm_t comm = s->comm;
  int rank = comm->rank, nranks = comm->nranks;
  collResult_t r = collStreamDestroy(s);
  if (r != collSuccess)
    r = collSetError(r, "collGroupEnd: the operations on the communicator where this is rank %d of %d failed: %s",
                     rank, nranks, comm->asyncMsg[0] ? comm->asyncMsg : collGetErrorString(r));
  return r;
}

typedef struct {
  uintptr_t lo, hi;
  int op;
} collRange;

static int collRangeCmp(const void* a, const void* b) {
  uintptr_t x = ((const collRange*)a)->lo, y = ((const collRange*)b)->lo;
  return x < y ? -1 : x > y;
}

/* A send and a receive of one group (an all-to-all) whose buffers partly
 * overlap (neither disjoint nor the same range) are collInvalidArgument:
 * the receive could overwrite data the send has yet to read. Sorted
 * receives and a binary search per send: O(n log n). */
static collResult_t collGroupCheckOverlap(collComm_t comm, const collOp* ops, int n) {
  int nr = 0;
  for (int i = 0; i < n; i++) nr += ops[i].fn == COLL_FN_RECV && ops[i].count > 0;
  if (nr == 0) return collSuccess;
  collRange* rv = malloc(sizeof *rv * (size_t)nr);
  if (!rv) return collSetError(collSystemError, "collGroupEnd: out of memory");
  nr = 0;
  for (int i = 0; i < n; i++)
    if (ops[i].fn == COLL_FN_RECV && ops[i].count > 0) {
      uintptr_t lo = (uintptr_t)ops[i].recvbuff;
      rv[nr++] = (collRange){lo, lo + ops[i].count * collTypeSize(ops[i].dtype), i};
    }
  qsort(rv, (size_t)nr, sizeof *rv, collRangeCmp);
  collResult_t r = collSuccess;
  for (int i = 0; i < n && r == collSuccess; i++) {
    if (ops[i].fn != COLL_FN_SEND || ops[i].count == 0) continue;
    uintptr_t lo = (uintptr_t)ops[i].sendbuff, hi = lo + ops[i].count * collTypeSize(ops[i].dtype);
    int a = 0, b = nr; /* first receive starting at or after lo */
    while (a < b) {
      int m = (a + b) / 2;
      if (rv[m].lo < lo) a = m + 1;
      else b = m;
    }
    for (int k = a - 1; k <= a && r == collSuccess; k++) {
      /* the same range is allowed: the engine sends from a copy (p2p.c) */
      if (k < 0 || k >= nr || rv[k].hi <= lo || rv[k].lo >= hi || (rv[k].lo == lo && rv[k].hi == hi)) continue;
      const collOp* q = &ops[rv[k].op];
      r = collSetError(collInvalidArgument,
                       "collGroupEnd: rank %d: the send to rank %d [%p, %p) and the receive from rank %d [%p, %p) of "
                       "one group partly overlap: a group's receives must not write what its sends read (the very same "
                       "range is allowed: that send goes from a copy)",
                       comm->rank, ops[i].peer, (void*)lo, (void*)hi, q->peer, (void*)rv[k].lo, (void*)rv[k].hi);
    }
  }
  free(rv);
  return r;
}

/* Launches the group's operations: per communicator (in order of first use),
 * its operations in issue order, all on the first operation's stream.
 * Communicators of one group progress concurrently, as in NCCL: when the
 * group spans several, the blocking (NULL-stream) ones are queued on a
 * private stream each (run by that communicator's progress thread) and
 * collGroupEnd waits for all of them. One after another, a send on one
 * communicator could wait for a receive that its peer posts only on a
 * communicator it runs later (BR-33: a single-copy send, or one larger than
 * the ring, completes only once the receiver has read it). */
collResult_t collGroupEndImpl(void) {
  if (collGroupDepth == 0)
    return collSetError(collInvalidUsage, "collGroupEnd: no matching collGroupStart on this thread");
  if (--collGroupDepth > 0) return collSuccess;
  collResult_t result = collGroupError;
  if (result != collSuccess)
    result = collSetError(result, "collGroupEnd: nothing of the group was launched: a call inside it failed: %s",
                          collGroupErrorMsg);
  collOp* ops = malloc(sizeof(collOp) * (size_t)(collGroupN ? collGroupN : 1));
  collStream_t* streams = malloc(sizeof *streams * (size_t)(collGroupN ? collGroupN : 1));
  int concurrent = collGroupMultiComm(), ntemp = 0;
  collStream_t* temp = concurrent ? calloc((size_t)collGroupN, sizeof *temp) : NULL;
  if (!ops || !streams || (concurrent && !temp)) result = collSetError(collSystemError, "collGroupEnd: out of memory");
  for (int i = 0; i < collGroupN && result == collSuccess; i++) {
    collComm_t comm = collGroupItems[i].comm;
    if (!comm) continue;
    collStream_t stream = collGroupItems[i].stream;
    int n = 0, nstreams = 1;
    streams[0] = stream;
    for (int j = i; j < collGroupN; j++) {
      if (collGroupItems[j].comm != comm) continue;
      collStream_t sj = collGroupItems[j].stream;
      if (sj != stream) {
        /* one communicator's calls may use several CUDA streams (ordered on each) */
        if (!stream || !sj || !stream->cuda || !sj->cuda) {
          result = collSetError(collInvalidUsage,
                                "collGroupEnd: operations of one communicator use different streams (only streams of "
                                "collStreamCreateCuda may differ)");
          break;
        }
        int seen = 0;
        for (int k = 0; k < nstreams; k++) seen |= streams[k] == sj;
        if (!seen) streams[nstreams++] = sj;
      }
      ops[n++] = collGroupItems[j].op;
      collGroupItems[j].comm = NULL;
    }
    if (result != collSuccess || (result = collGroupCheckOverlap(comm, ops, n)) != collSuccess) break;
    result = collCommEnterIssue(comm, "collGroupEnd");
    if (result != collSuccess) break;
    collTakeCallTimeout(comm, ops, n);
    /* blocking device calls are ordered after the legacy default stream */
    if (concurrent && !stream && collDevOpsOnDevice(ops, n)) result = collDevSyncLegacy(comm, ops, n);
    if (result == collSuccess && concurrent && !stream &&
        (result = collStreamCreate(comm, &temp[ntemp])) == collSuccess)
      stream = temp[ntemp++];
    if (result == collSuccess && stream) streams[0] = stream;
    if (result == collSuccess) result = collSubmitStreams(comm, streams, stream ? nstreams : 0, ops, n);
    collCommLeaveIssue(comm);
  }
  /* whatever was queued runs on the caller's buffers: wait for it, error or not */
  for (int k = 0; k < ntemp; k++) {
    collResult_t r = collGroupWait(temp[k]);
    if (result == collSuccess) result = r;
  }
  free(temp);
  free(streams);
  free(ops);
  free(collGroupItems); /* thread-local: free it now, threads may exit */
  collGroupItems = NULL;
  collGroupN = collGroupCap = 0;
  return result;
}

/* ---- argument checks ----------------------------------------------------- */
static collResult_t collCheckType(collDataType_t t, const char* fn) {
  if ((int)t < 0 || t >= collNumTypes)
    return collSetError(collInvalidArgument, "%s: datatype %d is not a collDataType_t", fn, (int)t);
  return collSuccess;
}

static collResult_t collCheckOp(collRedOp_t op, const char* fn) {
  if ((int)op < 0 || op >= collNumOps)
    return collSetError(collInvalidArgument, "%s: op %d is not a collRedOp_t", fn, (int)op);
  return collSuccess;
}

static collResult_t collCheckBuf(const void* p, size_t count, size_t mult, collDataType_t t, const char* name,
                                 const char* fn) {
  size_t es = collTypeSize(t);
  if (count > SIZE_MAX / es / (mult ? mult : 1))
    return collSetError(collInvalidArgument, "%s: count %zu x %zu x %zu-byte elements overflows size_t", fn, count,
                        mult, es);
  if (!p && count > 0) return collSetError(collInvalidArgument, "%s: %s is NULL with count %zu", fn, name, count);
  return collSuccess;
}

static collResult_t collCheckRank(collComm_t comm, int r, const char* what, const char* fn) {
  if (r < 0 || r >= comm->nranks)
    return collSetError(collInvalidArgument, "%s: %s %d is out of range [0, %d)", fn, what, r, comm->nranks);
  return collSuccess;
}

/* sendbuff and recvbuff either the documented in-place alias or disjoint:
 * a partial overlap would let the call read data it already overwrote.
 * In place: the same address (all-reduce, broadcast, reduce); sendbuff ==
 * recvbuff + rank*count (all-gather); recvbuff == sendbuff + rank*count
 * (reduce-scatter). Only the buffers this rank uses are compared. */
static collResult_t collCheckOverlap(collComm_t comm, const collOp* op, int sendUsed, int recvUsed, size_t sendMult,
                                     size_t recvMult, const char* fn) {
  if (!sendUsed || !recvUsed || op->count == 0 || op->fn == COLL_FN_SEND || op->fn == COLL_FN_RECV) return collSuccess;
  size_t es = collTypeSize(op->dtype);
  uintptr_t s = (uintptr_t)op->sendbuff, r = (uintptr_t)op->recvbuff;
  size_t sb = op->count * sendMult * es, rb = op->count * recvMult * es, me = (size_t)comm->rank * op->count * es;
  const char* rule = "sendbuff == recvbuff";
  int inPlace = s == r;
  if (op->fn == COLL_FN_ALLGATHER) {
    rule = "sendbuff == recvbuff + rank*sendcount";
    inPlace = s == r + me;
  } else if (op->fn == COLL_FN_REDUCESCATTER) {
    rule = "recvbuff == sendbuff + rank*recvcount";
    inPlace = r == s + me;
  }
  if (inPlace) return collSuccess;
  if (s >= r + rb || r >= s + sb) return collSuccess;
  return collSetError(collInvalidArgument,
                      "%s: sendbuff [%p, %p) and recvbuff [%p, %p) partly overlap (%zu and %zu bytes, rank %d): the "
                      "buffers must be disjoint, or in place exactly (%s)",
                      fn, (void*)s, (void*)(s + sb), (void*)r, (void*)(r + rb), sb, rb, comm->rank, rule);
}

/* Checks the common arguments, then runs or groups op. */
static collResult_t collIssue(collComm_t comm, collStream_t stream, collOp* op, const char* fn, size_t sendMult,
                              size_t recvMult, int needsOp, int recvOnRootOnly) {
  collClearError();
  collResult_t r = collCommEnterIssue(comm, fn);
  if (r != collSuccess) return collGroupNoteError(r);
  collTakeTimeout(comm, op);
  if ((r = collCheckType(op->dtype, fn)) || (needsOp && (r = collCheckOp(op->op, fn))) ||
      (r = collStreamCheckUse(comm, stream, fn)))
    goto out;
  if ((op->fn == COLL_FN_BROADCAST || op->fn == COLL_FN_REDUCE) && (r = collCheckRank(comm, op->root, "root", fn)))
    goto out;
  if ((op->fn == COLL_FN_SEND || op->fn == COLL_FN_RECV) && (r = collCheckRank(comm, op->peer, "peer", fn))) goto out;
  int sendUsed = sendMult && (op->fn != COLL_FN_BROADCAST || comm->rank == op->root);
  int recvUsed = recvMult && (!recvOnRootOnly || comm->rank == op->root);
  if ((r = collCheckBuf(sendUsed ? op->sendbuff : "", op->count, sendMult, op->dtype, "sendbuff", fn)) ||
      (r = collCheckBuf(recvUsed ? op->recvbuff : "", op->count, recvMult, op->dtype, "recvbuff", fn)) ||
      (r = collCheckOverlap(comm, op, sendUsed, recvUsed, sendMult, recvMult, fn)) ||
      (r = collCheckCallMemory(comm, fn, sendUsed && op->count ? op->sendbuff : NULL,
                               recvUsed && op->count ? op->recvbuff : NULL, &op->mem)))
    goto out;
  if (collGroupDepth > 0) {
    collCommLeaveIssue(comm);
    return collGroupAdd(comm, stream, op);
  }
  collTakeCallTimeout(comm, op, 1);
  r = collSubmit(comm, stream, op, 1);
out:
  collCommLeaveIssue(comm);
  return collGroupNoteError(r);
}

static size_t collNranksOf(collComm_t comm) {
  return comm && collCommCheck(comm, "") == collSuccess ? (size_t)comm->nranks : 1;
}

collResult_t collAllReduceImpl(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype,
                           collRedOp_t op, collComm_t comm, collStream_t stream) {
  collOp o = {COLL_FN_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, 0, 0, collAlgoOverride(COLL_FN_ALLREDUCE),
              0, 0, COLL_MEM_HOST_INFO};
  return collIssue(comm, stream, &o, "collAllReduce", 1, 1, 1, 0);
}

collResult_t collAllGatherImpl(const void* sendbuff, void* recvbuff, size_t sendcount, collDataType_t datatype,
                           collComm_t comm, collStream_t stream) {
  collOp o = {COLL_FN_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, collSum, 0, 0,
              collAlgoOverride(COLL_FN_ALLGATHER), 0, 0, COLL_MEM_HOST_INFO};
  return collIssue(comm, stream, &o, "collAllGather", 1, collNranksOf(comm), 0, 0);
}

collResult_t collReduceScatterImpl(const void* sendbuff, void* recvbuff, size_t recvcount, collDataType_t datatype,
                               collRedOp_t op, collComm_t comm, collStream_t stream) {
  collOp o = {COLL_FN_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0, 0,
              collAlgoOverride(COLL_FN_REDUCESCATTER), 0, 0, COLL_MEM_HOST_INFO};
  return collIssue(comm, stream, &o, "collReduceScatter", collNranksOf(comm), 1, 1, 0);
}

collResult_t collBroadcastImpl(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, int root,
                           collComm_t comm, collStream_t stream) {
  collOp o = {COLL_FN_BROADCAST, sendbuff, recvbuff, count, datatype, collSum, root, 0,
              collAlgoOverride(COLL_FN_BROADCAST), 0, 0, COLL_MEM_HOST_INFO};
  return collIssue(comm, stream, &o, "collBroadcast", 1, 1, 0, 0);
}

collResult_t collReduceImpl(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, collRedOp_t op,
                        int root, collComm_t comm, collStream_t stream) {
  collOp o = {COLL_FN_REDUCE, sendbuff, recvbuff, count, datatype, op, root, 0, collAlgoOverride(COLL_FN_REDUCE),
              0, 0, COLL_MEM_HOST_INFO};
  return collIssue(comm, stream, &o, "collReduce", 1, 1, 1, 1);
}

collResult_t collSendImpl(const void* sendbuff, size_t count, collDataType_t datatype, int peer, collComm_t comm,
                      collStream_t stream) {
  collOp o = {COLL_FN_SEND, sendbuff, NULL, count, datatype, collSum, 0, peer, NULL, 0, 0, COLL_MEM_HOST_INFO};
  return collIssue(comm, stream, &o, "collSend", 1, 0, 0, 0);
}

collResult_t collRecvImpl(void* recvbuff, size_t count, collDataType_t datatype, int peer, collComm_t comm,
                      collStream_t stream) {
  collOp o = {COLL_FN_RECV, NULL, recvbuff, count, datatype, collSum, 0, peer, NULL, 0, 0, COLL_MEM_HOST_INFO};
  return collIssue(comm, stream, &o, "collRecv", 0, 1, 0, 0);
}

collResult_t collBarrierImpl(collComm_t comm, collStream_t stream) {
  /* COLL_PEER_BARRIER: the signature says "barrier", and the counters keep
   * barriers apart from user all-reduces (no user collective has this peer) */
  collOp o = {COLL_FN_ALLREDUCE, NULL, NULL, 1, collUint8, collMax, 0, COLL_PEER_BARRIER, NULL, 0, 0, COLL_MEM_HOST_INFO};
  if (comm && collCommCheck(comm, "collBarrier") == collSuccess) {
    o.sendbuff = &comm->barrierBuf[0];
    o.recvbuff = &comm->barrierBuf[1];
  }
  return collIssue(comm, stream, &o, "collBarrier", 1, 1, 1, 0);
}
