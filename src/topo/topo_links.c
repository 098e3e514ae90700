/*
 * topo_links.c - the topology exchange at init and the link classes between
 * ranks that the tuner prices collectives with.
 *
 * Every rank contributes one collTopoPeer (its node's summary + its own
 * placement) to an allgather over the bootstrap ring, so every rank holds the
 * same table and derives the same classes and numbers.
 *
 * Numbers (bandwidth GB/s per direction, latency us one way) and sources:
 *   SELF    13 GB/s, 0 us. Single-thread memcpy of 64 MiB, best of 10, on the
 *           2-vCPU dev VM: 6-13.7 GB/s (noisy, shared host); the top value.
 *   NUMA    13 GB/s (the same memcpy: shared memory moves data by memcpy),
 *           1.0 us: an estimate for a flag hand-off between cores plus the
 *           copy start; NCCL's PCI ring LL hop is the same 1.0 us (tuning.cc
 *           hwLat). Measured on the VM: 10-90 us one way, vCPU contention, not
 *           used.
 *   SOCKET  10 GB/s: NCCL SKL_QPI_BW (src/graph/topo.h), the inter-socket
 *           bandwidth it assumes for Skylake-and-later Intel; latency = NUMA
 *           latency x remote/local NUMA distance of the node (hwloc
 *           NUMALatency: 21/10 on the p5en, p4d and DGX-2 captures, 20/10 on
 *           the X9DRG), 2.0 when the matrix is absent. Also used when a
 *           rank's NUMA node is unknown on a multi-NUMA node.
 *   PCIE    min of the two GPUs' PCIe links x 24/31.5 (NCCL prices Gen4 x16
 *           at 24 GB/s where hwloc reports 31.5 raw), 12 GB/s when unknown
 *           (NCCL PCI_BW, Gen3 x16); capped at SOCKET when the GPUs sit on
 *           different NUMA nodes. 1.0 us (NCCL hwLat PCI, ring LL), x NUMA
 *           distance across sockets.
 *   NVLINK  per-GPU NVLink bandwidth of the summary: NVLinkBandwidth matrix x
 *           20/25 (NCCL's 20 GB/s per NVLink2 link vs the 25 raw in the
 *           matrix) or links x NCCL's per-link GB/s from the NVSwitch
 *           generation (V100 6x20, A100 12x20, H100/H200 18x20.6). 0.6 us
 *           (NCCL hwLat NVLink, ring LL, master).
 *   NET     min of both ranks' NIC speed (sysfs / IB rate), else what the
 *           transport reports (tcp: sysfs speed, 100 Gbit/s on loopback),
 *           else 10 Gbit/s = 1.25 GB/s; latency the larger transport
 *           estimate (tcp: 50 us, 10 us on loopback), else 50 us.
 */
#include <stdlib.h>
#include <string.h>

#include "device/ctxgpu.h"
#include "misc/log.h"
#include "topo/topo_internal.h"

#define COLL_BW_MEMCPY 13.0
#define COLL_BW_SOCKET 10.0
#define COLL_BW_PCI_DEFAULT 12.0
#define COLL_PCI_EFFICIENCY (24.0 / 31.5)
#define COLL_BW_NVL_DEFAULT 20.0
#define COLL_BW_NET_DEFAULT 1.25
#define COLL_LAT_NUMA 1.0
#define COLL_LAT_PCI 1.0
#define COLL_LAT_NVLINK 0.6
#define COLL_LAT_NET_DEFAULT 50.0
#define COLL_NUMA_DIST_DEFAULT 2.0

/* A topology from gathered peers; copies rankNode and peers (topo.h). */
struct collTopo* collTopoCreate(int nranks, int rank, const int* rankNode, const collTopoPeer* peers) {
  struct collTopo* t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->nranks = nranks;
  t->rank = rank;
  t->rankNode = malloc(sizeof(int) * (size_t)nranks);
  t->peers = malloc(sizeof(collTopoPeer) * (size_t)nranks);
  if (!t->rankNode || !t->peers) {
    collTopoDestroy(t);
    return NULL;
  }
  memcpy(t->rankNode, rankNode, sizeof(int) * (size_t)nranks);
  memcpy(t->peers, peers, sizeof(collTopoPeer) * (size_t)nranks);
  return t;
}

/* Frees a topology and its pin set (NULL-safe). */
void collTopoDestroy(struct collTopo* t) {
  if (!t) return;
  hwloc_bitmap_free(t->pinSet);
  free(t->rankNode);
  free(t->peers);
  free(t);
}

/* Printable name of a link class. */
const char* collTopoLinkName(int cls) {
  static const char* n[COLL_LINK_NCLASSES] = {"SELF", "NUMA", "NVLINK", "PCIE", "SOCKET", "NET"};
  return cls >= 0 && cls < COLL_LINK_NCLASSES ? n[cls] : "?";
}

/* The GPU record of a rank, or NULL for host ranks. */
static const collTopoGpu* rankGpu(const collTopoPeer* p) {
  int g = p->rank.gpu;
  return g >= 0 && g < COLL_TOPO_MAX_GPUS && g < p->node.ngpus ? &p->node.gpus[g] : NULL;
}

/* Remote/local NUMA latency ratio of a node. */
static double numaRatio(const collTopoSummary* s) {
  return s->numaDist ? s->numaDist / 10.0 : COLL_NUMA_DIST_DEFAULT;
}

/* Class of the link between ranks a and b of t (valid indices): between
 * their GPUs when gpus is set and they have them, else between their host
 * memories. */
static int classOfMem(const struct collTopo* t, int a, int b, int gpus) {
  if (a == b) return COLL_LINK_SELF;
  if (t->rankNode[a] != t->rankNode[b]) return COLL_LINK_NET;
  const collTopoPeer *pa = &t->peers[a], *pb = &t->peers[b];
  const collTopoGpu *ga = gpus ? rankGpu(pa) : NULL, *gb = gpus ? rankGpu(pb) : NULL;
  if (ga && gb) return (ga->nvlMask >> pb->rank.gpu) & 1u ? COLL_LINK_NVLINK : COLL_LINK_PCIE;
  if (ga || gb) return COLL_LINK_PCIE; /* GPU memory <-> host memory */
  if (pa->node.nnuma <= 1) return COLL_LINK_NUMA;
  return pa->rank.numa >= 0 && pa->rank.numa == pb->rank.numa ? COLL_LINK_NUMA : COLL_LINK_SOCKET;
}

/* Class of the link between ranks a and b of t, their GPUs' when they have them. */
static int classOf(const struct collTopo* t, int a, int b) { return classOfMem(t, a, b, 1); }

/* Whether the GPU(s) of a PCIE link sit on different (or unknown) NUMA nodes. */
static int pciCrossesSockets(const collTopoPeer* pa, const collTopoPeer* pb) {
  const collTopoGpu *ga = rankGpu(pa), *gb = rankGpu(pb);
  int na = ga ? ga->numa : pa->rank.numa, nb = gb ? gb->numa : pb->rank.numa;
  if (pa->node.nnuma <= 1) return 0;
  return na < 0 || nb < 0 || na != nb;
}

/* Bandwidth of a classified link. */
static double bwOf(const struct collTopo* t, int cls, int a, int b) {
  const collTopoPeer *pa = &t->peers[a], *pb = &t->peers[b];
  switch (cls) {
    case COLL_LINK_SELF:
    case COLL_LINK_NUMA: return COLL_BW_MEMCPY;
    case COLL_LINK_SOCKET: return COLL_BW_SOCKET;
    case COLL_LINK_NVLINK: {
      double x = rankGpu(pa)->nvlGBps, y = rankGpu(pb)->nvlGBps, m = x < y ? x : y;
      return m > 0 ? m : COLL_BW_NVL_DEFAULT;
    }
    case COLL_LINK_PCIE: {
      const collTopoGpu *ga = rankGpu(pa), *gb = rankGpu(pb);
      double x = ga ? ga->pciGBps : 0, y = gb ? gb->pciGBps : 0;
      double m = x > 0 && y > 0 ? (x < y ? x : y) : (x > 0 ? x : y);
      double bw = m > 0 ? m * COLL_PCI_EFFICIENCY : COLL_BW_PCI_DEFAULT;
      return pciCrossesSockets(pa, pb) && bw > COLL_BW_SOCKET ? COLL_BW_SOCKET : bw;
    }
    default: {
      double x = pa->rank.netGBps > 0 ? pa->rank.netGBps : COLL_BW_NET_DEFAULT;
      double y = pb->rank.netGBps > 0 ? pb->rank.netGBps : COLL_BW_NET_DEFAULT;
      return x < y ? x : y;
    }
  }
}

/* Latency of a classified link. */
static double latOf(const struct collTopo* t, int cls, int a, int b) {
  const collTopoPeer *pa = &t->peers[a], *pb = &t->peers[b];
  switch (cls) {
    case COLL_LINK_SELF: return 0.0;
    case COLL_LINK_NUMA: return COLL_LAT_NUMA;
    case COLL_LINK_SOCKET: return COLL_LAT_NUMA * numaRatio(&pa->node);
    case COLL_LINK_NVLINK: return COLL_LAT_NVLINK;
    case COLL_LINK_PCIE: return COLL_LAT_PCI * (pciCrossesSockets(pa, pb) ? numaRatio(&pa->node) : 1.0);
    default: {
      double x = pa->rank.netLatUs > 0 ? pa->rank.netLatUs : COLL_LAT_NET_DEFAULT;
      double y = pb->rank.netLatUs > 0 ? pb->rank.netLatUs : COLL_LAT_NET_DEFAULT;
      return x > y ? x : y;
    }
  }
}

/* Class when the comm has no topology (never initialized): node only. */
static int fallbackClass(collComm_t comm, int a, int b) {
  if (a == b) return COLL_LINK_SELF;
  return comm->rankNode && comm->rankNode[a] == comm->rankNode[b] ? COLL_LINK_NUMA : COLL_LINK_NET;
}

/* Whether a and b are ranks of comm. */
static int validPair(collComm_t comm, int a, int b) {
  return comm && a >= 0 && b >= 0 && a < comm->nranks && b < comm->nranks;
}

/* Link class between ranks a and b, -1 when either is not a rank. */
int collTopoLinkClass(collComm_t comm, int a, int b) {
  if (!validPair(comm, a, b)) return -1;
  return comm->topo ? classOf(comm->topo, a, b) : fallbackClass(comm, a, b);
}

/* Bandwidth (GB/s) between ranks a and b, 0 when either is not a rank. */
double collTopoLinkBw(collComm_t comm, int a, int b) {
  if (!validPair(comm, a, b)) return 0.0;
  if (!comm->topo) return fallbackClass(comm, a, b) == COLL_LINK_NET ? COLL_BW_NET_DEFAULT : COLL_BW_MEMCPY;
  return bwOf(comm->topo, classOf(comm->topo, a, b), a, b);
}

/* Latency (us) between ranks a and b, 0 when either is not a rank. */
double collTopoLinkLat(collComm_t comm, int a, int b) {
  if (!validPair(comm, a, b)) return 0.0;
  if (!comm->topo) {
    int c = fallbackClass(comm, a, b);
    return c == COLL_LINK_NET ? COLL_LAT_NET_DEFAULT : c == COLL_LINK_SELF ? 0.0 : COLL_LAT_NUMA;
  }
  return latOf(comm->topo, classOf(comm->topo, a, b), a, b);
}

/* Bandwidth (GB/s) between the host memories of ranks a and b, 0 when
 * either is not a rank. */
double collTopoHostLinkBw(collComm_t comm, int a, int b) {
  if (!validPair(comm, a, b)) return 0.0;
  if (!comm->topo) return collTopoLinkBw(comm, a, b);
  return bwOf(comm->topo, classOfMem(comm->topo, a, b, 0), a, b);
}

/* ---- init ------------------------------------------------------------------- */
typedef struct {
  const char* netDev;
  const char* gpuBus;  /* of the current CUDA context's device, "" = none */
  const char* pciPath; /* of that device: matched by bus id when the name is not a NIC of the topology */
  collTopoPeer* me;
  hwloc_bitmap_t pinSet;
  char* why;
  size_t whyLen;
  char nicName[COLL_TOPO_NAME_LEN];
} collTopoPlaceArg;

/* Under the cache lock: copies the node summary and places this rank. */
static void placeFn(const collTopoLocal* l, void* arg) {
  collTopoPlaceArg* p = arg;
  p->me->node = l->sum;
  collTopoPlace(l, p->netDev, p->gpuBus, &p->me->rank, &p->pinSet, p->why, p->whyLen);
  if (p->me->rank.nic < 0 && p->pciPath && *p->pciPath) {
    int nic = collTopoNicOfPci(&l->sum, &l->nicNames, p->pciPath);
    if (nic >= 0) {
      const char* name = l->nicNames[nic][0][0] ? l->nicNames[nic][0] : l->nicNames[nic][COLL_TOPO_NIC_BUSID];
      hwloc_bitmap_free(p->pinSet); /* placed again: the pin decision follows the NIC */
      collTopoPlace(l, name, p->gpuBus, &p->me->rank, &p->pinSet, p->why, p->whyLen);
    }
  }
  if (p->me->rank.nic >= 0) snprintf(p->nicName, sizeof p->nicName, "%s", l->nicNames[p->me->rank.nic][0]);
}

/* Rank 0's INFO lines: one per node, then the link classes present with
 * their pair counts and worst bandwidth / latency (every pair up to 256
 * ranks, rank 0's row beyond). */
static void logTopology(collComm_t comm, const struct collTopo* t) {
  int n = t->nranks, shown = 0;
  char line[512];
  for (int node = 0; node < comm->nnodes; node++) {
    int first = -1, count = 0;
    for (int r = 0; r < n; r++)
      if (t->rankNode[r] == node) {
        if (first < 0) first = r;
        count++;
      }
    if (first < 0) continue;
    if (shown++ == 64) {
      COLL_INFO(COLL_SUB_INIT, "topo: %d more nodes not shown", comm->nnodes - 64);
      break;
    }
    COLL_INFO(COLL_SUB_INIT, "topo node %d (%s, %d ranks): %s", node, collCommPeerHost(comm, first), count,
              collTopoFormat(&t->peers[first].node, line, sizeof line));
  }
  long pairs[COLL_LINK_NCLASSES] = {0};
  double minBw[COLL_LINK_NCLASSES] = {0}, maxLat[COLL_LINK_NCLASSES] = {0};
  int all = n <= 256;
  for (int a = 0; a < (all ? n : 1); a++)
    for (int b = 0; b < n; b++) {
      if (a == b) continue;
      int c = classOf(t, a, b);
      double bw = bwOf(t, c, a, b), lat = latOf(t, c, a, b);
      if (!pairs[c]++ || bw < minBw[c]) minBw[c] = bw;
      if (lat > maxLat[c]) maxLat[c] = lat;
    }
  size_t off = 0;
  line[0] = 0;
  for (int c = 0; c < COLL_LINK_NCLASSES && off < sizeof line; c++)
    if (pairs[c])
      off += (size_t)snprintf(line + off, sizeof line - off, " %s: %ld pairs, %.2f GB/s, %.1f us;",
                              collTopoLinkName(c), pairs[c], minBw[c], maxLat[c]);
  COLL_INFO(COLL_SUB_INIT, "topo links (%s):%s", all ? "every ordered pair" : "from rank 0",
            off ? line : " none (one rank)");
}

/* Discovery (cached), placement, allgather, comm->topo, INFO logs (topo.h). */
collResult_t collTopoInit(collComm_t comm) {
  int n = comm->nranks;
  struct collTopo* t = calloc(1, sizeof *t);
  collTopoPeer* peers = calloc((size_t)n, sizeof(collTopoPeer));
  int* nodes = malloc(sizeof(int) * (size_t)n);
  if (!t || !peers || !nodes) {
    free(t);
    free(peers);
    free(nodes);
    return collSetError(collSystemError, "topology: out of memory");
  }
  collNetProperties_t props;
  memset(&props, 0, sizeof props);
  int k = comm->interSlot; /* the network transport of most of this rank's pairs */
  const collNet_t* net = k > 0 ? comm->nets[k] : NULL;
  if (net && net->getProperties(comm->netDev[k], &props) != collSuccess) memset(&props, 0, sizeof props);
  char gpuBus[COLL_TOPO_NAME_LEN]; /* the GPU of the current context, if CUDA is already in use */
  int ordinal;
  collCudaCurrentBusId(gpuBus, sizeof gpuBus, &ordinal);
  collTopoPlaceArg arg = {props.name, gpuBus, props.pciPath, &peers[comm->rank], NULL, t->pinWhy, sizeof t->pinWhy,
                          ""};
  collResult_t r = collTopoWithLocal(placeFn, &arg);
  collTopoRank* me = &peers[comm->rank].rank;
  if (r == collSuccess) {
    uint32_t mbps = me->nic >= 0 ? peers[comm->rank].node.nics[me->nic].speedMbps : 0;
    me->netGBps = (float)(mbps ? mbps / 8000.0 : props.speedGbps > 0 ? props.speedGbps / 8.0 : COLL_BW_NET_DEFAULT);
    me->netLatUs = (float)(props.latencyUs > 0 ? props.latencyUs : COLL_LAT_NET_DEFAULT);
    r = collBootAllGather(&comm->boot, peers, sizeof(collTopoPeer));
  }
  if (r != collSuccess) {
    hwloc_bitmap_free(arg.pinSet);
    free(t);
    free(peers);
    free(nodes);
    return r;
  }
  memcpy(nodes, comm->rankNode, sizeof(int) * (size_t)n);
  t->nranks = n;
  t->rank = comm->rank;
  t->rankNode = nodes;
  t->peers = peers;
  t->pinSet = arg.pinSet;
  comm->topo = t;
  char gpuWhat[96];
  if (!gpuBus[0]) snprintf(gpuWhat, sizeof gpuWhat, "none (no current CUDA context)");
  else if (me->gpu < 0)
    snprintf(gpuWhat, sizeof gpuWhat, "CUDA device %d, %s, not a GPU of the topology", ordinal, gpuBus);
  else snprintf(gpuWhat, sizeof gpuWhat, "%d (CUDA device %d, %s)", me->gpu, ordinal, gpuBus);
  COLL_INFO(COLL_SUB_INIT, "rank %d: NUMA node %d, NIC %d (%s, %.2f GB/s, %.0f us), GPU %s; progress thread: %s",
            comm->rank, me->numa, me->nic, me->nic >= 0 ? arg.nicName : props.name[0] ? props.name : "-",
            me->netGBps, me->netLatUs, gpuWhat, t->pinWhy);
  if (comm->rank == 0) logTopology(comm, t);
  return collSuccess;
}

/* Frees comm->topo. */
void collTopoFree(collComm_t comm) {
  if (!comm) return;
  collTopoDestroy(comm->topo);
  comm->topo = NULL;
}
