/*
 * fuzz_tcp_frames.c - libFuzzer target for the TCP transport's wire format.
 * A real connection is set up on loopback; instead of coll's sender, the
 * fuzzer's bytes are written raw into the socket, then the sender closes.
 * The receiver posts a receive of 0..255 bytes (first input byte) inside a
 * guarded buffer and drives test() until the request finishes or fails. It
 * must never write outside the posted bytes, never crash, never hang.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "misc/socket.h"
#include "transports/tcp/tcp.h"

static void* listenComm;
static char handle[COLL_NET_HANDLE_BYTES];

static void setup(void) {
  setenv("COLL_SOCKET_IFNAME", "lo", 1);
  if (collNetTcp.init(NULL) != collSuccess || collNetTcp.listen(0, handle, &listenComm) != collSuccess) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (!listenComm) setup();
  if (size < 1) return 0;
  size_t posted = data[0];
  void *sc = NULL, *rc = NULL;
  if (collNetTcp.connect(0, handle, &sc) != collSuccess || !sc) abort();
  for (int i = 0; i < 100000 && !rc; i++) collNetTcp.accept(listenComm, &rc);
  if (!rc) abort();
  int fd = -1;
  collNetTcp.getPollFd(sc, &fd);
  collSocketSendAll(fd, data + 1, size - 1, collTimeNow() + 5, NULL);
  collNetTcp.closeSend(sc); /* EOF after the fuzzed bytes */
  enum { GUARD = 64 };
  uint8_t* buf = malloc(posted + 2 * GUARD);
  memset(buf, 0xA5, posted + 2 * GUARD);
  void* req = NULL;
  if (collNetTcp.irecv(rc, buf + GUARD, posted, 0, NULL, &req) == collSuccess && req) {
    int done = 0;
    size_t got = 0;
    double deadline = collTimeNow() + 5;
    while (!done && collTimeNow() < deadline)
      if (collNetTcp.test(req, &done, &got, NULL) != collSuccess) break;
    if (done && got > posted) abort();
  }
  for (size_t i = 0; i < GUARD; i++)
    if (buf[i] != 0xA5 || buf[GUARD + posted + i] != 0xA5) abort();
  free(buf);
  collNetTcp.closeRecv(rc);
  return 0;
}
