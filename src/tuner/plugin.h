/* plugin.h - loading a tuner plugin (COLL_TUNER_PLUGIN, include/coll_tuner.h). */
#ifndef COLL_TUNER_PLUGIN_LOAD_H_
#define COLL_TUNER_PLUGIN_LOAD_H_

#include "coll_tuner.h"

typedef struct {
  void* dl;
  const collTuner_v1_t* ops;
  void* context;
} collTunerPlugin;

/* Loads COLL_TUNER_PLUGIN when set and calls its init. Never fails: a
 * plugin that cannot be used is reported at WARN and p->ops stays NULL. */
void collTunerPluginLoad(collTunerPlugin* p, int nranks, int nnodes);
void collTunerPluginUnload(collTunerPlugin* p);

#endif
