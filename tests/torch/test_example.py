"""examples/ddp_train.py under torchrun with 3 processes: the per-step losses
printed with --backend coll must be identical to --backend gloo.
Run: /usr/bin/python3 tests/torch/test_example.py"""
import os
import re
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402


def torchrun_works():
    """Debian's torch 2.x is built without libuv, and its torchrun always asks
    TCPStore for libuv (USE_LIBUV=0 is not honoured there)."""
    import torch.distributed as dist
    try:
        dist.TCPStore("127.0.0.1", 0, 1, True)
        return True
    except Exception as e:
        if "libuv" in str(e):
            return False
        raise


def launch(backend, nproc=3, timeout=150):
    """What torchrun does for a single node, for a torch whose torchrun cannot
    run here: RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT and env:// rendezvous."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    procs = []
    for r in range(nproc):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(nproc), LOCAL_WORLD_SIZE=str(nproc),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), USE_LIBUV="0", PYTHONWARNINGS="ignore",
                   OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, os.path.join(harness.REPO, "examples", "ddp_train.py"),
                                       "--backend", backend], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outs, rc = [], 0
    try:
        for p in procs:
            o, _ = p.communicate(timeout=timeout)
            outs.append(o)
            rc = rc or p.returncode
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return (rc,) + parse(outs[0]) + ("\n".join(outs),)


def torchrun(backend, nproc=3, timeout=150):
    if not torchrun_works():
        return launch(backend, nproc, timeout)
    # --standalone: a c10d rendezvous on a free local port (honours USE_LIBUV=0, which
    # Debian's torch 2.x needs: it is built without libuv)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=%d" % nproc]
    import torch
    if torch.__version__.startswith("1."):
        # torch 1.13's torchrun on Python 3.11 fails with the default --redirects/--tee 0
        # (Std.from_str returns None for flag value 0): ask for stdout explicitly
        cmd += ["--redirects", "1", "--tee", "1"]
        # torch 1.13's --standalone always puts the rendezvous store on port 29400: the
        # second of two concurrent jobs becomes a client of the first one's store and
        # fails with "Broken pipe" when that job ends.  A free port of its own instead.
        import uuid
        cmd = [c for c in cmd if c != "--standalone"]
        cmd[3:3] = ["--rdzv_backend", "c10d", "--rdzv_endpoint", "127.0.0.1:%d" % harness.free_port(),
                    "--rdzv_id", str(uuid.uuid4()), "--nnodes", "1"]
    cmd += [os.path.join(harness.REPO, "examples", "ddp_train.py"), "--backend", backend]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, text=True,
                       env=dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1",
                                # Debian's torch 2.x is built without libuv; torchrun's store asks for it
                                USE_LIBUV=os.environ.get("USE_LIBUV", "0")))
    return (p.returncode,) + parse(p.stdout) + (p.stdout,)


def parse(out):
    """(step lines, final line) printed by rank 0; torchrun's --tee may splice its
    "[default0]:" prefixes into the middle of lines, so match the values only."""
    steps = ["step %s loss %s" % m for m in re.findall(r"step +(\d+) loss ([-0-9.]+)", out)]
    ends = ["backend %s, %s ranks, identical on all ranks: %s, checksum %s" % m for m in
            re.findall(r"backend (\w+), (\d+) ranks, parameters identical on all ranks: (\w+), checksum ([-0-9.]+)",
                       out)]
    return steps, ends


class TestExample(unittest.TestCase):
    def test_ddp_train_same_losses(self):
        # one job after the other: each picks a free port for its rendezvous store and
        # binds it only later, so a concurrent job's processes (coll's bootstrap listens
        # on ephemeral ports) could take it in between, and the agent would then talk
        # to the wrong server (seen once in CI as a hang)
        rc_c, steps_c, end_c, out_c = torchrun("coll", timeout=80)
        rc_g, steps_g, end_g, out_g = torchrun("gloo", timeout=80)
        self.assertEqual(rc_c, 0, out_c[-3000:])
        self.assertEqual(rc_g, 0, out_g[-3000:])
        self.assertEqual(len(steps_c), 20, out_c[-3000:])
        self.assertEqual(steps_c, steps_g)
        self.assertIn("identical on all ranks: True", end_c[0])
        self.assertEqual(end_c[0].split("checksum")[1], end_g[0].split("checksum")[1])
        print("\n" + "\n".join(steps_c[-3:] + end_c), file=sys.stderr)


if __name__ == "__main__":
    unittest.main()
