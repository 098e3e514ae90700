/*
 * test_topo.c - src/topo: summaries of the recorded servers in
 * tests/fixtures/topology (exact counts, GPU-NIC affinity, NVSwitch), the
 * dump/load round trip, discovery of this machine, the link-class table of a
 * synthetic two-node layout, the placement / pinning decision, and
 * COLL_TOPO_FILE / COLL_TOPO_DUMP_FILE through a real one-rank communicator.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll.h"
#include "core/comm.h"
#include "topo/topo_internal.h"

#ifndef COLL_FIXTURES
#error "COLL_FIXTURES (tests/fixtures/topology) must be defined by tests/CMakeLists.txt"
#endif
#define FIXTURE(name) COLL_FIXTURES "/" name

/* Loads a fixture's summary or fails the test. */
static collTopoSummary load(const char* path) {
  collTopoSummary s;
  collResult_t r = collTopoSummarize(path, NULL, &s);
  if (r != collSuccess) {
    const char* why = collGetLastError(NULL);
    fail_msg("cannot load %s: %s", path, why ? why : "?");
  }
  return s;
}

/* Number of RDMA NICs of s on PCIe switch sw. */
static int rdmaOnSwitch(const collTopoSummary* s, int sw) {
  int n = 0;
  for (int i = 0; i < s->nnics; i++) n += s->nics[i].sw == sw && (s->nics[i].flags & COLL_TOPO_NIC_RDMA);
  return n;
}

/* p5en: 2 sockets, 8 H200, 16 EFA (4 per switch), 16 ENA, NVSwitch. */
static void test_p5en(void** st) {
  (void)st;
  collTopoSummary s = load(FIXTURE("p5en-h200-efa.xml"));
  assert_int_equal(s.version, COLL_TOPO_VERSION);
  assert_int_equal(s.npackages, 2);
  assert_int_equal(s.nnuma, 2);
  assert_int_equal(s.ncores, 96);
  assert_int_equal(s.npus, 192);
  assert_int_equal(s.ngpus, 8);
  assert_int_equal(s.nnics, 16); /* EFA */
  assert_int_equal(s.neths, 16); /* ENA */
  assert_int_equal(s.numaDist, 21);
  assert_int_equal(s.nnvswitches, 4); /* 10de:22a3, kept by KEEP_ALL */
  assert_true(s.flags & COLL_TOPO_F_NVSWITCH);
  assert_false(s.flags & COLL_TOPO_F_NVLINK_MATRIX);
  assert_int_equal(s.nswitches, 4);
  for (int sw = 1; sw <= 4; sw++) assert_int_equal(rdmaOnSwitch(&s, sw), 4);
  for (int g = 0; g < 8; g++) {
    assert_int_equal(s.gpus[g].vendor, COLL_TOPO_VENDOR_NVIDIA);
    assert_int_equal(s.gpus[g].numa, g / 4);
    assert_int_equal(s.gpus[g].package, g / 4);
    assert_int_equal(s.gpus[g].nvlMask, 0xffu & ~(1u << g)); /* every GPU through NVSwitch */
    assert_float_equal(s.gpus[g].nvlGBps, 18 * 20.6, 1e-3);  /* H100-generation NVSwitch */
    assert_float_equal(s.gpus[g].pciGBps, 63.015385, 1e-4);  /* Gen5 x16 */
  }
  for (int i = 0; i < 16; i++) {
    assert_true(s.nics[i].flags & COLL_TOPO_NIC_RDMA);
    assert_int_equal(s.nics[i].numa, i / 8);
    assert_int_equal(s.nics[i].speedMbps, 0); /* the capture carries no speed */
  }
  for (int i = 16; i < 32; i++) assert_false(s.nics[i].flags & COLL_TOPO_NIC_RDMA);
}

/* On p5en GPUs 2k and 2k+1 share PCIe switch k+1 with EFA NICs 4k..4k+3. */
static void test_p5en_gpu_nic_affinity(void** st) {
  (void)st;
  collTopoSummary s = load(FIXTURE("p5en-h200-efa.xml"));
  for (int g = 0; g < 8; g++) {
    assert_int_equal(s.gpus[g].sw, g / 2 + 1);
    for (int i = 0; i < 16; i++) {
      int shares = s.gpus[g].sw == s.nics[i].sw;
      if (shares != (i / 4 == g / 2)) fail_msg("GPU %d / NIC %d: shares a switch = %d", g, i, shares);
    }
    assert_int_equal(s.gpus[g].nic, 4 * (g / 2)); /* first of the four equally close */
    assert_int_equal(s.gpus[g].nicPath, COLL_PATH_PIX);
    assert_int_equal(s.gpus[g].nicHops, 4); /* port -> switch <- port, both sides */
  }
}

/* p4d: 8 A100, 4 EFA on host bridges (PHB), NVSwitch without switches. */
static void test_p4d(void** st) {
  (void)st;
  collTopoSummary s = load(FIXTURE("p4d-a100-efa.xml"));
  assert_int_equal(s.npackages, 2);
  assert_int_equal(s.nnuma, 2);
  assert_int_equal(s.ncores, 48);
  assert_int_equal(s.npus, 96);
  assert_int_equal(s.ngpus, 8);
  assert_int_equal(s.nnics, 4);
  assert_int_equal(s.neths, 4);
  assert_int_equal(s.nnvswitches, 6);
  assert_int_equal(s.nswitches, 0); /* flat PCI: everything on host bridges */
  for (int g = 0; g < 8; g++) {
    assert_int_equal(s.gpus[g].numa, g / 4);
    assert_int_equal(s.gpus[g].nic, g / 2); /* the EFA on the same host bridge */
    assert_int_equal(s.gpus[g].nicPath, COLL_PATH_PHB);
    assert_int_equal(s.gpus[g].nicHops, 2);
    assert_float_equal(s.gpus[g].nvlGBps, 12 * 20.0, 1e-3);
    assert_int_equal(s.gpus[g].nvlMask, 0xffu & ~(1u << g));
  }
  for (int i = 0; i < 4; i++) assert_int_equal(s.nics[i].numa, i / 2);
}

/* DGX-2: 16 V100, 12 NVSwitch, NVLink from the NVLinkBandwidth matrix. */
static void test_dgx2(void** st) {
  (void)st;
  collTopoSummary s = load(FIXTURE("dgx2-v100-nvswitch.xml"));
  assert_int_equal(s.ngpus, 16);
  assert_int_equal(s.nnics, 0);
  assert_int_equal(s.neths, 0);
  assert_true(s.flags & COLL_TOPO_F_NVSWITCH);
  assert_true(s.flags & COLL_TOPO_F_NVLINK_MATRIX);
  assert_int_equal(s.nnvswitches, 12); /* incl. 66:00.0, found by subtype only */
  assert_int_equal(s.npackages, 2);
  assert_int_equal(s.ncores, 4);
  assert_int_equal(s.nswitches, 8); /* two GPUs per leaf PLX switch */
  for (int g = 0; g < 16; g++) {
    assert_int_equal(s.gpus[g].numa, g / 8);
    assert_int_equal(s.gpus[g].sw, g / 2 + 1);
    assert_int_equal(s.gpus[g].nic, -1);
    assert_int_equal(s.gpus[g].nvlMask, 0xffffu & ~(1u << g));
    assert_float_equal(s.gpus[g].nvlGBps, 150.0 * 0.8, 1e-3); /* 6 x 25,000 MB/s in the matrix */
  }
}

/* X9DRG: 3 NVIDIA + 1 AMD GPU, 1 mlx5 NIC; SYS, PHB and PIX paths. */
static void test_x9drg(void** st) {
  (void)st;
  collTopoSummary s = load(FIXTURE("x9drg-wholeio-mlx5.xml"));
  assert_int_equal(s.npackages, 2);
  assert_int_equal(s.nnuma, 2);
  assert_int_equal(s.ncores, 16);
  assert_int_equal(s.npus, 32);
  assert_int_equal(s.numaDist, 20);
  /* 3 Tesla M2075 (10de:1094) + the AMD Radeon the file puts at 84:00.1. */
  assert_int_equal(s.ngpus, 4);
  int nvidia = 0;
  for (int g = 0; g < 4; g++) nvidia += s.gpus[g].vendor == COLL_TOPO_VENDOR_NVIDIA;
  assert_int_equal(nvidia, 3);
  assert_int_equal(s.gpus[3].vendor, COLL_TOPO_VENDOR_AMD);
  assert_int_equal(s.nnics, 1); /* ConnectX-4 mlx5_0 */
  assert_int_equal(s.neths, 2); /* I350 eth0, eth1 */
  assert_int_equal(s.nnvswitches, 0);
  assert_int_equal(s.nics[0].numa, 1);
  static const int path[4] = {COLL_PATH_SYS, COLL_PATH_PHB, COLL_PATH_PIX, COLL_PATH_PIX};
  static const int hops[4] = {8, 4, 2, 2};
  static const int numa[4] = {0, 1, 1, 1};
  for (int g = 0; g < 4; g++) {
    assert_int_equal(s.gpus[g].nic, 0);
    assert_int_equal(s.gpus[g].nicPath, path[g]);
    assert_int_equal(s.gpus[g].nicHops, hops[g]);
    assert_int_equal(s.gpus[g].numa, numa[g]);
    assert_int_equal(s.gpus[g].nvlMask, 0);
  }
  assert_int_equal(s.gpus[2].sw, s.nics[0].sw); /* 84:00.0 and mlx5_0 share root port 80:03.0 */
  assert_int_not_equal(s.gpus[1].sw, s.nics[0].sw);
}

/* This machine (the 2-vCPU VM in CI): no crash, sane counts. */
static void test_local_discovery(void** st) {
  (void)st;
  collTopoSummary s = load(NULL);
  assert_true(s.ncores >= 1);
  assert_true(s.npus >= s.ncores);
  assert_true(s.nnuma >= 1);
  char line[512];
  print_message("this machine: %s\n", collTopoFormat(&s, line, sizeof line));
}

/* Path of a file in a fresh temporary directory. */
static void tempPath(char* dir, size_t dlen, char* path, size_t plen, const char* name) {
  snprintf(dir, dlen, "/tmp/coll-topo-XXXXXX");
  assert_non_null(mkdtemp(dir));
  snprintf(path, plen, "%s/%s", dir, name);
}

/* Removes path, path.summary and the directory. */
static void removeDump(const char* dir, const char* path) {
  char sum[512];
  snprintf(sum, sizeof sum, "%s.summary", path);
  unlink(path);
  unlink(sum);
  assert_int_equal(rmdir(dir), 0); /* nothing else (no stray temporary) was left */
}

/* Dumps `src` (NULL: this machine), loads the dump, compares the summaries. */
static void roundTrip(const char* src) {
  char dir[64], path[256], sum[512], head[64] = "";
  tempPath(dir, sizeof dir, path, sizeof path, "topo.xml");
  collTopoSummary a, b;
  assert_int_equal(collTopoSummarize(src, path, &a), collSuccess);
  assert_int_equal(collTopoSummarize(path, NULL, &b), collSuccess);
  assert_memory_equal(&a, &b, sizeof a);
  snprintf(sum, sizeof sum, "%s.summary", path);
  FILE* f = fopen(sum, "r");
  assert_non_null(f);
  assert_non_null(fgets(head, sizeof head, f));
  fclose(f);
  assert_string_equal(head, "coll topology summary v1\n");
  removeDump(dir, path);
}

/* Dump then load gives the same summary (this machine and every fixture);
 * NCCL-format and missing files are errors naming the file. */
static void test_dump_load_round_trip(void** st) {
  (void)st;
  roundTrip(NULL);
  roundTrip(FIXTURE("p5en-h200-efa.xml"));
  roundTrip(FIXTURE("p4d-a100-efa.xml"));
  roundTrip(FIXTURE("dgx2-v100-nvswitch.xml"));
  roundTrip(FIXTURE("x9drg-wholeio-mlx5.xml"));
  collTopoSummary s;
  assert_int_equal(collTopoSummarize(FIXTURE("nccl-format/ndv5-h100-topo.xml"), NULL, &s), collInvalidUsage);
  assert_int_equal(collTopoSummarize("/nonexistent/topo.xml", NULL, &s), collInvalidUsage);
  assert_non_null(strstr(collGetLastError(NULL), "/nonexistent/topo.xml"));
}

/* NIC speeds travel as the "CollSpeedMbps" info of the NIC's PCI device
 * (what discovery adds from sysfs): a copy of the X9DRG file with 100 Gbit/s
 * on its ConnectX-4. */
static void test_nic_speed_from_xml(void** st) {
  (void)st;
  char dir[64], path[256], line[1024];
  tempPath(dir, sizeof dir, path, sizeof path, "x9drg-speed.xml");
  FILE *in = fopen(FIXTURE("x9drg-wholeio-mlx5.xml"), "r"), *out = fopen(path, "w");
  assert_non_null(in);
  assert_non_null(out);
  int added = 0;
  while (fgets(line, sizeof line, in)) {
    fputs(line, out);
    if (strstr(line, "pci_type=\"0207 [15b3:1013]")) {
      fputs("<info name=\"CollSpeedMbps\" value=\"100000\"/>\n", out);
      added++;
    }
  }
  fclose(in);
  fclose(out);
  assert_int_equal(added, 1);
  collTopoSummary s = load(path);
  assert_int_equal(s.nics[0].speedMbps, 100000);
  assert_int_equal(s.nics[1].speedMbps, 0);
  removeDump(dir, path); /* the file; there is no .summary to remove */
}

/* A synthetic 2-node layout:
 *   node 0: 2 NUMA (distance 21/10), GPUs 0-1 with NVLink (240 GB/s, PCIe
 *           31.5), 100 Gbit/s NIC; ranks 0 (GPU 0), 1 (GPU 1), 2 (host, NUMA
 *           0), 3 (host, NUMA 1), 4 (host, unbound)
 *   node 1: 1 NUMA, GPU 0 (PCIe 63), GPU 1 (PCIe speed unknown), no NVLink,
 *           10 Gbit/s; ranks 5 (GPU 0), 6 (GPU 1), 7 (host, unbound). */
static struct collTopo* syntheticTopo(void) {
  collTopoSummary n0, n1;
  memset(&n0, 0, sizeof n0);
  memset(&n1, 0, sizeof n1);
  n0.version = n1.version = COLL_TOPO_VERSION;
  n0.nnuma = 2;
  n0.numaDist = 21;
  n0.ngpus = 2;
  for (int g = 0; g < 2; g++)
    n0.gpus[g] = (collTopoGpu){.pciGBps = 31.5f, .nvlGBps = 240.0f, .numa = (int8_t)g, .vendor = 1,
                               .nvlMask = 1u << (1 - g)};
  n1.nnuma = 1;
  n1.ngpus = 2;
  n1.gpus[0] = (collTopoGpu){.pciGBps = 63.0f, .numa = 0, .vendor = 1};
  n1.gpus[1] = (collTopoGpu){.pciGBps = 0.0f, .numa = 0, .vendor = 1};
  static const int gpu[8] = {0, 1, -1, -1, -1, 0, 1, -1}, numa[8] = {0, 1, 0, 1, -1, 0, 0, -1};
  int node[8] = {0, 0, 0, 0, 0, 1, 1, 1};
  collTopoPeer p[8];
  memset(p, 0, sizeof p);
  for (int r = 0; r < 8; r++) {
    p[r].node = node[r] ? n1 : n0;
    p[r].rank = (collTopoRank){.numa = (int16_t)numa[r], .gpu = (int16_t)gpu[r], .nic = 0,
                               .netGBps = node[r] ? 1.25f : 12.5f, .netLatUs = node[r] ? 50.0f : 2.0f};
  }
  return collTopoCreate(8, 0, node, p);
}

/* Class, bandwidth and latency of every pair of the synthetic layout. */
static void test_link_classes_two_nodes(void** st) {
  (void)st;
  struct collComm c;
  memset(&c, 0, sizeof c);
  c.nranks = 8;
  c.topo = syntheticTopo();
  assert_non_null(c.topo);
  /* S SELF, U NUMA, V NVLINK, P PCIE, K SOCKET, N NET */
  static const char* want[8] = {
      "SVPPPNNN", "VSPPPNNN", "PPSKKNNN", "PPKSKNNN", "PPKKSNNN", "NNNNNSPP", "NNNNNPSP", "NNNNNPPS",
  };
  static const char letter[COLL_LINK_NCLASSES] = {'S', 'U', 'V', 'P', 'K', 'N'};
  for (int a = 0; a < 8; a++)
    for (int b = 0; b < 8; b++) {
      int cls = collTopoLinkClass(&c, a, b);
      char w = want[a][b]; /* a GPU <-> host-memory pair is PCIE, also across sockets */
      if (letter[cls] != w)
        fail_msg("ranks %d-%d: class %s, want %c", a, b, collTopoLinkName(cls), w);
      assert_int_equal(cls, collTopoLinkClass(&c, b, a)); /* symmetric */
    }
  struct { int a, b; double bw, lat; } v[] = {
      {0, 0, 13.0, 0.0},   /* SELF: memcpy */
      {0, 1, 240.0, 0.6},  /* NVLINK */
      {0, 2, 24.0, 1.0},   /* PCIE, GPU and host on NUMA 0: 31.5 x 24/31.5 */
      {0, 3, 10.0, 2.1},   /* PCIE across sockets: capped at SOCKET, latency x 2.1 */
      {1, 3, 24.0, 1.0},
      {2, 3, 10.0, 2.1},   /* SOCKET */
      {2, 4, 10.0, 2.1},   /* unbound rank on a 2-NUMA node: SOCKET */
      {5, 6, 48.0, 1.0},   /* PCIE 63 x 24/31.5, unknown side ignored */
      {6, 7, 12.0, 1.0},   /* PCIE speed unknown: 12 (Gen3 x16) */
      {0, 5, 1.25, 50.0},  /* NET: slower NIC, larger latency */
  };
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    assert_float_equal(collTopoLinkBw(&c, v[i].a, v[i].b), v[i].bw, 1e-4);
    assert_float_equal(collTopoLinkLat(&c, v[i].a, v[i].b), v[i].lat, 1e-4);
    assert_float_equal(collTopoLinkBw(&c, v[i].b, v[i].a), v[i].bw, 1e-4);
  }
  assert_int_equal(collTopoLinkClass(&c, 0, 8), -1);
  assert_float_equal(collTopoLinkBw(&c, -1, 0), 0.0, 0);
  /* Without a topology: node only. */
  collTopoDestroy(c.topo);
  c.topo = NULL;
  int nodes[8] = {0, 0, 0, 0, 0, 1, 1, 1};
  c.rankNode = nodes;
  assert_int_equal(collTopoLinkClass(&c, 0, 4), COLL_LINK_NUMA);
  assert_int_equal(collTopoLinkClass(&c, 0, 5), COLL_LINK_NET);
  assert_float_equal(collTopoLinkBw(&c, 0, 5), 1.25, 1e-9);
}

/* The placement / pin decision for a rank whose transport uses EFA NIC 9
 * (NUMA 1) of the p5en summary, on a pretend machine whose NUMA nodes are
 * CPU {0} and CPU {1} while this process may run on both. */
static void test_place_and_pin_decision(void** st) {
  (void)st;
  cpu_set_t mine;
  assert_int_equal(sched_getaffinity(0, sizeof mine, &mine), 0);
  if (!CPU_ISSET(0, &mine) || !CPU_ISSET(1, &mine)) skip();
  collTopoLocal l;
  memset(&l, 0, sizeof l);
  l.sum = load(FIXTURE("p5en-h200-efa.xml"));
  snprintf(l.nicNames[9][0], COLL_TOPO_NAME_LEN, "rdmap136s0");
  l.thisSystem = 1;
  l.nnuma = 2;
  hwloc_bitmap_t cpus[2] = {hwloc_bitmap_alloc(), hwloc_bitmap_alloc()};
  hwloc_bitmap_only(cpus[0], 0);
  hwloc_bitmap_only(cpus[1], 1);
  l.numaCpus = cpus;
  collTopoRank r;
  hwloc_bitmap_t pin = NULL;
  char why[160];
  collTopoPlace(&l, "rdmap136s0", NULL, &r, &pin, why, sizeof why);
  assert_int_equal(r.nic, 9);
  assert_int_equal(r.numa, -1); /* the process spans both pretend NUMA nodes */
  assert_non_null(pin);
  assert_true(hwloc_bitmap_isequal(pin, cpus[1]));
  assert_non_null(strstr(why, "NUMA node 1"));
  hwloc_bitmap_free(pin);
  collTopoPlace(&l, "lo", NULL, &r, &pin, why, sizeof why); /* not a PCI NIC: leave the thread alone */
  assert_int_equal(r.nic, -1);
  assert_null(pin);
  assert_non_null(strstr(why, "not pinned"));
  l.thisSystem = 0; /* a COLL_TOPO_FILE topology never pins */
  collTopoPlace(&l, "rdmap136s0", NULL, &r, &pin, why, sizeof why);
  assert_null(pin);
  assert_non_null(strstr(why, "COLL_TOPO_FILE"));
  hwloc_bitmap_free(cpus[0]);
  hwloc_bitmap_free(cpus[1]);
}

static int pinnedCpu = -1;

/* Thread body: pins itself as a progress thread would, records its CPU. */
static void* pinThread(void* arg) {
  (void)arg;
  collTopoPinProgressThread(NULL);
  cpu_set_t s;
  if (sched_getaffinity(0, sizeof s, &s) == 0 && CPU_COUNT(&s) == 1)
    for (int c = 0; c < CPU_SETSIZE; c++)
      if (CPU_ISSET(c, &s)) pinnedCpu = c;
  return NULL;
}

/* COLL_PROGRESS_CPU (set in main to the last CPU we may use). */
static void test_progress_cpu_override(void** st) {
  (void)st;
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, pinThread, NULL), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(pinnedCpu, atoi(getenv("COLL_PROGRESS_CPU")));
}

/* COLL_TOPO_FILE and COLL_TOPO_DUMP_FILE through collCommInitRank. */
static void test_comm_topo_file(void** st) {
  (void)st;
  char dir[64], path[256];
  tempPath(dir, sizeof dir, path, sizeof path, "dump.xml");
  setenv("COLL_TOPO_FILE", FIXTURE("p4d-a100-efa.xml"), 1);
  setenv("COLL_TOPO_DUMP_FILE", path, 1);
  collUniqueId id;
  collComm_t c = NULL;
  assert_int_equal(collGetUniqueId(&id), collSuccess);
  assert_int_equal(collCommInitRank(&c, 1, id, 0), collSuccess);
  assert_non_null(c->topo);
  const collTopoSummary* s = &c->topo->peers[0].node;
  assert_int_equal(s->ngpus, 8);
  assert_int_equal(s->nnics, 4);
  assert_int_equal(s->ncores, 48);
  assert_int_equal(collTopoLinkClass(c, 0, 0), COLL_LINK_SELF);
  assert_null(c->topo->pinSet); /* never pins on a recorded topology */
  collTopoSummary back;
  assert_int_equal(collTopoSummarize(path, NULL, &back), collSuccess);
  assert_memory_equal(&back, s, sizeof back);
  assert_int_equal(collCommDestroy(c), collSuccess);
  unsetenv("COLL_TOPO_DUMP_FILE");
  removeDump(dir, path);

  setenv("COLL_TOPO_FILE", "/nonexistent/coll-topo.xml", 1);
  assert_int_equal(collGetUniqueId(&id), collSuccess);
  assert_int_equal(collCommInitRank(&c, 1, id, 0), collInvalidUsage);
  assert_non_null(strstr(collGetLastError(NULL), "/nonexistent/coll-topo.xml"));
  unsetenv("COLL_TOPO_FILE");
  assert_int_equal(collGetUniqueId(&id), collSuccess);
  assert_int_equal(collCommInitRank(&c, 1, id, 0), collSuccess);
  assert_true(c->topo->peers[0].node.ncores >= 1);
  assert_int_equal(collCommDestroy(c), collSuccess);
}

/* COLL_PROGRESS_CPU must be set before the first parameter read. */
int main(void) {
  /* Parameters are read once: choose the override CPU before anything. */
  cpu_set_t mine;
  int last = 0;
  if (sched_getaffinity(0, sizeof mine, &mine) == 0)
    for (int c = 0; c < CPU_SETSIZE; c++)
      if (CPU_ISSET(c, &mine)) last = c;
  char cpu[16];
  snprintf(cpu, sizeof cpu, "%d", last);
  setenv("COLL_PROGRESS_CPU", cpu, 1);
  setenv("COLL_SOCKET_IFNAME", "lo", 0);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_p5en),
      cmocka_unit_test(test_p5en_gpu_nic_affinity),
      cmocka_unit_test(test_p4d),
      cmocka_unit_test(test_dgx2),
      cmocka_unit_test(test_x9drg),
      cmocka_unit_test(test_local_discovery),
      cmocka_unit_test(test_dump_load_round_trip),
      cmocka_unit_test(test_nic_speed_from_xml),
      cmocka_unit_test(test_link_classes_two_nodes),
      cmocka_unit_test(test_place_and_pin_decision),
      cmocka_unit_test(test_progress_cpu_override),
      cmocka_unit_test(test_comm_topo_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
