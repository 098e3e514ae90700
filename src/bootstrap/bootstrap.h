/*
 * bootstrap.h - out-of-band rendezvous of a communicator's ranks.
 *
 * The unique id carries the root's address and the job key (32 random
 * bytes from collGetUniqueId; in launcher mode derived from the job id and
 * the rendezvous address). Each rank sends the root an authenticated hello
 * with the address of its ring listener; the root answers each with an
 * authenticated reply: the job's nonce and the ring address of rank+1, or
 * why the job failed (boot_proto.h, boot_root.c). Ranks then connect into a
 * TCP ring (rank -> rank+1, authenticated with the nonce) over which they
 * allgather peer information. Every message has a fixed size; every wait
 * has a deadline and honours the abort flag.
 */
#ifndef COLL_BOOTSTRAP_H_
#define COLL_BOOTSTRAP_H_

#include <stdint.h>

#include "bootstrap/boot_proto.h"
#include "bootstrap/boot_root.h"
#include "coll.h"
#include "misc/socket.h"

#define COLL_BOOT_MAGIC 0xc0110b01u
/* collBootId.flags: the root listened before the id existed (collGetUniqueId),
 * so a refused connection means it is gone, not that it is late. */
#define COLL_BOOT_ROOT_FIRST 1u

typedef struct {
  uint32_t magic;
  uint32_t version;
  uint32_t flags;
  uint32_t pad;
  uint8_t key[COLL_BOOT_KEY_BYTES];
  collSockAddr root;
} collBootId; /* lives inside collUniqueId.internal */

typedef struct {
  int rank, nranks;
  uint8_t key[COLL_BOOT_KEY_BYTES];
  uint64_t jobNonce; /* drawn by the root for this communicator */
  uint64_t secret;   /* token of the engine's connection hellos (collBootConnToken) */
  int nextFd, prevFd; /* ring sockets, -1 when nranks == 1 */
  volatile int* abortFlag;
  double timeoutSec;  /* per bootstrap operation, 0 = none */
  collBootRoot* root; /* launcher mode, rank 0: the root serving this communicator's address */
} collBootstrap;

/* Creates an id whose root listens on `addr` (port 0 = ephemeral; bindAny:
 * every interface of that family, advertise addr), with a random key. The
 * root ends on its own: formed, failed or after COLL_INIT_TIMEOUT. */
collResult_t collBootCreateRoot(collBootId* id, const collSockAddr* addr, int bindAny);
/* Joins the job: registers with the root, builds the ring. initTimeoutSec
 * bounds the rendezvous (0: none); opTimeoutSec is kept for later
 * collBootAllGather calls. b->root (set before, may be NULL) is owned by b
 * from here on, also on failure. */
collResult_t collBootInit(collBootstrap* b, const collBootId* id, int rank, int nranks, volatile int* abortFlag,
                          double initTimeoutSec);
/* Asks the process that holds the rendezvous address of id what it is,
 * presenting a hello as `rank` of `nranks` (so that a root of a job with the
 * same key fails loudly). Writes a description to buf. */
void collBootProbeHolder(const collBootId* id, int rank, int nranks, char* buf, size_t len);
/* all: nranks * bytes; the caller's own block at all + rank*bytes is sent. */
collResult_t collBootAllGather(collBootstrap* b, void* all, size_t bytes);
collResult_t collBootBarrier(collBootstrap* b);
/* Closes the ring and stops an owned root (reason: why, for ranks still
 * joining; NULL on a normal destroy). */
void collBootClose(collBootstrap* b, const char* reason);
/* 64-bit random from getrandom(2). */
uint64_t collRandom64(void);
/* Fills buf with random bytes (getrandom(2)). */
void collRandomBytes(void* buf, size_t len);

#endif
