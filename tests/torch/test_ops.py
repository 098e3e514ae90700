"""Every operation x dtype on 1, 2, 3 and 4 processes under coll, compared with
gloo on the same inputs (and, where gloo does not implement an operation, with
the locally computed reference).  Run: /usr/bin/python3 tests/torch/test_ops.py
[-v] [world sizes...]"""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402  (sets up paths)

import torch  # noqa: E402

import ops_cases  # noqa: E402

# What coll refuses on purpose (a RuntimeError naming the reason), by case name.
_BITWISE = ("/BAND/", "/BOR/", "/BXOR/")


def coll_must_refuse(name):
    parts = name.split("/")
    dt = parts[-1]
    if any(b in name + "/" for b in _BITWISE):
        return "bitwise"
    if name == "recv_any_source":
        return "any source"
    reducing = parts[0] in ("all_reduce", "all_reduce_noncontig", "all_reduce_0dim", "all_reduce_empty",
                            "all_reduce_async", "all_reduce_coalesced", "reduce_scatter", "reduce_scatter_tensor",
                            "reduce")
    if not reducing:
        return None
    op = parts[1] if parts[0] == "all_reduce" else ("MAX" if parts[0] in ("all_reduce_0dim",) else "SUM")
    if parts[0] in ("reduce_scatter", "reduce"):
        op = parts[-2]
    if parts[0] == "all_reduce_async":
        op = "MAX"  # the case uses SUM and MAX
    if dt == "int16":
        return "cannot be reduced"
    if dt.startswith("complex") and op not in ("SUM", "AVG", "PREMUL_SUM"):
        return "not defined for complex"
    if dt == "bool" and op in ("AVG", "PREMUL_SUM"):
        return "not supported for bool"
    return None


def _tol(dt):
    if dt in (torch.float16, torch.bfloat16, torch.complex32 if hasattr(torch, "complex32") else None):
        return 1e-2
    if dt in (torch.float32, torch.complex64):
        return 1e-6
    return 1e-12


def same(a, b, path=""):
    """None if equal, else a description of the first difference."""
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        if not isinstance(a, (list, tuple)) or not isinstance(b, (list, tuple)) or len(a) != len(b):
            return "%s: structure %r vs %r" % (path, type(a), type(b))
        for i, (x, y) in enumerate(zip(a, b)):
            d = same(x, y, "%s[%d]" % (path, i))
            if d:
                return d
        return None
    if a is None or b is None:
        return None if a is b else "%s: %r vs %r" % (path, a, b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return "%s: %s%s vs %s%s" % (path, a.dtype, tuple(a.shape), b.dtype, tuple(b.shape))
    if a.dtype.is_floating_point or a.dtype.is_complex:
        w = torch.complex128 if a.dtype.is_complex else torch.float64
        ok = torch.allclose(a.to(w), b.to(w), rtol=_tol(a.dtype), atol=0)
    else:
        ok = torch.equal(a, b)
    return None if ok else "%s: %s vs %s" % (path, a.flatten()[:8].tolist(), b.flatten()[:8].tolist())


def compare(ws, coll, gloo):
    """coll, gloo: per-rank dicts name -> ("ok", value, ref) | ("error", msg).
    Returns (failures, notes, counts)."""
    failures, notes = [], []
    counts = {"cases": 0, "vs_gloo": 0, "vs_reference": 0, "refused": 0}
    for name in coll[0]:
        counts["cases"] += 1
        refuse = coll_must_refuse(name)
        for rank in range(ws):
            c = coll[rank][name]
            g = gloo[rank].get(name) if gloo else None
            where = "ws=%d rank %d %s" % (ws, rank, name)
            if refuse:
                # torch itself refuses complex with ops other than SUM/AVG/PREMUL_SUM before the backend
                torch_says = name.split("/")[-1].startswith("complex") and "on complex tensors" in c[1]
                if c[0] != "error" or not ((refuse in c[1] and "coll" in c[1]) or torch_says):
                    if not (name == "recv_any_source" and rank != 0):
                        failures.append("%s: expected a clear refusal (%r), got %r" % (where, refuse, c[:2]))
                elif rank == 0:
                    counts["refused"] += 1
                continue
            if c[0] == "error":
                failures.append("%s: coll raised %s" % (where, c[1]))
                continue
            d = same(c[1], c[2])
            if d:
                failures.append("%s: coll differs from the reference: %s" % (where, d))
            # gloo is a second witness only where it agrees with the reference: its
            # worker threads may run two async operations on one tensor at once
            # (all_reduce_async), which coll orders as NCCL does.
            gd = same(g[1], g[2]) if g is not None and g[0] == "ok" else None
            if g is not None and g[0] == "ok" and not gd:
                d = same(c[1], g[1])
                if d:
                    failures.append("%s: coll differs from gloo: %s" % (where, d))
                elif rank == 0:
                    counts["vs_gloo"] += 1
            elif rank == 0:
                if gd:
                    notes.append("%s: gloo differs from the reference: %s" % (where, gd))
                counts["vs_reference"] += 1
                if g is not None and g[0] == "error":
                    notes.append("%s: gloo: %s" % (where, g[1].splitlines()[0][:120]))
    return failures, notes, counts


_gloo_cache = {}


def run_ops(ws, with_gloo=True):
    res = harness.run_multi(ops_cases.all_cases, ws, ("coll", "gloo") if with_gloo else ("coll",), timeout=300)
    return compare(ws, res["coll"], res.get("gloo"))


class TestOps(unittest.TestCase):
    verbose = bool(os.environ.get("COLL_TORCH_VERBOSE"))
    # COLL_TORCH_QUICK=1 (run_tests.sh): gloo runs only at world sizes 2 and 3;
    # at 1 and 4 coll is checked against the reference alone.
    quick = bool(os.environ.get("COLL_TORCH_QUICK"))

    def check(self, ws):
        failures, notes, counts = run_ops(ws, with_gloo=not (self.quick and ws in (1, 4)))
        print("\nws=%d: %d cases, %d equal to gloo, %d checked against the reference (gloo lacks them), "
              "%d refused by coll as documented" % (ws, counts["cases"], counts["vs_gloo"], counts["vs_reference"],
                                                    counts["refused"]), file=sys.stderr)
        if self.verbose:
            for n in notes:
                print("  note: " + n, file=sys.stderr)
        self.assertFalse(failures, "\n".join(failures[:60]) + ("\n... %d more" % (len(failures) - 60)
                                                               if len(failures) > 60 else ""))

    def test_ws1(self):
        self.check(1)

    def test_ws2(self):
        self.check(2)

    def test_ws3(self):
        self.check(3)

    def test_ws4(self):
        self.check(4)


if __name__ == "__main__":
    unittest.main()
