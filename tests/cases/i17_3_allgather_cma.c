/*
 * i17_3_allgather_cma.c - issue 17 point 3: a one-node all-gather of 1 MiB
 * and more (the whole result) reads every peer's block straight into the
 * receive buffer (engine/cmagather.c, counted under "zerocopy"), with exact
 * results, on malloc'd and on collMemAlloc buffers.
 *
 * 1..4 ranks; per-rank blocks of 4000 bytes (the mailbox), 64 KiB (below
 * 1 MiB in all), 262156 bytes (an odd count of int32: below 1 MiB in all on
 * 2 and 3 ranks, above on 4) and 4 MiB, and an int8 block of 777777 bytes
 * (odd lengths and offsets; above 1 MiB in all) and of 4 MiB + 5 bytes
 * (own block copied with streaming stores from 4 MiB: unaligned here); out of place and in place; malloc'd and collMemAlloc buffers.
 * Element i of rank r's block is r * 7919 + i (int32) or r * 31 + i mod 256
 * (int8). Expected: every block exactly that, nothing written past the
 * result (guard bytes), the send buffer unchanged; the counters show
 * exactly the calls of 1 MiB and more in all on 2+ ranks under
 * "zerocopy", and no other.
 * `off` (COLL_SHM_CMA_THRESHOLD=0, single copy forbidden): the same results,
 * no call under "zerocopy".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../integration/mp_harness.h"
#include "helper_zc.h"

#include "helper_check.h"

#define GUARD 64
#define MAX_BLOCK (((size_t)4 << 20) + 64)

static int off;

static unsigned char val(collDataType_t t, int r, size_t i, size_t byte) {
  if (t == collInt8) return (unsigned char)(r * 31 + i);
  uint32_t v = (uint32_t)r * 7919u + (uint32_t)i;
  return (unsigned char)(v >> (8 * byte));
}

static int body(collComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  static const struct {
    collDataType_t t;
    size_t count;
  } kCalls[] = {{collInt32, 1000}, {collInt32, 16384}, {collInt32, 65539}, {collInt32, 1 << 20}, {collInt8, 777777},
                 {collInt8, (4 << 20) + 5}};
  int fails = 0;
  size_t total = (size_t)nranks * MAX_BLOCK + GUARD;
  char* sendM = malloc(MAX_BLOCK);
  char* recvM = malloc(total);
  char *sendZ = NULL, *recvZ = NULL;
  if (!sendM || !recvM || collMemAlloc((void**)&sendZ, MAX_BLOCK) != collSuccess ||
      collMemAlloc((void**)&recvZ, total) != collSuccess) {
    printf("rank %d: allocation failed: %s\n", rank, collGetLastError(NULL));
    return 1;
  }
  uint64_t want = 0;
  for (int z = 0; z < 2; z++)
    for (int inPlace = 0; inPlace < 2; inPlace++)
      for (size_t ci = 0; ci < sizeof kCalls / sizeof kCalls[0]; ci++) {
        collDataType_t t = kCalls[ci].t;
        size_t es = t == collInt8 ? 1 : 4, count = kCalls[ci].count, block = count * es;
        char* send = z ? sendZ : sendM;
        char* recv = z ? recvZ : recvM;
        memset(recv, 0xee, (size_t)nranks * block + GUARD);
        char* in = inPlace ? recv + (size_t)rank * block : send;
        for (size_t i = 0; i < count; i++)
          for (size_t b = 0; b < es; b++) in[i * es + b] = (char)val(t, rank, i, b);
        uint64_t before = zcCalls(comm);
        collResult_t r = collAllGather(in, recv, count, t, comm, NULL);
        int zc = !off && nranks > 1 && (size_t)nranks * block >= ((size_t)1 << 20);
        want += (uint64_t)zc;
        const char* how = inPlace ? "in place" : "out of place";
        const char* mem = z ? "collMemAlloc" : "malloc";
        CHECK_RANKED(r == collSuccess, "%zu bytes %s %s: %s", block, how, mem, collGetLastError(comm));
        if (r != collSuccess) return fails;
        CHECK_RANKED(zcCalls(comm) == before + (uint64_t)zc, "%zu bytes per rank %s %s: zerocopy calls %llu -> %llu, want +%d",
                     block, how, mem, (unsigned long long)before, (unsigned long long)zcCalls(comm), zc);
        size_t wrong = 0, first = 0, past = 0, changed = 0;
        for (int q = 0; q < nranks; q++)
          for (size_t i = 0; i < count; i++)
            for (size_t b = 0; b < es; b++) {
              size_t at = ((size_t)q * count + i) * es + b;
              if ((unsigned char)recv[at] != val(t, q, i, b) && wrong++ == 0) first = at;
            }
        for (size_t k = 0; k < GUARD; k++) past += (unsigned char)recv[(size_t)nranks * block + k] != 0xee;
        for (size_t i = 0; !inPlace && i < count; i++)
          for (size_t b = 0; b < es; b++) changed += (unsigned char)send[i * es + b] != val(t, rank, i, b);
        CHECK_RANKED(wrong == 0, "%zu bytes per rank %s %s: %zu bytes wrong, first at %zu (block %zu) = 0x%02x", block,
                     how, mem, wrong, first, first / block, (unsigned char)recv[first]);
        CHECK_RANKED(past == 0 && changed == 0, "%zu bytes per rank %s %s: %zu guard bytes written, %zu send bytes changed",
                     block, how, mem, past, changed);
      }
  CHECK_RANKED(zcCalls(comm) == want, "%llu calls under zerocopy, want %llu", (unsigned long long)zcCalls(comm),
               (unsigned long long)want);
  free(sendM);
  free(recvM);
  collMemFree(sendZ);
  collMemFree(recvZ);
  return fails;
}

int main(int argc, char** argv) {
  off = argc > 1 && strcmp(argv[1], "off") == 0;
  int rc = 0;
  for (int n = 1; n <= 4 && rc == 0; n++) rc = collMpRun(n, 120, body, NULL);
  printf("i17_3_allgather_cma%s: %s\n", off ? " off" : "", rc ? "FAILED" : "passed");
  return rc;
}
