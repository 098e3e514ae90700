/* topo_internal.h - hwloc-side helpers shared by the src/topo files. */
#ifndef COLL_TOPO_INTERNAL_H_
#define COLL_TOPO_INTERNAL_H_

#include <hwloc.h>
#include <stdio.h>

#include "topo/topo.h"

#define COLL_TOPO_NAME_LEN 32
#define COLL_TOPO_NIC_NAMES 2 /* OS devices kept per NIC, e.g. ib0 + mlx5_0 */
/* PCI info attached to NIC PCI devices (in the live topology, exported to XML). */
#define COLL_TOPO_SPEED_INFO "CollSpeedMbps"

/* OS device names of each NIC in summary order ("" when absent). */
typedef char collTopoNicNames[COLL_TOPO_MAX_NICS][COLL_TOPO_NIC_NAMES][COLL_TOPO_NAME_LEN];

/* This process's view of its machine, discovered once (topo_discover.c). */
typedef struct {
  collTopoSummary sum;
  collTopoNicNames nicNames;
  int thisSystem;            /* discovered live (not COLL_TOPO_FILE): binding works */
  int nnuma;
  hwloc_bitmap_t* numaCpus;  /* [nnuma] cpuset of each NUMA node, logical order */
} collTopoLocal;

/* topo_summary.c: fills *s (zeroed first) and, when names is set, the OS
 * device names of every NIC in the table. */
void collTopoBuildSummary(hwloc_topology_t topo, collTopoSummary* s, collTopoNicNames* names);
/* topo_summary.c: writes the summary as text: the one-line form, then one line
 * per GPU and NIC. Returns 0 or -1 on an I/O error. */
int collTopoWriteSummary(FILE* f, const collTopoSummary* s);

/* topo_discover.c: runs fn(local, arg) on the process's cached discovery under
 * its lock, discovering first (or again when COLL_TOPO_FILE changed). */
collResult_t collTopoWithLocal(void (*fn)(const collTopoLocal* l, void* arg), void* arg);

/* topo_pin.c: places the calling rank (NUMA of its CPU binding, the NIC named
 * netDev) and decides where its progress thread goes (*pinSet, a new bitmap,
 * or NULL; why: the reason, for the log). */
void collTopoPlace(const collTopoLocal* l, const char* netDev, collTopoRank* r, hwloc_bitmap_t* pinSet,
                   char* why, size_t whyLen);

#endif
