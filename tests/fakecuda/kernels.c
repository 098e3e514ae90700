/*
 * kernels.c - coll's kernels on the host (fakecuda.h): cuLibraryLoadData
 * takes coll's embedded fatbin, cuLibraryGetKernel maps each name of
 * src/device/kernels.cu to the same range body of src/reduce/reduce_math.h
 * the GPU runs, and a launch runs that body for every thread id of the
 * grid (gid < gridDim.x * blockDim.x, once per y/z index as on a GPU) on the
 * stream's worker, with every pointer translated. A pointer that is not
 * memory the device can reach (host memory, another GPU's, past the end of
 * an allocation) is a fault: CUDA_ERROR_ILLEGAL_ADDRESS, sticky.
 */
#include <stdio.h>
#include <string.h>

#include "device/kernel_names.h"
#include "fakecuda.h"
#include "reduce/reduce_math.h"

enum { FK_K_COPY, FK_K_RED, FK_K_AVG };

typedef struct {
  const char* name;
  int kind;
  size_t es; /* element size (copy: 1) */
  collRmRangeFn red;
  collRmAvgRangeFn avg;
} fkKernel;

#define FK_ES_i8 1
#define FK_ES_u8 1
#define FK_ES_i32 4
#define FK_ES_u32 4
#define FK_ES_i64 8
#define FK_ES_u64 8
#define FK_ES_f16 2
#define FK_ES_f32 4
#define FK_ES_f64 8
#define FK_ES_bf16 2
#define FK_RED(OP, TAG) {"collDevReduce_" #OP "_" #TAG, FK_K_RED, FK_ES_##TAG, collRmRange_##OP##_##TAG, NULL},
#define FK_TYPE(TAG) \
  FK_RED(sum, TAG) FK_RED(prod, TAG) FK_RED(max, TAG) FK_RED(min, TAG) \
  {"collDevAvg_" #TAG, FK_K_AVG, FK_ES_##TAG, NULL, collRmAvgRange_##TAG},
static const fkKernel fkKernels[] = {{"collDevCopy", FK_K_COPY, 1, NULL, NULL}, COLL_RM_FOR_TYPES(FK_TYPE)};
#define FK_NKERNELS (sizeof fkKernels / sizeof fkKernels[0])

static int fkLibrary; /* the one library handle */
static atomic_int fkLibLoaded;

/* nvcc's fatbin magic (the first 4 bytes of a -fatbin output). */
#define FK_FATBIN_MAGIC 0xBA55ED50u

/* 1 when the fatbin has code a compute capability 9.0 device runs: SASS
 * for sm_90 (SASS runs only on its own major version, minor <= the
 * device's) or PTX for compute_90 or older (JIT). Entries: kind (1 PTX,
 * 2 ELF) at +0, header size at +4, payload size at +8, arch at +0x1c; they
 * follow the 16-byte file header (magic, version, header size, fat size). */
static int fkFatbinFits(const void* code, char* archs, size_t len) {
  const unsigned char* p = code;
  uint16_t hdr;
  uint64_t fat;
  memcpy(&hdr, p + 6, 2);
  memcpy(&fat, p + 8, 8);
  size_t off = hdr, end = (size_t)hdr + (size_t)fat;
  int fits = 0;
  while (off + 0x20 <= end) {
    uint16_t kind;
    uint32_t eh, arch;
    uint64_t size;
    memcpy(&kind, p + off, 2);
    memcpy(&eh, p + off + 4, 4);
    memcpy(&size, p + off + 8, 8);
    memcpy(&arch, p + off + 0x1c, 4);
    size_t used = strlen(archs);
    snprintf(archs + used, len - used, "%s%s_%u", used ? " " : "", kind == 1 ? "compute" : "sm", arch);
    if ((kind == 2 && arch == 90) || (kind == 1 && arch <= 90)) fits = 1;
    if (eh == 0) break;
    off += eh + size;
  }
  return fits;
}

CUresult fk_cuLibraryLoadData(CUlibrary* lib, const void* code, CUjit_option* jo, void** jv, unsigned int nj,
                              CUlibraryOption* lo, void** lv, unsigned int nl) {
  FK_ENTER("cuLibraryLoadData");
  (void)jo, (void)jv, (void)nj, (void)lo, (void)lv, (void)nl;
  if (!lib || !code) return CUDA_ERROR_INVALID_VALUE;
  uint32_t magic;
  memcpy(&magic, code, sizeof magic);
  if (magic != FK_FATBIN_MAGIC)
    return fkFail(CUDA_ERROR_INVALID_IMAGE, "cuLibraryLoadData: image magic 0x%08x is not a fatbin", magic);
  char archs[128] = "";
  if (!fkFatbinFits(code, archs, sizeof archs))
    return fkFail(CUDA_ERROR_NO_BINARY_FOR_GPU, "cuLibraryLoadData: no sm_90 code nor PTX for <= compute_90 in [%s]",
                  archs);
  atomic_store(&fkLibLoaded, 1);
  *lib = (CUlibrary)&fkLibrary;
  return CUDA_SUCCESS;
}

CUresult fk_cuLibraryUnload(CUlibrary lib) {
  FK_ENTER("cuLibraryUnload");
  if (lib != (CUlibrary)&fkLibrary) return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_SUCCESS;
}

CUresult fk_cuLibraryGetKernel(CUkernel* k, CUlibrary lib, const char* name) {
  FK_ENTER("cuLibraryGetKernel");
  if (!k || !name) return CUDA_ERROR_INVALID_VALUE;
  if (lib != (CUlibrary)&fkLibrary || !atomic_load(&fkLibLoaded)) return CUDA_ERROR_INVALID_HANDLE;
  for (size_t i = 0; i < FK_NKERNELS; i++)
    if (strcmp(fkKernels[i].name, name) == 0) {
      *k = (CUkernel)&fkKernels[i];
      return CUDA_SUCCESS;
    }
  return fkFail(CUDA_ERROR_NOT_FOUND, "cuLibraryGetKernel: no kernel named %s", name);
}

/* Arguments as the launch copied them. */
typedef struct {
  uintptr_t dst, a, b;
  size_t n;
  int nranks;
} fkArgs;

static CUresult fkFault(const fkKernel* k, const char* which, uintptr_t p, size_t bytes, int dev) {
  fprintf(stderr, "fakecuda: kernel %s on GPU %d: %s %p (+%zu bytes) is not memory this GPU can reach: "
                  "CUDA_ERROR_ILLEGAL_ADDRESS\n", k->name, dev, which, (void*)p, bytes);
  return CUDA_ERROR_ILLEGAL_ADDRESS;
}

static CUresult fkRunKernel(const void* kernel, const unsigned char* raw, unsigned grid[3], unsigned block[3],
                            int dev) {
  const fkKernel* k = kernel;
  fkArgs x;
  memcpy(&x, raw, sizeof x);
  size_t bytes = k->kind == FK_K_COPY ? x.n : x.n * k->es;
  if (bytes == 0) return CUDA_SUCCESS;
  void* d = fkTranslate(x.dst, bytes, dev, 1, 0);
  if (!d) return fkFault(k, "dst", x.dst, bytes, dev);
  void *a = NULL, *b = NULL;
  if (k->kind != FK_K_AVG && !(a = fkTranslate(x.a, bytes, dev, 0, 0)))
    return fkFault(k, k->kind == FK_K_COPY ? "src" : "a", x.a, bytes, dev);
  if (k->kind == FK_K_RED && !(b = fkTranslate(x.b, bytes, dev, 0, 0))) return fkFault(k, "b", x.b, bytes, dev);
  size_t nw = (size_t)grid[0] * block[0];
  size_t reps = (size_t)grid[1] * grid[2] * block[1] * block[2];
  for (size_t rep = 0; rep < reps; rep++)
    for (size_t gid = 0; gid < nw; gid++) {
      if (k->kind == FK_K_COPY) collRmCopyRange(d, a, x.n, gid, nw);
      else if (k->kind == FK_K_RED) k->red(d, a, b, x.n, gid, nw);
      else k->avg(d, x.n, x.nranks, gid, nw);
    }
  return CUDA_SUCCESS;
}

CUresult fk_cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                           unsigned int by, unsigned int bz, unsigned int shmem, CUstream h, void** params,
                           void** extra) {
  FK_ENTER("cuLaunchKernel");
  const fkKernel* k = (const fkKernel*)f;
  if (k < fkKernels || k >= fkKernels + FK_NKERNELS) return fkFail(CUDA_ERROR_INVALID_HANDLE, "cuLaunchKernel: not a kernel");
  if (!params || extra) return fkFail(CUDA_ERROR_INVALID_VALUE, "cuLaunchKernel: arguments must come as kernelParams");
  if (!gx || !gy || !gz || !bx || !by || !bz || gy > 65535 || gz > 65535 || gx > 0x7fffffffu)
    return fkFail(CUDA_ERROR_INVALID_VALUE, "cuLaunchKernel %s: grid %ux%ux%u block %ux%ux%u", k->name, gx, gy, gz, bx,
                  by, bz);
  if ((unsigned long long)bx * by * bz > COLL_DEV_THREADS) /* __launch_bounds__ */
    return fkFail(CUDA_ERROR_INVALID_VALUE, "cuLaunchKernel %s: %u threads per block exceed the launch bounds (%d)",
                  k->name, bx * by * bz, COLL_DEV_THREADS);
  if (shmem > 48 * 1024) return CUDA_ERROR_INVALID_VALUE;
  CUresult err;
  fkStream* s = fkStreamOf(h, &err);
  if (!s) return err;
  int dev = fkCurrentDev();
  if (dev < 0) return fkFail(CUDA_ERROR_INVALID_CONTEXT, "cuLaunchKernel without a current context");
  if (s->dev != dev)
    return fkFail(CUDA_ERROR_INVALID_HANDLE, "cuLaunchKernel %s: the stream belongs to GPU %d, the current context to GPU %d",
                  k->name, s->dev, dev);
  fkArgs x = {0};
  if (k->kind == FK_K_COPY) { /* (dst, src, bytes) */
    memcpy(&x.dst, params[0], sizeof(void*));
    memcpy(&x.a, params[1], sizeof(void*));
    memcpy(&x.n, params[2], sizeof(size_t));
  } else if (k->kind == FK_K_RED) { /* (dst, a, b, n) */
    memcpy(&x.dst, params[0], sizeof(void*));
    memcpy(&x.a, params[1], sizeof(void*));
    memcpy(&x.b, params[2], sizeof(void*));
    memcpy(&x.n, params[3], sizeof(size_t));
  } else { /* (buf, n, nranks) */
    memcpy(&x.dst, params[0], sizeof(void*));
    memcpy(&x.n, params[1], sizeof(size_t));
    memcpy(&x.nranks, params[2], sizeof(int));
  }
  unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  return fkEnqueueKernel(s, k, fkRunKernel, &x, sizeof x, grid, block);
}
