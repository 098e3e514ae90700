/*
 * gloo_ib_perf.cc - Gloo's all-reduce over its ibverbs transport, in the
 * nccl-tests layout (benchmarks/compare/peer_common.h), for
 * benchmarks/rdma/run.sh. Gloo's ibverbs transport has no unbound buffers,
 * so only the classic algorithm classes run on it: AllreduceRing,
 * AllreduceRingChunked, AllreduceHalvingDoubling (in place; the
 * out-of-place column adds the memcpy a user pays), BarrierAllToAll, and the
 * max over ranks of the time through an AllreduceRing<double>.
 *
 *   gloo_ib_perf -np N [-D DEV -P PORT -G GID_INDEX] [-A ring|ring_chunked|halving_doubling]
 *                [-r RANK -S STORE_DIR] -C allreduce -b MIN -e MAX -f F -n ITERS -w WARMUP -c CHECK
 * Without -r it forks the N ranks (FileStore in a fresh temp directory);
 * with -r it is rank RANK of N only (one per machine, STORE_DIR shared).
 *
 * SPDX-License-Identifier: BSD-3-Clause
 */
#include "peer_common.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/config.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/ibverbs/device.h>

namespace {

struct Opt {
  peerOpts_t o;
  std::string dev = "rxe0", algo = "ring", store;
  int port = 1, gid = 1, rank = -1;
};

std::shared_ptr<gloo::Algorithm> make(const std::shared_ptr<gloo::Context>& ctx, const std::string& algo, float* d,
                                      int n) {
  std::vector<float*> v{d};
  if (algo == "halving_doubling") return std::make_shared<gloo::AllreduceHalvingDoubling<float>>(ctx, v, n);
  if (algo == "ring_chunked") return std::make_shared<gloo::AllreduceRingChunked<float>>(ctx, v, n);
  return std::make_shared<gloo::AllreduceRing<float>>(ctx, v, n);
}

/* Max / sum over ranks of one value. The algorithm objects live for the
 * whole run: Gloo's ibverbs buffers abort when destructed with a send
 * completion not yet seen (buffer.cc "Destructing buffer expecting
 * completions"), so nothing of Gloo is ever destroyed (ranks end in _exit). */
double allMax(const std::shared_ptr<gloo::Context>& ctx, double v) {
  static double buf;
  static auto* a = new gloo::AllreduceRing<double>(ctx, std::vector<double*>{&buf}, 1,
                                                  gloo::ReductionFunction<double>::max);
  buf = v;
  a->run();
  return buf;
}
int64_t allSum(const std::shared_ptr<gloo::Context>& ctx, int64_t v) {
  static int64_t buf;
  static auto* a = new gloo::AllreduceRing<int64_t>(ctx, std::vector<int64_t*>{&buf}, 1,
                                                   gloo::ReductionFunction<int64_t>::sum);
  buf = v;
  a->run();
  return buf;
}

int runRank(Opt& k, int r, const char* dir) {
  gloo::transport::ibverbs::attr attr{k.dev, k.port, k.gid};
  auto dev = gloo::transport::ibverbs::CreateDevice(attr);
  gloo::rendezvous::FileStore store(dir);
  int n = k.o.nprocs;
  auto ctx = std::make_shared<gloo::rendezvous::Context>(r, n);
  ctx->setTimeout(std::chrono::seconds(600));
  ctx->connectFullMesh(store, dev);
  auto& barrier = *new gloo::BarrierAllToAll(ctx); /* never destroyed (see allMax) */
  float* send = (float*)peerAlloc(k.o.maxBytes);
  float* recv = (float*)peerAlloc(k.o.maxBytes + 64);
  if (!send || !recv) return 2;
  k.o.coll = PEER_ALLREDUCE;
  if (r == 0)
    peerHeader(&k.o, n, ("Gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." + std::to_string(GLOO_VERSION_MINOR) +
                         " ibverbs " + k.dev + ", " + k.algo).c_str());
  int errors = 0;
  uint64_t seed = 0;
  for (int i = 0; i < k.o.nsizes; i++) {
    peerCounts_t c = peerCounts(PEER_ALLREDUCE, k.o.size[i], n);
    if (c.param == 0) continue;
    if (r == 0) peerRowStart(PEER_ALLREDUCE, c);
    auto a = make(ctx, k.algo, recv, (int)c.send);
    static auto* keep /* never destroyed (see allMax) */ = new std::vector<std::shared_ptr<gloo::Algorithm>>();
    keep->push_back(a);
    for (int ip = 0; ip <= 1; ip++) {
      auto run = [&]() {
        if (!ip) memcpy(recv, send, c.send * 4);
        a->run();
      };
      for (int w = 0; w < k.o.warmup[i]; w++) run();
      barrier.run();
      double t0 = peerNow();
      for (int it = 0; it < k.o.iters[i]; it++) run();
      double sec = allMax(ctx, (peerNow() - t0) / k.o.iters[i]);
      int64_t wrong = -1;
      if (k.o.check) {
        wrong = 0;
        for (int j = 0; j < k.o.check && wrong == 0; j++) {
          ++seed;
          memset(recv, 0x7F, c.send * 4);
          peerFill(PEER_ALLREDUCE, n, r, ip ? recv : send, c.send, seed);
          barrier.run();
          run();
          wrong = allSum(ctx, peerVerify(PEER_ALLREDUCE, n, r, recv, c, seed));
        }
      }
      errors += wrong > 0;
      if (r == 0) peerRowCell(PEER_ALLREDUCE, n, c, sec, wrong);
    }
    if (r == 0) printf("\n");
  }
  if (r == 0) printf("# Out of bounds values : %d %s\n", errors, errors ? "FAILED" : "OK");
  barrier.run();
  fflush(stdout);
  return errors ? 1 : 0; /* the caller _exits: no Gloo destructor runs */
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  Opt k;
  std::vector<char*> args;
  for (int i = 0; i < argc; i++) {
    std::string a = argv[i];
    if (i + 1 < argc && a == "-A") k.algo = argv[++i];
    else if (i + 1 < argc && a == "-D") k.dev = argv[++i];
    else if (i + 1 < argc && a == "-P") k.port = atoi(argv[++i]);
    else if (i + 1 < argc && a == "-G") k.gid = atoi(argv[++i]);
    else if (i + 1 < argc && a == "-r") k.rank = atoi(argv[++i]);
    else if (i + 1 < argc && a == "-S") k.store = argv[++i];
    else args.push_back(argv[i]);
  }
  if (peerParseArgs((int)args.size(), args.data(), &k.o) || k.o.coll != PEER_ALLREDUCE) return 2;
  if (k.rank >= 0) { /* one rank of a job spread over machines */
    int rc = 2;
    try {
      rc = runRank(k, k.rank, k.store.c_str());
    } catch (const std::exception& e) {
      fprintf(stderr, "gloo_ib_perf: rank %d: %s\n", k.rank, e.what());
    }
    fflush(stdout);
    _exit(rc);
  }
  char dir[] = "/tmp/gloo_ib_perf.XXXXXX";
  if (!mkdtemp(dir)) return 1;
  std::vector<pid_t> pids;
  for (int r = 0; r < k.o.nprocs; r++) {
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      try {
        _exit(runRank(k, r, dir));
      } catch (const std::exception& e) {
        fprintf(stderr, "gloo_ib_perf: rank %d: %s\n", r, e.what());
        _exit(2);
      }
    }
    if (p > 0) pids.push_back(p);
  }
  int rc = 0;
  while (!pids.empty()) {
    int st;
    pid_t p = wait(&st);
    if (p < 0) break;
    pids.erase(std::remove(pids.begin(), pids.end(), p), pids.end());
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (code >= 2)
      for (pid_t q : pids) kill(q, SIGKILL);
    rc = std::max(rc, code);
  }
  std::string cmd = std::string("rm -rf ") + dir;
  if (system(cmd.c_str())) rc = rc ? rc : 1;
  return rc;
}
