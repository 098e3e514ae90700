"""dtypes, reduction ops and tensors for the coll backend.

Reductions map the torch dtype to coll's: int8, uint8, int32, int64, float16,
float32, float64, bfloat16 (and uint32/uint64 where torch has them); bool
reduces as a byte with SUM/MAX = logical or and PRODUCT/MIN = logical and (what
gloo gives); complex reduces as pairs of reals for SUM, AVG and PREMUL_SUM.
Everything else (int16, BAND/BOR/BXOR, complex MIN...) raises a RuntimeError
that says so.  Data movement needs none of this: it moves bytes.
"""
import ctypes

import torch
import torch.distributed as dist

from . import _lib

try:
    _c10d = torch._C._distributed_c10d
except AttributeError:  # pragma: no cover
    raise ImportError("torch_coll needs torch built with distributed support")

_RED_TYPES = {
    torch.int8: _lib.INT8,
    torch.uint8: _lib.UINT8,
    torch.int32: _lib.INT32,
    torch.int64: _lib.INT64,
    torch.float16: _lib.FLOAT16,
    torch.float32: _lib.FLOAT32,
    torch.float64: _lib.FLOAT64,
    torch.bfloat16: _lib.BFLOAT16,
    torch.bool: _lib.UINT8,  # with the op remapped, see _reduction()
}
for _n, _c in (("uint32", _lib.UINT32), ("uint64", _lib.UINT64)):
    if hasattr(torch, _n):  # torch >= 2.3
        _RED_TYPES[getattr(torch, _n)] = _c
_COMPLEX_REAL = {torch.complex64: _lib.FLOAT32, torch.complex128: _lib.FLOAT64}
if hasattr(torch, "complex32"):
    _COMPLEX_REAL[torch.complex32] = _lib.FLOAT16

_OPS = {"SUM": _lib.SUM, "PRODUCT": _lib.PROD, "MIN": _lib.MIN, "MAX": _lib.MAX, "AVG": _lib.AVG}
# bool as a byte of 0/1: or = max, and = min (gloo: sum/max = or, product/min = and)
_BOOL_OPS = {"SUM": _lib.MAX, "MAX": _lib.MAX, "PRODUCT": _lib.MIN, "MIN": _lib.MIN}


def _op_name(reduce_op):
    op = getattr(reduce_op, "op", reduce_op)  # ReduceOp -> RedOpType
    name = getattr(op, "name", None)
    if name is None:
        name = str(op).rsplit(".", 1)[-1]
    return name


_premul_layout_ok = None


def _premul_factor_113(reduce_op):
    """torch 1.13 does not expose the PREMUL_SUM factor to Python.  Read it
    from the C++ object (pybind11 instance -> c10d::ReduceOp -> supplement_
    -> NCCLPreMulSumSupplement::double_factor), after checking the layout on
    probe objects whose contents we know; refuse if anything disagrees."""
    global _premul_layout_ok
    P = ctypes.c_void_p

    def value_ptr(o):
        return P.from_address(id(o) + 16).value  # simple_value_holder[0]

    def op_byte(o):
        return ctypes.c_uint8.from_address(value_ptr(o) + 24).value

    def supp(o):
        return P.from_address(value_ptr(o) + 32).value

    if _premul_layout_ok is None:
        ok = False
        try:
            if not torch.__version__.startswith("1."):
                raise RuntimeError("only torch 1.x lacks ReduceOp.__getstate__")
            R = _c10d.ReduceOp
            probes = [(R(R.RedOpType.SUM), 0), (R(R.RedOpType.MAX), 4), (R(R.RedOpType.AVG), 1)]
            if all(value_ptr(o) and op_byte(o) == v and supp(o) is None for o, v in probes):
                o = _c10d.AllreduceOptions()
                o.reduceOp = dist._make_nccl_premul_sum(0.8125)
                p = o.reduceOp  # the shim reads a copy held by an options object
                if op_byte(p) == 8 and supp(p):
                    ok = ctypes.c_double.from_address(supp(p) + 24).value == 0.8125
                    q = dist._make_nccl_premul_sum(-3.5)
                    ok = ok and ctypes.c_double.from_address(supp(q) + 24).value == -3.5
                    # undefined at::Tensor points at UndefinedTensorImpl's singleton
                    _premul_factor_113.undef = P.from_address(supp(p) + 32).value
                    ok = ok and _premul_factor_113.undef == P.from_address(supp(q) + 32).value
        except Exception:
            ok = False
        _premul_layout_ok = ok
    if not _premul_layout_ok:
        raise RuntimeError("coll: cannot read the PREMUL_SUM factor on this torch version")
    s = supp(reduce_op)
    if not s:
        raise RuntimeError("coll: PREMUL_SUM without a factor")
    if P.from_address(s + 32).value != _premul_factor_113.undef:
        raise RuntimeError("coll: PREMUL_SUM with a tensor factor is not supported on torch 1.13 (use a float factor)")
    return ctypes.c_double.from_address(s + 24).value


def _premul_factor(reduce_op):
    try:
        st = reduce_op.__getstate__()  # torch 2.x: (RedOpType, factor)
        if isinstance(st, tuple) and len(st) == 2 and st[1] is not None:
            return st[1]
    except Exception:
        pass
    return _premul_factor_113(reduce_op)


def _premul(t, factor):
    """t *= factor in t's dtype (as NCCL does: the factor is converted to the
    element type first, so integer tensors use the truncated factor)."""
    f = factor if isinstance(factor, torch.Tensor) else torch.tensor(factor)
    if not t.dtype.is_complex:
        f = f.real if f.is_complex() else f
    return t.mul_(f.to(t.dtype))


def _reduction(t, reduce_op, what):
    """-> (coll dtype, coll op, element count, premul factor or None)."""
    name = _op_name(reduce_op)
    dt = t.dtype
    factor = None
    if name in ("BAND", "BOR", "BXOR"):
        raise RuntimeError("coll: %s: ReduceOp.%s is not supported (coll has no bitwise reductions)" % (what, name))
    if name == "PREMUL_SUM":
        factor = _premul_factor(reduce_op)
        name = "SUM"
    if name not in _OPS:
        raise RuntimeError("coll: %s: unsupported reduce op %s" % (what, name))
    if dt in _COMPLEX_REAL:
        if name not in ("SUM", "AVG"):
            raise RuntimeError("coll: %s: ReduceOp.%s is not defined for complex tensors (only SUM, AVG, PREMUL_SUM)"
                               % (what, name))
        return _COMPLEX_REAL[dt], _OPS[name], 2 * t.numel(), factor
    if dt == torch.bool:
        if name not in _BOOL_OPS or factor is not None:
            raise RuntimeError("coll: %s: ReduceOp.%s is not supported for bool tensors (SUM/MAX = or, "
                               "PRODUCT/MIN = and)" % (what, "PREMUL_SUM" if factor is not None else name))
        return _lib.UINT8, _BOOL_OPS[name], t.numel(), None
    if dt not in _RED_TYPES:
        raise RuntimeError("coll: %s: dtype %s cannot be reduced by coll (supported: %s, bool, complex)"
                           % (what, dt, ", ".join(sorted(str(d).replace("torch.", "") for d in _RED_TYPES
                                                         if d != torch.bool))))
    return _RED_TYPES[dt], _OPS[name], t.numel(), factor


# ---------------------------------------------------------------------------
# tensors


def _plain(t):
    return t.is_contiguous() and not t.is_conj() and not (hasattr(t, "is_neg") and t.is_neg())


def _check_tensor(t, what):
    if not isinstance(t, torch.Tensor):
        raise TypeError("coll: %s: expected a tensor, got %r" % (what, type(t)))
    from . import _cuda  # (imports this module)
    _cuda.refuse([t], what)  # the CPU path: a CUDA tensor here has no CUDA path
    if t.device.type != "cpu":
        raise RuntimeError("coll: %s: only CPU tensors are supported (got %s)" % (what, t.device))
    if t.layout != torch.strided:
        raise RuntimeError("coll: %s: only dense (strided) tensors are supported (got %s)" % (what, t.layout))


def _plain_copy(t):
    if hasattr(t, "resolve_neg"):
        t = t.resolve_conj().resolve_neg()
    return t.contiguous()


def _ptr(t):
    return t.data_ptr() if t.numel() else None


def _nbytes(t):
    return t.numel() * t.element_size()


class _Outs:
    """Output buffers: a plain tensor is written directly, others go through a
    contiguous staging tensor copied back when the operation completed.  Holds
    the engine's quiesce (not the group: its finish() is queued with the work)."""

    def __init__(self, pg):
        self.quiesce = pg._eng.quiesce
        self.copies = []

    def buf(self, t, what, init=False):
        _check_tensor(t, what)
        if _plain(t):
            return t
        b = torch.empty(t.shape, dtype=t.dtype)
        if init:
            self.quiesce()
            b.copy_(t)
        self.copies.append((t, b))
        return b

    def finish(self):
        for t, b in self.copies:
            t.copy_(b)
