/* shm.h - shared-memory transport between processes of one node. */
#ifndef COLL_SHM_H_
#define COLL_SHM_H_

#include "coll_net.h"

extern const collNet_v1_t collNetShm;

#endif
