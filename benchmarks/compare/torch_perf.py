#!/usr/bin/python3
"""torch_perf.py - torch.distributed (backend gloo) all_reduce / all_gather /
reduce_scatter in the nccl-tests layout of coll's allreduce_perf, for the
comparison table. Needs /usr/bin/python3 with Debian's python3-torch (1.13).

  torch_perf.py -np N -C allreduce[,allgather,reducescatter]
                {-b MIN -e MAX -f FACTOR | -l S1,S2,..} -n ITERS -w WARMUP -c CHECK
                (or bands -B WARMUP:ITERS:S1,S2,.. as in peer_common.h)

Imports torch once and forks N ranks (rendezvous: a file:// store in a temp
dir; GLOO_SOCKET_IFNAME=lo, so all traffic is on loopback), OMP_NUM_THREADS=1
as torchrun sets it for several ranks per host, and glibc told to keep freed
memory (torch allocates per call, e.g. all_gather's flat output).

Placements: torch's all_reduce is in place; its out-of-place column is
recv.copy_(send) + all_reduce(recv), what a user pays for out-of-place
semantics. all_gather takes a list of output views of one buffer; in place
passes the view of this rank as the input. torch 1.13's gloo backend has no
reduce_scatter: its table is a "# not supported" line. Several -C
collectives run one after the other in one launch.
Timing and checks as in coll's benchmarks/common.c: buffers allocated and
touched once, -w warm-up calls, barrier, -n timed calls, time = total / n,
max over ranks; -c checked calls on fresh rank-dependent inputs.
"""
import os
import sys
import tempfile
import time

NAMES = ("allreduce", "allgather", "reducescatter")
MALLOC_ENV = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 36),
              "MALLOC_ARENA_MAX": "1"}


def parse_size(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.upper().rstrip("B")
    return int(float(s[:-1]) * units[s[-1]]) if s[-1:] in units else int(s)


def parse_args(argv):
    """The peers' flags (see peer_common.h): the sweep is -b/-e/-f, or -l, with
    -w/-n, or repeated bands -B W:N:S1,S2,.. ; o["sizes"] = [(size, w, n)]."""
    o = {"np": 1, "coll": None, "b": "32M", "e": "32M", "f": 2, "n": 20, "w": 1,
         "c": 1, "list": None, "bands": []}
    keys = {"-np": "np", "-C": "coll", "-b": "b", "-e": "e", "-f": "f", "-n": "n",
            "-w": "w", "-c": "c", "-l": "list"}
    if len(argv) % 2:
        raise SystemExit("odd argument count")
    for flag, v in zip(argv[::2], argv[1::2]):
        if flag in ("-d", "-o"):
            if v not in ("float", "float32", "sum"):
                raise SystemExit(f"only float32 / sum: {flag} {v}")
        elif flag == "-B":
            w, n, sizes = v.split(":", 2)
            o["bands"] += [(parse_size(x), int(w), int(n)) for x in sizes.split(",")]
        elif flag in keys:
            o[keys[flag]] = v
        else:
            raise SystemExit(f"unknown flag {flag}")
    o["colls"] = (o["coll"] or "").split(",")
    if not all(c in NAMES for c in o["colls"]):
        raise SystemExit("-C allreduce[,allgather,reducescatter]")
    for k in ("np", "f", "n", "w", "c"):
        o[k] = int(o[k])
    if o["bands"] or o["list"]:
        o["sizes"] = o["bands"] + [(parse_size(x), o["w"], o["n"])
                                   for x in (o["list"] or "").split(",") if x]
    else:
        b, e, o["sizes"] = parse_size(o["b"]), parse_size(o["e"]), []
        while b <= e:
            o["sizes"].append((b, o["w"], o["n"]))
            b *= o["f"]
    return o


def launch(o):
    """Imports torch once, forks o['np'] ranks; returns the worst exit status."""
    import ctypes
    import signal
    import traceback
    import torch.distributed  # noqa: F401  (imported once, shared by the forks)

    with tempfile.TemporaryDirectory(prefix="torch_perf.") as d:
        pids = []
        for r in range(o["np"]):
            sys.stdout.flush()
            pid = os.fork()
            if pid == 0:
                rc = 2
                try:
                    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
                    rc = rank_main(o, r, os.path.join(d, "store"))
                except BaseException:  # noqa: B036  (report, then exit the fork)
                    traceback.print_exc()
                finally:
                    sys.stdout.flush()
                    os._exit(rc)
            pids.append(pid)
        rc = 0  # 1: wrong results (all ranks finish); else a rank failed
        while pids:
            pid, status = os.wait()
            pids.remove(pid)
            code = os.waitstatus_to_exitcode(status)
            code = code if code >= 0 else 128 - code
            if code >= 2:  # the others would wait for it: stop them
                for q in pids:
                    os.kill(q, signal.SIGKILL)
            rc = max(rc, code)
    return rc


def fmt(v, width):
    """nccl-tests' getFloatStr."""
    power, p = 0, 1.0
    while v >= p:
        power, p = power + 1, p * 10
    if power < width - 2:
        return f"{v:{width}.2f}"
    if power < width - 1:
        return f"{v:{width}.1f}"
    if power < width + 1:
        return f"{v:{width}.0f}"
    return f"{v:{width}.1e}"


def counts(coll, nbytes, n):
    """(send, recv, param) elements, as coll's counts() (16-byte aligned)."""
    count = nbytes // 4
    base = (count // n) // 4 * 4
    if coll == "allgather":
        return base, base * n, base
    if coll == "reducescatter":
        return base * n, base, base
    return count, count, count


def header(row0):
    """The nccl-tests column header lines."""
    cols = ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
            "time", "algbw", "busbw", "#wrong")
    units = ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
             "(GB/s)", "(GB/s)", "")
    f = "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s"
    return "\n".join([row0, "#\n#" + " " * 62 + "out-of-place" + " " * 23 + "in-place",
                      f % cols, f % units])


def bench(o, r, coll, send, recv, state):
    """One collective over all sizes (rank r); returns the rows with errors."""
    import torch
    import torch.distributed as dist

    n = o["np"]
    if r == 0:
        print(header(f"# {coll} torch {torch.__version__} torch.distributed backend gloo\n"
                     f"# nRanks {n} validation: {o['c']} time: max over ranks\n" +
                     "\n".join(f"# size {s} warmup iters: {w} iters: {i}"
                                for s, w, i in o["sizes"])), flush=True)
    if coll == "reducescatter":
        try:  # torch 1.13's gloo backend raises before any communication
            dist.reduce_scatter(torch.zeros(4), [torch.zeros(4)] * n)
        except RuntimeError as e:
            if r == 0:
                print(f"# not supported: {e}", flush=True)
            return 0
    factor = 2 * (n - 1) / n if coll == "allreduce" else (n - 1) / n

    def make(c, ip):
        s_, r_, p_ = c
        if coll == "allreduce":
            src, dst = send[:p_], recv[:p_]
            if ip:
                return lambda: dist.all_reduce(dst)
            return lambda: (dst.copy_(src), dist.all_reduce(dst))
        outs = [recv[i * p_:(i + 1) * p_] for i in range(n)]
        inp = outs[r] if ip else send[:p_]
        return lambda: dist.all_gather(outs, inp)

    def values(rank, start, stop, seed):  # peer_common.h's input pattern
        bound = (1 << 20) if coll == "allgather" else (1 << 20) // n
        h = torch.arange(start, stop, dtype=torch.int64) * 7 + rank * 13 + seed * 3
        return h % (2 * bound + 1) - bound

    def check(c, ip, run):
        total = 0
        for _ in range(o["c"]):
            if total:
                break
            state["seed"] += 1
            seed = state["seed"]
            s_, r_, p_ = c
            recv[:max(s_, r_)].fill_(float("nan"))
            inp = send if not ip else (recv[r * p_:] if coll == "allgather" else recv)
            for a in range(0, s_, 1 << 20):
                b = min(s_, a + (1 << 20))
                inp[a:b].copy_(values(r, a, b, seed))
            dist.barrier()
            run()
            bad = 0
            for a in range(0, r_, 1 << 20):
                b = min(r_, a + (1 << 20))
                if coll == "allgather":  # output j: element j % p_ of rank j // p_
                    want = torch.empty(b - a, dtype=torch.int64)
                    for p in range(n):
                        lo, hi = max(a, p * p_), min(b, (p + 1) * p_)
                        if lo < hi:
                            want[lo - a:hi - a] = values(p, lo - p * p_, hi - p * p_, seed)
                else:
                    want = sum(values(p, a, b, seed) for p in range(n))
                bad += int((recv[a:b] != want.to(torch.float32)).sum())
            t = torch.tensor([bad], dtype=torch.int64)
            dist.all_reduce(t)
            total = int(t)
        return total

    errors = 0
    for size, warmup, iters in o["sizes"]:
        c = counts(coll, size, n)
        if c[2] == 0:
            if r == 0:
                print(f"# {size} B: 0 elements per rank, skipped")
            continue
        row = "%12d  %12d  %8s  %6s  %6d" % (max(c[0], c[1]) * 4, c[2], "float",
                                             "none" if coll == "allgather" else "sum", -1)
        for ip in (0, 1):
            run = make(c, ip)
            for _ in range(warmup):
                run()
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                run()
            t = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            sec = float(t)
            wrong = check(c, ip, run) if o["c"] else -1
            errors += wrong > 0
            alg = max(c[0], c[1]) * 4 / 1e9 / sec if sec > 0 else 0.0
            row += "  %7s  %6s  %6s  %6s" % (fmt(sec * 1e6, 7), fmt(alg, 6),
                                            fmt(alg * factor, 6),
                                            wrong if wrong >= 0 else "N/A")
        if r == 0:
            print(row, flush=True)
    if r == 0:
        print(f"# Out of bounds values : {errors} {'FAILED' if errors else 'OK'}", flush=True)
    return errors


def rank_main(o, r, store):
    """Rank r: one process group, buffers allocated and touched once, then
    every -C collective in turn."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method="file://" + store, rank=r,
                            world_size=o["np"])
    maxe = max(x[0] for x in o["sizes"]) // 4
    send = torch.empty(maxe).fill_(1).zero_()
    recv = torch.empty(maxe + 16).fill_(1).zero_()
    state, errors = {"seed": 0}, 0
    for coll in o["colls"]:
        errors += bench(o, r, coll, send, recv, state)
    dist.barrier()
    dist.destroy_process_group()
    return 1 if errors else 0


def main():
    env = {"GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1", **MALLOC_ENV}
    if any(k not in os.environ for k in env):  # glibc reads MALLOC_* at start
        os.execve(sys.executable, [sys.executable, __file__, *sys.argv[1:]],
                  {**env, **os.environ})
    return launch(parse_args(sys.argv[1:]))


if __name__ == "__main__":
    sys.exit(main())
