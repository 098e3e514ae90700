/*
 * fakecuda.h - what the files of the fake CUDA driver share.
 *
 * libcollfakecuda.so implements, on host memory and host threads, every
 * driver entry point coll fetches (COLL_CUDA_SYMBOLS of
 * src/device/cuda_loader.h), so that coll's whole device path runs in CI
 * without a GPU: point COLL_CUDA_LIBRARY at it. <cuda.h> gives the types
 * only; nothing links libcuda or the CUDA runtime.
 *
 * Device memory lives at addresses the host cannot touch (a memfd mapped
 * PROT_NONE); the fake's own stream workers reach it through a second,
 * read-write mapping of the same memfd (fkTranslate). Host code that
 * dereferences a device pointer therefore crashes, as it would on a GPU.
 *
 * Environment (read once, at the first call):
 *   FAKECUDA_DEVICES=n      devices (default 1; 0: cuInit says NO_DEVICE)
 *   FAKECUDA_PCI=a,b,...    PCI bus ids of the devices (default 0000:18:00.0, 0000:2A:00.0, ...)
 *   FAKECUDA_SMS=n          multiprocessors per device (default 132)
 *   FAKECUDA_NO_MEMOPS=1    no stream memory operations (cuStreamWaitValue32 says NOT_SUPPORTED)
 *   FAKECUDA_NO_PEER=1      cuDeviceCanAccessPeer answers 0 and no device maps another's memory
 *   FAKECUDA_NO_FD=1        devices cannot export memory as POSIX file descriptors
 *   FAKECUDA_NO_DMABUF=1    no dma-buf export: CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0 and
 *                           cuMemGetHandleForAddressRange says NOT_SUPPORTED (FAKECUDA_MISSING=
 *                           cuMemGetHandleForAddressRange: a driver without the entry point)
 *   FAKECUDA_RDMA_ORDERING=o  what GPU_DIRECT_RDMA_WRITES_ORDERING says (default 0, NONE: NIC
 *                           writes need cuFlushGPUDirectRDMAWrites, which the fake supports
 *                           and counts: fakecudaFlushes; 100 = OWNER: no flush needed)
 *   FAKECUDA_DELAY_US=d     every stream operation starts d us late
 *   FAKECUDA_FAIL=e:k[:r][,e:k[:r]...]  the k-th call of entry e (e.g. cuMemAlloc) returns
 *                           CUresult r (default OUT_OF_MEMORY for allocations, LAUNCH_FAILED
 *                           for launches, UNKNOWN otherwise)
 *   FAKECUDA_HANG=e:k[,e:k...]  the k-th call of entry e succeeds but the stream operation it
 *                           enqueues (a copy, an event record, ...) never completes: its stream
 *                           and every wait for it stay busy forever, as on a hung GPU (counted
 *                           with FAKECUDA_FAIL's rules: at most 8 in all)
 *   FAKECUDA_VERSION=v      what cuDriverGetVersion says (default: the headers' CUDA_VERSION)
 *   FAKECUDA_MISSING=name   cuGetProcAddress does not know this entry
 *   FAKECUDA_MEM_MB=m       device memory per device (default 16384)
 *   FAKECUDA_PINNED_KB=k    pinned host memory (cuMemHostAlloc) the process may hold at once, in
 *                           KiB (default 0: no limit); an allocation beyond says OUT_OF_MEMORY
 *   FAKECUDA_VERBOSE=1      say on stderr why a call failed
 *
 * Counters tests read with dlsym: fakecudaCalls(name) (calls of one entry
 * point, failed ones included), fakecudaPolls() (cuEventQuery and
 * cuStreamQuery), fakecudaFlushes() (successful cuFlushGPUDirectRDMAWrites).
 */
#ifndef COLL_FAKECUDA_H_
#define COLL_FAKECUDA_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

#include "device/cuda_loader.h"

/* Every entry point: fk_<name> has the type <cuda.h> gives <name>. */
#define FK_DECL(name) extern __typeof__(name) fk_##name;
COLL_CUDA_SYMBOLS(FK_DECL)
COLL_CUDA_OPTIONAL_SYMBOLS(FK_DECL)
#undef FK_DECL

#define FK_MAX_DEVS 16

/* What tests may dlsym besides the driver's three entry points. */
#define FK_EXPORT __attribute__((visibility("default")))

/* ---- configuration (entry.c) -------------------------------------------- */
typedef struct {
  int devices, sms, noMemOps, noPeer, noFd, noDmaBuf, rdmaOrdering, delayUs, version, verbose;
  size_t memBytes, pinnedBytes; /* pinnedBytes 0: no limit */
  char pci[FK_MAX_DEVS][16];
  char missing[64];
} fkConfig;
extern fkConfig fkCfg;

/* Reads the environment once. */
void fkInitOnce(void);

/* First thing of every entry point: the configuration, an injected failure
 * (FAKECUDA_FAIL), a call from inside a host function (NOT_PERMITTED) and a
 * sticky error. Returns CUDA_SUCCESS to go on. */
CUresult fkEnter(const char* name);
#define FK_ENTER(name)                    \
  do {                                    \
    CUresult fkR_ = fkEnter(name);        \
    if (fkR_ != CUDA_SUCCESS) return fkR_; \
  } while (0)

/* Prints why when FAKECUDA_VERBOSE is set; returns r. */
CUresult fkFail(CUresult r, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/* Sticky error of the process (an illegal address in a kernel): every later
 * call returns it, as after a fault on a real GPU. */
extern _Atomic int fkSticky;
void fkSetSticky(CUresult r);

/* 1 from fkEnter of a call that FAKECUDA_HANG names until its operation is
 * pushed (fkPush marks it: the worker never completes it). */
extern _Thread_local int fkHangNext;

/* 1 while this thread runs a host function (cuLaunchHostFunc). */
extern _Thread_local int fkInHostFn;

/* ---- devices and contexts (device.c) -------------------------------------- */
typedef struct fkCtx {
  uint32_t magic;
  int dev;
  int refs;
} fkCtx;
#define FK_CTX_MAGIC 0x66634358u
/* The calling thread's current context (NULL: none). */
fkCtx* fkCurrent(void);
/* The device of the current context, or -1 (then the caller returns
 * CUDA_ERROR_INVALID_CONTEXT). */
int fkCurrentDev(void);
fkCtx* fkPrimary(int dev);

/* ---- memory (memory.c, vmm.c) ----------------------------------------------- */
enum { FK_MEM_DEVICE = 1, FK_MEM_HOST = 2, FK_MEM_VMM = 3 };

struct fkAlloc;
typedef struct {
  uintptr_t base; /* the address coll sees */
  size_t size;
  char* alias;    /* where the fake's workers read and write it */
  int kind;       /* FK_MEM_* */
  int dev;        /* device (host memory: the device current at allocation) */
  unsigned readMask, writeMask; /* FK_MEM_VMM: devices cuMemSetAccess allowed */
  struct fkAlloc* alloc;        /* FK_MEM_VMM: the physical allocation */
  unsigned long long id;        /* buffer id */
  int fd;                       /* FK_MEM_DEVICE: the memfd behind it (a dma-buf export dups it), else -1 */
} fkRegion;

/* The region table: read-locked while a worker uses a translated address. */
extern pthread_rwlock_t fkRegLock;
int fkRegionAdd(const fkRegion* r);
/* The region holding p (locked by the caller), or NULL. */
fkRegion* fkRegionFind(uintptr_t p);
/* Removes the region starting at base; returns 0, or -1 if none. Caller holds the write lock. */
int fkRegionRemove(uintptr_t base, fkRegion* out);

/* Worker side, with fkRegLock read-locked: where [p, p+n) can be read or
 * written by device dev (-1: the copy engine, any device), or NULL when it
 * is not device-accessible memory of that device (a kernel fault). Plain
 * host memory (no region) is returned as is when hostOk. */
void* fkTranslate(uintptr_t p, size_t n, int dev, int write, int hostOk);

/* Every stream of device dev idles (cuMemFree and cuMemFreeHost wait, as
 * the real ones synchronize the device); after 5 s it says on stderr what
 * the device is waiting for, naming `why` (the caller). */
void fkSyncDevice(int dev, const char* why);

/* ---- streams (stream.c) -------------------------------------------------------- */
typedef struct fkOp fkOp;
typedef struct fkStream {
  uint32_t magic;
  int dev;
  int blocking;  /* synchronizes with the legacy stream */
  int legacy;    /* the device's legacy default stream */
  int destroyed;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  fkOp *head, *tail;
  fkOp* cur;          /* the operation the worker runs now (mu) */
  uint64_t enq, done; /* operations enqueued, completed (in order) */
  pthread_t thread;
  struct fkStream* next; /* all streams */
} fkStream;
#define FK_STREAM_MAGIC 0x66635354u

/* The stream a CUstream names (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD:
 * the current device's legacy stream), or NULL (sets *err). */
fkStream* fkStreamOf(CUstream s, CUresult* err);

/* Kernel body run by a stream worker: returns CUDA_SUCCESS or a fault. */
typedef CUresult (*fkKernelExec)(const void* kernel, const unsigned char* args, unsigned grid[3], unsigned block[3],
                                 int dev);

/* ---- stream operations (stream.c; events in event.c) ---------------------------- */
enum { OP_COPY, OP_SET, OP_KERNEL, OP_EVENT, OP_WAIT_STREAM, OP_WAIT_VALUE, OP_WRITE_VALUE, OP_HOSTFN, OP_EXIT };

typedef struct fkEvent {
  uint32_t magic;
  unsigned flags;
  int refs; /* the handle + pending record operations (fkEvLock) */
  int destroyed;
  fkStream* s; /* last record: stream and operation number */
  uint64_t seq;
  long long timeNs; /* when the last record ran; -1 before */
} fkEvent;
#define FK_EVENT_MAGIC 0x66634556u

struct fkOp {
  int kind;
  fkOp* next;
  uint64_t seq;
  uintptr_t dst, src;
  size_t n;
  unsigned char val;
  const void* kernel;
  fkKernelExec fn;
  unsigned grid[3], block[3];
  unsigned char args[64];
  fkEvent* ev;
  fkStream* other;
  uint64_t otherSeq;
  uint32_t value;
  unsigned flags;
  CUhostFn hfn;
  void* harg;
  int hang; /* FAKECUDA_HANG: never completes */
};

/* Guards every event's record target, time and references. */
extern pthread_mutex_t fkEvLock;
/* A zeroed operation of kind (NULL: out of memory). */
fkOp* fkNewOp(int kind);
/* Appends op to s (which owns it from here) after the legacy stream's
 * implicit synchronization; returns its number. */
uint64_t fkPush(fkStream* s, fkOp* op);
/* Blocks until s completed operation seq. */
void fkWaitSeq(fkStream* s, uint64_t seq);
/* Drops one reference of e (event.c); frees it at the last. */
void fkEventUnref(fkEvent* e);

/* Enqueues a launch of kernel with argument bytes args (copied). */
CUresult fkEnqueueKernel(fkStream* s, const void* kernel, fkKernelExec fn, const void* args, size_t argBytes,
                         const unsigned grid[3], const unsigned block[3]);

#endif
