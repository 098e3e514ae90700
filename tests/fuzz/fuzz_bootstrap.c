/*
 * fuzz_bootstrap.c - libFuzzer target for every message coll reads from the
 * network before it trusts the peer: the bootstrap root's hello and the
 * engine's connection hello. Input: 1 byte selecting the parser, then the
 * message bytes. The parsers must reject anything malformed without reading
 * past the input and accept only values inside the job's bounds.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "engine/engine.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint64_t secret = 0x1122334455667788ull;
  uint8_t sel = data[0];
  /* copy to an exact-size heap buffer so ASan catches any over-read */
  uint8_t* msg = malloc(size - 1 ? size - 1 : 1);
  memcpy(msg, data + 1, size - 1);
  if (sel & 1) {
    int rank = -1, nranks = -1, expect = (sel >> 1) & 7 ? (sel >> 1) & 7 : -1;
    if (collBootHelloValid(msg, size - 1, secret, expect, &rank, &nranks)) {
      if (rank < 0 || rank >= nranks || nranks > 65536 || (expect > 0 && nranks != expect)) abort();
    }
  } else {
    int rank = -1, channel = -1, nranks = 1 + (sel >> 4), nch = 1 + ((sel >> 1) & 7);
    if (collConnHelloValid(msg, size - 1, secret, nranks, nch, &rank, &channel)) {
      if (rank < 0 || rank >= nranks || channel < 0 || channel >= nch) abort();
    }
  }
  free(msg);
  return 0;
}
