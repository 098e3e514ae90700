/*
 * sig.h - the signature of a call, as it travels in the 64-bit tag of every
 * message the engine sends (coll_net.h), and its description in words.
 *
 * A receiver compares the tag of each message with the tag of its own call;
 * a difference is a mismatched call (another collective, count, data type,
 * op, root, half-precision accumulation mode, or a different position in the
 * sequence of collective calls) and fails the call on that rank with a
 * message that names both calls ("rank 1 (host) called all-gather of 1024 x
 * float32, this rank all-reduce sum of 2048 x float32").
 *
 * Tag layout (bit 63 first):
 *   [63:61] kind: 0 untagged (connection hellos), 1 + collFunc for
 *           collectives (1..5), 6 send/recv
 *   [60:57] data type      [56:54] op (reducing collectives, else 0;
 *           7: collBarrier)
 *   [53]    wide: float16/bfloat16 partial results carried in float32
 *   [52:47] collective call number modulo 64 (send/recv: 0)
 *   [46:0]  count (elements, per rank for all-gather and reduce-scatter);
 *           broadcast and reduce keep the root in the top ceil(log2(nranks))
 *           of these 47 bits and the count in the rest.
 * A count wider than its field is compared modulo 2^width (47 bits hold any
 * count of a buffer in a 47-bit address space; a root takes bits only on
 * rooted collectives). Send/recv carries no sequence number: the k-th send
 * to a peer always meets the peer's k-th receive (per-connection FIFO), and
 * ranks interleave their point-to-point operations as they like.
 */
#ifndef COLL_SIG_H_
#define COLL_SIG_H_

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"

typedef struct {
  int fn;         /* collFunc; COLL_FN_SEND for either side of a send/recv */
  int dtype;      /* collDataType_t */
  int op;         /* collRedOp_t of reducing collectives, else 0 */
  int wide;       /* 1: float16/bfloat16 partial results carried in float32 */
  int root;       /* broadcast/reduce, else -1 */
  uint32_t seq;   /* collective call number on the communicator; send/recv 0 */
  uint64_t count; /* elements (per rank for all-gather / reduce-scatter) */
} collSig;

#define COLL_SIG_SEQ_BITS 6
/* The op field of collBarrier's signature (an all-reduce no user call can
 * make: ops are < collNumOps), so messages name it "barrier". */
#define COLL_SIG_OP_BARRIER 7

/* The signature of a user collective (seq: its call number, wide: the
 * accumulation mode it runs with) or of one send/recv transfer (seq 0,
 * wide 0; a receive gets fn COLL_FN_SEND so it equals the matching send). */
void collSigOf(const collOp* op, uint32_t seq, int wide, collSig* s);
/* Packs s into a tag for a communicator of nranks ranks (never 0). */
uint64_t collSigTag(const collSig* s, int nranks);
/* Unpacks a tag (seq modulo 64, count modulo its field). Returns 0 for a tag
 * that is not a coll signature (kind 0 or 7, type or op out of range). */
int collSigFromTag(uint64_t tag, int nranks, collSig* s);
/* The call number (modulo 64) a tag carries. */
uint32_t collSigTagSeq(uint64_t tag);
/* "all-reduce sum of 2048 x float32", "broadcast of 16 x int8 from root 3",
 * "send/recv of 3 x float32", "barrier"; writes at most len bytes (NUL included). */
void collSigDescribe(const collSig* s, char* buf, size_t len);
/* Name of a data type in messages: "float32", "float16", "bfloat16", ... */
const char* collSigTypeName(int dtype);

/* Builds the error (collInvalidUsage, via collSetError) for a message from
 * `peer` whose tag `theirs` differs from `mine`, the tag of this rank's call
 * `me`; `doing` is what this rank does ("this rank", "this rank's receive
 * from rank 0"). Names both calls; where only the call number differs, says
 * how many collective calls apart the ranks are; where only the
 * accumulation mode differs, names COLL_HALF_ACCUM. Returns collInvalidUsage. */
collResult_t collSigMismatch(collComm_t comm, int peer, uint64_t theirs, uint64_t mine, const collSig* me);

#endif
