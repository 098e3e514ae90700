/*
 * test_collectives.c - every collective, data type and op on N real rank
 * processes over TCP loopback, with exact expected values and guard zones.
 *
 * Usage: test_collectives NRANKS (forks the ranks), or one process per rank
 * under a launcher that sets RANK/WORLD_SIZE (tests/integration/netns.sh).
 * Rank r contributes (r+1) * (i % M + 1) to element i (M keeps float16 and
 * bfloat16 sums exact for the job's size; max/min compare the wrapped
 * integer values), so a missing, duplicated or misplaced contribution
 * changes the result. Receive buffers sit between 64-byte guard zones that
 * must stay untouched, and out-of-place send buffers must not change.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "coll.h"
#include "mp_harness.h"
#include "reduce/reduce.h"

#define GUARD 64
#define GUARD_BYTE 0xA5

typedef struct {
  int passed[64], failed[64];
} collTally;

static const collDataType_t kTypes[] = {collInt8,    collUint8,   collInt32,   collUint32, collInt64,
                                        collUint64,  collFloat16, collBfloat16, collFloat32, collFloat64};
static const collRedOp_t kOps[] = {collSum, collProd, collMax, collMin, collAvg};

/* Input value of rank r at index i for an op, as an exact integer. */
static int gNranks = 1; /* the job's size: bounds the bfloat16 pattern */

static int64_t inputValue(collRedOp_t op, collDataType_t t, int r, size_t i) {
  if (op == collProd) return 1 + (int64_t)((r + i) % 2);
  /* bfloat16 holds integers exactly up to 256: keep n(n+1)/2 * m <= 256 */
  int64_t tri = (int64_t)gNranks * (gNranks + 1) / 2;
  int64_t m = t == collBfloat16 ? (256 / tri > 1 ? 256 / tri : 1) : 13;
  return (int64_t)(r + 1) * (int64_t)(i % (size_t)m + 1);
}

/* Stores integer v into element i of buf as type t (wrapping for integers). */
static void storeValue(void* buf, size_t i, collDataType_t t, double v) {
  switch (t) {
    case collInt8: ((int8_t*)buf)[i] = (int8_t)(uint8_t)(int64_t)v; break;
    case collUint8: ((uint8_t*)buf)[i] = (uint8_t)(int64_t)v; break;
    case collInt32: ((int32_t*)buf)[i] = (int32_t)(uint32_t)(int64_t)v; break;
    case collUint32: ((uint32_t*)buf)[i] = (uint32_t)(int64_t)v; break;
    case collInt64: ((int64_t*)buf)[i] = (int64_t)v; break;
    case collUint64: ((uint64_t*)buf)[i] = (uint64_t)(int64_t)v; break;
    case collFloat16: ((uint16_t*)buf)[i] = collFloatToHalf((float)v); break;
    case collBfloat16: ((uint16_t*)buf)[i] = collFloatToBf16((float)v); break;
    case collFloat32: ((float*)buf)[i] = (float)v; break;
    default: ((double*)buf)[i] = v; break;
  }
}

/* Wraps an exact integer into type t's range and back (for integer types). */
static int64_t wrapInt(collDataType_t t, int64_t v) {
  switch (t) {
    case collInt8: return (int8_t)(uint8_t)v;
    case collUint8: return (uint8_t)v;
    case collInt32: return (int32_t)(uint32_t)v;
    case collUint32: return (uint32_t)v;
    default: return v;
  }
}

static int isFloat(collDataType_t t) {
  return t == collFloat16 || t == collBfloat16 || t == collFloat32 || t == collFloat64;
}

/* Expected reduction of element i over nranks, written into exp[i]. */
static void storeExpected(void* exp, size_t i, collDataType_t t, collRedOp_t op, int nranks) {
  int64_t acc = inputValue(op, t, 0, i);
  for (int r = 1; r < nranks; r++) {
    int64_t v = inputValue(op, t, r, i);
    if (op == collMax || op == collMin) { /* compare what the type holds */
      v = wrapInt(t, v);
      acc = wrapInt(t, acc);
    }
    if (op == collSum || op == collAvg) acc += v;
    else if (op == collProd) acc *= v;
    else if (op == collMax) acc = v > acc ? v : acc;
    else acc = v < acc ? v : acc;
  }
  if (op != collAvg) {
    storeValue(exp, i, t, (double)acc);
    return;
  }
  if (!isFloat(t)) {
    storeValue(exp, i, t, (double)(wrapInt(t, acc) / nranks));
  } else if (t == collFloat64) {
    storeValue(exp, i, t, (double)acc / nranks);
  } else {
    float q = (float)acc / (float)nranks;
    storeValue(exp, i, t, (double)q);
  }
}

/* A receive buffer with guard zones on both sides. */
typedef struct {
  char* raw;
  size_t bytes;
} guarded;

static char* gAlloc(guarded* g, size_t bytes) {
  g->bytes = bytes;
  g->raw = malloc(bytes + 2 * GUARD);
  memset(g->raw, GUARD_BYTE, bytes + 2 * GUARD);
  return g->raw + GUARD;
}

static int gIntact(const guarded* g) {
  for (size_t i = 0; i < GUARD; i++)
    if ((uint8_t)g->raw[i] != GUARD_BYTE || (uint8_t)g->raw[GUARD + g->bytes + i] != GUARD_BYTE) return 0;
  return 1;
}

typedef struct {
  collComm_t comm;
  int rank, n;
  collTally* tally;
} ctx;

static void report(ctx* c, int ok, const char* what, collDataType_t t, collRedOp_t op, size_t count, int inPlace,
                   int root, const char* detail) {
  if (ok) {
    c->tally->passed[c->rank]++;
    return;
  }
  c->tally->failed[c->rank]++;
  fprintf(stderr, "FAIL rank %d/%d %s type=%s op=%s count=%zu %s root=%d: %s\n", c->rank, c->n, what,
          collTypeName(t), collOpName(op), count, inPlace ? "in-place" : "out-of-place", root, detail);
}

/* Compares n elements of got against exp; describes the first mismatch. */
static int sameBytes(const void* got, const void* exp, size_t n, collDataType_t t, char* detail, size_t dlen) {
  size_t es = collTypeSize(t);
  for (size_t i = 0; i < n; i++)
    if (memcmp((const char*)got + i * es, (const char*)exp + i * es, es) != 0) {
      uint64_t g = 0, e = 0;
      memcpy(&g, (const char*)got + i * es, es);
      memcpy(&e, (const char*)exp + i * es, es);
      snprintf(detail, dlen, "element %zu is 0x%llx, expected 0x%llx", i, (unsigned long long)g,
               (unsigned long long)e);
      return 0;
    }
  return 1;
}

static void fillInput(void* buf, size_t count, collDataType_t t, collRedOp_t op, int r, size_t first) {
  for (size_t i = 0; i < count; i++) storeValue(buf, i, t, (double)inputValue(op, t, r, first + i));
}

/* all-reduce, reduce-scatter, reduce: reductions. */
static void testReduction(ctx* c, const char* what, collDataType_t t, collRedOp_t op, size_t count, int inPlace,
                          int root) {
  size_t es = collTypeSize(t), n = (size_t)c->n;
  int isRS = what[0] == 'r' && what[6] == '-';                   /* "reduce-scatter" */
  int isReduce = strcmp(what, "reduce") == 0;
  size_t sendCount = isRS ? count * n : count, recvCount = count;
  guarded g;
  char* recv = gAlloc(&g, (isRS && inPlace ? sendCount : recvCount) * es);
  char* send = malloc(sendCount * es + 1);
  char* exp = malloc(recvCount * es + 1);
  char* sendCopy = malloc(sendCount * es + 1);
  fillInput(send, sendCount, t, op, c->rank, 0);
  memcpy(sendCopy, send, sendCount * es);
  size_t first = isRS ? (size_t)c->rank * count : 0;
  for (size_t i = 0; i < recvCount; i++) storeExpected(exp, i, t, op, c->n);
  if (isRS) { /* expected of element first+i */
    for (size_t i = 0; i < recvCount; i++) storeExpected(exp, i, t, op, c->n);
    char* tmp = malloc(sendCount * es + 1);
    for (size_t i = 0; i < sendCount; i++) storeExpected(tmp, i, t, op, c->n);
    memcpy(exp, tmp + first * es, recvCount * es);
    free(tmp);
  }
  const void* sbuf = send;
  void* rbuf = recv;
  if (inPlace) {
    memcpy(recv, send, sendCount * es);
    sbuf = recv;
    rbuf = isRS ? recv + first * es : recv;
  }
  collResult_t res;
  if (isRS) res = collReduceScatter(sbuf, rbuf, count, t, op, c->comm, NULL);
  else if (isReduce) res = collReduce(sbuf, rbuf, count, t, op, root, c->comm, NULL);
  else res = collAllReduce(sbuf, rbuf, count, t, op, c->comm, NULL);
  char detail[256] = "";
  int ok = res == collSuccess;
  if (!ok) snprintf(detail, sizeof detail, "returned %s: %s", collGetErrorString(res), collGetLastError(c->comm));
  if (ok && (!isReduce || c->rank == root)) ok = sameBytes(rbuf, exp, recvCount, t, detail, sizeof detail);
  if (ok && !gIntact(&g)) ok = 0, snprintf(detail, sizeof detail, "guard zone around recvbuff was overwritten");
  if (ok && !inPlace && memcmp(send, sendCopy, sendCount * es) != 0)
    ok = 0, snprintf(detail, sizeof detail, "sendbuff was modified");
  report(c, ok, what, t, op, count, inPlace, root, detail);
  free(g.raw);
  free(send);
  free(exp);
  free(sendCopy);
}

/* all-gather and broadcast: data movement; value identifies origin rank and index. */
static void testMovement(ctx* c, const char* what, collDataType_t t, size_t count, int inPlace, int root) {
  size_t es = collTypeSize(t), n = (size_t)c->n;
  int isAG = what[1] == 'l';
  size_t recvCount = isAG ? count * n : count;
  guarded g;
  char* recv = gAlloc(&g, recvCount * es);
  char* send = malloc(count * es + 1);
  char* exp = malloc(recvCount * es + 1);
  fillInput(send, count, t, collSum, isAG ? c->rank : root, 0);
  for (size_t i = 0; i < recvCount; i++)
    storeValue(exp, i, t, (double)inputValue(collSum, t, isAG ? (int)(i / (count ? count : 1)) : root, isAG ? i % count : i));
  const void* sbuf = send;
  if (inPlace) {
    char* mine = isAG ? recv + (size_t)c->rank * count * es : recv;
    memcpy(mine, send, count * es);
    sbuf = mine;
  }
  collResult_t res = isAG ? collAllGather(sbuf, recv, count, t, c->comm, NULL)
                          : collBroadcast(sbuf, recv, count, t, root, c->comm, NULL);
  char detail[256] = "";
  int ok = res == collSuccess;
  if (!ok) snprintf(detail, sizeof detail, "returned %s: %s", collGetErrorString(res), collGetLastError(c->comm));
  if (ok) ok = sameBytes(recv, exp, recvCount, t, detail, sizeof detail);
  if (ok && !gIntact(&g)) ok = 0, snprintf(detail, sizeof detail, "guard zone around recvbuff was overwritten");
  report(c, ok, what, t, collSum, count, inPlace, root, detail);
  free(g.raw);
  free(send);
  free(exp);
}

/* Group of sends and receives: all-to-all (every peer, self included). */
static void testAllToAll(ctx* c, collDataType_t t, size_t count) {
  size_t es = collTypeSize(t), n = (size_t)c->n;
  guarded g;
  char* recv = gAlloc(&g, count * n * es);
  char* send = malloc(count * n * es + 1);
  char* exp = malloc(count * n * es + 1);
  /* block p of rank r's send goes to rank p: value (r+1)*(p*count+i+1) */
  for (size_t p = 0; p < n; p++) fillInput(send + p * count * es, count, t, collSum, c->rank, p * 7 + 0);
  for (size_t p = 0; p < n; p++) fillInput(exp + p * count * es, count, t, collSum, (int)p, (size_t)c->rank * 7);
  collResult_t res = collGroupStart();
  for (size_t p = 0; p < n && res == collSuccess; p++) {
    res = collSend(send + p * count * es, count, t, (int)p, c->comm, NULL);
    if (res == collSuccess) res = collRecv(recv + p * count * es, count, t, (int)p, c->comm, NULL);
  }
  collResult_t e2 = collGroupEnd();
  if (res == collSuccess) res = e2;
  char detail[256] = "";
  int ok = res == collSuccess;
  if (!ok) snprintf(detail, sizeof detail, "returned %s: %s", collGetErrorString(res), collGetLastError(c->comm));
  if (ok) ok = sameBytes(recv, exp, count * n, t, detail, sizeof detail);
  if (ok && !gIntact(&g)) ok = 0, snprintf(detail, sizeof detail, "guard zone around recvbuff was overwritten");
  report(c, ok, "all-to-all (group send/recv)", t, collSum, count, 0, -1, detail);
  free(g.raw);
  free(send);
  free(exp);
}

/* COLL_TEST_QUICK=1: every collective, op and count on a representative
 * subset of types (element sizes 1, 2, 4, 8; integer, half and float paths)
 * whose expected values stay exact up to 17 ranks (used by the netns tests). */
static const collDataType_t kQuickTypes[] = {collUint8, collFloat16, collFloat32, collInt64};

static int body(collComm_t comm, int rank, int nranks, void* arg) {
  ctx c = {comm, rank, nranks, arg};
  gNranks = nranks;
  const char* q = getenv("COLL_TEST_QUICK");
  int quick = q && *q && strcmp(q, "0") != 0;
  const collDataType_t* types = quick ? kQuickTypes : kTypes;
  size_t ntypes = quick ? sizeof kQuickTypes / sizeof kQuickTypes[0] : sizeof kTypes / sizeof kTypes[0];
  const size_t counts[] = {0, 1, 7, 1023};
  for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
    size_t count = counts[ci];
    for (size_t ti = 0; ti < ntypes; ti++) {
      collDataType_t t = types[ti];
      for (int inPlace = 0; inPlace < 2; inPlace++) {
        for (size_t oi = 0; oi < sizeof kOps / sizeof kOps[0]; oi++) {
          int root = (int)((ci + ti + oi) % (size_t)nranks);
          testReduction(&c, "all-reduce", t, kOps[oi], count, inPlace, 0);
          testReduction(&c, "reduce-scatter", t, kOps[oi], count, inPlace, 0);
          testReduction(&c, "reduce", t, kOps[oi], count, inPlace, root);
        }
        testMovement(&c, "all-gather", t, count, inPlace, 0);
        testMovement(&c, "broadcast", t, count, inPlace, (int)((ci + ti) % (size_t)nranks));
      }
      testAllToAll(&c, t, count);
    }
  }
  /* every root, and large counts that span many slices and both channels */
  for (int root = 0; root < nranks; root++) {
    testReduction(&c, "reduce", collFloat32, collSum, 1023, root % 2, root);
    testMovement(&c, "broadcast", collInt32, 1023, root % 2, root);
  }
  const size_t big = 1048579;
  testReduction(&c, "all-reduce", collFloat32, collSum, big, 0, 0);
  testReduction(&c, "all-reduce", quick ? collUint8 : collInt8, collMax, big, 1, 0);
  testReduction(&c, "reduce-scatter", collFloat64, collSum, big / (size_t)nranks + 1, 0, 0);
  testMovement(&c, "all-gather", collUint8, big / (size_t)nranks + 3, 1, 0);
  testMovement(&c, "broadcast", collBfloat16, big, 0, nranks - 1);
  testReduction(&c, "reduce", collInt64, collMin, big, 1, nranks / 2);
  testAllToAll(&c, collFloat32, big / (size_t)nranks / 4);
  collResult_t r = collBarrier(comm, NULL);
  if (r != collSuccess) {
    fprintf(stderr, "rank %d: barrier failed: %s\n", rank, collGetLastError(comm));
    c.tally->failed[rank]++;
  }
  return c.tally->failed[rank];
}

/* Launcher mode (RANK and WORLD_SIZE set, e.g. by tests/integration/netns.sh
 * or torchrun): this process is one rank; it runs the body once on a
 * communicator from collCommInitFromEnv and prints its own tally. */
static int runFromEnv(void) {
  int rank = atoi(getenv("RANK")), n = atoi(getenv("WORLD_SIZE"));
  if (n < 1 || n > 64 || rank < 0 || rank >= n) {
    fprintf(stderr, "launcher mode: RANK=%s WORLD_SIZE=%s (1..64 ranks)\n", getenv("RANK"), getenv("WORLD_SIZE"));
    return 2;
  }
  alarm(605); /* as a forked rank: never hang for good */
  collTally tally;
  memset(&tally, 0, sizeof tally);
  collComm_t comm;
  collResult_t res = collCommInitFromEnv(&comm, NULL);
  if (res != collSuccess) {
    fprintf(stderr, "rank %d: collCommInitFromEnv: %s: %s\n", rank, collGetErrorString(res), collGetLastError(NULL));
    return 2;
  }
  body(comm, rank, n, &tally);
  res = collCommDestroy(comm);
  if (res != collSuccess) {
    fprintf(stderr, "rank %d: collCommDestroy: %s\n", rank, collGetLastError(NULL));
    tally.failed[rank]++;
  }
  printf("rank %d: %d passed, %d failed\n", rank, tally.passed[rank], tally.failed[rank]);
  fflush(stdout);
  return tally.failed[rank] ? 1 : 0;
}

int main(int argc, char** argv) {
  if (getenv("RANK") && getenv("WORLD_SIZE")) return runFromEnv();
  int n = argc > 1 ? atoi(argv[1]) : 2;
  if (n < 1 || n > 64) {
    fprintf(stderr, "usage: %s NRANKS (1..64)\n", argv[0]);
    return 2;
  }
  collTally* tally = mmap(NULL, sizeof *tally, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  memset(tally, 0, sizeof *tally);
  int rc = collMpRun(n, 600, body, tally);
  int passed = 0, failed = 0;
  for (int r = 0; r < n; r++) passed += tally->passed[r], failed += tally->failed[r];
  if (rc && !failed) failed = 1; /* a rank died or hung */
  printf("collectives on %d ranks: %d passed, %d failed\n", n, passed, failed);
  munmap(tally, sizeof *tally);
  return failed ? 1 : 0;
}
