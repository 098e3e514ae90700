/*
 * shm_internal.h - internals shared by the files of the shm transport
 * (shm.c: table; shm_setup.c: connection setup; shm_ring.c: data path;
 * shm_cma.c: single copy): the layout of the shared segment, the
 * per-process comm and request, and the functions they call each other by.
 *
 * Shared segment (created by the sender, mapped by both):
 *   shmHdr                   4 KiB-rounded: counters, flags, slot descriptors
 *   data[COLL_SHM_NSLOTS]    slotBytes each (page multiples)
 * Each 64-byte line of shmHdr past the first has one writer: the sender's
 * line holds head (slots published) and its closed and sleeping flags; the
 * receiver's line holds tail (slots released) and its flags. A slot
 * descriptor is written by the sender before head passes it and (status
 * only) by the receiver before tail passes it, so every plain field is
 * ordered by those two counters (seq_cst stores, acquire loads).
 */
#ifndef COLL_SHM_INTERNAL_H_
#define COLL_SHM_INTERNAL_H_

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "transports/shm/shm.h"

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2 && ATOMIC_INT_LOCK_FREE == 2,
               "shm needs lock-free (address-free) 32/64-bit atomics");

#define SHM_SEG_MAGIC 0x636f6c6c53484d31ULL /* "collSHM1" */
#define SHM_EFD_FULL 0xfffffffffffffffeULL  /* an eventfd at this count is not writable */
#define SHM_CHECK_S 0.05                    /* idle time between peer-alive checks */

enum { SHM_SLOT_FIRST = 1, SHM_SLOT_CONT = 2, SHM_SLOT_CMA = 3 };
enum { SHM_CMA_PENDING = 0, SHM_CMA_OK = 1, SHM_CMA_NACK = 2, SHM_CMA_TOOBIG = 3 };
enum { SHM_OPEN = 0, SHM_CLOSED = 1, SHM_FAILED = 2 }; /* values of the closed flags */

typedef struct {
  uint32_t kind;     /* SHM_SLOT_* */
  uint32_t status;   /* CMA only: SHM_CMA_*, written by the receiver */
  uint64_t msgLen;   /* whole message length */
  uint64_t chunkLen; /* payload bytes in this slot (CMA TOOBIG: receiver's posted size) */
  uint64_t addr;     /* CMA only: the sender's buffer address */
  uint64_t tag;      /* FIRST and CMA: the sender's tag (coll_net.h) */
  uint8_t pad[24];
} shmSlot;
_Static_assert(sizeof(shmSlot) == 64, "slot descriptor is one cache line");

typedef struct {
  uint64_t magic, totalBytes, slotBytes, dataOff;
  uint32_t nslots;
  int32_t senderPid;
  uint64_t cmaThreshold; /* single copy from this size as agreed at connect (0: never) */
  uint8_t pad0[16];
  /* written by the sender */
  _Alignas(64) _Atomic uint64_t head;
  _Atomic uint32_t sendClosed;   /* SHM_OPEN / SHM_CLOSED / SHM_FAILED */
  _Atomic uint32_t sendSleeping; /* sender may sleep on spaceFd */
  /* written by the receiver */
  _Alignas(64) _Atomic uint64_t tail;
  _Atomic uint32_t recvClosed;
  _Atomic uint32_t recvSleeping; /* receiver may sleep on dataFd */
  _Alignas(64) shmSlot slots[COLL_SHM_NSLOTS];
} shmHdr;

/* What a receiver that could not take a connection writes back on its
 * socket before closing it (shm_setup.c). */
#define SHM_NAK_MAGIC 0x636f6c6c53484d4eULL /* "collSHMN" */
typedef struct {
  uint64_t magic;
  int32_t err; /* errno: EMFILE, ENFILE... */
  int32_t pid; /* the receiver */
} shmNak;

enum { SHM_REQ_FREE = 0, SHM_REQ_ACTIVE, SHM_REQ_DONE };
enum { SHM_PH_NEW = 0, SHM_PH_COPY, SHM_PH_CMA, SHM_PH_CMA_WAIT, SHM_PH_DONE };

struct shmComm;
typedef struct {
  struct shmComm* comm;
  int state;
  int phase;     /* sender: SHM_PH_* */
  int started;   /* first slot of the message sent / seen */
  char* data;
  size_t size;   /* posted size (send: message length; recv: capacity) */
  size_t len;    /* message length (recv: known once started) */
  size_t off;    /* payload bytes moved */
  uint64_t tag;  /* send: posted; recv: the sender's, once started */
  uint32_t cmaStatus; /* sender: the receiver's answer to its CMA descriptor */
  size_t cmaPosted;   /* sender: the receiver's posted size (TOOBIG answer) */
  /* receiver of collShmIrecvReduce: data = reduce(payload, local) as read */
  collShmReduceFn reduce; /* NULL: a plain receive */
  const char* local;
  size_t esize;
} shmReq;

#define SHM_TAG_COMM 0x53434f4du   /* first field of a send/recv comm */
#define SHM_TAG_LISTEN 0x534c534eu /* first field of a listen comm */

typedef struct shmComm {
  uint32_t tag;     /* SHM_TAG_COMM */
  int isSend;
  shmHdr* hdr;
  size_t mapBytes;
  char* data;       /* first slot's payload */
  size_t slotBytes;
  int sock, dataFd, spaceFd;
  int peerPid;      /* from SO_PEERCRED: valid in this pid namespace, 0 if not */
  uint64_t mine;    /* own counter (sender: head, receiver: tail) */
  uint64_t peer;    /* the other side's counter as last loaded */
  int armed;        /* our sleeping flag is set in the header */
  int stale;        /* our eventfd may hold an old wake-up: reset it before sleeping */
  int cmaOn;        /* sender: may send descriptors; receiver: reads them (else NACK) */
  size_t cmaThreshold; /* both ends: CMA from this size as agreed at connect; 0: never */
  double lastCheck; /* last peer-alive check of the socket (collTimeNow) */
  uint64_t posted, progressed;
  shmReq* slotOwner[COLL_SHM_NSLOTS]; /* sender: request awaiting the answer in that slot */
  unsigned long long copyMsgs, cmaMsgs, reduceMsgs;
  char* bounce;     /* receiver: SHM_RR_PIECE bytes a reducing single-copy read lands in (lazily) */
  collResult_t err;
  char errMsg[400];
  uint64_t errTag;  /* receiver: the sender's tag of a message refused as too large (reported by test) */
  shmReq reqs[COLL_SHM_MAX_REQUESTS];
} shmComm;

/* A reducing single-copy receive reads the sender's buffer in pieces of
 * this many bytes into c->bounce, which stays in the cache while the piece
 * is reduced from it. */
#define SHM_RR_PIECE ((size_t)64 << 10)

/* shm_ring.c: posts an isend (isSend = 1) or irecv on c; *request NULL = retry.
 * reduce (receiver only; NULL: plain): data = reduce(payload, local), esize
 * bytes per element (collShmIrecvReduce). */
collResult_t shmPost(shmComm* c, int isSend, void* data, size_t size, uint64_t tag, collShmReduceFn reduce,
                     const void* local, size_t esize, void** request);
/* shm_ring.c: test() of the table: drives c's FIFO, reports and releases request. */
collResult_t shmTest(void* request, int* done, size_t* size, uint64_t* tag);
/* shm_ring.c: prepares c for a poll() by the caller and returns the fd to poll
 * (POLLIN on dataFd for a receiver, POLLOUT on spaceFd for a sender). */
int shmArm(shmComm* c);
/* shm_ring.c: marks c closed in the shared header and wakes the peer. */
void shmMarkClosed(shmComm* c);
/* shm_ring.c: sender: 1 if the receiver rejected the connection (a NAK on
 * the socket), with its reason in why; 0 if not (never blocks). */
int shmPeerRejected(shmComm* c, char* why, size_t whySize);

/* shm_setup.c: the table's listen, connect, accept, closeSend/closeRecv
 * (one function for both) and closeListen. */
typedef struct shmListen shmListen;
collResult_t shmListenFn(int dev, void* handle, void** listenComm);
collResult_t shmConnect(int dev, const void* handle, void** sendComm);
collResult_t shmAccept(void* listenComm, void** recvComm);
collResult_t shmCloseComm(void* comm);
collResult_t shmCloseListen(void* listenComm);
/* shm_setup.c: the listen socket of a listen comm. */
int shmListenFd(const shmListen* l);
/* shm_setup.c: slot bytes, data offset and total bytes of a new connection's
 * segment (from COLL_SHM_BUFFSIZE). */
void shmSizes(size_t* slotBytes, size_t* dataOff, size_t* total);

/* shm_cma.c: this process's single-copy threshold (0: never), decided once;
 * *why (if why) gets the reason for the log. */
size_t shmCmaThreshold(const char** why);
/* shm_cma.c: the threshold a connection uses given both ends' own: 0 unless
 * both are on, else the larger. Symmetric. */
size_t shmCmaAgree(size_t a, size_t b);

#endif
