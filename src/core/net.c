/* net.c - the table of transports and their one-time initialization, and
 * the COLL_NET_PLUGIN loader (a shared object exporting collNetPlugin_v2). */
#include "core/net.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "misc/log.h"
#include "misc/param.h"
#if COLL_HAVE_IB
#include "transports/ib/ib.h"
#endif
#include "transports/loopback/loopback.h"
#include "transports/shm/shm.h"
#include "transports/tcp/tcp.h"

/* Inter-node transports by COLL_NET / config.netName; the first is the default. */
static const collNet_v2_t* const collInterNets[] = {&collNetTcp, &collNetLoopback,
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
static const collNet_v2_t* collPlugin;
static int collPluginReady;
static char collPluginError[700];

static void collNetLoadPlugin(void) {
  static const char* const ops[] = {"init", "devices", "getProperties", "listen", "connect", "accept",
                                    "regMr", "deregMr", "isend", "irecv", "test", "iput", "iflush",
                                    "getPollFd", "closeSend", "closeRecv", "closeListen", "fini"};
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
  const collNet_v2_t* p = dlsym(h, "collNetPlugin_v2");
  const char* bad = NULL;
  char why[200];
  if (!p) {
    bad = "exports no collNetPlugin_v2 (include/coll_net.h)";
  } else if (p->version != COLL_NET_VERSION || p->size != sizeof(collNet_v2_t)) {
    snprintf(why, sizeof why, "is transport ABI version %d (table of %zu bytes); this coll needs version %d (%zu bytes)",
             p->version, p->size, COLL_NET_VERSION, sizeof(collNet_v2_t));
    bad = why;
  } else if (!p->name || !p->name[0] || strlen(p->name) > 32) {
    bad = "has no name (or one longer than 32 characters)";
  } else {
    void* const* fns = (void* const*)&p->init;
    for (size_t k = 0; k < sizeof ops / sizeof ops[0] && !bad; k++)
      if (!fns[k]) {
        snprintf(why, sizeof why, "has no %s operation (NULL; point it to a function returning collInvalidUsage)", ops[k]);
        bad = why;
      }
  }
  if (bad) {
    snprintf(collPluginError, sizeof collPluginError, "COLL_NET_PLUGIN=%s %s", path, bad);
    dlclose(h);
    return;
  }
  collPlugin = p; /* the library stays loaded for the life of the process */
  collPluginState = 1;
  COLL_INFO(COLL_SUB_NET, "loaded transport plugin \"%s\" from %s", p->name, path);
}

collResult_t collNetGetInter(const char* name, const collNet_v2_t** out) {
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

const collNet_v2_t* collNetGetIntra(const collNet_v2_t* inter) {
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
