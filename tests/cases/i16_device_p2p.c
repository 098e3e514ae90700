/*
 * i16_device_p2p.c - issue 16: inside a node, collectives on device
 * buffers run device-resident (engine/devpath.c): the usual schedule with
 * the reductions in GPU kernels and the data over the p2p transport, not
 * through pinned host staging.
 *
 * Correctness (threads|procs N [nostage|delay]): all-reduce, reduce-scatter,
 * all-gather, broadcast and reduce, every data type, ops in turn (the
 * 1031-element all-reduce: every op of every type), counts 0, 1, 1031 and
 * 5000 (COLL_CHUNKSIZE=4096 from the .cmake: several slices on several
 * channels), in place and out of place, each call in turn on stream NULL,
 * a collStreamCreateCuda stream and a collStreamCreate stream, byte-equal to
 * the same call on host buffers. Then, exactly: the calls that ran
 * device-resident (collDevPathStats) are every device call except count 0
 * and float16/bfloat16 sum/prod/avg (their float32 working copy is host
 * code), those are the only ones that went through staging
 * (collDevStagedCalls), and p2p connections carried bytes both ways.
 * `nostage` leaves out the float16/bfloat16 sum/prod/avg calls and runs
 * with FAKECUDA_FAIL=cuMemHostAlloc:2 (the .cmake): the first cuMemHostAlloc
 * is the stream gate's, the second would be the staging buffer, so any
 * staged call fails (the staged code fails this variant at its first
 * call). `delay` runs fewer types and counts (FAKECUDA_DELAY_US: every fake
 * stream operation starts late, so a missing wait shows as wrong data).
 *
 * Faults (fault kill|copy|kernel, 3 processes): after a correct warm-up
 * all-reduce that ran device-resident, rank 2 exits while ranks 0 and 1
 * are inside the next one (kill), or in that call rank 1's second
 * cuMemcpyAsync (a p2p ring copy of its data) or first cuLaunchKernel (a
 * reduction kernel) fails (the test wraps those entries of coll's driver
 * table, collCudaFns). Every surviving rank's call fails within
 * 15 s (not at its 60 s timeout), its CUDA stream is released (the gate
 * opened: cuStreamSynchronize returns), collStreamQuery and
 * collCommGetAsyncError report the error, and after collCommDestroy the
 * process has the descriptors, coll memfds and /dev/shm entries it had
 * before collCommInitRank.
 *
 * Without a usable CUDA driver (COLL_CUDA_LIBRARY) it skips (77).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "coll.h"
#include "core/devcall.h"
#include "engine/devpath.h"
#include "helper_fail.h"
#include "helper_i16_dev.h"
#include "reduce/reduce.h"
#include "../integration/mp_harness.h"

#ifndef COLL_HAVE_CUDA
int main(void) {
  printf("SKIP: libcoll built without CUDA\n");
  return DEV_SKIP;
}
#else

enum { AR = DEV_AR, AG = DEV_AG, RS = DEV_RS, BC = DEV_BC, RD = DEV_RD, NFN = DEV_NCOLL };
static const size_t sizes[] = {0, 1, 1031, 5000};
enum { NSIZES = sizeof sizes / sizeof sizes[0] };
static const char* modeName[3] = {"NULL stream", "CUDA stream", "coll stream"};
enum { VAR_ALL, VAR_NOSTAGE, VAR_DELAY };

/* exact float16 / bfloat16 bits of -2..3 */
static const uint16_t f16[6] = {0xC000, 0xBC00, 0x0000, 0x3C00, 0x4000, 0x4200};
static const uint16_t bf16[6] = {0xC000, 0xBF80, 0x0000, 0x3F80, 0x4000, 0x4040};

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

static int halfReducing(int fn, collDataType_t t, collRedOp_t op) {
  return (fn == AR || fn == RS || fn == RD) && (t == collFloat16 || t == collBfloat16) &&
         (op == collSum || op == collProd || op == collAvg);
}

static int body(collComm_t comm, int rank, int n, void* arg) {
  int var = *(const int*)arg;
  if (!devSetup(0)) return 1;
  collCommSetTimeout(comm, 60);
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
  unsigned long long wantPath = 0, wantStaged = 0;
  for (size_t i = 0; i < maxBytes; i++) init[i] = (char)(0x5a ^ (i * 131));
  for (int fn = 0; fn < NFN; fn++)
    for (int t = 0; t < collNumTypes; t++)
      for (int si = 0; si < NSIZES; si++)
        for (int ip = 0; ip < 2; ip++) {
          if (var == VAR_DELAY && (t % 3 != 0 || si == 0 || si == 2)) continue; /* int8, uint32, float16, bfloat16 */
          int nops = fn == AR && si == 2 ? collNumOps : 1;
          for (int k = 0; k < nops; k++) {
            collRedOp_t op = (collRedOp_t)(nops > 1 ? k : (t + si + ip + fn) % collNumOps);
            collDataType_t dt = (collDataType_t)t;
            if (var == VAR_NOSTAGE && halfReducing(fn, dt, op)) continue;
            size_t c = sizes[si], es = collTypeSize(dt), nn = (size_t)n;
            int root = (int)((t + si) % nn), mode = calls++ % 3;
            size_t sElems = fn == RS ? c * nn : c, rElems = fn == AG ? c * nn : c;
            size_t big = (sElems > rElems ? sElems : rElems) * es;
            size_t sOff = ip && fn == AG ? (size_t)rank * c * es : 0, rOff = ip && fn == RS ? (size_t)rank * c * es : 0;
            memcpy(hr, init, maxBytes);
            if (ip) fillInput(hr + sOff, sElems, dt, rank, fn * 31 + si);
            else fillInput(hs, sElems, dt, rank, fn * 31 + si);
            const char* hsend = ip ? hr + sOff : hs;
            char* hrecv = hr + rOff;
            char *dsend = ip ? dr + sOff : ds, *drecv = dr + rOff;
            devCopy(dr, hr, maxBytes);
            if (!ip) devCopy(ds, hs, sElems * es);
            collResult_t r = devIssue(fn, hsend, hrecv, c, dt, op, root, comm, NULL);
            if (r != collSuccess) {
              fprintf(stderr, "rank %d: host %s: %s\n", rank, devCollName(fn), collGetLastError(NULL));
              return fails + 1;
            }
            if (c > 0 && halfReducing(fn, dt, op)) wantStaged++;
            else if (c > 0) wantPath++;
            collStream_t st = mode == 0 ? NULL : mode == 1 ? cs : ps;
            r = devIssue(fn, dsend, drecv, c, dt, op, root, comm, st);
            if (r == collSuccess && mode == 1 && COLL_CU(cuStreamSynchronize)(us) != CUDA_SUCCESS) r = collSystemError;
            if (r == collSuccess && mode == 2) r = collStreamSynchronize(ps);
            if (r == collSuccess && mode == 1) r = collStreamQuery(cs);
            if (r != collSuccess) {
              fprintf(stderr, "rank %d: device %s type %d op %d count %zu %s, %s: %s\n", rank, devCollName(fn), t,
                      (int)op, c, ip ? "in place" : "out of place", modeName[mode], collGetLastError(NULL));
              return fails + 1;
            }
            devCopy(out, dr, maxBytes);
            size_t from = ip && fn == AG ? 0 : rOff, len = ip && fn == AG ? big : rElems * es;
            if (fn == RD && rank != root) len = 0;
            if (memcmp(out + from, hr + from, len) != 0) {
              size_t i = 0;
              while (out[from + i] == hr[from + i]) i++;
              fprintf(stderr,
                      "rank %d of %d: %s type %d op %d count %zu %s, %s: byte %zu differs: device 0x%02x host "
                      "0x%02x\n",
                      rank, n, devCollName(fn), t, (int)op, c, ip ? "in place" : "out of place", modeName[mode], i,
                      (unsigned char)out[from + i], (unsigned char)hr[from + i]);
              fails++;
            }
          }
        }
  collDevPathStats_t ps2;
  collDevPathStats(comm, &ps2);
  unsigned long long staged = collDevStagedCalls(comm);
  if (ps2.state != 1 || ps2.calls != wantPath || staged != wantStaged || ps2.p2pBytesSent == 0 ||
      ps2.p2pBytesRecv == 0) {
    fprintf(stderr,
            "rank %d: device path state %d, %llu calls device-resident (expected %llu), %llu staged (expected %llu), "
            "p2p bytes sent %llu received %llu over %d connections (expected both > 0)\n",
            rank, ps2.state, ps2.calls, wantPath, staged, wantStaged, ps2.p2pBytesSent, ps2.p2pBytesRecv,
            ps2.p2pConns);
    fails++;
  } else if (rank == 0) {
    printf("rank 0: %d device calls equal to the host calls; %llu ran device-resident (%llu + %llu bytes over %d p2p "
           "connections), %llu staged (float16/bfloat16 sum/prod/avg)\n",
           calls, ps2.calls, ps2.p2pBytesSent, ps2.p2pBytesRecv, ps2.p2pConns, staged);
  }
  collStreamDestroy(cs);
  collStreamDestroy(ps);
  collDevFree(ds);
  collDevFree(dr);
  COLL_CU(cuStreamDestroy)(us);
  free(hs), free(hr), free(out), free(init);
  return fails;
}

/* ---- faults ------------------------------------------------------------------ */

enum { FAULT_KILL, FAULT_COPY, FAULT_KERNEL };
enum { FC = 1 << 16 }; /* floats: 256 KiB per rank, several slices */

static int faultKind; /* set before the fork */

/* Rank 1's driver entries, wrapped once armed (after the warm-up): the
 * 2nd cuMemcpyAsync (a p2p ring copy of the call's data) or the 1st
 * cuLaunchKernel (a copy or reduction kernel) returns an error. */
static __typeof__(cuMemcpyAsync)* realCopy;
static __typeof__(cuLaunchKernel)* realLaunch;
static int armed, seen;
static CUresult failingCopy(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  if (armed && ++seen == 2) return CUDA_ERROR_UNKNOWN;
  return realCopy(dst, src, n, s);
}
static CUresult failingLaunch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                              unsigned bz, unsigned shm, CUstream s, void** args, void** extra) {
  if (armed && ++seen == 1) return CUDA_ERROR_LAUNCH_FAILED;
  return realLaunch(f, gx, gy, gz, bx, by, bz, shm, s, args, extra);
}

/* comm NULL, arg the unique id (collMpRunRaw) */
static int faultBody(collComm_t unused, int rank, int n, void* arg) {
  (void)unused;
  const collUniqueId* id = arg;
  if (!devSetup(0)) return 1;
  if (rank == 1) {
    realCopy = COLL_CU(cuMemcpyAsync);
    realLaunch = COLL_CU(cuLaunchKernel);
    if (faultKind == FAULT_COPY) COLL_CU(cuMemcpyAsync) = failingCopy;
    if (faultKind == FAULT_KERNEL) COLL_CU(cuLaunchKernel) = failingLaunch;
  }
  CUstream us = devStream();
  float* h = malloc(FC * sizeof *h);
  float* d = devAlloc(FC * sizeof *d);
  for (int i = 0; i < FC; i++) h[i] = (float)(rank + i % 7);
  int fds0 = failCountFds(), mem0 = failCountMemfds();
  pid_t me = getpid();
  int shm0 = failCountDevShm(&me, 1);
  collComm_t comm;
  if (collCommInitRank(&comm, n, *id, rank) != collSuccess) {
    fprintf(stderr, "rank %d: init: %s\n", rank, collGetLastError(NULL));
    return 1;
  }
  collCommSetTimeout(comm, 60);
  collStream_t cs;
  if (collStreamCreateCuda(comm, us, &cs) != collSuccess) {
    fprintf(stderr, "rank %d: collStreamCreateCuda: %s\n", rank, collGetLastError(NULL));
    return 1;
  }
  int fails = 0;
  /* warm-up: connections made, result checked */
  {
    devCopy(d, h, FC * sizeof *h);
    collResult_t r = collAllReduce(d, d, FC, collFloat32, collSum, comm, cs);
    if (r == collSuccess && COLL_CU(cuStreamSynchronize)(us) != CUDA_SUCCESS) r = collSystemError;
    if (r == collSuccess) r = collStreamQuery(cs);
    if (r != collSuccess) {
      fprintf(stderr, "rank %d: warm-up all-reduce: %s\n", rank, collGetLastError(NULL));
      return 1;
    }
    devCopy(h, d, FC * sizeof *h);
    for (int i = 0; i < FC; i++) {
      float want = (float)(n * (n - 1) / 2 + n * (i % 7));
      if (h[i] != want) {
        fprintf(stderr, "rank %d: warm-up element %d is %g, expected %g\n", rank, i, h[i], want);
        return 1;
      }
    }
    collDevPathStats_t st;
    collDevPathStats(comm, &st);
    if (st.state != 1 || st.calls != 1 || collDevStagedCalls(comm) != 0) {
      fprintf(stderr, "rank %d: warm-up did not run device-resident (state %d, %llu calls, %llu staged)\n", rank,
              st.state, st.calls, collDevStagedCalls(comm));
      return 1;
    }
    armed = 1;
    if (rank == 2 && faultKind == FAULT_KILL) {
      usleep(300 * 1000); /* the others are inside the next all-reduce by now */
      _exit(0);
    }
  }
  double t0 = failNow();
  collResult_t r = collAllReduce(d, d, FC, collFloat32, collSum, comm, cs);
  CUresult sr = COLL_CU(cuStreamSynchronize)(us); /* the gate must open, failed or not */
  double dt = failNow() - t0;
  collResult_t q = collStreamQuery(cs), ae = collSuccess;
  char msg[512];
  snprintf(msg, sizeof msg, "%s", collGetLastError(NULL));
  collCommGetAsyncError(comm, &ae);
  if (sr != CUDA_SUCCESS || (r == collSuccess && q == collSuccess) || ae == collSuccess || dt > 15.0) {
    fprintf(stderr,
            "rank %d: fault %d: call %d, stream sync %d, query %d, async error %d after %.2f s (expected a failure "
            "within 15 s, the stream released): %s\n",
            rank, faultKind, (int)r, (int)sr, (int)q, (int)ae, dt, msg);
    fails++;
  } else {
    printf("rank %d: fault %d: failed after %.2f s, stream released: %s\n", rank, faultKind, dt, msg);
  }
  collStreamDestroy(cs);
  collCommDestroy(comm);
  int fds1 = failCountFds(), mem1 = failCountMemfds(), shm1 = failCountDevShm(&me, 1);
  if (fds1 != fds0 || mem1 != mem0 || shm1 != shm0) {
    fprintf(stderr, "rank %d: after destroy %d fds (%d before init), %d coll memfds (%d), %d /dev/shm entries (%d)\n",
            rank, fds1, fds0, mem1, mem0, shm1, shm0);
    fails++;
  }
  collDevFree(d);
  COLL_CU(cuStreamDestroy)(us);
  free(h);
  return fails;
}

typedef struct {
  collComm_t comm;
  int rank, n, var, fails;
} ThreadArg;

static void* threadMain(void* p) {
  ThreadArg* a = p;
  a->fails = body(a->comm, a->rank, a->n, &a->var);
  return NULL;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "threads";
  if (strcmp(mode, "fault") == 0) {
    const char* k = argc > 2 ? argv[2] : "kill";
    faultKind = strcmp(k, "copy") == 0 ? FAULT_COPY : strcmp(k, "kernel") == 0 ? FAULT_KERNEL : FAULT_KILL;
    int pr = devProbe();
    if (pr) return pr;
    int rc = collMpRunRaw(3, 120, faultBody, NULL, NULL);
    printf("%s: fault %s on 3 ranks as processes\n", rc ? "FAIL" : "PASS", k);
    return rc;
  }
  int n = argc > 2 ? atoi(argv[2]) : 2;
  const char* v = argc > 3 ? argv[3] : "";
  int var = strcmp(v, "nostage") == 0 ? VAR_NOSTAGE : strcmp(v, "delay") == 0 ? VAR_DELAY : VAR_ALL;
  if (n < 2 || n > 8) return 2;
  if (strcmp(mode, "procs") == 0) {
    int pr = devProbe();
    if (pr) return pr;
    int rc = collMpRun(n, 240, body, &var);
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
    a[r] = (ThreadArg){comms[r], r, n, var, 0};
    pthread_create(&th[r], NULL, threadMain, &a[r]);
  }
  int fails = 0;
  for (int r = 0; r < n; r++) {
    pthread_join(th[r], NULL);
    fails += a[r].fails;
  }
  for (int r = 0; r < n; r++) collCommDestroy(comms[r]);
  printf("%s: %d ranks as threads (one fake GPU), %d failed checks\n", fails ? "FAIL" : "PASS", n, fails);
  return fails != 0;
}
#endif
