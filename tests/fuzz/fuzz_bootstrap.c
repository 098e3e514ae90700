/*
 * fuzz_bootstrap.c - libFuzzer target for the hellos coll reads from the
 * network before it trusts the peer: the bootstrap root's hello, the ring
 * hello and the engine's connection hello. Input: 1 byte selecting the
 * parser, then the message bytes. With bit 3 of the selector set, a hello's
 * MAC is recomputed with the job key first, so the checks behind the MAC
 * (ranges, address family) are reached too. The parsers must reject anything
 * malformed without reading past the input and accept only values inside
 * the job's bounds.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "engine/engine.h"

static const uint8_t key[COLL_BOOT_KEY_BYTES] = {1, 2, 3, 4, 5, 6, 7, 8, 9};

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  uint8_t sel = data[0];
  /* copy to an exact-size heap buffer so ASan catches any over-read */
  uint8_t* msg = malloc(size - 1 ? size - 1 : 1);
  memcpy(msg, data + 1, size - 1);
  size_t len = size - 1;
  switch (sel & 3) {
    case 0: {
      int rank = -1, channel = -1, nranks = 1 + (sel >> 4), nch = 1 + ((sel >> 2) & 3);
      if (collConnHelloValid(msg, len, 0x1122334455667788ull, nranks, nch, &rank, &channel))
        if (rank < 0 || rank >= nranks || channel < 0 || channel >= nch) abort();
      break;
    }
    case 1: {
      if ((sel & 8) && len == sizeof(collBootHelloMsg))
        collBootMac(key, msg, offsetof(collBootHelloMsg, mac), msg + offsetof(collBootHelloMsg, mac));
      collBootHelloMsg h;
      uint32_t version = 0;
      char why[64];
      if (collBootCheckHello(msg, len, key, &h, &version, why, sizeof why) == COLL_HELLO_OK)
        if (h.rank < 0 || h.rank >= h.nranks || h.nranks > COLL_BOOT_MAX_RANKS || !collBootAddrUsable(&h.ringAddr))
          abort();
      break;
    }
    default: {
      int want = sel >> 4;
      uint64_t nonce = 0x0123456789abcdefull;
      if ((sel & 8) && len == sizeof(collBootRingMsg))
        collBootMac(key, msg, offsetof(collBootRingMsg, mac), msg + offsetof(collBootRingMsg, mac));
      if (collBootCheckRing(msg, len, key, want, nonce)) {
        collBootRingMsg m;
        memcpy(&m, msg, sizeof m);
        if (m.rank != want || m.jobNonce != nonce) abort();
      }
      break;
    }
  }
  free(msg);
  return 0;
}
