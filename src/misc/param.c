/* param.c - the one table of every COLL_* environment variable. */
#include "param.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"

typedef struct {
  const char* name;
  int64_t def;
  int64_t min;
  const char* doc;
} collIntParamDesc;

typedef struct {
  const char* name;
  const char* def;
  const char* doc;
} collStrParamDesc;

/* Indexed by collIntParam / collStrParam. */
static const collIntParamDesc collIntParams[COLL_PARAM_COUNT_INT] = {
    [COLL_PARAM_TIMEOUT] = {"COLL_TIMEOUT", 1800, 0, "seconds an operation may wait before the communicator aborts with collTimeout (0 = never)"},
    [COLL_PARAM_CHUNKSIZE] = {"COLL_CHUNKSIZE", 1 << 19, 1024, "bytes per block of one pipeline slice"},
    [COLL_PARAM_NCHANNELS] = {"COLL_NCHANNELS", 2, 1, "parallel channels (connection sets) a large call is spread over"},
    [COLL_PARAM_NSOCKS] = {"COLL_NSOCKS_PERTHREAD", 1, 1, "TCP sockets per connection; large messages are striped over them"},
    [COLL_PARAM_SPIN] = {"COLL_SPIN_US", -1, -1, "microseconds a waiting thread polls before it sleeps in poll(); -1: 1000, yielding the CPU between polls when this machine (all namespaces) runs more ranks than it has cores"},
    [COLL_PARAM_CONNECT_RETRY_MS] = {"COLL_CONNECT_TIMEOUT_MS", 60000, 100, "milliseconds to retry a refused connection during init"},
    [COLL_PARAM_CHECK] = {"COLL_CHECK", 0, 0, "1: before each collective verify that every rank called it with the same count, type, op and root"},
    [COLL_PARAM_SHM_DISABLE] = {"COLL_SHM_DISABLE", 0, 0, "1: never use shared memory between ranks of a node (use the network transport)"},
    [COLL_PARAM_SHM_BUFFSIZE] = {"COLL_SHM_BUFFSIZE", 4 << 20, 32768, "bytes of the shared ring (8 slots) of each shm connection, allocated up front by the sender"},
    [COLL_PARAM_SHM_CMA_THRESHOLD] = {"COLL_SHM_CMA_THRESHOLD", -1, -1, "shm messages this large are read straight from the sender's buffer (process_vm_readv, one copy); 0: always copy through the ring; -1: 262144 if process_vm_readv is at least 70% as fast as memcpy here (measured once per process), else 0"},
    [COLL_PARAM_TUNE_CALIBRATE] = {"COLL_TUNE_CALIBRATE", 0, 0, "1: measure latency and bandwidth of each link class at init (a few ms) and give the tuner those instead of the topology's estimates"},
    [COLL_PARAM_MAILBOX_BYTES] = {"COLL_MAILBOX_BYTES", 4096, 0, "small collectives whose data per rank is at most this many bytes run one-shot through a shared-memory mailbox when every rank is on one node (all-reduce, all-gather, reduce-scatter); 0: off"},
    [COLL_PARAM_PROGRESS_CPU] = {"COLL_PROGRESS_CPU", -1, -1, "pin each communicator's progress thread to this CPU; -1: the NUMA node of the rank's NIC when the machine has several"},
};

static const collStrParamDesc collStrParams[COLL_SPARAM_COUNT] = {
    [COLL_SPARAM_SOCKET_IFNAME] = {"COLL_SOCKET_IFNAME", NULL, "interfaces to use: prefix list, ^ excludes, = exact (e.g. eth, ^docker, =eth0)"},
    [COLL_SPARAM_SOCKET_FAMILY] = {"COLL_SOCKET_FAMILY", NULL, "AF_INET or AF_INET6 to force an address family"},
    [COLL_SPARAM_COMM_ID] = {"COLL_COMM_ID", NULL, "host:port of the rendezvous (rank 0 listens) for collCommInitFromEnv / collGetUniqueId"},
    [COLL_SPARAM_NET] = {"COLL_NET", NULL, "transport for the data path: tcp (default) or loopback (ranks as threads of one process)"},
    [COLL_SPARAM_DEBUG] = {"COLL_DEBUG", NULL, "log level: WARN, INFO, TRACE"},
    [COLL_SPARAM_DEBUG_SUBSYS] = {"COLL_DEBUG_SUBSYS", NULL, "subsystems to log: INIT,BOOT,NET,COLL,ENGINE,TUNE,ENV,ALL (^ excludes)"},
    [COLL_SPARAM_DEBUG_FILE] = {"COLL_DEBUG_FILE", NULL, "write logs to this file (%h host, %p pid) instead of stderr"},
    [COLL_SPARAM_HOSTID] = {"COLL_HOSTID", NULL, "node identity used to group ranks (default: hostname + boot id); tests emulate nodes with it"},
    [COLL_SPARAM_ALGO] = {"COLL_ALGO", NULL, "force algorithms: a name for every collective that has it (ring) or per collective (allreduce:tree;broadcast:binomial)"},
    [COLL_SPARAM_TOPO_FILE] = {"COLL_TOPO_FILE", NULL, "hwloc XML topology to use instead of discovering this machine (tests, simulation)"},
    [COLL_SPARAM_TUNER_PLUGIN] = {"COLL_TUNER_PLUGIN", NULL, "path of a tuner plugin (.so exporting collTunerPlugin_v1, include/coll_tuner.h)"},
    [COLL_SPARAM_TOPO_DUMP_FILE] = {"COLL_TOPO_DUMP_FILE", NULL, "write the discovered topology as hwloc XML to this path and coll's summary to path.summary"},
    [COLL_SPARAM_HALF_ACCUM] = {"COLL_HALF_ACCUM", "float", "float16/bfloat16 sum, prod and avg: float carries partial results in float32 (on the wire too) and rounds once; native rounds at every step and pre-multiplies avg inputs by 1/nranks (NCCL's bytes and speed)"},
};

static int64_t collIntValues[COLL_PARAM_COUNT_INT];
static uint8_t collIntSet[COLL_PARAM_COUNT_INT];
static pthread_once_t collParamOnce = PTHREAD_ONCE_INIT;

static void collParamLoad(void) {
  for (int i = 0; i < COLL_PARAM_COUNT_INT; i++) {
    const collIntParamDesc* d = &collIntParams[i];
    int64_t v = d->def;
    const char* s = getenv(d->name);
    if (s && *s) {
      collIntSet[i] = 1;
      char* end;
      errno = 0;
      long long x = strtoll(s, &end, 0);
      if (errno || *end || x < d->min)
        fprintf(stderr, "[coll] WARN ignoring %s=%s (want an integer >= %lld); using %lld\n",
                d->name, s, (long long)d->min, (long long)d->def);
      else
        v = x;
    }
    collIntValues[i] = v;
  }
}

int collParamIsSet(collIntParam p) {
  pthread_once(&collParamOnce, collParamLoad);
  return collIntSet[p];
}

int64_t collParamInt(collIntParam p) {
  pthread_once(&collParamOnce, collParamLoad);
  return collIntValues[p];
}

const char* collParamStr(collStrParam p) {
  const char* s = getenv(collStrParams[p].name);
  return (s && *s) ? s : collStrParams[p].def;
}

void collParamDump(void) {
  for (int i = 0; i < COLL_PARAM_COUNT_INT; i++)
    COLL_INFO(COLL_SUB_ENV, "%-24s int    default %-8lld value %-8lld %s", collIntParams[i].name,
              (long long)collIntParams[i].def, (long long)collParamInt((collIntParam)i),
              collIntParams[i].doc);
  for (int i = 0; i < COLL_SPARAM_COUNT; i++) {
    const char* v = collParamStr((collStrParam)i);
    COLL_INFO(COLL_SUB_ENV, "%-24s string default %-8s value %-8s %s", collStrParams[i].name,
              collStrParams[i].def ? collStrParams[i].def : "-", v ? v : "-", collStrParams[i].doc);
  }
}
