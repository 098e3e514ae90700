/* tuner.h - algorithm, chunk size and channel count per call.
 *
 * Order of authority, per (collective, byte count):
 *  1. COLL_ALGO restricts the algorithms (one name forces it, even where the
 *     tuner would not consider it, e.g. hier on one node), COLL_CHUNKSIZE /
 *     COLL_NCHANNELS (when set in the environment) force the chunk size /
 *     channel count;
 *  2. a tuner plugin (COLL_TUNER_PLUGIN, include/coll_tuner.h) may pick
 *     among the candidates, seeing the cost model's predictions;
 *  3. otherwise the cost model (cost.h) picks the fastest candidate.
 * Decisions are cached per communicator, host or device-resident call,
 * collective, element size and power-of-two size bucket. Every input is identical on every rank (see
 * model.c), so all ranks choose the same schedule. */
#ifndef COLL_TUNER_H_
#define COLL_TUNER_H_

#include "algorithms/algorithms.h"
#include "coll.h"
#include "engine/sched.h"
#include "tuner/algo_env.h" /* collAlgoOverride: COLL_ALGO */

/* Candidates the tuner prices per call: at least the registry rows of any
 * one collective (test_tuner checks it), or rows past it are never chosen. */
#define COLL_TUNER_MAX_CANDIDATES 20

typedef struct {
  const collAlgo* algo; /* registry row */
  size_t chunkBytes; /* bytes per block of one slice */
  int nchannels;     /* 1..comm->maxChannels */
  double predictedUs;
} collTuneChoice;

/* Sets up comm->tuner: the cost model's inputs (topology estimates, or
 * measured links with COLL_TUNE_CALIBRATE=1), made identical on every rank
 * through the bootstrap; loads COLL_TUNER_PLUGIN (a plugin that cannot be
 * loaded or initialized fails init: collInvalidArgument). Collective over the
 * communicator (called once from init on every rank). Logs the predicted
 * time of every algorithm for a size ladder at INFO (TUNE). */
collResult_t collTunerInit(collComm_t comm);
void collTunerFree(collComm_t comm);

/* The choice for one call; forcedAlgo = the op's COLL_ALGO list for fn
 * (collAlgoOverride: "ring", "tree,rhd", "^ring") or NULL. The pointer is
 * the cache key: pass the same string for the same list. device: 1 when the
 * call runs device-resident (engine/devpath.c): priced with the GPU links
 * inside a node (model.h, collTuneDeviceModel), cached apart. collInvalidArgument
 * when no algorithm builds fn or the list does not fit fn (the message lists
 * fn's algorithms). Not thread-safe across calls on one communicator (as the
 * engine). */
collResult_t collTunerChoose(collComm_t comm, collFunc fn, size_t count, collDataType_t dtype,
                             const char* forcedAlgo, int device, collTuneChoice* out);
/* The engine runs this call through the shared-memory mailbox instead of a
 * schedule (engine/mailbox.h): logged at INFO (TUNE) once per collective and
 * size bucket, in the form of a choice ("-> mailbox"). */
void collTunerNoteMailbox(collComm_t comm, collFunc fn, size_t count, collDataType_t dtype);
/* 1 when an all-reduce, reduce-scatter or all-gather of `bytes` (the whole
 * call: count x element size, x nranks for reduce-scatter and all-gather)
 * tries the zero-copy path (engine/zerocopy.h; all-gather:
 * engine/cmagather.h): COLL_ALGO lets it use "zerocopy" (spec: its list for
 * the collective, NULL: no restriction), and either names only that or the
 * call has at least 1 MiB (below, the rounds of the path cost more than the
 * copies it saves; all-gather at 256 KiB: as often slower as faster,
 * benchmarks/compare/results/2026-12-03/allgather_ab.md). The same on every
 * rank. */
int collTunerZeroCopy(collComm_t comm, collFunc fn, size_t bytes, const char* spec);
/* The cost model's point-to-point bandwidth (GB/s) between this rank and
 * peer, and its latency (us); *calibrated = 1 when measured at init
 * (COLL_TUNE_CALIBRATE=1), 0 when estimated from the topology. For the
 * link-utilisation figures of the stats (src/obs). */
double collTunerPeerGBps(collComm_t comm, int peer, double* latUs, int* calibrated);

#endif
