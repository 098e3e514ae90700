/*
 * stats.c - reading the counters (collCommGetStats, collCommGetPeerStats,
 * collCommGetCollStats) and writing them as JSON (COLL_STATS_FILE,
 * collCommWriteStats): the per-rank file tools/coll_report merges.
 *
 * The mailbox carries no transfers of its own: every mailbox call of b
 * bytes (count x type size) is one message of b bytes to and from every
 * peer (each peer reads b bytes of this rank's slot, and this rank b of
 * each peer's), counted under the link class "mailbox".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "misc/log.h"
#include "misc/param.h"
#include "obs/obs_internal.h"
#include "topo/topo.h"
#include "tuner/tuner.h"

/* Enters comm for reading its counters. */
static collResult_t collObsEnter(collComm_t comm, const char* fn) {
  collResult_t r = collCommEnterAny(comm, fn);
  if (r != collSuccess) return r;
  if (!comm->obs) {
    collCommLeave(comm);
    return collSetError(collInvalidUsage, "%s: communicator %p is still initializing", fn, (void*)comm);
  }
  return collSuccess;
}

static const char* collObsPeerLink(collComm_t comm, int p) {
  if (p == comm->rank) return "self";
  const collNet_t* net = collPeerNet(comm, p);
  return net && net->name ? net->name : "?";
}

/* The counters per collective and algorithm, read once per API call
 * (collObsCollSnapshot: the open run of mailbox calls included). */
typedef collObsColl collObsCollTable[COLL_OBS_FNS][COLL_OBS_MAX_ALGOS];

/* Mailbox bytes: each call's count x type size, to and from every peer. */
static uint64_t collObsMbBytes(collObsCollTable k) {
  uint64_t b = 0;
  for (int fn = 0; fn < COLL_OBS_FNS; fn++) b += k[fn][COLL_OBS_ALGO_MAILBOX].bytes;
  return b;
}

static uint64_t collObsMbCalls(collObsCollTable k) {
  uint64_t c = 0;
  for (int fn = 0; fn < COLL_OBS_FNS; fn++) c += k[fn][COLL_OBS_ALGO_MAILBOX].calls;
  return c;
}

static void collObsPeerFill(collComm_t comm, collObsCollTable k, int p, collPeerStats_t* out) {
  const struct collObs* o = comm->obs;
  const collObsPeer* q = &o->peers[p];
  memset(out, 0, sizeof *out);
  uint64_t mb = p == comm->rank ? 0 : collObsMbBytes(k), mc = p == comm->rank ? 0 : collObsMbCalls(k);
  out->bytesSent = COLL_OBS_GET(q->bytesSent) + mb;
  out->bytesRecv = COLL_OBS_GET(q->bytesRecv) + mb;
  out->msgsSent = COLL_OBS_GET(q->msgsSent) + mc;
  out->msgsRecv = COLL_OBS_GET(q->msgsRecv) + mc;
  out->waitNs = COLL_OBS_GET(q->waitNs);
  out->mailboxBytes = mb;
  snprintf(out->link, sizeof out->link, "%s", collObsPeerLink(comm, p));
}

/* Time inside operations: measured, plus the untimed mailbox calls at the
 * mean of the timed ones. */
static uint64_t collObsCallNs(const collObsColl* k) {
  uint64_t calls = k->calls, timed = k->timedCalls, ns = k->timeNs;
  if (timed == 0 || timed >= calls) return ns;
  return ns + (uint64_t)((double)ns / (double)timed * (double)(calls - timed));
}

static void collObsLinkAdd(collStats_t* s, const char* name, const collPeerStats_t* p, uint64_t mb, uint64_t mc) {
  int i = 0;
  while (i < s->nlinks && strcmp(s->links[i].name, name) != 0) i++;
  if (i == s->nlinks) {
    if (s->nlinks == COLL_STATS_MAX_LINKS) return;
    snprintf(s->links[s->nlinks++].name, COLL_STATS_NAME_LEN, "%s", name);
  }
  collLinkStats_t* l = &s->links[i];
  if (p) {
    l->bytesSent += p->bytesSent - mb;
    l->bytesRecv += p->bytesRecv - mb;
    l->msgsSent += p->msgsSent - mc;
    l->msgsRecv += p->msgsRecv - mc;
    l->waitNs += p->waitNs;
  } else {
    l->bytesSent += mb;
    l->bytesRecv += mb;
    l->msgsSent += mc;
    l->msgsRecv += mc;
  }
}

static void collObsTotals(collComm_t comm, collObsCollTable k, collStats_t* s) {
  const struct collObs* o = comm->obs;
  memset(s, 0, sizeof *s);
  s->rank = comm->rank;
  s->nranks = comm->nranks;
  uint64_t mb = collObsMbBytes(k), mc = collObsMbCalls(k);
  for (int p = 0; p < comm->nranks; p++) {
    if (p == comm->rank) continue;
    collPeerStats_t ps;
    collObsPeerFill(comm, k, p, &ps);
    s->bytesSent += ps.bytesSent;
    s->bytesRecv += ps.bytesRecv;
    s->msgsSent += ps.msgsSent;
    s->msgsRecv += ps.msgsRecv;
    s->waitNs += ps.waitNs;
    collObsLinkAdd(s, ps.link, &ps, ps.mailboxBytes, mc);
    if (mc) collObsLinkAdd(s, "mailbox", NULL, mb, mc);
  }
  for (int fn = 0; fn < COLL_OBS_FNS; fn++)
    for (int a = 0; a < COLL_OBS_MAX_ALGOS; a++) {
      s->ops += k[fn][a].calls;
      s->failedOps += k[fn][a].failed;
      s->callNs += collObsCallNs(&k[fn][a]);
    }
  s->elapsedNs = collObsNowNs() - o->tInitNs;
}

collResult_t collCommGetStatsImpl(collComm_t comm, collStats_t* stats) {
  if (!stats) return collSetError(collInvalidArgument, "collCommGetStats: stats is NULL");
  collResult_t r = collObsEnter(comm, "collCommGetStats");
  if (r != collSuccess) return r;
  collObsCollTable k;
  collObsCollSnapshot(comm, k);
  collObsTotals(comm, k, stats);
  collCommLeave(comm);
  return collSuccess;
}

collResult_t collCommGetPeerStatsImpl(collComm_t comm, collPeerStats_t* peers, int npeers) {
  if (!peers && npeers > 0) return collSetError(collInvalidArgument, "collCommGetPeerStats: peers is NULL");
  if (npeers < 0) return collSetError(collInvalidArgument, "collCommGetPeerStats: npeers %d < 0", npeers);
  collResult_t r = collObsEnter(comm, "collCommGetPeerStats");
  if (r != collSuccess) return r;
  if (npeers > comm->nranks) {
    r = collSetError(collInvalidArgument, "collCommGetPeerStats: npeers %d > nranks %d", npeers, comm->nranks);
  } else {
    collObsCollTable k;
    collObsCollSnapshot(comm, k);
    for (int p = 0; p < npeers; p++) collObsPeerFill(comm, k, p, &peers[p]);
  }
  collCommLeave(comm);
  return r;
}

collResult_t collCommGetCollStatsImpl(collComm_t comm, collCollStats_t* rows, int max, int* nrows) {
  if (!nrows || (!rows && max > 0)) return collSetError(collInvalidArgument, "collCommGetCollStats: rows or nrows is NULL");
  if (max < 0) return collSetError(collInvalidArgument, "collCommGetCollStats: max %d < 0", max);
  collResult_t r = collObsEnter(comm, "collCommGetCollStats");
  if (r != collSuccess) return r;
  collObsCollTable tab;
  collObsCollSnapshot(comm, tab);
  int n = 0;
  for (int fn = 0; fn < COLL_OBS_FNS; fn++)
    for (int a = 0; a < COLL_OBS_MAX_ALGOS; a++) {
      const collObsColl* k = &tab[fn][a];
      uint64_t calls = k->calls;
      if (!calls) continue;
      if (n < max) {
        collCollStats_t* row = &rows[n];
        memset(row, 0, sizeof *row);
        snprintf(row->coll, sizeof row->coll, "%s", collObsFnName(fn));
        snprintf(row->algo, sizeof row->algo, "%s", collObsAlgoName(a));
        row->calls = calls;
        row->failed = k->failed;
        row->bytes = k->bytes;
        row->timedCalls = k->timedCalls;
        row->timeNs = k->timeNs;
      }
      n++;
    }
  *nrows = n;
  collCommLeave(comm);
  return collSuccess;
}

collResult_t collCommWriteStatsImpl(collComm_t comm, const char* path) {
  const char* spec = path ? path : collParamStr(COLL_SPARAM_STATS_FILE);
  if (!spec) return collSetError(collInvalidArgument, "collCommWriteStats: path is NULL and COLL_STATS_FILE is unset");
  collResult_t r = collObsEnter(comm, "collCommWriteStats");
  if (r != collSuccess) return r;
  char used[1024];
  FILE* f = collObsOpen(comm, spec, path ? "collCommWriteStats" : "COLL_STATS_FILE", used, sizeof used);
  if (!f) {
    r = collSetError(collSystemError, "collCommWriteStats: cannot write %s", spec);
  } else {
    collObsWriteStats(comm, f, "api");
    if (fclose(f) != 0) r = collSetError(collSystemError, "collCommWriteStats: writing %s failed", used);
  }
  collCommLeave(comm);
  return r;
}

/* ---- JSON ------------------------------------------------------------------------ */
static void collObsJsonTraffic(FILE* f, uint64_t bs, uint64_t br, uint64_t ms, uint64_t mr, uint64_t w) {
  fprintf(f, "\"bytesSent\":%llu,\"bytesRecv\":%llu,\"msgsSent\":%llu,\"msgsRecv\":%llu,\"waitNs\":%llu",
          (unsigned long long)bs, (unsigned long long)br, (unsigned long long)ms, (unsigned long long)mr,
          (unsigned long long)w);
}

void collObsWriteStats(collComm_t comm, FILE* f, const char* why) {
  collObsCollTable tab;
  collObsCollSnapshot(comm, tab);
  collStats_t s;
  collObsTotals(comm, tab, &s);
  collResult_t err = __atomic_load_n(&comm->asyncError, __ATOMIC_ACQUIRE);
  fprintf(f, "{\"kind\":\"coll-stats\",\"version\":1,\"reason\":");
  collObsJsonStr(f, why);
  fprintf(f, ",\"rank\":%d,\"nranks\":%d,\"host\":", comm->rank, comm->nranks);
  collObsJsonStr(f, collHostName());
  fprintf(f, ",\"pid\":%d,\"comm\":\"%016llx\",\"node\":%d,\"nnodes\":%d,\"failed\":%s,\"error\":", (int)getpid(),
          (unsigned long long)comm->commHash, comm->node, comm->nnodes, err != collSuccess ? "true" : "false");
  char msg[sizeof comm->asyncMsg];
  collCommErrorMessage(comm, msg, sizeof msg);
  collObsJsonStr(f, err != collSuccess ? msg : "");
  fprintf(f, ",\"units\":{\"bytes\":\"B\",\"time\":\"ns\",\"capacity\":\"GB/s (1e9 B/s)\"}");
  fprintf(f, ",\"elapsedNs\":%llu,\"callNs\":%llu,\"ops\":%llu,\"failedOps\":%llu,\"totals\":{",
          (unsigned long long)s.elapsedNs, (unsigned long long)s.callNs, (unsigned long long)s.ops,
          (unsigned long long)s.failedOps);
  collObsJsonTraffic(f, s.bytesSent, s.bytesRecv, s.msgsSent, s.msgsRecv, s.waitNs);
  fputs("},\"links\":[", f);
  for (int i = 0; i < s.nlinks; i++) {
    const collLinkStats_t* l = &s.links[i];
    fprintf(f, "%s{\"name\":", i ? "," : "");
    collObsJsonStr(f, l->name);
    fputc(',', f);
    collObsJsonTraffic(f, l->bytesSent, l->bytesRecv, l->msgsSent, l->msgsRecv, l->waitNs);
    fputc('}', f);
  }
  fputs("],\"peers\":[", f);
  for (int p = 0; p < comm->nranks; p++) {
    collPeerStats_t ps;
    collObsPeerFill(comm, tab, p, &ps);
    double lat = 0, bw = 0;
    int calibrated = 0;
    if (p != comm->rank && comm->tuner) bw = collTunerPeerGBps(comm, p, &lat, &calibrated);
    fprintf(f, "%s{\"rank\":%d,\"host\":", p ? "," : "", p);
    collObsJsonStr(f, collCommPeerHost(comm, p));
    fprintf(f, ",\"node\":%d,\"link\":", comm->rankNode ? comm->rankNode[p] : 0);
    collObsJsonStr(f, ps.link);
    fprintf(f, ",\"class\":");
    collObsJsonStr(f, comm->topo ? collTopoLinkName(collTopoLinkClass(comm, comm->rank, p)) : "?");
    fprintf(f, ",\"capacityGBps\":%.6g,\"latencyUs\":%.6g,\"capacitySource\":\"%s\",\"mailboxBytes\":%llu,", bw, lat,
            p == comm->rank ? "-" : calibrated ? "calibration" : "topology", (unsigned long long)ps.mailboxBytes);
    collObsJsonTraffic(f, ps.bytesSent, ps.bytesRecv, ps.msgsSent, ps.msgsRecv, ps.waitNs);
    fputc('}', f);
  }
  fputs("],\"colls\":[", f);
  int n = 0;
  for (int fn = 0; fn < COLL_OBS_FNS; fn++)
    for (int a = 0; a < COLL_OBS_MAX_ALGOS; a++) {
      const collObsColl* k = &tab[fn][a];
      if (!k->calls) continue;
      fprintf(f, "%s{\"coll\":\"%s\",\"algo\":\"%s\",\"calls\":%llu,\"failed\":%llu,\"bytes\":%llu,\"timedCalls\":%llu,"
              "\"timeNs\":%llu,\"estTimeNs\":%llu}",
              n++ ? "," : "", collObsFnName(fn), collObsAlgoName(a), (unsigned long long)k->calls,
              (unsigned long long)k->failed, (unsigned long long)k->bytes, (unsigned long long)k->timedCalls,
              (unsigned long long)k->timeNs, (unsigned long long)collObsCallNs(k));
    }
  fputs("]}\n", f);
}
