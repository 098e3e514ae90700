/*
 * helper_launch.h - starts rank processes the way torchrun, mpirun or srun
 * do: every rank is a separate process with RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT in its environment (plus
 * whatever the test's setup hook adds) and creates its communicator itself
 * (collCommInitFromEnv), or execs a program (e.g. allreduce_perf without -np).
 *
 * The parent never creates a unique id or any coll thread, so forking is
 * safe. Children die with the parent (PR_SET_PDEATHSIG) and by an alarm at
 * the watchdog time + 5 s. Output of each rank can be captured in a memfd
 * (no files to clean up). collLaunchFree kills and reaps every rank still
 * running and closes every fd, on every path.
 *
 * Use from a tests/cases test: in its <name>.cmake,
 *   include(${CMAKE_CURRENT_SOURCE_DIR}/helper_launch.cmake)
 */
#ifndef COLL_HELPER_LAUNCH_H_
#define COLL_HELPER_LAUNCH_H_

#include <sys/types.h>

/* Runs in the child rank process; its return value is the exit status. */
typedef int (*collLaunchBody)(int rank, int nranks, void* arg);
/* Runs in the child after the launcher variables are set and before body or
 * exec: change the environment per rank (setenv/unsetenv), sleep, ... */
typedef void (*collLaunchSetup)(int rank, int nranks, void* arg);

typedef struct {
  int nranks;
  const char* masterAddr; /* MASTER_ADDR; NULL: 127.0.0.1 */
  int masterPort;         /* MASTER_PORT; 0: collLaunchFreePort() (coll listens on MASTER_PORT+1) */
  const char* runId;      /* TORCHELASTIC_RUN_ID; NULL: not set */
  int timeoutSec;         /* watchdog of collLaunchWait/collLaunchRun; 0: 120 */
  int capture;            /* 1: each rank's stdout and stderr go to a memfd (collLaunchOutput) */
  char* const* argv;      /* exec argv[0] with argv in each rank; NULL: run body */
  collLaunchBody body;
  collLaunchSetup setup;  /* optional */
  void* arg;              /* passed to body and setup */
} collLaunchSpec;

typedef struct collLaunch collLaunch;

/* A port p such that p+1 (where coll's root listens) could be bound on
 * 127.0.0.1 a moment ago; 0 if none was found. */
int collLaunchFreePort(void);

/* Forks spec->nranks processes. NULL (and a message on stderr) on failure;
 * ranks already started are then killed and reaped. */
collLaunch* collLaunchStart(const collLaunchSpec* spec);
int collLaunchMasterPort(const collLaunch* L);
pid_t collLaunchPid(const collLaunch* L, int rank); /* 0 once reaped */
/* Sends sig to one rank (if it still runs). */
void collLaunchKill(collLaunch* L, int rank, int sig);
/* Reaps ranks that exited, without blocking. Returns how many still run. */
int collLaunchPoll(collLaunch* L);
/* Waits until every rank exited or timeoutSec (<= 0: the spec's) passed; then
 * SIGKILLs the rest (reported as killed by the watchdog). Returns the number
 * of ranks that did not exit with status 0. */
int collLaunchWait(collLaunch* L, int timeoutSec);
/* waitpid status of a reaped rank; -1 while it runs. */
int collLaunchStatus(const collLaunch* L, int rank);
/* Exit code of a rank that exited normally, else -1 (running, signalled). */
int collLaunchExitCode(const collLaunch* L, int rank);
/* Seconds from collLaunchStart until the rank was reaped (by collLaunchPoll
 * or collLaunchWait: poll every launch you run at once); -1 while it runs. */
double collLaunchExitTime(const collLaunch* L, int rank);
/* 1 if the watchdog killed the rank. */
int collLaunchTimedOut(const collLaunch* L, int rank);
/* Captured output of a rank (NUL-terminated, "" without capture). Valid
 * until the next call for that rank or collLaunchFree. */
const char* collLaunchOutput(collLaunch* L, int rank);
/* Prints every rank's exit status and captured output to stderr. */
void collLaunchReport(collLaunch* L);
/* Kills and reaps every rank still running; frees everything. NULL is ok. */
void collLaunchFree(collLaunch* L);

/* Start + wait; prints a report when a rank failed. Returns the number of
 * ranks that did not exit 0 (or nranks if the launch failed). */
int collLaunchRun(const collLaunchSpec* spec);

#endif
