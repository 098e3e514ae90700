"""Every torch.distributed operation x dtype, run identically under "gloo" and
"coll" (see test_ops.py).  Each case returns (value, reference): value is what
the backend produced on this rank, reference what it should be, computed
locally from every rank's (deterministic) inputs.  A case that raises records
("error", message) instead.

Values are small integers (also for float, half, bfloat16 and complex), so
sums and products are exact in every dtype and results can be compared
exactly.
"""
import os
import sys

import torch
import torch.distributed as dist

R = dist.ReduceOp

DTYPES = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16,
          torch.float32, torch.float64, torch.bool, torch.complex64, torch.complex128]
REDUCIBLE = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32,
             torch.float64, torch.bool, torch.complex64, torch.complex128]
OPS = ["SUM", "PRODUCT", "MIN", "MAX", "AVG", "PREMUL_SUM", "BAND", "BOR", "BXOR"]
PREMUL = 2.0
# Cases that kill the process under gloo (torch 1.13): not run for gloo, coll is
# checked against the reference there.
GLOO_CRASHES = ("all_gather_empty/", )


def dname(dt):
    return str(dt).replace("torch.", "")


def vals(dt, n, rank, salt=0, prod=False):
    base = torch.arange(n, dtype=torch.int64) * 7 + rank * 3 + salt * 5
    if dt == torch.bool:
        return (base % 2 == 1) if rank % 2 or salt % 2 else (base % 3 == 0)
    v = (base % 3 + 1) if prod else (base % 4)
    if not prod and dt.is_signed:  # -1 .. 2 (floats and complex are signed too)
        v = v - 1
    if dt.is_complex:
        im = (base // 2) % 3 if not prod else torch.zeros_like(base)
        return torch.complex(v.double(), im.double()).to(dt)
    return v.to(dt)


def ref_reduce(op, ts, dt):
    """Reduction of the tensors ts (one per rank) as the backends define it."""
    ws = len(ts)
    if dt == torch.bool:
        x = torch.stack([t.to(torch.int64) for t in ts])
        if op in ("SUM", "MAX"):
            return x.max(0).values.bool()
        if op in ("PRODUCT", "MIN"):
            return x.min(0).values.bool()
        raise ValueError(op)
    wide = torch.complex128 if dt.is_complex else (torch.float64 if dt.is_floating_point else torch.int64)
    x = torch.stack([t.to(wide) for t in ts])
    if op == "SUM":
        r = x.sum(0)
    elif op == "PREMUL_SUM":
        r = (x * PREMUL).sum(0)
    elif op == "PRODUCT":
        r = x.prod(0)
    elif op == "MIN":
        r = x.min(0).values
    elif op == "MAX":
        r = x.max(0).values
    elif op == "AVG":
        r = x.sum(0)
        r = torch.div(r, ws, rounding_mode="trunc") if not (dt.is_floating_point or dt.is_complex) else r / ws
    else:
        raise ValueError(op)
    return r.to(dt)


def red_op(op):
    if op == "PREMUL_SUM":
        return dist._make_nccl_premul_sum(PREMUL)
    return getattr(R, op)


class Cases:
    """Collects (name -> result) in a fixed order on every rank."""

    def __init__(self, rank, ws, backend):
        self.rank, self.ws, self.backend = rank, ws, backend
        self.out = {}

    def case(self, name, fn):
        if os.environ.get("COLL_CASES_TRACE"):
            print("case %s rank %d %s" % (self.backend, self.rank, name), file=sys.stderr, flush=True)
        if self.backend != "coll" and any(name.startswith(p) for p in GLOO_CRASHES):
            self.out[name] = ("error", "not run: crashes gloo")
            return
        try:
            self.out[name] = ("ok",) + tuple(fn())
        except Exception as e:  # every rank raises alike (argument, dtype or op errors)
            self.out[name] = ("error", "%s: %s" % (type(e).__name__, e))


def all_cases(rank, ws, backend, quick=False):
    C = Cases(rank, ws, backend)
    me = rank
    dtypes = DTYPES
    # world size 1 / quick runs use fewer shapes
    N = 13  # odd, not a multiple of any world size

    # ---- all_reduce: every op x dtype (PRODUCT on 1..3 so it stays in range)
    for dt in dtypes:
        for op in OPS:
            def f(dt=dt, op=op):
                prod = op == "PRODUCT"
                t = vals(dt, N, me, 1, prod)
                dist.all_reduce(t, op=red_op(op))
                return t, ref_reduce(op, [vals(dt, N, r, 1, prod) for r in range(ws)], dt)
            C.case("all_reduce/%s/%s" % (op, dname(dt)), f)

    # non-contiguous, 0-dim, zero-size, async chains
    for dt in dtypes:
        def f(dt=dt):
            t = vals(dt, 12, me, 2).reshape(3, 4).t()
            dist.all_reduce(t)
            return t, ref_reduce("SUM", [vals(dt, 12, r, 2).reshape(3, 4).t() for r in range(ws)], dt)
        C.case("all_reduce_noncontig/%s" % dname(dt), f)

        def f0(dt=dt):
            t = vals(dt, 1, me, 3).reshape(())
            dist.all_reduce(t, op=R.MAX)
            return t, ref_reduce("MAX", [vals(dt, 1, r, 3).reshape(()) for r in range(ws)], dt)
        C.case("all_reduce_0dim/%s" % dname(dt), f0)

        def fz(dt=dt):
            t = vals(dt, 0, me).reshape(0, 3)
            dist.all_reduce(t)
            return t, torch.zeros(0, 3, dtype=dt)
        C.case("all_reduce_empty/%s" % dname(dt), fz)

        def fa(dt=dt):
            a, b = vals(dt, N, me, 4), vals(dt, 2 * N, me, 5)
            works = [dist.all_reduce(a, async_op=True), dist.all_reduce(b, op=R.MAX, async_op=True),
                     dist.all_reduce(a, op=R.MAX, async_op=True)]  # ordered after the first on a
            for w in works:
                w.wait()
            ra = ref_reduce("SUM", [vals(dt, N, r, 4) for r in range(ws)], dt)
            return [a, b], [ra, ref_reduce("MAX", [vals(dt, 2 * N, r, 5) for r in range(ws)], dt)]
        C.case("all_reduce_async/%s" % dname(dt), fa)

        def fc(dt=dt):
            ts = [vals(dt, N, me, 6), vals(dt, 4, me, 7)]
            dist.all_reduce_coalesced(ts)
            return ts, [ref_reduce("SUM", [vals(dt, N, r, 6) for r in range(ws)], dt),
                        ref_reduce("SUM", [vals(dt, 4, r, 7) for r in range(ws)], dt)]
        C.case("all_reduce_coalesced/%s" % dname(dt), fc)

    # ---- broadcast
    for dt in dtypes:
        for root in range(ws):
            def f(dt=dt, root=root):
                t = vals(dt, N, me, 8)
                dist.broadcast(t, root)
                return t, vals(dt, N, root, 8)
            C.case("broadcast/root%d/%s" % (root, dname(dt)), f)

        def fn(dt=dt):
            t = vals(dt, 12, me, 9).reshape(3, 4).t()
            dist.broadcast(t, ws - 1)
            return t, vals(dt, 12, ws - 1, 9).reshape(3, 4).t()
        C.case("broadcast_noncontig/%s" % dname(dt), fn)

        def fz(dt=dt):
            t = vals(dt, 0, me)
            dist.broadcast(t, 0)
            return t, vals(dt, 0, 0)
        C.case("broadcast_empty/%s" % dname(dt), fz)

    # ---- all_gather (list), into tensor, coalesced
    for dt in dtypes:
        def f(dt=dt):
            outs = [torch.zeros(N, dtype=dt) for _ in range(ws)]
            dist.all_gather(outs, vals(dt, N, me, 10))
            return outs, [vals(dt, N, r, 10) for r in range(ws)]
        C.case("all_gather/%s" % dname(dt), f)

        def fn(dt=dt):
            outs = [torch.zeros(4, 3, dtype=dt).t() for _ in range(ws)]
            dist.all_gather(outs, vals(dt, 12, me, 11).reshape(4, 3).t())
            return outs, [vals(dt, 12, r, 11).reshape(4, 3).t() for r in range(ws)]
        C.case("all_gather_noncontig/%s" % dname(dt), fn)

        def fz(dt=dt):
            outs = [torch.zeros(0, dtype=dt) for _ in range(ws)]
            dist.all_gather(outs, vals(dt, 0, me))
            return outs, [vals(dt, 0, r) for r in range(ws)]
        C.case("all_gather_empty/%s" % dname(dt), fz)

        def ft(dt=dt):
            out = torch.zeros(ws * N, dtype=dt)
            fn_ = getattr(dist, "all_gather_into_tensor", None) or dist._all_gather_base
            fn_(out, vals(dt, N, me, 12))
            return out, torch.cat([vals(dt, N, r, 12) for r in range(ws)])
        C.case("all_gather_into_tensor/%s" % dname(dt), ft)

        def fc(dt=dt):
            ins = [vals(dt, 6, me, 13).reshape(2, 3), vals(dt, 5, me, 14)]
            outs = [[torch.zeros(2, 3, dtype=dt), torch.zeros(5, dtype=dt)] for _ in range(ws)]
            dist.all_gather_coalesced(outs, ins)
            return outs, [[vals(dt, 6, r, 13).reshape(2, 3), vals(dt, 5, r, 14)] for r in range(ws)]
        C.case("all_gather_coalesced/%s" % dname(dt), fc)

    # ---- reduce_scatter (list and tensor)
    for dt in dtypes:
        for op in ("SUM", "MAX"):
            def f(dt=dt, op=op):
                ins = [vals(dt, N, me, 15 + j) for j in range(ws)]
                out = torch.zeros(N, dtype=dt)
                dist.reduce_scatter(out, ins, op=red_op(op))
                return out, ref_reduce(op, [vals(dt, N, r, 15 + me) for r in range(ws)], dt)
            C.case("reduce_scatter/%s/%s" % (op, dname(dt)), f)

        def ft(dt=dt):
            inp = vals(dt, ws * N, me, 16)
            out = torch.zeros(N, dtype=dt)
            fn_ = getattr(dist, "reduce_scatter_tensor", None) or dist._reduce_scatter_base
            fn_(out, inp)
            return out, ref_reduce("SUM", [vals(dt, ws * N, r, 16)[me * N:(me + 1) * N] for r in range(ws)], dt)
        C.case("reduce_scatter_tensor/%s" % dname(dt), ft)

    # ---- reduce to every root
    for dt in dtypes:
        for root in range(ws):
            for op in ("SUM", "MIN"):
                def f(dt=dt, root=root, op=op):
                    t = vals(dt, N, me, 17)
                    dist.reduce(t, root, op=red_op(op))
                    if me != root:
                        return None, None  # undefined off the root
                    return t, ref_reduce(op, [vals(dt, N, r, 17) for r in range(ws)], dt)
                C.case("reduce/root%d/%s/%s" % (root, op, dname(dt)), f)

    # ---- gather / scatter
    for dt in dtypes:
        for root in range(ws):
            def fg(dt=dt, root=root):
                outs = [torch.zeros(N, dtype=dt) for _ in range(ws)] if me == root else None
                dist.gather(vals(dt, N, me, 18), outs, dst=root)
                if me != root:
                    return None, None
                return outs, [vals(dt, N, r, 18) for r in range(ws)]
            C.case("gather/root%d/%s" % (root, dname(dt)), fg)

            def fs(dt=dt, root=root):
                ins = [vals(dt, N, j, 19 + root) for j in range(ws)] if me == root else None
                out = torch.zeros(N, dtype=dt)
                dist.scatter(out, ins, src=root)
                return out, vals(dt, N, me, 19 + root)
            C.case("scatter/root%d/%s" % (root, dname(dt)), fs)

    # ---- all_to_all: equal splits, unequal splits (with zeros), list form
    def row(dt, src, dst, k, salt):
        return vals(dt, 3 * k, src * 10 + dst, salt).reshape(k, 3)

    for dt in dtypes:
        def fe(dt=dt):
            inp = torch.cat([row(dt, me, j, 2, 20) for j in range(ws)])
            out = torch.zeros(2 * ws, 3, dtype=dt)
            dist.all_to_all_single(out, inp)
            return out, torch.cat([row(dt, j, me, 2, 20) for j in range(ws)])
        C.case("all_to_all_single/%s" % dname(dt), fe)

        def fu(dt=dt):
            k = lambda s, d: (s + 2 * d) % 3  # rows rank s sends to rank d (0 happens)
            ins = [k(me, j) for j in range(ws)]
            outs = [k(j, me) for j in range(ws)]
            inp = torch.cat([row(dt, me, j, k(me, j), 21) for j in range(ws)])
            out = torch.zeros(sum(outs), 3, dtype=dt)
            dist.all_to_all_single(out, inp, outs, ins)
            return out, torch.cat([row(dt, j, me, k(j, me), 21) for j in range(ws)])
        C.case("all_to_all_single_uneven/%s" % dname(dt), fu)

        def fl(dt=dt):
            ins = [row(dt, me, j, 1 + j, 22) for j in range(ws)]
            outs = [torch.zeros(1 + me, 3, dtype=dt) for j in range(ws)]
            dist.all_to_all(outs, ins)
            return outs, [row(dt, j, me, 1 + me, 22) for j in range(ws)]
        C.case("all_to_all/%s" % dname(dt), fl)

    # ---- point to point
    nxt, prv = (me + 1) % ws, (me - 1) % ws
    for dt in dtypes:
        def fp(dt=dt):
            if ws == 1:
                return None, None
            r = torch.zeros(N, dtype=dt)
            works = [dist.irecv(r, prv), dist.isend(vals(dt, N, me, 23), nxt)]  # recv first everywhere
            for w in works:
                w.wait()
            return r, vals(dt, N, prv, 23)
        C.case("isend_irecv_ring/%s" % dname(dt), fp)

        def fb(dt=dt):
            if ws == 1:
                return None, None
            r = torch.zeros(N, dtype=dt)
            if me % 2 == 0:
                dist.send(vals(dt, N, me, 24), nxt)
                dist.recv(r, prv)
            else:
                dist.recv(r, prv)
                dist.send(vals(dt, N, me, 24), nxt)
            return r, vals(dt, N, prv, 24)
        C.case("send_recv_ring/%s" % dname(dt), fb)

        def fbatch(dt=dt):
            if ws == 1:
                return None, None
            r = torch.zeros(4, 3, dtype=dt).t()  # non-contiguous receive buffer
            ops = [dist.P2POp(dist.irecv, r, prv), dist.P2POp(dist.isend, vals(dt, 12, me, 25).reshape(3, 4), nxt)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
            return r, vals(dt, 12, prv, 25).reshape(3, 4)
        C.case("batch_isend_irecv/%s" % dname(dt), fbatch)

    def fany():
        if ws == 1:
            return None, None
        if me == 0:
            r = torch.zeros(3)
            src = dist.recv(r)
            return (torch.tensor(src), r), None
        if me == 1:
            dist.send(torch.ones(3), 0)
        return None, None
    if backend != "coll":
        C.case("recv_any_source", fany)
    else:  # coll refuses before any data moves: only rank 0 calls it
        def fany_coll():
            if me == 0:
                dist.recv(torch.zeros(3))
            return None, None
        C.case("recv_any_source", fany_coll)

    # ---- barrier behind outstanding work; subgroups; objects
    def fbar():
        t = vals(torch.float32, 100000, me, 26)
        w = dist.all_reduce(t, async_op=True)
        dist.barrier()
        done = w.is_completed()
        w.wait()
        return (torch.tensor(done), t), (torch.tensor(True), ref_reduce("SUM", [vals(torch.float32, 100000, r, 26)
                                                                            for r in range(ws)], torch.float32))
    C.case("barrier_after_async", fbar)

    def fgroup():
        ranks = list(range(ws - 1, -1, -2))  # e.g. [3, 1] or [2, 0]: reversed, strided
        g = dist.new_group(ranks)
        if me not in ranks:
            return None, None
        t = vals(torch.int64, N, me, 27)
        dist.all_reduce(t, group=g)
        outs = [torch.zeros(N, dtype=torch.int64) for _ in ranks]
        dist.all_gather(outs, vals(torch.int64, N, me, 28), group=g)
        b = vals(torch.float32, N, me, 29)
        dist.broadcast(b, ranks[-1], group=g)
        return [t, outs, b], [ref_reduce("SUM", [vals(torch.int64, N, r, 27) for r in ranks], torch.int64),
                              [vals(torch.int64, N, r, 28) for r in sorted(ranks)],
                              vals(torch.float32, N, ranks[-1], 29)]
    C.case("new_group", fgroup)

    def fobj():
        objs = [None] * ws
        dist.all_gather_object(objs, {"rank": me, "s": "x" * me})
        lst = [{"from": me}, [1, 2, me]] if me == 0 else [None, None]
        dist.broadcast_object_list(lst, 0)
        return [torch.tensor([o["rank"] for o in objs]), torch.tensor([len(o["s"]) for o in objs]),
                torch.tensor(lst[1])], [torch.arange(ws), torch.arange(ws), torch.tensor([1, 2, 0])]
    C.case("objects", fobj)
    return C.out
