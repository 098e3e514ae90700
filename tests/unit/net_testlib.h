/*
 * net_testlib.h - transport-agnostic helpers and test bodies shared by the
 * transport unit tests (test_tcp.c, test_shm.c, test_loopback.c).
 *
 * Everything takes the transport as a `const collNet_t*`; helper_net.c
 * depends only on coll_net.h, cmocka, libc and pthreads (it is linked into
 * every unit test executable).
 *
 * Functions named netTest* and netCheck* / netMakePair / netClosePair /
 * netPostOk / netRunStream use cmocka asserts and belong on the test's main
 * thread. netPost, netWaitReq, netWaitPoll, netAcceptOne and the stream
 * functions (netSendStream, netRecvStream) never assert: they are usable from
 * threads and fork()ed children, and report through return values / counters.
 */
#ifndef COLL_TESTS_NET_TESTLIB_H_
#define COLL_TESTS_NET_TESTLIB_H_

#include <stddef.h>
#include <stdint.h>

#include "coll_net.h"

/* ---- byte patterns ------------------------------------------------------ */

/* Byte i of message `seed`. */
uint8_t netPat(size_t i, unsigned seed);
void netFill(uint8_t* b, size_t n, unsigned seed);
/* 1 if b holds message `seed` (n bytes), else 0. */
int netCheck(const uint8_t* b, size_t n, unsigned seed);

/* ---- one connection ----------------------------------------------------- */

typedef struct {
  void* listen;
  void* send;
  void* recv;
} netPair_t;

/* Accepts on l until a connection arrives (5 s at most); NULL on failure. */
void* netAcceptOne(const collNet_t* net, void* l);
/* listen + connect + accept within this process (asserts). */
void netMakePair(const collNet_t* net, netPair_t* p);
void netClosePair(const collNet_t* net, netPair_t* p);

/* Tests req until done without sleeping; returns the final result. */
collResult_t netWaitReq(const collNet_t* net, void* req, size_t* size);
/* Tests req until done, sleeping in poll() on the comm's fd in between (as
 * the engine does). *lostWakeups (if not NULL) counts polls that hit their
 * 1 s timeout. */
collResult_t netWaitPoll(const collNet_t* net, void* comm, void* req, size_t* size, int isSend,
                         int* lostWakeups);
/* Posts with retry while the pool is exhausted; NULL on an error. */
void* netPost(const collNet_t* net, void* comm, int isSend, void* buf, size_t n);
/* netPost that asserts success. */
void* netPostOk(const collNet_t* net, void* comm, int isSend, void* buf, size_t n);

/* ---- streams of messages ------------------------------------------------ */

typedef struct {
  size_t bigBase; /* message k with k % 50 == 49 (no size list) is bigBase + k bytes */
  int usePoll;    /* 1: wait through netWaitPoll (counting lost wake-ups); 0: netWaitReq */
} netStreamOpts_t;

typedef struct {
  const collNet_t* net;
  netStreamOpts_t opts;
  void* comm;
  int count;
  const size_t* sizes; /* NULL: netStreamSize's mix */
  unsigned seed0;
  int errors;      /* wrong sizes, bytes, guards or failed calls */
  int lostWakeups; /* polls that ran into their timeout */
} netStream_t;

netStream_t netStreamInit(const collNet_t* net, const netStreamOpts_t* opts, void* comm, int count,
                          const size_t* sizes, unsigned seed);
size_t netStreamSize(const netStream_t* s, int k);
/* Sender: up to 64 messages in flight, completion tested in FIFO order.
 * Takes a netStream_t* (pthread start routine). */
void* netSendStream(void* arg);
/* Receiver: up to 64 receives posted; checks every byte of each message plus
 * the 8 guard bytes behind the posted size. Takes a netStream_t*. */
void* netRecvStream(void* arg);
/* Runs a sender thread and the receiver here over pair p; asserts no errors
 * and no lost wake-ups on either side. */
void netRunStream(const collNet_t* net, const netStreamOpts_t* opts, netPair_t* p, int count,
                  const size_t* sizes, unsigned seed);

/* ---- shared checks and test bodies -------------------------------------- */

/* Table header, init, one device and its properties (name devName, host
 * pointers, no put, unlimited messages, device 1 invalid); *props gets
 * device 0's properties for transport-specific checks. */
void netCheckTable(const collNet_t* net, const char* name, const char* devName,
                   collNetProperties_t* props);
/* regMr/deregMr, iput unsupported, iflush a no-op, isend on the recv side. */
void netCheckStubs(const collNet_t* net, netPair_t* q);
/* 600 messages of the mix, up to 64 in flight each way. */
void netTestManyInFlight(const collNet_t* net, const netStreamOpts_t* opts);
/* Testing the last of 8 requests drives the earlier ones; receiving into a
 * larger buffer reports the sent size. */
void netTestTestDrivesEarlier(const collNet_t* net);
/* Each message delivers its sender's 64-bit tag (0, all ones, a pattern) at
 * sizes 0, 5 and bigSize; the receiver's posted tag does not matter. */
void netTestTags(const collNet_t* net, size_t bigSize);
/* Posts maxRequests zero-byte sends on comm into r (each must be accepted),
 * then checks that one more returns NULL (retry). */
void netFillRequestPool(const collNet_t* net, void* comm, void** r, int maxRequests);
/* 100 bytes sent, 64 posted: collRemoteError, nothing written into the
 * buffer or its guard, and the error is sticky for the next irecv. */
void netCheckOversize(const collNet_t* net, netPair_t* q);
/* The receiver closes; sends (even ones evenSize bytes, odd ones 1 MiB)
 * eventually fail with collRemoteError (no SIGPIPE), whose message contains
 * errSubstr if not NULL. */
void netTestPeerCloseSend(const collNet_t* net, size_t evenSize, const char* errSubstr);

#endif
