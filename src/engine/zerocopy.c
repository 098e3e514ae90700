/*
 * zerocopy.c - the zero-copy all-reduce and reduce-scatter (zerocopy.h).
 *
 * Peer allocations are mapped (read-write: results are stored into the
 * peers' receive buffers), whole, from the peer's memfd
 * (/proc/<pid>/fd/<fd>, inode checked: a reused descriptor number is not
 * taken for the allocation), and the descriptor closed at once: a mapping
 * costs no fd. They stay mapped while the communicator lives, at most
 * ZC_MAPS_PER_PEER per peer (least recently used unmapped first: a peer's
 * freed allocation is never named again, since ids are not reused, so its
 * mapping only ages out), and all go when a call fails or the communicator
 * is freed.
 */
#include "engine/zerocopy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "algorithms/algorithms.h"
#include "core/memalloc.h"
#include "engine/mailbox.h"
#include "engine/progress.h"
#include "misc/log.h"
#include "obs/obs.h"
#include "reduce/reduce.h"
#include "tuner/tuner.h"

#define ZC_MAPS_PER_PEER 8
#define COLL_ZC_MAX_RANKS 64 /* the mailbox's limit */
#define ZC_CHUNK_BYTES 16384 /* reduced at a time: the accumulator stays in L1 */
#define ZC_CLAIM_BYTES ((size_t)256 << 10) /* of the result, per claim of the work counter */

typedef struct {
  uint64_t id; /* 0: free */
  char* base;
  size_t bytes;
  uint64_t used;
} zcMap;

struct collZeroCopy {
  zcMap* maps; /* [nranks][ZC_MAPS_PER_PEER] */
  /* [nranks][2]: the allocation ids of every rank's send and receive buffer
   * in the last call that every rank mapped (0: none). The same on every
   * rank; a call whose allocations are all among them skips round 2. */
  uint64_t* known;
  uint64_t clock;
  uint64_t claimBase; /* the work counter's value where this call's claims start */
};

typedef struct {
  int32_t ok; /* 1: both buffers are collMemAlloc memory */
  int32_t pad;
  collMemSeg send, recv;
} zcDesc;

int collZeroCopyWanted(collComm_t comm, const collOp* op) {
  if (op->fn != COLL_FN_ALLREDUCE && op->fn != COLL_FN_REDUCESCATTER) return 0;
  if (!comm->mailbox || collMailboxSlotBytes(comm) < sizeof(zcDesc) || comm->nranks < 2) return 0;
  size_t bytes = op->count * collTypeSize(op->dtype) * (op->fn == COLL_FN_REDUCESCATTER ? (size_t)comm->nranks : 1);
  return collTunerZeroCopy(comm, op->fn, bytes, op->algo);
}

static void zcForget(struct collZeroCopy* z, int nranks) {
  memset(z->known, 0, sizeof(uint64_t) * 2 * (size_t)nranks);
}

static void zcUnmapAll(struct collZeroCopy* z, int nranks) {
  zcForget(z, nranks);
  for (int i = 0; z->maps && i < nranks * ZC_MAPS_PER_PEER; i++)
    if (z->maps[i].id) {
      munmap(z->maps[i].base, z->maps[i].bytes);
      z->maps[i].id = 0;
    }
}

void collZeroCopyFree(collComm_t comm) {
  struct collZeroCopy* z = comm->zc;
  if (!z) return;
  zcUnmapAll(z, comm->nranks);
  free(z->maps);
  free(z->known);
  free(z);
  comm->zc = NULL;
}

/* The address of peer's buffer seg (mapped now if needed), or NULL with a
 * message in why. */
static char* zcPeerPtr(collComm_t comm, int peer, const collMemSeg* seg, char* why, size_t whyLen) {
  struct collZeroCopy* z = comm->zc;
  zcMap* row = &z->maps[peer * ZC_MAPS_PER_PEER];
  zcMap* victim = &row[0];
  for (int i = 0; i < ZC_MAPS_PER_PEER; i++) {
    if (row[i].id == seg->id && seg->offset < row[i].bytes) {
      row[i].used = ++z->clock;
      return row[i].base + seg->offset;
    }
    if (row[i].id == 0 || (victim->id != 0 && row[i].used < victim->used)) victim = &row[i];
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)comm->peers[peer].pid, (int)seg->fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    snprintf(why, whyLen, "cannot open rank %d's collMemAlloc segment %s: %s", peer, path, strerror(errno));
    return NULL;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || (uint64_t)st.st_ino != seg->ino || (uint64_t)st.st_size < seg->bytes) {
    snprintf(why, whyLen, "%s is not rank %d's collMemAlloc segment (inode or size differ)", path, peer);
    close(fd);
    return NULL;
  }
  /* populated now: pieces are claimed dynamically, so without it every call
   * would fault in the pages of the peers' buffers it had not touched yet */
  void* base = mmap(NULL, seg->bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  int e = errno;
  close(fd);
  if (base == MAP_FAILED) {
    snprintf(why, whyLen, "mmap of rank %d's collMemAlloc segment (%llu bytes): %s", peer,
             (unsigned long long)seg->bytes, strerror(e));
    return NULL;
  }
  if (victim->id) munmap(victim->base, victim->bytes);
  victim->id = seg->id;
  victim->base = base;
  victim->bytes = seg->bytes;
  victim->used = ++z->clock;
  return victim->base + seg->offset;
}

/* zerocopy.h. Here src is a chunk just computed in L1: a fifth less memory
 * traffic for 2 ranks. collZeroCopyFence orders the stores before the round
 * that publishes the result. */
void collZeroCopyStore(char* dst, const char* src, size_t bytes) {
#if defined(__SSE2__)
  if (((uintptr_t)dst & 15) == 0) {
    size_t v = bytes / 16;
    for (size_t i = 0; i < v; i++)
      _mm_stream_si128((__m128i*)(void*)(dst + 16 * i), _mm_loadu_si128((const __m128i*)(const void*)(src + 16 * i)));
    if (bytes % 16) memcpy(dst + 16 * v, src + 16 * v, bytes % 16);
    return;
  }
#endif
  memcpy(dst, src, bytes);
}

void collZeroCopyFence(void) {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

/* A reduced chunk into an output: streaming stores, except where the output
 * is the input chunk just read (in place: its lines are in the cache
 * already, and streaming into them costs more than storing). */
static void zcStore(char* dst, const char* src, size_t bytes, int stream) {
  if (stream) collZeroCopyStore(dst, src, bytes);
  else memcpy(dst, src, bytes);
}

/* out[0..count) = in[0] op in[1] op ... op in[n-1], each in[r] from byte
 * offset off (out may be one of the inputs: in place): in one pass by the
 * type's n-input kernel (reduce_many.c); float16/bfloat16 chunk by chunk
 * through an accumulator. wide: float16/bfloat16 in float32, rounded once;
 * preMul: native float16/bfloat16 average (inputs times 1/n first). */
static void zcReduce(const collOp* op, int wide, int preMul, int n, const char* const* in, size_t off,
                     char* const* out, int nout, size_t count) {
  size_t es = collTypeSize(op->dtype);
  int stream[COLL_ZC_MAX_RANKS]; /* 0: out[o] is an input (in place) */
  for (int o = 0; o < nout; o++) {
    stream[o] = 1;
    for (int r = 0; r < n; r++) stream[o] &= out[o] != in[r] + off;
  }
  /* Two inputs into two outputs (all-reduce on 2 ranks) stay with the
   * accumulator: there the one-pass kernel was 0.9-1.2x of it alone
   * (reduce_many.c), where with more inputs or one output it was 1.1-1.9x. */
  collReduceManyFn many = n == 2 && nout == 2 ? NULL : collReduceGetManyFn(op->dtype, op->op);
  if (many) {
    const char* at[COLL_ZC_MAX_RANKS];
    for (int r = 0; r < n; r++) at[r] = in[r] + off;
    many(out, stream, nout, at, n, count, op->op == collAvg ? n : 1);
    return;
  }
  size_t k = ZC_CHUNK_BYTES / (wide ? sizeof(float) : es);
  _Alignas(64) char acc[ZC_CHUNK_BYTES], x[ZC_CHUNK_BYTES];
  collReduceFn fn = collReduceGetFn(wide ? collFloat32 : op->dtype, op->op);
  for (size_t i = 0; i < count; i += k) {
    size_t m = count - i < k ? count - i : k, at = off + i * es;
    if (wide) {
      collReduceWiden((float*)acc, in[0] + at, m, op->dtype);
      for (int r = 1; r < n; r++) {
        collReduceWiden((float*)x, in[r] + at, m, op->dtype);
        fn(acc, acc, x, m);
      }
      collReduceNarrow(x, (const float*)acc, m, op->dtype, op->op == collAvg ? n : 1);
      for (int o = 0; o < nout; o++) zcStore(out[o] + i * es, x, m * es, stream[o]);
      continue;
    }
    if (preMul) {
      collReducePreMul(acc, in[0] + at, m, op->dtype, n);
      for (int r = 1; r < n; r++) {
        collReducePreMul(x, in[r] + at, m, op->dtype, n);
        fn(acc, acc, x, m);
      }
    } else {
      fn(acc, in[0] + at, in[1] + at, m);
      for (int r = 2; r < n; r++) fn(acc, acc, in[r] + at, m);
      if (op->op == collAvg) collReduceAvgFinish(acc, m, op->dtype, n);
    }
    for (int o = 0; o < nout; o++) zcStore(out[o] + i * es, acc, m * es, stream[o]);
  }
}

static collResult_t zcFail(collComm_t comm, collResult_t r) {
  zcUnmapAll(comm->zc, comm->nranks);
  return collEngineFail(comm, r);
}

collResult_t collZeroCopyRun(collComm_t comm, const collOp* op, uint64_t tag, const collSig* sig, int* ran) {
  int n = comm->nranks, me = comm->rank, rs = op->fn == COLL_FN_REDUCESCATTER;
  size_t es = collTypeSize(op->dtype), bytes = op->count * es;
  *ran = 0;
  if (!comm->zc) {
    struct collZeroCopy* z = calloc(1, sizeof *z);
    if (z) z->maps = calloc((size_t)n * ZC_MAPS_PER_PEER, sizeof(zcMap));
    if (z) z->known = calloc((size_t)n * 2, sizeof(uint64_t));
    if (!z || !z->maps || !z->known) {
      if (z) free(z->maps);
      free(z);
      return collEngineFail(comm, collSetError(collSystemError, "zerocopy: out of memory"));
    }
    comm->zc = z;
  }
  /* round 1: where every rank's buffers are */
  zcDesc mine;
  memset(&mine, 0, sizeof mine);
  mine.ok = collMemFind(op->sendbuff, rs ? bytes * (size_t)n : bytes, &mine.send) &&
            collMemFind(op->recvbuff, bytes, &mine.recv);
  collResult_t r = collMailboxRound(comm, &mine, sizeof mine, tag, sig);
  if (r != collSuccess) return zcFail(comm, r);
  zcDesc* all = malloc(sizeof(zcDesc) * (size_t)n);
  const char** in = malloc(sizeof(char*) * (size_t)n);
  char** res = malloc(sizeof(char*) * (size_t)n);
  if (!all || !in || !res) {
    free(all);
    free(in);
    free(res);
    return zcFail(comm, collSetError(collSystemError, "zerocopy: out of memory"));
  }
  int allOk = 1;
  for (int q = 0; q < n; q++) {
    memcpy(&all[q], collMailboxPeerData(comm, q), sizeof(zcDesc));
    allOk &= all[q].ok == 1;
  }
  if (!allOk) goto fallback;
  /* round 2: every rank could map the others' allocations; skipped when
   * every rank's allocations were mapped by all in the last call that ran
   * (known: each rank decides the same from the same descriptors), whose
   * mappings are the most recently used ones and still there. With more
   * ranks than cores a round costs a wake-up of every descheduled rank:
   * 3-8 ms of a 10-40 ms call of 64 MiB, 4 ranks on this 2-core VM under load. */
  uint64_t* known = comm->zc->known;
  int cached = 1;
  for (int q = 0; q < n; q++)
    for (int b = 0; b < 2; b++) {
      uint64_t id = b ? all[q].recv.id : all[q].send.id;
      cached &= id != 0 && (id == known[2 * q] || id == known[2 * q + 1]);
    }
  char why[200] = "";
  int32_t mapped = 1;
  for (int q = 0; q < n && mapped; q++) {
    if (q == me) {
      in[q] = op->sendbuff;
      res[q] = op->recvbuff;
      continue;
    }
    in[q] = zcPeerPtr(comm, q, &all[q].send, why, sizeof why);
    res[q] = in[q] ? zcPeerPtr(comm, q, &all[q].recv, why, sizeof why) : NULL;
    mapped = in[q] && res[q];
  }
  if (cached && !mapped) { /* a known allocation is mapped: cannot happen */
    r = collSetError(collInternalError, "rank %d: zerocopy: %s (an allocation every rank had mapped)", me, why);
    goto fail;
  }
  if (!cached) {
    if ((r = collMailboxRound(comm, &mapped, sizeof mapped, tag, sig)) != collSuccess) goto fail;
    for (int q = 0; q < n; q++) allOk &= *(const int32_t*)collMailboxPeerData(comm, q) == 1;
    if (!allOk) {
      if (why[0]) COLL_INFO(COLL_SUB_COLL, "rank %d: zerocopy: %s; the call takes its usual path", me, why);
      zcForget(comm->zc, n); /* the new mappings may have evicted known ones */
      goto fallback;
    }
    for (int q = 0; q < n; q++) {
      known[2 * q] = all[q].send.id;
      known[2 * q + 1] = all[q].recv.id;
    }
  }
  /* 3: pieces of the result claimed from the node's work counter, by
   * whichever rank runs: each is reduced from every input and stored into
   * every receive buffer that wants it; then everyone is done */
  collObsOpAlgo(comm, op, collObsAlgoId(collAlgoFind(op->fn, "zerocopy")), 1, 0);
  int wide = sig->wide;
  int preMul = op->op == collAvg && collTypeIsHalf(op->dtype) && !wide;
  size_t pieceElems = ZC_CLAIM_BYTES / es;
  size_t perBlock = (op->count + pieceElems - 1) / pieceElems, npieces = perBlock * (rs ? (size_t)n : 1);
  _Atomic uint64_t* counter = collMailboxCounter(comm);
  uint64_t base = comm->zc->claimBase;
  for (;;) {
    uint64_t j = atomic_fetch_add_explicit(counter, 1, memory_order_relaxed) - base;
    if (j >= npieces) break;
    size_t blk = (size_t)(j / perBlock), at = (size_t)(j % perBlock) * pieceElems;
    size_t len = op->count - at < pieceElems ? op->count - at : pieceElems;
    char* outs[COLL_ZC_MAX_RANKS];
    if (rs) outs[0] = res[blk] + at * es; /* block blk is rank blk's result */
    for (int q = 0; !rs && q < n; q++) outs[q] = res[q] + at * es;
    zcReduce(op, wide, preMul, n, in, (blk * op->count + at) * es, outs, rs ? 1 : n, len);
  }
  collZeroCopyFence();
  /* every rank claims once past the end: the next call's pieces start at
   * the same counter value on every rank */
  comm->zc->claimBase = base + npieces + (uint64_t)n;
  if ((r = collMailboxRound(comm, NULL, 0, tag, sig)) != collSuccess) goto fail;
  *ran = 1;
fallback:
  free(all);
  free(in);
  free(res);
  return collSuccess;
fail:
  free(all);
  free(in);
  free(res);
  return zcFail(comm, r);
}
