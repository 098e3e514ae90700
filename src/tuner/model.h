/* model.h - builds the cost model's inputs for a communicator (model.c). */
#ifndef COLL_TUNER_MODEL_H_
#define COLL_TUNER_MODEL_H_

#include "coll.h"
#include "tuner/cost.h"

/* Defaults from the topology, or measurements with COLL_TUNE_CALIBRATE=1;
 * made identical on every rank through a bootstrap allgather (collective). */
collResult_t collTuneModelInit(collComm_t comm, const collTuneLayout* l, collTuneModel* out);

/* Name of the network transport whose figures the model takes for
 * same-node pairs without shm (COLL_PATH_LOCAL): comm->interSlot's, "tcp"
 * when there is none. */
const char* collTuneLocalNetName(collComm_t comm);

/* The model of device-resident calls (devmodel.c): *host with the
 * intra-node paths (SHM, LOCAL) replaced by the GPU links between the ranks
 * of each node (slowest bandwidth, largest latency over those pairs);
 * *linkClass the class, COLL_LINK_NVLINK or COLL_LINK_PCIE (PCIE when both
 * occur). Returns 1, or 0 with *out = *host and *linkClass = -1 when no two
 * ranks share a node or a rank's GPU is unknown (topo.h: rank.gpu -1).
 * Pure function of the topology: the same on every rank. */
int collTuneDeviceModel(collComm_t comm, const collTuneModel* host, collTuneModel* out, int* linkClass);

/* Network links the ranks of a node spread over: the fewest, over the nodes,
 * distinct NICs their transports use (unknown NICs count as one). */
int collTuneNetLinks(collComm_t comm);

#endif
