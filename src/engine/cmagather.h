/*
 * cmagather.h - the single-copy all-gather inside a node (the "zerocopy"
 * row of COLL_ALGO for all-gather): every rank reads each peer's block
 * straight from the peer's send buffer into its own receive buffer with
 * process_vm_readv (cross-memory attach), on any host memory (malloc'd or
 * collMemAlloc), for one-node communicators.
 *
 * A call runs as two rounds of the node's shared-memory mailbox
 * (collMailboxRound: the flags, the waiting, the dead-peer and mismatch
 * checks are the mailbox's):
 *   1. every rank publishes where its block is (the send buffer's address;
 *      in place that is its block of the receive buffer) and a per-call
 *      cookie with its address, or that single copy is off here
 *      (COLL_SHM_CMA_THRESHOLD=0); if any rank's is off, every rank returns
 *      *ran = 0 and the call takes its usual path, as do the
 *      communicator's later all-gathers (none tries again);
 *   2. every rank copies its own block (out of place), then, starting with
 *      the next rank, checks each peer's cookie (a pid that names another
 *      process, in another pid namespace, is never read from) and reads the
 *      peer's block into place; then publishes 0 or the errno of a failed
 *      read. The round is also the barrier after which a rank may change
 *      its send buffer: no rank returns while another still reads it.
 *      If any read failed (EPERM under a ptrace policy, a cookie mismatch)
 *      every rank returns *ran = 0 and the usual path rewrites every block
 *      (in place, a rank's own block was written by no one); the
 *      communicator's later all-gathers take the usual path at once (each
 *      rank saw the same errors, so all agree without a round).
 * Memory traffic per rank: each peer's block read once and written once,
 * the own block copied once out of place (from 4 MiB with streaming
 * stores), nothing staged.
 */
#ifndef COLL_ENGINE_CMAGATHER_H_
#define COLL_ENGINE_CMAGATHER_H_

#include "engine/engine.h"
#include "engine/sig.h"

/* 1 when op (host memory, an all-gather) tries the single-copy path: a
 * communicator with a mailbox (one node) of 2+ ranks, which COLL_ALGO lets
 * use "zerocopy" and the tuner picks it for (collTunerZeroCopy). The same
 * on every rank (the buffers are not looked at). */
int collCmaGatherWanted(collComm_t comm, const collOp* op);
/* Runs op as above. *ran = 1: done; 0: some rank cannot read its peers this
 * way: every rank runs op its usual way. Errors: those of the mailbox
 * (collInvalidUsage for mismatched calls, collRemoteError for a failed or
 * exited peer, collTimeout); each fails the communicator. */
collResult_t collCmaGatherRun(collComm_t comm, const collOp* op, uint64_t tag, const collSig* sig, int* ran);

#endif
