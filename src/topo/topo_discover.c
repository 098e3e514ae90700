/*
 * topo_discover.c - loading the hwloc topology (this machine, or the XML in
 * COLL_TOPO_FILE), NIC speeds from sysfs, COLL_TOPO_DUMP_FILE, and the
 * per-process cache that every communicator of the process shares.
 *
 * Filters (set before hwloc_topology_load, also for XML: the default drops
 * every I/O object): bridges and PCI devices KEEP_ALL (NVSwitch functions are
 * class 0x0680 and KEEP_IMPORTANT drops them unless an NVML-enabled hwloc
 * tagged them), OS devices KEEP_IMPORTANT (network, OpenFabrics, GPU ...).
 *
 * NIC speeds are not part of hwloc's model: on the live machine they are read
 * from /sys/class/net/<if>/speed (Mbit/s) and
 * /sys/class/infiniband/<dev>/ports/1/rate ("200 Gb/sec (4X HDR)") and stored
 * as the info "CollSpeedMbps" of the NIC's PCI device, so they travel in the
 * exported XML and a dump loads back into the same summary.
 *
 * Dump format (COLL_TOPO_DUMP_FILE=path): path is hwloc XML (2.x, loadable by
 * COLL_TOPO_FILE and by lstopo -i), path.summary is collTopoWriteSummary's
 * text. Both are written to a temporary name and renamed, so processes of one
 * node writing the same path never leave a torn file.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "misc/log.h"
#include "misc/param.h"
#include "topo/topo_internal.h"

/* Reads a sysfs speed: Mbit/s from a net "speed" file, or Gbit/s from an
 * InfiniBand "rate" file (ib = 1). 0 when absent or unknown (-1). */
static uint32_t sysfsSpeed(const char* path, int ib) {
  FILE* f = fopen(path, "re");
  if (!f) return 0;
  double v = 0;
  int ok = fscanf(f, "%lf", &v) == 1;
  fclose(f);
  if (!ok || v <= 0) return 0;
  v = ib ? v * 1000.0 : v;
  return v < 4e9 ? (uint32_t)(v + 0.5) : 0;
}

/* Adds CollSpeedMbps to every NIC PCI device of the live topology: the
 * largest speed among its network and OpenFabrics OS devices. */
static void annotateSpeeds(hwloc_topology_t t) {
  for (hwloc_obj_t o = hwloc_get_next_pcidev(t, NULL); o; o = hwloc_get_next_pcidev(t, o)) {
    if ((o->attr->pcidev.class_id >> 8) != 0x02 || hwloc_obj_get_info_by_name(o, COLL_TOPO_SPEED_INFO)) continue;
    uint32_t best = 0;
    for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling) {
      if (c->type != HWLOC_OBJ_OS_DEVICE || !c->name) continue;
      char path[256];
      uint32_t s = 0;
      if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK) {
        snprintf(path, sizeof path, "/sys/class/net/%s/speed", c->name);
        s = sysfsSpeed(path, 0);
      } else if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS) {
        snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/1/rate", c->name);
        s = sysfsSpeed(path, 1);
      }
      if (s > best) best = s;
    }
    if (best) {
      char v[16];
      snprintf(v, sizeof v, "%u", best);
      hwloc_obj_add_info(o, COLL_TOPO_SPEED_INFO, v);
    }
  }
}

/* hwloc loads its plugins (pci, xml_libxml ...) with the first topology and
 * dlcloses them when the last one is destroyed. libpciaccess, under the pci
 * plugin, keeps its PCI-name cache in globals that no cleanup frees: each
 * unload orphaned ~1 KB, which LeakSanitizer reports in every process that
 * discovered its topology (with no symbol to suppress, the module is gone).
 * One empty topology kept for the life of the process keeps the plugins
 * loaded, the cache reachable, and saves reloading them on later loads. */
static hwloc_topology_t collTopoAnchor;
static pthread_once_t collTopoAnchorOnce = PTHREAD_ONCE_INIT;

/* pthread_once body: creates the anchor topology (never loaded or freed). */
static void anchorInit(void) {
  if (hwloc_topology_init(&collTopoAnchor) != 0) collTopoAnchor = NULL;
}

/* Creates and loads a topology from xmlPath (NULL: this machine) with coll's
 * I/O filters; annotates NIC speeds when it is this machine. */
static collResult_t topoLoad(const char* xmlPath, hwloc_topology_t* out) {
  hwloc_topology_t t;
  *out = NULL;
  pthread_once(&collTopoAnchorOnce, anchorInit);
  if (hwloc_topology_init(&t) != 0) return collSetError(collSystemError, "topology: hwloc_topology_init failed");
  hwloc_topology_set_type_filter(t, HWLOC_OBJ_BRIDGE, HWLOC_TYPE_FILTER_KEEP_ALL);
  hwloc_topology_set_type_filter(t, HWLOC_OBJ_PCI_DEVICE, HWLOC_TYPE_FILTER_KEEP_ALL);
  hwloc_topology_set_type_filter(t, HWLOC_OBJ_OS_DEVICE, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  /* GPUs are keyed by PCI function: skip the OpenCL backend (an ICD can take
   * long to start on GPU nodes) and the GL one (probes X displays). */
  hwloc_topology_set_components(t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "opencl");
  hwloc_topology_set_components(t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "gl");
  if (xmlPath && access(xmlPath, R_OK) != 0) {
    int e = errno;
    hwloc_topology_destroy(t);
    return collSetError(collInvalidUsage, "topology: cannot read hwloc XML %s: %s", xmlPath, strerror(e));
  }
  errno = 0;
  if ((xmlPath && hwloc_topology_set_xml(t, xmlPath) != 0) || hwloc_topology_load(t) != 0) {
    int e = errno;
    hwloc_topology_destroy(t);
    return collSetError(collInvalidUsage, "topology: hwloc cannot load %s%s%s%s", xmlPath ? xmlPath : "this machine",
                        xmlPath ? " (not an hwloc 2.x XML topology?)" : "", e ? ": " : "", e ? strerror(e) : "");
  }
  if (hwloc_topology_is_thissystem(t)) annotateSpeeds(t);
  *out = t;
  return collSuccess;
}

/* Writes the XML to path and the text summary to path.summary (each through
 * a temporary file renamed into place). */
static collResult_t topoDump(hwloc_topology_t t, const collTopoSummary* s, const char* path) {
  size_t len = strlen(path) + 64;
  char* tmp = malloc(len);
  char* sum = malloc(len);
  if (!tmp || !sum) {
    free(tmp);
    free(sum);
    return collSetError(collSystemError, "topology dump: out of memory");
  }
  collResult_t r = collSuccess;
  snprintf(tmp, len, "%s.tmp.%d", path, (int)getpid());
  if (hwloc_topology_export_xml(t, tmp, 0) != 0 || rename(tmp, path) != 0) {
    r = collSetError(collSystemError, "topology dump: cannot write %s: %s", path, strerror(errno));
    unlink(tmp);
  }
  snprintf(sum, len, "%s.summary", path);
  snprintf(tmp, len, "%s.summary.tmp.%d", path, (int)getpid());
  FILE* f = r == collSuccess ? fopen(tmp, "we") : NULL;
  if (r == collSuccess) {
    int bad = !f || collTopoWriteSummary(f, s) != 0;
    if (f && fclose(f) != 0) bad = 1;
    if (bad || rename(tmp, sum) != 0) {
      r = collSetError(collSystemError, "topology dump: cannot write %s: %s", sum, strerror(errno));
      unlink(tmp);
    }
  }
  free(tmp);
  free(sum);
  return r;
}

/* Uncached load + summary + optional dump, for tests and tools (topo.h). */
collResult_t collTopoSummarize(const char* xmlPath, const char* dumpPath, collTopoSummary* out) {
  hwloc_topology_t t;
  collResult_t r = topoLoad(xmlPath, &t);
  if (r != collSuccess) return r;
  collTopoBuildSummary(t, out, NULL, NULL);
  if (dumpPath) r = topoDump(t, out, dumpPath);
  hwloc_topology_destroy(t);
  return r;
}

/* ---- per-process cache ---------------------------------------------------- */
static pthread_mutex_t collTopoLock = PTHREAD_MUTEX_INITIALIZER;
static collTopoLocal collTopoCache;
static int collTopoCached;
static char* collTopoCacheKey; /* COLL_TOPO_FILE it was loaded from, "" = live */

/* Frees the NUMA cpusets of a cached discovery. */
static void localClear(collTopoLocal* l) {
  for (int i = 0; i < l->nnuma; i++) hwloc_bitmap_free(l->numaCpus[i]);
  free(l->numaCpus);
  memset(l, 0, sizeof *l);
}

/* Discovers into l: summary, NIC names, NUMA cpusets; dumps when
 * COLL_TOPO_DUMP_FILE is set (a failed dump is only a warning). A failed
 * live discovery leaves a CPU-count-only summary (also a warning); a bad
 * COLL_TOPO_FILE is an error. */
static collResult_t localDiscover(const char* file, collTopoLocal* l) {
  hwloc_topology_t t;
  collResult_t r = topoLoad(file, &t);
  if (r != collSuccess && file) return r;
  if (r != collSuccess) {
    COLL_WARN(COLL_SUB_INIT, "topology discovery failed (%s); continuing with CPU counts only",
              collLastErrorMessage());
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    l->sum.version = COLL_TOPO_VERSION;
    l->sum.ncores = l->sum.npus = (uint32_t)(n > 0 ? n : 1);
    return collSuccess;
  }
  collTopoBuildSummary(t, &l->sum, &l->nicNames, &l->gpuBus);
  l->thisSystem = hwloc_topology_is_thissystem(t);
  int nn = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  l->numaCpus = nn > 0 ? calloc((size_t)nn, sizeof(hwloc_bitmap_t)) : NULL;
  for (int i = 0; l->numaCpus && i < nn; i++) {
    hwloc_obj_t o = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, (unsigned)i);
    l->numaCpus[i] = hwloc_bitmap_dup(o->cpuset);
    if (l->numaCpus[i]) l->nnuma = i + 1;
    else break;
  }
  const char* dump = collParamStr(COLL_SPARAM_TOPO_DUMP_FILE);
  if (dump && topoDump(t, &l->sum, dump) != collSuccess)
    COLL_WARN(COLL_SUB_INIT, "COLL_TOPO_DUMP_FILE: %s", collLastErrorMessage());
  else if (dump)
    COLL_INFO(COLL_SUB_INIT, "topology written to %s (hwloc XML) and %s.summary", dump, dump);
  hwloc_topology_destroy(t);
  return collSuccess;
}

/* Runs fn on the cached discovery, (re)discovering when COLL_TOPO_FILE is new
 * (topo_internal.h). */
collResult_t collTopoWithLocal(void (*fn)(const collTopoLocal* l, void* arg), void* arg) {
  const char* file = collParamStr(COLL_SPARAM_TOPO_FILE);
  const char* key = file ? file : "";
  pthread_mutex_lock(&collTopoLock);
  if (!collTopoCached || strcmp(collTopoCacheKey, key) != 0) {
    localClear(&collTopoCache);
    free(collTopoCacheKey);
    collTopoCached = 0;
    collTopoCacheKey = strdup(key);
    collResult_t r = collTopoCacheKey ? localDiscover(file, &collTopoCache)
                                      : collSetError(collSystemError, "topology: out of memory");
    if (r != collSuccess) {
      localClear(&collTopoCache);
      pthread_mutex_unlock(&collTopoLock);
      return r;
    }
    collTopoCached = 1;
  }
  fn(&collTopoCache, arg);
  pthread_mutex_unlock(&collTopoLock);
  return collSuccess;
}
