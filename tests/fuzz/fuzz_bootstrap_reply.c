/*
 * fuzz_bootstrap_reply.c - libFuzzer target for the bootstrap root's reply as
 * a rank parses it (collBootCheckReply): whatever answers on the rendezvous
 * port, a rank must use nothing of a reply that is not authentic, echoes
 * another hello, or holds an unusable next address, and never read past it.
 *
 * Input: 1 selector byte, then the reply bytes. The hello the rank sent is
 * fixed (rank 1 of 4, a known nonce). Selector bit 0: recompute the reply's
 * MAC with the job key first, so the checks behind the MAC are reached;
 * bit 1: also copy the hello's rank, nranks and nonce into the reply.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"

static const uint8_t key[COLL_BOOT_KEY_BYTES] = {9, 8, 7, 6, 5, 4, 3, 2, 1};

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  uint8_t sel = data[0];
  size_t len = size - 1;
  uint8_t* msg = malloc(len ? len : 1);
  memcpy(msg, data + 1, len);
  collBootHelloMsg h;
  memset(&h, 0, sizeof h);
  h.rank = 1;
  h.nranks = 4;
  h.rankNonce = 0x5555aaaa12345678ull;
  if (len == sizeof(collBootReplyMsg)) {
    collBootReplyMsg m;
    memcpy(&m, msg, sizeof m);
    if (sel & 2) {
      m.rank = h.rank;
      m.nranks = h.nranks;
      m.rankNonce = h.rankNonce;
    }
    if (sel & 1) collBootMac(key, &m, offsetof(collBootReplyMsg, mac), m.mac);
    memcpy(msg, &m, sizeof m);
  }
  uint64_t nonce = 0;
  collBootNext next;
  memset(&next, 0, sizeof next);
  int status = 0;
  char reason[COLL_BOOT_REASON_BYTES];
  collReplyVerdict v = collBootCheckReply(msg, len, key, &h, &nonce, &next, &status, reason, sizeof reason);
  if (strlen(reason) >= sizeof reason) abort();
  for (const char* p = reason; *p; p++)
    if (*p < 0x20 || *p >= 0x7f) abort(); /* shown to users: printable only */
  if (v == COLL_REPLY_OK &&
      (nonce == 0 || !collBootAddrUsable(&next.addr) || !collBootUnixNameValid(next.unixName, sizeof next.unixName)))
    abort();
  if (v == COLL_REPLY_ERR && (status <= 0 || status >= collNumResults || status == collInProgress)) abort();
  free(msg);
  return 0;
}
