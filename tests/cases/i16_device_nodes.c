/*
 * i16_device_nodes.c - issue 16: a communicator that spans nodes runs
 * collectives on device buffers device-resident (engine/devpath.c) where
 * the network transport reads GPU memory: no staging through pinned host
 * memory, GPU memory registered with the transport through regMrDmaBuf.
 *
 * The ranks are processes presented as two nodes (COLL_HOSTID per process:
 * ranks [0, n/2) on one, the rest on the other); between the nodes they
 * talk over the test transport plugin net_gdr (tests/unit/plugins: a NIC
 * that claims COLL_PTR_CUDA | COLL_PTR_DMABUF and moves the bytes through
 * the dma-buf mapping of the fake GPU memory; COLL_NET_PLUGIN from the
 * .cmake), inside a node over p2p as in i16_device_p2p.
 *
 * run N [nogpu]: all-reduce, reduce-scatter, all-gather, broadcast and
 * reduce, types int8, int32, uint64, float32, float64, every op (in turn),
 * counts 1, 1031 and 5000 (COLL_CHUNKSIZE=4096: several slices and
 * channels), in place and out of place, on device buffers (cuMemAlloc) with
 * a collStreamCreateCuda stream, byte-equal to the same call on host
 * buffers. Then, exactly: every device call ran device-resident
 * (collDevPathStats) and none was staged (collDevStagedCalls), the engine
 * registered GPU memory only through regMrDmaBuf (collEngineRegGetStats:
 * > 0 of those, 0 through regMr), the plugin moved bytes through its
 * dma-buf mappings and was asked to iflush. `nogpu`: the last rank's
 * plugin says COLL_PTR_HOST only (NETGDR_NO_CUDA=1): every rank decides
 * the same, every device call is staged (collDevStagedCalls = all of them,
 * 0 device-resident), results equal to the host calls all the same.
 * `staged` (COLL_NET_GDR=0 from the .cmake): the same, by the knob.
 *
 * dead: 4 ranks, a correct warm-up all-reduce device-resident, then rank 3
 * exits while the others are inside the next one: each survivor's call
 * fails within 15 s (not its 60 s timeout), its CUDA stream is released,
 * and after collCommDestroy the process has the descriptors it had before
 * collCommInitRank (the dma-buf fds, mappings' fds, sockets back).
 *
 * Without a usable CUDA driver (COLL_CUDA_LIBRARY) it skips (77).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "coll.h"
#include "core/devcall.h"
#include "engine/devpath.h"
#include "engine/reg.h"
#include "helper_exact.h"
#include "helper_fail.h"
#include "helper_i16_dev.h"
#include "../integration/mp_harness.h"

#ifndef COLL_HAVE_CUDA
int main(void) {
  printf("SKIP: libcoll built without CUDA\n");
  return DEV_SKIP;
}
#else

enum { AR = DEV_AR, AG = DEV_AG, RS = DEV_RS, BC = DEV_BC, RD = DEV_RD, NFN = DEV_NCOLL };
static const size_t sizes[] = {1, 1031, 5000};
enum { NSIZES = sizeof sizes / sizeof sizes[0] };
static const collDataType_t types[] = {collInt8, collInt32, collUint64, collFloat32, collFloat64};
enum { NTYPES = sizeof types / sizeof types[0] };

static int noGpu, stagedAll; /* set before the fork: the last rank's NIC lacks GPU support; every call staged */

/* The plugin's counter `name` (it is loaded already: COLL_NET_PLUGIN). */
static uint64_t pluginCounter(const char* name) {
  void* h = dlopen(COLL_NET_GDR_PLUGIN, RTLD_NOW | RTLD_NOLOAD);
  uint64_t* p = h ? dlsym(h, name) : NULL;
  uint64_t v = p ? __atomic_load_n(p, __ATOMIC_RELAXED) : (uint64_t)-1;
  if (h) dlclose(h);
  return v;
}

static collResult_t initOnNode(collComm_t* comm, int n, const collUniqueId* id, int rank) {
  char host[32];
  snprintf(host, sizeof host, "gdrnode%d", rank < n / 2 ? 0 : 1);
  setenv("COLL_HOSTID", host, 1);
  if (noGpu && rank == n - 1) setenv("NETGDR_NO_CUDA", "1", 1);
  collResult_t r = collCommInitRank(comm, n, *id, rank);
  if (r != collSuccess) fprintf(stderr, "rank %d: init: %s\n", rank, collGetLastError(NULL));
  else collCommSetTimeout(*comm, 60);
  return r;
}

static int runBody(collComm_t unused, int rank, int n, void* arg) {
  (void)unused;
  if (!devSetup(0)) return 1;
  collComm_t comm;
  if (initOnNode(&comm, n, arg, rank) != collSuccess) return 1;
  CUstream us = devStream();
  collStream_t cs;
  if (collStreamCreateCuda(comm, us, &cs) != collSuccess) {
    fprintf(stderr, "rank %d: collStreamCreateCuda: %s\n", rank, collGetLastError(NULL));
    return 1;
  }
  size_t maxBytes = sizes[NSIZES - 1] * 8 * (size_t)n;
  char *hs = malloc(maxBytes), *hr = malloc(maxBytes), *out = malloc(maxBytes), *init = malloc(maxBytes);
  char *ds = devAlloc(maxBytes), *dr = devAlloc(maxBytes);
  int fails = 0, calls = 0;
  for (size_t i = 0; i < maxBytes; i++) init[i] = (char)(0x5a ^ (i * 131));
  for (int fn = 0; fn < NFN; fn++)
    for (int t = 0; t < NTYPES; t++)
      for (int si = 0; si < NSIZES; si++)
        for (int ip = 0; ip < 2; ip++) {
          collRedOp_t op = kOps[(t + si + ip + fn) % 5];
          collDataType_t dt = types[t];
          size_t c = sizes[si], es = collTypeSize(dt), nn = (size_t)n;
          int root = (int)((t + si) % nn);
          size_t sElems = fn == RS ? c * nn : c, rElems = fn == AG ? c * nn : c;
          size_t big = (sElems > rElems ? sElems : rElems) * es;
          size_t sOff = ip && fn == AG ? (size_t)rank * c * es : 0, rOff = ip && fn == RS ? (size_t)rank * c * es : 0;
          memcpy(hr, init, maxBytes);
          char* in = ip ? hr + sOff : hs;
          for (size_t i = 0; i < sElems; i++) put(dt, in, i, val(op, rank, i + (size_t)fn, n));
          char *dsend = ip ? dr + sOff : ds, *drecv = dr + rOff;
          devCopy(dr, hr, maxBytes);
          if (!ip) devCopy(ds, hs, sElems * es);
          calls++;
          if (devIssue(fn, in, hr + rOff, c, dt, op, root, comm, NULL) != collSuccess) {
            fprintf(stderr, "rank %d: host %s: %s\n", rank, devCollName(fn), collGetLastError(NULL));
            return fails + 1;
          }
          collResult_t r = devIssue(fn, dsend, drecv, c, dt, op, root, comm, cs);
          if (r == collSuccess && COLL_CU(cuStreamSynchronize)(us) != CUDA_SUCCESS) r = collSystemError;
          if (r == collSuccess) r = collStreamQuery(cs);
          if (r != collSuccess) {
            fprintf(stderr, "rank %d: device %s %s %s count %zu %s: %s\n", rank, devCollName(fn), kTypeNames[dt],
                    kOpNames[op], c, ip ? "in place" : "out of place", collGetLastError(NULL));
            return fails + 1;
          }
          devCopy(out, dr, maxBytes);
          size_t from = ip && fn == AG ? 0 : rOff, len = ip && fn == AG ? big : rElems * es;
          if (fn == RD && rank != root) len = 0;
          if (memcmp(out + from, hr + from, len) != 0) {
            size_t i = 0;
            while (out[from + i] == hr[from + i]) i++;
            fprintf(stderr, "rank %d of %d: %s %s %s count %zu %s: byte %zu differs: device 0x%02x host 0x%02x\n",
                    rank, n, devCollName(fn), kTypeNames[dt], kOpNames[op], c, ip ? "in place" : "out of place", i,
                    (unsigned char)out[from + i], (unsigned char)hr[from + i]);
            fails++;
          }
        }
  collDevPathStats_t ps;
  collDevPathStats(comm, &ps);
  collEngineRegStats rs;
  collEngineRegGetStats(comm, &rs);
  unsigned long long staged = collDevStagedCalls(comm);
  uint64_t devBytes = pluginCounter("collNetGdrDevBytes"), flushes = pluginCounter("collNetGdrFlushes");
  unsigned long long want = (unsigned long long)calls;
  if (stagedAll ? ps.state != -1 || ps.calls != 0 || staged != want || rs.dmabufRegs != 0
            : ps.state != 1 || ps.calls != want || staged != 0 || rs.dmabufRegs == 0 || rs.cudaRegs != 0 ||
                  devBytes == 0 || devBytes == (uint64_t)-1 || flushes == 0 || flushes == (uint64_t)-1) {
    fprintf(stderr,
            "rank %d (%s): device path state %d, %llu calls device-resident, %llu staged of %llu device calls; GPU "
            "registrations %llu through regMrDmaBuf, %llu through regMr; plugin: %llu bytes through dma-buf "
            "mappings, %llu iflush calls\n",
            rank, stagedAll ? "expected staged" : "expected device-resident", ps.state, ps.calls, staged, want, rs.dmabufRegs, rs.cudaRegs,
            (unsigned long long)devBytes, (unsigned long long)flushes);
    fails++;
  } else if (rank == 0) {
    printf("rank 0: %d device calls equal to the host calls; %llu device-resident, %llu staged; %llu GPU "
           "registrations through regMrDmaBuf (%llu cache hits, %llu forgotten as the engine's scratch moved); "
           "%llu bytes through dma-buf, %llu iflush\n",
           calls, ps.calls, staged, rs.dmabufRegs, rs.hits, rs.invalidations, (unsigned long long)devBytes,
           (unsigned long long)flushes);
  }
  collStreamDestroy(cs);
  collCommDestroy(comm);
  collDevFree(ds);
  collDevFree(dr);
  COLL_CU(cuStreamDestroy)(us);
  free(hs), free(hr), free(out), free(init);
  return fails;
}

enum { FC = 1 << 16 }; /* floats: 256 KiB per rank, several slices */

static int deadBody(collComm_t unused, int rank, int n, void* arg) {
  (void)unused;
  if (!devSetup(0)) return 1;
  CUstream us = devStream();
  float* h = malloc(FC * sizeof *h);
  float* d = devAlloc(FC * sizeof *d);
  for (int i = 0; i < FC; i++) h[i] = (float)(rank + i % 7);
  collEngineRegFramesReadable(); /* opens /proc/self/pagemap once per process, before the count */
  int fds0 = failCountFds();
  collComm_t comm;
  if (initOnNode(&comm, n, arg, rank) != collSuccess) return 1;
  collStream_t cs;
  if (collStreamCreateCuda(comm, us, &cs) != collSuccess) {
    fprintf(stderr, "rank %d: collStreamCreateCuda: %s\n", rank, collGetLastError(NULL));
    return 1;
  }
  devCopy(d, h, FC * sizeof *h);
  collResult_t r = collAllReduce(d, d, FC, collFloat32, collSum, comm, cs);
  if (r == collSuccess && COLL_CU(cuStreamSynchronize)(us) != CUDA_SUCCESS) r = collSystemError;
  if (r == collSuccess) r = collStreamQuery(cs);
  if (r != collSuccess) {
    fprintf(stderr, "rank %d: warm-up all-reduce: %s\n", rank, collGetLastError(NULL));
    return 1;
  }
  devCopy(h, d, FC * sizeof *h);
  for (int i = 0; i < FC; i++)
    if (h[i] != (float)(n * (n - 1) / 2 + n * (i % 7))) {
      fprintf(stderr, "rank %d: warm-up element %d is %g\n", rank, i, h[i]);
      return 1;
    }
  collDevPathStats_t st;
  collDevPathStats(comm, &st);
  if (st.state != 1 || st.calls != 1 || collDevStagedCalls(comm) != 0) {
    fprintf(stderr, "rank %d: warm-up did not run device-resident (state %d, %llu calls, %llu staged)\n", rank,
            st.state, st.calls, collDevStagedCalls(comm));
    return 1;
  }
  if (rank == 3) {
    usleep(300 * 1000); /* the others are inside the next all-reduce by now */
    _exit(0);
  }
  double t0 = failNow();
  r = collAllReduce(d, d, FC, collFloat32, collSum, comm, cs);
  CUresult sr = COLL_CU(cuStreamSynchronize)(us); /* the gate must open, failed or not */
  double dt = failNow() - t0;
  collResult_t q = collStreamQuery(cs);
  char msg[512];
  snprintf(msg, sizeof msg, "%s", collGetLastError(NULL));
  int fails = 0;
  if (sr != CUDA_SUCCESS || (r == collSuccess && q == collSuccess) || dt > 15.0) {
    fprintf(stderr, "rank %d: call %d, stream sync %d, query %d after %.2f s (expected a failure within 15 s): %s\n",
            rank, (int)r, (int)sr, (int)q, dt, msg);
    fails++;
  } else {
    printf("rank %d: failed after %.2f s, stream released: %s\n", rank, dt, msg);
  }
  collStreamDestroy(cs);
  collCommDestroy(comm);
  int fds1 = failCountFds();
  if (fds1 != fds0) {
    fprintf(stderr, "rank %d: after destroy %d fds (%d before init)\n", rank, fds1, fds0);
    fails++;
  }
  collDevFree(d);
  COLL_CU(cuStreamDestroy)(us);
  free(h);
  return fails;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "run";
  int pr = devProbe();
  if (pr) return pr;
  if (strcmp(mode, "dead") == 0) {
    int rc = collMpRunRaw(4, 120, deadBody, NULL, NULL);
    printf("%s: a dead rank on the other node, 4 ranks on 2 nodes\n", rc ? "FAIL" : "PASS");
    return rc;
  }
  int n = argc > 2 ? atoi(argv[2]) : 4;
  const char* v = argc > 3 ? argv[3] : "";
  noGpu = strcmp(v, "nogpu") == 0;
  stagedAll = noGpu || strcmp(v, "staged") == 0; /* staged: COLL_NET_GDR=0 from the .cmake */
  if (n < 2 || n > 8) return 2;
  int rc = collMpRunRaw(n, 240, runBody, NULL, NULL);
  printf("%s: %d ranks as processes on 2 nodes%s\n", rc ? "FAIL" : "PASS", n,
         noGpu ? ", one NIC without GPU support: staged" : stagedAll ? ", staged" : ", device-resident");
  return rc;
}
#endif
