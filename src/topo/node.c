/* node.c - which ranks share a node. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "misc/param.h"
#include "topo/topo.h"

static uint64_t collFnv1a(const char* s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
  return h;
}

uint64_t collTopoHostHash(void) {
  const char* id = collParamStr(COLL_SPARAM_HOSTID);
  if (id) return collFnv1a(id);
  char buf[256] = {0};
  gethostname(buf, 128);
  FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    size_t l = strlen(buf);
    if (!fgets(buf + l, (int)(sizeof buf - l), f)) buf[l] = 0;
    fclose(f);
  }
  return collFnv1a(buf);
}

uint64_t collTopoKernelHash(void) {
  char buf[128] = {0};
  FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (!f) return collTopoHostHash();
  if (!fgets(buf, (int)sizeof buf, f)) buf[0] = 0;
  fclose(f);
  return buf[0] ? collFnv1a(buf) : collTopoHostHash();
}

void collTopoNodes(collComm_t comm) {
  int n = comm->nranks;
  comm->nnodes = 0;
  for (int i = 0; i < n; i++) {
    int j = 0;
    while (j < i && comm->peers[j].hostHash != comm->peers[i].hostHash) j++;
    comm->rankNode[i] = j < i ? comm->rankNode[j] : comm->nnodes++;
  }
  comm->node = comm->rankNode[comm->rank];
  comm->localRank = comm->localRanks = comm->kernelRanks = 0;
  for (int i = 0; i < n; i++) {
    if (comm->peers[i].kernelHash == comm->peers[comm->rank].kernelHash) comm->kernelRanks++;
    if (comm->rankNode[i] != comm->node) continue;
    if (i < comm->rank) comm->localRank++;
    comm->localRanks++;
  }
}
