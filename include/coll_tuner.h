/*
 * coll_tuner.h - ABI of coll tuner plugins (version 1).
 *
 * A tuner plugin is a shared object named by COLL_TUNER_PLUGIN=path.so that
 * exports `collTunerPlugin_v1` (a collTuner_v1_t). coll asks it once per
 * (communicator, collective, power-of-two size bucket), after its own cost
 * model has priced every candidate algorithm, and caches the answer. The
 * plugin sees the candidates' names and predicted times (microseconds) and
 * may override the algorithm, the chunk size and the channel count, in the
 * manner of NCCL's tuner plugins (ncclTuner_v*: getCollInfo with a cost
 * table).
 *
 * Rules:
 *  - The answer must depend only on the arguments (identical on every
 *    rank); a plugin answering differently on different ranks makes ranks
 *    run different schedules (COLL_CHECK=1 does not catch that).
 *  - COLL_ALGO / COLL_CHUNKSIZE / COLL_NCHANNELS set by the user win over
 *    the plugin.
 *  - Calls for one communicator never overlap; calls for different
 *    communicators may come from different threads at the same time.
 *  - A plugin that fails to load, lacks the symbol, has another version or
 *    returns an error from init is ignored with a WARN; coll then uses its
 *    cost model. An error from getChoice is ignored for that bucket.
 */
#ifndef COLL_TUNER_PLUGIN_H_
#define COLL_TUNER_PLUGIN_H_

#include <stddef.h>

#include "coll.h"

#ifdef __cplusplus
extern "C" {
#endif

#define COLL_TUNER_PLUGIN_VERSION 1
#define COLL_TUNER_PLUGIN_SYMBOL "collTunerPlugin_v1"

/* Collectives a tuner is asked about. */
typedef enum {
  collTunerAllReduce = 0,
  collTunerAllGather = 1,
  collTunerReduceScatter = 2,
  collTunerBroadcast = 3,
  collTunerReduce = 4
} collTunerColl_t;

typedef struct {
  collTunerColl_t coll;
  size_t bytes;         /* count x type size as passed to the call (all-gather:
                           sendcount, reduce-scatter: recvcount); the bucket's
                           geometric middle, as the answer is cached per
                           power-of-two bucket */
  int nranks;
  int nnodes;           /* nodes (distinct hosts) in the communicator */
  int ncandidates;      /* entries in the two arrays below */
  const char* const* candidates; /* algorithm names, e.g. "ring", "tree" */
  const double* predictedUs;     /* cost model's time per candidate, us */
  int modelChoice;      /* index the cost model would pick */
  size_t modelChunkBytes;
  int modelChannels;
  int maxChannels;      /* channel counts 1..maxChannels are allowed */
} collTunerQuery_t;

typedef struct {
  int algorithm;     /* index into candidates, or -1: keep the model's */
  size_t chunkBytes; /* bytes per block of a pipeline slice (>= 1024), 0: keep */
  int nchannels;     /* 1..maxChannels, 0: keep */
} collTunerAnswer_t;

typedef struct {
  const char* name;
  /* Called once per communicator. *context is passed back to the other
   * calls. Returns collSuccess or an error (the plugin is then ignored). */
  collResult_t (*init)(int nranks, int nnodes, void** context);
  /* Fills *answer (pre-set to "keep everything"). */
  collResult_t (*getChoice)(void* context, const collTunerQuery_t* query, collTunerAnswer_t* answer);
  /* Called once when the communicator is destroyed. */
  collResult_t (*destroy)(void* context);
} collTuner_v1_t;

#ifdef __cplusplus
}
#endif

#endif
