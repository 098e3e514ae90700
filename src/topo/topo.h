/* topo.h - node grouping and the hwloc topology: a fixed-size summary per
 * node, exchanged at init, and the link classes between ranks built from it.
 *
 * Files: node.c (host hash, node grouping), topo_discover.c (hwloc load,
 * COLL_TOPO_FILE / COLL_TOPO_DUMP_FILE, per-process cache), topo_summary.c
 * (hwloc -> collTopoSummary), topo_links.c (exchange at init, link classes,
 * bandwidth and latency), topo_pin.c (progress-thread pinning). */
#ifndef COLL_TOPO_H_
#define COLL_TOPO_H_

#include <stddef.h>
#include <stdint.h>

#include "core/comm.h"

/* Hash that identifies this node: hostname + boot id, or COLL_HOSTID when set
 * (so tests can emulate several nodes on one machine). */
uint64_t collTopoHostHash(void);
/* Hash of the running kernel's boot id (the host hash when unreadable):
 * equal for every namespace and container on one machine. */
uint64_t collTopoKernelHash(void);
/* Fills comm->rankNode, nnodes, node, localRank, localRanks from the peers'
 * host hashes (nodes are numbered in order of their first rank), and
 * kernelRanks from their kernel hashes. */
void collTopoNodes(collComm_t comm);

/* ---- per-node summary ------------------------------------------------------ */
#define COLL_TOPO_MAX_GPUS 16 /* table sizes; the counts stay exact beyond them */
#define COLL_TOPO_MAX_NICS 32
#define COLL_TOPO_VERSION 1

/* PCI path between a GPU and a NIC, NCCL's names (see topo_summary.c). */
enum { COLL_PATH_NONE = 0, COLL_PATH_PIX, COLL_PATH_PXB, COLL_PATH_PHB, COLL_PATH_SYS };
enum { COLL_TOPO_VENDOR_NVIDIA = 1, COLL_TOPO_VENDOR_AMD = 2 };
#define COLL_TOPO_NIC_RDMA 0x1           /* Mellanox, EFA or an OpenFabrics device */
#define COLL_TOPO_F_NVSWITCH 0x1         /* NVSwitch PCI functions present */
#define COLL_TOPO_F_NVLINK_MATRIX 0x2    /* an NVLinkBandwidth distance matrix */

typedef struct {
  float pciGBps;    /* PCIe link speed hwloc reports, GB/s (0 = unknown) */
  float nvlGBps;    /* NVLink bandwidth estimate of this GPU, GB/s (0 = none) */
  int8_t numa;      /* logical NUMA node it hangs off, -1 = unknown or several */
  int8_t package;   /* logical package, -1 = unknown */
  uint8_t sw;       /* PCIe switch it hangs on (1..nswitches), 0 = none */
  uint8_t vendor;   /* COLL_TOPO_VENDOR_* */
  int8_t nic;       /* closest NIC (RDMA ones first), index in nics, -1 = none */
  uint8_t nicPath;  /* COLL_PATH_* to that NIC */
  uint8_t nicHops;  /* PCI hops from both ends up to their common ancestor */
  uint8_t pad;
  uint32_t nvlMask; /* bit j: NVLink (direct or through NVSwitch) to GPU j */
} collTopoGpu;

typedef struct {
  uint32_t speedMbps; /* port speed from sysfs (net speed or IB rate), 0 = unknown */
  float pciGBps;      /* PCIe link speed, GB/s (0 = unknown) */
  int8_t numa, package;
  uint8_t sw;         /* PCIe switch (1..nswitches), 0 = none */
  uint8_t flags;      /* COLL_TOPO_NIC_* */
} collTopoNic;

/* What one node looks like; plain data, no pointers, zero padding, so it can
 * be exchanged and compared with memcmp. nics[] holds the RDMA NICs first
 * (nnics of them), then the other network devices (neths). */
typedef struct {
  uint32_t version;                   /* COLL_TOPO_VERSION */
  uint32_t ncores, npus;
  uint16_t nnuma, npackages;
  uint8_t ngpus, nnics, neths, nnvswitches; /* exact counts, saturated at 255 */
  uint8_t nswitches;                  /* PCIe switches holding a GPU or a NIC */
  uint8_t flags;                      /* COLL_TOPO_F_* */
  uint8_t numaDist;                   /* remote/local NUMA latency x 10 (21 = 2.1x), 0 = unknown */
  uint8_t pad;
  collTopoGpu gpus[COLL_TOPO_MAX_GPUS];
  collTopoNic nics[COLL_TOPO_MAX_NICS];
} collTopoSummary;

/* Where one rank sits in its node. */
typedef struct {
  int16_t numa;     /* NUMA node its CPU binding lies in, -1 = unbound / several */
  int16_t gpu;      /* its GPU (index in gpus), -1 = none (host-memory ranks) */
  int16_t nic;      /* the NIC its inter-node transport uses (index in nics), -1 = unknown */
  int16_t pad;
  float netGBps;    /* that NIC's speed, else the transport's, else 10 Gbit/s */
  float netLatUs;   /* the transport's latency estimate, else 50 us */
} collTopoRank;

/* The block every rank contributes to the init allgather. */
typedef struct {
  collTopoSummary node;
  collTopoRank rank;
} collTopoPeer;

/* Link classes between two ranks (bandwidth and latency per class and their
 * sources: topo_links.c). A GPU rank and a host rank of one node are PCIE;
 * host ranks of a multi-NUMA node whose NUMA node is unknown are SOCKET. */
enum {
  COLL_LINK_SELF = 0, /* the same rank */
  COLL_LINK_NUMA,     /* same node, same NUMA node (shared memory) */
  COLL_LINK_NVLINK,   /* two GPUs joined by NVLink / NVSwitch */
  COLL_LINK_PCIE,     /* two GPUs of one node without NVLink */
  COLL_LINK_SOCKET,   /* same node, other NUMA node / socket, or placement unknown */
  COLL_LINK_NET,      /* other node */
  COLL_LINK_NCLASSES
};

/* The communicator's view: every rank's placement and node summary. */
struct collTopo {
  int nranks, rank;
  int* rankNode;         /* [nranks] copy of comm->rankNode */
  collTopoPeer* peers;   /* [nranks] */
  void* pinSet;          /* hwloc_bitmap_t for the progress thread, NULL = leave it */
  char pinWhy[160];      /* what the pin decision was and why, for the log */
};

/* Loads hwloc XML `xmlPath` (NULL: discover this machine) with the I/O filters
 * set, summarizes it into *out and, when dumpPath is set, writes the topology
 * as hwloc XML to dumpPath and the summary as text to dumpPath.summary (the
 * XML carries the NIC speeds as "CollSpeedMbps" infos so loading it again
 * gives the same summary). Uncached; for tests and tools. */
collResult_t collTopoSummarize(const char* xmlPath, const char* dumpPath, collTopoSummary* out);
/* Formats the summary as one line (for logs and the dump); returns buf. */
const char* collTopoFormat(const collTopoSummary* s, char* buf, size_t len);

/* Init: discovers (once per process, COLL_TOPO_FILE / COLL_TOPO_DUMP_FILE
 * honoured), places this rank, allgathers every rank's collTopoPeer and sets
 * comm->topo; logs the nodes and link classes at INFO (INIT). Fails only when
 * COLL_TOPO_FILE cannot be loaded or the allgather fails. */
collResult_t collTopoInit(collComm_t comm);
/* Frees comm->topo (NULL-safe). */
void collTopoFree(collComm_t comm);
/* Builds a topology from gathered peers (tests, simulators); copies both
 * arrays. NULL on out of memory. */
struct collTopo* collTopoCreate(int nranks, int rank, const int* rankNode, const collTopoPeer* peers);
void collTopoDestroy(struct collTopo* t);

/* Link class, bandwidth (GB/s) and latency (us) between ranks a and b; the
 * numbers and their sources are in topo_links.c. Identical on every rank. */
int collTopoLinkClass(collComm_t comm, int a, int b);
double collTopoLinkBw(collComm_t comm, int a, int b);
double collTopoLinkLat(collComm_t comm, int a, int b);
/* Bandwidth (GB/s) between the host memories of ranks a and b: the class
 * their CPU placement gives (SELF, NUMA, SOCKET, NET), whatever GPUs they
 * have; 0 when either is not a rank. What host calls move data through. */
double collTopoHostLinkBw(collComm_t comm, int a, int b);
/* "SELF", "NUMA", "NVLINK", "PCIE", "SOCKET", "NET". */
const char* collTopoLinkName(int cls);

/* Pins the calling thread (the progress thread) to COLL_PROGRESS_CPU when
 * set, else to the NUMA node of the rank's NIC (or GPU) when the node has
 * several NUMA nodes and the topology is this machine's. Never fails: the
 * outcome is logged at INFO (INIT). */
void collTopoPinProgressThread(collComm_t comm);

/* Of a transport's n devices (their collNetProperties_t.pciPath), the one
 * nearest to the calling rank in this machine's topology (topo_nic.c: its
 * GPU's PCIe switch, else its NUMA node), ties spread by `spread` (the
 * rank); 0 when n <= 1 or the topology is unavailable. why: for the log. */
int collTopoPickNetDev(const char* const* pciPaths, int n, int spread, char* why, size_t whyLen);

#endif
