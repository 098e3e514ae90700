/* topo_internal.h - hwloc-side helpers shared by the src/topo files. */
#ifndef COLL_TOPO_INTERNAL_H_
#define COLL_TOPO_INTERNAL_H_

#include <hwloc.h>
#include <stdio.h>

#include "topo/topo.h"

#define COLL_TOPO_NAME_LEN 32
#define COLL_TOPO_NIC_NAMES 3 /* names kept per NIC: 2 OS devices (e.g. ib0 + mlx5_0), then the PCI bus id */
#define COLL_TOPO_NIC_BUSID 2 /* the name slot of the PCI bus id, "0000:05:00.0" */
/* PCI info attached to NIC PCI devices (in the live topology, exported to XML). */
#define COLL_TOPO_SPEED_INFO "CollSpeedMbps"

/* OS device names of each NIC in summary order ("" when absent). */
typedef char collTopoNicNames[COLL_TOPO_MAX_NICS][COLL_TOPO_NIC_NAMES][COLL_TOPO_NAME_LEN];
/* PCI bus id of each GPU in summary order, "0000:10:1c.0" (lower-case hex). */
typedef char collTopoGpuBusIds[COLL_TOPO_MAX_GPUS][COLL_TOPO_NAME_LEN];

/* This process's view of its machine, discovered once (topo_discover.c). */
typedef struct {
  collTopoSummary sum;
  collTopoNicNames nicNames;
  collTopoGpuBusIds gpuBus;
  int thisSystem;            /* discovered live (not COLL_TOPO_FILE): binding works */
  int nnuma;
  hwloc_bitmap_t* numaCpus;  /* [nnuma] cpuset of each NUMA node, logical order */
} collTopoLocal;

/* topo_summary.c: fills *s (zeroed first) and, when names / gpuBus are set,
 * the OS device names of every NIC and the bus id of every GPU in the table. */
void collTopoBuildSummary(hwloc_topology_t topo, collTopoSummary* s, collTopoNicNames* names,
                          collTopoGpuBusIds* gpuBus);
/* topo_summary.c: writes the summary as text: the one-line form, then one line
 * per GPU and NIC. Returns 0 or -1 on an I/O error. */
int collTopoWriteSummary(FILE* f, const collTopoSummary* s);

/* topo_discover.c: runs fn(local, arg) on the process's cached discovery under
 * its lock, discovering first (or again when COLL_TOPO_FILE changed). */
collResult_t collTopoWithLocal(void (*fn)(const collTopoLocal* l, void* arg), void* arg);

/* topo_pin.c: places the calling rank (NUMA of its CPU binding, the NIC named
 * netDev, the GPU whose bus id is gpuBus: "0000:10:1c.0", NULL or "" for a
 * host rank) and decides where its progress thread goes (*pinSet, a new bitmap,
 * or NULL; why: the reason, for the log). */
void collTopoPlace(const collTopoLocal* l, const char* netDev, const char* gpuBus, collTopoRank* r,
                   hwloc_bitmap_t* pinSet, char* why, size_t whyLen);

/* topo_nic.c: the NIC of the summary (index in s->nics) that a transport
 * device's PCI path stands for: its last component that is a PCI bus id
 * ("/sys/devices/pci0000:00/0000:00:02.0/0000:05:00.0" or "0000:05:00.0";
 * matched case-insensitively), -1 when none matches. */
int collTopoNicOfPci(const collTopoSummary* s, const collTopoNicNames* names, const char* pciPath);
/* topo_nic.c: of n transport devices (their PCI paths), the one nearest to a
 * rank with GPU `gpu` (summary index, -1: host memory) on NUMA node `numa`
 * (-1: unknown): for a GPU, the devices on its PCIe switch, else on its NUMA
 * node, else its package; for a host rank, those on its NUMA node. Ties are
 * spread: the GPUs of one switch take its devices in turn, host ranks by
 * `spread` (the rank) modulo the tied count. Devices that match no NIC of the
 * topology count as farthest. Returns the device index (0 when n is 1 or
 * nothing matches); why (may be NULL) says how it was chosen. */
int collTopoPickNic(const collTopoSummary* s, const collTopoNicNames* names, const char* const* pciPaths, int n,
                    int gpu, int numa, int spread, char* why, size_t whyLen);

#endif
