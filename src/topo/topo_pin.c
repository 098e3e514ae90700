/*
 * topo_pin.c - where a rank sits (NUMA node of its CPU binding, the NIC its
 * transport uses) and pinning its progress thread.
 *
 * Policy: COLL_PROGRESS_CPU=<n> pins to that one CPU. Otherwise the progress
 * thread is bound to the CPUs of the NUMA node of the rank's NIC (its GPU's
 * when no NIC is known), intersected with the process's own binding, but only
 * when that says something: the topology is this machine's (not a
 * COLL_TOPO_FILE), the machine has several NUMA nodes, the intersection is not
 * empty and is narrower than the binding. A whole NUMA node, never one core:
 * the thread sleeps when idle and must not take a core the application needs.
 * Pinning failures are logged at INFO and ignored.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "misc/log.h"
#include "misc/param.h"
#include "topo/topo_internal.h"

/* The calling thread's CPU affinity as a new hwloc bitmap (NULL on error). */
static hwloc_bitmap_t threadCpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return NULL;
  hwloc_bitmap_t b = hwloc_bitmap_alloc();
  for (int c = 0; b && c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &set)) hwloc_bitmap_set(b, (unsigned)c);
  return b;
}

/* Placement of the calling rank and its progress-thread decision (see the
 * file comment and topo_internal.h). */
void collTopoPlace(const collTopoLocal* l, const char* netDev, const char* gpuBus, collTopoRank* r,
                   hwloc_bitmap_t* pinSet, char* why, size_t whyLen) {
  const collTopoSummary* s = &l->sum;
  memset(r, 0, sizeof *r);
  r->numa = r->gpu = r->nic = -1;
  *pinSet = NULL;
  int nt = s->nnics + s->neths < COLL_TOPO_MAX_NICS ? s->nnics + s->neths : COLL_TOPO_MAX_NICS;
  for (int i = 0; netDev && *netDev && i < nt && r->nic < 0; i++)
    for (int k = 0; k < COLL_TOPO_NIC_NAMES; k++)
      if (strcmp(l->nicNames[i][k], netDev) == 0) r->nic = (int16_t)i;
  int ng = s->ngpus < COLL_TOPO_MAX_GPUS ? s->ngpus : COLL_TOPO_MAX_GPUS;
  for (int g = 0; gpuBus && *gpuBus && g < ng && r->gpu < 0; g++)
    if (strcmp(l->gpuBus[g], gpuBus) == 0) r->gpu = (int16_t)g;
  hwloc_bitmap_t mine = l->thisSystem ? threadCpus() : NULL;
  for (int k = 0; mine && k < l->nnuma && r->numa < 0; k++)
    if (hwloc_bitmap_isincluded(mine, l->numaCpus[k])) r->numa = (int16_t)k;

  int target = r->nic >= 0 ? s->nics[r->nic].numa : r->gpu >= 0 ? s->gpus[r->gpu].numa : -1;
  const char* what = r->nic >= 0 ? "NIC" : "GPU";
  if (!l->thisSystem) {
    snprintf(why, whyLen, "not pinned: the topology is not this machine's (COLL_TOPO_FILE)");
  } else if (l->nnuma < 2) {
    snprintf(why, whyLen, "not pinned: %d NUMA node", l->nnuma);
  } else if (r->nic < 0 && r->gpu < 0) {
    snprintf(why, whyLen, "not pinned: the rank's NIC (%s) is not a PCI device of this machine",
             netDev && *netDev ? netDev : "none");
  } else if (target < 0 || target >= l->nnuma || !mine) {
    snprintf(why, whyLen, "not pinned: the rank's %s has no single NUMA node", what);
  } else {
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (set) hwloc_bitmap_and(set, l->numaCpus[target], mine);
    char cpus[64] = "";
    if (set) hwloc_bitmap_list_snprintf(cpus, sizeof cpus, set);
    if (!set || hwloc_bitmap_iszero(set)) {
      snprintf(why, whyLen, "not pinned: NUMA node %d of the %s is outside the process's CPU binding", target, what);
    } else if (hwloc_bitmap_isequal(set, mine)) {
      snprintf(why, whyLen, "not pinned: already bound inside NUMA node %d of the %s", target, what);
    } else {
      snprintf(why, whyLen, "NUMA node %d of the %s (%s), CPUs %s", target, what, netDev ? netDev : "-", cpus);
      *pinSet = set;
      set = NULL;
    }
    hwloc_bitmap_free(set);
  }
  hwloc_bitmap_free(mine);
}

/* Applies COLL_PROGRESS_CPU or the decision made at init to the calling
 * thread; logs the outcome at INFO, never fails (topo.h). */
void collTopoPinProgressThread(collComm_t comm) {
  int64_t cpu = collParamInt(COLL_PARAM_PROGRESS_CPU);
  int rank = comm ? comm->rank : -1;
  if (cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    int rc = cpu < CPU_SETSIZE ? (CPU_SET((int)cpu, &set), pthread_setaffinity_np(pthread_self(), sizeof set, &set))
                               : EINVAL;
    if (rc == 0)
      COLL_INFO(COLL_SUB_INIT, "rank %d: progress thread pinned to CPU %lld (COLL_PROGRESS_CPU)", rank, (long long)cpu);
    else
      COLL_WARN_ONCE(COLL_SUB_INIT, "rank %d: cannot pin the progress thread to CPU %lld (COLL_PROGRESS_CPU): %s; it "
                     "runs unpinned", rank, (long long)cpu, strerror(rc));
    return;
  }
  const struct collTopo* t = comm ? comm->topo : NULL;
  if (!t || !t->pinSet) {
    COLL_INFO(COLL_SUB_INIT, "rank %d: progress thread %s", rank, t ? t->pinWhy : "not pinned: no topology");
    return;
  }
  hwloc_const_bitmap_t b = t->pinSet;
  int last = hwloc_bitmap_last(b);
  size_t bytes = CPU_ALLOC_SIZE(last + 1);
  cpu_set_t* set = CPU_ALLOC(last + 1);
  int rc = ENOMEM;
  if (set) {
    CPU_ZERO_S(bytes, set);
    unsigned c;
    hwloc_bitmap_foreach_begin(c, b) CPU_SET_S(c, bytes, set);
    hwloc_bitmap_foreach_end();
    rc = pthread_setaffinity_np(pthread_self(), bytes, set);
    CPU_FREE(set);
  }
  if (rc == 0)
    COLL_INFO(COLL_SUB_INIT, "rank %d: progress thread pinned to %s", rank, t->pinWhy);
  else
    COLL_INFO(COLL_SUB_INIT, "rank %d: cannot pin the progress thread to %s: %s", rank, t->pinWhy, strerror(rc));
}
