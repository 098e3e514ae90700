/* net.c - the table of transports and their one-time initialization, the
 * ordered transport list of a communicator and the choice per pair of ranks
 * (net.h), and the COLL_NET_PLUGIN loader (a shared object exporting
 * collNetPlugin_v3, or the older collNetPlugin_v2). */
#include "core/net.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "misc/log.h"
#include "misc/param.h"
#include "topo/topo.h"
#if COLL_HAVE_IB
#include "transports/ib/ib.h"
#endif
#include "transports/loopback/loopback.h"
#include "transports/shm/shm.h"
#include "transports/tcp/tcp.h"

/* Inter-node transports by COLL_NET / config.netName; the first is the default. */
static const collNet_t* const collInterNets[] = {&collNetTcp, &collNetLoopback,
#if COLL_HAVE_IB
                                                    &collNetIb,
#endif
};
#define COLL_NINTER ((int)(sizeof collInterNets / sizeof collInterNets[0]))
static pthread_mutex_t collNetLock = PTHREAD_MUTEX_INITIALIZER;
static int collInterReady[COLL_NINTER];
static int collIntraState; /* 0 untried, 1 ready, -1 unavailable */

/* Log callback handed to transports: their messages go to COLL_DEBUG (NET). */
static void collNetLog(int level, const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  collLog(level, COLL_SUB_NET, __FILE__, __LINE__, "%s", msg);
}

/* Error callback handed to transports: the message of the error they return
 * next, for collGetLastError (logged at WARN like every error). */
static void collNetSetError(const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  collSetError(collRemoteError, "%s", msg);
}

static const collNetCallbacks_t collNetCb = {sizeof(collNetCallbacks_t), collNetLog, collNetSetError};

/* COLL_NET_PLUGIN, loaded once: 0 not tried, 1 loaded, 2 none asked for,
 * -1 failed (collPluginError says why; every later lookup fails the same). */
static int collPluginState;
static const collNet_t* collPlugin;
static collNet_t collPluginFromV2; /* a v2 plugin's operations in a v3 table */
static int collPluginReady;
static char collPluginError[700];

/* regMrDmaBuf of a v2 plugin (the v2 ABI has none). */
static collResult_t collPluginV2RegMrDmaBuf(void* comm, void* data, size_t size, int ptrType, uint64_t offset,
                                            int fd, void** mhandle) {
  (void)comm; (void)data; (void)size; (void)ptrType; (void)offset; (void)fd; (void)mhandle;
  return collSetError(collInvalidUsage, "transport plugin \"%s\" is ABI version 2: regMrDmaBuf not supported "
                      "(dma-buf registration needs a collNetPlugin_v3)", collPlugin ? collPlugin->name : "?");
}

/* Why the plugin's table p (version `want`, sizeof `size`) cannot be used, in
 * why; NULL if it can. ops: the operations from init on (NULL-terminated). */
static const char* collPluginCheck(const char* sym, int version, size_t tsize, const char* name, void* const* fns,
                                   int want, size_t size, char* why, size_t n) {
  static const char* const ops[] = {"init", "devices", "getProperties", "listen", "connect", "accept",
                                    "regMr", "deregMr", "regMrDmaBuf", "isend", "irecv", "test", "iput", "iflush",
                                    "getPollFd", "closeSend", "closeRecv", "closeListen", "fini"};
  if (version != want) { /* its size field is only meaningful in its own version */
    snprintf(why, n, "%s is transport ABI version %d; this coll needs version %d there (%s of include/coll_net.h: "
             "rebuild the plugin against it)", sym, version, want, sym);
    return why;
  }
  if (tsize != size) {
    snprintf(why, n, "%s declares version %d with a table of %zu bytes; version %d's table here is %zu bytes "
             "(built against another coll_net.h?)", sym, version, tsize, want, size);
    return why;
  }
  if (!name || !name[0] || strlen(name) > 32) return "has no name (or one longer than 32 characters)";
  size_t nfns = (size - offsetof(collNet_t, init)) / sizeof(void*);
  for (size_t k = 0, o = 0; k < nfns; k++, o++) {
    if (want == 2 && strcmp(ops[o], "regMrDmaBuf") == 0) o++; /* v2 has none */
    if (!fns[k]) {
      snprintf(why, n, "has no %s operation (NULL; point it to a function returning collInvalidUsage)", ops[o]);
      return why;
    }
  }
  return NULL;
}

static void collNetLoadPlugin(void) {
  const char* path = collParamStr(COLL_SPARAM_NET_PLUGIN);
  if (!path) {
    collPluginState = 2;
    return;
  }
  collPluginState = -1;
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(collPluginError, sizeof collPluginError, "COLL_NET_PLUGIN=%s cannot be loaded: %s", path, dlerror());
    return;
  }
  const collNet_t* p3 = dlsym(h, "collNetPlugin_v3");
  const collNet_v2_t* p2 = p3 ? NULL : dlsym(h, "collNetPlugin_v2");
  const char* bad = NULL;
  char why[300];
  if (p3) {
    bad = collPluginCheck("collNetPlugin_v3", p3->version, p3->size, p3->name, (void* const*)&p3->init,
                          COLL_NET_VERSION, sizeof(collNet_t), why, sizeof why);
  } else if (p2) {
    bad = collPluginCheck("collNetPlugin_v2", p2->version, p2->size, p2->name, (void* const*)&p2->init, 2,
                          sizeof(collNet_v2_t), why, sizeof why);
  } else {
    bad = "exports neither collNetPlugin_v3 nor collNetPlugin_v2 (include/coll_net.h)";
  }
  if (bad) {
    snprintf(collPluginError, sizeof collPluginError, "COLL_NET_PLUGIN=%s %s", path, bad);
    dlclose(h);
    return;
  }
  if (p2) {
    collPluginFromV2 = (collNet_t){
        .size = sizeof(collNet_t), .version = COLL_NET_VERSION, .name = p2->name,
        .init = p2->init, .devices = p2->devices, .getProperties = p2->getProperties,
        .listen = p2->listen, .connect = p2->connect, .accept = p2->accept,
        .regMr = p2->regMr, .deregMr = p2->deregMr, .regMrDmaBuf = collPluginV2RegMrDmaBuf,
        .isend = p2->isend, .irecv = p2->irecv, .test = p2->test,
        .iput = p2->iput, .iflush = p2->iflush, .getPollFd = p2->getPollFd,
        .closeSend = p2->closeSend, .closeRecv = p2->closeRecv, .closeListen = p2->closeListen,
        .fini = p2->fini,
    };
    p3 = &collPluginFromV2;
    COLL_INFO(COLL_SUB_NET, "transport plugin \"%s\" (%s) is ABI version 2 (collNetPlugin_v2): loaded without "
              "regMrDmaBuf (dma-buf registration not supported)", p2->name, path);
  }
  collPlugin = p3; /* the library stays loaded for the life of the process */
  collPluginState = 1;
  COLL_INFO(COLL_SUB_NET, "loaded transport plugin \"%s\" from %s", p3->name, path);
}

collResult_t collNetGetInter(const char* name, const collNet_t** out) {
  pthread_mutex_lock(&collNetLock);
  if (collPluginState == 0) collNetLoadPlugin();
  if (collPluginState == -1) {
    pthread_mutex_unlock(&collNetLock);
    return collSetError(collInvalidArgument, "%s", collPluginError);
  }
  if (collPluginState == 1 && (!name || strcmp(name, collPlugin->name) == 0)) {
    collResult_t r = collSuccess;
    if (!collPluginReady && (r = collPlugin->init(&collNetCb)) == collSuccess) collPluginReady = 1;
    pthread_mutex_unlock(&collNetLock);
    *out = collPlugin;
    if (r != collSuccess)
      return collSetError(r, "transport plugin \"%s\": init failed: %s", collPlugin->name, collLastErrorMessage());
    return collSuccess;
  }
  pthread_mutex_unlock(&collNetLock);
  int i = 0;
  if (name) {
    while (i < COLL_NINTER && strcmp(collInterNets[i]->name, name) != 0) i++;
    if (i == COLL_NINTER)
      return collSetError(collInvalidArgument,
                          "net \"%s\" is not available (COLL_NET / config.netName); have: tcp, loopback%s%s%s", name,
                          COLL_HAVE_IB ? ", ib" : "", collPluginState == 1 ? ", " : "",
                          collPluginState == 1 ? collPlugin->name : "");
  }
  collResult_t r = collSuccess;
  pthread_mutex_lock(&collNetLock);
  if (!collInterReady[i] && (r = collInterNets[i]->init(&collNetCb)) == collSuccess) collInterReady[i] = 1;
  pthread_mutex_unlock(&collNetLock);
  *out = collInterNets[i];
  return r;
}

const collNet_t* collNetGetIntra(const collNet_t* inter) {
  if (collParamInt(COLL_PARAM_SHM_DISABLE) || inter == &collNetLoopback) return NULL;
  pthread_mutex_lock(&collNetLock);
  if (collIntraState == 0) {
    collResult_t r = collNetShm.init(&collNetCb);
    collIntraState = r == collSuccess ? 1 : -1;
    if (r != collSuccess)
      COLL_INFO(COLL_SUB_INIT, "shared-memory transport unavailable: %s", collLastErrorMessage());
  }
  int ok = collIntraState == 1;
  pthread_mutex_unlock(&collNetLock);
  return ok ? &collNetShm : NULL;
}

/* ---- the ordered list and the choice per pair ------------------------------ */
static int collCanSameNode(const collPeerInfo* a, const collPeerInfo* b, int sameNode) {
  (void)a;
  (void)b;
  return sameNode;
}

/* Network transports (tcp, ib, plugins) connect any pair. */
static int collCanAny(const collPeerInfo* a, const collPeerInfo* b, int sameNode) {
  (void)a;
  (void)b;
  (void)sameNode;
  return 1;
}

uint64_t collNetId(const char* name) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (const char* p = name; p && *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
  return h ? h : 1;
}

#if COLL_HAVE_IB
/* ib as a default network transport: probed once per process (the result
 * of a failed probe is kept: no dlopen and device scan per communicator). */
static int collIbProbe; /* 0 untried, 1 usable, -1 not */

static const collNet_t* collNetProbeIb(const char* carrier) {
  pthread_mutex_lock(&collNetLock);
  int st = collIbProbe;
  pthread_mutex_unlock(&collNetLock);
  if (st == 0) {
    const collNet_t* ib = NULL;
    int ndev = 0;
    int quiet = collQuietErrors(1); /* the INFO line below says it once */
    collResult_t r = collNetGetInter("ib", &ib);
    if (r == collSuccess && (r = ib->devices(&ndev)) == collSuccess && ndev <= 0)
      r = collSetError(collSystemError, "no usable port");
    collQuietErrors(quiet);
    st = r == collSuccess ? 1 : -1;
    if (r != collSuccess) {
      const char* hca = collParamStr(COLL_SPARAM_IB_HCA);
      if (hca) /* asked for by name: say it without COLL_DEBUG */
        COLL_WARN_ALWAYS(COLL_SUB_INIT, "COLL_IB_HCA=%s selects no usable HCA port (%s); %s carries the traffic "
                         "between nodes (COLL_NET=ib makes this an error)", hca, collLastErrorMessage(), carrier);
      else
        COLL_INFO(COLL_SUB_INIT, "ib transport not used (%s); %s carries the traffic between nodes (COLL_NET=ib "
                  "makes this an error)", collLastErrorMessage(), carrier);
      collClearError();
    }
    pthread_mutex_lock(&collNetLock);
    collIbProbe = st;
    pthread_mutex_unlock(&collNetLock);
  }
  return st == 1 ? &collNetIb : NULL;
}
#endif

void collNetForgetIb(void) {
  pthread_mutex_lock(&collNetLock);
#if COLL_HAVE_IB
  collIbProbe = 0;
  for (int i = 0; i < COLL_NINTER; i++)
    if (collInterNets[i] == &collNetIb) collInterReady[i] = 0;
#endif
  pthread_mutex_unlock(&collNetLock);
}

/* Which transports of the list take registered memory from the engine, and
 * which have a receive that reduces as it reads (shm). */
static collResult_t collNetMarkReg(collNetList* l) {
  for (int k = 0; k < COLL_NET_SLOTS; k++) {
    l->needsReg[k] = l->nets[k] && l->nets[k] != &collNetTcp && l->nets[k] != &collNetShm &&
                     l->nets[k] != &collNetLoopback;
    l->irecvReduce[k] = l->nets[k] == &collNetShm ? collShmIrecvReduce : NULL;
  }
  return collSuccess;
}

collResult_t collNetGetList(const char* name, collNetList* out) {
  memset(out, 0, sizeof *out);
  const collNet_t* net = NULL;
  collResult_t r = collNetGetInter(name, &net); /* the named one, or the plugin, or tcp */
  if (r != collSuccess) return r;
  int k = 1;
  out->forced = name != NULL;
  out->nets[0] = collNetGetIntra(net);
  out->canConnect[0] = collCanSameNode;
  out->nets[k] = net;
  out->canConnect[k++] = collCanAny;
  if (name) return collNetMarkReg(out);
#if COLL_HAVE_IB
  const collNet_t* ib = collNetProbeIb(net->name);
  if (ib && ib != net) {
    out->nets[k] = ib;
    out->canConnect[k++] = collCanAny;
  }
#endif
  if (net != &collNetTcp) { /* a plugin came first */
    const collNet_t* tcp = NULL;
    if ((r = collNetGetInter("tcp", &tcp)) != collSuccess) return r;
    if (tcp != net) {
      out->nets[k] = tcp;
      out->canConnect[k++] = collCanAny;
    }
  } else if (k == 3) { /* ib before tcp */
    out->nets[1] = out->nets[2];
    out->nets[2] = net;
  }
  return collNetMarkReg(out);
}

int collNetPairSlot(const collNetList* list, const collPeerInfo* infos, int me, int peer, int sameNode) {
  const collPeerInfo* lo = &infos[me < peer ? me : peer];
  const collPeerInfo* hi = &infos[me < peer ? peer : me];
  const collPeerInfo* mine = &infos[me];
  for (int s = 0; s < COLL_NET_SLOTS; s++) {
    uint64_t id = lo->netId[s];
    int inHi = 0, my = -1;
    for (int t = 0; id && t < COLL_NET_SLOTS; t++) {
      if (hi->netId[t] == id) inHi = 1;
      if (mine->netId[t] == id && list->nets[t]) my = t;
    }
    if (inHi && my >= 0 && list->canConnect[my](lo, hi, sameNode)) return my;
  }
  return -1;
}

int collNetPickDev(const collNet_t* net, int rank) {
  enum { MAXDEV = 64 };
  int ndev = 0;
  if (net->devices(&ndev) != collSuccess || ndev <= 1) {
    collClearError();
    return 0;
  }
  if (ndev > MAXDEV) ndev = MAXDEV;
  collNetProperties_t* props = calloc((size_t)ndev, sizeof *props);
  const char* paths[MAXDEV];
  if (!props) return 0;
  for (int d = 0; d < ndev; d++) {
    if (net->getProperties(d, &props[d]) != collSuccess) {
      collClearError();
      memset(&props[d], 0, sizeof props[d]);
    }
    paths[d] = props[d].pciPath;
  }
  char why[200];
  int dev = collTopoPickNetDev(paths, ndev, rank, why, sizeof why);
  COLL_INFO(COLL_SUB_INIT, "rank %d: %s device %d of %d, %s: nearest to the rank: %s", rank, net->name, dev, ndev,
            props[dev].name, why);
  free(props);
  return dev;
}

/* Names of the transports a rank published, for messages. */
static void collNetNames(collComm_t comm, const collPeerInfo* p, char* buf, size_t size) {
  size_t off = 0;
  buf[0] = 0;
  for (int s = 0; s < COLL_NET_SLOTS && off < size; s++) {
    if (!p->netId[s]) continue;
    const char* name = NULL;
    for (int k = 0; k < COLL_NET_SLOTS; k++)
      if (comm->nets[k] && collNetId(comm->nets[k]->name) == p->netId[s]) name = comm->nets[k]->name;
    if (name)
      off += (size_t)snprintf(buf + off, size - off, "%s%s", off ? ", " : "", name);
    else
      off += (size_t)snprintf(buf + off, size - off, "%sone unknown here (id %016llx)", off ? ", " : "",
                              (unsigned long long)p->netId[s]);
  }
  if (!off) snprintf(buf, size, "none");
}

collResult_t collNetPickPairs(collComm_t comm, const collNetList* list) {
  int n = comm->nranks, used[COLL_NET_SLOTS] = {0};
  const collPeerInfo* me = &comm->peers[comm->rank];
  for (int i = 0; i < n && list->nets[1] == &collNetLoopback; i++) {
    const collPeerInfo* p = &comm->peers[i];
    if (p->pid != me->pid || p->kernelHash != me->kernelHash)
      return collSetError(collInvalidUsage,
                          "rank %d: COLL_NET=loopback only connects ranks that are threads of one process; rank %d "
                          "is process %d on %s, this rank process %d on %s (use COLL_NET=tcp, or leave COLL_NET "
                          "unset)", comm->rank, i, (int)p->pid, p->host, (int)me->pid, me->host);
  }
  for (int i = 0; i < n; i++) {
    int s = collNetPairSlot(list, comm->peers, comm->rank, i, comm->rankNode[i] == comm->node);
    if (s < 0) {
      char mine[160], theirs[160];
      collNetNames(comm, &comm->peers[comm->rank], mine, sizeof mine);
      collNetNames(comm, &comm->peers[i], theirs, sizeof theirs);
      return collSetError(collSystemError,
                          "rank %d: no transport connects it with rank %d (%s): this rank has %s, rank %d has %s "
                          "(COLL_NET, COLL_SHM_DISABLE, COLL_NET_PLUGIN must allow a common one)",
                          comm->rank, i, comm->peers[i].host, mine, i, theirs);
    }
    comm->peerKind[i] = (uint8_t)s;
    used[s]++;
  }
  comm->interSlot = -1;
  for (int k = 1; k < COLL_NET_SLOTS; k++)
    if (comm->nets[k] && (comm->interSlot < 0 || used[k] > used[comm->interSlot])) comm->interSlot = k;
  /* a transport no pair uses would only hold a listener (a port, fds) */
  for (int k = 0; k < COLL_NET_SLOTS; k++)
    if (!used[k] && comm->listenComms[k]) {
      comm->nets[k]->closeListen(comm->listenComms[k]);
      comm->listenComms[k] = NULL;
    }
  return collSuccess;
}

void collNetPairsText(collComm_t comm, char* buf, size_t size) {
  size_t off = 0;
  buf[0] = 0;
  for (int k = 0; k < COLL_NET_SLOTS && off < size; k++) {
    int first = -1, ranges = 0;
    for (int i = 0; i <= comm->nranks && off < size; i++) {
      int in = i < comm->nranks && comm->peerKind[i] == k;
      if (in && first < 0) first = i;
      if (in || first < 0) continue;
      if (!ranges++) {
        collNetProperties_t p;
        memset(&p, 0, sizeof p);
        if (comm->nets[k]->getProperties(comm->netDev[k], &p) != collSuccess) collClearError();
        if (strcmp(p.name, comm->nets[k]->name) == 0) p.name[0] = 0;
        off += (size_t)snprintf(buf + off, size - off, "%s%s%s%s%s to rank%s ", off ? "; " : "", comm->nets[k]->name,
                                p.name[0] ? " (" : "", p.name, p.name[0] ? ")" : "", "s");
      }
      if (off >= size) break;
      if (ranges > 8) {
        if (ranges == 9) off += (size_t)snprintf(buf + off, size - off, ",...");
      } else if (i - 1 > first) {
        off += (size_t)snprintf(buf + off, size - off, "%s%d-%d", ranges > 1 ? "," : "", first, i - 1);
      } else {
        off += (size_t)snprintf(buf + off, size - off, "%s%d", ranges > 1 ? "," : "", first);
      }
      first = -1;
    }
  }
}
