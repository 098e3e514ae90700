/*
 * conn.c - lazy connection setup between ranks, one connection per (peer,
 * channel, direction). The sender connects to the receiver's listener (its
 * handle came with the peer info at init) and sends a hello {magic, secret,
 * rank, channel}; the receiver accepts, checks the secret, and files the
 * connection under the rank and channel it names, so connections may arrive
 * in any order. Senders never wait on their peer, so ranks that connect all
 * their sends before accepting their receives cannot deadlock.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/mailbox.h"
#include "misc/log.h"
#include "misc/socket.h"

#define COLL_CONN_MAGIC 0xc011c044u

typedef struct {
  uint32_t magic;
  int32_t rank;
  int32_t channel;
  int32_t pad;
  uint64_t secret;
} collConnHello;

int collConnHelloValid(const void* buf, size_t len, uint64_t secret, int nranks, int nchannels, int* rank,
                       int* channel) {
  collConnHello h;
  if (len != sizeof h) return 0;
  memcpy(&h, buf, sizeof h);
  if (h.magic != COLL_CONN_MAGIC || h.secret != secret || h.rank < 0 || h.rank >= nranks || h.channel < 0 ||
      h.channel >= nchannels)
    return 0;
  *rank = h.rank;
  *channel = h.channel;
  return 1;
}

/* Waits for one transport request with the comm's deadline and abort flag. */
static collResult_t collConnWait(collComm_t comm, const collNet_v2_t* net, void* req, size_t* size,
                                 double deadline) {
  int done = 0;
  while (!done) {
    collResult_t r = net->test(req, &done, size, NULL);
    if (r != collSuccess) return r;
    if (comm->abortFlag) return collSetError(collRemoteError, "communicator aborted");
    if (deadline > 0 && collTimeNow() > deadline) return collSetError(collTimeout, "connection handshake timed out");
  }
  return collSuccess;
}

static double collConnDeadline(collComm_t comm) {
  return comm->timeoutSec > 0 ? collTimeNow() + comm->timeoutSec : 0;
}

/* While we wait for `peer` to connect, is it still there? A peer that
 * marked itself failed in the shared-memory mailbox, a peer on this
 * host whose process is gone (kill(pid, 0) fails with ESRCH), or any
 * established connection with it that the other side closed (POLLRDHUP,
 * POLLHUP, POLLERR on its fd), means it will never connect: a peer that
 * died, or one that failed and closed everything. Returns 1 if gone. */
static int collConnPeerGone(collComm_t comm, int peer) {
  if (collMailboxPeerFailed(comm, peer)) return 1;
  if (comm->peers[peer].hostHash == comm->peers[comm->rank].hostHash && comm->peers[peer].pid > 0 &&
      kill(comm->peers[peer].pid, 0) != 0 && errno == ESRCH)
    return 1;
  const collNet_v2_t* net = collPeerNet(comm, peer);
  for (int c = 0; c < comm->maxChannels; c++) {
    collConn* k = &comm->conns[c * comm->nranks + peer];
    void* ends[2] = {k->sendComm, k->recvComm};
    for (int e = 0; e < 2; e++) {
      int fd = -1;
      if (!ends[e] || net->getPollFd(ends[e], &fd) != collSuccess || fd < 0) continue;
      struct pollfd pfd = {fd, POLLRDHUP, 0};
      if (poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR))) return 1;
    }
  }
  return 0;
}

collResult_t collEngineSendConn(collComm_t comm, int peer, int channel, void** out) {
  collConn* c = &comm->conns[channel * comm->nranks + peer];
  if (c->sendComm) { *out = c->sendComm; return collSuccess; }
  /* a peer known to be gone never accepts (tcp would retry its closed
   * listener for COLL_CONNECT_TIMEOUT_MS) */
  if (collConnPeerGone(comm, peer))
    return collSetError(collRemoteError, "rank %d: rank %d (%s, pid %d) is gone (process exited or failed): not "
                        "connecting to it on channel %d", comm->rank, peer, comm->peers[peer].host,
                        comm->peers[peer].pid, channel);
  double deadline = collConnDeadline(comm);
  const collNet_v2_t* net = collPeerNet(comm, peer);
  void* sc = NULL;
  while (!sc) {
    collResult_t r = net->connect(comm->netDev, comm->peers[peer].netHandle[comm->peerKind[peer]], &sc);
    if (r != collSuccess)
      return collSetError(r, "rank %d: cannot connect to rank %d on %s (channel %d): %s", comm->rank, peer,
                          comm->peers[peer].host, channel, collLastErrorMessage());
    if (comm->abortFlag) return collSetError(collRemoteError, "communicator aborted");
    if (!sc && deadline > 0 && collTimeNow() > deadline)
      return collSetError(collTimeout, "rank %d: connecting to rank %d (%s) timed out after %d s (COLL_TIMEOUT)",
                          comm->rank, peer, comm->peers[peer].host, comm->timeoutSec);
  }
  collConnHello h = {COLL_CONN_MAGIC, comm->rank, channel, 0, comm->boot.secret};
  void* req = NULL;
  collResult_t r = collSuccess;
  while (!req && r == collSuccess) r = net->isend(sc, &h, sizeof h, 0, NULL, &req);
  size_t sz;
  if (r == collSuccess) r = collConnWait(comm, net, req, &sz, deadline);
  if (r != collSuccess) {
    net->closeSend(sc);
    return collSetError(r, "rank %d: handshake with rank %d on %s failed: %s", comm->rank, peer,
                        comm->peers[peer].host, collLastErrorMessage());
  }
  c->sendComm = *out = sc;
  COLL_TRACE(COLL_SUB_NET, "rank %d -> %d channel %d connected over %s", comm->rank, peer, channel, net->name);
  return collSuccess;
}

collResult_t collEngineRecvConn(collComm_t comm, int peer, int channel, void** out) {
  collConn* want = &comm->conns[channel * comm->nranks + peer];
  if (want->recvComm) {
    *out = want->recvComm;
    return collSuccess;
  }
  double deadline = collConnDeadline(comm);
  int kind = comm->peerKind[peer];
  const collNet_v2_t* net = comm->nets[kind];
  double nextCheck = collTimeNow() + 0.1;
  int goneSeen = 0;
  while (!want->recvComm) {
    void* rc = NULL;
    collResult_t r = net->accept(comm->listenComms[kind], &rc);
    if (r != collSuccess) return r;
    if (comm->abortFlag) return collSetError(collRemoteError, "communicator aborted");
    if (!rc) {
      int fd = -1;
      if (net->getPollFd(comm->listenComms[kind], &fd) == collSuccess && fd >= 0) {
        struct pollfd pfd = {fd, POLLIN, 0};
        poll(&pfd, 1, 10);
      }
      if (collTimeNow() > nextCheck) {
        nextCheck = collTimeNow() + 0.1;
        /* a peer that connected and then finished (or exited) before we got
         * here left its connection pending: accept again before giving up */
        if (collConnPeerGone(comm, peer) && goneSeen++)
          return collSetError(collRemoteError,
                              "rank %d: rank %d (%s, pid %d) is gone (process exited or closed its connections) "
                              "while rank %d waited for it to connect on channel %d",
                              comm->rank, peer, comm->peers[peer].host, comm->peers[peer].pid, comm->rank, channel);
        /* any other rank gone dooms the call too (every rank takes part in a
         * collective; a failed rank aborted the communicator): the peer we
         * wait for may never connect, e.g. it runs another schedule because
         * ranks passed different counts. A few ranks per check, in turn. */
        for (int k = 0; k < 8 && k < comm->nranks; k++) {
          int p = (int)(comm->goneScan++ % (unsigned)comm->nranks);
          if (p != comm->rank && p != peer && collConnPeerGone(comm, p))
            return collSetError(collRemoteError,
                                "rank %d: rank %d (%s, pid %d) is gone (process exited or closed its connections) "
                                "while rank %d waited for rank %d to connect on channel %d",
                                comm->rank, p, comm->peers[p].host, comm->peers[p].pid, comm->rank, peer, channel);
        }
      }
      if (deadline > 0 && collTimeNow() > deadline)
        return collSetError(collTimeout, "rank %d: timed out after %d s (COLL_TIMEOUT) waiting for rank %d (%s) to connect on channel %d",
                            comm->rank, comm->timeoutSec, peer, comm->peers[peer].host, channel);
      continue;
    }
    collConnHello h;
    void* req = NULL;
    size_t sz = 0;
    while (!req && r == collSuccess) r = net->irecv(rc, &h, sizeof h, 0, NULL, &req);
    if (r == collSuccess) r = collConnWait(comm, net, req, &sz, collTimeNow() + 10.0);
    int hr = -1, hc = -1;
    if (r != collSuccess ||
        !collConnHelloValid(&h, sz, comm->boot.secret, comm->nranks, comm->maxChannels, &hr, &hc) ||
        comm->peerKind[hr] != kind || comm->conns[hc * comm->nranks + hr].recvComm) {
      COLL_WARN(COLL_SUB_NET, "rank %d: dropped an incoming %s connection with a bad hello", comm->rank, net->name);
      net->closeRecv(rc);
      collClearError();
      continue;
    }
    comm->conns[hc * comm->nranks + hr].recvComm = rc;
    COLL_TRACE(COLL_SUB_NET, "rank %d <- %d channel %d accepted", comm->rank, hr, hc);
  }
  *out = want->recvComm;
  return collSuccess;
}

void collEngineCloseConns(collComm_t comm) {
  collMailboxMarkFailed(comm);
  if (!comm->conns || !comm->peerKind) return;
  for (int i = 0; i < comm->maxChannels * comm->nranks; i++) {
    const collNet_v2_t* net = collPeerNet(comm, i % comm->nranks);
    if (comm->conns[i].sendComm) net->closeSend(comm->conns[i].sendComm);
    if (comm->conns[i].recvComm) net->closeRecv(comm->conns[i].recvComm);
    comm->conns[i].sendComm = comm->conns[i].recvComm = NULL;
  }
}

void collEngineFree(collComm_t comm) {
  collEngineCloseConns(comm);
  free(comm->conns);
  comm->conns = NULL;
  if (comm->channels) {
    for (int c = 0; c < comm->maxChannels; c++) {
      free(comm->channels[c].scratch);
      free(comm->channels[c].staging);
      free(comm->channels[c].stepState);
      collSchedFree(&comm->channels[c].sched);
    }
  }
  free(comm->channels);
  comm->channels = NULL;
  free(comm->stage);
  comm->stage = NULL;
  comm->stageBytes = 0;
}
