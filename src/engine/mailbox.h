/*
 * mailbox.h - the shared-memory mailbox: a one-shot protocol for small
 * collectives among the ranks of one node (the role of NCCL's LL protocol
 * and of Open MPI's shared-memory "fast box").
 *
 * Every rank owns two slots (call parity) in one segment that all ranks map.
 * A call copies the rank's input into its slot and publishes the call's
 * sequence number in the same cache line as the call's signature; every rank
 * then waits until every peer published the same sequence number and
 * computes its result straight from the peers' slots, in rank order (so the
 * result is bitwise identical on every rank). Two slots suffice: a rank
 * writes slot p again (call k+2) only after it saw every peer publish call
 * k+1, which a peer does only after it finished reading call k.
 */
#ifndef COLL_MAILBOX_H_
#define COLL_MAILBOX_H_

#include <stdatomic.h>
#include <stdint.h>

#include "engine/engine.h"
#include "engine/sig.h"

/* Collective over the bootstrap, at init: maps the node's mailbox when every
 * rank is on one node with shared memory, nranks <= 64 and COLL_MAILBOX_BYTES
 * > 0 on every rank (the smallest value wins). All ranks reach the same
 * decision; without a mailbox comm->mailbox stays NULL. Errors: those of the
 * bootstrap (collRemoteError, collTimeout); a segment that cannot be made is
 * not an error (the comm runs without a mailbox). */
collResult_t collMailboxInit(collComm_t comm);
/* 1 when op runs through the mailbox: a mailbox exists, op is an all-reduce,
 * all-gather or reduce-scatter whose published bytes per
 * rank fit a slot, and COLL_ALGO lets op's collective use "direct". */
int collMailboxFits(collComm_t comm, const collOp* op);
/* Runs op through the mailbox (blocking); tag and sig are the call's
 * signature (sig.h). float16/bfloat16 sums, products and averages with
 * sig->wide accumulate in float32 and round once; native averages are
 * pre-multiplied by 1/nranks. Errors: collInvalidUsage (ranks called
 * different collectives, counts, types, ops or accumulation modes, or not
 * the same call: both calls named), collRemoteError (a peer failed or its
 * process exited), collTimeout (COLL_TIMEOUT). Every error fails the
 * communicator. */
collResult_t collMailboxRun(collComm_t comm, const collOp* op, uint64_t tag, const collSig* sig);
/* (Each slot also carries the signature of the rank's previous collective,
 * on any path: a mismatched call that moved no data to a reader, such as
 * broadcasts with different roots, fails the next mailbox call on every
 * rank, naming both calls.) */
/* One round of a protocol on the mailbox (the zero-copy path,
 * engine/zerocopy.h): publishes bytes of data (at most
 * collMailboxSlotBytes) for the call (tag, sig: its signature), waits until
 * every rank published its round and checks that all signatures are equal.
 * Every rank must run the same number of rounds in the call. Afterwards
 * collMailboxPeerData(comm, r) is what rank r published in this round,
 * valid until this rank's next round but one. Errors: as collMailboxRun
 * (it does not fail the communicator: the caller does); collInternalError
 * when there is no mailbox or bytes do not fit. */
collResult_t collMailboxRound(collComm_t comm, const void* data, size_t bytes, uint64_t tag, const collSig* sig);
const void* collMailboxPeerData(collComm_t comm, int r);
/* A 64-bit word every rank of the node may update atomically (the zero-copy
 * path's work counter; only it uses the word), 0 when the segment was made;
 * NULL without a mailbox. */
_Atomic uint64_t* collMailboxCounter(collComm_t comm);
/* Data bytes of one slot; 0 without a mailbox. */
size_t collMailboxSlotBytes(collComm_t comm);
/* At the start of every collective (any path; a no-op without a mailbox):
 * publishes this rank's tag for its collective call number seq, so peers
 * waiting in the mailbox see a mismatched call at once. */
void collMailboxAnnounce(collComm_t comm, uint32_t seq, uint64_t tag);
/* Marks this rank failed in the mailbox and wakes its peers, so ranks
 * waiting on it fail at once. Safe to call with no mailbox. */
void collMailboxMarkFailed(collComm_t comm);
/* 1 if peer marked itself failed (or destroyed its communicator) in the
 * mailbox, so a rank waiting for it (to connect, for a call) stops waiting;
 * 0 if not or without a mailbox. Never blocks. */
int collMailboxPeerFailed(collComm_t comm, int peer);
/* 1 if peer's communicator failed with an error of its own (not a destroy
 * or abort); 0 if not or without a mailbox. Never blocks. */
int collMailboxPeerErrored(collComm_t comm, int peer);
/* What peer announced for this rank's current collective when it differs
 * ("mismatched calls: it called broadcast of ..., this rank all-reduce
 * ..."): 1 and buf written, else 0 (no mailbox, same call, or unknown). */
int collMailboxPeerWhy(collComm_t comm, int peer, char* buf, size_t len);
/* Unmaps the mailbox; on a communicator without an error first WARNs about
 * a peer whose last collective differed from this rank's (no call read it)
 * or whose communicator failed after the last call with it. */
void collMailboxFree(collComm_t comm);

#endif
