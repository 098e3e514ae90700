/* plugin.h - loading a tuner plugin (COLL_TUNER_PLUGIN, include/coll_tuner.h). */
#ifndef COLL_TUNER_PLUGIN_LOAD_H_
#define COLL_TUNER_PLUGIN_LOAD_H_

#include "coll_tuner.h"

typedef struct {
  void* dl;
  const collTuner_v1_t* ops;
  void* context;
} collTunerPlugin;

/* Loads COLL_TUNER_PLUGIN when set and calls its init. collInvalidArgument
 * (message: path, reason, what to do) when it cannot be loaded, lacks the
 * complete table or its init fails; then p->ops stays NULL. */
collResult_t collTunerPluginLoad(collTunerPlugin* p, int nranks, int nnodes);
void collTunerPluginUnload(collTunerPlugin* p);

#endif
