/*
 * bootstrap.h - out-of-band rendezvous of a communicator's ranks.
 *
 * The unique id carries the root's address and a random 64-bit secret. The
 * root (a detached thread of the process that created the id) collects every
 * rank's ring address, checks the secret, and sends the table back; ranks then
 * connect into a TCP ring (rank -> rank+1) over which they allgather peer
 * information. Every message has a fixed size or a size bounded before any
 * allocation; every wait has a deadline and honours the abort flag.
 */
#ifndef COLL_BOOTSTRAP_H_
#define COLL_BOOTSTRAP_H_

#include <stdint.h>

#include "coll.h"
#include "misc/socket.h"

#define COLL_BOOT_MAGIC 0xc0110b00u

typedef struct {
  uint32_t magic;
  uint32_t version;
  uint64_t secret;
  collSockAddr root;
} collBootId; /* lives inside collUniqueId.internal */

typedef struct {
  int rank, nranks;
  uint64_t secret;
  int nextFd, prevFd; /* ring sockets, -1 when nranks == 1 */
  volatile int* abortFlag;
  double timeoutSec;  /* per bootstrap operation, 0 = none */
} collBootstrap;

/* Creates an id and starts its root thread listening on `addr` (port 0 =
 * ephemeral; bindAny: listen on every interface of that family, advertise
 * addr). `secret` 0 draws a random one. */
collResult_t collBootCreateRoot(collBootId* id, const collSockAddr* addr,
                                uint64_t secret, int bindAny);
/* Joins the job: registers with the root, builds the ring. */
collResult_t collBootInit(collBootstrap* b, const collBootId* id, int rank,
                          int nranks, volatile int* abortFlag, double timeoutSec);
/* all: nranks * bytes; the caller's own block at all + rank*bytes is sent. */
collResult_t collBootAllGather(collBootstrap* b, void* all, size_t bytes);
collResult_t collBootBarrier(collBootstrap* b);
void collBootClose(collBootstrap* b);
/* Checks a hello the root received (len bytes from the network): magic,
 * secret, version, rank < nranks <= 65536, the job's nranks (nranks <= 0:
 * not known yet), address family. Returns 1 and the rank and nranks it
 * claims when valid, else 0. Never reads past len. */
int collBootHelloValid(const void* buf, size_t len, uint64_t secret, int nranks, int* rank, int* helloNranks);
/* 64-bit random from getrandom(2). */
uint64_t collRandom64(void);

#endif
