/*
 * test_exec.c - the executors of the engine's local steps (engine/exec.h).
 * Host: copy, reduce and avg give the same bits as memmove, the host
 * reduction kernels and collReduceAvgFinish, for every type x op on data
 * with NaN, infinities, -0.0 and subnormals (random bit patterns); buffers
 * grow keeping their contents and zero the new bytes. CUDA: without a GPU
 * (here) every device entry fails with the loader's error and leaves the
 * buffers as they were; with one, device results equal the host's bit for
 * bit (NaN: any NaN) for every type x op.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cuda_loader.h"
#include "device/devexec.h"
#include "engine/exec.h"
#include "misc/log.h"

enum { N = 1031 }; /* odd: not a whole number of 16-byte packs */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint8_t rnd8(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (uint8_t)(rng >> 24);
}
static void randomBytes(void* p, size_t n) {
  for (size_t i = 0; i < n; i++) ((uint8_t*)p)[i] = rnd8();
}

static void test_host_steps_bitwise(void** st) {
  (void)st;
  static uint8_t a[N * 8], b[N * 8], want[N * 8], got[N * 8];
  for (int t = 0; t < collNumTypes; t++) {
    size_t es = collTypeSize((collDataType_t)t), bytes = N * es;
    for (int op = 0; op < collNumOps; op++) {
      collExecutor e;
      assert_int_equal(collExecInit(&e, NULL, NULL, (collDataType_t)t, (collRedOp_t)op), collSuccess);
      assert_int_equal(e.mem, COLL_MEM_HOST);
      collMemInfo host = {COLL_MEM_HOST, -1, 1}; /* pinned host memory: the host executor too */
      collExecutor e2;
      assert_int_equal(collExecInit(&e2, &host, NULL, (collDataType_t)t, (collRedOp_t)op), collSuccess);
      assert_int_equal(e2.mem, COLL_MEM_HOST);
      randomBytes(a, bytes), randomBytes(b, bytes);
      collReduceGetFn((collDataType_t)t, (collRedOp_t)op)(want, a, b, N);
      assert_int_equal(collExecReduce(&e, got, a, b, N), collSuccess);
      if (memcmp(got, want, bytes) != 0) fail_msg("type %d op %d: reduce differs from the host kernel", t, op);
      memcpy(got, a, bytes); /* in place, dst == a */
      assert_int_equal(collExecReduce(&e2, got, got, b, N), collSuccess);
      if (memcmp(got, want, bytes) != 0) fail_msg("type %d op %d: in-place reduce differs", t, op);
      for (int nr = 1; nr <= 7; nr += 3) {
        memcpy(want, a, bytes), memcpy(got, a, bytes);
        collReduceAvgFinish(want, N, (collDataType_t)t, nr);
        assert_int_equal(collExecAvgFinish(&e, got, N, nr), collSuccess);
        if (memcmp(got, want, bytes) != 0) fail_msg("type %d: avg over %d differs", t, nr);
      }
    }
  }
  /* copies overlap as memmove's */
  collExecutor e;
  assert_int_equal(collExecInit(&e, NULL, NULL, collInt8, collSum), collSuccess);
  randomBytes(a, sizeof a);
  memcpy(want, a, sizeof a), memcpy(got, a, sizeof a);
  memmove(want + 3, want, 1000), memmove(want + 2000, want + 2100, 1500);
  assert_int_equal(collExecCopy(&e, got + 3, got, 1000), collSuccess);
  assert_int_equal(collExecCopy(&e, got + 2000, got + 2100, 1500), collSuccess);
  assert_memory_equal(got, want, sizeof a);
}

static void test_host_grow(void** st) {
  (void)st;
  collExecutor e;
  assert_int_equal(collExecInit(&e, NULL, NULL, collFloat32, collSum), collSuccess);
  char* buf = NULL;
  size_t have = 0;
  int mem = COLL_MEM_HOST;
  assert_int_equal(collExecGrow(&e, &buf, &have, &mem, 0), collSuccess);
  assert_null(buf);
  assert_int_equal(collExecGrow(&e, &buf, &have, &mem, 100), collSuccess);
  assert_non_null(buf);
  assert_int_equal(have, 100);
  for (int i = 0; i < 100; i++) assert_int_equal(buf[i], 0);
  memset(buf, 7, 100);
  char* before = buf;
  assert_int_equal(collExecGrow(&e, &buf, &have, &mem, 50), collSuccess); /* big enough: kept */
  assert_ptr_equal(buf, before);
  assert_int_equal(have, 100);
  assert_int_equal(collExecGrow(&e, &buf, &have, &mem, 4000), collSuccess);
  assert_int_equal(have, 4000);
  assert_int_equal(mem, COLL_MEM_HOST);
  for (int i = 0; i < 100; i++) assert_int_equal(buf[i], 7);
  for (int i = 100; i < 4000; i++) assert_int_equal(buf[i], 0);
  collExecFree(buf, mem);
}

/* Without a GPU: a device executor cannot start and no device step runs. */
static void test_device_without_gpu(void** st) {
  (void)st;
  if (collDevCount() > 0) {
    print_message("skipped: this machine has a GPU (test_device_vs_host runs instead)\n");
    skip();
  }
  collMemInfo dev = {COLL_MEM_DEVICE, 0, 0};
  collExecutor e;
  collResult_t want = collCudaBuilt() ? collSystemError : collInvalidUsage;
  assert_int_equal(collExecInit(&e, &dev, NULL, collFloat32, collSum), want);
  assert_int_equal(e.mem, COLL_MEM_DEVICE);
  assert_int_equal(e.device, 0);
  collMemInfo managed = {COLL_MEM_MANAGED, 1, 0};
  assert_int_equal(collExecInit(&e, &managed, NULL, collFloat32, collSum), want);
  assert_int_equal(e.mem, COLL_MEM_DEVICE);
  assert_int_equal(e.device, 1);
  float x[4] = {1, 2, 3, 4}, y[4] = {0};
  assert_int_equal(collExecCopy(&e, y, x, sizeof x), want);
  assert_int_equal(collExecReduce(&e, y, x, x, 4), want);
  assert_int_equal(collExecAvgFinish(&e, y, 4, 2), want);
  for (int i = 0; i < 4; i++) assert_true(y[i] == 0.0f);
  char* buf = malloc(16);
  char* before = buf;
  size_t have = 16;
  int mem = COLL_MEM_HOST;
  assert_int_equal(collExecGrow(&e, &buf, &have, &mem, 64), want);
  assert_non_null(strstr(collLastErrorMessage(), "engine: cannot allocate 64 bytes on GPU 1: "));
  assert_ptr_equal(buf, before);
  assert_int_equal(have, 16);
  assert_int_equal(mem, COLL_MEM_HOST);
  free(buf);
}

#ifdef COLL_HAVE_CUDA
/* NaN equals any NaN; otherwise the same bits. */
static int sameValue(const uint8_t* p, const uint8_t* q, size_t es, int t) {
  if (memcmp(p, q, es) == 0) return 1;
  if (t == collFloat32) {
    float x, y;
    memcpy(&x, p, 4), memcpy(&y, q, 4);
    return isnan(x) && isnan(y);
  }
  if (t == collFloat64) {
    double x, y;
    memcpy(&x, p, 8), memcpy(&y, q, 8);
    return isnan(x) && isnan(y);
  }
  if (t == collFloat16 || t == collBfloat16) {
    uint16_t x, y;
    memcpy(&x, p, 2), memcpy(&y, q, 2);
    float fx = t == collFloat16 ? collHalfToFloat(x) : collBf16ToFloat(x);
    float fy = t == collFloat16 ? collHalfToFloat(y) : collBf16ToFloat(y);
    return isnan(fx) && isnan(fy);
  }
  return 0;
}

/* With a GPU: every type x op on device memory equals the host executor. */
static void test_device_vs_host(void** st) {
  (void)st;
  if (collDevCount() == 0) {
    print_message("skipped (no GPU): device steps against the host executor\n");
    skip();
  }
  static uint8_t a[N * 8], b[N * 8], want[N * 8], got[N * 8];
  collMemInfo dev = {COLL_MEM_DEVICE, 0, 0};
  for (int t = 0; t < collNumTypes; t++) {
    size_t es = collTypeSize((collDataType_t)t), bytes = N * es;
    for (int op = 0; op < collNumOps; op++) {
      collExecutor h, d;
      assert_int_equal(collExecInit(&h, NULL, NULL, (collDataType_t)t, (collRedOp_t)op), collSuccess);
      assert_int_equal(collExecInit(&d, &dev, NULL, (collDataType_t)t, (collRedOp_t)op), collSuccess);
      char* da = NULL;
      size_t have = 0;
      int mem = COLL_MEM_HOST;
      assert_int_equal(collExecGrow(&d, &da, &have, &mem, 3 * bytes), collSuccess);
      assert_int_equal(mem, COLL_MEM_DEVICE);
      randomBytes(a, bytes), randomBytes(b, bytes);
      assert_int_equal(collExecReduce(&h, want, a, b, N), collSuccess);
      if (op == collAvg) assert_int_equal(collExecAvgFinish(&h, want, N, 3), collSuccess);
      assert_int_equal(COLL_CU(cuMemcpy)((CUdeviceptr)(uintptr_t)da, (CUdeviceptr)(uintptr_t)a, bytes), 0);
      assert_int_equal(COLL_CU(cuMemcpy)((CUdeviceptr)(uintptr_t)(da + bytes), (CUdeviceptr)(uintptr_t)b, bytes), 0);
      assert_int_equal(collExecCopy(&d, da + 2 * bytes, da, bytes), collSuccess);
      assert_int_equal(collExecReduce(&d, da + 2 * bytes, da + 2 * bytes, da + bytes, N), collSuccess);
      if (op == collAvg) assert_int_equal(collExecAvgFinish(&d, da + 2 * bytes, N, 3), collSuccess);
      assert_int_equal(COLL_CU(cuStreamSynchronize)(NULL), 0);
      assert_int_equal(COLL_CU(cuMemcpy)((CUdeviceptr)(uintptr_t)got, (CUdeviceptr)(uintptr_t)(da + 2 * bytes), bytes),
                       0);
      for (size_t i = 0; i < N; i++)
        if (!sameValue(got + i * es, want + i * es, es, t)) fail_msg("type %d op %d element %zu differs", t, op, i);
      collExecFree(da, mem);
    }
  }
}
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_host_steps_bitwise), cmocka_unit_test(test_host_grow),
      cmocka_unit_test(test_device_without_gpu),
#ifdef COLL_HAVE_CUDA
      cmocka_unit_test(test_device_vs_host),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
