/*
 * topo_summary.c - turns a loaded hwloc topology into collTopoSummary.
 *
 * CPU side: counts of packages, NUMA nodes, cores, PUs; the NUMALatency
 * matrix gives remote/local (x10).
 * GPUs: PCI class 0x0300 / 0x0302 from NVIDIA (0x10de) or AMD (0x1002), keyed
 * by the PCI device, never by OS devices (Debian's hwloc has no CUDA/NVML
 * backend; the p4d capture hangs its OpenCL devices on the host bridges).
 * NICs: PCI class 0x02xx. RDMA NICs (Mellanox 0x15b3, AWS EFA 0x1d0f:efaX, or
 * anything with an OpenFabrics OS device) come first in the table; ENA, I350,
 * virtio and the like follow as "other" NICs.
 * NVSwitch: NVIDIA class 0x0680 functions, or subtype "NVSwitch" (the DGX-2
 * capture has one with an all-zero class/vendor); needs the KEEP_ALL filter.
 * PCIe switch of a device: the bridge above its parent port when both are
 * PCI-to-PCI bridges (switch upstream port), else its parent root port; none
 * when it hangs straight off a host bridge (AWS p4d).
 * GPU -> NIC path, walking ->parent (hwloc_get_common_ancestor_obj crashes on
 * PCI objects of different depths in 2.9): different NUMA nodesets -> SYS;
 * common ancestor a PCI bridge with <= 2 hops on each side -> PIX (same
 * switch), deeper -> PXB; a host bridge or CPU-side object -> PHB.
 */
#include <stdlib.h>
#include <string.h>

#include "topo/topo_internal.h"

#define COLL_TOPO_MAX_OBJS 256 /* PCI devices of one kind looked at */

/* The summary is exchanged and compared byte for byte: no implicit padding. */
_Static_assert(sizeof(collTopoGpu) == 20, "collTopoGpu has padding");
_Static_assert(sizeof(collTopoNic) == 12, "collTopoNic has padding");
_Static_assert(sizeof(collTopoSummary) == 24 + 20 * COLL_TOPO_MAX_GPUS + 12 * COLL_TOPO_MAX_NICS,
               "collTopoSummary has padding");
_Static_assert(sizeof(collTopoRank) == 16, "collTopoRank has padding");

/* NCCL's per-link NVLink bandwidth (src/graph/topo.h: SM70/SM80 20.0, SM90
 * 20.6 GB/s) and its raw NVLink2 per-link rate, 25 GB/s (the DGX-2 matrix). */
#define COLL_NVL_EFFICIENCY (20.0 / 25.0)

/* 1 for NVIDIA, 2 for AMD when `o` is a GPU PCI function, else 0. */
static int gpuVendor(hwloc_obj_t o) {
  unsigned cls = o->attr->pcidev.class_id;
  if (cls != 0x0300 && cls != 0x0302) return 0;
  if (o->attr->pcidev.vendor_id == 0x10de) return COLL_TOPO_VENDOR_NVIDIA;
  if (o->attr->pcidev.vendor_id == 0x1002) return COLL_TOPO_VENDOR_AMD;
  return 0;
}

/* Whether `o` is an NVSwitch PCI function. */
static int isNvSwitch(hwloc_obj_t o) {
  if (o->subtype && strcmp(o->subtype, "NVSwitch") == 0) return 1;
  return o->attr->pcidev.vendor_id == 0x10de && o->attr->pcidev.class_id == 0x0680;
}

/* Whether `o` has an OS device child of type t. */
static int hasOsDev(hwloc_obj_t o, hwloc_obj_osdev_type_t t) {
  for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling)
    if (c->type == HWLOC_OBJ_OS_DEVICE && c->attr->osdev.type == t) return 1;
  return 0;
}

/* 0: not a NIC; 1: other network device; 2: RDMA NIC. */
static int nicKind(hwloc_obj_t o) {
  unsigned cls = o->attr->pcidev.class_id, ven = o->attr->pcidev.vendor_id, dev = o->attr->pcidev.device_id;
  if ((cls >> 8) != 0x02) return 0;
  if (ven == 0x15b3 || (ven == 0x1d0f && (dev & 0xfff0) == 0xefa0) || hasOsDev(o, HWLOC_OBJ_OSDEV_OPENFABRICS))
    return 2;
  return 1;
}

/* Whether `o` is a PCI-to-PCI bridge (switch port or root port). */
static int isPciBridge(hwloc_obj_t o) {
  return o && o->type == HWLOC_OBJ_BRIDGE && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI;
}

/* The PCIe switch a device hangs on (see the file comment), or NULL. */
static hwloc_obj_t switchOf(hwloc_obj_t o) {
  hwloc_obj_t p = o->parent;
  if (!isPciBridge(p)) return NULL;
  return isPciBridge(p->parent) ? p->parent : p;
}

/* Logical index of the single NUMA node below the device's CPU-side
 * ancestor, -1 when there are none or several. */
static int numaOf(hwloc_topology_t topo, hwloc_obj_t o) {
  hwloc_obj_t a = hwloc_get_non_io_ancestor_obj(topo, o);
  if (!a || !a->nodeset || hwloc_bitmap_weight(a->nodeset) != 1) return -1;
  hwloc_obj_t n = hwloc_get_numanode_obj_by_os_index(topo, (unsigned)hwloc_bitmap_first(a->nodeset));
  return n ? (int)n->logical_index : -1;
}

/* Logical index of the package whose CPUs include those of the device's
 * CPU-side ancestor (also when that is the Machine of a one-package host),
 * -1 when it spans packages. */
static int packageOf(hwloc_topology_t topo, hwloc_obj_t o) {
  hwloc_obj_t a = hwloc_get_non_io_ancestor_obj(topo, o), p = NULL;
  while (a && (p = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PACKAGE, p)) != NULL)
    if (a->cpuset && p->cpuset && hwloc_bitmap_isincluded(a->cpuset, p->cpuset)) return (int)p->logical_index;
  return -1;
}

/* COLL_PATH_* between two PCI devices; *hops = levels climbed from both. */
static int pciPath(hwloc_topology_t topo, hwloc_obj_t a, hwloc_obj_t b, int* hops) {
  int ua = 0, ub = 0;
  hwloc_obj_t c = NULL;
  for (hwloc_obj_t x = a; x && !c; x = x->parent, ua++) {
    ub = 0;
    for (hwloc_obj_t y = b; y; y = y->parent, ub++)
      if (x == y) { c = x; break; }
    if (c) break;
  }
  *hops = ua + ub;
  hwloc_obj_t ca = hwloc_get_non_io_ancestor_obj(topo, a), cb = hwloc_get_non_io_ancestor_obj(topo, b);
  if (!c || !ca || !cb || !hwloc_bitmap_isequal(ca->nodeset, cb->nodeset)) return COLL_PATH_SYS;
  if (isPciBridge(c)) return ua <= 2 && ub <= 2 ? COLL_PATH_PIX : COLL_PATH_PXB;
  return COLL_PATH_PHB;
}

/* Switch id (1-based) of device o, registering new switches in sw[]. */
static uint8_t switchId(hwloc_obj_t o, hwloc_obj_t* sw, int* nsw) {
  hwloc_obj_t s = switchOf(o);
  if (!s) return 0;
  for (int i = 0; i < *nsw; i++)
    if (sw[i] == s) return (uint8_t)(i + 1);
  if (*nsw >= 255) return 0;
  sw[(*nsw)++] = s;
  return (uint8_t)*nsw;
}

/* Speed of a NIC from the CollSpeedMbps info (set by discovery from sysfs). */
static uint32_t nicSpeed(hwloc_obj_t o) {
  const char* v = hwloc_obj_get_info_by_name(o, COLL_TOPO_SPEED_INFO);
  long x = v ? strtol(v, NULL, 10) : 0;
  return x > 0 && x < 0x7fffffffL ? (uint32_t)x : 0;
}

/* Per-GPU NVLink bandwidth from the NVSwitch generation (PCI device id):
 * links per GPU x NCCL's per-link GB/s (V100 6x20, A100 12x20, H100/H200
 * 18x20.6); unknown ids count as the first generation. */
static double nvlFromSwitch(unsigned dev) {
  if ((dev & 0xfff0) == 0x1af0) return 12 * 20.0;
  if ((dev & 0xfff0) == 0x22a0) return 18 * 20.6;
  return 6 * 20.0;
}

/* The PCI device an object of a distance matrix stands for (an nvml OS
 * device -> its GPU), or NULL. */
static hwloc_obj_t pciOf(hwloc_obj_t o) {
  while (o && o->type == HWLOC_OBJ_OS_DEVICE) o = o->parent;
  return o && o->type == HWLOC_OBJ_PCI_DEVICE ? o : NULL;
}

/* Reads NUMALatency (numaDist) and NVLinkBandwidth (per-GPU bandwidth and
 * NVLink peers) from the topology's distance matrices. */
static void readDistances(hwloc_topology_t topo, collTopoSummary* s, hwloc_obj_t* gpu, int ng) {
  unsigned nr = 0;
  if (hwloc_distances_get(topo, &nr, NULL, 0, 0) != 0 || nr == 0) return;
  struct hwloc_distances_s** d = calloc(nr, sizeof *d);
  if (!d) return;
  if (hwloc_distances_get(topo, &nr, d, 0, 0) != 0) nr = 0;
  for (unsigned k = 0; k < nr; k++) {
    const char* name = hwloc_distances_get_name(topo, d[k]);
    unsigned n = d[k]->nbobjs;
    hwloc_uint64_t* v = d[k]->values;
    if (name && strcmp(name, "NUMALatency") == 0 && n > 1 && v[0] > 0) {
      hwloc_uint64_t remote = 0;
      for (unsigned i = 0; i < n; i++)
        for (unsigned j = 0; j < n; j++)
          if (i != j && v[i * n + j] > remote) remote = v[i * n + j];
      hwloc_uint64_t x = (remote * 10 + v[0] / 2) / v[0];
      s->numaDist = (uint8_t)(x > 255 ? 255 : x);
    }
    if (!name || strcmp(name, "NVLinkBandwidth") != 0) continue;
    int* idx = malloc(sizeof(int) * n); /* matrix index -> GPU index, -2 NVSwitch, -1 other */
    if (!idx) continue;
    for (unsigned i = 0; i < n; i++) {
      hwloc_obj_t p = pciOf(d[k]->objs[i]);
      idx[i] = p && isNvSwitch(p) ? -2 : -1;
      for (int g = 0; g < ng && p; g++)
        if (gpu[g] == p) idx[i] = g;
    }
    s->flags |= COLL_TOPO_F_NVLINK_MATRIX;
    int reach[COLL_TOPO_MAX_GPUS] = {0}; /* GPU has a link to an NVSwitch */
    for (unsigned i = 0; i < n; i++) {
      if (idx[i] < 0) continue;
      collTopoGpu* g = &s->gpus[idx[i]];
      hwloc_uint64_t sum = 0;
      for (unsigned j = 0; j < n; j++) {
        if (j == i || v[i * n + j] == 0) continue;
        sum += v[i * n + j];
        if (idx[j] >= 0) g->nvlMask |= 1u << idx[j];
        if (idx[j] == -2) reach[idx[i]] = 1;
      }
      g->nvlGBps = (float)((double)sum / 1000.0 * COLL_NVL_EFFICIENCY); /* matrix is MB/s */
    }
    for (int a = 0; a < ng; a++)
      for (int b = 0; b < ng; b++)
        if (a != b && reach[a] && reach[b]) s->gpus[a].nvlMask |= 1u << b;
    free(idx);
  }
  for (unsigned k = 0; k < nr; k++) hwloc_distances_release(topo, d[k]);
  free(d);
}

/* Copies up to COLL_TOPO_NIC_NAMES network / OpenFabrics OS device names. */
/* PCI bus id of a PCI device, "0000:10:1c.0", into out. */
static void busId(hwloc_obj_t o, char* out) {
  snprintf(out, COLL_TOPO_NAME_LEN, "%04x:%02x:%02x.%x", o->attr->pcidev.domain, o->attr->pcidev.bus,
           o->attr->pcidev.dev, o->attr->pcidev.func);
}

static void nicNames(hwloc_obj_t o, char (*out)[COLL_TOPO_NAME_LEN]) {
  int k = 0;
  for (hwloc_obj_t c = o->io_first_child; c && k < COLL_TOPO_NIC_NAMES - 1; c = c->next_sibling)
    if (c->type == HWLOC_OBJ_OS_DEVICE && c->name &&
        (c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK || c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS))
      snprintf(out[k++], COLL_TOPO_NAME_LEN, "%s", c->name);
  busId(o, out[COLL_TOPO_NIC_BUSID]);
}

/* Saturating count for the uint8_t fields. */
static uint8_t sat8(int x) { return (uint8_t)(x > 255 ? 255 : x); }

/* Counts, GPU and NIC tables, switches, paths and NVLink of a loaded topology
 * (see topo_internal.h). */
void collTopoBuildSummary(hwloc_topology_t topo, collTopoSummary* s, collTopoNicNames* names,
                          collTopoGpuBusIds* gpuBus) {
  memset(s, 0, sizeof *s);
  if (names) memset(names, 0, sizeof *names);
  if (gpuBus) memset(gpuBus, 0, sizeof *gpuBus);
  s->version = COLL_TOPO_VERSION;
  int npu = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU), ncore = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  s->npus = (uint32_t)(npu > 0 ? npu : 1);
  s->ncores = ncore > 0 ? (uint32_t)ncore : s->npus;
  s->nnuma = (uint16_t)hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  s->npackages = (uint16_t)hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);

  hwloc_obj_t gpu[COLL_TOPO_MAX_OBJS], nic[2][COLL_TOPO_MAX_OBJS], sw[255];
  int ng = 0, nn[2] = {0, 0}, ngpu = 0, nnic[2] = {0, 0}, nvsw = 0, nsw = 0;
  unsigned nvswDev = 0;
  for (hwloc_obj_t o = hwloc_get_next_pcidev(topo, NULL); o; o = hwloc_get_next_pcidev(topo, o)) {
    int k;
    if (isNvSwitch(o)) {
      nvsw++;
      if (nvlFromSwitch(o->attr->pcidev.device_id) > nvlFromSwitch(nvswDev)) nvswDev = o->attr->pcidev.device_id;
    } else if (gpuVendor(o)) {
      if (ngpu++ < COLL_TOPO_MAX_GPUS) gpu[ng++] = o;
    } else if ((k = nicKind(o)) != 0) {
      if (nnic[k - 1]++ < COLL_TOPO_MAX_OBJS) nic[k - 1][nn[k - 1]++] = o;
    }
  }
  s->ngpus = sat8(ngpu);
  s->nnics = sat8(nnic[1]);
  s->neths = sat8(nnic[0]);
  s->nnvswitches = sat8(nvsw);
  if (nvsw) s->flags |= COLL_TOPO_F_NVSWITCH;

  /* NIC table: RDMA NICs, then the others, each in PCI order. */
  hwloc_obj_t tab[COLL_TOPO_MAX_NICS];
  int nt = 0;
  for (int k = 1; k >= 0; k--)
    for (int i = 0; i < nn[k] && nt < COLL_TOPO_MAX_NICS; i++) {
      hwloc_obj_t o = nic[k][i];
      collTopoNic* e = &s->nics[nt];
      e->speedMbps = nicSpeed(o);
      e->pciGBps = o->attr->pcidev.linkspeed;
      e->numa = (int8_t)numaOf(topo, o);
      e->package = (int8_t)packageOf(topo, o);
      e->flags = k == 1 ? COLL_TOPO_NIC_RDMA : 0;
      if (names) nicNames(o, (*names)[nt]);
      tab[nt++] = o;
    }
  int nrdma = nn[1] < nt ? nn[1] : nt;

  /* Switch ids in PCI order over GPUs and NICs together. */
  for (hwloc_obj_t o = hwloc_get_next_pcidev(topo, NULL); o; o = hwloc_get_next_pcidev(topo, o)) {
    for (int g = 0; g < ng; g++)
      if (gpu[g] == o) s->gpus[g].sw = switchId(o, sw, &nsw);
    for (int i = 0; i < nt; i++)
      if (tab[i] == o) s->nics[i].sw = switchId(o, sw, &nsw);
  }
  s->nswitches = sat8(nsw);

  for (int g = 0; g < ng; g++) {
    collTopoGpu* e = &s->gpus[g];
    e->pciGBps = gpu[g]->attr->pcidev.linkspeed;
    e->numa = (int8_t)numaOf(topo, gpu[g]);
    e->package = (int8_t)packageOf(topo, gpu[g]);
    e->vendor = (uint8_t)gpuVendor(gpu[g]);
    if (gpuBus) busId(gpu[g], (*gpuBus)[g]);
    e->nic = -1;
    /* Closest NIC: the RDMA ones when there are any, else the others. */
    int lo = 0, hi = nrdma > 0 ? nrdma : nt, bestPath = 0, bestHops = 0;
    for (int i = lo; i < hi; i++) {
      int hops, path = pciPath(topo, gpu[g], tab[i], &hops);
      if (e->nic < 0 || path < bestPath || (path == bestPath && hops < bestHops)) {
        e->nic = (int8_t)i;
        bestPath = path;
        bestHops = hops;
      }
    }
    e->nicPath = (uint8_t)bestPath;
    e->nicHops = sat8(bestHops);
  }
  readDistances(topo, s, gpu, ng);
  if ((s->flags & COLL_TOPO_F_NVSWITCH) && !(s->flags & COLL_TOPO_F_NVLINK_MATRIX)) {
    /* Without NVML every NVIDIA GPU of an NVSwitch system reaches every other. */
    uint32_t all = 0;
    for (int g = 0; g < ng; g++)
      if (s->gpus[g].vendor == COLL_TOPO_VENDOR_NVIDIA) all |= 1u << g;
    for (int g = 0; g < ng; g++)
      if (s->gpus[g].vendor == COLL_TOPO_VENDOR_NVIDIA) {
        s->gpus[g].nvlMask = all & ~(1u << g);
        s->gpus[g].nvlGBps = (float)nvlFromSwitch(nvswDev);
      }
  }
}

/* Short name of a path class. */
static const char* pathName(int p) {
  static const char* n[] = {"-", "PIX", "PXB", "PHB", "SYS"};
  return p >= 0 && p <= COLL_PATH_SYS ? n[p] : "?";
}

/* One line: counts, GPUs and NVLink, NIC counts and best speeds (topo.h). */
const char* collTopoFormat(const collTopoSummary* s, char* buf, size_t len) {
  int ng = s->ngpus < COLL_TOPO_MAX_GPUS ? s->ngpus : COLL_TOPO_MAX_GPUS, nvidia = 0;
  double nvl = 0;
  for (int g = 0; g < ng; g++) {
    nvidia += s->gpus[g].vendor == COLL_TOPO_VENDOR_NVIDIA;
    if (s->gpus[g].nvlGBps > nvl) nvl = s->gpus[g].nvlGBps;
  }
  uint32_t rdmaMbps = 0, ethMbps = 0;
  int nt = s->nnics + s->neths < COLL_TOPO_MAX_NICS ? s->nnics + s->neths : COLL_TOPO_MAX_NICS;
  for (int i = 0; i < nt; i++) {
    uint32_t* m = (s->nics[i].flags & COLL_TOPO_NIC_RDMA) ? &rdmaMbps : &ethMbps;
    if (s->nics[i].speedMbps > *m) *m = s->nics[i].speedMbps;
  }
  char dist[32] = "";
  if (s->numaDist) snprintf(dist, sizeof dist, " (remote/local %.1f)", s->numaDist / 10.0);
  snprintf(buf, len,
           "%u packages, %u NUMA%s, %u cores, %u PUs; %u GPUs (%d NVIDIA), %u NVSwitch, NVLink %.0f GB/s per "
           "GPU; %u RDMA NICs (max %u Mbit/s), %u other NICs (max %u Mbit/s); %u PCIe switches",
           s->npackages, s->nnuma, dist, s->ncores, s->npus, s->ngpus, nvidia, s->nnvswitches, nvl, s->nnics,
           rdmaMbps, s->neths, ethMbps, s->nswitches);
  return buf;
}

/* The text of path.summary: a header, the one-line form, one line per GPU
 * and NIC (topo_internal.h). */
int collTopoWriteSummary(FILE* f, const collTopoSummary* s) {
  char line[512];
  fprintf(f, "coll topology summary v%u\n%s\n", s->version, collTopoFormat(s, line, sizeof line));
  for (int g = 0; g < s->ngpus && g < COLL_TOPO_MAX_GPUS; g++) {
    const collTopoGpu* e = &s->gpus[g];
    fprintf(f, "gpu %d: vendor %s numa %d package %d switch %u pcie %.2f GB/s nvlink %.1f GB/s peers 0x%x nic %d %s %u hops\n",
            g, e->vendor == COLL_TOPO_VENDOR_NVIDIA ? "nvidia" : "amd", e->numa, e->package, e->sw, e->pciGBps,
            e->nvlGBps, e->nvlMask, e->nic, pathName(e->nicPath), e->nicHops);
  }
  for (int i = 0; i < s->nnics + s->neths && i < COLL_TOPO_MAX_NICS; i++) {
    const collTopoNic* e = &s->nics[i];
    fprintf(f, "nic %d: %s numa %d package %d switch %u pcie %.2f GB/s speed %u Mbit/s\n", i,
            (e->flags & COLL_TOPO_NIC_RDMA) ? "rdma" : "other", e->numa, e->package, e->sw, e->pciGBps, e->speedMbps);
  }
  return ferror(f) ? -1 : 0;
}
