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
  COLL_PARAM_P2P_BUFFSIZE,   /* COLL_P2P_BUFFSIZE: device ring bytes of each CUDA P2P connection */
  COLL_PARAM_INIT_TIMEOUT,   /* COLL_INIT_TIMEOUT, seconds the rendezvous of an init may take */
  COLL_PARAM_FR_ENTRIES,     /* COLL_FR_ENTRIES: flight-recorder entries per communicator */
  COLL_PARAM_FR_SIGNAL,      /* COLL_FR_SIGNAL: signal that dumps every flight recorder (0: none) */
  COLL_PARAM_IB_GID_INDEX,   /* COLL_IB_GID_INDEX: RoCE GID index, -1 = auto */
  COLL_PARAM_IB_TC,          /* COLL_IB_TC: traffic class of RoCE packets */
  COLL_PARAM_IB_SL,          /* COLL_IB_SL: service level */
  COLL_PARAM_IB_TIMEOUT,     /* COLL_IB_TIMEOUT: QP ack timeout exponent (4.096 us * 2^t) */
  COLL_PARAM_IB_RETRY_CNT,   /* COLL_IB_RETRY_CNT: QP retry count */
  COLL_PARAM_IB_QPS_PER_CONN, /* COLL_IB_QPS_PER_CONNECTION: QPs per connection, used round-robin */
  COLL_PARAM_IB_REG_CACHE,   /* COLL_IB_REG_CACHE: registrations kept for reuse (0: register per message) */
  COLL_PARAM_IB_DMABUF,      /* COLL_IB_DMABUF: 1 = register GPU memory as dma-bufs where supported, 0 = never */
  COLL_PARAM_REG_CACHE,      /* COLL_REG_CACHE: engine registration cache, -1 auto (checked), 0 off, 1 unchecked */
  COLL_PARAM_CUDA_STAGE_CHUNK, /* COLL_CUDA_STAGE_CHUNK: bytes per piece of a staged device call (pipelining) */
  COLL_PARAM_P2P_DISABLE,    /* COLL_P2P_DISABLE: 1 = device calls inside a node stay staged (no p2p, no kernels) */
  COLL_PARAM_NET_GDR,        /* COLL_NET_GDR: 0 = device calls between nodes stay staged (no GPUDirect RDMA) */
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
  COLL_SPARAM_CUDA_LIBRARY,  /* COLL_CUDA_LIBRARY: the CUDA driver library to dlopen */
  COLL_SPARAM_STATS_FILE,    /* COLL_STATS_FILE: per-rank counters as JSON at destroy */
  COLL_SPARAM_TRACE_FILE,    /* COLL_TRACE_FILE: Chrome trace / Perfetto timeline per rank */
  COLL_SPARAM_PROFILER_PLUGIN, /* COLL_PROFILER_PLUGIN: path of a profiler plugin .so */
  COLL_SPARAM_FR_FILE,       /* COLL_FR_FILE: where flight-recorder dumps go */
  COLL_SPARAM_IB_HCA,        /* COLL_IB_HCA: HCAs/ports to use (NCCL_IB_HCA syntax) */
  COLL_SPARAM_IB_LIB,        /* COLL_IB_LIB: libibverbs to dlopen */
  COLL_SPARAM_NET_PLUGIN,    /* COLL_NET_PLUGIN: path of a transport plugin .so */
  COLL_SPARAM_HALF_ACCUM,    /* COLL_HALF_ACCUM: float (default) or native: float16/bfloat16 partial results */
  COLL_SPARAM_COUNT
} collStrParam;

/* Value in force of an integer parameter: the environment's if it is an
 * integer in the row's [min, max], the nearest bound if it is out of range,
 * the default if unset, empty or not an integer (each case but the first and
 * unset warned once per process, visible without COLL_DEBUG). Thread-safe;
 * read once per process and cached. */
int64_t collParamInt(collIntParam p);
/* 1 when the value in force came from the environment (an integer, possibly
 * clamped), as read once per process. */
int collParamIsSet(collIntParam p);
/* Reads the integer parameters now (if not yet) so that their warnings come
 * out at init rather than at first use. Thread-safe. */
void collParamInit(void);
/* Value of a string parameter or NULL when unset and without default. */
const char* collParamStr(collStrParam p);
/* Prints every parameter with type, default, current value and doc at INFO. */
void collParamDump(void);
/* Row i of the table, integer rows first, then string rows, for tools
 * (coll_info): 0 past the end. value: the value in force ("-": unset). */
typedef struct {
  const char* name;
  const char* type; /* "int" or "string" */
  char def[32], value[256], range[64];
  int fromEnv;
  const char* doc;
} collParamRowInfo;
int collParamRow(int i, collParamRowInfo* out);

#endif
