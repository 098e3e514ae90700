/*
 * cmagather.c - the single-copy all-gather inside a node (cmagather.h).
 *
 * Whether to read by process_vm_readv is not the shm transport's measured
 * decision (shm_cma.c: on only when it copies at 70 % of memcpy's speed, on
 * 4 MiB). That rule weighs one slow copy against the ring's two copies that
 * sender and receiver run at once; an all-gather through the ring makes
 * every rank copy each byte in and out itself, and at the sizes this path
 * takes (from 1 MiB) memcpy no longer runs from the caches as it does on
 * 4 MiB. On the 2-core VM where shm measures 4.4-9.1 GB/s against memcpy's
 * 12.8-27.7 (off), single copy made the all-gather 1.01-2.76x faster from
 * 256 KiB to 64 MiB on a quiet machine (2026-12-03). So only
 * COLL_SHM_CMA_THRESHOLD=0 turns it off, and a refused read (EPERM: a peer
 * that cannot be read) turns it off for the communicator.
 */
#include "engine/cmagather.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "engine/mailbox.h"
#include "engine/progress.h"
#include "engine/zerocopy.h"
#include "misc/log.h"
#include "misc/param.h"
#include "misc/socket.h"
#include "obs/obs.h"
#include "transports/shm/shm.h"
#include "tuner/tuner.h"

/* An own block this large is copied with streaming stores: the result is
 * larger than the caches, and no read for ownership of the destination
 * saves a sixth of the call's memory traffic (2 ranks, 64 MiB: 1.2x). */
#define CG_STREAM_BYTES ((size_t)4 << 20)

typedef struct {
  int32_t ok; /* 1: this rank reads and may be read by process_vm_readv */
  int32_t pad;
  uint64_t block;     /* address of this rank's block */
  uint64_t cookieAt;  /* address of cookie in this process */
  uint64_t cookie;    /* this call's value there */
} cgDesc;

int collCmaGatherWanted(collComm_t comm, const collOp* op) {
  if (op->fn != COLL_FN_ALLGATHER || comm->cmaGatherOff) return 0;
  if (!comm->mailbox || collMailboxSlotBytes(comm) < sizeof(cgDesc) || comm->nranks < 2) return 0;
  size_t bytes = op->count * collTypeSize(op->dtype) * (size_t)comm->nranks;
  return collTunerZeroCopy(comm, op->fn, bytes, op->algo);
}

collResult_t collCmaGatherRun(collComm_t comm, const collOp* op, uint64_t tag, const collSig* sig, int* ran) {
  int n = comm->nranks, me = comm->rank;
  size_t bytes = op->count * collTypeSize(op->dtype);
  char* recv = op->recvbuff;
  *ran = 0;
  /* round 1: where every rank's block is */
  volatile uint64_t cookie = ((uint64_t)(uintptr_t)&cookie * 0x9e3779b97f4a7c15ull) ^ tag ^
                             (uint64_t)(collTimeNow() * 1e9) ^ ((uint64_t)comm->peers[me].pid << 32);
  cgDesc mine = {collParamInt(COLL_PARAM_SHM_CMA_THRESHOLD) != 0, 0, (uint64_t)(uintptr_t)op->sendbuff,
                 (uint64_t)(uintptr_t)&cookie, cookie};
  collResult_t r = collMailboxRound(comm, &mine, sizeof mine, tag, sig);
  if (r != collSuccess) return collEngineFail(comm, r);
  for (int q = 0; q < n; q++)
    if (((const cgDesc*)collMailboxPeerData(comm, q))->ok != 1) {
      comm->cmaGatherOff = 1; /* every rank saw the same round: none asks again */
      return collSuccess;
    }
  cgDesc* all = malloc(sizeof(cgDesc) * (size_t)n);
  if (!all) return collEngineFail(comm, collSetError(collSystemError, "zerocopy all-gather: out of memory"));
  for (int q = 0; q < n; q++) memcpy(&all[q], collMailboxPeerData(comm, q), sizeof(cgDesc));
  /* 2: the own block, then every peer's, starting with the next rank (the
   * ranks do not all read one peer at once); then everyone is done */
  if (op->sendbuff != recv + (size_t)me * bytes) {
    if (bytes < CG_STREAM_BYTES) {
      memcpy(recv + (size_t)me * bytes, op->sendbuff, bytes);
    } else {
      collZeroCopyStore(recv + (size_t)me * bytes, op->sendbuff, bytes);
      collZeroCopyFence();
    }
  }
  int32_t err = 0;
  int bad = -1;
  for (int k = 1; k < n && !err; k++) {
    int q = (me + k) % n;
    uint64_t seen = 0;
    int pid = (int)comm->peers[q].pid;
    err = collShmCmaCopy(pid, &seen, all[q].cookieAt, sizeof seen);
    if (!err && seen != all[q].cookie) err = -1; /* another process has that pid here */
    if (!err) err = collShmCmaCopy(pid, recv + (size_t)q * bytes, all[q].block, bytes);
    if (err) bad = q;
  }
  free(all);
  if ((r = collMailboxRound(comm, &err, sizeof err, tag, sig)) != collSuccess) return collEngineFail(comm, r);
  int allOk = 1;
  for (int q = 0; q < n; q++) allOk &= *(const int32_t*)collMailboxPeerData(comm, q) == 0;
  if (err)
    COLL_INFO(COLL_SUB_COLL, "rank %d: zerocopy all-gather: cannot read rank %d (pid %d): %s; this and later calls "
              "take the usual path", me, bad, (int)comm->peers[bad].pid,
              err < 0 ? "the pid names another process" : strerror(err));
  comm->cmaGatherOff = !allOk; /* the same on every rank: round 2 showed them all the same errors */
  if (allOk) collObsOpAlgo(comm, op, collObsAlgoId(collAlgoFind(op->fn, "zerocopy")), 1, 0);
  *ran = allOk;
  return collSuccess;
}
