/* param.h - the one table of COLL_* environment variables (param.c). */
#ifndef COLL_PARAM_H_
#define COLL_PARAM_H_

#include <stdint.h>

typedef enum {
  COLL_PARAM_TIMEOUT,        /* COLL_TIMEOUT, seconds per operation */
  COLL_PARAM_CHUNKSIZE,      /* COLL_CHUNKSIZE, bytes per slice block */
  COLL_PARAM_NCHANNELS,      /* COLL_NCHANNELS */
  COLL_PARAM_NSOCKS,         /* COLL_NSOCKS_PERTHREAD */
  COLL_PARAM_SPIN,           /* COLL_SPIN_US, polling time before sleeping */
  COLL_PARAM_CONNECT_RETRY_MS, /* COLL_CONNECT_TIMEOUT_MS */
  COLL_PARAM_SHM_DISABLE,    /* COLL_SHM_DISABLE */
  COLL_PARAM_SHM_BUFFSIZE,   /* COLL_SHM_BUFFSIZE, ring bytes per shm connection */
  COLL_PARAM_SHM_CMA_THRESHOLD, /* COLL_SHM_CMA_THRESHOLD, single copy from this size (0: off, -1: auto) */
  COLL_PARAM_CHECK,          /* COLL_CHECK */
  COLL_PARAM_PROGRESS_CPU,   /* COLL_PROGRESS_CPU, pin the progress thread to this CPU */
  COLL_PARAM_TUNE_CALIBRATE, /* COLL_TUNE_CALIBRATE: measure links at init for the tuner */
  COLL_PARAM_MAILBOX_BYTES,  /* COLL_MAILBOX_BYTES: one-shot shared-memory calls up to this many bytes per rank */
  COLL_PARAM_COUNT_INT
} collIntParam;

typedef enum {
  COLL_SPARAM_SOCKET_IFNAME, /* COLL_SOCKET_IFNAME */
  COLL_SPARAM_SOCKET_FAMILY, /* COLL_SOCKET_FAMILY: AF_INET / AF_INET6 */
  COLL_SPARAM_COMM_ID,       /* COLL_COMM_ID host:port */
  COLL_SPARAM_NET,           /* COLL_NET */
  COLL_SPARAM_DEBUG,         /* COLL_DEBUG */
  COLL_SPARAM_DEBUG_SUBSYS,  /* COLL_DEBUG_SUBSYS */
  COLL_SPARAM_DEBUG_FILE,    /* COLL_DEBUG_FILE */
  COLL_SPARAM_ALGO,          /* COLL_ALGO */
  COLL_SPARAM_HOSTID,        /* COLL_HOSTID */
  COLL_SPARAM_TOPO_FILE,     /* COLL_TOPO_FILE, hwloc XML to use instead of discovery */
  COLL_SPARAM_TOPO_DUMP_FILE, /* COLL_TOPO_DUMP_FILE, write the topology (XML + .summary) */
  COLL_SPARAM_TUNER_PLUGIN,  /* COLL_TUNER_PLUGIN: path of a tuner plugin .so */
  COLL_SPARAM_HALF_ACCUM,    /* COLL_HALF_ACCUM: float (default) or native: float16/bfloat16 partial results */
  COLL_SPARAM_COUNT
} collStrParam;

/* Value of an integer parameter: the environment if set and valid, else the
 * default. Thread-safe; read once and cached. */
int64_t collParamInt(collIntParam p);
/* 1 when the variable was set (non-empty) in the environment when the
 * parameters were first read (they are read once per process). */
int collParamIsSet(collIntParam p);
/* Value of a string parameter or NULL when unset and without default. */
const char* collParamStr(collStrParam p);
/* Prints every parameter with type, default, current value and doc at INFO. */
void collParamDump(void);

#endif
