/*
 * topo_nic.c - which of a transport's devices (NICs, by PCI path) is nearest
 * to a rank: the devices are matched to the NICs of the hwloc topology by
 * PCI bus id, and ranked by the PCIe switch, NUMA node and package they share
 * with the rank's GPU, or with the rank's NUMA node for host-memory ranks
 * (topo_internal.h). Used when a transport has several devices (the
 * p5en fixture has 16 EFA NICs, 2 per GPU) to pick the one each rank listens
 * and connects on.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "misc/log.h"
#include "topo/topo_internal.h"

/* Whether the n bytes at p look like a PCI bus id "dddd:bb:dd.f". */
static int isBusId(const char* p, size_t n) {
  if (n != 12 || p[4] != ':' || p[7] != ':' || p[10] != '.') return 0;
  for (size_t i = 0; i < n; i++)
    if (i != 4 && i != 7 && i != 10 && !isxdigit((unsigned char)p[i])) return 0;
  return 1;
}

int collTopoNicOfPci(const collTopoSummary* s, const collTopoNicNames* names, const char* pciPath) {
  if (!pciPath || !*pciPath) return -1;
  const char* bus = NULL; /* the last component that is a bus id: the device, not its bridges */
  for (const char* p = pciPath; *p;) {
    const char* e = strchr(p, '/');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (isBusId(p, n)) bus = p;
    p += n + (e != NULL);
  }
  if (!bus) return -1;
  int nt = s->nnics + s->neths < COLL_TOPO_MAX_NICS ? s->nnics + s->neths : COLL_TOPO_MAX_NICS;
  for (int i = 0; i < nt; i++)
    if (strncasecmp((*names)[i][COLL_TOPO_NIC_BUSID], bus, 12) == 0) return i;
  return -1;
}

/* 0 best .. 4 unknown: how far NIC i is from the rank. */
static int distance(const collTopoSummary* s, int i, int gpu, int numa) {
  if (i < 0) return 4;
  const collTopoNic* c = &s->nics[i];
  if (gpu >= 0 && gpu < COLL_TOPO_MAX_GPUS && gpu < s->ngpus) {
    const collTopoGpu* g = &s->gpus[gpu];
    if (g->sw && g->sw == c->sw) return 0;
    if (g->numa >= 0 && g->numa == c->numa) return 1;
    if (g->package >= 0 && g->package == c->package) return 2;
    return 3;
  }
  if (numa >= 0) return c->numa == numa ? 1 : 3;
  return 3;
}

int collTopoPickNic(const collTopoSummary* s, const collTopoNicNames* names, const char* const* pciPaths, int n,
                    int gpu, int numa, int spread, char* why, size_t whyLen) {
  static const char* const words[] = {"on the GPU's PCIe switch", "on the same NUMA node", "on the same package",
                                      "farther (no device is on the rank's NUMA node or package)",
                                      "not in the topology"};
  int nic[64], best = 4, ntie = 0;
  if (n > 64) n = 64;
  for (int d = 0; d < n; d++) {
    nic[d] = collTopoNicOfPci(s, names, pciPaths[d]);
    int x = distance(s, nic[d], gpu, numa);
    if (x < best) best = x;
  }
  for (int d = 0; d < n; d++) ntie += distance(s, nic[d], gpu, numa) == best;
  if (n <= 0 || ntie == 0) {
    if (why) snprintf(why, whyLen, "no device");
    return 0;
  }
  /* ties: a GPU takes the k-th tied device, k = its index among the GPUs
   * that see the same ties (those on its switch); host ranks by `spread` */
  int k = spread < 0 ? 0 : spread;
  if (gpu >= 0 && best == 0) {
    k = 0;
    for (int h = 0; h < gpu && h < s->ngpus && h < COLL_TOPO_MAX_GPUS; h++) k += s->gpus[h].sw == s->gpus[gpu].sw;
  }
  k %= ntie;
  int pick = 0;
  for (int d = 0, seen = 0; d < n; d++)
    if (distance(s, nic[d], gpu, numa) == best && seen++ == k) pick = d;
  if (why)
    snprintf(why, whyLen, "%s (%d of %d device%s %s)", nic[pick] >= 0 ? (*names)[nic[pick]][COLL_TOPO_NIC_BUSID] : "-",
             ntie, n, n == 1 ? "" : "s", words[best]);
  return pick;
}

typedef struct {
  const char* const* paths;
  int n, spread, pick;
  char* why;
  size_t whyLen;
} pickArg;

static void pickFn(const collTopoLocal* l, void* arg) {
  pickArg* a = arg;
  collTopoRank r;
  hwloc_bitmap_t pin = NULL;
  char tmp[160];
  collTopoPlace(l, NULL, NULL, &r, &pin, tmp, sizeof tmp); /* the rank's NUMA node */
  hwloc_bitmap_free(pin);
  a->pick = collTopoPickNic(&l->sum, &l->nicNames, a->paths, a->n, r.gpu, r.numa, a->spread, a->why, a->whyLen);
}

int collTopoPickNetDev(const char* const* pciPaths, int n, int spread, char* why, size_t whyLen) {
  pickArg a = {pciPaths, n, spread, 0, why, whyLen};
  if (n <= 1) return 0;
  if (collTopoWithLocal(pickFn, &a) != collSuccess) {
    if (why) snprintf(why, whyLen, "topology unavailable: %s", collLastErrorMessage());
    collClearError();
    return 0;
  }
  return a.pick;
}
