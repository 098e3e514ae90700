"""BR-17, shim variant (pytorch/pytorch#55967): init_process_group /
destroy_process_group repeated in the same processes, with the same master
port and with the same store, must work every time.

On 2 and then 4 ranks, 50 cycles c = 0..49 of each variant:
  port:  init_method="env://" with the same MASTER_ADDR/MASTER_PORT every
         cycle (torch makes a new TCPStore on that port each time);
  store: init_process_group(store=S) with the same TCPStore object S every
         cycle (one server in the parent, one client per rank);
then all_reduce(float32 [10*(c+1)*(rank+1)], async_op=True), wait(), the
Work kept until the end, destroy_process_group(); no sleep between cycles.
Expected: every cycle gives 10*(c+1)*ws*(ws+1)/2 (2 ranks: 30*(c+1)), each
loop of 50 cycles takes under 60 s, and each rank's thread and fd counts
after a loop are at most 2 above those before it.
torch 1.13's own init barrier counts on a store key that destroy does not
reset, so with the same store the second init hangs for gloo too; the shim
clears that key at init (see create_process_group).
Run: /usr/bin/python3 tests/torch/case_br17_reinit.py [port] [store]"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402

CYCLES = 50


def counts():
    return len(os.listdir("/proc/self/task")), len(os.listdir("/proc/self/fd"))


def reinit_worker(rank, ws, backend, master_port, store_port, variants):
    import datetime
    import torch
    import torch.distributed as dist
    import torch_coll  # noqa: F401
    tmo = datetime.timedelta(seconds=30)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(master_port), RANK=str(rank), WORLD_SIZE=str(ws))
    kw = {"use_libuv": False} if "use_libuv" in (dist.TCPStore.__init__.__doc__ or "") else {}
    out = {}
    for variant in variants:
        store = dist.TCPStore("127.0.0.1", store_port, None, False, tmo, **kw) if variant == "store" else None
        kept, values = [], []
        before = counts()
        t0 = time.monotonic()
        for c in range(CYCLES):
            try:
                if store is None:
                    dist.init_process_group(backend, init_method="env://", timeout=tmo)
                else:
                    dist.init_process_group(backend, store=store, rank=rank, world_size=ws, timeout=tmo)
                t = torch.tensor([10.0 * (c + 1) * (rank + 1)])
                w = dist.all_reduce(t, async_op=True)
                w.wait()
                kept.append(w)
                values.append(t.item())
                dist.destroy_process_group()
            except Exception as e:
                raise RuntimeError("%s variant, cycle %d: %s" % (variant, c, e)) from e
        seconds = time.monotonic() - t0
        del kept
        time.sleep(0.2)
        out[variant] = {"values": values, "seconds": seconds, "before": before, "after": counts()}
    return out


def main():
    import datetime
    import torch
    import torch.distributed as dist
    kw = {"use_libuv": False} if "use_libuv" in (dist.TCPStore.__init__.__doc__ or "") else {}
    server = dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=60), wait_for_workers=False, **kw)
    print("torch %s" % torch.__version__, flush=True)
    variants = tuple(sys.argv[1:]) or ("port", "store")
    bad = []
    for ws in (2, 4):
        res = harness.run(reinit_worker, ws, "coll", args=(harness.free_port(), server.port, variants), init=False,
                          timeout=240, env={"USE_LIBUV": "0"})
        want = [10.0 * (c + 1) * ws * (ws + 1) / 2 for c in range(CYCLES)]
        for variant in variants:
            secs = max(res[r][variant]["seconds"] for r in range(ws))
            print("%d ranks, same %s: %d cycles in %.1f s; threads/fds before/after %s" % (
                ws, variant, CYCLES, secs, [(res[r][variant]["before"], res[r][variant]["after"])
                                            for r in range(ws)]), flush=True)
            if secs >= 60:
                bad.append("%d ranks, same %s: %d cycles took %.1f s (limit 60)" % (ws, variant, CYCLES, secs))
            for r in range(ws):
                d = res[r][variant]
                if d["values"] != want:
                    bad.append("%d ranks, same %s, rank %d: values %s, want %s" % (ws, variant, r, d["values"], want))
                if any(a - b > 2 for a, b in zip(d["after"], d["before"])):
                    bad.append("%d ranks, same %s, rank %d: threads/fds %s after the loop, %s before"
                               % (ws, variant, r, d["after"], d["before"]))
    print("case_br17_reinit: %s" % ("FAILED" if bad else "passed"))
    if bad:
        print("\n".join(bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
