/*
 * mp_harness.h - runs a test body in N forked rank processes that share a
 * collUniqueId, with a watchdog: a child that hangs past the deadline is
 * killed and the run fails. Every child gets COLL_SOCKET_IFNAME=lo.
 *
 * The children are forked BEFORE the parent creates the unique id (which
 * starts the bootstrap root thread): forking a process that has threads can
 * leave a lock (malloc's, ASan's) held forever in the child. The parent
 * hands the id to each child through a pipe.
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
 * the unique id (a collUniqueId*) as arg. prepare(id, prepArg) runs in the
 * parent after the fork to create the id (and, e.g., attack its root). */
typedef int (*collMpPrepare)(collUniqueId* id, void* prepArg);
int collMpRunRaw(int nranks, int timeoutSec, collMpBody body, collMpPrepare prepare, void* prepArg);

#endif
