/*
 * conn.c - lazy connection setup between ranks, one connection per (peer,
 * channel, direction). The sender connects to the receiver's listener (its
 * handle came with the peer info at init) and sends a hello {magic, secret,
 * rank, channel}; the receiver accepts, checks the secret, and files the
 * connection under the rank and channel it names, so connections may arrive
 * in any order. Senders never wait on their peer, so ranks that connect all
 * their sends before accepting their receives cannot deadlock.
 *
 * Failures: no connection is started on a communicator that failed or to
 * a peer known to be gone (collEnginePeerGone), a connect the peer does not
 * take is retried for COLL_CONNECT_TIMEOUT_MS at most, every wait honours
 * the operation's deadline and the abort flag, and whatever a failed
 * attempt made is closed. On failure every connection and both listeners
 * are closed (collEngineCloseConnsWhy).
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/blame.h"
#include "engine/devpath.h"
#include "engine/engine.h"
#include "engine/exec.h"
#include "engine/mailbox.h"
#include "engine/zerocopy.h"
#include "core/memalloc.h"
#include "engine/progress.h"
#include "engine/reg.h"
#include "misc/log.h"
#include "misc/param.h"
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
static collResult_t collConnWait(collComm_t comm, const collNet_t* net, void* req, size_t* size,
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
  return comm->runTimeoutSec > 0 ? collTimeNow() + comm->runTimeoutSec : 0;
}

/* The error of a connection attempt on a communicator that failed. */
static collResult_t collConnAborted(collComm_t comm, int peer) {
  char what[64];
  snprintf(what, sizeof what, "rank %d: connection to rank %d", comm->rank, peer);
  collResult_t r = collCommFailedError(comm, what);
  return r != collSuccess ? r : collSetError(collRemoteError, "%s: communicator aborted", what);
}

/* Is `peer` known to be gone? Its process exited or is a zombie (peers on
 * this host: /proc), it marked itself failed or destroyed its communicator
 * (the node's mailbox), or an established connection with it was closed by
 * the other side (POLLRDHUP, POLLHUP, POLLERR on its fd). */
int collEnginePeerGone(collComm_t comm, int peer, char* why, size_t whySize) {
  if (collBlameSameHost(comm, peer)) {
    char st = collProcState(comm->peers[peer].pid);
    if (st == 'X' || st == 'Z') {
      snprintf(why, whySize, "%s", collProcStateWords(st));
      return 1;
    }
  }
  if (collMailboxPeerFailed(comm, peer)) {
    snprintf(why, whySize, "%s", collMailboxPeerErrored(comm, peer) ? "failed" : "destroyed or aborted its communicator");
    return 1;
  }
  const collNet_t* net = collPeerNet(comm, peer);
  for (int c = 0; c < comm->maxChannels; c++) {
    collConn* k = &comm->conns[c * comm->nranks + peer];
    void* ends[2] = {k->sendComm, k->recvComm};
    for (int e = 0; e < 2; e++) {
      int fd = -1;
      if (!ends[e] || net->getPollFd(ends[e], &fd) != collSuccess || fd < 0) continue;
      struct pollfd pfd = {fd, POLLRDHUP, 0};
      if (poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
        snprintf(why, whySize, "closed its connections");
        return 1;
      }
    }
  }
  return 0;
}

static collResult_t collConnGoneError(collComm_t comm, int peer, int channel, const char* doing, const char* why) {
  char reason[400] = "";
  if (collMailboxPeerWhy(comm, peer, reason + 2, sizeof reason - 2)) memcpy(reason, ": ", 2);
  return collSetError(collRemoteError, "rank %d: rank %d (%s, pid %d) %s%s (%s on channel %d)", comm->rank, peer,
                      comm->peers[peer].host, (int)comm->peers[peer].pid, why, reason, doing, channel);
}

/* A connect or handshake with peer failed with r (message in
 * collLastErrorMessage): when the peer failed (it closed everything: "Broken
 * pipe"), waits briefly for the sign of it and says so, with the peer's
 * reason where the mailbox tells it; else the transport's error. */
static collResult_t collConnFailError(collComm_t comm, int peer, int channel, collResult_t r) {
  char err[400], why[96];
  snprintf(err, sizeof err, "%s", collLastErrorMessage());
  for (int i = 0; i < 250; i++) { /* the peer marks itself failed before it closes its connections */
    if (collEnginePeerGone(comm, peer, why, sizeof why)) {
      char d[480];
      snprintf(d, sizeof d, "connecting to it failed: %s", err);
      return collConnGoneError(comm, peer, channel, d, why);
    }
    if (__atomic_load_n(&comm->abortFlag, __ATOMIC_ACQUIRE)) break;
    poll(NULL, 0, 1);
  }
  return collSetError(r, "rank %d: cannot connect to rank %d on %s (channel %d): %s", comm->rank, peer,
                      comm->peers[peer].host, channel, err);
}

collResult_t collEngineSendConn(collComm_t comm, int peer, int channel, void** out) {
  return collEngineSendConnSet(comm, NULL, peer, channel, out);
}

collResult_t collEngineRecvConn(collComm_t comm, int peer, int channel, void** out) {
  return collEngineRecvConnSet(comm, NULL, peer, channel, out);
}

collResult_t collEngineSendConnSet(collComm_t comm, const collConnSet* set, int peer, int channel, void** out) {
  set = collConnSetFor(set, peer);
  collConn* c = &(set ? set->conns : comm->conns)[channel * comm->nranks + peer];
  if (c->sendComm) { *out = c->sendComm; return collSuccess; }
  if (comm->abortFlag) return collConnAborted(comm, peer);
  char why[96];
  if (collEnginePeerGone(comm, peer, why, sizeof why))
    return collConnGoneError(comm, peer, channel, "not connecting to it", why);
  double deadline = collConnDeadline(comm);
  double refusedUntil = collTimeNow() + (double)collParamInt(COLL_PARAM_CONNECT_RETRY_MS) * 1e-3;
  double nextCheck = collTimeNow() + 0.1;
  const collNet_t* net = set ? set->net : collPeerNet(comm, peer);
  int dev = set ? set->dev : comm->netDev[comm->peerKind[peer]];
  const char* handle = set ? set->handles + (size_t)peer * COLL_NET_HANDLE_BYTES : collPeerHandle(comm, peer);
  void* sc = NULL;
  for (;;) {
    collResult_t r = net->connect(dev, handle, &sc);
    if (r != collSuccess) return collConnFailError(comm, peer, channel, r);
    if (sc) break;
    /* not yet (the peer does not accept): never past a failure, a gone peer or a deadline */
    if (comm->abortFlag) return collConnAborted(comm, peer);
    double now = collTimeNow();
    if (now > nextCheck) {
      nextCheck = now + 0.1;
      if (collEnginePeerGone(comm, peer, why, sizeof why))
        return collConnGoneError(comm, peer, channel, "while connecting to it", why);
    }
    if (deadline > 0 && now > deadline)
      return collSetError(collTimeout, "rank %d: connecting to rank %d (%s) timed out after %g s (%s)", comm->rank,
                          peer, comm->peers[peer].host, comm->runTimeoutSec,
                          comm->runTimeoutPerCall ? "collCommSetCallTimeout" : "COLL_TIMEOUT / collCommSetTimeout");
    if (now > refusedUntil)
      return collSetError(collRemoteError,
                          "rank %d: rank %d (%s) did not take a connection for %lld ms (COLL_CONNECT_TIMEOUT_MS): "
                          "its process exited, or its communicator failed or was destroyed",
                          comm->rank, peer, comm->peers[peer].host,
                          (long long)collParamInt(COLL_PARAM_CONNECT_RETRY_MS));
    poll(NULL, 0, 1);
  }
  if (comm->abortFlag) { /* failed meanwhile (another thread aborted): keep nothing */
    net->closeSend(sc);
    return collConnAborted(comm, peer);
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

collResult_t collEngineRecvConnSet(collComm_t comm, const collConnSet* set, int peer, int channel, void** out) {
  set = collConnSetFor(set, peer);
  collConn* conns = set ? set->conns : comm->conns;
  collConn* want = &conns[channel * comm->nranks + peer];
  if (want->recvComm) {
    *out = want->recvComm;
    return collSuccess;
  }
  int kind = comm->peerKind[peer];
  void* listen = set ? set->listen : comm->listenComms[kind];
  if (comm->abortFlag || !listen) return collConnAborted(comm, peer);
  double deadline = collConnDeadline(comm);
  const collNet_t* net = set ? set->net : comm->nets[kind];
  double nextCheck = collTimeNow() + 0.1;
  int goneSeen = 0;
  char why[96];
  while (!want->recvComm) {
    void* rc = NULL;
    collResult_t r = net->accept(listen, &rc);
    if (r != collSuccess)
      return collSetError(r, "rank %d: accepting a connection (waiting for rank %d, channel %d) failed: %s",
                          comm->rank, peer, channel, collLastErrorMessage());
    if (comm->abortFlag) {
      if (rc) net->closeRecv(rc);
      return collConnAborted(comm, peer);
    }
    if (!rc) {
      int fd = -1;
      if (net->getPollFd(listen, &fd) == collSuccess && fd >= 0) {
        struct pollfd pfd = {fd, POLLIN, 0};
        poll(&pfd, 1, 10);
      } else {
        poll(NULL, 0, 1); /* nothing to poll (p2p): look again soon */
      }
      if (collTimeNow() > nextCheck) {
        nextCheck = collTimeNow() + 0.1;
        /* a peer that connected and then finished (or exited) before we got
         * here left its connection pending: accept again before giving up */
        if (collEnginePeerGone(comm, peer, why, sizeof why) && goneSeen++)
          return collConnGoneError(comm, peer, channel, "while this rank waited for it to connect", why);
        /* any other rank gone dooms the call too (every rank takes part in a
         * collective; a failed rank aborted the communicator): the peer we
         * wait for may never connect, e.g. it runs another schedule because
         * ranks passed different counts. A few ranks per check, in turn. */
        for (int k = 0; k < 8 && k < comm->nranks; k++) {
          int q = (int)(comm->goneScan++ % (unsigned)comm->nranks);
          if (q != comm->rank && q != peer && collEnginePeerGone(comm, q, why, sizeof why))
            return collSetError(collRemoteError,
                                "rank %d: rank %d (%s, pid %d) %s while this rank waited for rank %d to connect on "
                                "channel %d", comm->rank, q, comm->peers[q].host, (int)comm->peers[q].pid, why, peer,
                                channel);
        }
      }
      if (deadline > 0 && collTimeNow() > deadline)
        return collSetError(collTimeout, "rank %d: timed out after %g s (%s) waiting for rank %d (%s) to connect on "
                            "channel %d", comm->rank, comm->runTimeoutSec,
                            comm->runTimeoutPerCall ? "collCommSetCallTimeout" : "COLL_TIMEOUT / collCommSetTimeout",
                            peer, comm->peers[peer].host, channel);
      continue;
    }
    collConnHello h;
    void* req = NULL;
    size_t sz = 0;
    while (!req && r == collSuccess) r = net->irecv(rc, &h, sizeof h, 0, NULL, &req);
    if (r == collSuccess) r = collConnWait(comm, net, req, &sz, collTimeNow() + 10.0);
    if (r != collSuccess && set) { /* a second set's peers are this job's own ranks: its failure (a GPU copy) fails the call */
      net->closeRecv(rc);
      return collSetError(r, "rank %d: receiving the hello of a %s connection (waiting for rank %d, channel %d) "
                          "failed: %s", comm->rank, net->name, peer, channel, collLastErrorMessage());
    }
    int hr = -1, hc = -1;
    if (r != collSuccess ||
        !collConnHelloValid(&h, sz, comm->boot.secret, comm->nranks, comm->maxChannels, &hr, &hc) ||
        (!set && comm->peerKind[hr] != kind) || conns[hc * comm->nranks + hr].recvComm) {
      COLL_WARN(COLL_SUB_NET, "rank %d: dropped an incoming %s connection with a bad hello", comm->rank, net->name);
      net->closeRecv(rc);
      collClearError();
      continue;
    }
    conns[hc * comm->nranks + hr].recvComm = rc;
    COLL_TRACE(COLL_SUB_NET, "rank %d <- %d channel %d accepted", comm->rank, hr, hc);
  }
  *out = want->recvComm;
  return collSuccess;
}

/* Closes one end; what the transport says on closing (a peer that rejected
 * the connection) goes to why if it is still empty. */
static void collConnClose(collComm_t comm, int peer, collResult_t (*fn)(void*), void* end, char* why, size_t whySize) {
  if (fn(end) != collSuccess && why && !why[0])
    snprintf(why, whySize, "rank %d on closing its connection to rank %d: %s", comm->rank, peer,
             collLastErrorMessage());
}

void collEngineCloseConnsWhy(collComm_t comm, char* why, size_t whySize) {
  collMailboxMarkFailed(comm);
  collEngineRegFree(comm); /* deregistration goes through the connections */
  collDevPathClose(comm);
  if (!comm->conns || !comm->peerKind) return;
  for (int i = 0; i < comm->maxChannels * comm->nranks; i++) {
    int peer = i % comm->nranks;
    const collNet_t* net = collPeerNet(comm, peer);
    if (comm->conns[i].sendComm) collConnClose(comm, peer, net->closeSend, comm->conns[i].sendComm, why, whySize);
    if (comm->conns[i].recvComm) collConnClose(comm, peer, net->closeRecv, comm->conns[i].recvComm, why, whySize);
    comm->conns[i].sendComm = comm->conns[i].recvComm = NULL;
  }
  /* no connection is ever made again: the listeners go too, with whatever
   * waits in their backlog (a connection's memory travels with it), and
   * peers that try to connect now are refused at once */
  for (int k = 0; k < COLL_NET_SLOTS; k++)
    if (comm->listenComms[k]) {
      comm->nets[k]->closeListen(comm->listenComms[k]);
      comm->listenComms[k] = NULL;
    }
}

void collEngineCloseConns(collComm_t comm) { collEngineCloseConnsWhy(comm, NULL, 0); }

void collEngineFree(collComm_t comm) {
  collEngineCloseConns(comm);
  collDevPathFree(comm); /* before the channels: it frees their GPU memory with the GPU current */
  free(comm->conns);
  comm->conns = NULL;
  if (comm->channels) {
    for (int c = 0; c < comm->maxChannels; c++) {
      collExecFree(comm->channels[c].scratch, comm->channels[c].scratchMem);
      collExecFree(comm->channels[c].staging, comm->channels[c].stagingMem);
      free(comm->channels[c].stepState);
      collSchedFree(&comm->channels[c].sched);
    }
  }
  free(comm->channels);
  comm->channels = NULL;
  free(comm->stage);
  comm->stage = NULL;
  comm->stageBytes = 0;
  collZeroCopyFree(comm);
  collMemRegDropComm(comm);
}
