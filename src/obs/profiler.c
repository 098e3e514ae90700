/* profiler.c - dlopen of a profiler plugin (COLL_PROFILER_PLUGIN,
 * include/coll_profiler.h) and its init per communicator. */
#include <dlfcn.h>
#include <string.h>

#include "misc/log.h"
#include "misc/param.h"
#include "obs/obs_internal.h"

collResult_t collObsProfilerLoad(collComm_t comm, collObsProfiler* p) {
  memset(p, 0, sizeof *p);
  const char* path = collParamStr(COLL_SPARAM_PROFILER_PLUGIN);
  if (!path) return collSuccess;
  void* dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!dl)
    return collSetError(collInvalidArgument,
                        "COLL_PROFILER_PLUGIN=%s cannot be loaded: %s; fix the path or unset COLL_PROFILER_PLUGIN",
                        path, dlerror());
  const collProfiler_v1_t* ops = dlsym(dl, COLL_PROFILER_PLUGIN_SYMBOL);
  if (!ops || !ops->init || !ops->startEvent || !ops->stopEvent || !ops->recordEventState || !ops->finalize) {
    dlclose(dl);
    return collSetError(collInvalidArgument,
                        "COLL_PROFILER_PLUGIN=%s has no complete %s (include/coll_profiler.h, version %d); unset "
                        "COLL_PROFILER_PLUGIN",
                        path, COLL_PROFILER_PLUGIN_SYMBOL, COLL_PROFILER_PLUGIN_VERSION);
  }
  void* ctx = NULL;
  int mask = collProfileGroup | collProfileColl | collProfileP2p;
  collResult_t r = ops->init(&ctx, comm->commHash, comm->nranks, comm->rank, comm->nnodes, &mask);
  if (r != collSuccess) {
    dlclose(dl);
    return collSetError(collInvalidArgument,
                        "COLL_PROFILER_PLUGIN=%s: the plugin's init returned %d (%s); unset COLL_PROFILER_PLUGIN", path,
                        (int)r, collGetErrorString(r));
  }
  p->dl = dl;
  p->ops = ops;
  p->ctx = ctx;
  p->mask = mask & (collProfileGroup | collProfileColl | collProfileP2p | collProfileStep);
  COLL_INFO(COLL_SUB_INIT, "rank %d: profiler plugin %s loaded from %s (events 0x%x)", comm->rank,
            ops->name ? ops->name : "(unnamed)", path, p->mask);
  return collSuccess;
}

void collObsProfilerUnload(collObsProfiler* p) {
  if (p->ops) p->ops->finalize(p->ctx);
  if (p->dl) dlclose(p->dl);
  memset(p, 0, sizeof *p);
}
