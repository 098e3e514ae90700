/*
 * test_topo_gpu.c - a rank's GPU from its current CUDA context (issue 16):
 * the GPUs' PCI bus ids of a recorded topology (p4d: 8 A100 on NVSwitch),
 * the placement that matches one, and, on the fake CUDA driver
 * (fakecuda.topo_gpu: FAKECUDA_PCI gives its two GPUs the bus ids of p4d
 * GPUs 0 and 5), two ranks whose contexts are current on them: rank.gpu, the
 * NVLINK class and its bandwidth and latency between them.
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

#include "coll.h"
#include "core/comm.h"
#include "device/cuda_loader.h"
#include "topo/topo_internal.h"

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
  int gpu[2], cls;
  double bw, lat;
} rankArg;

/* One rank: its context current on fake GPU `rank`, init, record, destroy. */
static void* rankMain(void* p) {
  rankArg* a = p;
  CUcontext ctx = NULL;
  a->res = collSystemError;
  if (COLL_CU(cuDevicePrimaryCtxRetain)(&ctx, a->rank) != CUDA_SUCCESS || COLL_CU(cuCtxSetCurrent)(ctx) != CUDA_SUCCESS) {
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
    a->res = collCommDestroy(c);
  }
  COLL_CU(cuCtxSetCurrent)(NULL);
  COLL_CU(cuDevicePrimaryCtxRelease)(a->rank);
  return NULL;
}
#endif

/* Two ranks on fake GPUs with p4d's bus ids 0000:10:1C.0 and 0000:90:1D.0
 * (upper case, as the driver writes them): GPUs 0 and 5, joined by
 * NVSwitch, so NVLINK at p4d's 12 x 20 GB/s, 0.6 us. */
static void test_comm_gpu_from_context(void** st) {
  (void)st;
  const char* pci = getenv("FAKECUDA_PCI");
  if (!pci || strcmp(pci, "0000:10:1C.0,0000:90:1D.0") != 0 || collCudaLoadQuiet() != collSuccess) {
    print_message("skipped: needs the fake driver with FAKECUDA_PCI=0000:10:1C.0,0000:90:1D.0 (fakecuda.topo_gpu)\n");
    skip();
  }
#ifdef COLL_HAVE_CUDA
  setenv("COLL_TOPO_FILE", FIXTURE("p4d-a100-efa.xml"), 1);
  rankArg a[2];
  memset(a, 0, sizeof a);
  assert_int_equal(collGetUniqueId(&a[0].id), collSuccess);
  a[1].id = a[0].id;
  pthread_t th[2];
  for (int i = 0; i < 2; i++) {
    a[i].rank = i;
    assert_int_equal(pthread_create(&th[i], NULL, rankMain, &a[i]), 0);
  }
  for (int i = 0; i < 2; i++) assert_int_equal(pthread_join(th[i], NULL), 0);
  unsetenv("COLL_TOPO_FILE");
  for (int i = 0; i < 2; i++) {
    if (a[i].res != collSuccess) fail_msg("rank %d: %s", i, a[i].msg);
    assert_int_equal(a[i].gpu[0], 0);
    assert_int_equal(a[i].gpu[1], 5);
    assert_int_equal(a[i].cls, COLL_LINK_NVLINK);
    assert_float_equal(a[i].bw, 240.0, 1e-4);
    assert_float_equal(a[i].lat, 0.6, 1e-9);
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
