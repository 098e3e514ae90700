/*
 * devmodel.c - the cost model of device-resident calls (engine/devpath.c):
 * inside a node their messages go GPU to GPU (transports/p2p: the copy
 * engine over NVLink or PCIe), not through a shared-memory ring, so the
 * intra-node paths (SHM and LOCAL) take the topology's GPU link between the
 * ranks' GPUs (topo_links.c: NVLINK per-GPU NVLink bandwidth, 0.6 us; PCIE
 * the PCIe link x 24/31.5, 1.0 us): the slowest bandwidth and the largest
 * latency over the pairs of ranks that share a node. Everything else (the
 * network path, reductions, copies, step overhead, CPU share) is the host
 * model's.
 */
#include "core/comm.h"
#include "topo/topo.h"
#include "tuner/model.h"

int collTuneDeviceModel(collComm_t comm, const collTuneModel* host, collTuneModel* out, int* linkClass) {
  *out = *host;
  *linkClass = -1;
  const struct collTopo* t = comm->topo;
  double bw = 0, lat = 0;
  int pairs = 0, cls = -1;
  for (int a = 0; t && comm->rankNode && a < comm->nranks; a++)
    for (int b = 0; b < comm->nranks; b++) {
      if (a == b || comm->rankNode[a] != comm->rankNode[b]) continue;
      if (t->peers[a].rank.gpu < 0 || t->peers[b].rank.gpu < 0) return 0; /* a GPU not known: host numbers */
      double x = collTopoLinkBw(comm, a, b), y = collTopoLinkLat(comm, a, b);
      int c = collTopoLinkClass(comm, a, b);
      if (!pairs++ || x < bw) bw = x;
      if (y > lat) lat = y;
      if (c == COLL_LINK_PCIE || cls < 0) cls = c; /* the slower class when both occur */
    }
  if (!pairs) return 0;
  out->latUs[COLL_PATH_SHM] = out->latUs[COLL_PATH_LOCAL] = lat;
  out->bwGBs[COLL_PATH_SHM] = out->bwGBs[COLL_PATH_LOCAL] = bw;
  *linkClass = cls;
  return 1;
}
