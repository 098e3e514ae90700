#!/usr/bin/env python3
"""check_output.py BUILD_DIR - the benchmarks' command line and output as a
sweep script written for nccl-tests would use them:

  1. every nccl-tests flag is accepted (GPU-only ones are noted as ignored);
  2. -J (JSON, nccl-tests' schema version 2) and --csv hold the same numbers
     as the printed table, row by row;
  3. bad values fail with status 2 and a message that names the flag;
  4. a launcher variable without its partner fails instead of running 1 rank;
  5. -N 0 (endless) runs have no wall-clock cap unless
     COLL_TESTS_LAUNCH_TIMEOUT is set, and the cap, when set, kills the run.
Exit status 0 when every check passes; each failure is printed.
"""
import csv
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

build = sys.argv[1]
perf = os.path.join(build, "benchmarks", "allreduce_perf")
env = dict(os.environ, COLL_SOCKET_IFNAME="lo", COLL_TIMEOUT="60")
for k in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
          "SLURM_PROCID", "SLURM_NTASKS", "COLL_TESTS_LAUNCH_TIMEOUT"):
    env.pop(k, None)
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run(args, extra_env=None, timeout=120):
    e = dict(env, **(extra_env or {}))
    p = subprocess.run([perf] + args, env=e, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def close(table_value, exact):
    """A table cell (rounded to its width) against the exact number."""
    v = float(table_value)
    return abs(v - exact) <= max(0.011, 0.006 * abs(exact))


tmp = tempfile.mkdtemp(prefix="coll-bench-")
jpath, cpath = os.path.join(tmp, "out.json"), os.path.join(tmp, "out.csv")

# 1 + 2: every flag, table == JSON == CSV
flags = ["-np", "2", "-b", "1K", "-e", "16K", "-f", "4", "-n", "4", "-w", "1", "-m", "1", "-c", "1", "-N", "1",
         "-p", "0", "-o", "sum", "-d", "float", "-r", "0", "-z", "0", "-y", "0", "-T", "60", "-G", "2", "-C", "0",
         "-a", "1", "-R", "1", "-x", "0", "-D", "0", "-V", "16", "-I", "1", "-K", "1", "-S", "1", "-M", "1",
         "-u", "1", "-J", jpath, "--csv", cpath]
rc, out, err = run(flags)
check(rc == 0, "every nccl-tests flag accepted (rc %d) %s" % (rc, err.strip()[-300:]))
check("-G 2 is ignored" in out and "-R 1 is ignored" not in out, "GPU-only flags noted as ignored (-R 1 is not: collMemAlloc buffers)")
check("unalign: 1" in out, "-u shows in the header")
check("Host memory usage" in out, "-M prints the memory line")
rows = [l.split() for l in out.splitlines() if l and not l.startswith("#")]
check(len(rows) == 3, "3 table rows (1K, 4K, 16K): %d" % len(rows))
try:
    doc = json.load(open(jpath))
except Exception as e:  # noqa: BLE001 - any parse failure is the finding
    doc = None
    check(False, "JSON parses: %s" % e)
if doc:
    check(doc.get("version") == 2 and "config" in doc and "results" in doc, "JSON has version 2, config, results")
    res = doc["results"]
    check(len(res) == len(rows), "JSON rows = table rows")
    for t, j in zip(rows, res):
        # size count type redop root | time algbw busbw #wrong i_min i_max i_p99 i_cv% | same | date time
        ok = (int(t[0]) == j["size"] and int(t[1]) == j["count"] and t[2] == j["type"] and t[3] == j["redop"]
              and close(t[5], j["out_of_place"]["time"]) and close(t[6], j["out_of_place"]["alg_bw"])
              and close(t[7], j["out_of_place"]["bus_bw"]) and int(t[8]) == j["out_of_place"]["nwrong"]
              and close(t[13], j["in_place"]["time"]) and close(t[15], j["in_place"]["bus_bw"])
              and close(t[9], j["out_of_place_per_iter"]["min_us"]))
        check(ok, "JSON row %s equals the table" % t[0])
    check(doc["out_of_bounds"]["count"] == 0, "JSON out_of_bounds 0")
crow = list(csv.DictReader(open(cpath)))
check(len(crow) == len(rows), "CSV rows = table rows")
for t, c in zip(rows, crow):
    check(int(t[0]) == int(c["size"]) and close(t[5], float(c["oop_time_us"])) and
          close(t[15], float(c["ip_busbw_gbs"])), "CSV row %s equals the table" % t[0])

# 3: bad values
for args, needle in ((["-e", "99999999999999999999999"], "too large"), (["-b", "abc"], "minbytes"),
                     (["-n", "0"], "-n"), (["-d", "float7"], "datatype"), (["-z", "3"], "-z"),
                     (["-I", "1", "-n", "5", "-K", "5"], "-K 5")):
    rc, out, err = run(args)
    check(rc == 2 and needle in err, "%s fails with status 2 naming %s (rc %d: %s)" % (" ".join(args), needle, rc,
                                                                                       err.strip()[:120]))

# 4: half a launcher
for var, val in (("RANK", "1"), ("WORLD_SIZE", "4"), ("OMPI_COMM_WORLD_RANK", "0")):
    rc, out, err = run(["-b", "8", "-e", "8"], {var: val})
    check(rc != 0 and var in err and "is set but" in err, "%s alone is an error (rc %d)" % (var, rc))
rc, out, err = run(["-b", "8", "-e", "8"], {"RANK": "0", "WORLD_SIZE": "0"})
check(rc != 0 and "WORLD_SIZE=0" in err, "WORLD_SIZE=0 is an error (rc %d)" % rc)

# 5: -N 0 has no cap by default; COLL_TESTS_LAUNCH_TIMEOUT=2 caps it
t0 = time.time()
rc, out, err = run(["-np", "2", "-N", "0", "-b", "8", "-e", "8", "-n", "50"], {"COLL_TESTS_LAUNCH_TIMEOUT": "2"},
                   timeout=60)
check(rc == 124 and "timeout after 2 s" in err and time.time() - t0 < 30,
      "COLL_TESTS_LAUNCH_TIMEOUT=2 stops -N 0 (rc %d after %.1f s)" % (rc, time.time() - t0))
p = subprocess.Popen([perf, "-np", "2", "-N", "0", "-b", "8", "-e", "8", "-n", "50"], env=dict(env),
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
header = ""
deadline = time.time() + 30
while time.time() < deadline and "Wall-clock" not in header:
    line = p.stdout.readline()
    if not line:
        break
    header += line
time.sleep(3)
alive = p.poll() is None
os.killpg(p.pid, signal.SIGTERM)
try:
    p.wait(timeout=20)
except subprocess.TimeoutExpired:
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
check("Wall-clock limit of -np: none (-N 0)" in header and alive,
      "-N 0 without COLL_TESTS_LAUNCH_TIMEOUT has no limit and is still running")
rc, out, err = run(["-np", "2", "-b", "8", "-e", "8"])
check("Wall-clock limit of -np: 1800 s" in out, "finite runs keep the 1800 s default limit")

for f in (jpath, cpath):
    if os.path.exists(f):
        os.unlink(f)
os.rmdir(tmp)
print("%d check(s) failed" % len(failures) if failures else "all checks passed")
sys.exit(1 if failures else 0)
