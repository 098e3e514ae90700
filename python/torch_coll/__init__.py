"""torch_coll: the "coll" backend for torch.distributed.

    import torch_coll                      # registers the backend
    torch.distributed.init_process_group("coll", ...)

Works with torch 1.13 through 2.x (CPU tensors; CUDA tensors on torch 2.x
with CUDA and a libcoll built with COLL_CUDA, see _cuda.py).  libcoll.so is found through
$COLL_LIBRARY, next to this package, in the repository's build/ folder, or by
ctypes.util.find_library("coll").  _pg.py has the process group (what each
operation does), _dtypes.py the dtypes and ops it supports, _work.py its Work
objects and completion thread, _cuda.py CUDA tensors, _p2p.py sends and receives, _rendezvous.py how
ranks meet through torch's store.
"""
import inspect

import torch.distributed as dist

from . import _lib
from ._lib import CollError
from ._pg import BACKEND_NAME, ProcessGroupColl, create_process_group

__all__ = ["ProcessGroupColl", "CollError", "BACKEND_NAME", "create_process_group", "library_path",
           "coll_version", "register"]

library_path = _lib.path


def coll_version():
    """libcoll's version code (major*10000 + minor*100 + patch)."""
    return _lib.version()


def register():
    """Registers "coll" with torch.distributed (done on import; idempotent)."""
    B = dist.Backend
    plugins = getattr(B, "_plugins", {})
    if BACKEND_NAME.upper() in plugins:
        return
    kwargs = {}
    try:
        params = inspect.signature(B.register_backend).parameters
    except (TypeError, ValueError):
        params = {}
    if "devices" in params:  # torch >= 2.0; CUDA tensors run on torch's current stream (_cuda.py)
        kwargs["devices"] = ["cpu", "cuda"]
    B.register_backend(BACKEND_NAME, create_process_group, **kwargs)


register()
