/*
 * entry.c - the fake driver's entry table (cuGetProcAddress), cuInit, the
 * version, error names, the environment and failure injection (fakecuda.h).
 * Only cuInit, cuDriverGetVersion and cuGetProcAddress_v2 are exported: the
 * rest is reached through the table, as coll's loader does (and
 * fakecudaCalls and fakecudaPolls, for tests).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakecuda.h"

fkConfig fkCfg;
_Atomic int fkSticky;
_Thread_local int fkInHostFn;

/* ---- failure injection -------------------------------------------------------- */
#define FK_MAX_RULES 8
typedef struct {
  char name[64];
  long k;
  int result;
  int hang; /* FAKECUDA_HANG: the call succeeds, its stream operation never completes */
  atomic_long calls;
} fkRule;
static fkRule fkRules[FK_MAX_RULES];
static int fkNRules;
_Thread_local int fkHangNext;

static int fkDefaultFailure(const char* name) {
  if (strstr(name, "Launch")) return CUDA_ERROR_LAUNCH_FAILED;
  if (strstr(name, "Alloc") || strstr(name, "Create") || strstr(name, "Reserve") || strstr(name, "Retain"))
    return CUDA_ERROR_OUT_OF_MEMORY;
  return CUDA_ERROR_UNKNOWN;
}

static void fkParseFail(const char* spec, int hang) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", spec);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && fkNRules < FK_MAX_RULES;
       tok = strtok_r(NULL, ",", &save)) {
    char* c1 = strchr(tok, ':');
    if (!c1) continue;
    *c1 = 0;
    fkRule* r = &fkRules[fkNRules];
    snprintf(r->name, sizeof r->name, "%s", tok);
    char* c2 = strchr(c1 + 1, ':');
    if (c2) *c2 = 0;
    r->k = strtol(c1 + 1, NULL, 10);
    r->result = c2 ? (int)strtol(c2 + 1, NULL, 0) : fkDefaultFailure(r->name);
    r->hang = hang;
    if (r->k >= 1) fkNRules++;
  }
}

static int fkEnvInt(const char* name, int dflt) {
  const char* e = getenv(name);
  return e && *e ? (int)strtol(e, NULL, 0) : dflt;
}

static void fkSortNames(void);
static pthread_once_t fkOnce = PTHREAD_ONCE_INIT;
static void fkInit(void) {
  fkSortNames();
  fkCfg.devices = fkEnvInt("FAKECUDA_DEVICES", 1);
  if (fkCfg.devices < 0) fkCfg.devices = 0;
  if (fkCfg.devices > FK_MAX_DEVS) fkCfg.devices = FK_MAX_DEVS;
  fkCfg.sms = fkEnvInt("FAKECUDA_SMS", 132);
  if (fkCfg.sms < 1) fkCfg.sms = 1;
  fkCfg.noMemOps = fkEnvInt("FAKECUDA_NO_MEMOPS", 0);
  fkCfg.noPeer = fkEnvInt("FAKECUDA_NO_PEER", 0);
  fkCfg.noFd = fkEnvInt("FAKECUDA_NO_FD", 0);
  fkCfg.noDmaBuf = fkEnvInt("FAKECUDA_NO_DMABUF", 0);
  fkCfg.rdmaOrdering = fkEnvInt("FAKECUDA_RDMA_ORDERING", 0);
  fkCfg.delayUs = fkEnvInt("FAKECUDA_DELAY_US", 0);
  fkCfg.version = fkEnvInt("FAKECUDA_VERSION", CUDA_VERSION);
  fkCfg.verbose = fkEnvInt("FAKECUDA_VERBOSE", 0);
  fkCfg.memBytes = (size_t)fkEnvInt("FAKECUDA_MEM_MB", 16384) << 20;
  fkCfg.pinnedBytes = (size_t)fkEnvInt("FAKECUDA_PINNED_KB", 0) << 10;
  static const int buses[] = {0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB};
  for (int i = 0; i < FK_MAX_DEVS; i++)
    snprintf(fkCfg.pci[i], sizeof fkCfg.pci[i], "0000:%02X:00.0", i < 8 ? buses[i] : 0xE0 + i);
  const char* pci = getenv("FAKECUDA_PCI");
  if (pci && *pci) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", pci);
    int i = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && i < FK_MAX_DEVS; tok = strtok_r(NULL, ",", &save))
      snprintf(fkCfg.pci[i++], sizeof fkCfg.pci[0], "%s", tok);
  }
  const char* miss = getenv("FAKECUDA_MISSING");
  if (miss) snprintf(fkCfg.missing, sizeof fkCfg.missing, "%s", miss);
  const char* fail = getenv("FAKECUDA_FAIL");
  if (fail && *fail) fkParseFail(fail, 0);
  const char* hang = getenv("FAKECUDA_HANG");
  if (hang && *hang) fkParseFail(hang, 1);
}

void fkInitOnce(void) { pthread_once(&fkOnce, fkInit); }

CUresult fkFail(CUresult r, const char* fmt, ...) {
  if (fkCfg.verbose) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fakecuda: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
  }
  return r;
}

void fkSetSticky(CUresult r) {
  int zero = 0;
  atomic_compare_exchange_strong(&fkSticky, &zero, (int)r);
}

static atomic_int fkInitDone; /* cuInit succeeded */

/* ---- call counts ---------------------------------------------------------------- */
/* The entry points by name, sorted (fkInit), each with how many times it was
 * entered (fkEnter, failed calls included). */
#define FK_NAME(name) #name,
static const char* const fkNames[] = {COLL_CUDA_SYMBOLS(FK_NAME) COLL_CUDA_OPTIONAL_SYMBOLS(FK_NAME)};
#undef FK_NAME
#define FK_NNAMES (sizeof fkNames / sizeof fkNames[0])
static const char* fkSorted[FK_NNAMES];
static atomic_long fkCalls[FK_NNAMES];

static int fkNameCmp(const void* a, const void* b) { return strcmp(*(const char* const*)a, *(const char* const*)b); }
static void fkSortNames(void) {
  memcpy(fkSorted, fkNames, sizeof fkSorted);
  qsort(fkSorted, FK_NNAMES, sizeof fkSorted[0], fkNameCmp);
}
/* The counter of entry point `name`, or NULL for a name that is none. */
static atomic_long* fkCounter(const char* name) {
  const char** at = bsearch(&name, fkSorted, FK_NNAMES, sizeof fkSorted[0], fkNameCmp);
  return at ? &fkCalls[at - fkSorted] : NULL;
}

/* How many times entry point `name` (e.g. "cuPointerGetAttributes") was
 * called in this process, failed calls included; -1 for a name the fake
 * does not implement. Tests read it (dlsym) to see which driver calls a path
 * makes. */
FK_EXPORT long fakecudaCalls(const char* name) {
  fkInitOnce();
  atomic_long* c = fkCounter(name);
  return c ? atomic_load(c) : -1;
}

/* How many times cuEventQuery and cuStreamQuery were called in this process:
 * tests read it (dlsym) to see how often a wait polls. */
FK_EXPORT long fakecudaPolls(void) { return fakecudaCalls("cuEventQuery") + fakecudaCalls("cuStreamQuery"); }

CUresult fkEnter(const char* name) {
  fkInitOnce();
  atomic_long* calls = fkCounter(name);
  if (calls) atomic_fetch_add(calls, 1);
  fkHangNext = 0;
  for (int i = 0; i < fkNRules; i++)
    if (strcmp(fkRules[i].name, name) == 0 && atomic_fetch_add(&fkRules[i].calls, 1) + 1 == fkRules[i].k) {
      if (fkRules[i].hang) {
        fkHangNext = 1;
        fkFail(CUDA_SUCCESS, "%s: its stream operation will never complete (FAKECUDA_HANG, call %ld)", name,
               fkRules[i].k);
        continue;
      }
      return fkFail((CUresult)fkRules[i].result, "%s: failure injected (FAKECUDA_FAIL, call %ld)", name,
                    fkRules[i].k);
    }
  if (fkInHostFn) return fkFail(CUDA_ERROR_NOT_PERMITTED, "%s called from inside a host function", name);
  if (strcmp(name, "cuInit") != 0 && !atomic_load(&fkInitDone))
    return fkFail(CUDA_ERROR_NOT_INITIALIZED, "%s before cuInit", name);
  int st = atomic_load(&fkSticky);
  if (st) return (CUresult)st;
  return CUDA_SUCCESS;
}

/* ---- init, version, errors -------------------------------------------------------- */

FK_EXPORT CUresult cuInit(unsigned int flags) {
  FK_ENTER("cuInit");
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (fkCfg.devices == 0) return fkFail(CUDA_ERROR_NO_DEVICE, "cuInit: FAKECUDA_DEVICES=0");
  atomic_store(&fkInitDone, 1);
  return CUDA_SUCCESS;
}
CUresult fk_cuInit(unsigned int flags) { return cuInit(flags); }

FK_EXPORT CUresult cuDriverGetVersion(int* v) {
  fkInitOnce(); /* works before cuInit, as the real one */
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *v = fkCfg.version;
  return CUDA_SUCCESS;
}
CUresult fk_cuDriverGetVersion(int* v) { return cuDriverGetVersion(v); }

static const struct {
  int code;
  const char *name, *text;
} fkErrs[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {800, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

CUresult fk_cuGetErrorName(CUresult r, const char** s) {
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof fkErrs / sizeof fkErrs[0]; i++)
    if (fkErrs[i].code == (int)r) return *s = fkErrs[i].name, CUDA_SUCCESS;
  *s = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult fk_cuGetErrorString(CUresult r, const char** s) {
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof fkErrs / sizeof fkErrs[0]; i++)
    if (fkErrs[i].code == (int)r) return *s = fkErrs[i].text, CUDA_SUCCESS;
  *s = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}

/* ---- the entry table ------------------------------------------------------------- */
typedef void (*fkAnyFn)(void);
#define FK_ROW(name) {#name, (fkAnyFn)fk_##name},
static const struct {
  const char* name;
  fkAnyFn fn;
} fkTable[] = {COLL_CUDA_SYMBOLS(FK_ROW) COLL_CUDA_OPTIONAL_SYMBOLS(FK_ROW)};
#undef FK_ROW

FK_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult* status) {
  fkInitOnce();
  (void)flags;
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  *pfn = NULL;
  if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (cudaVersion > fkCfg.version) {
    if (status) *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    return CUDA_ERROR_NOT_FOUND;
  }
  if (fkCfg.missing[0] && strcmp(fkCfg.missing, symbol) == 0) return CUDA_ERROR_NOT_FOUND;
  for (size_t i = 0; i < sizeof fkTable / sizeof fkTable[0]; i++)
    if (strcmp(fkTable[i].name, symbol) == 0) {
      memcpy(pfn, &fkTable[i].fn, sizeof(void*));
      if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_NOT_FOUND;
}
