/*
 * test_topo_gpu.c - a rank's GPU from its current CUDA context (issue 16):
 * the GPUs' PCI bus ids of a recorded topology (p4d: 8 A100 on NVSwitch),
 * the placement that matches one, and, on the fake CUDA driver
 * (fakecuda.topo_gpu / topo_gpu_pcie: FAKECUDA_PCI gives its two GPUs the
 * bus ids of p4d GPUs 0 and 5, or of the X9DRG's GPUs 0 and 1), two ranks
 * whose contexts are current on them: rank.gpu, the link class (NVLINK,
 * PCIE) and its bandwidth and latency between them, the host link
 * the host model keeps, the device model (tuner/devmodel.c) and the tuner's
 * predicted time of a device-resident call against a host one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll.h"
#include "core/comm.h"
#include "device/cuda_loader.h"
#include "topo/topo_internal.h"
#include "tuner/model.h"
#include "tuner/tuner.h"

#ifndef COLL_FIXTURES
#error "COLL_FIXTURES (tests/fixtures/topology) must be defined by tests/CMakeLists.txt"
#endif
#define FIXTURE(name) COLL_FIXTURES "/" name

typedef struct {
  const char* bus[4]; /* bus ids to place */
  int gpu[4];         /* rank.gpu each gave */
  char ids[8][COLL_TOPO_NAME_LEN];
  int ngpus, thisSystem;
} placeArg;

/* Under the discovery lock: the GPU bus ids, then a placement per bus id. */
static void placeFn(const collTopoLocal* l, void* arg) {
  placeArg* a = arg;
  a->ngpus = l->sum.ngpus;
  a->thisSystem = l->thisSystem;
  for (int g = 0; g < 8; g++) memcpy(a->ids[g], l->gpuBus[g], COLL_TOPO_NAME_LEN);
  for (int i = 0; i < 4; i++) {
    collTopoRank r;
    hwloc_bitmap_t pin = NULL;
    char why[160];
    collTopoPlace(l, NULL, a->bus[i], &r, &pin, why, sizeof why);
    a->gpu[i] = r.gpu;
    hwloc_bitmap_free(pin);
  }
}

/* The summary's GPUs carry hwloc's bus ids; a placement with one of them
 * gets that GPU's index, any other id (or none) no GPU. */
static void test_place_by_bus_id(void** st) {
  (void)st;
  setenv("COLL_TOPO_FILE", FIXTURE("p4d-a100-efa.xml"), 1);
  placeArg a = {{"0000:90:1d.0", "0000:10:1c.0", "0000:ff:00.0", NULL}, {0}, {{0}}, 0, 0};
  assert_int_equal(collTopoWithLocal(placeFn, &a), collSuccess);
  unsetenv("COLL_TOPO_FILE");
  static const char* want[8] = {"0000:10:1c.0", "0000:10:1d.0", "0000:20:1c.0", "0000:20:1d.0",
                                "0000:90:1c.0", "0000:90:1d.0", "0000:a0:1c.0", "0000:a0:1d.0"};
  assert_int_equal(a.ngpus, 8);
  assert_int_equal(a.thisSystem, 0);
  for (int g = 0; g < 8; g++) assert_string_equal(a.ids[g], want[g]);
  assert_int_equal(a.gpu[0], 5);
  assert_int_equal(a.gpu[1], 0);
  assert_int_equal(a.gpu[2], -1);
  assert_int_equal(a.gpu[3], -1);
}

#ifdef COLL_HAVE_CUDA
typedef struct {
  collUniqueId id;
  int rank;
  collResult_t res;
  char msg[256];
  int gpu[2], cls, devCls, devOk;
  double bw, lat, hostBw;
  collTuneModel dev;           /* collTuneDeviceModel of a made-up host model */
  collTuneChoice host8, dev8;  /* all-reduce of 2 floats, host and device-resident */
} rankArg;

/* A host model with a distinct value in every field. */
static collTuneModel madeUpHost(void) {
  collTuneModel m = {{0.5, 3.0, 15.0, 50.0}, {13.0, 6.0, 1.5, 1.25}, 4.0, 10.0, 1.0, 1.0, 20.0 / 3.0};
  return m;
}

/* One rank: its context current on fake GPU `rank`, init, record, destroy. */
static void* rankMain(void* p) {
  rankArg* a = p;
  CUcontext ctx = NULL;
  a->res = collSystemError;
  if (COLL_CU(cuDevicePrimaryCtxRetain)(&ctx, a->rank) != CUDA_SUCCESS ||
      COLL_CU(cuCtxSetCurrent)(ctx) != CUDA_SUCCESS) {
    snprintf(a->msg, sizeof a->msg, "no context on fake GPU %d", a->rank);
    return NULL;
  }
  collComm_t c = NULL;
  a->res = collCommInitRank(&c, 2, a->id, a->rank);
  if (a->res != collSuccess) {
    snprintf(a->msg, sizeof a->msg, "%s", collGetLastError(NULL));
  } else {
    for (int r = 0; r < 2; r++) a->gpu[r] = c->topo->peers[r].rank.gpu;
    a->cls = collTopoLinkClass(c, 0, 1);
    a->bw = collTopoLinkBw(c, 0, 1);
    a->lat = collTopoLinkLat(c, 0, 1);
    a->hostBw = collTopoHostLinkBw(c, 0, 1);
    collTuneModel host = madeUpHost();
    a->devOk = collTuneDeviceModel(c, &host, &a->dev, &a->devCls);
    if (collTunerChoose(c, COLL_FN_ALLREDUCE, 2, collFloat, "direct", 0, &a->host8) != collSuccess ||
        collTunerChoose(c, COLL_FN_ALLREDUCE, 2, collFloat, "direct", 1, &a->dev8) != collSuccess)
      a->devOk = -1;
    a->res = collCommDestroy(c);
  }
  COLL_CU(cuCtxSetCurrent)(NULL);
  COLL_CU(cuDevicePrimaryCtxRelease)(a->rank);
  return NULL;
}
#endif

/* What two ranks on the fake GPUs must see for one FAKECUDA_PCI setting. */
typedef struct {
  const char* pci;     /* FAKECUDA_PCI of the ctest entry */
  const char* fixture; /* COLL_TOPO_FILE */
  int gpu0, gpu1, cls;
  double bw, lat;
} gpuCase;

/* Upper-case bus ids, as the driver writes them. p4d GPUs 0 and 5 are
 * joined by NVSwitch: NVLINK at 12 x 20 GB/s, 0.6 us. The X9DRG's GPUs 0
 * and 1 hang off different sockets without NVLink: PCIE at the 12 GB/s
 * default (no link speed recorded) capped at SOCKET's 10, 1.0 us x its NUMA
 * distance 2.0. */
static const gpuCase kCases[] = {
    {"0000:10:1C.0,0000:90:1D.0", FIXTURE("p4d-a100-efa.xml"), 0, 5, COLL_LINK_NVLINK, 240.0, 0.6},
    {"0000:03:00.0,0000:83:00.0", FIXTURE("x9drg-wholeio-mlx5.xml"), 0, 1, COLL_LINK_PCIE, 10.0, 2.0},
};

/* Two ranks whose contexts are current on the two fake GPUs of a case of
 * kCases (fakecuda.topo_gpu, fakecuda.topo_gpu_pcie): their GPUs, the link
 * between them, the device model and the tuner's predictions. */
static void test_comm_gpu_from_context(void** st) {
  (void)st;
  const char* pci = getenv("FAKECUDA_PCI");
  const gpuCase* k = NULL;
  for (size_t i = 0; pci && i < sizeof kCases / sizeof kCases[0]; i++)
    if (strcmp(pci, kCases[i].pci) == 0) k = &kCases[i];
  if (!k || collCudaLoadQuiet() != collSuccess) {
    print_message("skipped: needs the fake driver with FAKECUDA_PCI of a case (fakecuda.topo_gpu*)\n");
    skip();
  }
#ifdef COLL_HAVE_CUDA
  setenv("COLL_TOPO_FILE", k->fixture, 1);
  collUniqueId id;
  assert_int_equal(collGetUniqueId(&id), collSuccess);
  rankArg a[2] = {{.id = id, .rank = 0}, {.id = id, .rank = 1}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&th[i], NULL, rankMain, &a[i]), 0);
  for (int i = 0; i < 2; i++) assert_int_equal(pthread_join(th[i], NULL), 0);
  unsetenv("COLL_TOPO_FILE");
  for (int i = 0; i < 2; i++) {
    if (a[i].res != collSuccess) fail_msg("rank %d: %s", i, a[i].msg);
    assert_int_equal(a[i].gpu[0], k->gpu0);
    assert_int_equal(a[i].gpu[1], k->gpu1);
    assert_int_equal(a[i].cls, k->cls);
    assert_float_equal(a[i].bw, k->bw, 1e-4);
    assert_float_equal(a[i].lat, k->lat, 1e-9);
    /* host memories: both nodes have 2 NUMA nodes and the ranks' are unknown: SOCKET */
    assert_float_equal(a[i].hostBw, 10.0, 1e-9);
    /* the device model: the intra-node paths are the GPU link, the rest the host's */
    collTuneModel h = madeUpHost(), d = a[i].dev;
    assert_int_equal(a[i].devOk, 1);
    assert_int_equal(a[i].devCls, k->cls);
    assert_float_equal(d.latUs[COLL_PATH_SHM], k->lat, 1e-9);
    assert_float_equal(d.latUs[COLL_PATH_LOCAL], k->lat, 1e-9);
    assert_float_equal(d.bwGBs[COLL_PATH_SHM], k->bw, 1e-4);
    assert_float_equal(d.bwGBs[COLL_PATH_LOCAL], k->bw, 1e-4);
    d.latUs[COLL_PATH_SHM] = h.latUs[COLL_PATH_SHM], d.latUs[COLL_PATH_LOCAL] = h.latUs[COLL_PATH_LOCAL];
    d.bwGBs[COLL_PATH_SHM] = h.bwGBs[COLL_PATH_SHM], d.bwGBs[COLL_PATH_LOCAL] = h.bwGBs[COLL_PATH_LOCAL];
    assert_memory_equal(&d, &h, sizeof d);
    /* the tuner prices a device-resident call with it: one message each way */
    assert_string_equal(a[i].host8.algo->name, "direct");
    assert_string_equal(a[i].dev8.algo->name, "direct");
    /* latency + step 1 us + 8 B at the path's bandwidth + the 8 B reduction at
     * 0.4 x the host link: shm 3 us at 0.6 x 10 GB/s, the GPU link at its own
     * (no CPU oversubscription: 2 ranks on at least 2 cores) */
    if (sysconf(_SC_NPROCESSORS_ONLN) >= 2) {
      assert_float_equal(a[i].host8.predictedUs, 3.0 + 1.0 + 8 / 6.0e3 + 8 / 4.0e3, 1e-9);
      assert_float_equal(a[i].dev8.predictedUs, k->lat + 1.0 + 8 / (k->bw * 1e3) + 8 / 4.0e3, 1e-9);
    }
  }
#endif
}

int main(void) {
  setenv("COLL_SOCKET_IFNAME", "lo", 0);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_place_by_bus_id),
      cmocka_unit_test(test_comm_gpu_from_context),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
