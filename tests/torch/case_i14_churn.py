"""Issue 14 point 1: every init_process_group/destroy_process_group cycle of
the coll backend leaves nothing behind (threads, fds), also with a new_group
per cycle and while the user keeps every Work and its future alive.

2 ranks, CYCLES cycles (argument or $COLL_TORCH_CHURN_CYCLES, default 2000)
under RLIMIT_NOFILE 256 (ulimit -n 256).  Every cycle, through a store that
lives across the cycles (one TCPStore server in this process, a PrefixStore
per cycle):
  init_process_group("coll"); an async all_reduce (Work and future kept);
  g = new_group([0, 1]); all_reduce, isend/irecv (Works kept) and an async
  all_gather into transposed (non-contiguous) outputs on g (Work and future
  kept); destroy_process_group().  g is rebound each cycle, as user code does.
Every value is checked exactly.  After the last cycle each rank's thread and
fd counts must equal those after the first cycle (both with that cycle's g
referenced: destroy_process_group() closes g on torch 1.13 as on 2.x), and
both then and after `del g` be at most 2 above those before the loop (each
count is read once it settled, within 10 s).  Before the fix each cycle left 2
threads and 5 fds behind (4 and 10 with this recipe): init failed at cycle 44
under the fd limit.
Run: /usr/bin/python3 tests/torch/case_i14_churn.py [CYCLES]"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402

FD_LIMIT = 256


def counts():
    return len(os.listdir("/proc/self/task")), len(os.listdir("/proc/self/fd"))


def settled(want, seconds=10.0):
    """counts() once they are at most want, or after `seconds`: a thread that
    was told to stop may need a moment to exit on a loaded machine."""
    deadline = time.monotonic() + seconds
    while True:
        c = counts()
        if all(a <= b for a, b in zip(c, want)) or time.monotonic() > deadline:
            return c
        time.sleep(0.05)


def churn_worker(rank, ws, backend, port, cycles):
    import datetime
    import resource
    import torch
    import torch.distributed as dist
    import torch_coll  # noqa: F401
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(FD_LIMIT, hard), hard))
    tmo = datetime.timedelta(seconds=60)
    kw = {"use_libuv": False} if "use_libuv" in (dist.TCPStore.__init__.__doc__ or "") else {}
    store = dist.TCPStore("127.0.0.1", port, None, False, tmo, **kw)
    before = counts()
    after_first = None
    kept = []  # every Work and future of every cycle
    trace = []  # (cycle, threads, fds) now and then, for the failure message
    g = None
    t0 = time.monotonic()
    for c in range(cycles):
        try:
            dist.init_process_group(backend, store=dist.PrefixStore("churn/%d" % c, store), rank=rank,
                                    world_size=ws, timeout=tmo)
            t = torch.full((8,), float(rank + 1))
            w = dist.all_reduce(t, async_op=True)
            kept += [w, w.get_future()]
            w.wait()
            assert t.tolist() == [3.0] * 8, (c, t.tolist())
            g = dist.new_group([0, 1])
            u = torch.full((4,), float(c))
            dist.all_reduce(u, group=g)
            assert u.tolist() == [2.0 * c] * 4, (c, u.tolist())
            m = torch.full((3,), float(c)) if rank == 0 else torch.zeros(3)
            w = dist.isend(m, 1, group=g) if rank == 0 else dist.irecv(m, 0, group=g)
            kept.append(w)
            w.wait()
            assert m.tolist() == [float(c)] * 3, (c, m.tolist())
            x = torch.arange(8, dtype=torch.float32).reshape(4, 2) + 100 * rank + c
            outs = [torch.zeros(2, 4).t() for _ in range(ws)]  # (4, 2), not contiguous
            w = dist.all_gather(outs, x, group=g, async_op=True)
            kept += [w, w.get_future()]
            w.wait()
            for r in range(ws):
                want = torch.arange(8, dtype=torch.float32).reshape(4, 2) + 100 * r + c
                assert torch.equal(outs[r], want), (c, r, outs[r].tolist())
            dist.destroy_process_group()
        except Exception as e:
            raise RuntimeError("cycle %d (threads, fds now %s; before %s; trace %s): %s"
                               % (c, counts(), before, trace[-5:], e)) from e
        if c == 0:  # settled: a thread told to stop may still be exiting (seen here: 4 threads, then 3)
            after_first = settled(before, 2.0)
        if c % 100 == 0:
            trace.append((c,) + counts())
    seconds = time.monotonic() - t0
    last = settled(after_first)  # as after_first: the last cycle's g still referenced
    del g
    end = settled(before)
    done = sum(1 for k in kept if (k.done() if isinstance(k, torch.futures.Future) else k.is_completed()))
    return {"before": before, "after_first": after_first, "last": last, "end": end, "trace": trace, "seconds": seconds,
            "kept": len(kept), "done": done}


def main():
    import datetime
    import torch
    import torch.distributed as dist
    cycles = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("COLL_TORCH_CHURN_CYCLES", "2000"))
    kw = {"use_libuv": False} if "use_libuv" in (dist.TCPStore.__init__.__doc__ or "") else {}
    server = dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=60), wait_for_workers=False, **kw)
    print("torch %s, %d cycles, 2 ranks, RLIMIT_NOFILE %d" % (torch.__version__, cycles, FD_LIMIT), flush=True)
    t0 = time.monotonic()
    res = harness.run(churn_worker, 2, "coll", args=(server.port, cycles), init=False,
                      timeout=30 + cycles * 0.25)
    bad = []
    for r, d in enumerate(res):
        print("rank %d: threads/fds before %s, after cycle 0 %s, after cycle %d %s, after del g %s; %.1f s "
              "(%.1f ms per cycle); trace (cycle, threads, fds) %s"
              % (r, d["before"], d["after_first"], cycles - 1, d["last"], d["end"], d["seconds"],
                 1000 * d["seconds"] / max(1, cycles), d["trace"]), flush=True)
        if d["last"] != d["after_first"]:
            bad.append("rank %d: threads/fds %s after the last cycle, %s after the first" % (r, d["last"],
                                                                                       d["after_first"]))
        if any(e - b > 2 for e, b in zip(d["last"], d["before"])):
            bad.append("rank %d: threads/fds %s after the last destroy (its g still referenced), %s before the "
                       "loop" % (r, d["last"], d["before"]))
        if any(e - b > 2 for e, b in zip(d["end"], d["before"])):
            bad.append("rank %d: threads/fds %s after the loop and del g, %s before the loop" % (r, d["end"],
                                                                                           d["before"]))
        if d["kept"] != 5 * cycles or d["done"] != d["kept"]:  # 3 Works and 2 futures per cycle
            bad.append("rank %d: %d of %d kept Works/futures report completion" % (r, d["done"], d["kept"]))
    print("case_i14_churn: %s in %.1f s" % ("FAILED" if bad else "passed", time.monotonic() - t0))
    if bad:
        print("\n".join(bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
