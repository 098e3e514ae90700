/*
 * ib_connect.c - connection setup of the ib transport.
 *
 * listen opens a TCP socket (the side channel) on coll's interface; the
 * handle carries its address. connect creates the sender's CQ, QPs (INIT)
 * and control memory, connects the socket and sends its collIbInfo; it
 * returns the comm at once (state IB_CONNECTING) and the owner's later calls
 * finish the handshake: read the listener's info, move the QPs to RTR and RTS
 * (path MTU = the smaller of both ports', the peer's QPNs, PSN and GID or
 * LID), then send 'R'. The listener's side runs in collIbService, from any
 * thread that calls into the transport (accept, test, getPollFd), so that two
 * ranks that both connect before they accept cannot wait on each other:
 * accept the socket, read the info, create the receiver's QPs and bring them
 * to RTS, reply, and queue the comm for accept. The receiver writes no CTS
 * until the 'R' arrived (the sender's QPs are then ready for them).
 *
 * Afterwards the socket carries nothing; a waiting comm polls it every
 * IB_CHECK_S for the peer's close (a dead peer's kernel closes it), so a lost
 * peer is an error within milliseconds, not after the QP retry timeout.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <unistd.h>

#include "ib_internal.h"
#include "misc/log.h"
#include "misc/param.h"

collResult_t collIbFail(collIbComm* c, collResult_t code, const char* fmt, ...) {
  if (c->err != collSuccess) return c->err; /* keep the first cause */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->errMsg, sizeof c->errMsg, fmt, ap);
  va_end(ap);
  return c->err = code;
}

/* ---- wire format checks (pure) -------------------------------------------- */

int collIbHandleParse(const void* buf, size_t len, collIbHandle* out, char* why, size_t whyLen) {
  if (!buf || len < sizeof *out) {
    snprintf(why, whyLen, "handle too short (%zu bytes)", len);
    return -1;
  }
  memcpy(out, buf, sizeof *out);
  if (out->magic != IB_HANDLE_MAGIC) {
    snprintf(why, whyLen, "not an ib handle (bad magic)");
    return -1;
  }
  int fam = out->addr.sa.sa_family;
  if (fam != AF_INET && fam != AF_INET6) {
    snprintf(why, whyLen, "ib handle with address family %d", fam);
    return -1;
  }
  return 0;
}

int collIbInfoParse(const void* buf, size_t len, collIbInfo* out, char* why, size_t whyLen) {
  if (!buf || len != sizeof *out) {
    snprintf(why, whyLen, "connection info of %zu bytes, want %zu", len, sizeof *out);
    return -1;
  }
  memcpy(out, buf, sizeof *out);
  out->host[sizeof out->host - 1] = 0;
  const char* bad = NULL;
  if (out->magic != IB_INFO_MAGIC) bad = "bad magic (not a coll ib peer)";
  else if (out->version != IB_INFO_VERSION) bad = "protocol version differs (mixed coll versions)";
  else if (out->linkLayer != IBV_LINK_LAYER_INFINIBAND && out->linkLayer != IBV_LINK_LAYER_ETHERNET)
    bad = "unknown link layer";
  else if (out->mtu < IBV_MTU_256 || out->mtu > IBV_MTU_4096) bad = "MTU out of range";
  else if (out->nqps < 1 || out->nqps > IB_MAX_QPS) bad = "QP count out of range";
  else if (out->depth != IB_DEPTH || out->eager != IB_EAGER) bad = "FIFO depth or slot size differs";
  else if (out->psn > 0xffffff) bad = "PSN beyond 24 bits";
  else if (out->addr == 0) bad = "no control memory address";
  for (int i = 0; !bad && i < out->nqps; i++)
    if (out->qpn[i] == 0 || out->qpn[i] > 0xffffff) bad = "QP number out of range";
  if (bad) {
    snprintf(why, whyLen, "%s", bad);
    return -1;
  }
  for (size_t i = 0; out->host[i]; i++)
    if (out->host[i] < 0x20 || out->host[i] > 0x7e) out->host[i] = '?';
  return 0;
}

/* ---- comm resources ------------------------------------------------------- */

static void randomPsn(uint32_t* psn) {
  uint32_t r = 0;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) r = (uint32_t)getpid() * 2654435761u;
  *psn = r & 0xffffff;
}

/* Moves QP i to INIT. */
static int qpInit(collIbComm* c, int i) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = (uint8_t)c->dev->port;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  return collIb.v->modifyQp(c->qp[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

/* INIT -> RTR -> RTS of QP i against the peer's info. */
static collResult_t qpConnect(collIbComm* c, int i) {
  const collIbvOps* v = collIb.v;
  collIbDev* d = c->dev;
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = c->mine.mtu < c->peer.mtu ? (enum ibv_mtu)c->mine.mtu : (enum ibv_mtu)c->peer.mtu;
  a.dest_qp_num = c->peer.qpn[i];
  a.rq_psn = c->peer.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = (uint8_t)d->port;
  a.ah_attr.sl = (uint8_t)collIbCfg.sl;
  if (d->linkLayer == IBV_LINK_LAYER_ETHERNET) {
    a.ah_attr.is_global = 1;
    memcpy(a.ah_attr.grh.dgid.raw, c->peer.gid, 16);
    a.ah_attr.grh.sgid_index = (uint8_t)d->gidIndex;
    a.ah_attr.grh.hop_limit = 255;
    a.ah_attr.grh.traffic_class = (uint8_t)collIbCfg.tc;
  } else {
    a.ah_attr.dlid = c->peer.lid;
  }
  if (v->modifyQp(c->qp[i], &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0) {
    char g[64];
    return collIbFail(c, collSystemError,
                      "ib: QP %u on %s:%d to RTR with %s failed: %s (peer QP %u, %s %s, MTU %s; check "
                      "COLL_IB_GID_INDEX and that both ports are on one network)",
                      c->qp[i]->qp_num, d->name, d->port, c->peerDesc, strerror(errno), c->peer.qpn[i],
                      d->linkLayer == IBV_LINK_LAYER_ETHERNET ? "GID" : "LID",
                      d->linkLayer == IBV_LINK_LAYER_ETHERNET ? collIbGidStr(c->peer.gid, g, sizeof g) : "",
                      collIbMtuStr(a.path_mtu));
  }
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.timeout = (uint8_t)collIbCfg.timeout;
  a.retry_cnt = (uint8_t)collIbCfg.retryCnt;
  a.rnr_retry = 7;
  a.sq_psn = c->mine.psn;
  a.max_rd_atomic = 1;
  if (v->modifyQp(c->qp[i], &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                    IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) != 0)
    return collIbFail(c, collSystemError, "ib: QP %u on %s:%d to RTS failed: %s", c->qp[i]->qp_num, d->name,
                      d->port, strerror(errno));
  return collSuccess;
}

/* Frees everything of a comm (QPs, CQ, memory, socket); the comm must be off
 * the global list. */
static void freeComm(collIbComm* c) {
  const collIbvOps* v = collIb.v;
  for (int k = 0; k < IB_DEPTH; k++)
    if (c->reqs[k].reg) collRegCachePut(c->dev->hca->reg, c->reqs[k].reg);
  for (int i = 0; i < c->nqps; i++)
    if (c->qp[i]) v->destroyQp(c->qp[i]);
  if (c->cq) v->destroyCq(c->cq);
  if (c->ctrlMr) v->deregMr(c->ctrlMr);
  free(c->ctrl);
  if (c->sock >= 0) close(c->sock);
  free(c);
}

/* A comm with CQ, nqps QPs in INIT with their receive WRs, and control
 * memory; mine filled. Caller holds collIb.lock. */
static collResult_t newComm(collIbDev* d, int isSend, int nqps, int sock, collIbComm** out) {
  const collIbvOps* v = collIb.v;
  collIbComm* c = calloc(1, sizeof *c);
  if (!c) return collSetError(collSystemError, "ib: out of memory for a connection");
  c->tag = isSend ? IB_TAG_SEND : IB_TAG_RECV;
  c->isSend = isSend;
  c->dev = d;
  c->sock = sock;
  c->nqps = nqps;
  collResult_t r = collSuccess;
  int cqe = nqps * (IB_SQ_DEPTH + IB_RQ_DEPTH) + 16;
  if (cqe > d->hca->attr.max_cqe && d->hca->attr.max_cqe > 0) cqe = d->hca->attr.max_cqe;
  c->ctrlBytes = (size_t)IB_DEPTH * (sizeof(collIbCts) + IB_SLOT + sizeof(collIbRts));
  if (posix_memalign((void**)&c->ctrl, 4096, c->ctrlBytes) != 0) {
    c->ctrl = NULL;
    r = collSetError(collSystemError, "ib: out of memory for a connection");
    goto fail;
  }
  memset(c->ctrl, 0, c->ctrlBytes);
  c->ctrlMr = v->regMr(d->hca->pd, c->ctrl, c->ctrlBytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!c->ctrlMr) {
    r = collSetError(collSystemError, "ib: ibv_reg_mr of %zu bytes on %s failed: %s%s", c->ctrlBytes, d->name,
                     strerror(errno), errno == ENOMEM ? " (locked-memory limit: ulimit -l)" : "");
    goto fail;
  }
  c->cq = v->createCq(d->hca->ctx, cqe, c, d->hca->chan, 0);
  if (!c->cq) {
    r = collSetError(collSystemError, "ib: ibv_create_cq (%d entries) on %s failed: %s", cqe, d->name,
                     strerror(errno));
    goto fail;
  }
  for (int i = 0; i < nqps; i++) {
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof ia);
    ia.qp_context = c;
    ia.send_cq = ia.recv_cq = c->cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = IB_SQ_DEPTH;
    ia.cap.max_recv_wr = IB_RQ_DEPTH;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    c->qp[i] = v->createQp(d->hca->pd, &ia);
    if (!c->qp[i]) {
      r = collSetError(collSystemError, "ib: ibv_create_qp on %s failed: %s", d->name, strerror(errno));
      goto fail;
    }
    if (qpInit(c, i) != 0) {
      r = collSetError(collSystemError, "ib: QP %u on %s:%d to INIT failed: %s", c->qp[i]->qp_num, d->name,
                       d->port, strerror(errno));
      goto fail;
    }
    if (collIbPostRecvs(c, i, IB_RQ_DEPTH) != 0) {
      r = collSetError(collSystemError, "ib: ibv_post_recv on %s failed: %s", d->name, strerror(errno));
      goto fail;
    }
  }
  collIbInfo* m = &c->mine;
  m->magic = IB_INFO_MAGIC;
  m->version = IB_INFO_VERSION;
  m->linkLayer = (uint8_t)d->linkLayer;
  m->mtu = (uint8_t)d->mtu;
  m->nqps = (uint16_t)nqps;
  m->lid = d->lid;
  memcpy(m->gid, d->gid.raw, 16);
  randomPsn(&m->psn);
  m->depth = IB_DEPTH;
  m->eager = IB_EAGER;
  m->rkey = c->ctrlMr->rkey;
  /* send: remote-writable CTS FIFO first; recv: record slots after the CTS sources */
  m->addr = (uint64_t)(uintptr_t)(isSend ? c->ctrl : c->ctrl + IB_DEPTH * sizeof(collIbCts));
  for (int i = 0; i < nqps; i++) m->qpn[i] = c->qp[i]->qp_num;
  snprintf(m->host, sizeof m->host, "%s", collHostName());
  *out = c;
  return collSuccess;
fail:
  c->sock = -1; /* the caller keeps its socket */
  freeComm(c);
  return r;
}

static void describePeer(collIbComm* c) {
  snprintf(c->peerDesc, sizeof c->peerDesc, "%s (%s)", c->peer.host[0] ? c->peer.host : "?", c->peerAddr);
}

/* Takes the peer's info (parsed) into c and connects the QPs. */
static collResult_t takePeer(collIbComm* c) {
  collIbDev* d = c->dev;
  if (c->peer.linkLayer != d->linkLayer)
    return collIbFail(c, collSystemError, "ib: %s uses %s, %s:%d uses %s: the ports cannot talk", c->peerDesc,
                      c->peer.linkLayer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand", d->name, d->port,
                      d->linkLayer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand");
  if (c->peer.nqps != c->nqps)
    return collIbFail(c, collSystemError, "ib: %s has %d QPs for this connection, we have %d", c->peerDesc,
                      c->peer.nqps, c->nqps);
  c->remAddr = c->peer.addr;
  c->remKey = c->peer.rkey;
  for (int i = 0; i < c->nqps; i++) {
    collResult_t r = qpConnect(c, i);
    if (r != collSuccess) return r;
  }
  char g[64];
  COLL_TRACE(COLL_SUB_NET, "ib: %s comm with %s on %s:%d: %d QP(s) %u.., peer QP %u.., MTU %s, %s %s",
             c->isSend ? "send" : "recv", c->peerDesc, d->name, d->port, c->nqps, c->qp[0]->qp_num,
             c->peer.qpn[0], collIbMtuStr(c->mine.mtu < c->peer.mtu ? c->mine.mtu : c->peer.mtu),
             d->linkLayer == IBV_LINK_LAYER_ETHERNET ? "GID" : "LID",
             d->linkLayer == IBV_LINK_LAYER_ETHERNET ? collIbGidStr(c->peer.gid, g, sizeof g) : "");
  return collSuccess;
}

static void addComm(collIbComm* c) {
  c->next = collIb.comms;
  collIb.comms = c;
}
static void dropComm(collIbComm* c) {
  for (collIbComm** p = &collIb.comms; *p; p = &(*p)->next)
    if (*p == c) {
      *p = c->next;
      return;
    }
}

/* ---- listen / connect / accept -------------------------------------------- */

collResult_t collIbListenFn(int dev, void* handle, void** listenComm) {
  if (!handle || !listenComm) return collSetError(collInvalidArgument, "ib listen: NULL argument");
  *listenComm = NULL;
  pthread_mutex_lock(&collIb.lock);
  collResult_t r = collSuccess;
  if (!collIb.ready || dev < 0 || dev >= collIb.ndev) {
    r = collSetError(collInvalidArgument, "ib listen: device %d does not exist (%d devices)", dev,
                     collIb.ready ? collIb.ndev : 0);
    goto out;
  }
  char ifn[64];
  collSockAddr a;
  if ((r = collSocketFindInterface(&a, ifn, sizeof ifn)) != collSuccess) {
    r = collSetError(r, "ib listen: no interface for the side channel: %s", collLastErrorMessage());
    goto out;
  }
  collIbListen* l = calloc(1, sizeof *l);
  if (!l) {
    r = collSetError(collSystemError, "ib listen: out of memory");
    goto out;
  }
  l->tag = IB_TAG_LISTEN;
  l->epKind = IB_EP_LISTEN;
  l->dev = &collIb.devs[dev];
  l->addr = a;
  if ((r = collSocketListen(&l->addr, &l->fd)) != collSuccess) {
    free(l);
    goto out;
  }
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &l->epKind};
  epoll_ctl(collIb.epfd, EPOLL_CTL_ADD, l->fd, &ev);
  l->next = collIb.listens;
  collIb.listens = l;
  collIbHandle h = {IB_HANDLE_MAGIC, l->addr, 0};
  memset(handle, 0, COLL_NET_HANDLE_BYTES);
  memcpy(handle, &h, sizeof h);
  *listenComm = l;
out:
  pthread_mutex_unlock(&collIb.lock);
  return r;
}

collResult_t collIbConnectFn(int dev, const void* handle, void** sendComm) {
  if (!handle || !sendComm) return collSetError(collInvalidArgument, "ib connect: NULL argument");
  *sendComm = NULL;
  collIbHandle h;
  char why[128];
  if (collIbHandleParse(handle, COLL_NET_HANDLE_BYTES, &h, why, sizeof why) != 0)
    return collSetError(collInvalidArgument, "ib connect: %s", why);
  pthread_mutex_lock(&collIb.lock);
  int ok = collIb.ready && dev >= 0 && dev < collIb.ndev;
  int ndev = collIb.ready ? collIb.ndev : 0;
  pthread_mutex_unlock(&collIb.lock);
  if (!ok) return collSetError(collInvalidArgument, "ib connect: device %d does not exist (%d devices)", dev, ndev);
  double deadline = collTimeNow() + (double)collParamInt(COLL_PARAM_CONNECT_RETRY_MS) * 1e-3;
  int fd = -1;
  collResult_t r = collSocketConnect(&h.addr, &fd, deadline, NULL);
  if (r != collSuccess) return r;
  int nq = collIbCfg.nqps < 1 ? 1 : collIbCfg.nqps > IB_MAX_QPS ? IB_MAX_QPS : collIbCfg.nqps;
  collIbComm* c = NULL;
  pthread_mutex_lock(&collIb.lock);
  r = newComm(&collIb.devs[dev], 1, nq, fd, &c);
  if (r == collSuccess) addComm(c);
  pthread_mutex_unlock(&collIb.lock);
  if (r != collSuccess) {
    close(fd);
    return r;
  }
  char as[80];
  snprintf(c->peerAddr, sizeof c->peerAddr, "%s", collSockAddrStr(&h.addr, as, sizeof as));
  describePeer(c);
  r = collSocketSendAll(fd, &c->mine, sizeof c->mine, collTimeNow() + IB_HANDSHAKE_S, NULL);
  if (r != collSuccess) {
    collIbCloseComm(c);
    return collSetError(r, "ib connect to %s: sending the connection info failed: %s", as, collLastErrorMessage());
  }
  *sendComm = c;
  return collSuccess;
}

collResult_t collIbHandshake(collIbComm* c) {
  if (c->isSend && atomic_load_explicit(&c->state, memory_order_acquire) == IB_CONNECTING) {
    while (c->peerGot < sizeof c->peer) {
      ssize_t n = recv(c->sock, (char*)&c->peer + c->peerGot, sizeof c->peer - c->peerGot, MSG_DONTWAIT);
      if (n > 0) { c->peerGot += (size_t)n; continue; }
      if (n == 0) return collIbFail(c, collRemoteError, "ib: %s closed the connection during the handshake", c->peerDesc);
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return collSuccess;
      return collIbFail(c, collRemoteError, "ib: handshake with %s failed: %s", c->peerDesc, strerror(errno));
    }
    char why[128];
    collIbInfo got;
    if (collIbInfoParse(&c->peer, sizeof c->peer, &got, why, sizeof why) != 0)
      return collIbFail(c, collRemoteError, "ib: %s sent a bad connection info: %s", c->peerDesc, why);
    c->peer = got;
    describePeer(c);
    collResult_t r = takePeer(c);
    if (r != collSuccess) return r;
    char ready = 'R';
    if (send(c->sock, &ready, 1, MSG_NOSIGNAL) != 1)
      return collIbFail(c, collRemoteError, "ib: %s closed the connection during the handshake", c->peerDesc);
    atomic_store_explicit(&c->state, IB_CONNECTED, memory_order_release);
  } else if (!c->isSend && atomic_load_explicit(&c->state, memory_order_acquire) == IB_WAIT_READY) {
    char b = 0;
    ssize_t n = recv(c->sock, &b, 1, MSG_DONTWAIT);
    if (n == 1 && b == 'R') atomic_store_explicit(&c->state, IB_CONNECTED, memory_order_release);
    else if (n == 1) return collIbFail(c, collRemoteError, "ib: %s sent garbage on the side channel", c->peerDesc);
    else if (n == 0) return collIbFail(c, collRemoteError, "ib: %s closed the connection during the handshake", c->peerDesc);
    else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return collIbFail(c, collRemoteError, "ib: handshake with %s failed: %s", c->peerDesc, strerror(errno));
  }
  return collSuccess;
}

/* Listener side of one incoming connection whose info arrived (lock held). */
static void finishPending(collIbListen* l, collIbPending* p) {
  char why[128];
  collIbInfo info;
  if (collIbInfoParse(&p->info, sizeof p->info, &info, why, sizeof why) != 0) {
    COLL_WARN(COLL_SUB_NET, "ib: dropped a connection from %s: %s", p->addr, why);
    close(p->fd);
    return;
  }
  if (l->nready == IB_DEPTH) {
    COLL_WARN(COLL_SUB_NET, "ib: dropped a connection from %s: %d connections wait to be accepted", p->addr, IB_DEPTH);
    close(p->fd);
    return;
  }
  collIbComm* c = NULL;
  collResult_t r = newComm(l->dev, 0, info.nqps, p->fd, &c);
  if (r != collSuccess) {
    COLL_WARN(COLL_SUB_NET, "ib: connection from %s: %s", p->addr, collLastErrorMessage());
    close(p->fd);
    return;
  } /* from here the comm owns the socket */
  c->peer = info;
  snprintf(c->peerAddr, sizeof c->peerAddr, "%s", p->addr);
  describePeer(c);
  atomic_store(&c->state, IB_WAIT_READY);
  if (takePeer(c) != collSuccess ||
      collSocketSendAll(c->sock, &c->mine, sizeof c->mine, collTimeNow() + IB_HANDSHAKE_S, NULL) != collSuccess) {
    COLL_WARN(COLL_SUB_NET, "ib: connection from %s failed: %s", p->addr,
              c->err != collSuccess ? c->errMsg : collLastErrorMessage());
    freeComm(c);
    return;
  }
  addComm(c);
  l->ready[l->nready++] = c;
}

static void dropPending(collIbListen* l, collIbPending* p, int closeFd) {
  for (collIbPending** q = &l->pending; *q; q = &(*q)->next)
    if (*q == p) {
      *q = p->next;
      break;
    }
  epoll_ctl(collIb.epfd, EPOLL_CTL_DEL, p->fd, NULL);
  if (closeFd) close(p->fd);
  free(p);
}

/* Reads what arrived on one pending connection (lock held). */
static void readPending(collIbPending* p) {
  collIbListen* l = p->l;
  for (;;) {
    ssize_t n = recv(p->fd, (char*)&p->info + p->got, sizeof p->info - p->got, MSG_DONTWAIT);
    if (n > 0) {
      p->got += (size_t)n;
      if (p->got == sizeof p->info) {
        epoll_ctl(collIb.epfd, EPOLL_CTL_DEL, p->fd, NULL);
        finishPending(l, p);
        p->fd = -1;
        dropPending(l, p, 0);
        return;
      }
      continue;
    }
    if (n < 0 && (errno == EINTR)) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    COLL_WARN(COLL_SUB_NET, "ib: connection from %s closed before its info arrived", p->addr);
    dropPending(l, p, 1);
    return;
  }
}

/* Accepts what waits on a listen socket (lock held). */
static void acceptAll(collIbListen* l) {
  for (;;) {
    collSockAddr a;
    socklen_t al = sizeof a;
    int fd = accept4(l->fd, &a.sa, &al, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;
    }
    collIbPending* p = calloc(1, sizeof *p);
    if (!p) {
      close(fd);
      return;
    }
    p->epKind = IB_EP_PENDING;
    p->l = l;
    p->fd = fd;
    p->deadline = collTimeNow() + IB_HANDSHAKE_S;
    collSockAddrStr(&a, p->addr, sizeof p->addr);
    p->next = l->pending;
    l->pending = p;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &p->epKind};
    epoll_ctl(collIb.epfd, EPOLL_CTL_ADD, fd, &ev);
    readPending(p);
  }
}

static void failAllOn(collIbDev* d, collIbHca* h, const char* what) {
  for (collIbComm* c = collIb.comms; c; c = c->next)
    if ((d && c->dev == d) || (h && c->dev->hca == h)) {
      if (!atomic_load(&c->failed)) {
        snprintf(c->failMsg, sizeof c->failMsg, "ib: %s (%s:%d), connection with %s lost", what, c->dev->name,
                 c->dev->port, c->peerDesc);
        atomic_store_explicit(&c->failed, 1, memory_order_release);
      }
    }
}

/* One async event of an HCA (lock held). */
static void asyncEvent(collIbHca* h) {
  struct ibv_async_event ev;
  while (collIb.v->getAsyncEvent(h->ctx, &ev) == 0) {
    const char* what = collIbvEventStr(ev.event_type);
    switch (ev.event_type) {
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR: {
        collIbComm* c = ev.element.qp ? ev.element.qp->qp_context : NULL;
        for (collIbComm* k = collIb.comms; k; k = k->next)
          if (k == c && !atomic_load(&k->failed)) {
            snprintf(k->failMsg, sizeof k->failMsg, "ib: async event '%s' on QP %u (%s:%d), connection with %s",
                     what, ev.element.qp->qp_num, k->dev->name, k->dev->port, k->peerDesc);
            atomic_store_explicit(&k->failed, 1, memory_order_release);
          }
        COLL_WARN(COLL_SUB_NET, "ib: %s: async event '%s' on QP %u", h->name, what,
                  ev.element.qp ? ev.element.qp->qp_num : 0);
        break;
      }
      case IBV_EVENT_PORT_ERR:
        COLL_WARN(COLL_SUB_NET, "ib: %s:%d: port error (link down)", h->name, ev.element.port_num);
        for (int i = 0; i < collIb.ndev; i++)
          if (collIb.devs[i].hca == h && collIb.devs[i].port == ev.element.port_num) {
            collIb.devs[i].down = 1;
            failAllOn(&collIb.devs[i], NULL, "port went down");
          }
        break;
      case IBV_EVENT_DEVICE_FATAL:
        COLL_WARN(COLL_SUB_NET, "ib: %s: device fatal error", h->name);
        h->fatal = 1;
        failAllOn(NULL, h, "device fatal error");
        break;
      case IBV_EVENT_PORT_ACTIVE:
        for (int i = 0; i < collIb.ndev; i++)
          if (collIb.devs[i].hca == h && collIb.devs[i].port == ev.element.port_num) collIb.devs[i].down = 0;
        COLL_INFO(COLL_SUB_NET, "ib: %s:%d: port active", h->name, ev.element.port_num);
        break;
      default:
        COLL_INFO(COLL_SUB_NET, "ib: %s: async event '%s'", h->name, what);
    }
    collIb.v->ackAsyncEvent(&ev);
  }
}

/* Completion events: ack them and mark the CQs unarmed (lock held). */
static void drainChannel(collIbHca* h) {
  struct ibv_cq* cq;
  void* ctx;
  while (collIb.v->getCqEvent(h->chan, &cq, &ctx) == 0) {
    collIb.v->ackCqEvents(cq, 1);
    if (ctx) atomic_store_explicit(&((collIbComm*)ctx)->armed, 0, memory_order_release);
  }
}

void collIbService(int wait) {
  if (wait) pthread_mutex_lock(&collIb.lock);
  else if (pthread_mutex_trylock(&collIb.lock) != 0) return;
  if (!collIb.ready) {
    pthread_mutex_unlock(&collIb.lock);
    return;
  }
  struct epoll_event evs[32];
  int n = epoll_wait(collIb.epfd, evs, 32, 0);
  for (int i = 0; i < n; i++) {
    int* kind = evs[i].data.ptr;
    switch (*kind) {
      case IB_EP_WAKE: {
        uint64_t x;
        if (read(collIb.wakeFd, &x, sizeof x) < 0) { /* already cleared */ }
        break;
      }
      case IB_EP_CHAN: drainChannel((collIbHca*)((char*)kind - offsetof(collIbHca, epKind))); break;
      case IB_EP_ASYNC: asyncEvent((collIbHca*)((char*)kind - offsetof(collIbHca, epKind[1]))); break;
      case IB_EP_LISTEN: acceptAll((collIbListen*)((char*)kind - offsetof(collIbListen, epKind))); break;
      case IB_EP_PENDING: readPending((collIbPending*)((char*)kind - offsetof(collIbPending, epKind))); break;
      default: break;
    }
  }
  /* handshakes that stalled */
  double now = collTimeNow();
  for (collIbListen* l = collIb.listens; l; l = l->next)
    for (collIbPending *p = l->pending, *nx; p; p = nx) {
      nx = p->next;
      if (now > p->deadline) {
        COLL_WARN(COLL_SUB_NET, "ib: dropped a connection from %s: no connection info within %.0f s", p->addr,
                  IB_HANDSHAKE_S);
        dropPending(l, p, 1);
      }
    }
  pthread_mutex_unlock(&collIb.lock);
}

collResult_t collIbAcceptFn(void* listenComm, void** recvComm) {
  collIbListen* l = listenComm;
  if (!l || !recvComm || l->tag != IB_TAG_LISTEN) return collSetError(collInvalidArgument, "ib accept: bad argument");
  *recvComm = NULL;
  collIbService(1);
  pthread_mutex_lock(&collIb.lock);
  if (l->nready > 0) {
    *recvComm = l->ready[0];
    memmove(l->ready, l->ready + 1, (size_t)(--l->nready) * sizeof l->ready[0]);
  }
  pthread_mutex_unlock(&collIb.lock);
  return collSuccess;
}

collResult_t collIbCloseComm(void* comm) {
  collIbComm* c = comm;
  if (!c) return collSuccess;
  if (c->tag != IB_TAG_SEND && c->tag != IB_TAG_RECV) return collSetError(collInvalidArgument, "ib close: not an ib comm");
  collIbDrain(c, IB_GONE_GRACE_S);
  pthread_mutex_lock(&collIb.lock);
  dropComm(c);
  c->tag = 0;
  freeComm(c);
  pthread_mutex_unlock(&collIb.lock);
  return collSuccess;
}

collResult_t collIbCloseListenFn(void* listenComm) {
  collIbListen* l = listenComm;
  if (!l) return collSuccess;
  if (l->tag != IB_TAG_LISTEN) return collSetError(collInvalidArgument, "ib closeListen: not an ib listen comm");
  pthread_mutex_lock(&collIb.lock);
  for (collIbListen** p = &collIb.listens; *p; p = &(*p)->next)
    if (*p == l) {
      *p = l->next;
      break;
    }
  while (l->pending) dropPending(l, l->pending, 1);
  for (int i = 0; i < l->nready; i++) {
    dropComm(l->ready[i]);
    freeComm(l->ready[i]);
  }
  epoll_ctl(collIb.epfd, EPOLL_CTL_DEL, l->fd, NULL);
  close(l->fd);
  l->tag = 0;
  free(l);
  pthread_mutex_unlock(&collIb.lock);
  return collSuccess;
}
