/*
 * i18_2_traffic_hier.c - issue 18, tests: the traffic counters of the
 * hierarchical algorithm equal the inter-node bytes test_hier asserts from
 * the schedules. 4 emulated nodes x 2 ranks (COLL_HOSTID per process: shm
 * inside a node, tcp between nodes), COLL_ALGO=hier, count c elements:
 *  - all-reduce: the ranks together send 2(K-1) x c elements to ranks of
 *    other nodes;
 *  - all-gather and reduce-scatter: (K-1) x N x c elements;
 * each link class is the transport (tcp across nodes, shm inside), and no
 * rank sends anything over tcp to a rank of its own node.
 * Before issue 18 there were no counters (the test did not build).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "../integration/mp_harness.h"

#define N 8
#define K 4
#define COUNT 30001 /* odd: segments of unequal size */

static int rankNode(int r) { return r / (N / K); }

/* Sum over all ranks of the bytes this rank sent to other nodes since `before`. */
static int crossBytes(collComm_t comm, int rank, const collPeerStats_t* before, unsigned long long* total,
                      int* fails) {
  collPeerStats_t now[N];
  if (collCommGetPeerStats(comm, now, N) != collSuccess) return -1;
  unsigned long long mine = 0;
  for (int p = 0; p < N; p++) {
    unsigned long long sent = now[p].bytesSent - before[p].bytesSent;
    int other = rankNode(p) != rankNode(rank);
    if (other) mine += sent;
    const char* want = p == rank ? "self" : other ? "tcp" : "shm";
    if (strcmp(now[p].link, want) != 0) {
      printf("rank %d: link to rank %d is %s, want %s\n", rank, p, now[p].link, want);
      (*fails)++;
    }
  }
  *total = mine;
  return collAllReduce(total, total, 1, collUint64, collSum, comm, NULL) == collSuccess ? 0 : -1;
}

static int run(collComm_t comm, int rank) {
  float* in = calloc((size_t)COUNT * N, sizeof(float));
  float* out = calloc((size_t)COUNT * N, sizeof(float));
  if (!in || !out) return 1;
  int fails = 0;
  const unsigned long long c = COUNT, e = sizeof(float);
  struct {
    const char* name;
    unsigned long long want;
  } cases[3] = {{"all-reduce", 2ull * (K - 1) * c * e}, {"all-gather", (K - 1ull) * N * c * e},
                {"reduce-scatter", (K - 1ull) * N * c * e}};
  for (int i = 0; i < 3; i++) {
    collPeerStats_t before[N];
    collCommGetPeerStats(comm, before, N);
    collResult_t r = i == 0   ? collAllReduce(in, out, COUNT, collFloat, collSum, comm, NULL)
                     : i == 1 ? collAllGather(in, out, COUNT, collFloat, comm, NULL)
                              : collReduceScatter(in, out, COUNT, collFloat, collSum, comm, NULL);
    unsigned long long total = 0;
    if (r != collSuccess || crossBytes(comm, rank, before, &total, &fails) != 0) return 1;
    if (total != cases[i].want) {
      printf("rank %d: hier %s: %llu inter-node bytes, want %llu\n", rank, cases[i].name, total, cases[i].want);
      fails++;
    } else if (rank == 0) {
      printf("hier %s on %d nodes x %d ranks, %llu elements: %llu inter-node bytes, as test_hier's formula\n",
             cases[i].name, K, N / K, c, total);
    }
  }
  free(in);
  free(out);
  return fails;
}

static int body(collComm_t unused, int rank, int nranks, void* arg) {
  (void)unused;
  char host[32];
  snprintf(host, sizeof host, "node%d", rankNode(rank));
  setenv("COLL_HOSTID", host, 1);
  collComm_t comm;
  if (collCommInitRank(&comm, nranks, *(collUniqueId*)arg, rank) != collSuccess) {
    printf("rank %d: init: %s\n", rank, collGetLastError(NULL));
    return 1;
  }
  int fails = run(comm, rank);
  collCommDestroy(comm);
  return fails;
}

int main(void) {
  setenv("COLL_ALGO", "allreduce:hier;allgather:hier;reducescatter:hier", 1);
  int r = collMpRunRaw(N, 200, body, NULL, NULL);
  printf("%s\n", r == 0 ? "PASS" : "FAIL");
  return r;
}
