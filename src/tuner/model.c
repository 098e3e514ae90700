/*
 * model.c - the cost model's inputs for one communicator (cost.h).
 *
 * Defaults come from the topology's link estimates (src/topo/topo_links.c)
 * and from constants measured on commodity x86 hosts with coll's own
 * engine (software latency of one shm/tcp message, per-step overhead):
 *   shm path:  latency 3 us + 1 us per step, bandwidth 0.6 x the memcpy
 *              bandwidth of the ranks' host-memory link (collTopoHostLinkBw:
 *              their GPUs do not count; each byte is copied into and out of
 *              the shared ring);
 *   a network transport inside a node (shm off or not shared): the one that
 *              serves this rank's pairs (comm->interSlot) gives its own
 *              latency and link speed (getProperties), except tcp, whose
 *              loopback figures were measured: 15 us, 1.5 GB/s;
 *   between nodes: the topology's NIC latency and bandwidth.
 * COLL_TUNE_CALIBRATE=1 replaces them with measurements taken at init:
 * ping-pong between rank 0 and its first peer on each path (8 B x 50) for
 * the latency, 2 + 4 messages of 1 MiB streamed one way for the bandwidth
 * (the first two not timed: streamBw), and rank 0's own reduction and
 * copy speed. CPU oversubscription (cpuShare) is the largest ratio of ranks
 * to cores over all nodes. All of it is allgathered so every rank uses rank
 * 0's numbers (identical inputs -> identical choices on every rank).
 * Device-resident calls have their own model (devmodel.c).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/comm.h"
#include "engine/engine.h"
#include "misc/log.h"
#include "misc/param.h"
#include "reduce/reduce.h"
#include "topo/topo.h"
#include "tuner/model.h"

#define CAL_SMALL_ITERS 50
#define CAL_LARGE_BYTES (1u << 20)
#define CAL_LARGE_ITERS 4

static double nowUs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* First pair of ranks (a < b) on the given path, a = 0 when possible. */
static int pathPair(const collTuneLayout* l, int path, int* a, int* b) {
  for (int i = 0; i < l->nranks; i++)
    for (int j = i + 1; j < l->nranks; j++)
      if (collCostPath(l, i, j) == path) {
        *a = i;
        *b = j;
        return 1;
      }
  return 0;
}

const char* collTuneLocalNetName(collComm_t comm) {
  int k = comm->interSlot;
  return k > 0 && comm->nets[k] ? comm->nets[k]->name : "tcp";
}

/* Latency and bandwidth of a same-node pair over the network transport
 * that serves this rank's pairs: tcp's loopback (coll's engine over lo,
 * measured), else what the transport says of its device (an unknown
 * figure keeps tcp's). */
static void localNetModel(collComm_t comm, double* latUs, double* bwGBs) {
  *latUs = 15.0;
  *bwGBs = 1.5;
  int k = comm->interSlot;
  if (strcmp(collTuneLocalNetName(comm), "tcp") == 0) return;
  collNetProperties_t p;
  memset(&p, 0, sizeof p);
  if (comm->nets[k]->getProperties(comm->netDev[k], &p) != collSuccess) {
    collClearError();
    return;
  }
  if (p.latencyUs > 0) *latUs = p.latencyUs;
  if (p.speedGbps > 0) *bwGBs = p.speedGbps / 8.0;
}

static void modelDefaults(collComm_t comm, const collTuneLayout* l, collTuneModel* m) {
  memset(m, 0, sizeof *m);
  int a, b;
  double memBw = 13.0;
  if (pathPair(l, COLL_PATH_SHM, &a, &b) || pathPair(l, COLL_PATH_LOCAL, &a, &b))
    memBw = collTopoHostLinkBw(comm, a, b);
  m->latUs[COLL_PATH_SHM] = 3.0;
  m->bwGBs[COLL_PATH_SHM] = 0.6 * memBw;
  localNetModel(comm, &m->latUs[COLL_PATH_LOCAL], &m->bwGBs[COLL_PATH_LOCAL]);
  m->latUs[COLL_PATH_NET] = 50.0;
  m->bwGBs[COLL_PATH_NET] = 1.25;
  if (pathPair(l, COLL_PATH_NET, &a, &b)) {
    m->latUs[COLL_PATH_NET] = collTopoLinkLat(comm, a, b);
    m->bwGBs[COLL_PATH_NET] = collTopoLinkBw(comm, a, b);
  }
  m->latUs[COLL_PATH_SELF] = 0.0;
  m->bwGBs[COLL_PATH_SELF] = memBw;
  m->reduceGBs = 0.4 * memBw;
  m->copyGBs = memBw;
  m->stepUs = 1.0;
  /* 8 B ring on 8 ranks over 2 cores: ~27 us per hop, 20 of them waiting
   * for the 3 other ranks of the core (2026-11-29) */
  m->wakeUs = 20.0 / 3.0;
  m->cpuShare = 1.0;
}

/* Blocking point-to-point through the engine (used only at init). */
static collResult_t p2p(collComm_t comm, int send, int peer, void* buf, size_t bytes) {
  collOp op;
  memset(&op, 0, sizeof op);
  op.fn = send ? COLL_FN_SEND : COLL_FN_RECV;
  op.sendbuff = buf;
  op.recvbuff = buf;
  op.count = bytes;
  op.dtype = collUint8;
  op.peer = peer;
  return collEngineRun(comm, &op, 1);
}

/* Ping-pong between a and b: one-way time per message of `bytes`, us. */
static collResult_t pingPong(collComm_t comm, int a, int b, char* buf, size_t bytes, int iters, double* oneWayUs) {
  int me = comm->rank, peer = me == a ? b : a;
  collResult_t r = collSuccess;
  double t0 = 0;
  for (int i = -1; i < iters && r == collSuccess; i++) { /* i = -1: warm-up (connects) */
    if (i == 0) t0 = nowUs();
    if (me == a) {
      if ((r = p2p(comm, 1, peer, buf, bytes)) == collSuccess) r = p2p(comm, 0, peer, buf, bytes);
    } else {
      if ((r = p2p(comm, 0, peer, buf, bytes)) == collSuccess) r = p2p(comm, 1, peer, buf, bytes);
    }
  }
  *oneWayUs = (nowUs() - t0) / (2.0 * iters);
  return r;
}

/* Streaming bandwidth from a to b, GB/s: a sends iters + 2 messages of
 * `bytes` back to back; b times the last iters, from the end of the second
 * to the end of the last. The first drains whatever burst a shaper or
 * switch buffer lets through faster than the line rate (a ping-pong of
 * single messages measured that burst: 0.23 GB/s on a link shaped to
 * 1 Gbit/s with a 512 KiB bucket); from the second on, the data already
 * waiting in the receiver's socket buffer is the same at both ends of the
 * window. b sends the figure back, so both ranks return it. */
static collResult_t streamBw(collComm_t comm, int a, int b, char* buf, size_t bytes, int iters, double* gbs) {
  int me = comm->rank, peer = me == a ? b : a;
  collResult_t r = collSuccess;
  double t0 = 0, bw = 0;
  for (int i = 0; i <= iters + 1 && r == collSuccess; i++) {
    r = p2p(comm, me == a, peer, buf, bytes);
    if (me == b && i == 1) t0 = nowUs();
  }
  if (me == b && r == collSuccess) {
    double dt = nowUs() - t0;
    bw = dt > 0 ? (double)bytes * iters / (dt * 1e3) : 0;
  }
  if (r == collSuccess) r = p2p(comm, me == b, peer, &bw, sizeof bw);
  *gbs = bw;
  return r;
}

/* Measures this rank's part of the calibration into m (rank 0: local
 * speeds; pair members: their path). */
static collResult_t calibrate(collComm_t comm, const collTuneLayout* l, collTuneModel* m) {
  char* buf = calloc(1, CAL_LARGE_BYTES);
  if (!buf) return collSetError(collSystemError, "tuner: out of memory for calibration");
  collResult_t r = collSuccess;
  for (int path = COLL_PATH_SHM; path < COLL_PATH_COUNT && r == collSuccess; path++) {
    int a, b;
    if (!pathPair(l, path, &a, &b) || (comm->rank != a && comm->rank != b)) continue;
    double small = 0, gbs = 0;
    if ((r = pingPong(comm, a, b, buf, 8, CAL_SMALL_ITERS, &small)) != collSuccess) break;
    if ((r = streamBw(comm, a, b, buf, CAL_LARGE_BYTES, CAL_LARGE_ITERS, &gbs)) != collSuccess) break;
    m->latUs[path] = small > m->stepUs ? small - m->stepUs : small;
    if (gbs > 0) m->bwGBs[path] = gbs;
  }
  if (comm->rank == 0 && r == collSuccess) {
    size_t n = CAL_LARGE_BYTES / 2 / sizeof(float);
    float* x = (float*)buf;
    collReduceFn red = collReduceGetFn(collFloat, collSum);
    double t0 = nowUs();
    for (int i = 0; i < CAL_LARGE_ITERS; i++) red(x, x, x + n, n);
    double t1 = nowUs();
    for (int i = 0; i < CAL_LARGE_ITERS; i++) memcpy(x, x + n, n * sizeof(float));
    double t2 = nowUs();
    double bytes = (double)n * sizeof(float) * CAL_LARGE_ITERS;
    if (t1 > t0) m->reduceGBs = bytes / ((t1 - t0) * 1e3);
    if (t2 > t1) m->copyGBs = bytes / ((t2 - t1) * 1e3);
  }
  free(buf);
  return r;
}

typedef struct {
  collTuneModel model;
  int32_t localRanks, cores, measured[COLL_PATH_COUNT];
} modelShare;

collResult_t collTuneModelInit(collComm_t comm, const collTuneLayout* l, collTuneModel* out) {
  collTuneModel m;
  modelDefaults(comm, l, &m);
  int calib = collParamInt(COLL_PARAM_TUNE_CALIBRATE) != 0 && comm->nranks > 1;
  collTuneModel before = m;
  if (calib) {
    collResult_t r = calibrate(comm, l, &m);
    if (r != collSuccess) return r;
  }
  modelShare* all = calloc((size_t)comm->nranks, sizeof(modelShare));
  if (!all) return collSetError(collSystemError, "tuner: out of memory");
  modelShare* me = &all[comm->rank];
  me->model = m;
  me->localRanks = comm->kernelRanks; /* emulated nodes on one machine share its cores */
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  me->cores = cores > 0 ? (int32_t)cores : 1;
  for (int p = 0; p < COLL_PATH_COUNT; p++)
    me->measured[p] = memcmp(&m.latUs[p], &before.latUs[p], sizeof(double)) != 0 ||
                      memcmp(&m.bwGBs[p], &before.bwGBs[p], sizeof(double)) != 0;
  collResult_t r = collBootAllGather(&comm->boot, all, sizeof(modelShare));
  if (r == collSuccess) {
    *out = all[0].model; /* local speeds and defaults: rank 0's */
    for (int p = 0; p < COLL_PATH_COUNT; p++)
      for (int i = 0; i < comm->nranks; i++)
        if (all[i].measured[p]) { /* a pair member measured this path */
          out->latUs[p] = all[i].model.latUs[p];
          out->bwGBs[p] = all[i].model.bwGBs[p];
          break;
        }
    for (int i = 0; i < comm->nranks; i++) {
      double share = (double)all[i].localRanks / (double)all[i].cores;
      if (share > out->cpuShare) out->cpuShare = share;
    }
  }
  free(all);
  return r;
}

int collTuneNetLinks(collComm_t comm) {
  const struct collTopo* t = comm->topo;
  if (!t || !comm->rankNode || comm->nnodes <= 1) return 1;
  int* links = calloc((size_t)comm->nnodes, sizeof(int)); /* distinct known NICs per node */
  if (!links) return 1;
  for (int r = 0; r < comm->nranks; r++) {
    int nic = t->peers[r].rank.nic, node = comm->rankNode[r], seen = 0;
    if (nic < 0 || node < 0 || node >= comm->nnodes) continue;
    for (int q = 0; q < r && !seen; q++) seen = comm->rankNode[q] == node && t->peers[q].rank.nic == nic;
    links[node] += !seen;
  }
  int fewest = 0;
  for (int node = 0; node < comm->nnodes; node++) {
    int n = links[node] > 0 ? links[node] : 1; /* unknown NICs: the node's ranks share one */
    if (fewest == 0 || n < fewest) fewest = n;
  }
  free(links);
  return fewest;
}
