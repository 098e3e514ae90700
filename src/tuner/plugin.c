/* plugin.c - dlopen of a tuner plugin and its version check. */
#include "tuner/plugin.h"

#include <dlfcn.h>
#include <string.h>

#include "misc/log.h"
#include "misc/param.h"

collResult_t collTunerPluginLoad(collTunerPlugin* p, int nranks, int nnodes) {
  memset(p, 0, sizeof *p);
  const char* path = collParamStr(COLL_SPARAM_TUNER_PLUGIN);
  if (!path) return collSuccess;
  void* dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!dl)
    return collSetError(collInvalidArgument,
                        "COLL_TUNER_PLUGIN=%s cannot be loaded: %s; fix the path or unset COLL_TUNER_PLUGIN to use "
                        "the cost model",
                        path, dlerror());
  const collTuner_v1_t* ops = dlsym(dl, COLL_TUNER_PLUGIN_SYMBOL);
  if (!ops || !ops->init || !ops->getChoice || !ops->destroy) {
    dlclose(dl);
    return collSetError(collInvalidArgument,
                        "COLL_TUNER_PLUGIN=%s has no complete %s (include/coll_tuner.h, version %d); unset "
                        "COLL_TUNER_PLUGIN to use the cost model",
                        path, COLL_TUNER_PLUGIN_SYMBOL, COLL_TUNER_PLUGIN_VERSION);
  }
  void* ctx = NULL;
  collResult_t r = ops->init(nranks, nnodes, &ctx);
  if (r != collSuccess) {
    dlclose(dl);
    return collSetError(collInvalidArgument,
                        "COLL_TUNER_PLUGIN=%s: the plugin's init returned %d (%s); unset COLL_TUNER_PLUGIN to use the "
                        "cost model",
                        path, (int)r, collGetErrorString(r));
  }
  p->dl = dl;
  p->ops = ops;
  p->context = ctx;
  COLL_INFO(COLL_SUB_TUNE, "tuner plugin %s loaded from %s", ops->name ? ops->name : "(unnamed)", path);
  return collSuccess;
}

void collTunerPluginUnload(collTunerPlugin* p) {
  if (p->ops) p->ops->destroy(p->context);
  if (p->dl) dlclose(p->dl);
  memset(p, 0, sizeof *p);
}
