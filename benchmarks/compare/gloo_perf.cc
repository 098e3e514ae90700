/*
 * gloo_perf.cc - Gloo allreduce / allgather / reduce_scatter over Gloo's TCP
 * transport on 127.0.0.1, in the nccl-tests layout of coll's
 * allreduce_perf, for the comparison table. Forks -np ranks; rendezvous
 * through a gloo::rendezvous::FileStore in a fresh temp directory.
 *
 *   gloo_perf -np N -C allreduce[,allgather,reducescatter] [-A algorithm]
 *             -b MIN -e MAX -f FACTOR -n ITERS -w WARMUP -c CHECK
 *   (or -l / -B size lists: see peer_common.h)
 *
 * Several -C collectives run one after the other in one launch.
 * Algorithms (-A, with one collective; the default is the first):
 *   allreduce      halving_doubling | ring_chunked   (classic classes,
 *                  in-place) | ring | bcube           (gloo::allreduce)
 *   allgather      ring (gloo::AllgatherRing) | new (gloo::allgather)
 *   reducescatter  halving_doubling (gloo::ReduceScatterHalvingDoubling,
 *                  in-place; the only one Gloo has)
 * Placements: the classic classes work in place. Their "out-of-place"
 * column is what a user pays for out-of-place semantics: memcpy(recv, send)
 * plus the in-place call. gloo::allreduce / gloo::allgather take separate
 * input and output; their in-place form passes the output only.
 * Reduce-scatter in place leaves the result at the start of the buffer.
 *
 * Rules as in coll's benchmarks/common.c: buffers allocated once and touched
 * before timing; algorithm objects built once per size and placement,
 * outside the timing; -w warm-up calls, barrier, -n timed calls, time =
 * total / n, max over ranks; -c checked calls on fresh inputs.
 * Rows with 0 elements are skipped (Gloo's classic classes do not take 0).
 *
 * SPDX-License-Identifier: BSD-3-Clause
 */
#include "peer_common.h"

#include <malloc.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gloo/allgather.h>
#include <gloo/allgather_ring.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier.h>
#include <gloo/config.h>
#include <gloo/math.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

namespace {

using Ctx = std::shared_ptr<gloo::Context>;
using ReduceFn = void (*)(void*, const void*, const void*, size_t);

struct Rank {
  Ctx ctx;
  peerOpts_t o;
  std::string algo;
  int n = 0, r = 0;
  float* send = nullptr;
  float* recv = nullptr;
  uint32_t tag = 0;
};

// gloo::allreduce of one T with fn (bookkeeping outside the timings).
template <typename T>
T reduceOne(Rank& k, T v, ReduceFn fn) {
  gloo::AllreduceOptions opts(k.ctx);
  opts.setOutput(&v, 1);
  opts.setReduceFunction(fn);
  opts.setTag(++k.tag);
  gloo::allreduce(opts);
  return v;
}

void barrier(Rank& k) {
  gloo::BarrierOptions opts(k.ctx);
  opts.setTag(++k.tag);
  gloo::barrier(opts);
}

// Returns a callable that runs one collective of counts c in placement ip.
std::function<void()> makeColl(Rank& k, const std::string& algo, peerCounts_t c,
                               int ip) {
  float* s = k.send;
  float* d = k.recv;
  int cnt = (int)c.send;
  auto pre = [=]() { if (!ip) memcpy(d, s, c.send * 4); };  // out-of-place copy
  if (k.o.coll == PEER_ALLREDUCE && (algo == "halving_doubling" || algo == "ring_chunked")) {
    std::shared_ptr<gloo::Algorithm> a;
    if (algo == "halving_doubling")
      a = std::make_shared<gloo::AllreduceHalvingDoubling<float>>(k.ctx, std::vector<float*>{d}, cnt);
    else
      a = std::make_shared<gloo::AllreduceRingChunked<float>>(k.ctx, std::vector<float*>{d}, cnt);
    return [=]() { pre(); a->run(); };
  }
  if (k.o.coll == PEER_ALLREDUCE) {
    auto alg = algo == "bcube" ? gloo::AllreduceOptions::Algorithm::BCUBE
                                 : gloo::AllreduceOptions::Algorithm::RING;
    Rank* kp = &k;
    return [=]() {
      gloo::AllreduceOptions opts(kp->ctx);
      if (!ip) opts.setInput(s, c.send);
      opts.setOutput(d, c.recv);
      opts.setAlgorithm(alg);
      opts.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<float>));
      opts.setTag(++kp->tag);
      gloo::allreduce(opts);
    };
  }
  if (k.o.coll == PEER_ALLGATHER && algo == "new") {
    Rank* kp = &k;
    return [=]() {
      gloo::AllgatherOptions opts(kp->ctx);
      if (!ip) opts.setInput(s, c.send);
      opts.setOutput(d, c.recv);
      opts.setTag(++kp->tag);
      gloo::allgather(opts);
    };
  }
  if (k.o.coll == PEER_ALLGATHER) {
    const float* in = ip ? d + (size_t)k.r * c.param : s;
    auto a = std::make_shared<gloo::AllgatherRing<float>>(
        k.ctx, std::vector<const float*>{in}, d, (int)c.param);
    return [=]() { a->run(); };
  }
  std::vector<int> recvElems(k.n, (int)c.param);
  auto a = std::make_shared<gloo::ReduceScatterHalvingDoubling<float>>(
      k.ctx, std::vector<float*>{d}, cnt, recvElems);
  return [=]() { pre(); a->run(); };
}

// Seconds per call, max over ranks.
double timeColl(Rank& k, int sizeIdx, const std::function<void()>& run) {
  int warmup = k.o.warmup[sizeIdx], iters = k.o.iters[sizeIdx];
  for (int i = 0; i < warmup; i++) run();
  barrier(k);
  double t0 = peerNow();
  for (int i = 0; i < iters; i++) run();
  double sec = (peerNow() - t0) / iters;
  return reduceOne<double>(k, sec, static_cast<ReduceFn>(&gloo::max<double>));
}

// -c checked calls; wrong elements summed over ranks.
int64_t checkColl(Rank& k, peerCounts_t c, int ip, const std::function<void()>& run,
                  uint64_t* seed) {
  int64_t total = 0;
  for (int j = 0; j < k.o.check && total == 0; j++) {
    ++*seed;
    memset(k.recv, 0x7F, (c.send > c.recv ? c.send : c.recv) * 4);
    float* in = k.send;
    if (ip) in = k.o.coll == PEER_ALLGATHER ? k.recv + (size_t)k.r * c.param : k.recv;
    peerFill(k.o.coll, k.n, k.r, in, c.send, *seed);
    barrier(k);  // no rank may still read a peer's previous data
    run();
    int64_t mine = peerVerify(k.o.coll, k.n, k.r, k.recv, c, *seed);
    total = reduceOne<int64_t>(k, mine, static_cast<ReduceFn>(&gloo::sum<int64_t>));
  }
  return total;
}

const char* defaultAlgo(int coll) {
  return coll == PEER_ALLGATHER ? "ring" : "halving_doubling";
}

int runRank(Rank& k, const char* storeDir) {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(storeDir);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(k.r, k.n);
  ctx->setTimeout(std::chrono::seconds(600));
  ctx->connectFullMesh(store, dev);
  k.ctx = ctx;
  k.send = (float*)peerAlloc(k.o.maxBytes);
  k.recv = (float*)peerAlloc(k.o.maxBytes + 64);
  if (!k.send || !k.recv) return 2;
  std::string what = "Gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." +
                     std::to_string(GLOO_VERSION_MINOR) + " tcp, ";
  uint64_t seed = 0;
  int failed = 0;
  for (int j = 0; j < k.o.ncolls; j++) {
    k.o.coll = k.o.colls[j];
    std::string algo = k.algo.empty() ? defaultAlgo(k.o.coll) : k.algo;
    if (k.r == 0) peerHeader(&k.o, k.n, (what + algo).c_str());
    int errors = 0;
    for (int i = 0; i < k.o.nsizes; i++) {
      size_t s = k.o.size[i];
      peerCounts_t c = peerCounts(k.o.coll, s, k.n);
      if (c.param == 0) {
        if (k.r == 0) printf("# %zu B: 0 elements per rank, skipped\n", s);
        continue;
      }
      if (k.r == 0) peerRowStart(k.o.coll, c);
      for (int ip = 0; ip <= 1; ip++) {
        auto run = makeColl(k, algo, c, ip);
        double sec = timeColl(k, i, run);
        int64_t wrong = k.o.check ? checkColl(k, c, ip, run, &seed) : -1;
        errors += wrong > 0;
        if (k.r == 0) peerRowCell(k.o.coll, k.n, c, sec, wrong);
      }
      if (k.r == 0) printf("\n");
    }
    if (k.r == 0) printf("# Out of bounds values : %d %s\n", errors, errors ? "FAILED" : "OK");
    failed |= errors;
  }
  barrier(k);
  free(k.send);
  free(k.recv);
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Keep freed memory in the process (no per-call mmap/munmap page faults).
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_ARENA_MAX, 1);
  setvbuf(stdout, nullptr, _IOLBF, 0);
  // -A is ours; the rest is the shared peer syntax.
  std::string algo;
  std::vector<char*> args;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "-A") && i + 1 < argc) algo = argv[++i];
    else args.push_back(argv[i]);
  }
  Rank k;
  if (peerParseArgs((int)args.size(), args.data(), &k.o)) return 2;
  k.algo = algo;  // empty: each collective's default
  k.n = k.o.nprocs;
  char dir[] = "/tmp/gloo_perf.XXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  std::vector<pid_t> pids;
  for (int r = 0; r < k.n; r++) {
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      k.r = r;
      try {
        _exit(runRank(k, dir));
      } catch (const std::exception& e) {
        fprintf(stderr, "gloo_perf: rank %d: %s\n", r, e.what());
        _exit(2);
      }
    }
    if (p < 0) perror("fork");
    else pids.push_back(p);
  }
  // Exit 1: wrong results (every rank finishes). Anything else is a failed
  // rank, which the others would wait for until the timeout: stop them.
  int rc = (int)pids.size() == k.n ? 0 : 2;
  while (!pids.empty()) {
    int st;
    pid_t p = wait(&st);
    if (p < 0) break;
    pids.erase(std::remove(pids.begin(), pids.end(), p), pids.end());
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (code >= 2) {
      if (rc < 2) fprintf(stderr, "gloo_perf: a rank failed; stopping the others\n");
      for (pid_t q : pids) kill(q, SIGKILL);
    }
    rc = code > rc ? code : rc;
  }
  std::string cmd = std::string("rm -rf ") + dir;
  if (system(cmd.c_str())) rc = rc ? rc : 1;
  return rc;
}
