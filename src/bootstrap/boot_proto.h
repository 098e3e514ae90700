/*
 * boot_proto.h - the bootstrap's wire messages, their MACs and their
 * validation (pure functions; fuzzed by tests/fuzz/fuzz_bootstrap*.c).
 *
 * Every message is fixed-size and ends in an HMAC-SHA256 (nettle) keyed with
 * the job key (collBootId.key), over every byte before it. The key itself
 * never travels.
 *
 *  rank -> root   HELLO  {rank, nranks, pid, rankNonce, prevNonce, ringAddr,
 *                         nsId, unixName, startedUs}
 *  root -> rank   REPLY  OK   {jobNonce, address of rank+1's ring listener, and
 *                             its nsId and abstract AF_UNIX name: a rank in the
 *                             same network namespace of the same kernel connects
 *                             there, holding no TCP port}
 *                        ERR  {status, reason}: the job failed (a rank joined
 *                             twice, a different WORLD_SIZE, the init timeout
 *                             with the missing ranks); ranks fail at once
 *                        BUSY the rendezvous is serving a communicator this
 *                             rank's process belonged to: retry later
 *                        UNAUTH {reason}, no MAC: the hello was not from this
 *                             job (wrong key or version); the rank fails
 *  rank -> rank+1 RING   {rank, jobNonce}
 *
 * A reply counts only with the MAC, the hello's rankNonce echoed, the rank
 * and nranks echoed, and a usable next address (AF_INET/AF_INET6, port != 0),
 * so nothing from an unauthenticated reply is ever used as an address. The
 * jobNonce is drawn by the root: ring hellos and the engine's connection
 * token (collBootConnToken) depend on it, so two communicators (two jobs on
 * one rendezvous address) never accept each other's connections.
 */
#ifndef COLL_BOOT_PROTO_H_
#define COLL_BOOT_PROTO_H_

#include <stddef.h>
#include <stdint.h>

#include "misc/socket.h"

#define COLL_BOOT_KEY_BYTES 32
#define COLL_BOOT_MAC_BYTES 32
#define COLL_BOOT_REASON_BYTES 320
#define COLL_BOOT_MAX_RANKS 65536
#define COLL_BOOT_UNIX_BYTES 40 /* abstract AF_UNIX name of a ring listener, NUL-terminated */

enum {
  COLL_BOOT_HELLO = 1,
  COLL_BOOT_REPLY_OK = 2,
  COLL_BOOT_REPLY_ERR = 3,
  COLL_BOOT_REPLY_BUSY = 4,
  COLL_BOOT_REPLY_UNAUTH = 5,
  COLL_BOOT_RING = 6
};

typedef struct {
  uint32_t magic, version, kind;
  int32_t rank, nranks;
  uint32_t pid;
  uint64_t rankNonce; /* fresh per attempt: the reply must echo it */
  uint64_t prevNonce; /* jobNonce of this process's last communicator at this root, 0: none */
  collSockAddr ringAddr;
  uint8_t pad[4];
  uint64_t nsId; /* collBootNsId() of the sender */
  char unixName[COLL_BOOT_UNIX_BYTES];
  uint64_t startedUs; /* when the sender's process started (CLOCK_REALTIME, us), 0: unknown */
  uint8_t mac[COLL_BOOT_MAC_BYTES];
} collBootHelloMsg;

typedef struct {
  uint32_t magic, version, kind;
  int32_t status; /* collResult_t of an ERR */
  int32_t rank, nranks;
  uint64_t rankNonce;
  uint64_t jobNonce;
  collSockAddr next;
  uint8_t pad[4];
  uint64_t nextNsId;
  char nextUnix[COLL_BOOT_UNIX_BYTES]; /* "" or rank+1's abstract AF_UNIX ring listener */
  char reason[COLL_BOOT_REASON_BYTES];
  uint8_t mac[COLL_BOOT_MAC_BYTES]; /* zero in UNAUTH */
} collBootReplyMsg;

/* Where rank+1 listens, as an authentic OK reply says. */
typedef struct {
  collSockAddr addr;
  uint64_t nsId;
  char unixName[COLL_BOOT_UNIX_BYTES]; /* "" = none */
} collBootNext;

typedef struct {
  uint32_t magic, version, kind;
  int32_t rank;
  uint64_t jobNonce;
  uint8_t mac[COLL_BOOT_MAC_BYTES];
} collBootRingMsg;

/* HMAC-SHA256(key, msg[0 .. len)) into mac. */
void collBootMac(const uint8_t key[COLL_BOOT_KEY_BYTES], const void* msg, size_t len, uint8_t mac[COLL_BOOT_MAC_BYTES]);
/* Derives the job key of launcher mode from text that every rank of the job
 * sees the same (job id, rendezvous address). */
void collBootDeriveKey(const char* a, const char* b, uint8_t key[COLL_BOOT_KEY_BYTES]);
/* The token the engine's connection hellos carry (engine/conn.c): a MAC of
 * the jobNonce, so it differs per communicator and reveals nothing of the key. */
uint64_t collBootConnToken(const uint8_t key[COLL_BOOT_KEY_BYTES], uint64_t jobNonce);

/* Fills in magic, version, kind and the MAC. */
void collBootSealHello(collBootHelloMsg* h, const uint8_t key[COLL_BOOT_KEY_BYTES]);
void collBootSealReply(collBootReplyMsg* m, const uint8_t key[COLL_BOOT_KEY_BYTES]);
void collBootSealRing(collBootRingMsg* m, const uint8_t key[COLL_BOOT_KEY_BYTES]);

/* What the root makes of a hello (len bytes from the network). */
typedef enum {
  COLL_HELLO_OK = 0,      /* authentic and in range: *out is it */
  COLL_HELLO_GARBAGE,     /* wrong size or magic: not coll */
  COLL_HELLO_VERSION,     /* another coll version (*outVersion) */
  COLL_HELLO_BADMAC,      /* not this job's key */
  COLL_HELLO_RANGE        /* authentic, but rank/nranks/address out of range (why: in reason) */
} collHelloVerdict;
collHelloVerdict collBootCheckHello(const void* buf, size_t len, const uint8_t key[COLL_BOOT_KEY_BYTES],
                                    collBootHelloMsg* out, uint32_t* outVersion, char* reason, size_t reasonLen);

/* What a rank makes of a reply to its hello h. */
typedef enum {
  COLL_REPLY_OK = 0,   /* authentic, echoes h, next address usable */
  COLL_REPLY_ERR,      /* authentic error: *status and reason */
  COLL_REPLY_BUSY,     /* authentic: retry */
  COLL_REPLY_UNAUTH,   /* unauthenticated rejection: reason is the stranger's text (sanitized) */
  COLL_REPLY_INVALID   /* anything else (why: in reason) */
} collReplyVerdict;
collReplyVerdict collBootCheckReply(const void* buf, size_t len, const uint8_t key[COLL_BOOT_KEY_BYTES],
                                    const collBootHelloMsg* h, uint64_t* jobNonce, collBootNext* next,
                                    int* status, char* reason, size_t reasonLen);

/* 1 if a ring hello is authentic, from rank `want`, for jobNonce. */
int collBootCheckRing(const void* buf, size_t len, const uint8_t key[COLL_BOOT_KEY_BYTES], int want,
                      uint64_t jobNonce);

/* 1 if a is a usable peer address (AF_INET/AF_INET6, port != 0). */
int collBootAddrUsable(const collSockAddr* a);
/* 1 if s (n bytes) is "" or a NUL-terminated name of [A-Za-z0-9-]. */
int collBootUnixNameValid(const char* s, size_t n);
/* Identity of this process's network namespace on this kernel (boot id and
 * namespace inode): equal values can reach each other's abstract sockets. */
uint64_t collBootNsId(void);

#endif
