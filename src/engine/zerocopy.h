/*
 * zerocopy.h - all-reduce and reduce-scatter that read the peers' buffers
 * where they are (the "zerocopy" row of COLL_ALGO), for one-node
 * communicators whose calls use collMemAlloc memory (core/memalloc.h) on
 * every rank.
 *
 * A call runs as rounds of the node's shared-memory mailbox
 * (collMailboxRound: the flags, the waiting, the dead-peer and mismatch
 * checks are the mailbox's):
 *   1. every rank publishes where its send and receive buffers are (the
 *      collMemAlloc allocation: id, memfd descriptor and inode, offset), or
 *      that they are elsewhere; if any rank's are elsewhere, every rank
 *      returns *ran = 0 and the call takes its usual path;
 *   2. every rank maps the peers' allocations (read-write, cached) and
 *      publishes whether it could; if any rank could not, the same fallback.
 *      Skipped when every rank's allocations are among those of the last
 *      call that every rank mapped (the same buffers again, or swapped, or
 *      elsewhere in them: every rank decides the same from round 1);
 *   3. the result is cut into pieces of 256 KiB (reduce-scatter: of every
 *      rank's block); the ranks claim pieces from a counter in the mailbox
 *      segment until none is left, so a rank the scheduler delays does less
 *      of the work instead of holding everyone up. A piece is reduced from
 *      every rank's input in rank order (x_0 op x_1 op ... op x_{n-1}: the
 *      bits of the direct algorithm on one channel and of the mailbox;
 *      float16/bfloat16 sum, prod and avg accumulate in float32 and round
 *      once, native ones pre-multiply the average: those, and 2 inputs
 *      into 2 outputs, 16 KiB at a time in an accumulator; the rest a line
 *      at a time in registers, collReduceManyFn), and stored (streaming stores) into every rank's
 *      receive buffer (reduce-scatter: its owner's); then a last round: every piece
 *      is done. Each rank's memory traffic is its share of n reads and n
 *      writes per result byte, nothing staged.
 * No rank writes what another still reads: a piece's inputs are read by
 * the rank that claimed it only, and in place a piece's output overlaps its
 * own inputs only, read before written. Every rank claims once past the
 * last piece, so the counter's start for the next call is known to all.
 */
#ifndef COLL_ENGINE_ZEROCOPY_H_
#define COLL_ENGINE_ZEROCOPY_H_

#include "engine/engine.h"
#include "engine/sig.h"

/* 1 when op (host memory) tries the zero-copy path: an all-reduce or
 * reduce-scatter on a communicator with a mailbox (one node), which
 * COLL_ALGO lets use "zerocopy" and the tuner picks it for (collTunerZeroCopy). The
 * same on every rank (the buffers are not looked at). */
int collZeroCopyWanted(collComm_t comm, const collOp* op);
/* Runs op as above. *ran = 1: done; 0: some rank's buffers are not
 * collMemAlloc memory (or could not be mapped): every rank runs op its usual
 * way. Errors: those of the mailbox (collInvalidUsage for mismatched calls,
 * collRemoteError for a failed or exited peer, collTimeout); each fails the
 * communicator and unmaps every peer allocation. */
collResult_t collZeroCopyRun(collComm_t comm, const collOp* op, uint64_t tag, const collSig* sig, int* ran);
/* dst = src (bytes) with streaming stores where the CPU has them and dst is
 * 16-byte aligned (src need not be; else memcpy): the destination is not
 * read first (no read for ownership). collZeroCopyFence orders them before
 * whatever publishes dst to other processes. Thread-safe. */
void collZeroCopyStore(char* dst, const char* src, size_t bytes);
void collZeroCopyFence(void);
/* Unmaps every peer allocation (the communicator is freed). */
void collZeroCopyFree(collComm_t comm);

#endif
