/*
 * common.c - the shared driver of the coll benchmarks: nccl-tests flags,
 * size sweep, timing, collation across ranks, verifiable inputs, and the
 * nccl-tests output layout. Between-rank exchanges use coll itself.
 *
 * Verifiable inputs: input element i of rank r is a small integer chosen so
 * that every reduction is exact in every type, including half (|sums| <=
 * 2048) and bfloat16 (<= 256), for up to ~64 ranks:
 *   sum/max/min  values in [-V, V] (unsigned: [0, V]) with n*V <= limit;
 *   prod         values in {1, 2} (and a sign for signed types), at most
 *                `prodTwos` twos per element, so products are powers of two;
 *   avg          rank pairs hold k+d and k-d, so the sum is exactly n*k and
 *                the average is k for every type;
 *   copies       values in [-limit, limit] (allgather, broadcast, ...).
 * Expected values are computed in int64 from the same formula and compared
 * exactly (bitwise for integers, == for floats). The one exception is avg
 * of floating types on a non-power-of-two rank count, where 1/n is not
 * representable: there the result may differ by a few ulps.
 *
 * SPDX-License-Identifier: BSD-3-Clause
 */
#include "common.h"

#include <getopt.h>
#include <libgen.h>
#include <math.h> /* isfinite */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "launch.h"

#define CANARY_BYTES 64   /* guard zone after every receive region */
#define POISON_BYTE 0x7F  /* never a valid expected value, NaN in half */
#define STR_(x) #x
#define STR(x) STR_(x)
#define BENCH_VERSION STR(COLL_MAJOR) "." STR(COLL_MINOR) "." STR(COLL_PATCH)

/* ------------------------------------------------------------------------ */
/* Types and ops                                                            */

typedef struct {
  const char* name;
  collDataType_t type;
  size_t size;
  int isFloat, isSigned;
  int64_t limit;    /* largest |value| (and partial sum) kept exact */
  int prodTwos;     /* most factors of two in one product */
  double eps;       /* 2^-mantissa bits: avg on non-power-of-2 ranks may be
                       off by 4*n*eps relative (1/n is inexact) */
} typeInfo_t;

static const typeInfo_t kTypes[] = {
    {"int8", collInt8, 1, 0, 1, 120, 6, 0},
    {"uint8", collUint8, 1, 0, 0, 120, 6, 0},
    {"int32", collInt32, 4, 0, 1, 1 << 20, 30, 0},
    {"uint32", collUint32, 4, 0, 0, 1 << 20, 31, 0},
    {"int64", collInt64, 8, 0, 1, 1 << 20, 62, 0},
    {"uint64", collUint64, 8, 0, 0, 1 << 20, 62, 0},
    {"half", collFloat16, 2, 1, 1, 2048, 15, 0x1p-11},
    {"float", collFloat32, 4, 1, 1, 1 << 20, 62, 0x1p-24},
    {"double", collFloat64, 8, 1, 1, 1 << 20, 62, 0x1p-53},
    {"bfloat16", collBfloat16, 2, 1, 1, 256, 62, 0x1p-8},
};
#define NTYPES ((int)(sizeof(kTypes) / sizeof(kTypes[0])))

static const struct { const char* name; int index; } kTypeAliases[] = {
    {"char", 0}, {"int", 2}, {"float16", 6}, {"float32", 7},
    {"float64", 8}, {"bf16", 9}};

static const struct { const char* name; collRedOp_t op; } kOps[] = {
    {"sum", collSum}, {"prod", collProd}, {"max", collMax},
    {"min", collMin}, {"avg", collAvg}};
#define NOPS ((int)(sizeof(kOps) / sizeof(kOps[0])))
#define OP_COPY (-1) /* input pattern of the non-reductions */

/* ------------------------------------------------------------------------ */
/* Options                                                                  */

typedef struct {
  int nthreads, ngpus, nprocs;
  size_t minBytes, maxBytes, stepBytes, stepFactor;
  int iters, warmup, agg, check, cycles, parallelInit;
  int blocking, streamNull, timeout, cputime, average;
  int typeIndex; /* -1: all */
  int opIndex;   /* -1: all */
  int root;      /* -1: all */
  int launchTimeout;
  const char* prog;
} benchOpts_t;

/* Prints the usage text (nccl-tests style) to f. */
static void usage(FILE* f, const char* prog) {
  fprintf(f,
          "USAGE: %s \n\t"
          "[-np,--nprocs <local rank processes to fork>] \n\t"
          "[-t,--nthreads <num threads>] \n\t"
          "[-g,--ngpus <gpus per thread (must be 1)>] \n\t"
          "[-b,--minbytes <min size in bytes>] \n\t"
          "[-e,--maxbytes <max size in bytes>] \n\t"
          "[-i,--stepbytes <increment size>] \n\t"
          "[-f,--stepfactor <increment factor>] \n\t"
          "[-n,--iters <iteration count>] \n\t"
          "[-m,--agg_iters <aggregated iteration count>] \n\t"
          "[-w,--warmup_iters <warmup iteration count>] \n\t"
          "[-N,--run_cycles <cycle count> run & print each cycle (default: 1; 0=infinite)] \n\t"
          "[-p,--parallel_init <0/1>] \n\t"
          "[-c,--check <check iteration count>] \n\t"
          "[-o,--op <sum/prod/min/max/avg/all>] \n\t"
          "[-d,--datatype <int8/uint8/int32/uint32/int64/uint64/half/float/double/bfloat16/all>] \n\t"
          "[-r,--root <root/all>] \n\t"
          "[-z,--blocking <0/1/2>] \n\t"
          "[-y,--stream_null <0/1>] \n\t"
          "[-T,--timeout <time in seconds>] \n\t"
          "[-C,--report_cputime <0/1>] \n\t"
          "[-a,--average <0/1/2/3> report average iteration time <0=RANK0/1=AVG/2=MIN/3=MAX>] \n\t"
          "[-h,--help]\n",
          prog);
}

/* Parses a size with an optional K/M/G suffix (KiB/MiB/GiB); -1 on error. */
static double parseSize(const char* s) {
  char* end;
  double v = strtod(s, &end);
  if (end == s || v < 0) return -1.0;
  double unit = 1;
  switch (*end) {
    case 'G': case 'g': unit = 1024.0 * 1024 * 1024; end++; break;
    case 'M': case 'm': unit = 1024.0 * 1024; end++; break;
    case 'K': case 'k': unit = 1024.0; end++; break;
    default: break;
  }
  if (*end == 'B' || *end == 'b') end++;
  return *end ? -1.0 : v * unit;
}

/* Parses a decimal/hex integer >= minv into *out; prints why on error. */
static int parseInt(const char* s, const char* flag, long minv, long* out) {
  char* end;
  long v = strtol(s, &end, 0);
  if (end == s || *end || v < minv) {
    fprintf(stderr, "invalid value '%s' for %s\n", s, flag);
    return -1;
  }
  *out = v;
  return 0;
}

/* Looks up a -d name; returns the type index, -1 for "all", -2 unknown. */
static int parseType(const char* s) {
  if (strcmp(s, "all") == 0) return -1;
  for (int i = 0; i < NTYPES; i++)
    if (strcmp(s, kTypes[i].name) == 0) return i;
  for (size_t i = 0; i < sizeof(kTypeAliases) / sizeof(kTypeAliases[0]); i++)
    if (strcmp(s, kTypeAliases[i].name) == 0) return kTypeAliases[i].index;
  return -2;
}

/* Looks up a -o name; returns the op index, -1 for "all", -2 unknown. */
static int parseOp(const char* s) {
  if (strcmp(s, "all") == 0) return -1;
  for (int i = 0; i < NOPS; i++)
    if (strcmp(s, kOps[i].name) == 0) return i;
  return -2;
}

/* Removes "-np N", "-np=N", "--nprocs N", "--nprocs=N" from argv (getopt
 * would read -np as -n p) and stores N; returns -1 on a bad value. */
static int extractNprocs(int* argc, char** argv, benchOpts_t* o) {
  int w = 1;
  for (int r = 1; r < *argc; r++) {
    const char* a = argv[r];
    const char* val = NULL;
    if (strcmp(a, "--") == 0) {
      while (r < *argc) argv[w++] = argv[r++];
      break;
    }
    if (strcmp(a, "-np") == 0 || strcmp(a, "--nprocs") == 0) {
      if (r + 1 >= *argc) {
        fprintf(stderr, "%s needs a value\n", a);
        return -1;
      }
      val = argv[++r];
    } else if (strncmp(a, "-np=", 4) == 0) {
      val = a + 4;
    } else if (strncmp(a, "--nprocs=", 9) == 0) {
      val = a + 9;
    } else {
      argv[w++] = argv[r];
      continue;
    }
    long v;
    if (parseInt(val, "-np", 1, &v) || v > 65536) return -1;
    o->nprocs = (int)v;
  }
  *argc = w;
  argv[w] = NULL;
  return 0;
}

/* Fills *o from argv. Returns 0 to run, 1 after -h, -1 on error. */
static int parseArgs(int argc, char** argv, benchOpts_t* o) {
  *o = (benchOpts_t){.nthreads = 1, .ngpus = 1, .nprocs = 1,
                     .minBytes = 32 << 20, .maxBytes = 32 << 20,
                     .stepBytes = 1 << 20, .stepFactor = 1, .iters = 20,
                     .warmup = 1, .agg = 1, .check = 1, .cycles = 1,
                     .timeout = -1, .average = 1, .typeIndex = 7,
                     .opIndex = 0, .root = 0, .launchTimeout = 1800};
  o->prog = basename(argv[0]);
  const char* lt = getenv("COLL_TESTS_LAUNCH_TIMEOUT");
  if (lt && atoi(lt) > 0) o->launchTimeout = atoi(lt);
  if (extractNprocs(&argc, argv, o)) return -1;
  static const struct option longopts[] = {
      {"nthreads", required_argument, 0, 't'},
      {"ngpus", required_argument, 0, 'g'},
      {"minbytes", required_argument, 0, 'b'},
      {"maxbytes", required_argument, 0, 'e'},
      {"stepbytes", required_argument, 0, 'i'},
      {"stepfactor", required_argument, 0, 'f'},
      {"iters", required_argument, 0, 'n'},
      {"agg_iters", required_argument, 0, 'm'},
      {"warmup_iters", required_argument, 0, 'w'},
      {"run_cycles", required_argument, 0, 'N'},
      {"parallel_init", required_argument, 0, 'p'},
      {"check", required_argument, 0, 'c'},
      {"op", required_argument, 0, 'o'},
      {"datatype", required_argument, 0, 'd'},
      {"root", required_argument, 0, 'r'},
      {"blocking", required_argument, 0, 'z'},
      {"stream_null", required_argument, 0, 'y'},
      {"timeout", required_argument, 0, 'T'},
      {"report_cputime", required_argument, 0, 'C'},
      {"average", required_argument, 0, 'a'},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  int c;
  long v;
  double s;
  while ((c = getopt_long(argc, argv, "t:g:b:e:i:f:n:m:w:N:p:c:o:d:r:z:y:T:C:a:h",
                          longopts, NULL)) != -1) {
    const char* a = optarg;
    switch (c) {
      case 't': if (parseInt(a, "-t", 1, &v)) return -1; o->nthreads = (int)v; break;
      case 'g': if (parseInt(a, "-g", 1, &v)) return -1; o->ngpus = (int)v; break;
      case 'b': case 'e':
        if ((s = parseSize(a)) < 0) {
          fprintf(stderr, "invalid size specified for '%s'\n",
                  c == 'b' ? "minbytes" : "maxbytes");
          return -1;
        }
        if (c == 'b') o->minBytes = (size_t)s; else o->maxBytes = (size_t)s;
        break;
      case 'i':
        if ((s = parseSize(a)) < 0) { fprintf(stderr, "invalid -i\n"); return -1; }
        o->stepBytes = (size_t)s;
        break;
      case 'f': if (parseInt(a, "-f", 0, &v)) return -1; o->stepFactor = (size_t)v; break;
      case 'n': if (parseInt(a, "-n", 1, &v)) return -1; o->iters = (int)v; break;
      case 'm': if (parseInt(a, "-m", 1, &v)) return -1; o->agg = (int)v; break;
      case 'w': if (parseInt(a, "-w", 0, &v)) return -1; o->warmup = (int)v; break;
      case 'N': if (parseInt(a, "-N", 0, &v)) return -1; o->cycles = (int)v; break;
      case 'p': if (parseInt(a, "-p", 0, &v)) return -1; o->parallelInit = (int)v; break;
      case 'c': if (parseInt(a, "-c", 0, &v)) return -1; o->check = (int)v; break;
      case 'y': if (parseInt(a, "-y", 0, &v)) return -1; o->streamNull = (int)v; break;
      case 'T': if (parseInt(a, "-T", 0, &v)) return -1; o->timeout = (int)v; break;
      case 'C': if (parseInt(a, "-C", 0, &v)) return -1; o->cputime = (int)v; break;
      case 'z':
        if (parseInt(a, "-z", 0, &v) || v > 2) {
          fprintf(stderr, "-z must be 0, 1 or 2\n");
          return -1;
        }
        o->blocking = (int)v;
        break;
      case 'a':
        if (parseInt(a, "-a", 0, &v) || v > 3) {
          fprintf(stderr, "-a must be 0, 1, 2 or 3\n");
          return -1;
        }
        o->average = (int)v;
        break;
      case 'o':
        if ((o->opIndex = parseOp(a)) == -2) {
          fprintf(stderr, "invalid op '%s'\n", a);
          return -1;
        }
        break;
      case 'd':
        if ((o->typeIndex = parseType(a)) == -2) {
          fprintf(stderr, "invalid datatype '%s'\n", a);
          return -1;
        }
        break;
      case 'r':
        if (strcmp(a, "all") == 0) o->root = -1;
        else if (parseInt(a, "-r", 0, &v)) return -1;
        else o->root = (int)v;
        break;
      case 'h': usage(stdout, o->prog); return 1;
      default: usage(stderr, o->prog); return -1;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "unexpected argument '%s'\n", argv[optind]);
    return -1;
  }
  if (o->ngpus != 1) {
    fprintf(stderr, "-g %d: coll runs one rank per thread; use -g 1\n", o->ngpus);
    return -1;
  }
  if (o->minBytes > o->maxBytes) {
    fprintf(stderr, "invalid sizes for 'minbytes' and 'maxbytes': %zu > %zu\n",
            o->minBytes, o->maxBytes);
    return -1;
  }
  if (o->stepFactor <= 1 && o->stepBytes == 0 && o->minBytes < o->maxBytes) {
    fprintf(stderr, "-i 0 without -f > 1 would never reach maxbytes\n");
    return -1;
  }
  if ((long)o->nprocs * o->nthreads > 65536) {
    fprintf(stderr, "too many ranks\n");
    return -1;
  }
  return 0;
}

/* ------------------------------------------------------------------------ */
/* half and bfloat16                                                        */

/* float -> IEEE half, round to nearest even. */
static uint16_t f32ToF16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = x & 0x80000000u;
  x ^= sign;
  uint16_t o;
  if (x >= 0x47800000u) {         /* >= 2^16: inf, or NaN */
    o = x > 0x7f800000u ? 0x7e00 : 0x7c00;
  } else if (x < 0x38800000u) {   /* < 2^-14: subnormal or zero */
    const uint32_t magicBits = (uint32_t)(127 - 15 + 23 - 10 + 1) << 23;
    float magic, fx;
    memcpy(&magic, &magicBits, 4);
    memcpy(&fx, &x, 4);
    fx += magic;                  /* the FPU rounds the mantissa for us */
    uint32_t r;
    memcpy(&r, &fx, 4);
    o = (uint16_t)(r - magicBits);
  } else {                        /* normal: rebias, round half to even */
    uint32_t odd = (x >> 13) & 1;
    x += ((uint32_t)(15 - 127) << 23) + 0xfff + odd;
    o = (uint16_t)(x >> 13);
  }
  return (uint16_t)(o | (sign >> 16));
}

/* IEEE half -> float (exact). */
static float f16ToF32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    float v = (float)mant * 5.9604644775390625e-8f; /* mant * 2^-24 */
    memcpy(&bits, &v, 4);
    bits |= sign;
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

/* float -> bfloat16, round to nearest even. */
static uint16_t f32ToBf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

/* bfloat16 -> float (exact). */
static float bf16ToF32(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

/* ------------------------------------------------------------------------ */
/* Verifiable data                                                          */

/* Input element i of rank r (of n) for check round `seed`; op is a collRedOp_t
 * or OP_COPY. Always a small integer, exact in every type (see top). */
static int64_t genValue(const typeInfo_t* t, int op, int n, int r, size_t i,
                        uint64_t seed) {
  uint64_t ui = (uint64_t)i, ur = (uint64_t)r;
  if (op == collProd) {
    uint64_t period = ((uint64_t)n + (uint64_t)t->prodTwos - 1) / (uint64_t)t->prodTwos;
    int64_t v = (ui + ur + seed) % period == 0 ? 2 : 1;
    return t->isSigned && (ui * 3 + ur * 5 + seed) % 7 == 0 ? -v : v;
  }
  if (op == collAvg) {
    int64_t bound = t->limit / (2 * (int64_t)n);
    uint64_t k1 = (uint64_t)(bound > 0 ? bound : 1);
    int64_t k = t->isSigned ? (int64_t)((ui + seed) % (2 * k1 + 1)) - (int64_t)k1
                            : (int64_t)((ui + seed) % (k1 + 1));
    uint64_t absk = (uint64_t)(k < 0 ? -k : k);
    int64_t d = (int64_t)((ui * 3 + seed) % (absk + 1)); /* |k +- d| <= 2|k| */
    if (r % 2 == 1) return k - d;
    return r + 1 < n ? k + d : k;
  }
  int64_t bound = op == OP_COPY ? t->limit : t->limit / n;
  uint64_t vmax = (uint64_t)(bound > 0 ? bound : 1);
  uint64_t h = ui * 7 + ur * 13 + seed * 3;
  return t->isSigned ? (int64_t)(h % (2 * vmax + 1)) - (int64_t)vmax
                     : (int64_t)(h % (vmax + 1));
}

/* The exact reduction by op over all n ranks of their element idx. */
static int64_t reduceAll(const typeInfo_t* t, int op, int n, size_t idx,
                         uint64_t seed) {
  int64_t acc = genValue(t, op, n, 0, idx, seed);
  for (int p = 1; p < n; p++) {
    int64_t v = genValue(t, op, n, p, idx, seed);
    switch (op) {
      case collProd: acc *= v; break;
      case collMax: acc = v > acc ? v : acc; break;
      case collMin: acc = v < acc ? v : acc; break;
      default: acc += v; break; /* sum, avg */
    }
  }
  return op == collAvg ? acc / n : acc; /* exact: acc is n*k */
}

/* Stores integer value v as element j of buf. */
static void writeElem(const typeInfo_t* t, void* buf, size_t j, int64_t v) {
  switch (t->type) {
    case collInt8: ((int8_t*)buf)[j] = (int8_t)v; break;
    case collUint8: ((uint8_t*)buf)[j] = (uint8_t)v; break;
    case collInt32: ((int32_t*)buf)[j] = (int32_t)v; break;
    case collUint32: ((uint32_t*)buf)[j] = (uint32_t)v; break;
    case collInt64: ((int64_t*)buf)[j] = v; break;
    case collUint64: ((uint64_t*)buf)[j] = (uint64_t)v; break;
    case collFloat16: ((uint16_t*)buf)[j] = f32ToF16((float)v); break;
    case collFloat32: ((float*)buf)[j] = (float)v; break;
    case collFloat64: ((double*)buf)[j] = (double)v; break;
    case collBfloat16: ((uint16_t*)buf)[j] = f32ToBf16((float)v); break;
    default: break;
  }
}

/* Element j of an integer buffer, sign/zero-extended to int64. */
static int64_t readInt(const typeInfo_t* t, const void* buf, size_t j) {
  switch (t->type) {
    case collInt8: return ((const int8_t*)buf)[j];
    case collUint8: return ((const uint8_t*)buf)[j];
    case collInt32: return ((const int32_t*)buf)[j];
    case collUint32: return ((const uint32_t*)buf)[j];
    case collInt64: return ((const int64_t*)buf)[j];
    default: return (int64_t)((const uint64_t*)buf)[j];
  }
}

/* Element j of a floating-point buffer as a double (exact). */
static double readFloat(const typeInfo_t* t, const void* buf, size_t j) {
  switch (t->type) {
    case collFloat16: return f16ToF32(((const uint16_t*)buf)[j]);
    case collFloat32: return ((const float*)buf)[j];
    case collBfloat16: return bf16ToF32(((const uint16_t*)buf)[j]);
    default: return ((const double*)buf)[j];
  }
}

/* Expected integer value v as the type stores it (wraps like the type). */
static int64_t asStored(const typeInfo_t* t, int64_t v) {
  char tmp[8];
  writeElem(t, tmp, 0, v);
  return readInt(t, tmp, 0);
}

/* 1 if element j of buf matches the exact value v. */
/* 1 if element j of buf matches the exact value v; looseAvg > 0 is the rank
 * count of an avg whose 1/n is inexact (see typeInfo_t.eps). */
static int matches(const typeInfo_t* t, const void* buf, size_t j, int64_t v,
                   int looseAvg) {
  if (!t->isFloat) return readInt(t, buf, j) == asStored(t, v);
  double got = readFloat(t, buf, j), want = (double)v;
  if (got == want) return 1;
  double diff = got > want ? got - want : want - got;
  return looseAvg && diff <= (want < 0 ? -want : want) * 4 * looseAvg * t->eps;
}

/* ------------------------------------------------------------------------ */
/* Output                                                                   */

/* nccl-tests' getFloatStr: fits v into width, shrinking the precision. */
static void fmtFloat(char* out, size_t len, double v, int width) {
  if (!isfinite(v)) {
    snprintf(out, len, "%*g", width, v);
    return;
  }
  int power = 0;
  for (double p = 1; v >= p; p *= 10) power++;
  if (power < width - 2) snprintf(out, len, "%*.2f", width, v);
  else if (power < width - 1) snprintf(out, len, "%*.1f", width, v);
  else if (power < width + 1) snprintf(out, len, "%*.0f", width, v);
  else if (width >= 7) snprintf(out, len, "%*.1e", width, v);
  else snprintf(out, len, "%*.0e", width, v);
}

/* ------------------------------------------------------------------------ */
/* One rank                                                                 */

typedef struct {
  const benchOpts_t* o;
  const benchColl_t* c;
  collComm_t comm;
  collStream_t stream; /* NULL: blocking calls */
  int rank, nranks;
  char* send;
  char* recv;          /* maxBytes + CANARY_BYTES */
  size_t maxBytes;
  uint64_t seed;
  int errors;          /* (size, placement) results with wrong elements */
  double bwSum;
  int bwCount;
} rankCtx_t;

/* What is being measured: one (type, op, root, size, placement). */
typedef struct {
  const typeInfo_t* t;
  int op;              /* collRedOp_t, or OP_COPY for the non-reductions */
  int root;
  int inPlace;
  benchCounts_t n;
} testCase_t;

/* printf on rank 0 only. */
static void rprintf(const rankCtx_t* ctx, const char* fmt, ...) {
  if (ctx->rank != 0) return;
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
}

/* Reports a failed coll call of this rank. */
static void failed(const rankCtx_t* ctx, const char* call, collResult_t r,
                   int line) {
  fprintf(stderr, "coll-tests: rank %d: %s (common.c:%d) failed: %s: %s\n",
          ctx->rank, call, line, collGetErrorString(r),
          collGetLastError(ctx->comm));
}

#define BCHECK(ctx, call)                                   \
  do {                                                      \
    collResult_t r_ = (call);                               \
    if (r_ != collSuccess) {                                \
      failed((ctx), #call, r_, __LINE__);                   \
      return -1;                                            \
    }                                                       \
  } while (0)

/* Seconds on the monotonic clock. */
static double nowSec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Send and receive pointers of tc, in-place per NCCL's rules. */
static void bufPtrs(const rankCtx_t* ctx, const testCase_t* tc, char** send,
                    char** recv) {
  size_t e = tc->t->size, r = (size_t)ctx->rank;
  *send = tc->inPlace ? ctx->recv + tc->n.sendInplaceOffset * r * e : ctx->send;
  *recv = tc->inPlace ? ctx->recv + tc->n.recvInplaceOffset * r * e : ctx->recv;
}

/* Issues one operation of tc. */
static int startColl(rankCtx_t* ctx, const testCase_t* tc) {
  char *s, *r;
  bufPtrs(ctx, tc, &s, &r);
  collRedOp_t op = tc->op == OP_COPY ? collSum : (collRedOp_t)tc->op;
  BCHECK(ctx, ctx->c->run(s, r, tc->n.paramCount, tc->t->type, tc->t->size, op,
                          tc->root, ctx->comm, ctx->stream));
  return 0;
}

/* Waits for every issued operation. */
static int complete(rankCtx_t* ctx) {
  if (ctx->stream) BCHECK(ctx, collStreamSynchronize(ctx->stream));
  return 0;
}

/* Combines a per-rank time across ranks per -a (0 rank0, 1 avg, 2 min, 3 max). */
static int collate(rankCtx_t* ctx, double* sec) {
  static const collRedOp_t ops[] = {collSum, collSum, collMin, collMax};
  if (ctx->o->average == 0) {
    BCHECK(ctx, collBroadcast(sec, sec, 1, collFloat64, 0, ctx->comm, NULL));
    return 0;
  }
  BCHECK(ctx, collAllReduce(sec, sec, 1, collFloat64, ops[ctx->o->average],
                            ctx->comm, NULL));
  if (ctx->o->average == 1) *sec /= ctx->nranks;
  return 0;
}

/* Runs the timed loop of tc; writes seconds per op (after -a) to *sec. */
static int timeColl(rankCtx_t* ctx, const testCase_t* tc, double* sec) {
  const benchOpts_t* o = ctx->o;
  for (int i = 0; i < o->warmup; i++)
    if (startColl(ctx, tc)) return -1;
  if (complete(ctx)) return -1;
  BCHECK(ctx, collBarrier(ctx->comm, NULL));
  double t0 = nowSec();
  for (int it = 0; it < o->iters; it++) {
    if (o->agg > 1) BCHECK(ctx, collGroupStart());
    for (int a = 0; a < o->agg; a++) {
      if (startColl(ctx, tc)) return -1;
      if (o->blocking == 1 && o->agg == 1) BCHECK(ctx, collBarrier(ctx->comm, NULL));
    }
    if (o->agg > 1) {
      BCHECK(ctx, collGroupEnd());
      if (o->blocking == 1) BCHECK(ctx, collBarrier(ctx->comm, NULL));
    }
  }
  double tIssued = nowSec();
  if (complete(ctx)) return -1;
  double t1 = nowSec();
  *sec = ((o->cputime ? tIssued : t1) - t0) / ((double)o->iters * o->agg);
  return collate(ctx, sec);
}

/* One check round: verifiable inputs, one op, count wrong elements and
 * changed guard bytes on this rank. Returns -1 on a coll failure. */
static int checkOnce(rankCtx_t* ctx, const testCase_t* tc, int64_t* wrong) {
  const typeInfo_t* t = tc->t;
  size_t e = t->size, r = (size_t)ctx->rank;
  size_t sendBytes = tc->n.sendCount * e, recvBytes = tc->n.recvCount * e;
  size_t end = recvBytes;
  if (tc->inPlace) {
    size_t se = tc->n.sendInplaceOffset * r * e + sendBytes;
    size_t re = tc->n.recvInplaceOffset * r * e + recvBytes;
    end = se > re ? se : re;
  }
  char *sendp, *recvp;
  bufPtrs(ctx, tc, &sendp, &recvp);
  uint64_t seed = ++ctx->seed;
  memset(ctx->recv, POISON_BYTE, end);
  for (size_t i = 0; i < tc->n.sendCount; i++)
    writeElem(t, sendp, i, genValue(t, tc->op, ctx->nranks, ctx->rank, i, seed));
  for (int k = 0; k < CANARY_BYTES; k++) ctx->recv[end + k] = (char)(0xC3 ^ (k * 29));
  if (startColl(ctx, tc) || complete(ctx)) return -1;

  int looseAvg = tc->op == collAvg && (ctx->nranks & (ctx->nranks - 1)) != 0
                     ? ctx->nranks : 0;
  int64_t bad = 0;
  for (size_t j = 0; j < tc->n.recvCount; j++) {
    int peer;
    size_t idx;
    int64_t want;
    switch (ctx->c->source(ctx->rank, ctx->nranks, tc->root, tc->n.paramCount,
                           j, &peer, &idx)) {
      case BENCH_SRC_ONE: want = genValue(t, tc->op, ctx->nranks, peer, idx, seed); break;
      case BENCH_SRC_ALL: want = reduceAll(t, tc->op, ctx->nranks, idx, seed); break;
      default: continue;
    }
    if (!matches(t, recvp, j, want, looseAvg)) bad++;
  }
  for (int k = 0; k < CANARY_BYTES; k++)
    if (ctx->recv[end + k] != (char)(0xC3 ^ (k * 29))) bad++;
  *wrong = bad;
  return 0;
}

/* Checks tc `-c` times; *wrong = mismatches summed over all ranks. */
static int checkColl(rankCtx_t* ctx, const testCase_t* tc, int64_t* wrong) {
  *wrong = 0;
  for (int c = 0; c < ctx->o->check && *wrong == 0; c++) {
    int64_t mine = 0;
    if (checkOnce(ctx, tc, &mine)) return -1;
    if (mine)
      fprintf(stderr, "coll-tests: rank %d: %s %s %s count %zu%s: %lld wrong "
              "elements\n", ctx->rank, ctx->c->name, tc->t->name,
              tc->op == OP_COPY ? "none" : kOps[tc->op].name, tc->n.paramCount,
              tc->inPlace ? " in-place" : "", (long long)mine);
    *wrong = mine;
    BCHECK(ctx, collAllReduce(wrong, wrong, 1, collInt64, collSum, ctx->comm, NULL));
  }
  return 0;
}

/* Times and checks one placement of one size; prints its 4 columns. */
static int benchTime(rankCtx_t* ctx, const testCase_t* tc) {
  double sec;
  if (timeColl(ctx, tc, &sec)) return -1;
  size_t e = tc->t->size;
  size_t bytes = (tc->n.sendCount > tc->n.recvCount ? tc->n.sendCount : tc->n.recvCount) * e;
  double n = ctx->nranks;
  double factor = ctx->c->busFactor == BENCH_BUS_ALLREDUCE ? 2 * (n - 1) / n
                  : ctx->c->busFactor == BENCH_BUS_NM1_N   ? (n - 1) / n : 1;
  double algBw = sec > 0 ? (double)bytes / 1e9 / sec : 0;
  double busBw = algBw * factor;
  int64_t wrong = -1; /* N/A */
  if (ctx->o->check > 0 && (!tc->inPlace || ctx->c->checkInPlace)) {
    if (checkColl(ctx, tc, &wrong)) return -1;
    if (wrong) ctx->errors++;
  }
  char ts[32], as[32], bs[32];
  fmtFloat(ts, sizeof(ts), sec * 1e6, 7);
  fmtFloat(as, sizeof(as), algBw, 6);
  fmtFloat(bs, sizeof(bs), busBw, 6);
  if (wrong >= 0) rprintf(ctx, "  %7s  %6s  %6s  %6g", ts, as, bs, (double)wrong);
  else rprintf(ctx, "  %7s  %6s  %6s    N/A", ts, as, bs);
  ctx->bwSum += busBw;
  ctx->bwCount++;
  return 0;
}

/* The size after `size` in the -b/-e/-f/-i sweep (0 when it would wrap). */
static size_t nextSize(const benchOpts_t* o, size_t size) {
  size_t next = o->stepFactor > 1 ? (size ? size * o->stepFactor : 1)
                                  : size + o->stepBytes;
  return next > size ? next : 0;
}

/* Sweeps the sizes for one (type, op, root): one table row per size. */
static int timeTest(rankCtx_t* ctx, const typeInfo_t* t, int op, int root) {
  for (size_t size = ctx->o->minBytes; size <= ctx->maxBytes;) {
    testCase_t tc = {.t = t, .op = op, .root = root};
    ctx->c->counts(size / t->size, t->size, ctx->nranks, &tc.n);
    size_t big = tc.n.sendCount > tc.n.recvCount ? tc.n.sendCount : tc.n.recvCount;
    rprintf(ctx, "%12zu  %12zu  %8s  %6s  %6d", big * t->size, tc.n.paramCount,
            t->name, op == OP_COPY ? "none" : kOps[op].name, root);
    for (tc.inPlace = 0; tc.inPlace <= 1; tc.inPlace++)
      if (benchTime(ctx, &tc)) return -1;
    rprintf(ctx, "\n");
    size = nextSize(ctx->o, size);
    if (size == 0) break;
  }
  return 0;
}

/* Header lines 1-4 of nccl-tests (rank 0). */
static void printHeader(const rankCtx_t* ctx) {
  const benchOpts_t* o = ctx->o;
  int libVersion = 0;
  collGetVersion(&libVersion);
  rprintf(ctx, "# coll-tests version %s coll-library=%d\n", BENCH_VERSION, libVersion);
  rprintf(ctx, "# Collective test starting: %s\n", o->prog);
  rprintf(ctx, "# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) "
          "warmup iters: %d iters: %d agg iters: %d validation: %d graph: 0 "
          "unalign: 0\n", o->nthreads, o->ngpus, o->minBytes, o->maxBytes,
          o->stepFactor > 1 ? o->stepFactor : o->stepBytes,
          o->stepFactor > 1 ? "factor" : "bytes", o->warmup, o->iters, o->agg,
          o->check);
  if (o->blocking == 1)
    rprintf(ctx, "# Blocking Enabled: wait for completion and barrier after each collective \n");
  if (o->blocking == 2)
    rprintf(ctx, "# Blocking Enabled: wait for completion after each collective (no barrier) \n");
  if (o->parallelInit)
    rprintf(ctx, "# Parallel Init Enabled: threads call into collCommInitRank concurrently \n");
  rprintf(ctx, "#\n");
}

/* One rank's line of "# Using devices", exchanged as bytes. */
typedef struct {
  int32_t rank, pid;
  char host[56];
} rankInfo_t;

/* Gathers every rank's pid and host; rank 0 prints the device lines.
 * Writes the number of ranks on this host to *local. */
static int printDevices(rankCtx_t* ctx, int* local) {
  rankInfo_t me = {.rank = ctx->rank, .pid = (int32_t)getpid()};
  gethostname(me.host, sizeof(me.host) - 1);
  me.host[strcspn(me.host, ".")] = '\0';
  rankInfo_t* all = calloc((size_t)ctx->nranks, sizeof(*all));
  if (!all) return -1;
  collResult_t r = collAllGather(&me, all, sizeof(me), collInt8, ctx->comm, NULL);
  if (r != collSuccess) {
    free(all);
    BCHECK(ctx, r);
  }
  rprintf(ctx, "# Using devices\n");
  *local = 0;
  for (int i = 0; i < ctx->nranks; i++) {
    int dev = 0;
    for (int j = 0; j < i; j++) dev += strcmp(all[j].host, all[i].host) == 0;
    *local += strcmp(all[i].host, me.host) == 0;
    rprintf(ctx, "#  Rank %2d Group %2d Pid %6d on %10s device %2d [cpu] Host memory\n",
            all[i].rank, 0, all[i].pid, all[i].host, dev);
  }
  free(all);
  return 0;
}

/* Lowers maxBytes (same on all ranks) so the local ranks' buffers fit. */
static int fitMemory(rankCtx_t* ctx, int localRanks) {
  uint64_t phys = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGE_SIZE);
  uint64_t reserve = 1ull << 30;
  uint64_t allowed = phys > reserve ? (phys - reserve) / (uint64_t)localRanks / 2 : 0;
  allowed = allowed > 4096 + CANARY_BYTES ? allowed - 4096 - CANARY_BYTES : 0;
  BCHECK(ctx, collAllReduce(&allowed, &allowed, 1, collUint64, collMin, ctx->comm, NULL));
  if (ctx->maxBytes > allowed) {
    ctx->maxBytes = (size_t)allowed;
    rprintf(ctx, "#\n# Reducing maxBytes to %zu due to memory limitation\n", ctx->maxBytes);
  }
  return 0;
}

/* Allocates and touches the buffers (first-touch faults stay out of the
 * timings). */
static int allocBuffers(rankCtx_t* ctx) {
  size_t bytes = (ctx->maxBytes + 4095) & ~(size_t)4095;
  void *s = NULL, *r = NULL;
  if (posix_memalign(&s, 4096, bytes ? bytes : 4096) ||
      posix_memalign(&r, 4096, bytes + CANARY_BYTES)) {
    fprintf(stderr, "coll-tests: rank %d: cannot allocate 2 x %zu bytes\n",
            ctx->rank, bytes);
    free(s);
    return -1;
  }
  memset(s, 0, bytes ? bytes : 4096);
  memset(r, 0, bytes + CANARY_BYTES);
  ctx->send = s;
  ctx->recv = r;
  return 0;
}

/* Loops over the types, ops, roots and -N cycles. */
static int runAll(rankCtx_t* ctx) {
  const benchOpts_t* o = ctx->o;
  const benchColl_t* c = ctx->c;
  int t0 = o->typeIndex < 0 ? 0 : o->typeIndex;
  int t1 = o->typeIndex < 0 ? NTYPES : o->typeIndex + 1;
  int op0 = !c->hasOp ? OP_COPY : o->opIndex < 0 ? 0 : o->opIndex;
  int op1 = !c->hasOp ? OP_COPY + 1 : o->opIndex < 0 ? NOPS : o->opIndex + 1;
  int r0 = !c->hasRoot ? -1 : o->root < 0 ? 0 : o->root;
  int r1 = !c->hasRoot ? 0 : o->root < 0 ? ctx->nranks : o->root + 1;
  if (c->hasRoot && r0 >= ctx->nranks) {
    if (ctx->rank == 0)
      fprintf(stderr, "coll-tests: root %d is out of range (%d ranks)\n", r0, ctx->nranks);
    return -1;
  }
  for (int cycle = 0; o->cycles == 0 || cycle < o->cycles; cycle++)
    for (int t = t0; t < t1; t++)
      for (int op = op0; op < op1; op++)
        for (int root = r0; root < r1; root++)
          if (timeTest(ctx, &kTypes[t], op == OP_COPY ? OP_COPY : (int)kOps[op].op, root))
            return -1;
  return 0;
}

/* Table header (rank 0), nccl-tests layout. */
static void printTableHeader(const rankCtx_t* ctx) {
  const char* tm = ctx->o->cputime ? "cputime" : "time";
  rprintf(ctx, "#\n");
  rprintf(ctx, "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n",
          "", "", "", "", "");
  rprintf(ctx, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %s\n",
          "size", "count", "type", "redop", "root", tm, "algbw", "busbw", "#wrong",
          tm, "algbw", "busbw", "#wrong", "");
  rprintf(ctx, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %s\n",
          "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "",
          "(us)", "(GB/s)", "(GB/s)", "", "");
}

/* Footer (rank 0); returns the rank's status. */
static int printFooter(const rankCtx_t* ctx) {
  double avg = ctx->bwCount ? ctx->bwSum / ctx->bwCount : 0;
  const char* env = getenv("COLL_TESTS_MIN_BW");
  double minBw = env ? atof(env) : -1;
  int bwFail = minBw >= 0 && avg < 0.9 * minBw;
  rprintf(ctx, "# %-20s : %d %s\n", "Out of bounds values", ctx->errors,
          ctx->errors ? "FAILED" : "OK");
  rprintf(ctx, "# %-20s : %g %s\n", "Avg bus bandwidth", avg,
          minBw < 0 ? "" : bwFail ? "FAILED" : "OK");
  rprintf(ctx, "#\n");
  rprintf(ctx, "# Collective test concluded: %s\n", ctx->o->prog);
  return ctx->errors || bwFail ? LAUNCH_WRONG : LAUNCH_OK;
}

typedef struct {
  const benchOpts_t* o;
  const benchColl_t* c;
} rankArgs_t;

/* launchRankFn: the whole benchmark on one rank. */
static int runRank(collComm_t comm, void* arg) {
  const rankArgs_t* a = arg;
  rankCtx_t ctx = {.o = a->o, .c = a->c, .comm = comm, .maxBytes = a->o->maxBytes};
  int local = 1, rc = LAUNCH_FAILED;
  collResult_t r;
  if ((r = collCommUserRank(comm, &ctx.rank)) != collSuccess ||
      (r = collCommCount(comm, &ctx.nranks)) != collSuccess) {
    launchReportError("collCommUserRank/collCommCount", r, comm);
    return LAUNCH_FAILED;
  }
  if (!a->o->blocking && !a->o->streamNull &&
      (r = collStreamCreate(comm, &ctx.stream)) != collSuccess) {
    launchReportError("collStreamCreate", r, comm);
    return LAUNCH_FAILED;
  }
  printHeader(&ctx);
  if (printDevices(&ctx, &local) == 0 && fitMemory(&ctx, local) == 0 &&
      allocBuffers(&ctx) == 0) {
    printTableHeader(&ctx);
    if (runAll(&ctx) == 0) rc = printFooter(&ctx);
  }
  fflush(stdout);
  if (ctx.stream && rc != LAUNCH_FAILED &&
      (r = collStreamDestroy(ctx.stream)) != collSuccess) {
    launchReportError("collStreamDestroy", r, comm);
    rc = LAUNCH_FAILED;
  }
  free(ctx.send);
  free(ctx.recv);
  return rc;
}

/* count/nranks rounded down to a multiple of 16 bytes of elements. */
size_t benchPerRankCount(size_t count, size_t eltSize, int nranks) {
  size_t align = eltSize < 16 ? 16 / eltSize : 1;
  return (count / (size_t)nranks) / align * align;
}

/* Entry point of every *_perf binary. */
int benchMain(int argc, char** argv, const benchColl_t* coll) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  benchOpts_t o;
  int p = parseArgs(argc, argv, &o);
  if (p != 0) return p > 0 ? 0 : 2;
  launchOpts_t lo = {.nprocs = o.nprocs, .nthreads = o.nthreads,
                     .timeoutSec = o.timeout, .launchTimeoutSec = o.launchTimeout};
  rankArgs_t args = {&o, coll};
  return launchRun(&lo, runRank, &args);
}
