/*
 * param.c - the one table of every COLL_* environment variable.
 *
 * Integer rows: name, default, min, max, doc. A value is read as a 64-bit
 * decimal (or 0x hex) integer, once per process. One that is not used as
 * given is reported once with COLL_WARN_ALWAYS (visible without COLL_DEBUG),
 * saying what is used instead:
 *  - empty or not an integer ("abc", "12abc"): the default;
 *  - above max (also beyond +2^63): the maximum;
 *  - below min (also beyond -2^63): the default, not the minimum (a minimum
 *    often has a meaning of its own, COLL_TIMEOUT=0: never, that a typo
 *    must not pick);
 *  - COLL_PROGRESS_CPU naming a CPU this process may not run on: -1.
 * collParamDump (COLL_DEBUG=INFO) prints the value in force.
 *
 * String rows with a fixed set of values (collStrEnums) are checked at the
 * same time, case ignored as everywhere: another value is reported once
 * and the row's default is used (collParamStr returns it).
 */
#include "param.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/comm.h"
#include "log.h"
#include "transports/tcp/tcp.h"

typedef struct {
  const char* name;
  int64_t def;
  int64_t min, max; /* every value in force is in [min, max] */
  const char* doc;
} collIntParamDesc;

typedef struct {
  const char* name;
  const char* def;
  const char* doc;
} collStrParamDesc;

/* Indexed by collIntParam / collStrParam. */
static const collIntParamDesc collIntParams[COLL_PARAM_COUNT_INT] = {
    [COLL_PARAM_TIMEOUT] = {"COLL_TIMEOUT", 1800, 0, INT32_MAX, "seconds an operation may wait before the communicator aborts with collTimeout (0 = never)"},
    [COLL_PARAM_CHUNKSIZE] = {"COLL_CHUNKSIZE", 1 << 19, 1024, 1 << 30, "bytes per block of one pipeline slice; unset: the tuner picks 128 KiB, 512 KiB or 2 MiB per collective call (send/recv use the default; over ib each channel's share of a send/recv goes as one message); set: every call uses it"},
    [COLL_PARAM_NCHANNELS] = {"COLL_NCHANNELS", 2, 1, COLL_MAX_CHANNELS, "parallel channels (connection sets) a call is spread over; unset: the tuner picks 1, 2 or 4 per collective call (send/recv use the default); set: every call uses it"},
    [COLL_PARAM_NSOCKS] = {"COLL_NSOCKS_PERTHREAD", 1, 1, COLL_TCP_MAX_SOCKS, "TCP sockets per connection; large messages are striped over them"},
    [COLL_PARAM_SPIN] = {"COLL_SPIN_US", -1, -1, 10000000, "microseconds a waiting thread polls before it sleeps (futex or poll()); -1: 1000. It polls without yielding for an adaptive 1-50 us (not at all when this machine, all namespaces, runs more ranks than it has cores), then yields the CPU between polls, and sleeps at once while yields show that other tasks want its core"},
    [COLL_PARAM_CONNECT_RETRY_MS] = {"COLL_CONNECT_TIMEOUT_MS", 60000, 100, INT32_MAX, "milliseconds a connection that the peer refuses is retried (at init and when a call makes a connection lazily)"},
    [COLL_PARAM_CHECK] = {"COLL_CHECK", 0, 0, 1, "1: before each collective verify that every rank called it with the same count, type, op and root"},
    [COLL_PARAM_SHM_DISABLE] = {"COLL_SHM_DISABLE", 0, 0, 1, "1: never use shared memory between ranks of a node (use the network transport)"},
    [COLL_PARAM_SHM_BUFFSIZE] = {"COLL_SHM_BUFFSIZE", 4 << 20, 32768, 1 << 30, "bytes of the shared ring (8 slots) of each shm connection and direction, reserved up front by the sender (memfd memory: nothing in /dev/shm)"},
    [COLL_PARAM_SHM_CMA_THRESHOLD] = {"COLL_SHM_CMA_THRESHOLD", -1, -1, INT64_MAX, "shm messages this large are read straight from the sender's buffer (process_vm_readv, one copy); 0: always copy through the ring; -1: 262144 if process_vm_readv is at least 70% as fast as memcpy here (measured once per process), else 0. Each connection uses single copy only if both processes allow it, from the larger threshold; 0 on any rank also turns off the single-copy all-gather inside a node (from 1 MiB)"},
    [COLL_PARAM_TUNE_CALIBRATE] = {"COLL_TUNE_CALIBRATE", 0, 0, 1, "1: measure latency and bandwidth of each link class at init (a few ms) and give the tuner those instead of the topology's estimates"},
    [COLL_PARAM_MAILBOX_BYTES] = {"COLL_MAILBOX_BYTES", 4096, 0, 1 << 20, "small collectives whose data per rank is at most this many bytes run one-shot through a shared-memory mailbox when every rank is on one node (all-reduce, all-gather, reduce-scatter); 0: off"},
    [COLL_PARAM_PROGRESS_CPU] = {"COLL_PROGRESS_CPU", -1, -1, CPU_SETSIZE - 1, "pin each communicator's progress thread to this CPU; -1: the NUMA node of the rank's NIC when the machine has several"},
    [COLL_PARAM_P2P_BUFFSIZE] = {"COLL_P2P_BUFFSIZE", 4 << 20, 1 << 16, 1 << 30, "bytes of GPU memory (8 slots) the receiver of each CUDA P2P connection allocates for its ring"},
    [COLL_PARAM_INIT_TIMEOUT] = {"COLL_INIT_TIMEOUT", 300, 0, INT32_MAX, "seconds a communicator's init may wait for every rank to join (counted by the bootstrap root from its start); then every rank that joined fails naming the missing ranks (0 = never)"},
    [COLL_PARAM_FR_ENTRIES] = {"COLL_FR_ENTRIES", 256, 0, 1 << 16, "operations each communicator's flight recorder keeps (rounded up to a power of two); 0: off"},
    [COLL_PARAM_FR_SIGNAL] = {"COLL_FR_SIGNAL", 0, 0, 64, "signal number (e.g. 10 = SIGUSR1) on which every communicator of the process dumps its flight recorder to COLL_FR_FILE (stderr if unset); 0: none"},
    [COLL_PARAM_IB_GID_INDEX] = {"COLL_IB_GID_INDEX", -1, -1, 255, "ib: GID index of RoCE ports; -1: the first RoCE v2 GID with an IPv4 address, else RoCE v2 IPv6, else 0"},
    [COLL_PARAM_IB_TC] = {"COLL_IB_TC", 0, 0, 255, "ib: traffic class of the queue pairs (RoCE: DSCP << 2 | ECN)"},
    [COLL_PARAM_IB_SL] = {"COLL_IB_SL", 0, 0, 15, "ib: service level of the queue pairs"},
    [COLL_PARAM_IB_TIMEOUT] = {"COLL_IB_TIMEOUT", 20, 1, 31, "ib: ack timeout of the queue pairs, 4.096 us * 2^value (20: 4.3 s; at most 31)"},
    [COLL_PARAM_IB_RETRY_CNT] = {"COLL_IB_RETRY_CNT", 7, 0, 7, "ib: retransmissions before a send fails with 'transport retry counter exceeded' (at most 7)"},
    [COLL_PARAM_IB_QPS_PER_CONN] = {"COLL_IB_QPS_PER_CONNECTION", 1, 1, 16, "ib: queue pairs per connection; messages use them round-robin (at most 16)"},
    [COLL_PARAM_IB_REG_CACHE] = {"COLL_IB_REG_CACHE", 0, 0, 1 << 20, "ib: registrations ib keeps for reuse (LRU) of the buffers it registers itself, i.e. those the engine hands it without a registration (a failed engine registration; ib used directly); 0: per message. The buffers of messages above 16 KiB are registered by the engine, which COLL_REG_CACHE alone governs: they never enter this cache. Only safe when the application never frees and reallocates communication buffers (a registration pins the old pages: data would go to them)"},
    [COLL_PARAM_IB_DMABUF] = {"COLL_IB_DMABUF", 1, 0, 1, "ib: 1: register GPU memory with the HCA as a dma-buf (regMrDmaBuf, no staging through host memory) where libibverbs has ibv_reg_dmabuf_mr, the HCA's kernel driver takes dma-bufs and the CUDA driver exports them; 0: never (ib reads and writes host memory only); as NCCL_DMABUF_ENABLE"},
    [COLL_PARAM_REG_CACHE] = {"COLL_REG_CACHE", -1, -1, 1, "registrations of the buffers (messages above 16 KiB) the engine gives a transport that needs them (ib, plugins): -1: cached, each reuse checked against the page frames the registration pinned (/proc/self/pagemap; needs CAP_SYS_ADMIN, else per message, with one warning per process); 0: register per message; 1: cached unchecked (only if buffers are never freed and reallocated while the communicator lives). GPU memory (device calls between nodes, COLL_NET_GDR) is registered at every size, once per CUDA allocation, cached unless 0"},
    [COLL_PARAM_CUDA_STAGE_CHUNK] = {"COLL_CUDA_STAGE_CHUNK", 1 << 21, 4096, 1 << 30, "bytes per piece of a staged all-reduce, broadcast, reduce, all-gather or reduce-scatter on device buffers whose count (per rank) is larger than this: each piece (of every rank's block) is copied into pinned host memory while the previous one is reduced and sent, and copied back while the next one runs (the same on every rank)"},
    [COLL_PARAM_P2P_DISABLE] = {"COLL_P2P_DISABLE", 0, 0, 1, "1: collectives on device buffers inside a node stay staged through pinned host memory instead of running device-resident (GPU kernels, data over CUDA P2P); as NCCL_P2P_DISABLE"},
    [COLL_PARAM_NET_GDR] = {"COLL_NET_GDR", 1, 0, 1, "1: collectives on device buffers of a communicator that spans nodes run device-resident (no staging through pinned host memory) when every network transport between its nodes reads GPU memory (ptrSupport COLL_PTR_CUDA; registered as dma-buf where the transport says COLL_PTR_DMABUF, else as CUDA memory), every pair inside a node as with COLL_P2P_DISABLE=0; 0: they stay staged; as NCCL_NET_GDR_LEVEL"},
};

static const collStrParamDesc collStrParams[COLL_SPARAM_COUNT] = {
    [COLL_SPARAM_SOCKET_IFNAME] = {"COLL_SOCKET_IFNAME", NULL, "interfaces to use: prefix list, ^ excludes, = exact (e.g. eth, ^docker, =eth0)"},
    [COLL_SPARAM_SOCKET_FAMILY] = {"COLL_SOCKET_FAMILY", NULL, "AF_INET or AF_INET6 to force an address family"},
    [COLL_SPARAM_COMM_ID] = {"COLL_COMM_ID", NULL, "host:port of the rendezvous (rank 0 listens) for collCommInitFromEnv / collGetUniqueId"},
    [COLL_SPARAM_NET] = {"COLL_NET", NULL, "network transport: unset = each pair of ranks on different nodes takes ib (InfiniBand / RoCE verbs) when both have a usable HCA, else tcp (shm inside a node unless COLL_SHM_DISABLE=1); ib, tcp, loopback (ranks as threads of one process, checked at init; it replaces shm too) or the name of the COLL_NET_PLUGIN transport forces one"},
    [COLL_SPARAM_DEBUG] = {"COLL_DEBUG", NULL, "log level: WARN, INFO, TRACE (VERSION = WARN); unset: nothing but warnings about settings not used as given"},
    [COLL_SPARAM_DEBUG_SUBSYS] = {"COLL_DEBUG_SUBSYS", NULL, "subsystems to log: INIT,BOOT,NET,COLL,ENGINE,TUNE (or TUNING),ENV,ALL (^ excludes); unset: INIT,BOOT,NET,ENV"},
    [COLL_SPARAM_DEBUG_FILE] = {"COLL_DEBUG_FILE", NULL, "write logs to this file (%h host, %p pid) instead of stderr (stderr, with a warning, if it cannot be opened)"},
    [COLL_SPARAM_HOSTID] = {"COLL_HOSTID", NULL, "node identity used to group ranks (default: hostname + boot id); tests emulate nodes with it"},
    [COLL_SPARAM_ALGO] = {"COLL_ALGO", NULL, "algorithms each collective may use, as NCCL_ALGO: a list for every collective that has one of its names (ring; tree,rhd), ^ excludes (^ring), per collective with ; between entries (allreduce:tree,rhd;broadcast:^chain); checked at init"},
    [COLL_SPARAM_TOPO_FILE] = {"COLL_TOPO_FILE", NULL, "hwloc XML topology to use instead of discovering this machine (tests, simulation)"},
    [COLL_SPARAM_TUNER_PLUGIN] = {"COLL_TUNER_PLUGIN", NULL, "path of a tuner plugin (.so exporting collTunerPlugin_v1, include/coll_tuner.h)"},
    [COLL_SPARAM_TOPO_DUMP_FILE] = {"COLL_TOPO_DUMP_FILE", NULL, "write the discovered topology as hwloc XML to this path and coll's summary to path.summary"},
    [COLL_SPARAM_CUDA_LIBRARY] = {"COLL_CUDA_LIBRARY", "libcuda.so.1", "the CUDA driver library coll loads (dlopen) the first time it needs the GPU"},
    [COLL_SPARAM_STATS_FILE] = {"COLL_STATS_FILE", NULL, "write each communicator's counters as JSON to this file at destroy (%h host, %p pid, %r rank, %c communicator id); tools/coll_report merges them"},
    [COLL_SPARAM_TRACE_FILE] = {"COLL_TRACE_FILE", NULL, "write a Chrome trace / Perfetto JSON timeline of each communicator to this file at destroy (%h, %p, %r, %c as COLL_STATS_FILE)"},
    [COLL_SPARAM_PROFILER_PLUGIN] = {"COLL_PROFILER_PLUGIN", NULL, "path of a profiler plugin (.so exporting collProfiler_v1, include/coll_profiler.h)"},
    [COLL_SPARAM_FR_FILE] = {"COLL_FR_FILE", NULL, "write the flight recorder (last COLL_FR_ENTRIES operations) to this file when a communicator fails or is aborted, on COLL_FR_SIGNAL and on collCommDumpFlightRecorder (%h, %p, %r, %c)"},
    [COLL_SPARAM_IB_HCA] = {"COLL_IB_HCA", NULL, "ib: HCAs and ports to use: prefix list, ^ excludes, = exact, :port (mlx5, =mlx5_0:1,mlx5_1:1, ^mlx5_2)"},
    [COLL_SPARAM_IB_LIB] = {"COLL_IB_LIB", "libibverbs.so.1", "ib: the libibverbs library to load (dlopen) at the first communicator's init unless COLL_NET names another transport (COLL_NET=tcp: never loaded)"},
    [COLL_SPARAM_NET_PLUGIN] = {"COLL_NET_PLUGIN", NULL, "path of a transport plugin (.so exporting collNetPlugin_v3, or the older collNetPlugin_v2, include/coll_net.h); it becomes the default inter-node transport"},
    [COLL_SPARAM_HALF_ACCUM] = {"COLL_HALF_ACCUM", "float", "float16/bfloat16 sum, prod and avg: float (or float32) carries partial results in float32 (on the wire too) and rounds once; native rounds at every step and pre-multiplies avg inputs by 1/nranks (NCCL's bytes and speed); case ignored, another value warns at init and is float"},
};

/* String rows with a fixed set of values; the first is the default's. */
static const struct {
  collStrParam p;
  const char* values[4];
} collStrEnums[] = {
    {COLL_SPARAM_HALF_ACCUM, {"float", "float32", "native", NULL}},
};
#define COLL_NSTR_ENUMS ((int)(sizeof collStrEnums / sizeof collStrEnums[0]))
static char collStrWarn[COLL_NSTR_ENUMS][300];
static uint8_t collStrBad[COLL_SPARAM_COUNT]; /* set to a value not in collStrEnums: the default is used */
static pthread_once_t collStrEnumOnce = PTHREAD_ONCE_INIT;
static void collStrEnumLoad(void);

static int64_t collIntValues[COLL_PARAM_COUNT_INT];
static uint8_t collIntSet[COLL_PARAM_COUNT_INT];
static char collIntWarn[COLL_PARAM_COUNT_INT][300]; /* why the value differs from the environment's */
static int collIntWarned;
static pthread_once_t collParamOnce = PTHREAD_ONCE_INIT;

/* Strict 64-bit parse: optional blanks and sign, decimal or 0x hex digits,
 * optional trailing blanks. 1: *v set; 0: not an integer; -1/+1 overflow
 * (*v = INT64_MIN / INT64_MAX, returns 2). */
static int collParseInt64(const char* s, int64_t* v) {
  char* end;
  errno = 0;
  while (isspace((unsigned char)*s)) s++;
  const char* digits = s + (*s == '-' || *s == '+');
  int hex = digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X');
  if (!(hex ? isxdigit((unsigned char)digits[2]) : isdigit((unsigned char)digits[0]))) return 0;
  long long x = strtoll(s, &end, hex ? 16 : 10);
  while (isspace((unsigned char)*end)) end++;
  if (*end) return 0;
  *v = x;
  return errno == ERANGE ? 2 : 1;
}

/* What an unset row means, for "using ..." in warnings. */
static void collParamDefaultWords(int i, char* buf, size_t len) {
  if (i == COLL_PARAM_NCHANNELS || i == COLL_PARAM_CHUNKSIZE)
    snprintf(buf, len, "the default (the tuner decides per call)");
  else
    snprintf(buf, len, "the default %lld", (long long)collIntParams[i].def);
}

/* COLL_PROGRESS_CPU must be a CPU this process may run on. */
static int collCpuUsable(int64_t cpu, char* allowed, size_t len) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1; /* cannot tell: let pinning report it */
  size_t o = 0;
  allowed[0] = 0;
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, &set) || (c > 0 && CPU_ISSET(c - 1, &set))) continue;
    int last = c;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) last++;
    int n = last > c ? snprintf(allowed + o, len - o, "%s%d-%d", o ? "," : "", c, last)
                     : snprintf(allowed + o, len - o, "%s%d", o ? "," : "", c);
    if (n < 0 || (size_t)n >= len - o) break;
    o += (size_t)n;
  }
  return cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET((int)cpu, &set);
}

static void collParamLoad(void) {
  for (int i = 0; i < COLL_PARAM_COUNT_INT; i++) {
    const collIntParamDesc* d = &collIntParams[i];
    char* w = collIntWarn[i];
    size_t wl = sizeof collIntWarn[i];
    char dflt[64];
    collParamDefaultWords(i, dflt, sizeof dflt);
    int64_t v = d->def;
    const char* s = getenv(d->name);
    if (s && !*s) {
      snprintf(w, wl, "%s is set but empty; using %s", d->name, dflt);
    } else if (s) {
      int64_t x = 0;
      int k = collParseInt64(s, &x);
      if (k == 0) {
        snprintf(w, wl, "%s=\"%s\" is not an integer; using %s", d->name, s, dflt);
      } else {
        collIntSet[i] = 1;
        v = x;
        if (x < d->min || (k == 2 && x < 0)) {
          /* the default, not the minimum: a minimum often has a meaning of
           * its own (COLL_TIMEOUT=0: no deadline) that a typo must not pick */
          v = d->def;
          collIntSet[i] = 0;
          snprintf(w, wl, "%s=%s is below the minimum %lld; using %s", d->name, s, (long long)d->min, dflt);
        } else if (x > d->max || k == 2) {
          v = d->max;
          snprintf(w, wl, "%s=%s is above the maximum %lld; using %lld", d->name, s, (long long)d->max,
                   (long long)d->max);
        }
        char allowed[128];
        if (i == COLL_PARAM_PROGRESS_CPU && v >= 0 && !collCpuUsable(v, allowed, sizeof allowed)) {
          snprintf(w, wl, "%s=%s: this process may run on CPUs %s only; using -1 (automatic placement)", d->name, s,
                   allowed);
          v = -1;
          collIntSet[i] = 0;
        }
      }
    }
    collIntValues[i] = v;
  }
  pthread_once(&collStrEnumOnce, collStrEnumLoad);
}

/* Checks the string rows of collStrEnums (once per process; also when only
 * collParamStr ran, which must not load the integer rows: a process may set
 * them before its first communicator, e.g. a forked child). */
static void collStrEnumLoad(void) {
  for (int k = 0; k < COLL_NSTR_ENUMS; k++) {
    const char* name = collStrParams[collStrEnums[k].p].name;
    const char* s = getenv(name);
    if (!s || !*s) continue;
    int ok = 0;
    char want[128] = "";
    for (int j = 0; j < 4 && collStrEnums[k].values[j]; j++) {
      ok |= strcasecmp(s, collStrEnums[k].values[j]) == 0;
      size_t o = strlen(want);
      snprintf(want + o, sizeof want - o, "%s%s", j ? ", " : "", collStrEnums[k].values[j]);
    }
    if (ok) continue;
    collStrBad[collStrEnums[k].p] = 1;
    snprintf(collStrWarn[k], sizeof collStrWarn[k], "%s=%s is not one of %s (case ignored); using %s", name, s, want,
             collStrParams[collStrEnums[k].p].def);
  }
}

/* Loads the table once; the first caller afterwards prints its warnings
 * (outside the once: the logger reads parameters too). */
static void collParamEnsure(void) {
  pthread_once(&collParamOnce, collParamLoad);
  if (__atomic_load_n(&collIntWarned, __ATOMIC_ACQUIRE) || __atomic_exchange_n(&collIntWarned, 1, __ATOMIC_ACQ_REL))
    return;
  for (int i = 0; i < COLL_PARAM_COUNT_INT; i++)
    if (collIntWarn[i][0]) COLL_WARN_ALWAYS(COLL_SUB_ENV, "%s", collIntWarn[i]);
  for (int k = 0; k < COLL_NSTR_ENUMS; k++)
    if (collStrWarn[k][0]) COLL_WARN_ALWAYS(COLL_SUB_ENV, "%s", collStrWarn[k]);
}

void collParamInit(void) { collParamEnsure(); }

int collParamIsSet(collIntParam p) {
  collParamEnsure();
  return collIntSet[p];
}

int64_t collParamInt(collIntParam p) {
  collParamEnsure();
  return collIntValues[p];
}

const char* collParamStr(collStrParam p) {
  for (int k = 0; k < COLL_NSTR_ENUMS; k++)
    if (collStrEnums[k].p == p) pthread_once(&collStrEnumOnce, collStrEnumLoad);
  if (collStrBad[p]) return collStrParams[p].def;
  const char* s = getenv(collStrParams[p].name);
  return (s && *s) ? s : collStrParams[p].def;
}

void collParamDump(void) {
  for (int i = 0; i < COLL_PARAM_COUNT_INT; i++) {
    const collIntParamDesc* d = &collIntParams[i];
    int64_t v = collParamInt((collIntParam)i);
    COLL_INFO(COLL_SUB_ENV, "%-24s int    default %-8lld value %-8lld%s range [%lld, %lld] %s%s%s", d->name,
              (long long)d->def, (long long)v, collIntSet[i] || collIntWarn[i][0] ? " (env)" : "",
              (long long)d->min, (long long)d->max, d->doc, collIntWarn[i][0] ? "; " : "", collIntWarn[i]);
  }
  for (int i = 0; i < COLL_SPARAM_COUNT; i++) {
    const char* v = collParamStr((collStrParam)i);
    COLL_INFO(COLL_SUB_ENV, "%-24s string default %-8s value %-8s %s", collStrParams[i].name,
              collStrParams[i].def ? collStrParams[i].def : "-", v ? v : "-", collStrParams[i].doc);
  }
}

int collParamRow(int i, collParamRowInfo* out) {
  memset(out, 0, sizeof *out);
  if (i < 0) return 0;
  if (i < COLL_PARAM_COUNT_INT) {
    const collIntParamDesc* d = &collIntParams[i];
    int64_t v = collParamInt((collIntParam)i);
    out->name = d->name;
    out->type = "int";
    snprintf(out->def, sizeof out->def, "%lld", (long long)d->def);
    snprintf(out->value, sizeof out->value, "%lld", (long long)v);
    snprintf(out->range, sizeof out->range, "[%lld, %lld]", (long long)d->min, (long long)d->max);
    out->fromEnv = collIntSet[i] || collIntWarn[i][0];
    out->doc = d->doc;
    return 1;
  }
  i -= COLL_PARAM_COUNT_INT;
  if (i >= COLL_SPARAM_COUNT) return 0;
  const collStrParamDesc* d = &collStrParams[i];
  const char* v = collParamStr((collStrParam)i);
  const char* env = getenv(d->name);
  out->name = d->name;
  out->type = "string";
  snprintf(out->def, sizeof out->def, "%s", d->def ? d->def : "-");
  snprintf(out->value, sizeof out->value, "%s", v ? v : "-");
  out->fromEnv = env && *env;
  out->doc = d->doc;
  return 1;
}
