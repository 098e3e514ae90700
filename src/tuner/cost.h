/*
 * cost.h - the tuner's cost model: predicts how long a schedule takes by
 * running the schedules of every rank through a timing simulation.
 *
 * Model (alpha-beta with per-rank serialization, in the spirit of LogGP):
 *  - a transfer of b bytes between ranks a and b over path p completes at
 *    max(post time on the sender, post time on the receiver) + lat[p] +
 *    b / bw[p] + stepUs; post time = start of the step's phase on that rank;
 *  - the transfers of one phase on one rank share that rank's bandwidth:
 *    between nodes in each direction (the NIC is full duplex), so the phase
 *    cannot end before its start + max(sum of sent bytes, sum of received
 *    bytes) / bw; inside a node (shm, loopback tcp) the rank's own CPU
 *    copies every byte it sends and every byte it receives, so there the
 *    sent and received bytes add up (a broadcast root's two sends cost as
 *    much as a chain rank's receive and forward);
 *  - RECV_REDUCE adds b / reduceBw on the receiver, REDUCE b / reduceBw,
 *    COPY b / copyBw;
 *  - a rank's next phase starts when all steps of its current phase ended.
 * One slice is simulated on all ranks: makespan M. The busiest rank's own
 * time per slice splits into a bandwidth part W (bytes/bw, reductions,
 * copies) and a latency part L (lat + stepUs per phase). When ranks share
 * cores (cpuShare > 1), a rank's CPU work counts at 1 / cpuShare in its own
 * W (it can use a whole core while the others wait) and W is at least the
 * mean rank's CPU work x cpuShare (what the shared cores must do): an
 * unbalanced schedule (a binomial root) then costs what a balanced one (a
 * chain) with the same total work costs. Slices after the
 * first follow in a pipeline whose period is max(W, (W + L) / channels):
 * channels overlap latencies, not bandwidth. So
 *    T(call) = M + (nslices - 1) * max(W, (W + L) / channels).
 * CPU oversubscription (cpuShare > 1 ranks per core on a node) scales every
 * CPU term (copies, reductions, step overheads, shm transfers) by cpuShare
 * and adds wake = wakeUs x (cpuShare - 1) to each message latency (a
 * waiting rank yields or sleeps instead of spinning and must be scheduled
 * again after the other ranks of its core); and the node's cores must run every
 * transfer end: with C = cpuShare x the mean over ranks of the sum over
 * their transfer ends of (stepUs + wake / 2, plus lat / 2 for a socket
 * path, whose latency is mostly kernel CPU time on the same cores),
 * M becomes max(M, C) + min(M, C) / 2 (the other ranks' work delays the
 * critical path; fitted to 8 B all-reduce on 4 and 8 ranks over 2 cores)
 * and W at least C. On 8 ranks over 2 cores this is what makes a
 * one-shot all-reduce (56 messages) slower than a ring (28 messages carry
 * data at 8 bytes) although its critical path is one message long.
 * A node's ranks share its network links (layout netLinks): W and M are
 * at least the busiest node's inter-node bytes in one direction / (bw x
 * netLinks), so two ranks of a node sending across at once take twice as
 * long as one (a flat algorithm against a hierarchical one on one NIC).
 * Steps that move 0 elements are no-ops in the engine and cost nothing here.
 *
 * Everything here is a pure function of its inputs, so every rank computes
 * the same choice (the inputs are made identical across ranks at init).
 */
#ifndef COLL_TUNER_COST_H_
#define COLL_TUNER_COST_H_

#include <stddef.h>

#include "engine/sched.h"

/* Path classes between two ranks, as the tuner prices them. */
enum {
  COLL_PATH_SELF = 0,
  COLL_PATH_SHM = 1,    /* same node, shared-memory transport */
  COLL_PATH_LOCAL = 2,  /* same node, network transport (shm disabled) */
  COLL_PATH_NET = 3,    /* different nodes */
  COLL_PATH_COUNT = 4
};

typedef struct {
  double latUs[COLL_PATH_COUNT]; /* one-way small-message latency, us */
  double bwGBs[COLL_PATH_COUNT]; /* point-to-point bandwidth, GB/s */
  double reduceGBs;              /* local reduction, GB/s of output */
  double copyGBs;                /* local copy, GB/s */
  double stepUs;                 /* software overhead per transfer, us */
  double cpuShare;               /* >= 1: ranks per core, busiest node */
  double wakeUs;                 /* extra latency per message and per other rank on a core */
} collTuneModel;

/* Layout the simulation needs: node of each rank (NULL = one node),
 * whether the node's ranks talk over shm (else COLL_PATH_LOCAL), and over
 * how many network links a node's ranks spread their inter-node traffic
 * (the fewest over the nodes; 0 or 1 = all of a node's ranks share one). */
typedef struct {
  int nranks;
  const int* rankNode;
  int nnodes;
  int intraShm;
  int netLinks;
} collTuneLayout;

typedef struct {
  double makespanUs; /* M: one slice, all ranks */
  double bwUs;       /* W: busiest rank's bandwidth time per slice */
  double latUs;      /* L: busiest rank's latency time per slice */
  int ok;            /* 0: build failed, out of memory or deadlock */
} collSliceCost;

/* Simulates one slice of `count` elements per block (as the builder sees
 * it) of esize-byte elements with builder `build`. Exact up to 64 ranks,
 * and up to 256 while all ranks' schedules hold at most 32768 steps; beyond,
 * a 64-rank proxy scaled to the real size (cost.c): memory stays O(nranks). */
collSliceCost collCostSlice(const collTuneModel* m, const collTuneLayout* l, collSchedBuildFn build, collFunc fn,
                            size_t count, size_t esize);

/* Time of a whole call from one slice's cost. */
double collCostCall(const collSliceCost* c, size_t nslices, int channels);

/* Path between two ranks. */
int collCostPath(const collTuneLayout* l, int a, int b);

#endif
