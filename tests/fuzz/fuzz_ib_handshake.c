/*
 * fuzz_ib_handshake.c - libFuzzer target for what the ib transport reads
 * from a peer during connection setup, on the in-memory verbs device
 * (tests/unit/ibfake.c):
 *  - the listen handle (collIbHandleParse) and connection info
 *    (collIbInfoParse) as raw bytes;
 *  - byte 0 even: the bytes arrive at a listener as a connector's info
 *    (then 'R' and a receive into a guarded buffer if it accepted them);
 *    byte 0 odd: they arrive at a connector as the listener's reply (then a
 *    send is driven);
 *  - byte 1 bit 0 patches magic, version, depth and slot size to valid
 *    values so the rest reaches the QP transitions.
 * Nothing may crash, write outside the guarded buffer, or leak a QP, CQ or
 * MR (checked against the fake's counts after every input).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../unit/ibfake.h"
#include "misc/socket.h"
#include "transports/ib/ib.h"
#include "transports/ib/ib_internal.h"

static const collNet_t* net = &collNetIb;
static void* listenComm;
static char handle[COLL_NET_HANDLE_BYTES];
static ibFakeStats base;

static void setup(void) {
  setenv("COLL_SOCKET_IFNAME", "lo", 1);
  ibFakeDevSpec d;
  memset(&d, 0, sizeof d);
  d.name = "fuzz0";
  d.nports = 1;
  d.ports[0] = ibFakeRocePort(1, IBV_MTU_1024);
  ibFakeInstall(&d, 1);
  collIbConfigLoad(&collIbCfg);
  if (collIbStart() != collSuccess || net->listen(0, handle, &listenComm) != collSuccess) abort();
  ibFakeGetStats(&base);
}

static void checkNoLeak(void) {
  ibFakeStats st;
  ibFakeGetStats(&st);
  if (st.liveQps != base.liveQps || st.liveCqs != base.liveCqs || st.liveMrs != base.liveMrs) abort();
}

static void patch(collIbInfo* i) {
  i->magic = IB_INFO_MAGIC;
  i->version = IB_INFO_VERSION;
  i->depth = IB_DEPTH;
  i->eager = IB_EAGER;
}

/* A connector's info (the bytes) arrives at our listener. */
static void asListener(const uint8_t* b, size_t n, int fix) {
  collIbHandle h;
  memcpy(&h, handle, sizeof h);
  int fd = -1;
  if (collSocketConnect(&h.addr, &fd, collTimeNow() + 5, NULL) != collSuccess) abort();
  collIbInfo info;
  memset(&info, 0, sizeof info);
  size_t k = n < sizeof info ? n : sizeof info;
  memcpy(&info, b, k);
  if (fix) patch(&info);
  (void)collSocketSendAll(fd, &info, fix ? sizeof info : k, collTimeNow() + 5, NULL);
  if (!fix && k < sizeof info) shutdown(fd, SHUT_WR); /* a short info, then EOF */
  void* rc = NULL;
  for (int i = 0; i < 20 && !rc; i++) {
    if (net->accept(listenComm, &rc) != collSuccess) abort();
    if (!rc) usleep(200);
  }
  if (rc) {
    char r = 'R';
    (void)collSocketSendAll(fd, &r, 1, collTimeNow() + 5, NULL);
    uint8_t* buf = malloc(256 + 64);
    memset(buf, 0xEE, 256 + 64);
    void* req = NULL;
    if (net->irecv(rc, buf + 32, 200, 0, NULL, &req) == collSuccess && req) {
      int done = 0;
      for (int i = 0; i < 50 && !done; i++)
        if (net->test(req, &done, NULL, NULL) != collSuccess) break;
    }
    for (int i = 0; i < 32; i++)
      if (buf[i] != 0xEE || buf[232 + i] != 0xEE) abort();
    free(buf);
    net->closeRecv(rc);
  }
  close(fd);
}

/* The bytes arrive at a connector as the listener's reply. */
static void asConnector(const uint8_t* b, size_t n, int fix) {
  collSockAddr a;
  memset(&a, 0, sizeof a);
  a.sin.sin_family = AF_INET;
  a.sin.sin_addr.s_addr = htonl(0x7f000001);
  int lfd = -1;
  if (collSocketListen(&a, &lfd) != collSuccess) abort();
  collIbHandle h = {IB_HANDLE_MAGIC, a, 0};
  char hb[COLL_NET_HANDLE_BYTES] = {0};
  memcpy(hb, &h, sizeof h);
  void* sc = NULL;
  if (net->connect(0, hb, &sc) != collSuccess || !sc) abort();
  int fd = -1;
  if (collSocketAccept(lfd, &fd, collTimeNow() + 5, NULL) != collSuccess) abort();
  collIbInfo theirs;
  (void)collSocketRecvAll(fd, &theirs, sizeof theirs, collTimeNow() + 5, NULL);
  collIbInfo info;
  memset(&info, 0, sizeof info);
  size_t k = n < sizeof info ? n : sizeof info;
  memcpy(&info, b, k);
  if (fix) patch(&info);
  (void)collSocketSendAll(fd, &info, fix ? sizeof info : k, collTimeNow() + 5, NULL);
  if (!fix && k < sizeof info) shutdown(fd, SHUT_WR);
  static const char msg[] = "hello";
  void* req = NULL;
  if (net->isend(sc, msg, sizeof msg, 1, NULL, &req) == collSuccess && req) {
    int done = 0;
    for (int i = 0; i < 50 && !done; i++)
      if (net->test(req, &done, NULL, NULL) != collSuccess) break;
  }
  net->closeSend(sc);
  close(fd);
  close(lfd);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static int ready;
  if (!ready) {
    setup();
    ready = 1;
  }
  char why[128];
  collIbHandle h;
  collIbInfo info;
  (void)collIbHandleParse(data, size, &h, why, sizeof why);
  (void)collIbInfoParse(data, size, &info, why, sizeof why);
  if (size < 2) return 0;
  if (data[0] & 1) asConnector(data + 2, size - 2, data[1] & 1);
  else asListener(data + 2, size - 2, data[1] & 1);
  checkNoLeak();
  return 0;
}
