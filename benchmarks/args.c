/*
 * args.c - the benchmark's command line: every flag of nccl-tests (getopt
 * string t:g:b:e:i:f:n:m:w:N:p:I:K:c:o:d:r:z:y:T:hG:C:a:R:x:D:V:J:S:M:u:)
 * plus -np N (fork N local ranks) and --csv FILE. Flags that only mean
 * something for GPU kernels are accepted and noted once in the output, so
 * sweep scripts written for nccl-tests run unchanged.
 *
 * SPDX-License-Identifier: BSD-3-Clause
 */
#include <getopt.h>
#include <libgen.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define DEFAULT_LAUNCH_TIMEOUT 1800

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
          "[-G,--cudagraph <num graph launches>] (ignored: host memory) \n\t"
          "[-C,--report_cputime <0/1>] \n\t"
          "[-a,--average <0/1/2/3> report average iteration time <0=RANK0/1=AVG/2=MIN/3=MAX>] \n\t"
          "[-R,--local_register <0/1/2>] 1: buffers from collMemAlloc, registered (zero copy in a node); 2: as 1 \n\t"
          "[-x,--cta_policy <policy>] (ignored: GPU kernels) \n\t"
          "[-D,--device_implementation <0/1>] [-V,--device_cta_count <n>] (ignored: GPU kernels) \n\t"
          "[-I,--per_iter_timing <0/1>] [-K,--per_iter_skip <n>] \n\t"
          "[-S,--report_timestamps <0/1>] \n\t"
          "[-J,--output_file <file.json>] [--csv <file.csv>] \n\t"
          "[-M,--memory <0/1>] report memory usage \n\t"
          "[-u,--unalign <elements>] \n\t"
          "[--show_algo <0/1>] print the algorithm the tuner chose on each row \n\t"
          "[--device <cpu/cuda>] buffers in host memory (default) or on the GPU \n\t"
          "[-h,--help]\n"
          "\n"
          "Launch: -np N forks N rank processes on this host (no MPI needed); under mpirun,\n"
          "srun or torchrun each process is one rank. The -np parent kills the ranks after\n"
          "COLL_TESTS_LAUNCH_TIMEOUT seconds (default %d; no limit with -N 0 unless it is set;\n"
          "0 = no limit). COLL_TESTS_MIN_BW=<GB/s>: fail if the average bus bandwidth is\n"
          "below 90%% of it. COLL_TESTS_DEVICE=cuda: as --device cuda (nccl-tests scripts\n"
          "unchanged on GPUs). --device cuda: the local rank r uses GPU r %% count, the\n"
          "calls run on a CUDA stream (collStreamCreateCuda), timed as nccl-tests does.\n",
          prog, DEFAULT_LAUNCH_TIMEOUT);
}

/* Parses a size with an optional K/M/G suffix (KiB/MiB/GiB) into *out.
 * Returns -1 (and prints why) for garbage or a value beyond 2^63. */
static int parseSize(const char* s, const char* what, size_t* out) {
  char* end;
  double v = strtod(s, &end);
  double unit = 1;
  if (end != s) switch (*end) {
      case 'G': case 'g': unit = 1024.0 * 1024 * 1024; end++; break;
      case 'M': case 'm': unit = 1024.0 * 1024; end++; break;
      case 'K': case 'k': unit = 1024.0; end++; break;
      default: break;
    }
  if (end != s && (*end == 'B' || *end == 'b')) end++;
  if (end == s || *end || !(v >= 0)) {
    fprintf(stderr, "invalid size '%s' for %s (bytes, with an optional K, M or G suffix)\n", s, what);
    return -1;
  }
  v *= unit;
  if (v >= 0x1p63) {
    fprintf(stderr, "%s %s is too large (%.3g bytes; at most 2^63)\n", what, s, v);
    return -1;
  }
  *out = (size_t)v;
  return 0;
}

/* Parses a decimal/hex integer in [minv, maxv] into *out; prints why on error. */
static int parseInt(const char* s, const char* flag, long minv, long maxv, long* out) {
  char* end;
  long v = strtol(s, &end, 0);
  if (end == s || *end || v < minv || v > maxv) {
    fprintf(stderr, "invalid value '%s' for %s (an integer in [%ld, %ld])\n", s, flag, minv, maxv);
    return -1;
  }
  *out = v;
  return 0;
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
    if (parseInt(val, "-np", 1, 65536, &v)) return -1;
    o->nprocs = (int)v;
  }
  *argc = w;
  argv[w] = NULL;
  return 0;
}

/* Records that flag (with a non-default value) is accepted but ignored. */
static void noteIgnored(benchOpts_t* o, const char* flag, const char* value, const char* why) {
  size_t n = strlen(o->ignored);
  snprintf(o->ignored + n, sizeof o->ignored - n, "# %s %s is ignored: %s\n", flag, value, why);
}

/* COLL_TESTS_LAUNCH_TIMEOUT, or the default (none for endless -N 0 runs). */
static int launchTimeout(const benchOpts_t* o) {
  const char* lt = getenv("COLL_TESTS_LAUNCH_TIMEOUT");
  if (!lt || !*lt) return o->cycles == 0 ? 0 : DEFAULT_LAUNCH_TIMEOUT;
  long v;
  if (parseInt(lt, "COLL_TESTS_LAUNCH_TIMEOUT", 0, 1L << 30, &v)) return -1;
  return (int)v;
}

/* COLL_TESTS_MIN_BW: GB/s the average bus bandwidth must reach (within 10 %),
 * a number >= 0; unset: no check. Returns -1 after a message on a bad value. */
static int minBusBw(double* out) {
  const char* s = getenv("COLL_TESTS_MIN_BW");
  *out = -1;
  if (!s || !*s) return 0;
  char* end;
  double v = strtod(s, &end);
  if (end == s || *end || !(v >= 0) || v > 1e9) {
    fprintf(stderr, "invalid value '%s' for COLL_TESTS_MIN_BW (GB/s of average bus bandwidth, a number >= 0; "
                    "unset it for no check)\n", s);
    return -1;
  }
  *out = v;
  return 0;
}

enum { OPT_CSV = 1000, OPT_SHOW_ALGO, OPT_DEVICE };

/* --device / COLL_TESTS_DEVICE: "cpu" (host memory) or "cuda" (GPU). */
static int parseDevice(const char* s, const char* what, benchOpts_t* o) {
  if (strcmp(s, "cpu") == 0 || strcmp(s, "host") == 0) o->device = BENCH_DEV_HOST;
  else if (strcmp(s, "cuda") == 0 || strcmp(s, "gpu") == 0) o->device = BENCH_DEV_CUDA;
  else {
    fprintf(stderr, "invalid value '%s' for %s (cpu or cuda)\n", s, what);
    return -1;
  }
  return 0;
}

int benchParseArgs(int argc, char** argv, benchOpts_t* o) {
  *o = (benchOpts_t){.nthreads = 1, .ngpus = 1, .nprocs = 1,
                     .minBytes = 32 << 20, .maxBytes = 32 << 20,
                     .stepBytes = 1 << 20, .stepFactor = 1, .iters = 20,
                     .warmup = 1, .agg = 1, .check = 1, .cycles = 1,
                     .timeout = -1, .average = 1, .typeIndex = 7,
                     .opIndex = 0, .root = 0, .argc = argc, .argv = argv};
  o->prog = basename(argv[0]);
  static char* copy[1024];
  if (argc >= (int)(sizeof copy / sizeof copy[0])) {
    fprintf(stderr, "too many arguments\n");
    return -1;
  }
  memcpy(copy, argv, sizeof(char*) * (size_t)(argc + 1)); /* -J records the original */
  argv = copy;
  if (extractNprocs(&argc, argv, o)) return -1;
  const char* envDev = getenv("COLL_TESTS_DEVICE");
  if (envDev && *envDev && parseDevice(envDev, "COLL_TESTS_DEVICE", o)) return -1;
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
      {"per_iter_timing", required_argument, 0, 'I'},
      {"per_iter_skip", required_argument, 0, 'K'},
      {"check", required_argument, 0, 'c'},
      {"op", required_argument, 0, 'o'},
      {"datatype", required_argument, 0, 'd'},
      {"root", required_argument, 0, 'r'},
      {"blocking", required_argument, 0, 'z'},
      {"stream_null", required_argument, 0, 'y'},
      {"timeout", required_argument, 0, 'T'},
      {"cudagraph", required_argument, 0, 'G'},
      {"report_cputime", required_argument, 0, 'C'},
      {"average", required_argument, 0, 'a'},
      {"local_register", required_argument, 0, 'R'},
      {"cta_policy", required_argument, 0, 'x'},
      {"device_implementation", required_argument, 0, 'D'},
      {"device_cta_count", required_argument, 0, 'V'},
      {"output_file", required_argument, 0, 'J'},
      {"report_timestamps", required_argument, 0, 'S'},
      {"memory", required_argument, 0, 'M'},
      {"unalign", required_argument, 0, 'u'},
      {"csv", required_argument, 0, OPT_CSV},
      {"show_algo", required_argument, 0, OPT_SHOW_ALGO},
      {"device", required_argument, 0, OPT_DEVICE},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  int c;
  long v;
  optind = 1;
  while ((c = getopt_long(argc, argv, "t:g:b:e:i:f:n:m:w:N:p:I:K:c:o:d:r:z:y:T:hG:C:a:R:x:D:V:J:S:M:u:",
                          longopts, NULL)) != -1) {
    const char* a = optarg;
    switch (c) {
      case 't': if (parseInt(a, "-t", 1, 65536, &v)) return -1; o->nthreads = (int)v; break;
      case 'g': if (parseInt(a, "-g", 1, 65536, &v)) return -1; o->ngpus = (int)v; break;
      case 'b': if (parseSize(a, "minbytes (-b)", &o->minBytes)) return -1; break;
      case 'e': if (parseSize(a, "maxbytes (-e)", &o->maxBytes)) return -1; break;
      case 'i': if (parseSize(a, "stepbytes (-i)", &o->stepBytes)) return -1; break;
      case 'f': if (parseInt(a, "-f", 0, 1L << 30, &v)) return -1; o->stepFactor = (size_t)v; break;
      case 'n': if (parseInt(a, "-n", 1, 1L << 30, &v)) return -1; o->iters = (int)v; break;
      case 'm': if (parseInt(a, "-m", 1, 1L << 20, &v)) return -1; o->agg = (int)v; break;
      case 'w': if (parseInt(a, "-w", 0, 1L << 30, &v)) return -1; o->warmup = (int)v; break;
      case 'N': if (parseInt(a, "-N", 0, 1L << 30, &v)) return -1; o->cycles = (int)v; break;
      case 'p': if (parseInt(a, "-p", 0, 1, &v)) return -1; o->parallelInit = (int)v; break;
      case 'I': if (parseInt(a, "-I", 0, 1, &v)) return -1; o->perIter = (int)v; break;
      case 'K': if (parseInt(a, "-K", 0, 1L << 30, &v)) return -1; o->perIterSkip = (int)v; break;
      case 'c': if (parseInt(a, "-c", 0, 1L << 30, &v)) return -1; o->check = (int)v; break;
      case 'y': if (parseInt(a, "-y", 0, 1, &v)) return -1; o->streamNull = (int)v; break;
      case 'T': if (parseInt(a, "-T", 0, 1L << 30, &v)) return -1; o->timeout = (int)v; break;
      case 'C': if (parseInt(a, "-C", 0, 1, &v)) return -1; o->cputime = (int)v; break;
      case 'z': if (parseInt(a, "-z", 0, 2, &v)) return -1; o->blocking = (int)v; break;
      case 'a': if (parseInt(a, "-a", 0, 3, &v)) return -1; o->average = (int)v; break;
      case 'S': if (parseInt(a, "-S", 0, 1, &v)) return -1; o->timestamps = (int)v; break;
      case 'M': if (parseInt(a, "-M", 0, 1, &v)) return -1; o->memReport = (int)v; break;
      case 'u': if (parseInt(a, "-u", 0, 1L << 20, &v)) return -1; o->unalign = (int)v; break;
      case 'J': o->jsonPath = a; break;
      case OPT_CSV: o->csvPath = a; break;
      case OPT_DEVICE: if (parseDevice(a, "--device", o)) return -1; break;
      case OPT_SHOW_ALGO: if (parseInt(a, "--show_algo", 0, 1, &v)) return -1; o->showAlgo = (int)v; break;
      case 'G':
        if (parseInt(a, "-G", 0, 1L << 30, &v)) return -1;
        if (v) noteIgnored(o, "-G", a, o->device == BENCH_DEV_CUDA ? "coll does not capture CUDA graphs yet (graph: 0)"
                                      : "CUDA graphs need GPU buffers; these runs use host memory (graph: 0)");
        break;
      case 'R':
        if (parseInt(a, "-R", 0, 2, &v)) return -1;
        o->localRegister = v != 0;
        if (v == 2) noteIgnored(o, "-R", a, "no symmetric registration: runs as -R 1 (collMemAlloc + collCommRegister)");
        break;
      case 'x': noteIgnored(o, "-x", a, "CTA policies apply to GPU kernels"); break;
      case 'D':
        if (parseInt(a, "-D", 0, 1L << 30, &v)) return -1;
        if (v) noteIgnored(o, "-D", a, "device-API kernels need GPUs");
        break;
      case 'V': noteIgnored(o, "-V", a, "device-API kernels need GPUs"); break;
      case 'o':
        if ((o->opIndex = benchOpIndex(a)) == -2) {
          fprintf(stderr, "invalid op '%s' (sum, prod, max, min, avg or all)\n", a);
          return -1;
        }
        break;
      case 'd':
        if ((o->typeIndex = benchTypeIndex(a)) == -2) {
          fprintf(stderr, "invalid datatype '%s' (int8, uint8, int32, uint32, int64, uint64, half, float, "
                  "double, bfloat16 or all)\n", a);
          return -1;
        }
        break;
      case 'r':
        if (strcmp(a, "all") == 0) o->root = -1;
        else if (parseInt(a, "-r", 0, 65535, &v)) return -1;
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
    fprintf(stderr, "-g %d: coll runs one rank per thread or process; use -g 1\n", o->ngpus);
    return -1;
  }
  if (o->minBytes > o->maxBytes) {
    fprintf(stderr, "invalid sizes for 'minbytes' and 'maxbytes': %zu > %zu\n", o->minBytes, o->maxBytes);
    return -1;
  }
  if (o->stepFactor <= 1 && o->stepBytes == 0 && o->minBytes < o->maxBytes) {
    fprintf(stderr, "-i 0 without -f > 1 would never reach maxbytes\n");
    return -1;
  }
  if ((long)o->nprocs * o->nthreads > 65536) {
    fprintf(stderr, "too many ranks (-np %d x -t %d > 65536)\n", o->nprocs, o->nthreads);
    return -1;
  }
  if (o->perIter && o->perIterSkip >= o->iters) {
    fprintf(stderr, "-K %d leaves no iteration of -n %d for the per-iteration statistics\n", o->perIterSkip,
            o->iters);
    return -1;
  }
  if (o->device == BENCH_DEV_CUDA && o->streamNull && o->nthreads > 1) {
    fprintf(stderr, "-y 1 with -t %d and --device cuda: the rank threads of one process would queue on one legacy "
                    "default stream per GPU and wait for each other; use -y 0 (a stream per rank)\n", o->nthreads);
    return -1;
  }
  if ((o->launchTimeout = launchTimeout(o)) < 0) return -1;
  if (minBusBw(&o->minBusBw) != 0) return -1;
  return 0;
}
