/*
 * launch.h - how the benchmark ranks are started:
 *   -np N      fork N local rank processes (ids handed down by pipes);
 *   -t N       N ranks as threads of each process;
 *   launcher   RANK/WORLD_SIZE, OMPI_*, PMI_*, SLURM_* -> collCommInitFromEnv;
 *   otherwise  one rank.
 *
 * SPDX-License-Identifier: BSD-3-Clause
 */
#ifndef COLL_BENCH_LAUNCH_H_
#define COLL_BENCH_LAUNCH_H_

#include "coll.h"

/* Exit statuses of one rank, worst last. */
enum { LAUNCH_OK = 0, LAUNCH_WRONG = 1, LAUNCH_FAILED = 2 };

typedef struct {
  int nprocs;          /* -np: local processes to fork (<= 1: none) */
  int nthreads;        /* -t: ranks per process */
  int timeoutSec;      /* -T: collConfig_t timeoutSec, or -1 to leave unset */
  int launchTimeoutSec;/* -np: whole-run deadline of the parent, 0 = none */
} launchOpts_t;

/* Runs one rank on an initialized communicator; returns a LAUNCH_* code.
 * On LAUNCH_FAILED the caller aborts the communicator instead of
 * destroying it. */
typedef int (*launchRankFn)(collComm_t comm, void* arg);

/* Creates every local communicator per the mode above, runs fn on each and
 * returns the worst exit status. */
int launchRun(const launchOpts_t* opts, launchRankFn fn, void* arg);

/* Prints a failed coll call of rank `rank` (-1: not known yet) to stderr
 * with collGetLastError. */
void launchReportError(int rank, const char* what, collResult_t res, collComm_t comm);

#endif /* COLL_BENCH_LAUNCH_H_ */
