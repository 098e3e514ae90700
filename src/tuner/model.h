/* model.h - builds the cost model's inputs for a communicator (model.c). */
#ifndef COLL_TUNER_MODEL_H_
#define COLL_TUNER_MODEL_H_

#include "coll.h"
#include "tuner/cost.h"

/* Defaults from the topology, or measurements with COLL_TUNE_CALIBRATE=1;
 * made identical on every rank through a bootstrap allgather (collective). */
collResult_t collTuneModelInit(collComm_t comm, const collTuneLayout* l, collTuneModel* out);

/* Network links the ranks of a node spread over: the fewest, over the nodes,
 * distinct NICs their transports use (unknown NICs count as one). */
int collTuneNetLinks(collComm_t comm);

#endif
