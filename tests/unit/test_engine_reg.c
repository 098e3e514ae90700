/*
 * test_engine_reg.c - memory registration owned by the engine (engine/reg.h)
 * on a transport that counts its regMr/deregMr calls: a reused buffer is a
 * cache hit, a buffer freed and mapped again at the same address (the remap
 * hazard) is registered anew, a change of one page of a range is seen, the
 * engine's own buffers are forgotten when they move, registrations held by
 * posts in flight survive invalidation until done, small messages and
 * transports that need no registration get none, and freeing the state
 * releases everything. Where page frames are not readable (no
 * CAP_SYS_ADMIN) the default is one registration per message: checked too.
 * GPU memory (test_device_memory, run by fakecuda.engine_reg_dev on the fake
 * driver; skipped without a driver): registered per allocation at any size
 * through regMrDmaBuf (the dma-buf fd closed after), regMr(COLL_PTR_CUDA)
 * without COLL_PTR_DMABUF, a refusal an error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/comm.h"
#include "device/cuda_loader.h"
#include "device/devexec.h"
#include "engine/reg.h"
#include "misc/log.h"

static int regs, deregs, live;

static collResult_t cntReg(void* comm, void* data, size_t size, int ptrType, void** mhandle) {
  (void)comm;
  (void)data;
  (void)size;
  assert_int_equal(ptrType, COLL_PTR_HOST);
  regs++;
  live++;
  *mhandle = (void*)(uintptr_t)(0x1000 + regs); /* a distinct handle per registration */
  return collSuccess;
}
static collResult_t cntDereg(void* comm, void* mhandle) {
  (void)comm;
  (void)mhandle;
  deregs++;
  live--;
  return collSuccess;
}

static const collNet_t counting = {.name = "counting", .regMr = cntReg, .deregMr = cntDereg};

static struct collComm C;
static uint8_t kind[2];
static int tcomm; /* stands for a connection */

static void setup(void) {
  memset(&C, 0, sizeof C);
  C.nranks = 2;
  C.peerKind = kind;
  kind[0] = kind[1] = 1;
  C.nets[1] = &counting;
  C.netReg[1] = 1;
  regs = deregs = live = 0;
}

static void* mapFresh(void* at, size_t bytes) {
  void* p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(p != MAP_FAILED);
  memset(p, 0x5a, bytes); /* present */
  if (!at) return p;
  /* new pages over the old range, allocated while the old ones still exist:
   * as when the old ones are pinned by a registration (this transport pins
   * nothing, so a munmap first could hand the same frames back) */
  void* q = mremap(p, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED, at);
  assert_ptr_equal(q, at);
  return q;
}

static void test_reuse_and_remap(void** st) {
  (void)st;
  setup();
  const size_t B = 256 << 10;
  char* buf = mapFresh(NULL, B);
  void* t1 = NULL;
  void* h1 = collEngineReg(&C, 1, &tcomm, buf, B, COLL_MEM_HOST, &t1);
  assert_non_null(h1);
  collEngineRegDone(&C, 1, &t1);
  assert_null(t1);
  void* t2 = NULL;
  void* h2 = collEngineReg(&C, 1, &tcomm, buf + 4096, 64 << 10, COLL_MEM_HOST, &t2); /* a part of it */
  collEngineRegDone(&C, 1, &t2);
  collEngineRegStats s;
  collEngineRegGetStats(&C, &s);
  if (!collEngineRegFramesReadable()) { /* the default then registers per message */
    assert_int_equal(s.mode, 0);
    assert_int_equal(regs, 2);
    assert_int_equal(deregs, 2);
    munmap(buf, B);
    collEngineRegFree(&C);
    skip();
  }
  assert_int_equal(s.mode, 1);
  assert_ptr_equal(h2, h1); /* a hit */
  assert_int_equal(regs, 1);
  assert_int_equal(s.hits, 1);
  /* freed and mapped again at the same address: new pages */
  assert_ptr_equal(mapFresh(buf, B), buf);
  void* t3 = NULL;
  void* h3 = collEngineReg(&C, 1, &tcomm, buf, B, COLL_MEM_HOST, &t3);
  assert_non_null(h3);
  assert_ptr_not_equal(h3, h1);
  assert_int_equal(regs, 2);
  assert_int_equal(deregs, 1); /* the stale one is gone */
  collEngineRegDone(&C, 1, &t3);
  /* one page in the middle replaced: seen on a request that covers it... */
  mapFresh(buf + 8 * 4096, 4096);
  void* t4 = NULL;
  collEngineReg(&C, 1, &tcomm, buf, 32 << 10, COLL_MEM_HOST, &t4); /* pages 0-7: untouched, a hit */
  collEngineRegDone(&C, 1, &t4);
  assert_int_equal(regs, 2);
  collEngineReg(&C, 1, &tcomm, buf + 4096, 64 << 10, COLL_MEM_HOST, &t4); /* covers page 8 */
  collEngineRegDone(&C, 1, &t4);
  assert_int_equal(regs, 3);
  assert_int_equal(deregs, 2);
  collEngineRegGetStats(&C, &s);
  assert_int_equal(s.invalidations, 2);
  assert_int_equal(s.live, 1);
  munmap(buf, B);
  collEngineRegFree(&C);
  assert_int_equal(live, 0);
}

/* A registration in flight while its buffer is remapped: the new post gets a
 * new one, the old one is released when its post completes. */
static void test_in_flight(void** st) {
  (void)st;
  setup();
  if (!collEngineRegFramesReadable()) skip();
  const size_t B = 64 << 10;
  char* buf = mapFresh(NULL, B);
  void* t1 = NULL;
  void* h1 = collEngineReg(&C, 1, &tcomm, buf, B, COLL_MEM_HOST, &t1);
  /* a refused post retried: the same handle, no second reference */
  assert_ptr_equal(collEngineReg(&C, 1, &tcomm, buf, B, COLL_MEM_HOST, &t1), h1);
  mapFresh(buf, B);
  void* t2 = NULL;
  void* h2 = collEngineReg(&C, 1, &tcomm, buf, B, COLL_MEM_HOST, &t2);
  assert_ptr_not_equal(h2, h1);
  assert_int_equal(live, 2);
  collEngineRegDone(&C, 1, &t1);
  assert_int_equal(live, 1); /* the stale one went with its last post */
  /* freeing the state with a post in flight releases that one too */
  collEngineRegFree(&C);
  assert_int_equal(live, 0);
  munmap(buf, B);
}

/* The engine's own buffers: forgotten when they move. */
static void test_forget(void** st) {
  (void)st;
  setup();
  if (!collEngineRegFramesReadable()) skip();
  const size_t B = 64 << 10;
  char* buf = mapFresh(NULL, B);
  void* t = NULL;
  collEngineReg(&C, 1, &tcomm, buf, B, COLL_MEM_HOST, &t);
  collEngineRegDone(&C, 1, &t);
  collEngineRegForget(&C, buf + B - 1, 1); /* any overlap */
  assert_int_equal(live, 0);
  collEngineReg(&C, 1, &tcomm, buf, B, COLL_MEM_HOST, &t);
  collEngineRegDone(&C, 1, &t);
  assert_int_equal(regs, 2);
  collEngineRegFree(&C);
  assert_int_equal(live, 0);
  munmap(buf, B);
}

/* Nothing to register: small messages, transports without registration. */
static void test_none(void** st) {
  (void)st;
  setup();
  static char small[16384];
  void* t = NULL;
  assert_null(collEngineReg(&C, 1, &tcomm, small, sizeof small, COLL_MEM_HOST, &t));
  assert_null(t);
  C.netReg[1] = 0;
  char* buf = mapFresh(NULL, 1 << 20);
  assert_null(collEngineReg(&C, 1, &tcomm, buf, 1 << 20, COLL_MEM_HOST, &t));
  assert_null(t);
  assert_int_equal(regs, 0);
  assert_null(C.reg);
  collEngineRegDone(&C, 1, &t); /* no token: nothing */
  munmap(buf, 1 << 20);
}

#ifdef COLL_HAVE_CUDA
/* ---- GPU memory (fakecuda.engine_reg_dev: the fake driver) ---------------- */
static int ptrSupport, dmabufRegs, cudaRegs, dmabufFail, lastFd = -1;
static uint64_t lastOff;
static size_t lastSize;

static collResult_t devProps(int dev, collNetProperties_t* p) {
  (void)dev;
  memset(p, 0, sizeof *p);
  p->ptrSupport = ptrSupport;
  return collSuccess;
}
static collResult_t devRegMr(void* comm, void* data, size_t size, int ptrType, void** mh) {
  (void)comm, (void)data;
  if (ptrType == COLL_PTR_HOST) return cntReg(comm, data, size, ptrType, mh);
  assert_int_equal(ptrType, COLL_PTR_CUDA);
  cudaRegs++;
  live++;
  lastSize = size;
  *mh = (void*)(uintptr_t)(0x9000 + cudaRegs);
  return collSuccess;
}
static collResult_t devRegDmaBuf(void* comm, void* data, size_t size, int ptrType, uint64_t off, int fd, void** mh) {
  (void)comm, (void)data;
  assert_int_equal(ptrType, COLL_PTR_CUDA);
  assert_true(fcntl(fd, F_GETFD) >= 0); /* open while registering */
  if (dmabufFail) return collSetError(collSystemError, "test: the NIC refused the dma-buf");
  dmabufRegs++;
  live++;
  lastFd = fd;
  lastOff = off;
  lastSize = size;
  *mh = (void*)(uintptr_t)(0x5000 + dmabufRegs);
  return collSuccess;
}
static const collNet_t devNet = {.name = "gpunic", .getProperties = devProps, .regMr = devRegMr,
                                 .deregMr = cntDereg, .regMrDmaBuf = devRegDmaBuf};

static int devReady(void) {
  if (collCudaLoad() != collSuccess || collDevSetCurrent(0) != collSuccess) {
    print_message("skipped: no CUDA driver (fakecuda.engine_reg_dev runs this on the fake): %s\n",
                  collGetLastError(NULL));
    return 0;
  }
  return 1;
}

/* GPU memory: registered whole (the allocation, clipped to its end) at any
 * size, through regMrDmaBuf with a dma-buf fd closed afterwards, once per
 * allocation; regMr with
 * COLL_PTR_CUDA where the device has no COLL_PTR_DMABUF; a refused
 * registration is an error (NULL, message), never a silent fallback. */
static void test_device_memory(void** st) {
  (void)st;
  if (!devReady()) skip();
  setup();
  C.nets[1] = &devNet;
  ptrSupport = COLL_PTR_HOST | COLL_PTR_CUDA | COLL_PTR_DMABUF;
  dmabufRegs = cudaRegs = dmabufFail = 0;
  const size_t B = 10000; /* not a whole number of pages */
  CUdeviceptr d = 0;
  assert_int_equal(COLL_CU(cuMemAlloc)(&d, B), CUDA_SUCCESS);
  char* p = (char*)(uintptr_t)d;
  void* t1 = NULL;
  void* h1 = collEngineReg(&C, 1, &tcomm, p + 100, 1, COLL_MEM_DEVICE, &t1); /* 1 byte: registered all the same */
  assert_non_null(h1);
  assert_int_equal(dmabufRegs, 1);
  assert_int_equal(lastOff, 0);
  assert_int_equal(lastSize, B); /* the allocation, not the page-rounded range */
  assert_true(fcntl(lastFd, F_GETFD) < 0); /* the fd went back */
  void* t2 = NULL;
  assert_ptr_equal(collEngineReg(&C, 1, &tcomm, p + 5000, 4000, COLL_MEM_DEVICE, &t2), h1); /* same allocation: hit */
  assert_int_equal(dmabufRegs, 1);
  assert_ptr_equal(collEngineRegHandle(t2), h1);
  collEngineRegDone(&C, 1, &t1);
  collEngineRegDone(&C, 1, &t2);
  collEngineRegStats rs;
  collEngineRegGetStats(&C, &rs);
  assert_int_equal(rs.dmabufRegs, 1);
  assert_int_equal(rs.cudaRegs, 0);
  collEngineRegFree(&C);
  assert_int_equal(live, 0);

  setup(); /* a device without dma-buf: regMr(COLL_PTR_CUDA) */
  C.nets[1] = &devNet;
  ptrSupport = COLL_PTR_HOST | COLL_PTR_CUDA;
  void* t3 = NULL;
  assert_non_null(collEngineReg(&C, 1, &tcomm, p, 64, COLL_MEM_DEVICE, &t3));
  assert_int_equal(cudaRegs, 1);
  collEngineRegDone(&C, 1, &t3);
  collEngineRegFree(&C);

  setup(); /* refused: NULL with the reason */
  C.nets[1] = &devNet;
  ptrSupport = COLL_PTR_HOST | COLL_PTR_CUDA | COLL_PTR_DMABUF;
  dmabufFail = 1;
  void* t4 = NULL;
  assert_null(collEngineReg(&C, 1, &tcomm, p, 64, COLL_MEM_DEVICE, &t4));
  assert_null(t4);
  assert_non_null(strstr(collGetLastError(NULL), "registering"));
  assert_non_null(strstr(collGetLastError(NULL), "GPU memory"));
  collEngineRegFree(&C);
  assert_int_equal(live, 0);
  COLL_CU(cuMemFree)(d);
}
#endif

int main(void) {
  const char* filter = getenv("COLL_TEST_FILTER"); /* cmocka pattern (ctest fakecuda.engine_reg_dev) */
  if (filter && *filter) cmocka_set_test_filter(filter);
  const struct CMUnitTest tests[] = {
#ifdef COLL_HAVE_CUDA
      cmocka_unit_test(test_device_memory),
#endif
      cmocka_unit_test(test_reuse_and_remap),
      cmocka_unit_test(test_in_flight),
      cmocka_unit_test(test_forget),
      cmocka_unit_test(test_none),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
