/*
 * mailbox.c - the shared-memory mailbox for small collectives (mailbox.h).
 *
 * Segment: one header line (the count of ranks asleep on a slot's sequence
 * word; at byte 8 the zero-copy path's work counter), one line per rank (its failed flag and its announcements), then per
 * rank two slots of one header line {seq, signature} and COLL_MAILBOX_BYTES
 * of data. The signature is the call's tag (sig.h). Rank 0 creates it with
 * memfd_create and reserves every page with fallocate; the others open rank
 * 0's descriptor through /proc/<pid>/fd/<fd> (same pid namespace, checked)
 * while rank 0 keeps it open, then everyone closes it. Nothing is ever named
 * in /dev/shm: a crash at any moment leaves nothing behind, and a small or
 * full /dev/shm (containers) does not matter. A segment that cannot be
 * reserved (memory) or opened (/proc access) means no mailbox (INFO log),
 * never a SIGBUS later.
 *
 * Announcements: at the start of every collective, whatever path it takes,
 * a rank stores its call's tag in its line (two words, by the parity of its
 * collective call number). A rank waiting in the mailbox for a peer reads
 * the peer's announcement of the same call: a different tag (the peer runs
 * another collective, count, type or op, maybe through its schedule) or a
 * peer already at its next call fails the wait at once with both calls
 * named, instead of waiting for the timeout.
 *
 * Waiting follows the engine's rules (progress.h): spin for COLL_SPIN_US
 * (yielding when the machine is oversubscribed), then sleep on the awaited
 * sequence word with a futex, at most 5 ms at a time. A publisher wakes the
 * word only when some rank sleeps (the sleeper counts itself in, seq_cst,
 * before it re-reads the word; the publisher stores the word, seq_cst, before
 * it reads the count: one of them sees the other). While asleep a waiter
 * checks the awaited peer's failed flag and, through a pidfd, whether its
 * process exited: a dead peer becomes collRemoteError in milliseconds.
 */
#include "engine/mailbox.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "engine/progress.h"
#include "engine/sig.h"
#include "misc/log.h"
#include "misc/param.h"
#include "obs/obs.h"
#include "reduce/reduce.h"
#include "tuner/algo_env.h"

#define MB_LINE 64
#define MB_MAX_RANKS 64
#define MB_FAILED 1u /* the rank's communicator failed (an error) */
#define MB_CLOSED 2u /* destroyed or aborted without an error of its own */

typedef struct {
  _Atomic uint32_t seq; /* the last call published in this slot (futex word) */
  uint32_t pad;
  uint64_t tag;     /* the call's signature (sig.h) */
  uint64_t prevTag; /* the signature of the rank's previous collective (any path), 0: none */
} mbSlotHdr;

/* A rank's own line: failed flag, then its announced tags. */
typedef struct {
  _Atomic uint32_t failed;       /* MB_FAILED or MB_CLOSED once the communicator went, 0 while it runs */
  _Atomic uint32_t latest;       /* 1 + the last collective call number announced, 0: none */
  _Atomic uint64_t announced[2]; /* its tag, at [call number & 1] */
} mbRankLine;

struct collMailbox {
  char* base;
  size_t mapBytes, slotBytes, slotStride;
  uint32_t seq; /* calls (and rounds of collMailboxRound) run through the mailbox so far */
  uint64_t lastTag, prevTag; /* this rank's last two announced collectives */
  uint32_t lastSeq;          /* 1 + the call number of lastTag, 0: none */
  int* pidfds;  /* [nranks], -1 where none */
};

static _Atomic int32_t* mbSleepers(const struct collMailbox* m) { return (_Atomic int32_t*)m->base; }
static mbRankLine* mbLine(const struct collMailbox* m, int r) {
  return (mbRankLine*)(m->base + MB_LINE * (size_t)(1 + r));
}
static _Atomic uint32_t* mbFailed(const struct collMailbox* m, int r) { return &mbLine(m, r)->failed; }
static mbSlotHdr* mbSlot(const struct collMailbox* m, int nranks, int r, int parity) {
  return (mbSlotHdr*)(m->base + MB_LINE * (size_t)(1 + nranks) + m->slotStride * (size_t)(2 * r + parity));
}
static char* mbData(mbSlotHdr* s) { return (char*)s + MB_LINE; }

/* ---- setup ----------------------------------------------------------------- */
typedef struct {
  int64_t slotBytes; /* 0: this rank cannot or will not use a mailbox */
  uint64_t pidNs;    /* pid namespace inode: pids (pidfds, /proc/<pid>) must mean the same process */
  int32_t ok;
  int32_t fd;        /* round 2, rank 0: its descriptor of the segment's memfd */
} mbHello;

static uint64_t mbPidNs(void) {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

static void mbUnmap(struct collMailbox* m, int nranks) {
  if (m->pidfds)
    for (int r = 0; r < nranks; r++)
      if (m->pidfds[r] >= 0) close(m->pidfds[r]);
  free(m->pidfds);
  if (m->base && m->base != MAP_FAILED) munmap(m->base, m->mapBytes);
  free(m);
}

/* Rank 0: a memfd of bytes with every page reserved (fallocate: no SIGBUS
 * on first touch when memory is short). Returns the fd or -1 with why. */
static int mbCreate(size_t bytes, char* why, size_t whyLen) {
  int fd = memfd_create("coll-mailbox", MFD_CLOEXEC);
  if (fd < 0) {
    snprintf(why, whyLen, "memfd_create: %s", strerror(errno));
    return -1;
  }
  const char* step = "ftruncate";
  int rc = ftruncate(fd, (off_t)bytes);
  if (rc == 0) {
    step = "fallocate";
    rc = fallocate(fd, 0, 0, (off_t)bytes);
    if (rc != 0 && (errno == EOPNOTSUPP || errno == ENOSYS)) rc = 0; /* lazily backed then */
  }
  if (rc != 0) {
    snprintf(why, whyLen, "%s of %zu bytes of memfd memory: %s", step, bytes, strerror(errno));
    close(fd);
    return -1;
  }
  return fd;
}

/* Other ranks: opens rank 0's memfd through /proc (a new descriptor of the
 * same memory). Returns the fd or -1 with why. */
static int mbOpenPeer(int pid, int peerFd, char* why, size_t whyLen) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, peerFd);
  int fd = peerFd >= 0 ? open(path, O_RDWR | O_CLOEXEC) : -1;
  if (fd < 0) snprintf(why, whyLen, "cannot open rank 0's segment %s: %s", path, strerror(errno));
  return fd;
}

/* Every rank contributes h; returns 1 when every rank's ok is set. */
static collResult_t mbAgree(collComm_t comm, mbHello* h, mbHello* all, int* allOk) {
  memcpy(&all[comm->rank], h, sizeof *h);
  collResult_t r = collBootAllGather(&comm->boot, all, sizeof *h);
  if (r != collSuccess) return r;
  *allOk = 1;
  for (int i = 0; i < comm->nranks; i++) *allOk &= all[i].ok != 0;
  return collSuccess;
}

collResult_t collMailboxInit(collComm_t comm) {
  int n = comm->nranks, me = comm->rank;
  comm->mailbox = NULL;
  int eligible = n >= 2 && n <= MB_MAX_RANKS && comm->nnodes == 1 && comm->nets[COLL_NET_INTRA] != NULL;
  for (int i = 0; i < n && eligible; i++) eligible = comm->peers[i].hasIntra != 0;
  if (!eligible) return collSuccess; /* the same on every rank: all inputs came from the allgather */
  mbHello* all = calloc((size_t)n, sizeof(mbHello));
  struct collMailbox* m = calloc(1, sizeof *m);
  if (!all || !m) {
    free(all);
    free(m);
    return collSetError(collSystemError, "init: out of memory");
  }
  /* round 1: the slot size every rank accepts, and one pid namespace */
  mbHello h = {collParamInt(COLL_PARAM_MAILBOX_BYTES), mbPidNs(), 1, -1};
  int ok;
  collResult_t r = mbAgree(comm, &h, all, &ok);
  int64_t slot = h.slotBytes;
  for (int i = 0; i < n && r == collSuccess; i++) {
    if (all[i].slotBytes < slot) slot = all[i].slotBytes;
    if (all[i].pidNs != all[0].pidNs || all[i].pidNs == 0) slot = 0;
  }
  if (r != collSuccess || slot <= 0) goto done;
  m->slotBytes = (size_t)slot;
  m->slotStride = MB_LINE + ((m->slotBytes + MB_LINE - 1) / MB_LINE) * MB_LINE;
  m->mapBytes = MB_LINE * (size_t)(1 + n) + m->slotStride * 2 * (size_t)n;
  /* round 2: rank 0 creates and reserves the segment */
  char why[160] = "";
  int fd = -1;
  memset(&h, 0, sizeof h);
  h.fd = -1;
  if (me == 0) {
    fd = mbCreate(m->mapBytes, why, sizeof why);
    h.ok = fd >= 0;
    h.fd = fd;
  } else {
    h.ok = 1;
  }
  r = mbAgree(comm, &h, all, &ok);
  if (r == collSuccess && ok) {
    if (me != 0) fd = mbOpenPeer(comm->peers[0].pid, all[0].fd, why, sizeof why);
    m->base = fd >= 0 ? mmap(NULL, m->mapBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (fd >= 0 && m->base == MAP_FAILED)
      snprintf(why, sizeof why, "mmap of %zu bytes: %s", m->mapBytes, strerror(errno));
  }
  if (fd >= 0 && me != 0) close(fd);
  /* round 3: everyone mapped it (then rank 0 may close its descriptor) */
  h.ok = m->base != NULL && m->base != MAP_FAILED;
  if (r == collSuccess) r = mbAgree(comm, &h, all, &ok);
  if (fd >= 0 && me == 0) close(fd);
  if (r == collSuccess && !ok) {
    int who = 0;
    while (who < n && all[who].ok) who++;
    if (why[0])
      COLL_INFO(COLL_SUB_INIT, "rank %d: no shm mailbox (small calls use the transports): %s", me, why);
    else
      COLL_INFO(COLL_SUB_INIT,
                "rank %d: no shm mailbox (small calls use the transports): rank %d could not create or map it", me,
                who);
  }
  if (r != collSuccess || !ok) goto done;
  m->pidfds = malloc(sizeof(int) * (size_t)n);
  if (!m->pidfds) {
    r = collSetError(collSystemError, "init: out of memory");
    goto done;
  }
  for (int i = 0; i < n; i++)
    m->pidfds[i] = i == me ? -1 : (int)syscall(SYS_pidfd_open, (pid_t)comm->peers[i].pid, 0);
  comm->mailbox = m;
  m = NULL;
  COLL_INFO(COLL_SUB_INIT, "rank %d: shm mailbox for calls up to %lld bytes per rank (%zu bytes mapped)", me,
            (long long)slot, comm->mailbox->mapBytes);
done:
  if (m) mbUnmap(m, n);
  free(all);
  return r;
}

/* At destroy of a communicator that saw no error: a peer whose last
 * collective differs from ours (a mismatch no call read: a broadcast with
 * another root sends only) or whose communicator failed is named in a WARN. */
static void mbWarnUnseen(collComm_t comm, struct collMailbox* m) {
  if (__atomic_load_n(&comm->asyncError, __ATOMIC_ACQUIRE) != collSuccess) return;
  for (int r = 0; r < comm->nranks; r++) {
    if (r == comm->rank) continue;
    mbRankLine* l = mbLine(m, r);
    uint32_t latest = atomic_load_explicit(&l->latest, memory_order_acquire);
    uint64_t t = latest ? atomic_load_explicit(&l->announced[(latest - 1) & 1], memory_order_relaxed) : 0;
    if (m->lastSeq && latest == m->lastSeq && t != m->lastTag) {
      collSig me;
      char mine[160], theirs[160];
      if (collSigFromTag(m->lastTag, comm->nranks, &me)) collSigDescribe(&me, mine, sizeof mine);
      else snprintf(mine, sizeof mine, "?");
      collSig ts;
      if (collSigFromTag(t, comm->nranks, &ts)) collSigDescribe(&ts, theirs, sizeof theirs);
      else snprintf(theirs, sizeof theirs, "?");
      COLL_WARN_ALWAYS(COLL_SUB_COLL,
                       "rank %d: collCommDestroy: the last collective was mismatched and no call read its data: "
                       "rank %d (%s) called %s, this rank %s",
                comm->rank, r, collCommPeerHost(comm, r), theirs, mine);
    } else if (atomic_load(mbFailed(m, r)) == MB_FAILED) {
      COLL_WARN_ALWAYS(COLL_SUB_COLL,
                       "rank %d: collCommDestroy: rank %d (%s, pid %d) failed after this rank's last call with it "
                       "(see its error: e.g. a receive that did not match this rank's send)",
                comm->rank, r, collCommPeerHost(comm, r), (int)comm->peers[r].pid);
    }
  }
}

void collMailboxFree(collComm_t comm) {
  if (!comm->mailbox) return;
  mbWarnUnseen(comm, comm->mailbox);
  mbUnmap(comm->mailbox, comm->nranks);
  comm->mailbox = NULL;
}

void collMailboxMarkFailed(collComm_t comm) {
  struct collMailbox* m = comm->mailbox;
  if (!m) return;
  /* failed: an error of its own; closed: destroyed, or aborted by the user
   * (collCommAbort's error is no failure the peers should report) */
  int failed = __atomic_load_n(&comm->asyncError, __ATOMIC_ACQUIRE) != collSuccess &&
               !__atomic_load_n(&comm->userAborted, __ATOMIC_ACQUIRE);
  uint32_t was = 0, v = failed ? MB_FAILED : MB_CLOSED;
  atomic_compare_exchange_strong(mbFailed(m, comm->rank), &was, v);
  for (int p = 0; p < 2; p++) /* waiters sleep on one of our sequence words */
    syscall(SYS_futex, &mbSlot(m, comm->nranks, comm->rank, p)->seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void collMailboxAnnounce(collComm_t comm, uint32_t seq, uint64_t tag) {
  struct collMailbox* m = comm->mailbox;
  if (!m) return;
  mbRankLine* l = mbLine(m, comm->rank);
  m->prevTag = m->lastTag;
  m->lastTag = tag;
  m->lastSeq = seq + 1;
  atomic_store_explicit(&l->announced[seq & 1], tag, memory_order_relaxed);
  atomic_store_explicit(&l->latest, seq + 1, memory_order_release);
}

int collMailboxPeerFailed(collComm_t comm, int peer) {
  struct collMailbox* m = comm->mailbox;
  return m && peer >= 0 && peer < comm->nranks && atomic_load(mbFailed(m, peer)) != 0;
}

int collMailboxPeerWhy(collComm_t comm, int peer, char* buf, size_t len) {
  struct collMailbox* m = comm->mailbox;
  if (!m || peer < 0 || peer >= comm->nranks || peer == comm->rank || !m->lastSeq || !len) return 0;
  mbRankLine* l = mbLine(m, peer);
  uint32_t latest = atomic_load_explicit(&l->latest, memory_order_acquire);
  uint64_t t = latest ? atomic_load_explicit(&l->announced[(m->lastSeq - 1) & 1], memory_order_relaxed) : 0;
  collSig a, b;
  char theirs[160], mine[160];
  if (!collSigFromTag(m->lastTag, comm->nranks, &b)) return 0;
  collSigDescribe(&b, mine, sizeof mine);
  if (latest == m->lastSeq && t != m->lastTag && collSigFromTag(t, comm->nranks, &a)) {
    collSigDescribe(&a, theirs, sizeof theirs);
    snprintf(buf, len, "mismatched calls: it called %s, this rank %s", theirs, mine);
    return 1;
  }
  if ((int32_t)(latest - m->lastSeq) > 0) {
    snprintf(buf, len, "mismatched calls: it went on to a later collective, this rank is at its %s", mine);
    return 1;
  }
  return 0;
}

int collMailboxPeerErrored(collComm_t comm, int peer) {
  struct collMailbox* m = comm->mailbox;
  return m && peer >= 0 && peer < comm->nranks && atomic_load(mbFailed(m, peer)) == MB_FAILED;
}

/* ---- one call ---------------------------------------------------------------- */
/* Bytes every rank publishes for op; SIZE_MAX: not a mailbox collective.
 * Broadcast and reduce stay with their schedules: there the root (or the
 * non-roots) need not wait for anyone, and a mailbox call waits for all
 * (4 ranks on 2 cores: chain broadcast 13 us, through the mailbox 48 us). */
static size_t mbPublished(const collOp* op, int nranks) {
  size_t b = op->count * collTypeSize(op->dtype);
  switch (op->fn) {
    case COLL_FN_ALLREDUCE:
    case COLL_FN_ALLGATHER:
      return b;
    case COLL_FN_REDUCESCATTER:
      return b * (size_t)nranks;
    default:
      return SIZE_MAX;
  }
}

int collMailboxFits(collComm_t comm, const collOp* op) {
  const struct collMailbox* m = comm->mailbox;
  if (!m || !collAlgoSpecAllows(op->algo, "direct")) return 0; /* COLL_ALGO without direct: schedules */
  size_t b = mbPublished(op, comm->nranks);
  return b != SIZE_MAX && b <= m->slotBytes;
}

static int mbPeerExited(const struct collMailbox* m, int r) {
  struct pollfd p = {m->pidfds[r], POLLIN, 0};
  return p.fd >= 0 && poll(&p, 1, 0) > 0;
}

static const char* mbFnName(uint32_t fn) {
  static const char* names[] = {"all-reduce", "all-gather", "reduce-scatter"};
  return fn < sizeof names / sizeof names[0] ? names[fn] : "?";
}

/* What peer r announced for this rank's collective call (sig->seq, tag):
 * collSuccess while it may still come to this mailbox call (it is behind,
 * or announced the same tag), else the mismatch. A peer past this call may
 * have published it before it moved on: the caller looks at the slot again. */
static collResult_t mbCheckAnnounced(collComm_t comm, struct collMailbox* m, int r, uint64_t tag, const collSig* sig) {
  mbRankLine* l = mbLine(m, r);
  int32_t ahead = (int32_t)(atomic_load_explicit(&l->latest, memory_order_acquire) - (sig->seq + 1));
  if (ahead < 0) return collSuccess;
  uint64_t t = atomic_load_explicit(&l->announced[sig->seq & 1], memory_order_relaxed);
  int thisCall = t != 0 && collSigTagSeq(t) == (sig->seq & ((1u << COLL_SIG_SEQ_BITS) - 1)); /* else overwritten */
  if (thisCall && t != tag) return collSigMismatch(comm, r, t, tag, sig);
  if (thisCall && ahead == 0) return collSuccess; /* the same call: its publish is on the way */
  return collSetError(collInvalidUsage,
                      "rank %d: mismatched calls: rank %d (%s) went on to a later collective without taking part "
                      "in this rank's %s through the shared-memory mailbox (ranks disagree on the call, or on "
                      "COLL_ALGO or COLL_MAILBOX_BYTES)",
                      comm->rank, r, collCommPeerHost(comm, r), mbFnName((uint32_t)sig->fn));
}

/* Waits until every peer published call seq in slot parity p; fails early
 * when a peer announced another call (mbCheckAnnounced). */
static collResult_t mbWaitAll(collComm_t comm, struct collMailbox* m, uint32_t seq, int p, uint64_t tag,
                              const collSig* sig) {
  const char* what = mbFnName((uint32_t)sig->fn);
  collIdle w;
  collIdleInit(comm, &w);
  int n = comm->nranks;
  for (int r = 0; r < n;) {
    if (r == comm->rank) {
      r++;
      continue;
    }
    _Atomic uint32_t* word = &mbSlot(m, n, r, p)->seq;
    uint32_t v = atomic_load_explicit(word, memory_order_acquire);
    if ((int32_t)(v - seq) >= 0) {
      r++;
      continue;
    }
    collResult_t e = mbCheckAnnounced(comm, m, r, tag, sig);
    /* the peer may have published and moved on since the first load */
    if (e != collSuccess && (int32_t)(atomic_load_explicit(word, memory_order_acquire) - seq) < 0) return e;
    if (e != collSuccess) continue;
    if (w.sleeping && (atomic_load(mbFailed(m, r)) || mbPeerExited(m, r)))
      return collSetError(collRemoteError, "rank %d: %s: rank %d (%s, pid %d) %s", comm->rank, what, r,
                          collCommPeerHost(comm, r), (int)comm->peers[r].pid,
                          atomic_load(mbFailed(m, r)) ? "failed" : "exited");
    collIdleFutex(&w, word, v, mbSleepers(m));
    e = collIdleStep(comm, &w, 0, what, r);
    if (e != collSuccess) return e;
  }
  if (w.idleSince != 0) collObsWaitDone(comm); /* the wait's time, to its last clock read */
  return collSuccess;
}

/* Every peer's signature must equal ours (it names the call, count, type,
 * op, accumulation mode and call number). */
static collResult_t mbCheckSignatures(collComm_t comm, struct collMailbox* m, const mbSlotHdr* mine, int p,
                                      const collSig* sig) {
  for (int r = 0; r < comm->nranks; r++) {
    const mbSlotHdr* s = mbSlot(m, comm->nranks, r, p);
    if (s->tag != mine->tag) return collSigMismatch(comm, r, s->tag, mine->tag, sig);
    if (s->prevTag != mine->prevTag) { /* e.g. broadcasts with different roots: they only sent */
      collSig ps;
      if (!collSigFromTag(mine->prevTag, comm->nranks, &ps)) ps = *sig;
      collSigMismatch(comm, r, s->prevTag, mine->prevTag, &ps);
      char why[512];
      snprintf(why, sizeof why, "%s", collLastErrorMessage());
      return collSetError(collInvalidUsage,
                          "rank %d: %s: the previous collective call was mismatched (it returned success: no rank "
                          "read the other's data): %s",
                          comm->rank, mbFnName((uint32_t)sig->fn), why);
    }
  }
  return collSuccess;
}

/* out = slot[0] op slot[1] op ... in rank order, from byte offset off. */
static void mbReduceAll(struct collMailbox* m, int n, int p, size_t off, collReduceFn fn, void* out, size_t count) {
  fn(out, mbData(mbSlot(m, n, 0, p)) + off, mbData(mbSlot(m, n, 1, p)) + off, count);
  for (int r = 2; r < n; r++) fn(out, out, mbData(mbSlot(m, n, r, p)) + off, count);
}

/* out = op over every rank's slot, in rank order, accumulated in float32 and
 * rounded once (float16/bfloat16 with sig->wide); avg divides before. */
static void mbReduceWide(struct collMailbox* m, int n, int p, size_t off, const collOp* op, void* out, size_t count) {
  collReduceFn f32 = collReduceGetFn(collFloat32, op->op);
  float acc[512], x[512];
  for (size_t i = 0; i < count; i += 512) {
    size_t k = count - i < 512 ? count - i : 512, at = off + i * 2;
    collReduceWiden(acc, mbData(mbSlot(m, n, 0, p)) + at, k, op->dtype);
    for (int r = 1; r < n; r++) {
      collReduceWiden(x, mbData(mbSlot(m, n, r, p)) + at, k, op->dtype);
      f32(acc, acc, x, k);
    }
    collReduceNarrow((char*)out + i * 2, acc, k, op->dtype, op->op == collAvg ? n : 1);
  }
}

size_t collMailboxSlotBytes(collComm_t comm) { return comm->mailbox ? comm->mailbox->slotBytes : 0; }

collResult_t collMailboxRound(collComm_t comm, const void* data, size_t bytes, uint64_t tag, const collSig* sig) {
  struct collMailbox* m = comm->mailbox;
  int n = comm->nranks;
  if (!m || bytes > m->slotBytes)
    return collSetError(collInternalError, "mailbox: a round of %zu bytes does not fit (slot %zu)", bytes,
                        m ? m->slotBytes : 0);
  uint32_t seq = ++m->seq;
  int p = (int)(seq & 1);
  mbSlotHdr* mine = mbSlot(m, n, comm->rank, p);
  if (bytes) memcpy(mbData(mine), data, bytes);
  mine->tag = tag;
  mine->prevTag = m->prevTag; /* as collMailboxRun: the previous collective is checked here too */
  atomic_store(&mine->seq, seq); /* seq_cst: ordered before the sleepers load */
  if (atomic_load(mbSleepers(m)) > 0) syscall(SYS_futex, &mine->seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
  collResult_t r = mbWaitAll(comm, m, seq, p, tag, sig);
  if (r == collSuccess) r = mbCheckSignatures(comm, m, mine, p, sig);
  return r;
}

/* In the header line, after the sleepers' count (zero-filled at creation). */
_Atomic uint64_t* collMailboxCounter(collComm_t comm) {
  return comm->mailbox ? (_Atomic uint64_t*)(comm->mailbox->base + 8) : NULL;
}

const void* collMailboxPeerData(collComm_t comm, int r) {
  struct collMailbox* m = comm->mailbox;
  return mbData(mbSlot(m, comm->nranks, r, (int)(m->seq & 1)));
}

collResult_t collMailboxRun(collComm_t comm, const collOp* op, uint64_t tag, const collSig* sig) {
  struct collMailbox* m = comm->mailbox;
  int n = comm->nranks, me = comm->rank;
  uint32_t seq = ++m->seq;
  int p = (int)(seq & 1);
  size_t es = collTypeSize(op->dtype), bytes = op->count * es;
  /* a native float16/bfloat16 average publishes its input times 1/nranks */
  int preMul = op->op == collAvg && op->fn != COLL_FN_ALLGATHER && collTypeIsHalf(op->dtype) && !sig->wide;
  mbSlotHdr* mine = mbSlot(m, n, me, p);
  if (preMul) collReducePreMul(mbData(mine), op->sendbuff, mbPublished(op, n) / es, op->dtype, n);
  else memcpy(mbData(mine), op->sendbuff, mbPublished(op, n));
  mine->tag = tag;
  mine->prevTag = m->prevTag;
  atomic_store(&mine->seq, seq); /* seq_cst: ordered before the sleepers load */
  if (atomic_load(mbSleepers(m)) > 0) syscall(SYS_futex, &mine->seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
  collResult_t r = mbWaitAll(comm, m, seq, p, tag, sig);
  if (r == collSuccess) r = mbCheckSignatures(comm, m, mine, p, sig);
  if (r != collSuccess) return collEngineFail(comm, r);
  if (op->fn == COLL_FN_ALLGATHER) {
    for (int q = 0; q < n; q++) memcpy((char*)op->recvbuff + (size_t)q * bytes, mbData(mbSlot(m, n, q, p)), bytes);
    return collSuccess;
  }
  /* all-reduce: the whole vector; reduce-scatter: this rank's block */
  size_t off = op->fn == COLL_FN_REDUCESCATTER ? (size_t)me * bytes : 0;
  if (sig->wide) {
    mbReduceWide(m, n, p, off, op, op->recvbuff, op->count);
    return collSuccess;
  }
  mbReduceAll(m, n, p, off, collReduceGetFn(op->dtype, op->op), op->recvbuff, op->count);
  if (op->op == collAvg && !preMul) collReduceAvgFinish(op->recvbuff, op->count, op->dtype, n);
  return collSuccess;
}
