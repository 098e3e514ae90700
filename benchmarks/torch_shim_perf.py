#!/usr/bin/env python3
"""torch_shim_perf.py - what a call through the PyTorch shim costs, beside
the C call alone, in one run.

  PYTHONPATH=python COLL_LIBRARY=build/libcoll.so /usr/bin/python3 \\
      benchmarks/torch_shim_perf.py [-np 2] [-b 1K] [-e 64M] [-N 200] [-R 3]
      [--async] [--profile FILE] [--backend coll|gloo] [--json FILE]

Imports torch once and forks -np ranks (FileStore in a temp dir), which join
one process group of the backend (default coll). For every size (float32,
doubling from -b to -e) and every round (-R, rounds interleave the modes so
machine noise spreads over all of them), each rank times -N single calls,
each after a barrier-free warm-up:

  torch    dist.all_reduce(t)                     (blocking, what users call)
  c        collAllReduce(t, t, .., NULL stream)   (the C call alone, through
           ctypes on the group's own communicator; coll backend only)
  async    w = dist.all_reduce(t, async_op=True) ; w.wait()
           (--async: the time to issue, then the time of wait())
  copy     dst.copy_(t) on every rank at once: the machine's memory for the
           same size in the same rounds (no collective; its column
           t(2s)/2t(s) above 1 shows where the memory itself more than
           doubles the time: a data set that leaves the caches)

Per size it prints the median over all samples of all ranks (each sample is
the max over ranks of one call: the ranks exchange their sample arrays at
the end) and the 90th percentile, and the doubling rule of issue 17:
t(2s) <= 2 t(s) + 50 us. --profile FILE runs rank 0's torch mode at the
first size under cProfile and writes the stats (sorted by cumulative time).
The load average before and after is printed: the machine may be shared.
Exit status: 0, or 1 if a rank failed or a result was wrong (each size's
result is checked once after timing).
"""
import ctypes
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import traceback


def parse_size(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.upper().rstrip("B")
    return int(float(s[:-1]) * units[s[-1]]) if s[-1:] in units else int(s)


def parse_args(argv):
    o = {"np": 2, "b": "1K", "e": "64M", "N": 200, "R": 3, "async": False, "profile": None,
         "backend": "coll", "json": None, "w": 20}
    it = iter(argv)
    for a in it:
        if a == "--async":
            o["async"] = True
        elif a in ("-np", "-b", "-e", "-N", "-R", "-w", "--profile", "--backend", "--json"):
            o[a.lstrip("-")] = next(it)
        elif a in ("-h", "--help"):
            print(__doc__)
            sys.exit(0)
        else:
            raise SystemExit("torch_shim_perf.py: unknown argument %s" % a)
    for k in ("np", "N", "R", "w"):
        o[k] = int(o[k])
    o["sizes"] = []
    b, e = parse_size(o["b"]), parse_size(o["e"])
    while b <= e:
        o["sizes"].append(b)
        b *= 2
    return o


def calls_for(size, n):
    """Fewer samples for large sizes (a 64 MiB call takes ~10 ms)."""
    return max(5, min(n, int(2e8 / max(size, 1))))


def rank_main(o, r, store, outdir):
    import torch
    import torch.distributed as dist
    if o["backend"] == "coll":
        import torch_coll
        from torch_coll import _lib
    dist.init_process_group(o["backend"], init_method="file://" + store, rank=r, world_size=o["np"])
    pg = dist.distributed_c10d._get_default_group()
    maxe = max(o["sizes"]) // 4
    buf = torch.empty(maxe).fill_(1)
    dst = torch.empty(maxe).fill_(0)
    modes = ["torch"] + (["c"] if o["backend"] == "coll" else []) + (["async"] if o["async"] else []) + ["copy"]
    res = {}  # (mode, size) -> list of per-call us (and "issue"/"wait" for async)
    comm = pg._eng.comm if o["backend"] == "coll" else None
    prof = None
    for rnd in range(o["R"]):
        for size in o["sizes"]:
            t = buf[:size // 4]
            n = calls_for(size, o["N"])
            for mode in modes:
                if mode == "torch":
                    def one():
                        dist.all_reduce(t)
                elif mode == "c":
                    ptr, cnt = t.data_ptr(), t.numel()

                    def one():
                        rc = _lib.lib.collAllReduce(ptr, ptr, cnt, _lib.FLOAT32, _lib.SUM, comm, None)
                        if rc:
                            raise RuntimeError(_lib.message(rc, "collAllReduce"))
                elif mode == "copy":
                    d = dst[:size // 4]

                    def one():
                        d.copy_(t)
                else:
                    one = None
                for _ in range(min(o["w"], n)):
                    if one:
                        one()
                    else:
                        dist.all_reduce(t, async_op=True).wait()
                dist.barrier()
                if mode == "torch" and r == 0 and o["profile"] and rnd == 0 and size == o["sizes"][0]:
                    import cProfile
                    prof = cProfile.Profile()
                    prof.enable()
                samples, issues, waits = [], [], []
                pc = time.perf_counter
                for _ in range(n):
                    if one:
                        t0 = pc()
                        one()
                        samples.append((pc() - t0) * 1e6)
                    else:
                        t0 = pc()
                        w = dist.all_reduce(t, async_op=True)
                        t1 = pc()
                        w.wait()
                        t2 = pc()
                        issues.append((t1 - t0) * 1e6)
                        waits.append((t2 - t1) * 1e6)
                        samples.append((t2 - t0) * 1e6)
                if prof is not None:
                    prof.disable()
                    prof.dump_stats(o["profile"])
                    prof = None
                res.setdefault("%s %d" % (mode, size), []).extend(samples)
                if issues:
                    res.setdefault("issue %d" % size, []).extend(issues)
                    res.setdefault("wait %d" % size, []).extend(waits)
    # check each size once: fresh rank-dependent integers
    bad = 0
    for size in o["sizes"]:
        t = buf[:size // 4]
        t.copy_(torch.arange(t.numel(), dtype=torch.float32).remainder_(1000).add_(r))
        dist.all_reduce(t)
        want = torch.arange(t.numel(), dtype=torch.float32).remainder_(1000).mul_(o["np"]).add_(
            sum(range(o["np"])))
        bad += int((t != want).sum())
    with open(os.path.join(outdir, "r%d.json" % r), "w") as f:
        json.dump({"res": res, "bad": bad}, f)
    dist.barrier()
    dist.destroy_process_group()
    return 0


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def report(o, outdir, load0, load1, secs):
    ranks = []
    for r in range(o["np"]):
        with open(os.path.join(outdir, "r%d.json" % r)) as f:
            ranks.append(json.load(f))
    bad = sum(x["bad"] for x in ranks)
    keys = ranks[0]["res"].keys()
    # a call's time: the max over ranks of the same sample index
    per = {k: [max(x["res"][k][i] for x in ranks) for i in range(len(ranks[0]["res"][k]))] for k in keys}
    import torch
    print("# torch_shim_perf: all_reduce float32 sum, %d ranks, backend %s, torch %s, %d rounds, %d s"
          % (o["np"], o["backend"], torch.__version__, o["R"], secs))
    print("# load average before: %s, after: %s" % (load0, load1))
    print("# median us (p90); torch: dist.all_reduce blocking; c: collAllReduce NULL stream via ctypes;"
          " copy: tensor copy_ of the size on every rank at once; doubling: t(2s) / (2 t(s) + 50 us), <= 1 holds")
    cols = ["torch", "c"] if o["backend"] == "coll" else ["torch"]
    if o["async"]:
        cols += ["async", "issue", "wait"]
    cols += ["copy"]
    print("| size | " + " | ".join(cols) + " | torch - c | doubling | copy t(2s)/2t(s) |")
    print("|---:|" + "---:|" * (len(cols) + 3))
    prev, prevCopy, worst, out = None, None, 0.0, {}
    for s in o["sizes"]:
        cells, med = [], {}
        for c in cols:
            xs = per.get("%s %d" % (c, s))
            if not xs:
                cells.append("-")
                continue
            med[c] = statistics.median(xs)
            cells.append("%.1f (%.0f)" % (med[c], pct(xs, 0.9)))
        diff = "%.1f" % (med["torch"] - med["c"]) if "c" in med else "-"
        dbl = cdbl = "-"
        if prev is not None:
            ratio = med["torch"] / (2 * prev + 50)
            worst = max(worst, ratio)
            dbl = "%.2f %s" % (ratio, "ok" if ratio <= 1 else "FAIL")
            cdbl = "%.2f" % (med["copy"] / (2 * prevCopy))
        prev, prevCopy = med["torch"], med["copy"]
        out[s] = med
        label = "%d KiB" % (s >> 10) if s < (1 << 20) else "%d MiB" % (s >> 20)
        print("| %s | %s | %s | %s | %s |" % (label, " | ".join(cells), diff, dbl, cdbl))
    print("# worst doubling ratio %.2f; wrong elements: %d" % (worst, bad))
    if o["json"]:
        with open(o["json"], "w") as f:
            json.dump({"load": [load0, load1], "med": out, "worst": worst, "bad": bad}, f)
    return 1 if bad else 0


def main():
    o = parse_args(sys.argv[1:])
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    import torch.distributed  # noqa: F401  (imported once, shared by the forks)
    load0 = open("/proc/loadavg").read().split()[:3]
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="torch_shim_perf.") as d:
        pids = []
        for r in range(o["np"]):
            sys.stdout.flush()
            pid = os.fork()
            if pid == 0:
                rc = 2
                try:
                    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
                    rc = rank_main(o, r, os.path.join(d, "store"), d)
                except BaseException:  # noqa: B036
                    traceback.print_exc()
                finally:
                    sys.stdout.flush()
                    os._exit(rc)
            pids.append(pid)
        rc = 0
        while pids:
            pid, status = os.wait()
            pids.remove(pid)
            code = os.waitstatus_to_exitcode(status)
            if code != 0:
                for q in pids:
                    os.kill(q, signal.SIGKILL)
                rc = 1
        if rc:
            print("torch_shim_perf.py: a rank failed", file=sys.stderr)
            return 1
        load1 = open("/proc/loadavg").read().split()[:3]
        return report(o, d, " ".join(load0), " ".join(load1), int(time.time() - t0))


if __name__ == "__main__":
    sys.exit(main())
