/*
 * fuzz_shm_handshake.c - libFuzzer target for what the shared-memory
 * transport reads from a connecting process: the hello (sizes, offsets,
 * slot count) passed over its unix socket, and the segment the sender
 * created, whose header and slot headers the receiver then parses.
 * Input: 40 bytes of hello, then the first bytes of the segment. The
 * segment (a memfd) is sized from the hello when that is small (<= 1 MiB),
 * else 64 KiB, so both matching and mismatching sizes are tried. accept must
 * drop anything malformed; a comm it does accept is driven through a receive
 * into a guarded buffer, which must never be written outside.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "misc/socket.h"
#include "transports/shm/shm.h"

/* Layout of the shm listen handle (transports/shm/shm_setup.c). */
typedef struct {
  uint64_t magic;
  int32_t pid;
  uint32_t nameLen;
  char name[40];
  uint64_t cmaThreshold;
} fuzzShmHandle;

static void* listenComm;
static char handle[COLL_NET_HANDLE_BYTES];

static void setup(void) {
  setenv("COLL_SHM_CMA_THRESHOLD", "0", 1); /* no timing probe per process */
  if (collNetShm.init(NULL) != collSuccess || collNetShm.listen(0, handle, &listenComm) != collSuccess) abort();
}

/* Connects to the listener and passes hello + {memfd, eventfd, eventfd}. */
static void sendHandshake(const uint8_t* hello, size_t helloLen, int mfd) {
  fuzzShmHandle h;
  memcpy(&h, handle, sizeof h);
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  size_t len = h.nameLen < sizeof a.sun_path - 1 ? h.nameLen : sizeof a.sun_path - 2;
  memcpy(a.sun_path + 1, h.name, len);
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) abort();
  if (connect(s, (struct sockaddr*)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len)) != 0) abort();
  int fds[3] = {mfd, eventfd(0, EFD_CLOEXEC), eventfd(0, EFD_CLOEXEC)};
  char cbuf[CMSG_SPACE(sizeof fds)];
  struct iovec iov = {(void*)hello, helloLen};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
  struct cmsghdr* cm = CMSG_FIRSTHDR(&m);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof fds);
  memcpy(CMSG_DATA(cm), fds, sizeof fds);
  (void)sendmsg(s, &m, MSG_NOSIGNAL);
  close(fds[1]);
  close(fds[2]);
  close(s); /* EOF: accept never waits for more */
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (!listenComm) setup();
  enum { HELLO = 40, GUARD = 64, POSTED = 256 };
  if (size < HELLO) return 0;
  uint64_t total;
  memcpy(&total, data + 8, sizeof total);
  size_t segBytes = total > 0 && total <= (1u << 20) ? (size_t)total : 65536;
  int mfd = memfd_create("fuzz-shm", MFD_CLOEXEC);
  if (mfd < 0 || ftruncate(mfd, (off_t)segBytes) != 0) abort();
  size_t body = size - HELLO < segBytes ? size - HELLO : segBytes;
  if (body && pwrite(mfd, data + HELLO, body, 0) != (ssize_t)body) abort();
  sendHandshake(data, HELLO, mfd);
  close(mfd);
  void* rc = NULL;
  for (int i = 0; i < 1000 && !rc; i++)
    if (collNetShm.accept(listenComm, &rc) != collSuccess) break;
  if (rc) { /* accepted: parse what the "sender" left in the ring */
    uint8_t* buf = malloc(POSTED + 2 * GUARD);
    memset(buf, 0xA5, POSTED + 2 * GUARD);
    void* req = NULL;
    if (collNetShm.irecv(rc, buf + GUARD, POSTED, 0, NULL, &req) == collSuccess && req) {
      int done = 0;
      size_t got = 0;
      for (int i = 0; i < 200 && !done; i++)
        if (collNetShm.test(req, &done, &got, NULL) != collSuccess) break;
      if (done && got > POSTED) abort();
    }
    for (int i = 0; i < GUARD; i++)
      if (buf[i] != 0xA5 || buf[GUARD + POSTED + i] != 0xA5) abort();
    free(buf);
    collNetShm.closeRecv(rc);
  }
  return 0;
}
