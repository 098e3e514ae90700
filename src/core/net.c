/* net.c - the table of transports and their one-time initialization. */
#include "core/net.h"

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

collResult_t collNetGetInter(const char* name, const collNet_v2_t** out) {
  int i = 0;
  if (name) {
    while (i < COLL_NINTER && strcmp(collInterNets[i]->name, name) != 0) i++;
    if (i == COLL_NINTER)
      return collSetError(collInvalidArgument,
                          "net \"%s\" is not available (COLL_NET / config.netName); have: tcp, loopback%s", name, COLL_HAVE_IB ? ", ib" : "");
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
