/* plugin.c - dlopen of a tuner plugin and its version check. */
#include "tuner/plugin.h"

#include <dlfcn.h>
#include <string.h>

#include "misc/log.h"
#include "misc/param.h"

void collTunerPluginLoad(collTunerPlugin* p, int nranks, int nnodes) {
  memset(p, 0, sizeof *p);
  const char* path = collParamStr(COLL_SPARAM_TUNER_PLUGIN);
  if (!path) return;
  void* dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    COLL_WARN(COLL_SUB_TUNE, "COLL_TUNER_PLUGIN=%s cannot be loaded (%s); using the cost model", path, dlerror());
    return;
  }
  const collTuner_v1_t* ops = dlsym(dl, COLL_TUNER_PLUGIN_SYMBOL);
  if (!ops || !ops->init || !ops->getChoice || !ops->destroy) {
    COLL_WARN(COLL_SUB_TUNE, "COLL_TUNER_PLUGIN=%s has no complete %s (version %d expected); using the cost model",
              path, COLL_TUNER_PLUGIN_SYMBOL, COLL_TUNER_PLUGIN_VERSION);
    dlclose(dl);
    return;
  }
  void* ctx = NULL;
  collResult_t r = ops->init(nranks, nnodes, &ctx);
  if (r != collSuccess) {
    COLL_WARN(COLL_SUB_TUNE, "tuner plugin %s: init returned %d; using the cost model", ops->name ? ops->name : path,
              (int)r);
    dlclose(dl);
    return;
  }
  p->dl = dl;
  p->ops = ops;
  p->context = ctx;
  COLL_INFO(COLL_SUB_TUNE, "tuner plugin %s loaded from %s", ops->name ? ops->name : "(unnamed)", path);
}

void collTunerPluginUnload(collTunerPlugin* p) {
  if (p->ops) p->ops->destroy(p->context);
  if (p->dl) dlclose(p->dl);
  memset(p, 0, sizeof *p);
}
