/*
 * p2p_internal.h - what the files of the p2p transport share: the shared
 * header page, the comm and request, and their functions (p2p.h has the
 * design).
 *
 * Shared header (a memfd page created by the sender, mapped by both): the
 * sender's line holds head (slots published) and its closed flag, the
 * receiver's line tail (slots released) and its flag; slot k's descriptor
 * is written by the sender before head passes k. Slot k's bytes are at
 * ring + k * slotBytes in GPU memory.
 */
#ifndef COLL_P2P_INTERNAL_H_
#define COLL_P2P_INTERNAL_H_

#include <stdatomic.h>
#include <stdint.h>

#include "transports/p2p/p2p.h"

#ifdef COLL_HAVE_CUDA
#include "device/cuda_loader.h"

#define P2P_HDR_MAGIC 0x636f6c6c50325048ULL /* "collP2PH" */
#define P2P_CHECK_S 0.05                    /* idle time between peer-alive checks */

enum { P2P_SLOT_FIRST = 1, P2P_SLOT_CONT = 2 };
enum { P2P_OPEN = 0, P2P_CLOSED = 1 };

typedef struct {
  uint32_t kind;     /* P2P_SLOT_* */
  uint32_t pad0;
  uint64_t msgLen;   /* whole message */
  uint64_t chunkLen; /* bytes in this slot */
  uint64_t tag;      /* the sender's tag (FIRST) */
  uint8_t pad[32];
} p2pSlot;
_Static_assert(sizeof(p2pSlot) == 64, "slot descriptor is one cache line");

typedef struct {
  uint64_t magic, ringBytes, slotBytes;
  uint32_t nslots;
  int32_t senderPid;
  uint8_t pad0[32];
  _Alignas(64) _Atomic uint64_t head; /* sender */
  _Atomic uint32_t sendClosed;
  _Alignas(64) _Atomic uint64_t tail; /* receiver */
  _Atomic uint32_t recvClosed;
  _Alignas(64) p2pSlot slots[COLL_P2P_NSLOTS];
} p2pHdr;

enum { P2P_REQ_FREE = 0, P2P_REQ_ACTIVE, P2P_REQ_DONE };

struct p2pComm;
typedef struct {
  struct p2pComm* comm;
  int state;
  int started;  /* receiver: the message's first slot was seen */
  CUdeviceptr data;
  size_t size;  /* send: length; recv: capacity */
  size_t len;   /* message length (recv: once started) */
  size_t off;   /* bytes whose copy was enqueued */
  uint64_t tag; /* send: posted; recv: the sender's */
} p2pReq;

#define P2P_TAG_COMM 0x50325043u   /* "P2PC": first field of a send/recv comm */
#define P2P_TAG_LISTEN 0x5032504cu /* "P2PL": first field of a listen comm */

typedef struct p2pComm {
  uint32_t tag; /* P2P_TAG_COMM */
  int isSend;
  p2pHdr* hdr;
  size_t hdrBytes;
  CUdeviceptr ring; /* this process's mapping of the ring */
  size_t ringBytes, slotBytes;
  CUmemGenericAllocationHandle alloc; /* sender: the allocation (released at close) */
  CUcontext ctx;
  int dev;
  CUstream stream;
  CUevent ev[COLL_P2P_NSLOTS];
  int sock;
  int peerPid, sameProcess;
  double lastCheck;
  uint64_t issued; /* slots whose copy (in or out) is enqueued */
  uint64_t mine;   /* sender: head published; receiver: tail released */
  p2pReq* slotReq[COLL_P2P_NSLOTS]; /* the request whose chunk is in the slot */
  int slotLast[COLL_P2P_NSLOTS];    /* that chunk ends its message */
  p2pReq* queue[COLL_P2P_MAX_REQUESTS]; /* posted order */
  uint64_t qPost, qWork, qDone;         /* posted; next to issue chunks of; completed */
  unsigned long long msgs, bytes;
  collResult_t err;
  char errMsg[400];
  p2pReq reqs[COLL_P2P_MAX_REQUESTS];
} p2pComm;

/* p2p_ring.c: isend (isSend = 1) / irecv on c; *request NULL = retry. */
collResult_t p2pPost(p2pComm* c, int isSend, CUdeviceptr data, size_t size, uint64_t tag, void** request);
/* p2p_ring.c: test() of the table. */
collResult_t p2pTest(void* request, int* done, size_t* size, uint64_t* tag);
/* p2p_ring.c: makes ctx current on this thread and returns the context
 * that was current (the caller's: a user thread keeps its own device). */
CUcontext p2pEnterCtx(CUcontext ctx);
/* p2p_ring.c: makes prev current again (if it is not). */
void p2pLeaveCtx(CUcontext prev);

/* p2p_setup.c: listen, connect, accept, close of the table. */
collResult_t p2pListen(int dev, void* handle, void** listenComm);
collResult_t p2pConnect(int dev, const void* handle, void** sendComm);
collResult_t p2pAccept(void* listenComm, void** recvComm);
collResult_t p2pCloseComm(void* comm);
collResult_t p2pCloseListen(void* listenComm);
#endif

#endif
