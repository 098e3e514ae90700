/* sig.c - call signatures in message tags and their words (sig.h). */
#include "engine/sig.h"

#include <stdio.h>

#include "misc/log.h"
#include "reduce/reduce.h"

#define SIG_KIND_P2P 6u
#define SIG_FIELD_BITS 47
#define SIG_FIELD_MASK ((UINT64_C(1) << SIG_FIELD_BITS) - 1)

static int sigRooted(int fn) { return fn == COLL_FN_BROADCAST || fn == COLL_FN_REDUCE; }
static int sigReduces(int fn) {
  return fn == COLL_FN_ALLREDUCE || fn == COLL_FN_REDUCESCATTER || fn == COLL_FN_REDUCE;
}

/* Bits that hold any root of nranks ranks (0 for one rank). */
static int sigRootBits(int nranks) {
  int b = 0;
  while (b < 31 && (1LL << b) < (long long)nranks) b++;
  return b;
}

/* Width of the count field of signature kind fn. */
static int sigCountBits(int fn, int nranks) { return SIG_FIELD_BITS - (sigRooted(fn) ? sigRootBits(nranks) : 0); }

void collSigOf(const collOp* op, uint32_t seq, int wide, collSig* s) {
  int p2p = op->fn == COLL_FN_SEND || op->fn == COLL_FN_RECV;
  s->fn = p2p ? COLL_FN_SEND : (int)op->fn;
  s->dtype = (int)op->dtype;
  s->op = op->fn == COLL_FN_ALLREDUCE && op->peer == COLL_PEER_BARRIER ? COLL_SIG_OP_BARRIER : sigReduces(s->fn) ? (int)op->op : 0;
  s->wide = sigReduces(s->fn) && wide ? 1 : 0;
  s->root = sigRooted(s->fn) ? op->root : -1;
  s->seq = p2p ? 0 : seq;
  s->count = op->count;
}

uint64_t collSigTag(const collSig* s, int nranks) {
  uint64_t kind = s->fn == COLL_FN_SEND ? SIG_KIND_P2P : (uint64_t)s->fn + 1;
  int cw = sigCountBits(s->fn, nranks);
  uint64_t field = s->count & ((UINT64_C(1) << cw) - 1);
  if (sigRooted(s->fn)) field |= (uint64_t)(uint32_t)s->root << cw;
  return kind << 61 | ((uint64_t)s->dtype & 15) << 57 | ((uint64_t)s->op & 7) << 54 | (uint64_t)(s->wide & 1) << 53 |
         ((uint64_t)s->seq & ((1u << COLL_SIG_SEQ_BITS) - 1)) << SIG_FIELD_BITS | (field & SIG_FIELD_MASK);
}

int collSigFromTag(uint64_t tag, int nranks, collSig* s) {
  unsigned kind = (unsigned)(tag >> 61);
  if (kind == 0 || kind > SIG_KIND_P2P) return 0;
  s->fn = kind == SIG_KIND_P2P ? COLL_FN_SEND : (int)kind - 1;
  s->dtype = (int)(tag >> 57 & 15);
  s->op = (int)(tag >> 54 & 7);
  s->wide = (int)(tag >> 53 & 1);
  s->seq = collSigTagSeq(tag);
  int cw = sigCountBits(s->fn, nranks);
  uint64_t field = tag & SIG_FIELD_MASK;
  s->count = field & ((UINT64_C(1) << cw) - 1);
  s->root = sigRooted(s->fn) ? (int)(field >> cw) : -1;
  return s->dtype < collNumTypes && (s->op < collNumOps || (s->op == COLL_SIG_OP_BARRIER && s->fn == COLL_FN_ALLREDUCE));
}

uint32_t collSigTagSeq(uint64_t tag) {
  return (uint32_t)(tag >> SIG_FIELD_BITS) & ((1u << COLL_SIG_SEQ_BITS) - 1);
}

const char* collSigTypeName(int dtype) {
  static const char* names[collNumTypes] = {"int8",    "uint8",   "int32",   "uint32",  "int64",
                                            "uint64",  "float16", "float32", "float64", "bfloat16"};
  return dtype >= 0 && dtype < collNumTypes ? names[dtype] : "invalid type";
}

void collSigDescribe(const collSig* s, char* buf, size_t len) {
  unsigned long long n = (unsigned long long)s->count;
  const char* t = collSigTypeName(s->dtype);
  const char* o = s->op < collNumOps ? collOpName((collRedOp_t)s->op) : "";
  switch (s->fn) {
    case COLL_FN_ALLREDUCE:
      if (s->op == COLL_SIG_OP_BARRIER) snprintf(buf, len, "barrier");
      else snprintf(buf, len, "all-reduce %s of %llu x %s", o, n, t);
      break;
    case COLL_FN_ALLGATHER: snprintf(buf, len, "all-gather of %llu x %s", n, t); break;
    case COLL_FN_REDUCESCATTER: snprintf(buf, len, "reduce-scatter %s of %llu x %s per rank", o, n, t); break;
    case COLL_FN_BROADCAST: snprintf(buf, len, "broadcast of %llu x %s from root %d", n, t, s->root); break;
    case COLL_FN_REDUCE: snprintf(buf, len, "reduce %s of %llu x %s to root %d", o, n, t, s->root); break;
    default: snprintf(buf, len, "send/recv of %llu x %s", n, t); break;
  }
}

collResult_t collSigMismatch(collComm_t comm, int peer, uint64_t theirs, uint64_t mine, const collSig* me) {
  const char* host = collCommPeerHost(comm, peer);
  collSig t;
  char a[160], b[160];
  collSigDescribe(me, b, sizeof b);
  if (!collSigFromTag(theirs, comm->nranks, &t))
    return collSetError(collInvalidUsage,
                        "rank %d: rank %d (%s) sent a message whose tag 0x%016llx is no coll call signature "
                        "(its transport does not carry tags, or it runs another protocol), this rank %s",
                        comm->rank, peer, host, (unsigned long long)theirs, b);
  collSigDescribe(&t, a, sizeof a);
  uint64_t seqMask = (uint64_t)((1u << COLL_SIG_SEQ_BITS) - 1) << SIG_FIELD_BITS;
  uint64_t wideBit = UINT64_C(1) << 53;
  int meP2p = me->fn == COLL_FN_SEND, themP2p = t.fn == COLL_FN_SEND;
  if (((theirs ^ mine) & ~seqMask) == 0) {
    int d = (int)((t.seq - me->seq) & ((1u << COLL_SIG_SEQ_BITS) - 1));
    if (d >= 1 << (COLL_SIG_SEQ_BITS - 1)) d -= 1 << COLL_SIG_SEQ_BITS;
    return collSetError(collInvalidUsage,
                        "rank %d: mismatched calls: rank %d (%s) is %d collective call(s) %s this rank (both "
                        "calls %s): a rank skipped a collective or made an extra one (calls counted modulo %d)",
                        comm->rank, peer, host, d > 0 ? d : -d, d > 0 ? "ahead of" : "behind", b,
                        1 << COLL_SIG_SEQ_BITS);
  }
  if (((theirs ^ mine) & ~wideBit) == 0)
    return collSetError(collInvalidUsage,
                        "rank %d: mismatched calls: %s: rank %d (%s) carries %s partial results in %s "
                        "(COLL_HALF_ACCUM=%s), this rank in %s (COLL_HALF_ACCUM=%s); set it alike on every rank",
                        comm->rank, b, peer, host, collSigTypeName(me->dtype), t.wide ? "float32" : "their type",
                        t.wide ? "float" : "native", me->wide ? "float32" : "their type",
                        me->wide ? "float" : "native");
  char note[64] = "";
  int cw = sigCountBits(me->fn, comm->nranks);
  if (cw < 64 && me->count >> cw) snprintf(note, sizeof note, " (counts compared modulo 2^%d)", cw);
  if (meP2p && themP2p)
    return collSetError(collInvalidUsage,
                        "rank %d: mismatched calls: rank %d (%s) sent %llu x %s, this rank's receive from rank %d "
                        "expects %llu x %s%s",
                        comm->rank, peer, host, (unsigned long long)t.count, collSigTypeName(t.dtype), peer,
                        (unsigned long long)me->count, collSigTypeName(me->dtype), note);
  if (meP2p)
    return collSetError(collInvalidUsage,
                        "rank %d: mismatched calls: rank %d (%s) called %s, this rank receives %llu x %s from rank %d "
                        "(send/recv)%s",
                        comm->rank, peer, host, a, (unsigned long long)me->count, collSigTypeName(me->dtype), peer,
                        note);
  if (themP2p)
    return collSetError(collInvalidUsage, "rank %d: mismatched calls: rank %d (%s) sent %llu x %s (send/recv), this "
                        "rank called %s%s",
                        comm->rank, peer, host, (unsigned long long)t.count, collSigTypeName(t.dtype), b, note);
  return collSetError(collInvalidUsage, "rank %d: mismatched calls: rank %d (%s) called %s, this rank %s%s", comm->rank,
                      peer, host, a, b, note);
}
