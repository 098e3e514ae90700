/*
 * gpu_kernels.c - coll's GPU kernels on a real GPU (tests/gpu/run.sh).
 *
 * 1. Correctness: every type x op (and avg's division for 2, 3 and 8
 *    ranks), counts from 0 to 4M + 3 elements, buffers whose offsets modulo
 *    16 bytes agree (16-byte packs with a head and a tail) or differ
 *    (element by element), in place; float16/bfloat16 on all 65536 patterns
 *    against every special value; the copy kernel for sizes 0..300 bytes at
 *    every offset pair and large sizes. Each result is compared with the host
 *    reference (src/reduce/reduce.c) bit for bit (a NaN from sum, prod or
 *    avg only has to be a NaN, reduce_math.h), and the 64 bytes behind each
 *    output must be untouched.
 * 2. The stream gate (src/device/gate.h): a stream that waits on it does
 *    not run past the wait until the host opens it, and then does.
 * 3. Bandwidth, in one run: the copy engine (cuMemcpyAsync device to
 *    device), the copy kernel and reduction kernels at 1 MiB..1 GiB, timed
 *    with CUDA events; bytes counted as read + written, so the kernels are
 *    shown as a fraction of the measured device copy rate.
 * Usage: gpu_kernels [--quick] [--no-bandwidth] [--md FILE] (the bandwidth table
 * as markdown). --no-bandwidth skips part 3 (the fake driver of
 * tests/fakecuda has no GPU timing to show).
 * Exit: 0 all correct, 1 a mismatch, 77 no GPU (the reason is printed).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device/cuda_loader.h"
#include "device/devexec.h"
#include "device/gate.h"
#include "reduce/reduce.h"

#define GUARD 64

static int gFails;
static CUstream gStream;

#define CU(call)                                                                      \
  do {                                                                                \
    CUresult r_ = (call);                                                             \
    if (r_ != CUDA_SUCCESS) {                                                         \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,            \
              collCudaErrorName(r_));                                                 \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)
#define CO(call)                                                                                \
  do {                                                                                          \
    collResult_t r_ = (call);                                                                   \
    if (r_ != collSuccess) {                                                                    \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, collGetLastError(NULL)); \
      exit(1);                                                                                  \
    }                                                                                           \
  } while (0)

static uint64_t rnd(uint64_t* s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 0x2545F4914F6CDD1Dull;
}

static const char* const kOps[] = {"sum", "prod", "max", "min", "avg"};

static int isNan(collDataType_t t, const unsigned char* p) {
  uint16_t h;
  uint32_t f;
  uint64_t d;
  switch (t) {
    case collFloat16: memcpy(&h, p, 2); return (h & 0x7fff) > 0x7c00;
    case collBfloat16: memcpy(&h, p, 2); return (h & 0x7fff) > 0x7f80;
    case collFloat32: memcpy(&f, p, 4); return (f & 0x7fffffffu) > 0x7f800000u;
    case collFloat64: memcpy(&d, p, 8); return (d & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
    default: return 0;
  }
}

/* Special values of each type as bit patterns (zeros, infinities, NaNs,
 * subnormals, extremes). */
static const uint64_t kSpecial16h[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01, 0x7d55, 0x0001,
                                       0x8001, 0x03ff, 0x0400, 0x7bff, 0xfbff, 0x3c00, 0xbc00, 0x3555, 0x7bfe};
static const uint64_t kSpecial16b[] = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xffc0, 0x7f81, 0x7fa5, 0x0001,
                                       0x8001, 0x007f, 0x0080, 0x7f7f, 0xff7f, 0x3f80, 0xbf80, 0x3eab, 0x7f7e};
static const uint64_t kSpecial32[] = {0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7fa5a5a5,
                                      0x00000001, 0x80000001, 0x007fffff, 0x00800000, 0x7f7fffff, 0x3f800000};
static const uint64_t kSpecial64[] = {0, 0x8000000000000000ull, 0x7ff0000000000000ull, 0xfff8000000000000ull,
                                      0x7ff4a5a5a5a5a5a5ull, 1, 0x000fffffffffffffull, 0x7fefffffffffffffull};
static const uint64_t kSpecialInt[] = {0, 1, 0x7f, 0x80, 0xff, 0x7fffffff, 0x80000000u, 0xffffffffu,
                                       0x7fffffffffffffffull, 0x8000000000000000ull, ~0ull};

static void fill(collDataType_t t, unsigned char* p, size_t n, uint64_t* seed) {
  const uint64_t* sp;
  size_t ns;
  switch (t) {
    case collFloat16: sp = kSpecial16h, ns = sizeof kSpecial16h / 8; break;
    case collBfloat16: sp = kSpecial16b, ns = sizeof kSpecial16b / 8; break;
    case collFloat32: sp = kSpecial32, ns = sizeof kSpecial32 / 8; break;
    case collFloat64: sp = kSpecial64, ns = sizeof kSpecial64 / 8; break;
    default: sp = kSpecialInt, ns = sizeof kSpecialInt / 8;
  }
  size_t es = collTypeSize(t);
  for (size_t i = 0; i < n; i++) {
    uint64_t r = rnd(seed), v = (r & 7) == 0 ? sp[(r >> 8) % ns] : rnd(seed);
    memcpy(p + i * es, &v, es);
  }
}

/* Compares n elements and the guard behind got; counts and reports a few. */
static void compare(const char* what, collDataType_t t, const unsigned char* exp, const unsigned char* got, size_t n,
                    int loose) {
  size_t es = collTypeSize(t);
  int bad = 0;
  for (size_t i = 0; i < n && bad < 3; i++) {
    const unsigned char *e = exp + i * es, *g = got + i * es;
    if (memcmp(e, g, es) == 0 || (loose && isNan(t, e) && isNan(t, g))) continue;
    uint64_t ev = 0, gv = 0;
    memcpy(&ev, e, es);
    memcpy(&gv, g, es);
    fprintf(stderr, "MISMATCH %s: element %zu of %zu: host 0x%llx gpu 0x%llx\n", what, i, n, (unsigned long long)ev,
            (unsigned long long)gv);
    bad++;
  }
  for (size_t i = 0; i < GUARD; i++)
    if (got[n * es + i] != 0xee) {
      fprintf(stderr, "MISMATCH %s: guard byte %zu behind the output written\n", what, i);
      bad++;
      break;
    }
  gFails += bad;
}

/* One (type, op) case: a, b (n elements) at element offsets oa, ob, output at
 * od (or in place on a); avg divides by nranks. */
static void oneCase(collDataType_t t, int op, size_t n, int oa, int ob, int od, int inPlace, int nranks,
                    const unsigned char* ha, const unsigned char* hb, CUdeviceptr da, CUdeviceptr db, CUdeviceptr dd,
                    unsigned char* ref, unsigned char* out) {
  size_t es = collTypeSize(t), bytes = n * es;
  collReduceGetFn((collDataType_t)t, (collRedOp_t)op)(ref, ha, hb, n);
  if (op == collAvg) collReduceAvgFinish(ref, n, t, nranks);
  CUdeviceptr a = da + (CUdeviceptr)oa * es, b = db + (CUdeviceptr)ob * es;
  CUdeviceptr d = inPlace ? a : dd + (CUdeviceptr)od * es;
  CU(COLL_CU(cuMemsetD8Async)(d, 0xee, bytes + GUARD, gStream));
  if (bytes) {
    CU(COLL_CU(cuMemcpyAsync)(a, (CUdeviceptr)(uintptr_t)ha, bytes, gStream));
    CU(COLL_CU(cuMemcpyAsync)(b, (CUdeviceptr)(uintptr_t)hb, bytes, gStream));
  }
  CO(collDevReduceAsync((void*)(uintptr_t)d, (void*)(uintptr_t)a, (void*)(uintptr_t)b, n, t, (collRedOp_t)op,
                        gStream));
  if (op == collAvg) CO(collDevAvgAsync((void*)(uintptr_t)d, n, t, nranks, gStream));
  CU(COLL_CU(cuMemcpyAsync)((CUdeviceptr)(uintptr_t)out, d, bytes + GUARD, gStream));
  CU(COLL_CU(cuStreamSynchronize)(gStream));
  char what[128];
  snprintf(what, sizeof what, "%s %s n=%zu offsets %d,%d,%d%s%s", collTypeName(t), kOps[op], n, oa, ob, od,
           inPlace ? " in place" : "", op == collAvg ? (nranks == 2 ? " /2" : nranks == 3 ? " /3" : " /8") : "");
  compare(what, t, ref, out, n, op == collSum || op == collProd || op == collAvg);
}

static void testReductions(int quick) {
  static const size_t counts[] = {0, 1, 7, 16, 17, 1023, 4099, 65536 + 5, (1u << 22) + 3};
  size_t ncounts = quick ? 7 : sizeof counts / sizeof counts[0];
  size_t maxN = counts[ncounts - 1] + 64, maxB = maxN * 8 > 65536 * 18 * 2 ? maxN * 8 : 65536 * 18 * 2;
  maxB += GUARD + 64;
  unsigned char *ha = malloc(maxB), *hb = malloc(maxB), *ref = malloc(maxB), *out = malloc(maxB);
  CUdeviceptr da, db, dd;
  CU(COLL_CU(cuMemAlloc)(&da, maxB));
  CU(COLL_CU(cuMemAlloc)(&db, maxB));
  CU(COLL_CU(cuMemAlloc)(&dd, maxB));
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  static const int offs[][3] = {{0, 0, 0}, {1, 1, 1}, {3, 3, 3}, {0, 1, 2}, {5, 0, 3}};
  long cases = 0;
  for (int t = 0; t < collNumTypes; t++)
    for (int op = 0; op < collNumOps; op++)
      for (size_t ci = 0; ci < ncounts; ci++)
        for (size_t oi = 0; oi < sizeof offs / sizeof offs[0]; oi++) {
          size_t n = counts[ci];
          if (n > 65536 + 5 && oi != 0 && oi != 3) continue; /* the largest: one packed, one unpacked layout */
          fill((collDataType_t)t, ha, n, &seed);
          fill((collDataType_t)t, hb, n, &seed);
          int nranks = oi % 3 == 0 ? 2 : oi % 3 == 1 ? 3 : 8;
          oneCase((collDataType_t)t, op, n, offs[oi][0], offs[oi][1], offs[oi][2], 0, nranks, ha, hb, da, db, dd,
                  ref, out);
          if (oi < 2) oneCase((collDataType_t)t, op, n, offs[oi][0], offs[oi][1], 0, 1, nranks, ha, hb, da, db, dd,
                              ref, out);
          cases += oi < 2 ? 2 : 1;
        }
  /* float16 / bfloat16: every pattern against every special value */
  for (int bf = 0; bf < 2; bf++) {
    collDataType_t t = bf ? collBfloat16 : collFloat16;
    const uint64_t* sp = bf ? kSpecial16b : kSpecial16h;
    size_t ns = sizeof kSpecial16h / 8, n = 65536 * ns;
    uint16_t *a = (uint16_t*)ha, *b = (uint16_t*)hb;
    for (size_t i = 0; i < n; i++) a[i] = (uint16_t)(i % 65536), b[i] = (uint16_t)sp[i / 65536];
    for (int op = 0; op < collNumOps; op++) {
      oneCase(t, op, n, 0, 0, 0, 0, 3, ha, hb, da, db, dd, ref, out);
      oneCase(t, op, n, 0, 0, 0, 0, 3, hb, ha, db, da, dd, ref, out); /* other operand order */
      cases += 2;
    }
  }
  printf("reductions: %ld cases (10 types x 5 ops, counts up to %zu, 5 offset patterns, in place; f16/bf16 "
         "exhaustive against specials): %s\n",
         cases, counts[ncounts - 1], gFails ? "MISMATCHES" : "all equal to the host reference");
  COLL_CU(cuMemFree)(da), COLL_CU(cuMemFree)(db), COLL_CU(cuMemFree)(dd);
  free(ha), free(hb), free(ref), free(out);
}

static void testCopy(void) {
  size_t big = (64u << 20) + 5;
  unsigned char *src = malloc(big + 64), *out = malloc(big + 64 + GUARD);
  uint64_t seed = 5;
  for (size_t i = 0; i < big + 64; i++) src[i] = (unsigned char)rnd(&seed);
  CUdeviceptr ds, dd;
  CU(COLL_CU(cuMemAlloc)(&ds, big + 64));
  CU(COLL_CU(cuMemAlloc)(&dd, big + 64 + GUARD));
  CU(COLL_CU(cuMemcpy)(ds, (CUdeviceptr)(uintptr_t)src, big + 64));
  int before = gFails, cases = 0;
  size_t sizes[320];
  int nsizes = 0;
  for (size_t b = 0; b <= 300; b++) sizes[nsizes++] = b;
  sizes[nsizes++] = 4096, sizes[nsizes++] = 1u << 20, sizes[nsizes++] = big;
  for (int si = 0; si < nsizes; si++)
    for (int so = 0; so < 18; so += sizes[si] > 300 ? 7 : 1)
      for (int dof = 0; dof < 18; dof += sizes[si] > 300 ? 7 : 1) {
        size_t n = sizes[si];
        CU(COLL_CU(cuMemsetD8Async)(dd, 0xee, n + (size_t)dof + GUARD, gStream));
        CO(collDevCopyAsync((void*)(uintptr_t)(dd + (CUdeviceptr)dof), (void*)(uintptr_t)(ds + (CUdeviceptr)so), n,
                            COLL_DEV_COPY_KERNEL, gStream));
        CU(COLL_CU(cuMemcpyAsync)((CUdeviceptr)(uintptr_t)out, dd, n + (size_t)dof + GUARD, gStream));
        CU(COLL_CU(cuStreamSynchronize)(gStream));
        cases++;
        int bad = memcmp(out + dof, src + so, n) != 0;
        for (int i = 0; i < dof && !bad; i++) bad = out[i] != 0xee;
        for (int i = 0; i < GUARD && !bad; i++) bad = out[(size_t)dof + n + (size_t)i] != 0xee;
        if (bad) {
          if (gFails - before < 3) fprintf(stderr, "MISMATCH copy %zu bytes, offsets %d -> %d\n", n, so, dof);
          gFails++;
        }
      }
  printf("copy kernel: %d cases (0..300 bytes at every offset pair mod 18, up to 64 MiB): %s\n", cases,
         gFails > before ? "MISMATCHES" : "all equal");
  COLL_CU(cuMemFree)(ds), COLL_CU(cuMemFree)(dd);
  free(src), free(out);
}

/* The gate: the copy behind a closed gate must not run. */
static void testGate(void) {
  collDevGate* g = NULL;
  CO(collDevGateCreate(&g));
  CUdeviceptr a, b;
  CU(COLL_CU(cuMemAlloc)(&a, 4096));
  CU(COLL_CU(cuMemAlloc)(&b, 4096));
  CU(COLL_CU(cuMemsetD8Async)(a, 0x5a, 4096, gStream));
  CU(COLL_CU(cuMemsetD8Async)(b, 0x00, 4096, gStream));
  CU(COLL_CU(cuStreamSynchronize)(gStream));
  CO(collDevGateWait(g, 1, gStream));
  CO(collDevCopyAsync((void*)(uintptr_t)b, (void*)(uintptr_t)a, 4096, COLL_DEV_COPY_KERNEL, gStream));
  struct timespec ts = {0, 200 * 1000 * 1000};
  nanosleep(&ts, NULL);
  CUresult q = COLL_CU(cuStreamQuery)(gStream);
  unsigned char h[4096];
  int ok = q == CUDA_ERROR_NOT_READY;
  collDevGateOpen(g, 1);
  CU(COLL_CU(cuStreamSynchronize)(gStream));
  CU(COLL_CU(cuMemcpy)((CUdeviceptr)(uintptr_t)h, b, sizeof h));
  for (size_t i = 0; i < sizeof h; i++) ok &= h[i] == 0x5a;
  /* a wait for an older value passes at once (cyclic compare) */
  CO(collDevGateWait(g, 0, gStream));
  nanosleep(&ts, NULL);
  ok &= COLL_CU(cuStreamQuery)(gStream) == CUDA_SUCCESS;
  printf("stream gate (%s): %s\n", collDevGateUsesMemOps(g) ? "cuStreamWaitValue32" : "host-function fallback",
         ok ? "the stream waited until the host opened it, then ran" : "FAILED");
  if (!ok) gFails++;
  collDevGateDestroy(g);
  COLL_CU(cuMemFree)(a), COLL_CU(cuMemFree)(b);
}

/* GB/s of `iters` runs of what (0 CE copy, 1 copy kernel, 2.. reduce kernels) at
 * `bytes` of output, counting read + written bytes. */
static double bw(int what, collDataType_t t, collRedOp_t op, CUdeviceptr x, CUdeviceptr y, CUdeviceptr z, size_t bytes,
                 int iters) {
  CUevent e0, e1;
  CU(COLL_CU(cuEventCreate)(&e0, 0));
  CU(COLL_CU(cuEventCreate)(&e1, 0));
  for (int pass = 0; pass < 2; pass++) { /* pass 0 warms up */
    int n = pass ? iters : 2;
    CU(COLL_CU(cuEventRecord)(e0, gStream));
    for (int i = 0; i < n; i++) {
      if (what == 0) CU(COLL_CU(cuMemcpyAsync)(z, x, bytes, gStream));
      else if (what == 1) CO(collDevCopyAsync((void*)(uintptr_t)z, (void*)(uintptr_t)x, bytes, COLL_DEV_COPY_KERNEL, gStream));
      else CO(collDevReduceAsync((void*)(uintptr_t)z, (void*)(uintptr_t)x, (void*)(uintptr_t)y,
                                 bytes / collTypeSize(t), t, op, gStream));
    }
    CU(COLL_CU(cuEventRecord)(e1, gStream));
    CU(COLL_CU(cuEventSynchronize)(e1));
  }
  float ms = 0;
  CU(COLL_CU(cuEventElapsedTime)(&ms, e0, e1));
  COLL_CU(cuEventDestroy)(e0), COLL_CU(cuEventDestroy)(e1);
  double moved = (double)bytes * (what < 2 ? 2.0 : 3.0) * iters;
  return moved / (ms * 1e-3) / 1e9;
}

static void bandwidth(int quick, const char* mdPath) {
  size_t maxBytes = quick ? (64u << 20) : (1u << 30);
  CUdeviceptr x, y, z;
  CU(COLL_CU(cuMemAlloc)(&x, maxBytes));
  CU(COLL_CU(cuMemAlloc)(&y, maxBytes));
  CU(COLL_CU(cuMemAlloc)(&z, maxBytes));
  CU(COLL_CU(cuMemsetD8Async)(x, 0x11, maxBytes, gStream));
  CU(COLL_CU(cuMemsetD8Async)(y, 0x22, maxBytes, gStream));
  FILE* md = mdPath ? fopen(mdPath, "w") : NULL;
  const char* head =
      "| size | copy engine GB/s | copy kernel GB/s (x CE) | f32 sum (x CE) | f16 sum (x CE) | bf16 sum (x CE) | f32 "
      "max (x CE) | i8 sum (x CE) |\n|---|---|---|---|---|---|---|---|\n";
  printf("\nbandwidth (bytes read + written per second; x CE = fraction of the copy engine's rate):\n%s", head);
  if (md) fputs(head, md);
  for (size_t bytes = 1u << 20; bytes <= maxBytes; bytes *= 4) {
    int iters = bytes <= (16u << 20) ? 50 : 10;
    double ce = bw(0, collFloat32, collSum, x, y, z, bytes, iters);
    double k = bw(1, collFloat32, collSum, x, y, z, bytes, iters);
    double r[5] = {bw(2, collFloat32, collSum, x, y, z, bytes, iters), bw(2, collFloat16, collSum, x, y, z, bytes, iters),
                   bw(2, collBfloat16, collSum, x, y, z, bytes, iters), bw(2, collFloat32, collMax, x, y, z, bytes, iters),
                   bw(2, collInt8, collSum, x, y, z, bytes, iters)};
    char line[512];
    snprintf(line, sizeof line,
             "| %zu MiB | %.0f | %.0f (%.2f) | %.0f (%.2f) | %.0f (%.2f) | %.0f (%.2f) | %.0f (%.2f) | %.0f (%.2f) |\n",
             bytes >> 20, ce, k, k / ce, r[0], r[0] / ce, r[1], r[1] / ce, r[2], r[2] / ce, r[3], r[3] / ce, r[4],
             r[4] / ce);
    fputs(line, stdout);
    if (md) fputs(line, md);
  }
  if (md) fclose(md);
  COLL_CU(cuMemFree)(x), COLL_CU(cuMemFree)(y), COLL_CU(cuMemFree)(z);
}

int main(int argc, char** argv) {
  int quick = 0, noBw = 0;
  const char* md = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) quick = 1;
    else if (strcmp(argv[i], "--no-bandwidth") == 0) noBw = 1;
    else if (strcmp(argv[i], "--md") == 0 && i + 1 < argc) md = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--quick] [--no-bandwidth] [--md FILE]\n", argv[0]);
      return 2;
    }
  }
  if (collCudaLoad() != collSuccess || collDevCount() < 1) {
    printf("skipped: no GPU: %s\n", collCudaLoad() == collSuccess ? "the driver sees no device" : collCudaLoadMessage());
    return 77;
  }
  CO(collDevSetCurrent(0));
  CUdevice dev;
  char name[128] = "?";
  int sms = 0, major = 0, minor = 0;
  CU(COLL_CU(cuDeviceGet)(&dev, 0));
  CU(COLL_CU(cuDeviceGetName)(name, (int)sizeof name, dev));
  CU(COLL_CU(cuDeviceGetAttribute)(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  CU(COLL_CU(cuDeviceGetAttribute)(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  CU(COLL_CU(cuDeviceGetAttribute)(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
  printf("GPU 0: %s, sm_%d%d, %d SMs; driver %d; kernels built for %s; grid for 1 GiB: %u blocks of 512\n", name,
         major, minor, sms, collCudaDriverVersion(), collDevArchs(), collDevGridFor(1u << 30));
  CU(COLL_CU(cuStreamCreate)(&gStream, CU_STREAM_NON_BLOCKING));
  testReductions(quick);
  testCopy();
  testGate();
  if (!noBw) bandwidth(quick, md);
  printf("\n%s\n", gFails ? "FAILED: see MISMATCH lines" : "all kernel checks passed");
  return gFails ? 1 : 0;
}
