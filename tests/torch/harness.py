"""Spawning helpers for the coll PyTorch tests (torch 1.13 .. 2.x).

Every child is a fresh interpreter (multiprocessing "spawn"), joins a process
group through a FileStore in a temporary directory, runs one module-level
function and saves what it returns with torch.save.  Every run has a deadline:
on expiry all children are killed and the run fails.
"""
import os
import shutil
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PYDIR = os.path.join(REPO, "python")


def setup_paths():
    """Makes torch_coll and this folder importable here and in spawned children."""
    for p in (PYDIR, HERE):
        if p not in sys.path:
            sys.path.insert(0, p)
    pp = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    for p in (PYDIR, HERE):
        if p not in pp:
            pp.insert(0, p)
    os.environ["PYTHONPATH"] = os.pathsep.join(pp)
    if "COLL_LIBRARY" not in os.environ:
        for d in (os.environ.get("COLL_BUILD_DIR"), os.path.join(REPO, "build")):
            if d and os.path.exists(os.path.join(d, "libcoll.so")):
                os.environ["COLL_LIBRARY"] = os.path.join(d, "libcoll.so")
                break


setup_paths()


def _die_with_parent():
    """Linux: a killed test run must not leave its workers behind."""
    try:
        import ctypes
        import signal
        ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _child(fn, rank, ws, backends, tmpdir, args, env, init=None, timeout=None):
    """Runs fn under each backend in turn (a fresh default group each time)."""
    _die_with_parent()
    if timeout:  # a hung worker prints every thread's stack before the parent kills it
        import faulthandler
        faulthandler.dump_traceback_later(max(5, timeout - 8), exit=False)
    os.environ.update(env)
    setup_paths()
    import datetime
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    for backend in backends:
        if backend == "coll":
            import torch_coll  # noqa: F401
        out = os.path.join(tmpdir, "result.%s.%d.pt" % (backend, rank))
        if init is False:  # fn makes (and destroys) its groups itself
            try:
                torch.save({"ok": True, "result": fn(rank, ws, backend, *args)}, out)
                continue
            except BaseException:
                torch.save({"ok": False, "error": traceback.format_exc()}, out)
                sys.stdout.flush()
                os._exit(1)
        try:
            method = init or ("file://" + os.path.join(tmpdir, "store." + backend))
            dist.init_process_group(backend, init_method=method, rank=rank, world_size=ws,
                                    timeout=datetime.timedelta(seconds=120))
            res = fn(rank, ws, backend, *args)
            torch.save({"ok": True, "result": res}, out)
            try:
                dist.barrier()
                dist.destroy_process_group()
            except Exception:
                pass
        except BaseException:
            torch.save({"ok": False, "error": traceback.format_exc()}, out)
            sys.stdout.flush()
            os._exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


class RunError(AssertionError):
    pass


def free_port():
    """A port that could be bound on 127.0.0.1 a moment ago, below the kernel's
    ephemeral range (as tests/cases/helper_launch.c): a port from bind(0) may be
    any process's connect source port before the test binds it (again: BR-17
    binds its MASTER_PORT anew every cycle)."""
    import random
    import socket
    lo = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    candidates = [random.randrange(10000, lo - 1) for _ in range(256)] if lo > 12000 else []
    for port in candidates + [0] * 64:
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            return s.getsockname()[1]
        except OSError:
            continue
        finally:
            s.close()
    raise RuntimeError("no free port on 127.0.0.1")


def run(fn, ws, backend, args=(), timeout=120, env=None, may_die=(), init=None):
    """Runs fn(rank, ws, backend, *args) on ws processes; returns the list of
    per-rank results (None for a rank in may_die that left no result).  Raises
    RunError (with every failed rank's traceback) on failure or timeout."""
    return run_multi(fn, ws, (backend,), args, timeout, env, may_die, init)[backend]


def run_multi(fn, ws, backends, args=(), timeout=120, env=None, may_die=(), init=None):
    """As run(), but each process runs fn under every backend in turn (one
    spawn for all of them); returns {backend: [per-rank results]}.  init: the
    init_method (default: file:// in a fresh temporary directory); False: no
    group is made for fn, which creates and destroys its own."""
    import multiprocessing as mp
    import torch
    ctx = mp.get_context("spawn")
    tmpdir = tempfile.mkdtemp(prefix="coll_torch_")
    env = dict(env or {})
    procs = []
    try:
        for r in range(ws):
            p = ctx.Process(target=_child, args=(fn, r, ws, tuple(backends), tmpdir, tuple(args), env, init, timeout),
                            daemon=True)
            p.start()
            procs.append(p)
        deadline = time.monotonic() + timeout
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        timed_out = [r for r, p in enumerate(procs) if p.is_alive()]
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(5)
        results, errors = {b: [] for b in backends}, []
        for backend in backends:
            for r in range(ws):
                f = os.path.join(tmpdir, "result.%s.%d.pt" % (backend, r))
                if os.path.exists(f):
                    d = torch.load(f)
                    if not d["ok"]:
                        errors.append("rank %d (%s):\n%s" % (r, backend, d["error"]))
                        results[backend].append(None)
                    else:
                        results[backend].append(d["result"])
                    continue
                results[backend].append(None)
                if r in may_die:
                    continue
                if r in timed_out:
                    errors.append("rank %d (%s): timed out after %ss" % (r, backend, timeout))
                else:
                    errors.append("rank %d (%s): exited with %s and no result" % (r, backend, procs[r].exitcode))
        if errors:
            raise RunError("%s on %d ranks (%s) failed:\n%s" % (getattr(fn, "__name__", fn), ws, ",".join(backends),
                                                                "\n".join(errors)))
        return results
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
        shutil.rmtree(tmpdir, ignore_errors=True)
