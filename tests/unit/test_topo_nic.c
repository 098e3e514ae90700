/*
 * test_topo_nic.c - matching a transport's devices (PCI paths) to the NICs
 * of the hwloc topology and picking the nearest one per GPU / rank
 * (src/topo/topo_nic.c), on the recorded fixtures tests/fixtures/topology:
 * p5en (8 H200, 16 EFA, 4 per PCIe switch), p4d (8 A100, 4 EFA on host
 * bridges), x9drg (3 GPUs, one ConnectX-4).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo_internal.h"

#ifndef COLL_FIXTURES
#error "COLL_FIXTURES (tests/fixtures/topology) must be defined by tests/CMakeLists.txt"
#endif
#define FIXTURE(name) COLL_FIXTURES "/" name

typedef struct {
  collTopoSummary s;
  collTopoNicNames names;
  /* the transport's view: every RDMA NIC as a sysfs path, in reverse
   * summary order (device index != summary index) */
  char paths[COLL_TOPO_MAX_NICS][160];
  const char* p[COLL_TOPO_MAX_NICS];
  int n;
} fixture;

static void load(const char* file, fixture* f) {
  hwloc_topology_t t;
  memset(f, 0, sizeof *f);
  assert_int_equal(hwloc_topology_init(&t), 0);
  hwloc_topology_set_type_filter(t, HWLOC_OBJ_BRIDGE, HWLOC_TYPE_FILTER_KEEP_ALL);
  hwloc_topology_set_type_filter(t, HWLOC_OBJ_PCI_DEVICE, HWLOC_TYPE_FILTER_KEEP_ALL);
  hwloc_topology_set_type_filter(t, HWLOC_OBJ_OS_DEVICE, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  assert_int_equal(hwloc_topology_set_xml(t, file), 0);
  assert_int_equal(hwloc_topology_load(t), 0);
  collTopoBuildSummary(t, &f->s, &f->names, NULL);
  hwloc_topology_destroy(t);
  f->n = f->s.nnics;
  for (int d = 0; d < f->n; d++) {
    snprintf(f->paths[d], sizeof f->paths[d], "/sys/devices/pci0000:00/0000:00:01.0/%s",
             f->names[f->n - 1 - d][COLL_TOPO_NIC_BUSID]);
    f->p[d] = f->paths[d];
  }
}

/* The summary NIC of transport device d. */
static int nicOf(const fixture* f, int d) { return collTopoNicOfPci(&f->s, &f->names, f->p[d]); }

static void test_match(void** st) {
  (void)st;
  fixture f;
  load(FIXTURE("p5en-h200-efa.xml"), &f);
  assert_int_equal(f.s.nnics, 16);
  for (int d = 0; d < f.n; d++) assert_int_equal(nicOf(&f, d), f.n - 1 - d);
  /* the bus id alone, upper case, and a path that goes on below the device */
  char bus[32], up[32], below[200];
  snprintf(bus, sizeof bus, "%s", f.names[3][COLL_TOPO_NIC_BUSID]);
  for (int i = 0; bus[i]; i++) up[i] = (char)(bus[i] >= 'a' && bus[i] <= 'f' ? bus[i] - 32 : bus[i]), up[i + 1] = 0;
  snprintf(below, sizeof below, "/sys/devices/pci0000:00/0000:00:01.0/%s/infiniband/rdmap0", bus);
  assert_int_equal(collTopoNicOfPci(&f.s, &f.names, bus), 3);
  assert_int_equal(collTopoNicOfPci(&f.s, &f.names, up), 3);
  assert_int_equal(collTopoNicOfPci(&f.s, &f.names, below), 3);
  assert_int_equal(collTopoNicOfPci(&f.s, &f.names, "/sys/devices/pci0000:00/0000:00:01.0/0000:ff:1f.7"), -1);
  assert_int_equal(collTopoNicOfPci(&f.s, &f.names, ""), -1);
  assert_int_equal(collTopoNicOfPci(&f.s, &f.names, NULL), -1);
  assert_int_equal(collTopoNicOfPci(&f.s, &f.names, "/sys/devices/virtual/net/rxe0"), -1);
}

/* p5en: every GPU gets a NIC on its own PCIe switch; the GPUs of one switch
 * get different NICs; host ranks stay on their NUMA node and spread. */
static void test_p5en_pick(void** st) {
  (void)st;
  fixture f;
  load(FIXTURE("p5en-h200-efa.xml"), &f);
  assert_int_equal(f.s.ngpus, 8);
  int used[COLL_TOPO_MAX_NICS] = {0};
  char why[200];
  for (int g = 0; g < f.s.ngpus; g++) {
    int d = collTopoPickNic(&f.s, &f.names, f.p, f.n, g, -1, 0, why, sizeof why);
    int nic = nicOf(&f, d);
    assert_true(nic >= 0);
    assert_int_not_equal(f.s.gpus[g].sw, 0);
    assert_int_equal(f.s.nics[nic].sw, f.s.gpus[g].sw);
    assert_non_null(strstr(why, "on the GPU's PCIe switch"));
    assert_int_equal(used[nic]++, 0); /* no two GPUs share a NIC */
  }
  /* host ranks on NUMA node 1, spread 0..7: NICs of NUMA 1 only, 8 different */
  int seen[COLL_TOPO_MAX_NICS] = {0}, distinct = 0, onNuma1 = 0;
  for (int i = 0; i < f.s.nnics; i++) onNuma1 += f.s.nics[i].numa == 1;
  assert_int_equal(onNuma1, 8);
  for (int r = 0; r < 8; r++) {
    int nic = nicOf(&f, collTopoPickNic(&f.s, &f.names, f.p, f.n, -1, 1, r, why, sizeof why));
    assert_int_equal(f.s.nics[nic].numa, 1);
    distinct += seen[nic]++ == 0;
  }
  assert_int_equal(distinct, 8);
  /* rank 8 wraps around to rank 0's NIC */
  assert_int_equal(collTopoPickNic(&f.s, &f.names, f.p, f.n, -1, 1, 8, NULL, 0),
                   collTopoPickNic(&f.s, &f.names, f.p, f.n, -1, 1, 0, NULL, 0));
  /* a device the topology does not have is never preferred */
  const char* mixed[2] = {"/sys/devices/virtual/net/rxe0", f.p[5]};
  assert_int_equal(collTopoPickNic(&f.s, &f.names, mixed, 2, 0, -1, 0, why, sizeof why), 1);
  /* only devices outside the topology: the first (spread 0) */
  const char* none[2] = {"/sys/devices/virtual/net/rxe0", "/sys/devices/virtual/net/rxe1"};
  assert_int_equal(collTopoPickNic(&f.s, &f.names, none, 2, 0, -1, 0, why, sizeof why), 0);
  assert_non_null(strstr(why, "not in the topology"));
}

/* p4d: the EFAs hang off host bridges (no shared switch with a GPU): each
 * GPU gets one on its NUMA node. */
static void test_p4d_pick(void** st) {
  (void)st;
  fixture f;
  load(FIXTURE("p4d-a100-efa.xml"), &f);
  assert_int_equal(f.s.ngpus, 8);
  assert_int_equal(f.s.nnics, 4);
  char why[200];
  for (int g = 0; g < f.s.ngpus; g++) {
    int nic = nicOf(&f, collTopoPickNic(&f.s, &f.names, f.p, f.n, g, -1, 0, why, sizeof why));
    assert_true(nic >= 0);
    assert_true(f.s.gpus[g].numa >= 0);
    assert_int_equal(f.s.nics[nic].numa, f.s.gpus[g].numa);
    /* the summary's own closest NIC of this GPU is among the equally near ones */
    assert_int_equal(f.s.nics[f.s.gpus[g].nic].numa, f.s.nics[nic].numa);
  }
}

/* x9drg: one NIC: always device 0. */
static void test_x9drg_pick(void** st) {
  (void)st;
  fixture f;
  load(FIXTURE("x9drg-wholeio-mlx5.xml"), &f);
  assert_int_equal(f.s.nnics, 1);
  assert_int_equal(nicOf(&f, 0), 0);
  for (int g = 0; g < f.s.ngpus; g++) assert_int_equal(collTopoPickNic(&f.s, &f.names, f.p, 1, g, -1, g, NULL, 0), 0);
  assert_string_equal(f.names[0][0][0] ? "named" : "", "named"); /* its OS device name is kept beside the bus id */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_match),
      cmocka_unit_test(test_p5en_pick),
      cmocka_unit_test(test_p4d_pick),
      cmocka_unit_test(test_x9drg_pick),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
