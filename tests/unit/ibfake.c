/* ibfake.c - the in-memory verbs device (ibfake.h). */
#include "ibfake.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "transports/ib/ib_verbs.h"

#define MAX_DEVS 4
#define MAX_QPS 4096
#define CHAN_EVENTS 8192

typedef struct {
  struct ibv_device d;
  ibFakeDevSpec spec;
} fakeDev;

typedef struct fakeCtx {
  struct ibv_context ctx;
  int dev;
  struct ibv_async_event ev[64];
  int nev;
} fakeCtx;

typedef struct {
  struct ibv_pd pd;
} fakePd;

typedef struct fakeMr {
  struct ibv_mr mr;
  int access;
  /* ibv_reg_dmabuf_mr: the dma-buf mapped here (map + mapSkip + (addr -
   * iova) is where an access at addr lands); NULL for ibv_reg_mr (addr is
   * the host address) */
  char* map;
  size_t mapLen, mapSkip; /* mapping length; bytes before offset (page alignment) */
  struct fakeMr* next;
} fakeMr;

typedef struct fakeCq fakeCq;
typedef struct {
  struct ibv_comp_channel ch;
  fakeCq* ev[CHAN_EVENTS];
  int head, n;
} fakeChan;

struct fakeCq {
  struct ibv_cq cq;
  struct ibv_wc* ring;
  int cap, head, n;
  int armed;
  fakeChan* chan;
  int users;
};

typedef struct {
  struct ibv_qp qp;
  int state;
  int port;
  int access;
  struct ibv_qp_attr rtr, rts;
  int maxSend, maxRecv;
  int sendOut;
  uint64_t* rq;
  int rqHead, rqN;
  fakeCq *scq, *rcq;
  uint32_t writes, records;
  fakeCtx* ctx;
} fakeQp;

typedef struct {
  uint32_t srcQpn;
  uint64_t wrId;
  int imm;
  uint32_t immData;
  int signaled;
  uint64_t laddr;
  uint32_t len, lkey;
  uint64_t raddr;
  uint32_t rkey;
} fakeOp;

static pthread_mutex_t fakeLock = PTHREAD_MUTEX_INITIALIZER;
static fakeDev fakeDevs[MAX_DEVS];
static int fakeNdev;
static fakeMr* fakeMrs;
static uint32_t fakeNextKey = 0x100, fakeNextQpn = 0x11;
static fakeQp* fakeQps[MAX_QPS];
static fakeOp* fakeOps;
static size_t fakeOpsHead, fakeOpsN, fakeOpsCap;
static ibFakeStats fakeSt;
static int fakeHeld;
static enum ibv_wc_status fakeFailStatus;
static int fakeFailCount;

static void violation(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void violation(const char* fmt, ...) {
  if (fakeSt.violation[0]) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(fakeSt.violation, sizeof fakeSt.violation, fmt, ap);
  va_end(ap);
}

static fakeQp* qpByNum(uint32_t n) {
  for (int i = 0; i < MAX_QPS; i++)
    if (fakeQps[i] && fakeQps[i]->qp.qp_num == n) return fakeQps[i];
  return NULL;
}

static const ibFakePort* portOf(fakeCtx* c, int port) {
  const ibFakeDevSpec* s = &fakeDevs[c->dev].spec;
  return port >= 1 && port <= s->nports ? &s->ports[port - 1] : NULL;
}

/* ---- CQs and events --------------------------------------------------------- */

static void cqPush(fakeCq* cq, const struct ibv_wc* wc) {
  if (cq->n == cq->cap) {
    violation("CQ overrun (%d entries)", cq->cap);
    return;
  }
  cq->ring[(cq->head + cq->n) % cq->cap] = *wc;
  cq->n++;
  if (cq->armed && cq->chan) {
    cq->armed = 0;
    fakeChan* ch = cq->chan;
    if (ch->n < CHAN_EVENTS) {
      ch->ev[(ch->head + ch->n) % CHAN_EVENTS] = cq;
      ch->n++;
      uint64_t one = 1;
      if (write(ch->ch.fd, &one, sizeof one) < 0) violation("eventfd write failed");
      fakeSt.cqEvents++;
    }
  }
}

static void qpToError(fakeQp* q) {
  if (q->state == IBV_QPS_ERR) return;
  q->state = IBV_QPS_ERR;
  while (q->rqN > 0) { /* flush the receive queue */
    struct ibv_wc wc;
    memset(&wc, 0, sizeof wc);
    wc.wr_id = q->rq[q->rqHead];
    wc.status = IBV_WC_WR_FLUSH_ERR;
    wc.qp_num = q->qp.qp_num;
    q->rqHead = (q->rqHead + 1) % q->maxRecv;
    q->rqN--;
    cqPush(q->rcq, &wc);
  }
}

static void sendWc(fakeQp* q, const fakeOp* op, enum ibv_wc_status st) {
  struct ibv_wc wc;
  memset(&wc, 0, sizeof wc);
  wc.wr_id = op->wrId;
  wc.status = st;
  wc.opcode = IBV_WC_RDMA_WRITE;
  wc.qp_num = q->qp.qp_num;
  wc.vendor_err = st == IBV_WC_SUCCESS ? 0 : 0x81;
  if (st == IBV_WC_SUCCESS && op->signaled) fakeSt.sendCqes++;
  if (st != IBV_WC_SUCCESS || op->signaled) cqPush(q->scq, &wc);
  if (st != IBV_WC_SUCCESS) qpToError(q);
}

static fakeMr* findMr(uint32_t key, int remote, struct ibv_pd* pd, uint64_t addr, uint64_t len) {
  for (fakeMr* m = fakeMrs; m; m = m->next) {
    uint32_t k = remote ? m->mr.rkey : m->mr.lkey;
    if (k != key || m->mr.pd != pd) continue;
    uint64_t a = (uint64_t)(uintptr_t)m->mr.addr;
    if (addr < a || addr + len > a + m->mr.length) return NULL;
    if (remote && !(m->access & IBV_ACCESS_REMOTE_WRITE)) return NULL;
    return m;
  }
  return NULL;
}

/* Where an access at addr through m lands. */
static char* mrHost(const fakeMr* m, uint64_t addr) {
  if (!m->map) return (char*)(uintptr_t)addr;
  return m->map + m->mapSkip + (addr - (uint64_t)(uintptr_t)m->mr.addr);
}

/* Does src's address vector reach dst's port and QP? */
static int reaches(fakeQp* s, fakeQp* d) {
  const ibFakePort* sp = portOf(s->ctx, s->port);
  const ibFakePort* dp = portOf(d->ctx, d->port);
  if (!sp || !dp || sp->state != IBV_PORT_ACTIVE || dp->state != IBV_PORT_ACTIVE) return 0;
  if (sp->linkLayer != dp->linkLayer) return 0;
  if (s->rtr.dest_qp_num != d->qp.qp_num || d->rtr.dest_qp_num != s->qp.qp_num) return 0;
  if (s->rts.sq_psn != d->rtr.rq_psn) return 0; /* out of sequence: dropped */
  if (sp->linkLayer == IBV_LINK_LAYER_ETHERNET) {
    int si = s->rtr.ah_attr.grh.sgid_index, di = d->rtr.ah_attr.grh.sgid_index;
    if (si >= sp->ngids || di >= dp->ngids) return 0;
    if (sp->gids[si].unroutable || dp->gids[di].unroutable) return 0;
    if (memcmp(s->rtr.ah_attr.grh.dgid.raw, dp->gids[di].raw, 16) != 0) return 0;
    return 1;
  }
  return s->rtr.ah_attr.dlid == dp->lid;
}

/* Executes one op: 0 done (or failed), 1 retry later. */
static int execute(const fakeOp* op) {
  fakeQp* s = qpByNum(op->srcQpn);
  if (!s) return 0; /* QP destroyed with work queued */
  s->sendOut--;
  if (s->state == IBV_QPS_ERR) {
    sendWc(s, op, IBV_WC_WR_FLUSH_ERR);
    return 0;
  }
  if (fakeFailCount > 0) {
    fakeFailCount--;
    sendWc(s, op, fakeFailStatus);
    return 0;
  }
  const ibFakePort* sp = portOf(s->ctx, s->port);
  if (op->len > sp->maxMsg) {
    sendWc(s, op, IBV_WC_LOC_LEN_ERR);
    return 0;
  }
  const fakeMr* lm = op->len ? findMr(op->lkey, 0, s->qp.pd, op->laddr, op->len) : NULL;
  if (op->len && !lm) {
    sendWc(s, op, IBV_WC_LOC_PROT_ERR);
    return 0;
  }
  fakeQp* d = qpByNum(s->rtr.dest_qp_num);
  if (!d || (d->state != IBV_QPS_RTR && d->state != IBV_QPS_RTS) || !reaches(s, d)) {
    sendWc(s, op, IBV_WC_RETRY_EXC_ERR);
    return 0;
  }
  const fakeMr* rm = op->len ? findMr(op->rkey, 1, d->qp.pd, op->raddr, op->len) : NULL;
  if (op->len && !rm) {
    sendWc(s, op, IBV_WC_REM_ACCESS_ERR);
    qpToError(d);
    return 0;
  }
  if (op->imm && d->rqN == 0) {
    fakeSt.rnr++;
    s->sendOut++;
    return 1;
  }
  if (op->len) memcpy(mrHost(rm, op->raddr), mrHost(lm, op->laddr), op->len);
  fakeSt.writes++;
  s->writes++;
  if (op->len > fakeSt.maxWrite) fakeSt.maxWrite = op->len;
  if (op->imm) {
    fakeSt.imms++;
    s->records++;
    struct ibv_wc wc;
    memset(&wc, 0, sizeof wc);
    wc.wr_id = d->rq[d->rqHead];
    d->rqHead = (d->rqHead + 1) % d->maxRecv;
    d->rqN--;
    wc.status = IBV_WC_SUCCESS;
    wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
    wc.byte_len = op->len;
    wc.imm_data = op->immData;
    wc.wc_flags = IBV_WC_WITH_IMM;
    wc.qp_num = d->qp.qp_num;
    wc.src_qp = s->qp.qp_num;
    cqPush(d->rcq, &wc);
  }
  sendWc(s, op, IBV_WC_SUCCESS);
  return 0;
}

/* Runs every queued op in order; ops of a QP that hit RNR wait (with the
 * ones behind them). */
static void runQueue(void) {
  if (fakeHeld) return;
  uint32_t blocked[64];
  int nb = 0;
  size_t n = fakeOpsN, keep = 0;
  for (size_t i = 0; i < n; i++) {
    fakeOp op = fakeOps[(fakeOpsHead + i) % fakeOpsCap];
    int isBlocked = 0;
    for (int b = 0; b < nb; b++)
      if (blocked[b] == op.srcQpn) isBlocked = 1;
    if (isBlocked || execute(&op)) {
      if (!isBlocked && nb < 64) blocked[nb++] = op.srcQpn;
      fakeOps[(fakeOpsHead + keep) % fakeOpsCap] = op;
      keep++;
    }
  }
  fakeOpsN = keep;
}

/* ---- the verbs ------------------------------------------------------------ */

static struct ibv_device** fGetDeviceList(int* num) {
  pthread_mutex_lock(&fakeLock);
  struct ibv_device** l = calloc((size_t)fakeNdev + 1, sizeof *l);
  for (int i = 0; l && i < fakeNdev; i++) l[i] = &fakeDevs[i].d;
  if (num) *num = fakeNdev;
  pthread_mutex_unlock(&fakeLock);
  return l;
}
static void fFreeDeviceList(struct ibv_device** l) { free(l); }
static const char* fGetDeviceName(struct ibv_device* d) { return ((fakeDev*)d)->spec.name; }
static __be64 fGetDeviceGuid(struct ibv_device* d) { return htobe64(((fakeDev*)d)->spec.guid); }

static struct ibv_context* fOpenDevice(struct ibv_device* d) {
  fakeCtx* c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->ctx.device = d;
  c->dev = (int)((fakeDev*)d - fakeDevs);
  c->ctx.num_comp_vectors = 1;
  c->ctx.async_fd = eventfd(0, EFD_SEMAPHORE | EFD_NONBLOCK | EFD_CLOEXEC);
  c->ctx.cmd_fd = -1;
  return &c->ctx;
}
static int fCloseDevice(struct ibv_context* ctx) {
  close(ctx->async_fd);
  free(ctx);
  return 0;
}
static int fQueryDevice(struct ibv_context* ctx, struct ibv_device_attr* a) {
  fakeCtx* c = (fakeCtx*)ctx;
  memset(a, 0, sizeof *a);
  a->phys_port_cnt = (uint8_t)fakeDevs[c->dev].spec.nports;
  a->max_cqe = 1 << 16;
  a->max_qp_wr = 16384;
  a->max_sge = 32;
  return 0;
}
static int fQueryPort(struct ibv_context* ctx, uint8_t port, struct ibv_port_attr* a) {
  pthread_mutex_lock(&fakeLock);
  const ibFakePort* p = portOf((fakeCtx*)ctx, port);
  memset(a, 0, sizeof *a);
  if (p) {
    a->state = p->state;
    a->max_mtu = IBV_MTU_4096;
    a->active_mtu = p->mtu;
    a->gid_tbl_len = p->ngids;
    a->max_msg_sz = p->maxMsg;
    a->lid = p->lid;
    a->active_width = p->width;
    a->active_speed = p->speed;
    a->link_layer = p->linkLayer;
  }
  pthread_mutex_unlock(&fakeLock);
  if (!p) { errno = EINVAL; return EINVAL; }
  return 0;
}
static int fQueryGid(struct ibv_context* ctx, uint8_t port, int index, union ibv_gid* gid) {
  const ibFakePort* p = portOf((fakeCtx*)ctx, port);
  if (!p || index < 0 || index >= p->ngids) return -1;
  memcpy(gid->raw, p->gids[index].raw, 16);
  return 0;
}
static struct ibv_pd* fAllocPd(struct ibv_context* ctx) {
  fakePd* p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->pd.context = ctx;
  return &p->pd;
}
static int fDeallocPd(struct ibv_pd* pd) {
  free(pd);
  return 0;
}
static struct ibv_mr* fRegMr(struct ibv_pd* pd, void* addr, size_t len, int access) {
  pthread_mutex_lock(&fakeLock);
  fakeSt.regs++;
  if (!addr || !len) {
    violation("ibv_reg_mr(%p, %zu)", addr, len);
    pthread_mutex_unlock(&fakeLock);
    errno = EINVAL;
    return NULL;
  }
  if ((access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE))
    violation("ibv_reg_mr: REMOTE_WRITE without LOCAL_WRITE");
  fakeMr* m = calloc(1, sizeof *m);
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = len;
  m->mr.lkey = fakeNextKey++;
  m->mr.rkey = fakeNextKey++;
  m->access = access;
  m->next = fakeMrs;
  fakeMrs = m;
  fakeSt.liveMrs++;
  pthread_mutex_unlock(&fakeLock);
  return &m->mr;
}
static int fakeDmaBufMode; /* IBFAKE_DMABUF_* */
/* As the kernel: fd -1 is EBADF where dma-bufs are supported, EOPNOTSUPP
 * where the driver lacks them. The dma-buf (here: any mmap-able fd, e.g.
 * the fake CUDA driver's memfd) is mapped at offset: RDMA through the MR
 * reads and writes the memory behind the fd; a fd that cannot be mapped
 * (a pipe) is EBADF. */
static struct ibv_mr* fRegDmaBufMr(struct ibv_pd* pd, uint64_t offset, size_t len, uint64_t iova, int fd,
                                   int access) {
  pthread_mutex_lock(&fakeLock);
  fakeSt.dmabufRegs++;
  int err = fakeDmaBufMode == IBFAKE_DMABUF_UNSUPPORTED ? EOPNOTSUPP : fd < 0 ? EBADF : (!len || !iova) ? EINVAL : 0;
  char* map = MAP_FAILED;
  size_t pg = (size_t)sysconf(_SC_PAGESIZE), skip = (size_t)(offset % pg);
  if (!err) {
    map = mmap(NULL, len + skip, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)(offset - skip));
    if (map == MAP_FAILED) err = errno == EACCES || errno == ENODEV ? EBADF : errno;
  }
  if (!err && (access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE))
    violation("ibv_reg_dmabuf_mr: REMOTE_WRITE without LOCAL_WRITE");
  fakeMr* m = err ? NULL : calloc(1, sizeof *m);
  if (!m) {
    if (map != MAP_FAILED) munmap(map, len + skip);
    pthread_mutex_unlock(&fakeLock);
    errno = err ? err : ENOMEM;
    return NULL;
  }
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = (void*)(uintptr_t)iova;
  m->mr.length = len;
  m->mr.lkey = fakeNextKey++;
  m->mr.rkey = fakeNextKey++;
  m->access = access;
  m->map = map;
  m->mapLen = len + skip;
  m->mapSkip = skip;
  m->next = fakeMrs;
  fakeMrs = m;
  fakeSt.liveMrs++;
  pthread_mutex_unlock(&fakeLock);
  return &m->mr;
}

static int fDeregMr(struct ibv_mr* mr) {
  pthread_mutex_lock(&fakeLock);
  fakeSt.deregs++;
  for (fakeMr** p = &fakeMrs; *p; p = &(*p)->next)
    if (&(*p)->mr == mr) {
      fakeMr* m = *p;
      *p = m->next;
      if (m->map) munmap(m->map, m->mapLen);
      free(m);
      fakeSt.liveMrs--;
      pthread_mutex_unlock(&fakeLock);
      return 0;
    }
  violation("ibv_dereg_mr of an unknown MR");
  pthread_mutex_unlock(&fakeLock);
  return EINVAL;
}
static struct ibv_comp_channel* fCreateCompChannel(struct ibv_context* ctx) {
  fakeChan* c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->ch.context = ctx;
  c->ch.fd = eventfd(0, EFD_SEMAPHORE | EFD_NONBLOCK | EFD_CLOEXEC);
  return &c->ch;
}
static int fDestroyCompChannel(struct ibv_comp_channel* ch) {
  close(ch->fd);
  free(ch);
  return 0;
}
static struct ibv_cq* fCreateCq(struct ibv_context* ctx, int cqe, void* cqContext, struct ibv_comp_channel* ch,
                                int vector) {
  (void)vector;
  fakeCq* q = calloc(1, sizeof *q);
  if (!q) return NULL;
  q->ring = calloc((size_t)cqe, sizeof *q->ring);
  q->cap = cqe;
  q->chan = (fakeChan*)ch;
  q->cq.context = ctx;
  q->cq.channel = ch;
  q->cq.cq_context = cqContext;
  q->cq.cqe = cqe;
  pthread_mutex_lock(&fakeLock);
  fakeSt.liveCqs++;
  pthread_mutex_unlock(&fakeLock);
  return &q->cq;
}
static int fDestroyCq(struct ibv_cq* cq) {
  fakeCq* q = (fakeCq*)cq;
  pthread_mutex_lock(&fakeLock);
  if (q->users) violation("ibv_destroy_cq with %d QPs on it", q->users);
  if (q->chan) { /* drop its pending events, as the kernel does */
    fakeChan* ch = q->chan;
    int keep = 0;
    for (int i = 0; i < ch->n; i++) {
      fakeCq* e = ch->ev[(ch->head + i) % CHAN_EVENTS];
      if (e != q) ch->ev[(ch->head + keep++) % CHAN_EVENTS] = e;
      else {
        uint64_t x;
        if (read(ch->ch.fd, &x, sizeof x) < 0) violation("eventfd read failed");
      }
    }
    ch->n = keep;
  }
  fakeSt.liveCqs--;
  pthread_mutex_unlock(&fakeLock);
  free(q->ring);
  free(q);
  return 0;
}
static int fReqNotifyCq(struct ibv_cq* cq, int solicited) {
  (void)solicited;
  pthread_mutex_lock(&fakeLock);
  ((fakeCq*)cq)->armed = 1;
  pthread_mutex_unlock(&fakeLock);
  return 0;
}
static int fGetCqEvent(struct ibv_comp_channel* ch, struct ibv_cq** cq, void** ctx) {
  fakeChan* c = (fakeChan*)ch;
  pthread_mutex_lock(&fakeLock);
  if (c->n == 0) {
    pthread_mutex_unlock(&fakeLock);
    errno = EAGAIN;
    return -1;
  }
  fakeCq* q = c->ev[c->head];
  c->head = (c->head + 1) % CHAN_EVENTS;
  c->n--;
  uint64_t x;
  if (read(ch->fd, &x, sizeof x) < 0) violation("eventfd read failed");
  *cq = &q->cq;
  *ctx = q->cq.cq_context;
  pthread_mutex_unlock(&fakeLock);
  return 0;
}
static void fAckCqEvents(struct ibv_cq* cq, unsigned n) {
  (void)cq;
  pthread_mutex_lock(&fakeLock);
  fakeSt.acks += n;
  pthread_mutex_unlock(&fakeLock);
}
static int fPollCq(struct ibv_cq* cq, int n, struct ibv_wc* wc) {
  fakeCq* q = (fakeCq*)cq;
  pthread_mutex_lock(&fakeLock);
  runQueue();
  int k = 0;
  while (k < n && q->n > 0) {
    wc[k++] = q->ring[q->head];
    q->head = (q->head + 1) % q->cap;
    q->n--;
  }
  pthread_mutex_unlock(&fakeLock);
  return k;
}
static struct ibv_qp* fCreateQp(struct ibv_pd* pd, struct ibv_qp_init_attr* a) {
  if (a->qp_type != IBV_QPT_RC || !a->send_cq || !a->recv_cq) {
    errno = EINVAL;
    return NULL;
  }
  fakeQp* q = calloc(1, sizeof *q);
  if (!q) return NULL;
  q->maxSend = (int)a->cap.max_send_wr;
  q->maxRecv = (int)a->cap.max_recv_wr;
  q->rq = calloc((size_t)q->maxRecv + 1, sizeof *q->rq);
  q->scq = (fakeCq*)a->send_cq;
  q->rcq = (fakeCq*)a->recv_cq;
  q->ctx = (fakeCtx*)pd->context;
  q->state = IBV_QPS_RESET;
  q->qp.context = pd->context;
  q->qp.pd = pd;
  q->qp.qp_context = a->qp_context;
  q->qp.send_cq = a->send_cq;
  q->qp.recv_cq = a->recv_cq;
  q->qp.qp_type = IBV_QPT_RC;
  pthread_mutex_lock(&fakeLock);
  q->qp.qp_num = fakeNextQpn++;
  int i = 0;
  while (i < MAX_QPS && fakeQps[i]) i++;
  if (i == MAX_QPS) {
    pthread_mutex_unlock(&fakeLock);
    free(q->rq);
    free(q);
    errno = ENOMEM;
    return NULL;
  }
  fakeQps[i] = q;
  q->scq->users++;
  q->rcq->users++;
  fakeSt.liveQps++;
  pthread_mutex_unlock(&fakeLock);
  return &q->qp;
}

/* Required masks of RC transitions (IB spec 11.2.4.2 / ibv_modify_qp(3)). */
static int fModifyQp(struct ibv_qp* qp, struct ibv_qp_attr* a, int mask) {
  fakeQp* q = (fakeQp*)qp;
  pthread_mutex_lock(&fakeLock);
  int ok = 1;
  const char* why = "";
  if (!(mask & IBV_QP_STATE)) { ok = 0; why = "no IBV_QP_STATE"; }
  else if (a->qp_state == IBV_QPS_ERR || a->qp_state == IBV_QPS_RESET) {
    if (a->qp_state == IBV_QPS_ERR) qpToError(q);
    else q->state = IBV_QPS_RESET;
    pthread_mutex_unlock(&fakeLock);
    return 0;
  } else if (a->qp_state == IBV_QPS_INIT) {
    int need = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    if (q->state != IBV_QPS_RESET) { ok = 0; why = "INIT from a state other than RESET"; }
    else if ((mask & need) != need) { ok = 0; why = "INIT without PKEY_INDEX|PORT|ACCESS_FLAGS"; }
    else if (!portOf(q->ctx, a->port_num)) { ok = 0; why = "INIT with a bad port"; }
    else { q->port = a->port_num; q->access = a->qp_access_flags; }
  } else if (a->qp_state == IBV_QPS_RTR) {
    int need = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
               IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    const ibFakePort* p = portOf(q->ctx, q->port);
    if (q->state != IBV_QPS_INIT) { ok = 0; why = "RTR from a state other than INIT"; }
    else if ((mask & need) != need) { ok = 0; why = "RTR without AV|PATH_MTU|DEST_QPN|RQ_PSN|MAX_DEST_RD_ATOMIC|MIN_RNR_TIMER"; }
    else if (a->path_mtu > p->mtu) { ok = 0; why = "RTR path MTU above the port's active MTU"; }
    else if (p->linkLayer == IBV_LINK_LAYER_ETHERNET && (!a->ah_attr.is_global || a->ah_attr.grh.sgid_index >= p->ngids)) {
      ok = 0; why = "RTR on RoCE without a GRH / with a bad sgid_index";
    } else if (p->linkLayer == IBV_LINK_LAYER_INFINIBAND && a->ah_attr.dlid == 0) { ok = 0; why = "RTR on IB with dlid 0"; }
    else if (a->rq_psn > 0xffffff || a->dest_qp_num > 0xffffff) { ok = 0; why = "RTR PSN/QPN beyond 24 bits"; }
    else q->rtr = *a;
  } else if (a->qp_state == IBV_QPS_RTS) {
    int need = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
               IBV_QP_MAX_QP_RD_ATOMIC;
    if (q->state != IBV_QPS_RTR) { ok = 0; why = "RTS from a state other than RTR"; }
    else if ((mask & need) != need) { ok = 0; why = "RTS without TIMEOUT|RETRY_CNT|RNR_RETRY|SQ_PSN|MAX_QP_RD_ATOMIC"; }
    else if (a->retry_cnt > 7 || a->rnr_retry > 7 || a->timeout > 31) { ok = 0; why = "RTS with out-of-range retry/timeout"; }
    else q->rts = *a;
  } else {
    ok = 0;
    why = "unsupported target state";
  }
  if (ok) q->state = a->qp_state;
  else violation("ibv_modify_qp(QP %u): %s", qp->qp_num, why);
  pthread_mutex_unlock(&fakeLock);
  if (!ok) { errno = EINVAL; return EINVAL; }
  return 0;
}

static int fDestroyQp(struct ibv_qp* qp) {
  fakeQp* q = (fakeQp*)qp;
  pthread_mutex_lock(&fakeLock);
  for (int i = 0; i < MAX_QPS; i++)
    if (fakeQps[i] == q) fakeQps[i] = NULL;
  q->scq->users--;
  q->rcq->users--;
  fakeSt.liveQps--;
  pthread_mutex_unlock(&fakeLock);
  free(q->rq);
  free(q);
  return 0;
}

static int fPostSend(struct ibv_qp* qp, struct ibv_send_wr* wr, struct ibv_send_wr** bad) {
  fakeQp* q = (fakeQp*)qp;
  pthread_mutex_lock(&fakeLock);
  int e = 0;
  for (; wr; wr = wr->next) {
    if (q->state != IBV_QPS_RTS && q->state != IBV_QPS_ERR) { violation("post_send on QP %u in state %d", qp->qp_num, q->state); e = EINVAL; break; }
    if (wr->num_sge > 1) { violation("post_send with %d SGEs (QP has 1)", wr->num_sge); e = EINVAL; break; }
    if (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM) { violation("post_send opcode %d", wr->opcode); e = EINVAL; break; }
    if (q->sendOut >= q->maxSend) { violation("send queue overflow on QP %u (%d WRs)", qp->qp_num, q->maxSend); e = ENOMEM; break; }
    if (fakeOpsN == fakeOpsCap) {
      size_t cap = fakeOpsCap ? fakeOpsCap * 2 : 1024;
      fakeOp* n = malloc(cap * sizeof *n);
      for (size_t i = 0; i < fakeOpsN; i++) n[i] = fakeOps[(fakeOpsHead + i) % fakeOpsCap];
      free(fakeOps);
      fakeOps = n;
      fakeOpsHead = 0;
      fakeOpsCap = cap;
    }
    fakeOp* op = &fakeOps[(fakeOpsHead + fakeOpsN) % fakeOpsCap];
    memset(op, 0, sizeof *op);
    op->srcQpn = qp->qp_num;
    op->wrId = wr->wr_id;
    op->imm = wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
    op->immData = wr->imm_data;
    op->signaled = (wr->send_flags & IBV_SEND_SIGNALED) != 0;
    if (wr->num_sge == 1) {
      op->laddr = wr->sg_list[0].addr;
      op->len = wr->sg_list[0].length;
      op->lkey = wr->sg_list[0].lkey;
    }
    op->raddr = wr->wr.rdma.remote_addr;
    op->rkey = wr->wr.rdma.rkey;
    fakeOpsN++;
    q->sendOut++;
  }
  if (e && bad) *bad = wr;
  pthread_mutex_unlock(&fakeLock);
  return e;
}

static int fPostRecv(struct ibv_qp* qp, struct ibv_recv_wr* wr, struct ibv_recv_wr** bad) {
  fakeQp* q = (fakeQp*)qp;
  pthread_mutex_lock(&fakeLock);
  int e = 0;
  for (; wr; wr = wr->next) {
    if (q->state == IBV_QPS_RESET) { violation("post_recv on QP %u in RESET", qp->qp_num); e = EINVAL; break; }
    if (q->rqN >= q->maxRecv) { violation("receive queue overflow on QP %u (%d WRs)", qp->qp_num, q->maxRecv); e = ENOMEM; break; }
    if (q->state == IBV_QPS_ERR) {
      struct ibv_wc wc;
      memset(&wc, 0, sizeof wc);
      wc.wr_id = wr->wr_id;
      wc.status = IBV_WC_WR_FLUSH_ERR;
      wc.qp_num = qp->qp_num;
      cqPush(q->rcq, &wc);
      continue;
    }
    q->rq[(q->rqHead + q->rqN) % q->maxRecv] = wr->wr_id;
    q->rqN++;
  }
  if (e && bad) *bad = wr;
  pthread_mutex_unlock(&fakeLock);
  return e;
}

static int fGetAsyncEvent(struct ibv_context* ctx, struct ibv_async_event* ev) {
  fakeCtx* c = (fakeCtx*)ctx;
  pthread_mutex_lock(&fakeLock);
  if (c->nev == 0) {
    pthread_mutex_unlock(&fakeLock);
    errno = EAGAIN;
    return -1;
  }
  *ev = c->ev[0];
  memmove(c->ev, c->ev + 1, (size_t)(--c->nev) * sizeof c->ev[0]);
  uint64_t x;
  if (read(ctx->async_fd, &x, sizeof x) < 0) violation("eventfd read failed");
  pthread_mutex_unlock(&fakeLock);
  return 0;
}
static void fAckAsyncEvent(struct ibv_async_event* ev) { (void)ev; }

static int fReadSysfs(const char* dev, const char* rel, char* buf, size_t len) {
  int port, idx;
  for (int i = 0; i < fakeNdev; i++) {
    const ibFakeDevSpec* s = &fakeDevs[i].spec;
    if (strcmp(s->name, dev) != 0) continue;
    if (sscanf(rel, "ports/%d/gid_attrs/types/%d", &port, &idx) == 2 && port >= 1 && port <= s->nports &&
        idx >= 0 && idx < s->ports[port - 1].ngids && s->ports[port - 1].gids[idx].type) {
      snprintf(buf, len, "%s", s->ports[port - 1].gids[idx].type);
      return 0;
    }
  }
  return -1;
}
static int fPciPath(const char* dev, char* buf, size_t len) {
  for (int i = 0; i < fakeNdev; i++)
    if (strcmp(fakeDevs[i].spec.name, dev) == 0 && fakeDevs[i].spec.pci) {
      snprintf(buf, len, "%s", fakeDevs[i].spec.pci);
      return 0;
    }
  return -1;
}

static collIbvOps fakeOpsTable = {
    .getDeviceList = fGetDeviceList, .freeDeviceList = fFreeDeviceList, .getDeviceName = fGetDeviceName,
    .getDeviceGuid = fGetDeviceGuid, .openDevice = fOpenDevice, .closeDevice = fCloseDevice,
    .queryDevice = fQueryDevice, .queryPort = fQueryPort, .queryGid = fQueryGid, .allocPd = fAllocPd,
    .deallocPd = fDeallocPd, .regMr = fRegMr, .regDmaBufMr = fRegDmaBufMr, .deregMr = fDeregMr, .createCompChannel = fCreateCompChannel,
    .destroyCompChannel = fDestroyCompChannel, .createCq = fCreateCq, .destroyCq = fDestroyCq,
    .reqNotifyCq = fReqNotifyCq, .getCqEvent = fGetCqEvent, .ackCqEvents = fAckCqEvents, .pollCq = fPollCq,
    .createQp = fCreateQp, .modifyQp = fModifyQp, .destroyQp = fDestroyQp, .postSend = fPostSend,
    .postRecv = fPostRecv, .getAsyncEvent = fGetAsyncEvent, .ackAsyncEvent = fAckAsyncEvent,
    .readSysfs = fReadSysfs, .pciPath = fPciPath,
};

/* ---- test controls ---------------------------------------------------------- */

void ibFakeInstall(const ibFakeDevSpec* devs, int n) {
  pthread_mutex_lock(&fakeLock);
  memset(fakeDevs, 0, sizeof fakeDevs);
  fakeNdev = n < MAX_DEVS ? n : MAX_DEVS;
  for (int i = 0; i < fakeNdev; i++) {
    fakeDevs[i].spec = devs[i];
    snprintf(fakeDevs[i].d.name, sizeof fakeDevs[i].d.name, "%s", devs[i].name);
  }
  memset(&fakeSt, 0, sizeof fakeSt);
  fakeOpsN = fakeOpsHead = 0;
  fakeFailCount = 0;
  fakeHeld = 0;
  fakeDmaBufMode = IBFAKE_DMABUF_SUPPORTED;
  fakeOpsTable.regDmaBufMr = fRegDmaBufMr;
  pthread_mutex_unlock(&fakeLock);
  collIbvSetOps(&fakeOpsTable);
}

void ibFakeDmaBuf(int mode) {
  pthread_mutex_lock(&fakeLock);
  fakeDmaBufMode = mode;
  fakeOpsTable.regDmaBufMr = mode == IBFAKE_DMABUF_ABSENT ? NULL : fRegDmaBufMr;
  pthread_mutex_unlock(&fakeLock);
}

void ibFakeUninstall(void) { collIbvSetOps(NULL); }

ibFakeDevSpec ibFakeRxe(const char* name, int host, enum ibv_mtu mtu) {
  ibFakeDevSpec d;
  memset(&d, 0, sizeof d);
  d.name = name;
  d.guid = 0x0200000000000000ull | (uint64_t)host;
  d.pci = NULL;
  d.nports = 1;
  d.ports[0] = ibFakeRocePort(host, mtu);
  return d;
}

ibFakePort ibFakeRocePort(int host, enum ibv_mtu mtu) {
  ibFakePort p;
  memset(&p, 0, sizeof p);
  p.state = IBV_PORT_ACTIVE;
  p.linkLayer = IBV_LINK_LAYER_ETHERNET;
  p.mtu = mtu;
  p.width = 1;
  p.speed = 1;
  p.maxMsg = 1u << 16; /* small, so that tests see messages split */
  p.ngids = 2;
  static const uint8_t ll[8] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0};
  memcpy(p.gids[0].raw, ll, 8);
  p.gids[0].raw[15] = (uint8_t)host;
  p.gids[0].type = "RoCE v2";
  p.gids[1].raw[10] = p.gids[1].raw[11] = 0xff;
  p.gids[1].raw[12] = 198;
  p.gids[1].raw[13] = 18;
  p.gids[1].raw[15] = (uint8_t)host;
  p.gids[1].type = "RoCE v2";
  return p;
}

ibFakePort ibFakeIbPort(uint16_t lid, enum ibv_mtu mtu) {
  ibFakePort p;
  memset(&p, 0, sizeof p);
  p.state = IBV_PORT_ACTIVE;
  p.linkLayer = IBV_LINK_LAYER_INFINIBAND;
  p.mtu = mtu;
  p.width = 2;
  p.speed = 32;
  p.maxMsg = 1u << 30;
  p.lid = lid;
  p.ngids = 1;
  p.gids[0].raw[0] = 0xfe;
  p.gids[0].raw[1] = 0x80;
  p.gids[0].raw[15] = (uint8_t)lid;
  p.gids[0].type = "IB/RoCE v1";
  return p;
}

void ibFakeHold(int hold) {
  pthread_mutex_lock(&fakeLock);
  fakeHeld = hold;
  pthread_mutex_unlock(&fakeLock);
}

void ibFakeFailSends(enum ibv_wc_status status, int count) {
  pthread_mutex_lock(&fakeLock);
  fakeFailStatus = status;
  fakeFailCount = count;
  pthread_mutex_unlock(&fakeLock);
}

void ibFakeAsyncEvent(int dev, enum ibv_event_type type, uint32_t qpn, int port) {
  pthread_mutex_lock(&fakeLock);
  (void)dev;
  fakeQp* q = qpn ? qpByNum(qpn) : NULL;
  struct ibv_async_event ev;
  memset(&ev, 0, sizeof ev);
  ev.event_type = type;
  if (q) {
    ev.element.qp = &q->qp;
    if (type == IBV_EVENT_QP_FATAL) qpToError(q);
  } else {
    ev.element.port_num = port;
    if (type == IBV_EVENT_PORT_ERR) fakeDevs[dev].spec.ports[port - 1].state = IBV_PORT_DOWN;
  }
  /* deliver to every open context of dev: the first QP's, or any */
  fakeCtx* c = q ? q->ctx : NULL;
  if (!c)
    for (int i = 0; i < MAX_QPS && !c; i++)
      if (fakeQps[i] && fakeQps[i]->ctx->dev == dev) c = fakeQps[i]->ctx;
  if (c && c->nev < 64) {
    c->ev[c->nev++] = ev;
    uint64_t one = 1;
    if (write(c->ctx.async_fd, &one, sizeof one) < 0) violation("eventfd write failed");
  }
  pthread_mutex_unlock(&fakeLock);
}

int ibFakeGetQp(uint32_t qpn, ibFakeQpInfo* out) {
  pthread_mutex_lock(&fakeLock);
  fakeQp* q = qpByNum(qpn);
  if (q) {
    out->state = q->state;
    out->port = q->port;
    out->rtr = q->rtr;
    out->rts = q->rts;
    out->writes = q->writes;
    out->records = q->records;
    out->maxSendWr = q->maxSend;
    out->maxRecvWr = q->maxRecv;
  }
  pthread_mutex_unlock(&fakeLock);
  return q ? 0 : -1;
}

void ibFakeGetStats(ibFakeStats* st) {
  pthread_mutex_lock(&fakeLock);
  *st = fakeSt;
  pthread_mutex_unlock(&fakeLock);
}
