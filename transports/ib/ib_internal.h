/*
 * ib_internal.h - shared definitions of the ib transport (RC queue pairs over
 * InfiniBand or RoCE): wire formats, devices, comms, and the entry points of
 * its parts:
 *   ib_verbs.c    the dlopen'ed libibverbs table
 *   ib_devices.c  HCAs and ports, COLL_IB_HCA, GID choice, speed
 *   ib_connect.c  listen/connect/accept, the TCP side channel, QP states,
 *                 the service routine (incoming connections, CQ and async events)
 *   ib_data.c     isend/irecv/test: the clear-to-send FIFO, eager slots, RDMA writes
 *   (src/engine/regcache.c: the generic registration cache by address range)
 *   ib.c          the collNet_t table
 *
 * Protocol. A connection is a TCP socket (the side channel: handshake, then
 * only watched for the peer's close) and COLL_IB_QPS_PER_CONNECTION RC queue
 * pairs, one CQ per comm on the device's shared completion channel. Message
 * k (k-th isend = k-th irecv) uses QP k % nqps and slot k % IB_DEPTH.
 *  - irecv of more than IB_EAGER bytes: the receiver RDMA-writes a
 *    clear-to-send entry {addr, size, rkey, expected tag, consumed} into slot
 *    k of the sender's CTS FIFO, with an immediate (k) so the sender gets a
 *    completion to wake on. A smaller receive writes none: its message comes
 *    eager. Instead the receiver reports its consumed count (every message
 *    below it is out of its slot) with a zero-byte write whose immediate is
 *    IB_IMM_CREDIT | count, each time the count moved IB_DEPTH / 2 past the
 *    last report: small messages cost one write, not two;
 *  - isend of more than IB_EAGER bytes waits for CTS k, RDMA-writes the data
 *    into the posted buffer (split into pieces of at most the port's
 *    max_msg_sz), then RDMA-writes a 64-byte record {size, tag} into slot k
 *    of the receiver's record array with immediate k: the receiver's
 *    completion. A message larger than the posted buffer writes no data, only
 *    a record saying so (the receiver fails with collRemoteError);
 *  - isend of at most IB_EAGER bytes writes record and payload together into
 *    the receiver's slot k, without waiting for CTS k, when slot k is known to
 *    be free (CTS k arrived, or the receiver reported k - IB_DEPTH consumed):
 *    a connection's first messages (the engine's hello) complete before the
 *    peer posts a receive, as over TCP. Such a send is done once posted (its
 *    payload is copied: no wait for the write's acknowledgement, a round
 *    trip). The receiver copies them out;
 *  - a larger isend whose CTS k has not come within IB_RTS_DELAY_S, with
 *    credit, writes a request-to-send {size} into slot k of the receiver's RTS array
 *    (immediate k | IB_IMM_RTS): a receiver that posted a small buffer (and
 *    so sends no CTS) fails at once with the sizes instead of waiting.
 * GPU memory (an mhandle of regMrDmaBuf) never goes eager, whatever its size:
 * no host code may read or write it, so it is "direct" as a message larger
 * than IB_EAGER: the receiver sends a CTS for it and the sender RDMA-writes
 * from it once the CTS came. Both ends must agree (the engine gives GPU
 * memory to both ends of a connection or to neither); where they do not, the
 * receiver fails instead of copying: an eager record arriving for a GPU
 * buffer, or a request-to-send for a small host buffer (the sender has GPU
 * memory and waits for a CTS that a small host receive never sends).
 * Both sides are little-endian hosts of the same ABI (checked by magic).
 */
#ifndef COLL_TRANSPORT_IB_INTERNAL_H_
#define COLL_TRANSPORT_IB_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "coll_net.h"
#include "device/dmabuf.h"
#include "engine/regcache.h"
#include "ib_verbs.h"
#include "misc/socket.h"

#define IB_DEPTH 64       /* requests in flight per comm = CTS FIFO entries = record slots */
#define IB_EAGER 16384    /* payload bytes a record slot carries (eager messages): 1 MiB of slots per recv comm */
#define IB_SLOT (64 + IB_EAGER)
#define IB_IMM_RTS 0x80000000u    /* to the receiver: a request-to-send */
#define IB_IMM_CREDIT 0x80000000u /* to the sender: a consumed count */
#define IB_IMM_SEQ 0x7fffffffu /* immediates carry the message number's low 31 bits */
#define IB_MAX_QPS 16
#define IB_MAX_HCAS 32
#define IB_MAX_DEVS 64    /* (HCA, port) pairs */
#define IB_MAX_GIDS 128   /* GID table entries examined per port */
#define IB_SQ_DEPTH (4 * IB_DEPTH)  /* send WRs per QP */
#define IB_SIG_EVERY (IB_SQ_DEPTH / 8) /* at least every this many send WRs of a QP one is signaled */
#define IB_RQ_DEPTH (2 * IB_DEPTH)  /* receive WRs per QP (immediates) */
#define IB_HANDSHAKE_S 10.0 /* an incoming connection must send its info within this */
#define IB_CHECK_S 0.02     /* how often a waiting comm looks at its side channel */
#define IB_GONE_GRACE_S 1.0 /* after the peer closed, how long posted writes may still complete */
#define IB_RTS_DELAY_S 0.005 /* a large send waits this long for its CTS before it sends a request-to-send */

/* ---- wire formats --------------------------------------------------------- */

#define IB_HANDLE_MAGIC 0x313042496c6c6f63ULL /* "collIB01" */
typedef struct {
  uint64_t magic;
  collSockAddr addr; /* the listener's side-channel socket */
  uint32_t pad;
} collIbHandle;
_Static_assert(sizeof(collIbHandle) <= COLL_NET_HANDLE_BYTES, "ib handle too large");

#define IB_INFO_MAGIC 0x49424331u /* "1CBI" */
#define IB_INFO_VERSION 1
/* What each side sends through the side channel: the connector first, the
 * listener replies with its own; then the connector sends one byte 'R'
 * (ready: its QPs are RTS, so the listener may write CTS entries). */
typedef struct {
  uint32_t magic;
  uint16_t version;
  uint8_t linkLayer; /* IBV_LINK_LAYER_INFINIBAND or _ETHERNET (RoCE) */
  uint8_t mtu;       /* enum ibv_mtu, the port's active MTU */
  uint16_t nqps;
  uint16_t lid;
  uint8_t gid[16];
  uint32_t psn;      /* first PSN of every QP of this side (24 bits) */
  uint32_t depth;    /* IB_DEPTH */
  uint32_t eager;    /* IB_EAGER */
  uint32_t rkey;     /* of `addr` */
  uint64_t addr;     /* connector: its CTS FIFO; listener: its record slots */
  uint32_t qpn[IB_MAX_QPS];
  char host[64];
} collIbInfo;
_Static_assert(sizeof(collIbInfo) == 184, "connection info layout (wire format) changed");

/* Checks received bytes as a peer's info: returns 0 and fills *out, or -1
 * with the reason in why. Pure (fuzzed by tests/fuzz/fuzz_ib_handshake.c). */
int collIbInfoParse(const void* buf, size_t len, collIbInfo* out, char* why, size_t whyLen);
/* Checks a listen handle; 0 or -1 (why). */
int collIbHandleParse(const void* buf, size_t len, collIbHandle* out, char* why, size_t whyLen);

/* Clear-to-send entry, written by the receiver into the sender's FIFO. */
typedef struct {
  uint64_t addr;     /* posted buffer (0 if the message must come eager) */
  uint64_t size;     /* posted bytes */
  uint64_t tag;      /* the tag the receiver expects (carried, not compared) */
  uint64_t consumed; /* every message below this one is out of its record slot */
  uint32_t rkey;
  uint32_t seq;      /* low 32 bits of the message number + 1 */
  uint8_t pad[24];
} collIbCts;
_Static_assert(sizeof(collIbCts) == 64, "CTS entry is 64 bytes");

#define IB_REC_EAGER 1  /* the payload follows the record */
#define IB_REC_DIRECT 2 /* the payload was written into the posted buffer */
#define IB_REC_TOOBIG 4 /* larger than the posted buffer: nothing written */
/* Record, written by the sender into the receiver's slot (then payload). */
typedef struct {
  uint64_t size;
  uint64_t tag;
  uint32_t seq;   /* low 32 bits of the message number */
  uint32_t flags; /* IB_REC_* */
  uint8_t pad[40];
} collIbRec;
_Static_assert(sizeof(collIbRec) == 64, "record is 64 bytes");

/* Request-to-send, written by the sender into the receiver's RTS array. */
typedef struct {
  uint64_t size;
  uint32_t seq; /* low 32 bits of the message number */
  uint32_t pad0;
  uint64_t tag; /* the message's tag: a receiver that refuses it as too large reports it */
  uint8_t pad[40];
} collIbRts;
_Static_assert(sizeof(collIbRts) == 64, "RTS entry is 64 bytes");

/* ---- configuration (from the COLL_IB_* variables at init) ---------------- */

typedef struct {
  int gidIndex; /* -1 auto */
  int tc, sl, timeout, retryCnt;
  int nqps;
  int regCache; /* registrations kept (0: per message) */
  int dmabuf;   /* COLL_IB_DMABUF: 1 use dma-buf registration where supported, 0 never */
  const char* hca;
} collIbConfig;
/* Read at init; a test may change it between connections. */
extern collIbConfig collIbCfg;
/* Fills cfg from the COLL_IB_* variables. */
void collIbConfigLoad(collIbConfig* cfg);
/* Loads libibverbs and opens the devices with collIbCfg as it is (init =
 * collIbConfigLoad + this; tests set collIbCfg in between). */
collResult_t collIbStart(void);

/* ---- devices -------------------------------------------------------------- */

enum { IB_EP_LISTEN = 1, IB_EP_PENDING, IB_EP_CHAN, IB_EP_ASYNC, IB_EP_WAKE };

typedef struct collIbHca {
  int epKind[2]; /* IB_EP_CHAN, IB_EP_ASYNC: epoll cookies pointing here */
  char name[64];
  struct ibv_context* ctx;
  struct ibv_pd* pd;
  struct ibv_comp_channel* chan;
  struct ibv_device_attr attr;
  collRegCache* reg;       /* ib's own registrations (COLL_IB_REG_CACHE entries) */
  collRegCache* regDirect; /* regMr's (the engine's): never kept here, COLL_REG_CACHE decides */
  int fatal; /* a device-fatal event arrived */
  /* ibv_reg_dmabuf_mr works here: 1 supported, 0 not (dmabufErrno: the
   * probe's errno; 0 when libibverbs has no ibv_reg_dmabuf_mr) */
  int dmabuf, dmabufErrno, dmabufProbed;
} collIbHca;

/* Access bit of a collRegEntry that regMrDmaBuf made (not from a cache):
 * deregMr releases it itself. No ibv_access_flags bit is this high. */
#define IB_REG_DMABUF (1 << 30)

/* What regMrDmaBuf returns: the registration (first, so the data path reads
 * it as any collRegEntry) and how iflush makes the NIC's writes into it
 * visible to the GPU, decided once when it was registered. */
typedef struct {
  collRegEntry e; /* access has IB_REG_DMABUF */
  collCudaRdmaFlush flush;
} collIbDmaBufReg;

typedef struct collIbDev {
  collIbHca* hca;
  char name[64]; /* the HCA's name (rxe0, mlx5_0) */
  int port;
  int linkLayer;
  enum ibv_mtu mtu;
  uint16_t lid;
  int gidIndex;
  union ibv_gid gid;
  uint32_t maxMsg;
  double gbps;
  uint64_t guid;
  char pciPath[256];
  int down; /* port error event: every comm on it fails */
} collIbDev;

/* Process-wide state, guarded by lock (except the atomics of comms). */
typedef struct {
  pthread_mutex_t lock;
  int ready;
  const collIbvOps* v;
  int nhca;
  collIbHca hcas[IB_MAX_HCAS];
  int ndev;
  collIbDev devs[IB_MAX_DEVS];
  int epfd;   /* every fd a rank may wait on: channels, async fds, listen and handshake sockets, wakeFd */
  int wakeFd; /* eventfd: a comm found work right after arming */
  int epWake; /* IB_EP_WAKE cookie */
  struct collIbComm* comms;    /* every open comm (async events find theirs) */
  struct collIbListen* listens;
} collIbState;
extern collIbState collIb;

/* Pure parts of discovery (unit-tested on their own). */
int collIbHcaMatch(const char* spec, const char* dev, int port);
typedef struct {
  uint8_t raw[16];
  char type[16]; /* sysfs gid_attrs/types: "RoCE v2", "IB/RoCE v1", "" */
} collIbGidEntry;
/* The GID index to use on a RoCE port: forced (>= 0, must be < n), else the
 * first RoCE v2 IPv4-mapped one, else RoCE v2 global IPv6, else any RoCE v2,
 * else 0. -1 if forced is out of range. why gets a one-line reason. */
int collIbChooseGid(const collIbGidEntry* g, int n, int forced, char* why, size_t whyLen);
/* Gbit/s of a port from ibv_port_attr active_width and active_speed codes. */
double collIbPortGbps(int width, int speed);
/* Opens devices and ports (under collIb.lock). */
collResult_t collIbDiscover(void);
void collIbCloseDevices(void);
const char* collIbMtuStr(int mtu);
/* "::ffff:198.18.0.1" or hex groups. */
const char* collIbGidStr(const uint8_t* gid, char* buf, size_t len);

/* ---- comms ---------------------------------------------------------------- */

#define IB_TAG_LISTEN 0x4c424931u
#define IB_TAG_SEND 0x53424931u
#define IB_TAG_RECV 0x52424931u

enum { IB_CONNECTING = 0, IB_WAIT_READY, IB_CONNECTED };
enum { IB_REQ_FREE = 0, IB_REQ_POSTED, IB_REQ_DATA, IB_REQ_ISSUED, IB_REQ_DONE };

/* wr_id: message number (low 40 bits) << 24 | the QP's send count after
 * this WR (low 16 bits) << 8 | qp index << 4 | kind (ib_data.c) */
enum { IB_WR_DATA = 1, IB_WR_REC, IB_WR_CTS, IB_WR_RECV, IB_WR_RTS, IB_WR_MARK };

typedef struct collIbReq {
  struct collIbComm* comm;
  int state;
  uint64_t seq;
  char* data;
  size_t size; /* send: message bytes; recv: posted bytes */
  size_t len;  /* recv: message bytes once finished */
  uint64_t tag; /* send: posted; recv: expected, then the sender's */
  size_t off;   /* send: payload bytes already posted (direct) */
  int tooBig;   /* send: larger than the posted buffer */
  int rtsSent;  /* send: a request-to-send went out for it */
  int direct;   /* by RDMA write into the posted buffer after a CTS: above IB_EAGER, or GPU memory */
  int gpu;      /* the buffer is GPU memory (a dma-buf mhandle): never touched by host code */
  double postedAt; /* send: when it was posted (for IB_RTS_DELAY_S) */
  uint64_t dstAddr;
  uint32_t dstKey;
  collRegEntry* reg; /* registration held while in flight */
  int keyed;         /* lkey (and dstKey for a receive) set */
  uint32_t lkey;
} collIbReq;

typedef struct collIbComm {
  uint32_t tag; /* IB_TAG_SEND / IB_TAG_RECV */
  int isSend;
  collIbDev* dev;
  int sock; /* the side channel */
  _Atomic int state;
  int nqps;
  struct ibv_qp* qp[IB_MAX_QPS];
  /* send queues: WRs posted, and how many of them are known complete (a
   * signaled completion covers every WR posted before it on its QP); only
   * every IB_SIG_EVERY-th WR and those whose completion is awaited are
   * signaled, so sqUnsig counts the unsignaled ones since the last signaled */
  uint64_t sqPosted[IB_MAX_QPS];
  uint64_t sqDone[IB_MAX_QPS];
  int sqUnsig[IB_MAX_QPS];
  struct ibv_cq* cq;
  _Atomic int armed;
  /* control memory, one registration, IB_DEPTH entries of each:
   *  send: CTS entries (remote-writable), staging slots, RTS sources;
   *  recv: CTS sources, record slots, RTS entries (both remote-writable) */
  char* ctrl;
  size_t ctrlBytes;
  struct ibv_mr* ctrlMr;
  uint64_t remAddr; /* send: receiver's slots; recv: sender's FIFO */
  uint32_t remKey;
  collIbInfo mine, peer;
  size_t peerGot; /* handshake bytes of peer received so far */
  uint64_t posted;   /* requests handed out */
  uint64_t issued;   /* send: messages written; recv: CTS entries written */
  uint64_t consumed; /* send: the receiver's report; recv: in-order finished count */
  uint64_t ctsSeen[IB_DEPTH]; /* send: k + 1 once CTS k arrived in slot k % IB_DEPTH */
  uint64_t recSeen[IB_DEPTH]; /* recv: k + 1 once record k arrived */
  uint64_t doneSeq[IB_DEPTH]; /* recv: k + 1 once message k was finished */
  uint64_t rtsSeen[IB_DEPTH]; /* recv: k + 1 once a request-to-send for k arrived */
  uint64_t lastReported;      /* recv: the consumed count of the last credit write */
  int newArrivals;            /* recv: records arrived since the last finish pass */
  collIbReq reqs[IB_DEPTH];
  collResult_t err; /* sticky failure */
  char errMsg[700];
  uint64_t errTag; /* the sender's tag of a message refused as too large (reported by test) */
  _Atomic int failed; /* set by the service routine (async event) with failMsg */
  char failMsg[400];
  double nextCheck;
  double nextService;
  double goneAt; /* when the side channel reported the peer's close (0: not yet) */
  char peerAddr[80];  /* the peer's side-channel address */
  char peerDesc[160]; /* "host (addr)" of the peer */
  struct collIbComm* next;
} collIbComm;

typedef struct collIbPending {
  int epKind; /* IB_EP_PENDING */
  struct collIbListen* l;
  int fd;
  collIbInfo info;
  size_t got;
  double deadline;
  char addr[80];
  struct collIbPending* next;
} collIbPending;

typedef struct collIbListen {
  uint32_t tag; /* IB_TAG_LISTEN */
  int epKind;   /* IB_EP_LISTEN */
  collIbDev* dev;
  int fd;
  collSockAddr addr;
  collIbPending* pending;
  collIbComm* ready[IB_DEPTH]; /* connected, not yet accepted */
  int nready;
  struct collIbListen* next;
} collIbListen;

/* ib_connect.c */
collResult_t collIbListenFn(int dev, void* handle, void** listenComm);
collResult_t collIbConnectFn(int dev, const void* handle, void** sendComm);
collResult_t collIbAcceptFn(void* listenComm, void** recvComm);
collResult_t collIbCloseListenFn(void* listenComm);
collResult_t collIbCloseComm(void* comm);
/* Handshake of a comm that is not connected yet (owner's thread). */
collResult_t collIbHandshake(collIbComm* c);
/* Incoming connections, CQ events and async events of the whole process;
 * never blocks. `wait`: take the lock even if another thread holds it. */
void collIbService(int wait);
/* Records the comm's sticky failure; returns code. */
collResult_t collIbFail(collIbComm* c, collResult_t code, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ib_data.c */
collResult_t collIbIsend(void* sendComm, const void* data, size_t size, uint64_t tag, void* mhandle,
                         void** request);
collResult_t collIbIrecv(void* recvComm, void* data, size_t size, uint64_t tag, void* mhandle, void** request);
collResult_t collIbTest(void* request, int* done, size_t* size, uint64_t* tag);
/* Polls the CQ and moves the comm's messages forward; returns the sticky error. */
collResult_t collIbProgress(collIbComm* c, int* progressed);
/* Arms the comm's CQ for the completion channel, then looks once more. */
void collIbArm(collIbComm* c, int* progressed);
/* Send comm: waits up to sec for the writes in flight (eager sends are done
 * before their writes complete), so that closing the comm right after them
 * does not drop them. */
void collIbDrain(collIbComm* c, double sec);
/* Posts n receive WRs (for immediates) on QP i. */
int collIbPostRecvs(collIbComm* c, int i, int n);
/* One-line hint for a failed work completion. */
const char* collIbWcHint(enum ibv_wc_status s);

#endif
