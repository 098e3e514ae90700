/*
 * mp_harness.h - runs a test body in N forked rank processes that share a
 * collUniqueId, with a watchdog: a child that hangs past the deadline is
 * killed and the run fails. Every child gets COLL_SOCKET_IFNAME=lo.
 */
#ifndef COLL_MP_HARNESS_H_
#define COLL_MP_HARNESS_H_

#include "coll.h"

/* body returns the number of failed checks on its rank (0 = pass). */
typedef int (*collMpBody)(collComm_t comm, int rank, int nranks, void* arg);

/* Forks nranks processes, each inits a communicator and runs body. Returns 0
 * when every child exits 0 within timeoutSec, else 1 (and prints why). */
int collMpRun(int nranks, int timeoutSec, collMpBody body, void* arg);

/* Like collMpRun without creating communicators: body gets comm == NULL and
 * the shared unique id through arg (a collUniqueId*). */
int collMpRunRaw(int nranks, int timeoutSec, collMpBody body, collUniqueId* id);

#endif
