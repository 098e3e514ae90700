"""ctypes binding of libcoll.so (the C API in include/coll.h).

Only the functions the PyTorch shim needs are declared.  Every call that
returns a collResult_t other than collSuccess raises CollError carrying
collGetLastError()'s message (read on the calling thread, as coll keeps it in
thread-local storage).
"""
import ctypes
import ctypes.util
import os

# collResult_t
SUCCESS = 0
SYSTEM_ERROR = 2
INTERNAL_ERROR = 3
INVALID_ARGUMENT = 4
INVALID_USAGE = 5
REMOTE_ERROR = 6
IN_PROGRESS = 7
TIMEOUT = 8

# collDataType_t
INT8, UINT8, INT32, UINT32, INT64, UINT64, FLOAT16, FLOAT32, FLOAT64, BFLOAT16 = range(10)
# collRedOp_t
SUM, PROD, MAX, MIN, AVG = range(5)

UNIQUE_ID_BYTES = 128
CONFIG_UNDEF = -2147483647 - 1
CONFIG_MAGIC = 0xC011C0F1


class CollError(RuntimeError):
    """A libcoll call failed; .code is the collResult_t."""

    def __init__(self, code, msg):
        super().__init__(msg)
        self.code = code


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


class Config(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("magic", ctypes.c_uint),
        ("version", ctypes.c_uint),
        ("blocking", ctypes.c_int),
        ("timeoutSec", ctypes.c_int),
        ("netName", ctypes.c_char_p),
    ]


def _candidates():
    env = os.environ.get("COLL_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "libcoll.so")  # installed next to the package
    repo = os.path.dirname(os.path.dirname(here))  # python/torch_coll -> repo root
    for d in ("build", "build/release", "_build"):
        yield os.path.join(repo, d, "libcoll.so")
    found = ctypes.util.find_library("coll")
    if found:
        yield found


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path + " (missing)")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError(
        "torch_coll: cannot load libcoll.so; set COLL_LIBRARY to its path. Tried: " + "; ".join(tried or ["nothing"]))


lib, path = _load()

_vp = ctypes.c_void_p
_sz = ctypes.c_size_t
_int = ctypes.c_int
_protos = {
    "collGetVersion": [ctypes.POINTER(_int)],
    "collGetErrorString": [_int],
    "collGetLastError": [_vp],
    "collGetUniqueId": [ctypes.POINTER(UniqueId)],
    "collCommInitRankConfig": [ctypes.POINTER(_vp), _int, UniqueId, _int, ctypes.POINTER(Config)],
    "collCommDestroy": [_vp],
    "collCommAbort": [_vp],
    "collCommGetAsyncError": [_vp, ctypes.POINTER(_int)],
    "collCommCount": [_vp, ctypes.POINTER(_int)],
    "collCommUserRank": [_vp, ctypes.POINTER(_int)],
    "collStreamCreate": [_vp, ctypes.POINTER(_vp)],
    "collStreamSynchronize": [_vp],
    "collStreamQuery": [_vp],
    "collStreamDestroy": [_vp],
    "collAllReduce": [_vp, _vp, _sz, _int, _int, _vp, _vp],
    "collAllGather": [_vp, _vp, _sz, _int, _vp, _vp],
    "collReduceScatter": [_vp, _vp, _sz, _int, _int, _vp, _vp],
    "collBroadcast": [_vp, _vp, _sz, _int, _int, _vp, _vp],
    "collReduce": [_vp, _vp, _sz, _int, _int, _int, _vp, _vp],
    "collSend": [_vp, _sz, _int, _int, _vp, _vp],
    "collRecv": [_vp, _sz, _int, _int, _vp, _vp],
    "collBarrier": [_vp, _vp],
    "collGroupStart": [],
    "collGroupEnd": [],
}
for _name, _args in _protos.items():
    _f = getattr(lib, _name)
    _f.argtypes = _args
    _f.restype = ctypes.c_char_p if _name in ("collGetErrorString", "collGetLastError") else _int


def last_error(comm=None):
    m = lib.collGetLastError(comm)
    return m.decode("utf-8", "replace") if m else ""


def error_string(code):
    m = lib.collGetErrorString(code)
    return m.decode("utf-8", "replace") if m else "unknown coll error %d" % code


def message(code, what):
    detail = last_error()
    return "coll: %s failed: %s%s" % (what, error_string(code), (": " + detail) if detail else "")


def check(code, what):
    """Raises CollError for a failed call; the message comes from collGetLastError."""
    if code != SUCCESS:
        raise CollError(code, message(code, what))


def version():
    v = _int()
    check(lib.collGetVersion(ctypes.byref(v)), "collGetVersion")
    return v.value


def get_unique_id():
    uid = UniqueId()
    check(lib.collGetUniqueId(ctypes.byref(uid)), "collGetUniqueId")
    return ctypes.string_at(ctypes.addressof(uid), UNIQUE_ID_BYTES)


def comm_init_rank(uid_bytes, nranks, rank, timeout_sec=None):
    if len(uid_bytes) != UNIQUE_ID_BYTES:
        raise RuntimeError("coll: unique id has %d bytes, expected %d" % (len(uid_bytes), UNIQUE_ID_BYTES))
    uid = UniqueId()
    ctypes.memmove(ctypes.addressof(uid), uid_bytes, UNIQUE_ID_BYTES)
    cfg = Config(ctypes.sizeof(Config), CONFIG_MAGIC, version(), CONFIG_UNDEF,
                 CONFIG_UNDEF if timeout_sec is None else int(timeout_sec), None)
    comm = _vp()
    check(lib.collCommInitRankConfig(ctypes.byref(comm), nranks, uid, rank, ctypes.byref(cfg)),
          "collCommInitRank(rank %d of %d)" % (rank, nranks))
    return comm.value


def async_error(comm):
    r = _int()
    if lib.collCommGetAsyncError(comm, ctypes.byref(r)) != SUCCESS:
        return None
    return r.value


def stream_create(comm):
    s = _vp()
    check(lib.collStreamCreate(comm, ctypes.byref(s)), "collStreamCreate")
    return s.value
