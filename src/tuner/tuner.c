/* tuner.c - per-call choice of algorithm, chunk size and channel count
 * (tuner.h), restricted by COLL_ALGO (algo_env.c), and the TUNE log. */
#include "tuner/tuner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "algorithms/algorithms.h"
#include "core/comm.h"
#include "misc/log.h"
#include "misc/param.h"
#include "reduce/reduce.h"
#include "topo/topo.h"
#include "tuner/cost.h"
#include "tuner/model.h"
#include "tuner/plugin.h"

#define TUNE_BUCKETS 48   /* power-of-two byte buckets: 1 B .. 128 TiB */
#define TUNE_ESIZES 4     /* element sizes 1, 2, 4, 8 bytes */
#define TUNE_DIRECT_MAX_RANKS 16 /* one-shot schedules grow as nranks^2 */
#define TUNE_COLLS (COLL_FN_REDUCE + 1)
#define TUNE_MARGIN 0.95 /* a later candidate must be 5% faster to win (registry order breaks near-ties) */
#define TUNE_INFEASIBLE 1e29

static const size_t kChunks[] = {128 << 10, 512 << 10, 2 << 20};
static const int kChannels[] = {1, 2, 4};

typedef struct {
  int valid;
  int mailboxLogged;
  collTuneChoice c;
  const char* forcedName; /* last COLL_ALGO list seen here, and the choice within it */
  collTuneChoice forced;
} tuneEntry;

struct collTunerState {
  collTuneModel model;
  collTuneModel devModel; /* device-resident calls (collTuneDeviceModel) */
  int devLink;            /* its intra-node GPU link class, -1: none known (devModel = model) */
  collTuneLayout layout;
  collTunerPlugin plugin;
  /* [device-resident] per element size too: at a few elements per rank the
   * count, not the bytes, shapes the schedules (1 double is not 2 floats) */
  tuneEntry cache[2][TUNE_COLLS][TUNE_ESIZES][TUNE_BUCKETS];
};

static const char* collFnKeys[COLL_FN_COUNT] = {"allreduce", "allgather", "reducescatter", "broadcast",
                                                "reduce",    "send",      "recv"};

/* ---- cost of candidates --------------------------------------------------- */
typedef struct {
  const collAlgo* algo[COLL_TUNER_MAX_CANDIDATES];
  const char* name[COLL_TUNER_MAX_CANDIDATES];
  double us[COLL_TUNER_MAX_CANDIDATES];
  size_t chunk[COLL_TUNER_MAX_CANDIDATES];
  int nch[COLL_TUNER_MAX_CANDIDATES];
  int n, best;
} tuneTable;

static int algoUseful(const collAlgo* a, const collTuneLayout* l) {
  if (strncmp(a->name, "hier", 4) == 0) return l->nnodes > 1 && l->nranks > l->nnodes;
  if (strcmp(a->name, "direct") == 0) return l->nranks <= TUNE_DIRECT_MAX_RANKS;
  if (strcmp(a->name, "zerocopy") == 0) return 0; /* its schedule is ring's: collTunerZeroCopy decides */
  return 1;
}

/* Cheapest chunk size and channel count for one algorithm. */
static void priceAlgo(collComm_t comm, const collTuneModel* m, const collAlgo* a, collFunc fn, size_t count,
                      size_t esize, double* us, size_t* chunkOut, int* nchOut) {
  const struct collTunerState* t = comm->tuner;
  int fixedChunk = collParamIsSet(COLL_PARAM_CHUNKSIZE), fixedCh = collParamIsSet(COLL_PARAM_NCHANNELS);
  size_t nChunks = fixedChunk ? 1 : sizeof kChunks / sizeof kChunks[0];
  *us = 1e30;
  *chunkOut = comm->chunkBytes;
  *nchOut = comm->nchannels;
  for (size_t ci = 0; ci < nChunks; ci++) {
    size_t chunk = fixedChunk ? comm->chunkBytes : kChunks[ci];
    size_t chunkElems = chunk / esize ? chunk / esize : 1;
    size_t sliceElems = fn == COLL_FN_ALLREDUCE ? chunkElems * (size_t)comm->nranks : chunkElems;
    size_t nslices = (count + sliceElems - 1) / sliceElems;
    collSliceCost sc = collCostSlice(m, &t->layout, a->build, fn, count < sliceElems ? count : sliceElems, esize);
    for (size_t hi = 0; hi < sizeof kChannels / sizeof kChannels[0]; hi++) {
      int nch = fixedCh ? comm->nchannels : kChannels[hi];
      if (nch > comm->maxChannels) continue;
      double cost = collCostCall(&sc, nslices, nch);
      if (cost < *us * 0.999) { /* prefer fewer channels / earlier chunks on ties */
        *us = cost;
        *chunkOut = chunk;
        *nchOut = nch;
      }
      if (fixedCh) break;
    }
    if (nslices <= 1) break; /* larger chunks: the same single slice */
  }
}

/* Prices the rows that build fn: every useful one (allowed == 0), or those
 * in allowed (COLL_ALGO), the useful ones if there are any. */
static void priceAll(collComm_t comm, const collTuneModel* m, collFunc fn, size_t count, size_t esize,
                     uint64_t allowed, tuneTable* tt) {
  memset(tt, 0, sizeof *tt);
  tt->best = -1;
  int anyUseful = !allowed;
  for (int i = 0; allowed && collAlgoTable[i].name && i < 64; i++)
    if ((allowed >> i & 1) && algoUseful(&collAlgoTable[i], &comm->tuner->layout)) anyUseful = 1;
  for (const collAlgo* a = collAlgoTable; a->name && tt->n < COLL_TUNER_MAX_CANDIDATES; a++) {
    int row = (int)(a - collAlgoTable);
    if (!(a->funcMask & (1u << (unsigned)fn)) || (allowed && (row >= 64 || !(allowed >> row & 1))) ||
        (anyUseful && !algoUseful(a, &comm->tuner->layout)))
      continue;
    int i = tt->n++;
    tt->algo[i] = a;
    tt->name[i] = a->name;
    priceAlgo(comm, m, a, fn, count, esize, &tt->us[i], &tt->chunk[i], &tt->nch[i]);
    if (tt->us[i] < TUNE_INFEASIBLE && (tt->best < 0 || tt->us[i] < TUNE_MARGIN * tt->us[tt->best])) tt->best = i;
  }
}

static void formatTable(const tuneTable* tt, char* buf, size_t len) {
  size_t o = 0;
  buf[0] = 0;
  for (int i = 0; i < tt->n && o + 1 < len; i++)
    o += tt->us[i] >= TUNE_INFEASIBLE
             ? (size_t)snprintf(buf + o, len - o, "%s%s n/a", i ? ", " : "", tt->name[i])
             : (size_t)snprintf(buf + o, len - o, "%s%s %.1f", i ? ", " : "", tt->name[i], tt->us[i]);
}

/* Asks the plugin; applies its answer to *c when valid. */
static void askPlugin(collComm_t comm, collFunc fn, size_t bytes, const tuneTable* tt, collTuneChoice* c) {
  collTunerPlugin* p = &comm->tuner->plugin;
  if (!p->ops || tt->n == 0) return;
  collTunerQuery_t q = {(collTunerColl_t)fn, bytes, comm->nranks, comm->nnodes, tt->n, tt->name, tt->us,
                        tt->best, c->chunkBytes, c->nchannels, comm->maxChannels};
  collTunerAnswer_t ans = {-1, 0, 0};
  if (p->ops->getChoice(p->context, &q, &ans) != collSuccess) {
    COLL_WARN(COLL_SUB_TUNE, "tuner plugin %s: getChoice failed for %s %zu bytes; using the cost model",
              p->ops->name ? p->ops->name : "?", collFnKeys[fn], bytes);
    return;
  }
  if (ans.algorithm >= 0 && ans.algorithm < tt->n) {
    c->algo = tt->algo[ans.algorithm];
    c->predictedUs = tt->us[ans.algorithm];
    c->chunkBytes = tt->chunk[ans.algorithm];
    c->nchannels = tt->nch[ans.algorithm];
  }
  if (ans.chunkBytes >= 1024 && !collParamIsSet(COLL_PARAM_CHUNKSIZE)) c->chunkBytes = ans.chunkBytes;
  if (ans.nchannels >= 1 && ans.nchannels <= comm->maxChannels && !collParamIsSet(COLL_PARAM_NCHANNELS))
    c->nchannels = ans.nchannels;
}

static int bucketOf(size_t bytes) {
  int b = 0;
  while (b + 1 < TUNE_BUCKETS && ((size_t)1 << (b + 1)) <= bytes) b++;
  return b;
}

/* Geometric middle of a bucket, in elements (at least 1). */
static size_t bucketCount(int b, size_t esize) {
  double mid = ldexp(1.0, b) * 1.41421356;
  size_t c = (size_t)(mid / (double)esize);
  return c ? c : 1;
}

static tuneEntry* cacheEntry(struct collTunerState* t, int dev, collFunc fn, size_t count, size_t esize) {
  int s = 0;
  while (s + 1 < TUNE_ESIZES && ((size_t)1 << s) < esize) s++;
  return &t->cache[dev][fn][s][bucketOf(count * esize)];
}

/* The model of a call: the device one for device-resident calls (dev 1). */
static const collTuneModel* modelOf(const struct collTunerState* t, int dev) { return dev ? &t->devModel : &t->model; }

/* What the TUNE lines say after the byte count of a device-resident call. */
static const char* devNote(int dev) { return dev ? " device-resident" : ""; }

static void decide(collComm_t comm, int dev, collFunc fn, size_t count, size_t esize, uint64_t allowed,
                   const char* spec, collTuneChoice* c) {
  tuneTable tt;
  priceAll(comm, modelOf(comm->tuner, dev), fn, count, esize, allowed, &tt);
  c->algo = tt.best >= 0 ? tt.algo[tt.best] : NULL;
  c->predictedUs = tt.best >= 0 ? tt.us[tt.best] : 0;
  c->chunkBytes = tt.best >= 0 ? tt.chunk[tt.best] : comm->chunkBytes;
  c->nchannels = tt.best >= 0 ? tt.nch[tt.best] : comm->nchannels;
  askPlugin(comm, fn, count * esize, &tt, c);
  if (collLogEnabled(COLL_LOG_INFO, COLL_SUB_TUNE)) {
    char buf[1024];
    formatTable(&tt, buf, sizeof buf);
    COLL_INFO(COLL_SUB_TUNE,
              "tuner: %s %zu bytes%s (%zu x %zu B) nranks %d nnodes %d -> %s chunk %zu channels %d (%s%s%spredicted "
              "us: %s)",
              collFnKeys[fn], count * esize, devNote(dev), count, esize, comm->nranks, comm->nnodes,
              c->algo ? c->algo->name : "?",
              c->chunkBytes, c->nchannels, spec ? "COLL_ALGO allows " : "", spec ? spec : "", spec ? "; " : "", buf);
  }
}

collResult_t collTunerChoose(collComm_t comm, collFunc fn, size_t count, collDataType_t dtype, const char* forcedAlgo,
                             int device, collTuneChoice* out) {
  size_t esize = collTypeSize(dtype);
  if ((unsigned)fn >= TUNE_COLLS || esize == 0)
    return collSetError(collInvalidArgument, "tuner: no algorithms for function %d", (int)fn);
  struct collTunerState* t = comm->tuner;
  int dev = device && t->devLink >= 0; /* without GPU links the device model is the host one */
  tuneEntry* e = cacheEntry(t, dev, fn, count, esize);
  if (!e->valid) {
    decide(comm, dev, fn, bucketCount(bucketOf(count * esize), esize), esize, 0, NULL, &e->c);
    e->valid = 1;
  }
  *out = e->c;
  if (forcedAlgo) {
    if (forcedAlgo != e->forcedName) { /* COLL_ALGO lists are static strings: decide once */
      uint64_t allowed;
      collResult_t r = collAlgoSpecMask(fn, forcedAlgo, &allowed);
      if (r != collSuccess) return r;
      size_t bc = bucketCount(bucketOf(count * esize), esize);
      if ((allowed & (allowed - 1)) == 0) { /* one algorithm: forced, useful here or not */
        const collAlgo* a = &collAlgoTable[__builtin_ctzll(allowed)];
        double us;
        e->forced.algo = a;
        priceAlgo(comm, modelOf(t, dev), a, fn, bc, esize, &us, &e->forced.chunkBytes, &e->forced.nchannels);
        e->forced.predictedUs = us;
        COLL_INFO(COLL_SUB_TUNE,
                  "tuner: %s %zu bytes%s (%zu x %zu B) nranks %d nnodes %d -> %s chunk %zu channels %d (forced by "
                  "COLL_ALGO; predicted us %.1f)",
                  collFnKeys[fn], bc * esize, devNote(dev), bc, esize, comm->nranks, comm->nnodes, a->name, e->forced.chunkBytes,
                  e->forced.nchannels, us);
      } else {
        decide(comm, dev, fn, bc, esize, allowed, forcedAlgo, &e->forced);
      }
      e->forcedName = forcedAlgo;
    }
    if (e->forced.algo != e->c.algo) *out = e->forced;
  }
  if (!out->algo) return collSetError(collInvalidArgument, "no algorithm builds %s", collFnKeys[fn]);
  if (collParamIsSet(COLL_PARAM_CHUNKSIZE)) out->chunkBytes = comm->chunkBytes;
  if (collParamIsSet(COLL_PARAM_NCHANNELS)) out->nchannels = comm->nchannels;
  return collSuccess;
}

void collTunerNoteMailbox(collComm_t comm, collFunc fn, size_t count, collDataType_t dtype) {
  size_t esize = collTypeSize(dtype);
  if ((unsigned)fn >= TUNE_COLLS || !collLogEnabled(COLL_LOG_INFO, COLL_SUB_TUNE)) return;
  tuneEntry* e = cacheEntry(comm->tuner, 0, fn, count, esize);
  if (e->mailboxLogged) return;
  e->mailboxLogged = 1;
  COLL_INFO(COLL_SUB_TUNE,
            "tuner: %s %zu bytes (%zu x %zu B) nranks %d nnodes %d -> mailbox (one-shot through shared memory)",
            collFnKeys[fn], count * esize, count, esize, comm->nranks, comm->nnodes);
}

#define TUNE_ZEROCOPY_MIN_BYTES ((size_t)1 << 20)

int collTunerZeroCopy(collComm_t comm, collFunc fn, size_t bytes, const char* spec) {
  (void)comm;
  if ((fn != COLL_FN_ALLREDUCE && fn != COLL_FN_REDUCESCATTER && fn != COLL_FN_ALLGATHER) ||
      !collAlgoSpecAllows(spec, "zerocopy"))
    return 0;
  return (spec && strcasecmp(spec, "zerocopy") == 0) || bytes >= TUNE_ZEROCOPY_MIN_BYTES;
}

double collTunerPeerGBps(collComm_t comm, int peer, double* latUs, int* calibrated) {
  const struct collTunerState* t = comm->tuner;
  int path = collCostPath(&t->layout, comm->rank, peer);
  *latUs = t->model.latUs[path];
  *calibrated = collParamInt(COLL_PARAM_TUNE_CALIBRATE) != 0 && comm->nranks > 1;
  return t->model.bwGBs[path];
}

/* ---- init ------------------------------------------------------------------ */
static void logLadder(collComm_t comm) {
  static const size_t esize = 4; /* float */
  for (int fn = 0; fn < TUNE_COLLS; fn++)
    for (size_t bytes = 8; bytes <= ((size_t)256 << 20); bytes *= 4) {
      collTuneChoice c;
      decide(comm, 0, (collFunc)fn, bytes / esize, esize, 0, NULL, &c);
    }
}

collResult_t collTunerInit(collComm_t comm) {
  struct collTunerState* t = calloc(1, sizeof *t);
  if (!t) return collSetError(collSystemError, "tuner: out of memory");
  comm->tuner = t;
  t->layout.nranks = comm->nranks;
  t->layout.rankNode = comm->rankNode;
  t->layout.nnodes = comm->nnodes;
  t->layout.intraShm = comm->nets[COLL_NET_INTRA] != NULL;
  t->layout.netLinks = collTuneNetLinks(comm);
  collResult_t r = collTuneModelInit(comm, &t->layout, &t->model);
  if (r != collSuccess) return r;
  if ((r = collTunerPluginLoad(&t->plugin, comm->nranks, comm->nnodes)) != collSuccess) return r;
  const collTuneModel* m = &t->model;
  COLL_INFO(COLL_SUB_TUNE,
            "tuner model%s: shm %.1f us %.2f GB/s, local (%s) %.1f us %.2f GB/s, net %.1f us %.2f GB/s, reduce %.2f "
            "GB/s, copy %.2f GB/s, step %.1f us, cpu share %.2f, network links per node %d",
            collParamInt(COLL_PARAM_TUNE_CALIBRATE) ? " (calibrated)" : "", m->latUs[COLL_PATH_SHM],
            m->bwGBs[COLL_PATH_SHM], collTuneLocalNetName(comm), m->latUs[COLL_PATH_LOCAL], m->bwGBs[COLL_PATH_LOCAL],
            m->latUs[COLL_PATH_NET], m->bwGBs[COLL_PATH_NET], m->reduceGBs, m->copyGBs, m->stepUs, m->cpuShare,
            t->layout.netLinks);
  t->devLink = -1;
  if (collTuneDeviceModel(comm, m, &t->devModel, &t->devLink))
    COLL_INFO(COLL_SUB_TUNE, "tuner device model: GPU links inside a node %s %.1f us %.2f GB/s (device-resident calls)",
              collTopoLinkName(t->devLink), t->devModel.latUs[COLL_PATH_SHM], t->devModel.bwGBs[COLL_PATH_SHM]);
  else
    COLL_INFO(COLL_SUB_TUNE, "tuner device model: the host one (no two ranks of a node with known GPUs)");
  if (comm->rank == 0 && collLogEnabled(COLL_LOG_INFO, COLL_SUB_TUNE)) logLadder(comm);
  return collSuccess;
}

void collTunerFree(collComm_t comm) {
  if (!comm->tuner) return;
  collTunerPluginUnload(&comm->tuner->plugin);
  free(comm->tuner);
  comm->tuner = NULL;
}
