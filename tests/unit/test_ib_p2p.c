/*
 * test_ib_p2p.c - send/recv through the engine over the ib transport on the
 * fake verbs device (ibfake.h), two ranks as threads of this process: how
 * many messages a transfer takes, and that its bytes arrive.
 *
 * Over ib the receiver's buffer is written in place (zero copy), and each
 * message costs the receiver's clear-to-send round trip before its bytes
 * move, so with COLL_CHUNKSIZE unset a transfer goes as one message per
 * channel (p2p.c collP2pChunk), not one per 512 KiB: on Soft-RoCE that was
 * the gap between sendrecv_perf and ib_write_bw (benchmarks/rdma/README.md).
 *
 * main sets COLL_NET=ib, COLL_SHM_DISABLE=1, COLL_MAILBOX_BYTES=0 (every
 * byte over ib) and COLL_NCHANNELS=2 before any coll call (parameters are
 * cached on first use); alarm() bounds the run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll.h"
#include "ibfake.h"

typedef struct {
  collComm_t comm;
  int rank;
  size_t count; /* floats each way */
  float *out, *in;
  collResult_t err;
  char msg[512];
  uint64_t sent, recvd; /* messages to / from the peer during the transfer */
  char link[COLL_STATS_NAME_LEN];
} rank_t;

static void peerMsgs(collComm_t comm, int peer, uint64_t* sent, uint64_t* recvd, char* link) {
  collPeerStats_t ps[2];
  memset(ps, 0, sizeof ps);
  if (collCommGetPeerStats(comm, ps, 2) != collSuccess) return;
  *sent = ps[peer].msgsSent;
  *recvd = ps[peer].msgsRecv;
  if (link) snprintf(link, COLL_STATS_NAME_LEN, "%s", ps[peer].link);
}

/* Rank r sends count floats to the other and receives as many from it, as
 * one group. */
static void* rankMain(void* p) {
  rank_t* k = p;
  int peer = 1 - k->rank;
  for (size_t i = 0; i < k->count; i++) k->out[i] = (float)(k->rank + 1) * (float)(i % 1021 + 1);
  memset(k->in, 0, k->count * sizeof(float));
  uint64_t s0 = 0, r0 = 0, s1 = 0, r1 = 0;
  peerMsgs(k->comm, peer, &s0, &r0, NULL);
  collResult_t e = collGroupStart();
  if (e == collSuccess) e = collSend(k->out, k->count, collFloat, peer, k->comm, NULL);
  if (e == collSuccess) e = collRecv(k->in, k->count, collFloat, peer, k->comm, NULL);
  collResult_t g = collGroupEnd();
  if (e == collSuccess) e = g;
  if (e != collSuccess) {
    k->err = e;
    snprintf(k->msg, sizeof k->msg, "rank %d: %s", k->rank, collGetLastError(k->comm));
    collCommAbort(k->comm);
    k->comm = NULL;
    return NULL;
  }
  peerMsgs(k->comm, peer, &s1, &r1, k->link);
  k->sent = s1 - s0;
  k->recvd = r1 - r0;
  return NULL;
}

static rank_t ranks[2];

static void runPair(size_t count) {
  collComm_t comms[2];
  assert_int_equal(collCommInitAll(comms, 2, NULL), collSuccess);
  pthread_t th[2];
  for (int r = 0; r < 2; r++) {
    memset(&ranks[r], 0, sizeof ranks[r]);
    ranks[r].comm = comms[r];
    ranks[r].rank = r;
    ranks[r].count = count;
    ranks[r].out = malloc(count * sizeof(float) + 1);
    ranks[r].in = malloc(count * sizeof(float) + 1);
    assert_non_null(ranks[r].out);
    assert_non_null(ranks[r].in);
  }
  for (int r = 0; r < 2; r++) assert_int_equal(pthread_create(&th[r], NULL, rankMain, &ranks[r]), 0);
  for (int r = 0; r < 2; r++) assert_int_equal(pthread_join(th[r], NULL), 0);
  for (int r = 0; r < 2; r++)
    if (ranks[r].err != collSuccess) fail_msg("%s", ranks[r].msg);
  for (int r = 0; r < 2; r++) {
    int peer = 1 - r;
    for (size_t i = 0; i < count; i++)
      if (ranks[r].in[i] != (float)(peer + 1) * (float)(i % 1021 + 1))
        fail_msg("rank %d element %zu: %g, want %g", r, i, (double)ranks[r].in[i],
                 (double)((float)(peer + 1) * (float)(i % 1021 + 1)));
    assert_string_equal(ranks[r].link, "ib");
  }
  for (int r = 0; r < 2; r++) {
    assert_int_equal(collCommDestroy(ranks[r].comm), collSuccess);
    free(ranks[r].out);
    free(ranks[r].in);
  }
}

/* 4 MiB each way on 2 channels: 2 messages each way (8 at 512 KiB). */
static void test_large_one_message_per_channel(void** st) {
  (void)st;
  runPair((size_t)1 << 20);
  for (int r = 0; r < 2; r++) {
    assert_int_equal(ranks[r].sent, 2);
    assert_int_equal(ranks[r].recvd, 2);
  }
}

/* An odd size: 1000003 floats are 4000012 bytes, halves of 2000008 and 2000004
 * bytes: still 2 messages, every element in place. */
static void test_odd_size(void** st) {
  (void)st;
  runPair(1000003);
  for (int r = 0; r < 2; r++) assert_int_equal(ranks[r].sent, 2);
}

/* Below the chunk size (512 KiB): one message on the first channel. */
static void test_small_one_message(void** st) {
  (void)st;
  runPair(65536 / sizeof(float));
  for (int r = 0; r < 2; r++) assert_int_equal(ranks[r].sent, 1);
}

int main(void) {
  setenv("COLL_NET", "ib", 1);
  setenv("COLL_SHM_DISABLE", "1", 1);
  setenv("COLL_MAILBOX_BYTES", "0", 1);
  setenv("COLL_NCHANNELS", "2", 1);
  setenv("COLL_SOCKET_IFNAME", "lo", 1);
  unsetenv("COLL_CHUNKSIZE");
  alarm(120);
  ibFakeDevSpec d = ibFakeRxe("fake0", 1, IBV_MTU_1024);
  ibFakeInstall(&d, 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_large_one_message_per_channel),
      cmocka_unit_test(test_odd_size),
      cmocka_unit_test(test_small_one_message),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
