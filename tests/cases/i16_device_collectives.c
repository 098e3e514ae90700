/*
 * i16_device_collectives.c - issue 16: every collective, send/recv and
 * all-to-all on CUDA device buffers gives exactly the bytes of the same call
 * on host buffers.
 *
 * For all-reduce, all-gather, reduce-scatter, broadcast, reduce, a send/recv
 * ring and an all-to-all (a group of sends and receives), every data type,
 * the five ops (each reduction type meets every op), counts 0, 1, 1031 (odd)
 * and 5000 (several pieces of COLL_CUDA_STAGE_CHUNK=4096, set by the
 * .cmake), in place and out of place, on 2-4 ranks as threads of one
 * process or as processes: each call runs on device buffers (cuMemAlloc),
 * in turn with stream NULL (blocking), on a collStreamCreateCuda stream
 * (then cuStreamSynchronize) and on a collStreamCreate stream (then
 * collStreamSynchronize), and once more on host buffers with stream NULL;
 * the result bytes must be equal. As threads, one thread then drives every
 * rank in one blocking group of in-place all-reduces (one process, several
 * communicators). Inputs are small integers (exact in every
 * type, whatever the order of the reduction), float16/bfloat16 from a table
 * of exact bit patterns.
 *
 * Usage: case_i16_device_collectives threads|procs NRANKS. Without a usable
 * CUDA driver (COLL_CUDA_LIBRARY) it skips (77), saying why.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "coll.h"
#include "helper_i16_dev.h"
#include "reduce/reduce.h"
#include "../integration/mp_harness.h"

#ifndef COLL_HAVE_CUDA
int main(void) {
  printf("SKIP: libcoll built without CUDA\n");
  return DEV_SKIP;
}
#else

enum { AR, AG, RS, BC, RD, SR, A2A, NFN };
static const char* fnName[NFN] = {"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "sendrecv",
                                  "alltoall"};
static const size_t sizes[] = {0, 1, 1031, 5000};
enum { NSIZES = sizeof sizes / sizeof sizes[0] };
static const char* modeName[3] = {"NULL stream", "CUDA stream", "coll stream"};

/* exact float16 / bfloat16 bits of -2..3 */
static const uint16_t f16[6] = {0xC000, 0xBC00, 0x0000, 0x3C00, 0x4000, 0x4200};
static const uint16_t bf16[6] = {0xC000, 0xBF80, 0x0000, 0x3F80, 0x4000, 0x4040};

/* element i of rank r's input of case seed, a small integer in type t */
static void put(void* buf, size_t i, collDataType_t t, int v) {
  switch (t) {
    case collInt8: ((int8_t*)buf)[i] = (int8_t)v; break;
    case collUint8: ((uint8_t*)buf)[i] = (uint8_t)(v + 5); break;
    case collInt32: ((int32_t*)buf)[i] = v; break;
    case collUint32: ((uint32_t*)buf)[i] = (uint32_t)(v + 5); break;
    case collInt64: ((int64_t*)buf)[i] = v; break;
    case collUint64: ((uint64_t*)buf)[i] = (uint64_t)(v + 5); break;
    case collFloat16: ((uint16_t*)buf)[i] = f16[(v + 5) % 6]; break;
    case collFloat32: ((float*)buf)[i] = (float)v; break;
    case collFloat64: ((double*)buf)[i] = v; break;
    default: ((uint16_t*)buf)[i] = bf16[(v + 5) % 6]; break;
  }
}

static void fillInput(void* buf, size_t n, collDataType_t t, int rank, int seed) {
  for (size_t i = 0; i < n; i++) put(buf, i, t, (int)((rank * 7 + i * 3 + (size_t)seed) % 11) - 5);
}

typedef struct {
  int nranks;
  collComm_t* comms; /* threads mode */
  int failures;
} Job;

/* The call of fn on (send, recv) with count, on stream st (NULL: blocking). */
static collResult_t issue(int fn, const void* send, void* recv, size_t count, collDataType_t t, collRedOp_t op,
                          int root, collComm_t comm, collStream_t st, int rank, int n) {
  size_t es = collTypeSize(t);
  switch (fn) {
    case AR: return collAllReduce(send, recv, count, t, op, comm, st);
    case AG: return collAllGather(send, recv, count, t, comm, st);
    case RS: return collReduceScatter(send, recv, count, t, op, comm, st);
    case BC: return collBroadcast(send, recv, count, t, root, comm, st);
    case RD: return collReduce(send, recv, count, t, op, root, comm, st);
    case SR: {
      collGroupStart();
      collSend(send, count, t, (rank + 1) % n, comm, st);
      collRecv(recv, count, t, (rank + n - 1) % n, comm, st);
      return collGroupEnd();
    }
    default: {
      collGroupStart();
      for (int p = 0; p < n; p++) {
        collSend((const char*)send + (size_t)p * count * es, count, t, p, comm, st);
        collRecv((char*)recv + (size_t)p * count * es, count, t, p, comm, st);
      }
      return collGroupEnd();
    }
  }
}

static int body(collComm_t comm, int rank, int n, void* arg) {
  (void)arg;
  if (!devSetup(0)) return 1;
  collCommSetTimeout(comm, 60); /* a rank that fails a check stops: its peers then fail too, in bounded time */
  CUstream us = devStream();
  collStream_t cs, ps;
  if (collStreamCreateCuda(comm, us, &cs) != collSuccess || collStreamCreate(comm, &ps) != collSuccess) {
    fprintf(stderr, "rank %d: stream creation: %s\n", rank, collGetLastError(NULL));
    return 1;
  }
  size_t maxBytes = sizes[NSIZES - 1] * 8 * (size_t)n;
  char *hs = malloc(maxBytes), *hr = malloc(maxBytes), *out = malloc(maxBytes), *init = malloc(maxBytes);
  char *ds = devAlloc(maxBytes), *dr = devAlloc(maxBytes);
  int fails = 0, calls = 0;
  for (size_t i = 0; i < maxBytes; i++) init[i] = (char)(0x5a ^ (i * 131));
  for (int fn = 0; fn < NFN; fn++)
    for (int t = 0; t < collNumTypes; t++)
      for (int si = 0; si < NSIZES; si++)
        for (int ip = 0; ip < 2; ip++) {
          if (ip && (fn == SR || fn == A2A)) continue;
          int nops = fn == AR && si == 2 ? collNumOps : 1; /* all-reduce of 1031: every op of every type */
          for (int k = 0; k < nops; k++) {
            collRedOp_t op = (collRedOp_t)(nops > 1 ? k : (t + si + ip + fn) % collNumOps);
            collDataType_t dt = (collDataType_t)t;
            size_t c = sizes[si], es = collTypeSize(dt), nn = (size_t)n;
            int root = (int)((t + si) % nn), mode = calls++ % 3;
            size_t sElems = fn == RS || fn == A2A ? c * nn : c, rElems = fn == AG || fn == A2A ? c * nn : c;
            /* in place: the send data inside the recv buffer (or, reduce-scatter, the reverse) */
            size_t big = (sElems > rElems ? sElems : rElems) * es;
            size_t sOff = 0, rOff = 0;
            if (ip && fn == AG) sOff = (size_t)rank * c * es;
            if (ip && fn == RS) rOff = (size_t)rank * c * es;
            memcpy(hr, init, maxBytes);
            if (ip) {
              fillInput(hr + sOff, sElems, dt, rank, fn * 31 + si);
            } else {
              fillInput(hs, sElems, dt, rank, fn * 31 + si);
            }
            /* host reference */
            const char* hsend = ip ? hr + sOff : hs;
            char* hrecv = hr + rOff;
            char *dsend = ip ? dr + sOff : ds, *drecv = dr + rOff;
            devCopy(dr, hr, maxBytes);
            if (!ip) devCopy(ds, hs, sElems * es);
            collResult_t r = issue(fn, hsend, hrecv, c, dt, op, root, comm, NULL, rank, n);
            if (r != collSuccess) {
              fprintf(stderr, "rank %d: host %s: %s\n", rank, fnName[fn], collGetLastError(NULL));
              return fails + 1;
            }
            collStream_t st = mode == 0 ? NULL : mode == 1 ? cs : ps;
            r = issue(fn, dsend, drecv, c, dt, op, root, comm, st, rank, n);
            if (r == collSuccess && mode == 1 && COLL_CU(cuStreamSynchronize)(us) != CUDA_SUCCESS) r = collSystemError;
            if (r == collSuccess && mode == 2) r = collStreamSynchronize(ps);
            if (r == collSuccess && mode == 1) r = collStreamQuery(cs);
            if (r != collSuccess) {
              fprintf(stderr, "rank %d: device %s type %d op %d count %zu %s, %s: %s\n", rank, fnName[fn], t,
                      (int)op, c, ip ? "in place" : "out of place", modeName[mode], collGetLastError(NULL));
              return fails + 1;
            }
            devCopy(out, dr, maxBytes);
            /* compare the result region (a non-root's reduce has none) */
            size_t from = ip && fn == AG ? 0 : rOff, len = ip && fn == AG ? big : rElems * es;
            if (fn == RD && rank != root) len = 0;
            if (memcmp(out + from, hr + from, len) != 0) {
              size_t i = 0;
              while (out[from + i] == hr[from + i]) i++;
              fprintf(stderr,
                      "rank %d of %d: %s type %d op %d count %zu %s, %s: byte %zu differs: device 0x%02x host "
                      "0x%02x\n",
                      rank, n, fnName[fn], t, (int)op, c, ip ? "in place" : "out of place", modeName[mode], i,
                      (unsigned char)out[from + i], (unsigned char)hr[from + i]);
              fails++;
            }
          }
        }
  if (rank == 0) printf("rank 0: %d calls on device buffers, each equal to the host call\n", calls);
  collStreamDestroy(cs);
  collStreamDestroy(ps);
  collDevFree(ds);
  collDevFree(dr);
  COLL_CU(cuStreamDestroy)(us);
  free(hs), free(hr), free(out), free(init);
  return fails;
}

typedef struct {
  collComm_t comm;
  int rank, n, fails;
} ThreadArg;

static void* threadMain(void* p) {
  ThreadArg* a = p;
  a->fails = body(a->comm, a->rank, a->n, NULL);
  return NULL;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "threads";
  int n = argc > 2 ? atoi(argv[2]) : 2;
  if (n < 1 || n > 8) return 2;
  if (strcmp(mode, "procs") == 0) {
    /* no CUDA in the parent before the fork: each rank loads the driver
     * itself; a child probes whether there is one */
    int pr = devProbe();
    if (pr) return pr;
    int rc = collMpRun(n, 240, body, NULL);
    printf("%s: %d ranks as processes\n", rc ? "FAIL" : "PASS", n);
    return rc;
  }
  if (!devSetup(0)) return DEV_SKIP;
  collComm_t comms[8];
  if (collCommInitAll(comms, n, NULL) != collSuccess) {
    fprintf(stderr, "collCommInitAll: %s\n", collGetLastError(NULL));
    return 1;
  }
  pthread_t th[8];
  ThreadArg a[8];
  for (int r = 0; r < n; r++) {
    a[r] = (ThreadArg){comms[r], r, n, 0};
    pthread_create(&th[r], NULL, threadMain, &a[r]);
  }
  int fails = 0;
  for (int r = 0; r < n; r++) {
    pthread_join(th[r], NULL);
    fails += a[r].fails;
  }
  /* one thread drives every rank in one blocking group (NCCL's one process,
   * several GPUs pattern): each rank's input comes by a copy on the legacy
   * default stream, which the group waits for */
  enum { GC = 3001 };
  int32_t *gin = malloc((size_t)n * GC * sizeof *gin), *gout = malloc(GC * sizeof *gout), *gd[8];
  for (int r = 0; r < n; r++) {
    gd[r] = devAlloc(GC * sizeof(int32_t));
    for (int i = 0; i < GC; i++) gin[r * GC + i] = r * 10 + i % 13;
    devCopyAsync(gd[r], gin + r * GC, GC * sizeof(int32_t), NULL);
  }
  collGroupStart();
  for (int r = 0; r < n; r++) collAllReduce(gd[r], gd[r], GC, collInt32, collSum, comms[r], NULL);
  collResult_t gr = collGroupEnd();
  if (gr != collSuccess) fprintf(stderr, "group over %d comms: %s\n", n, collGetLastError(NULL)), fails++;
  for (int r = 0; r < n && gr == collSuccess; r++) {
    devCopy(gout, gd[r], GC * sizeof(int32_t));
    for (int i = 0; i < GC; i++) {
      int32_t want = 0;
      for (int q = 0; q < n; q++) want += q * 10 + i % 13;
      if (gout[i] != want) {
        fprintf(stderr, "group over %d comms: rank %d element %d is %d, expected %d\n", n, r, i, gout[i], want);
        fails++;
        break;
      }
    }
  }
  for (int r = 0; r < n; r++) collDevFree(gd[r]);
  free(gin), free(gout);
  for (int r = 0; r < n; r++) collCommDestroy(comms[r]);
  printf("%s: %d ranks as threads, %d failed checks\n", fails ? "FAIL" : "PASS", n, fails);
  return fails != 0;
}
#endif
