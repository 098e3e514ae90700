#!/usr/bin/env python3
"""table.py RAW_DIR - the Markdown table of benchmarks/rdma/run.sh: the best
of the rounds (lowest time, highest bandwidth: the host is shared and a TCG
guest's vCPU gets what the others leave, so the best round is the most
repeatable figure; the medians follow in parentheses) of ib_write_bw, coll's
sendrecv_perf and allreduce_perf over COLL_NET=ib, Open MPI over UCX and
Gloo's ibverbs transport (time per call, out-of-place; rows whose check
failed are reported, not used)."""
import glob
import os
import re
import statistics
import sys

raw = sys.argv[1]
two = len(sys.argv) > 2 and sys.argv[2] == "--two"
where = ("two guests joined by a virtual wire, one rank each" if two
         else "one guest, both ranks on one rxe device")


def rounds(name):
    return sorted(glob.glob(os.path.join(raw, name + ".*")))


def nccl_rows(path):
    """{size: (time_us, wrong)} of an nccl-tests style table (out-of-place)."""
    rows = {}
    for line in open(path, errors="replace"):
        f = line.split()
        if len(f) >= 9 and f[0].isdigit() and f[1].isdigit():
            try:
                t = float(f[5])
            except ValueError:
                continue
            wrong = f[8]
            rows[int(f[0])] = (t, 0 if wrong in ("0", "N/A") else 1)
    return rows


def med(vals):
    return statistics.median(vals) if vals else None


def best(vals, low=True):
    return (min(vals) if low else max(vals)) if vals else None


def collect(name):
    per = {}
    bad = 0
    for p in rounds(name):
        for s, (t, w) in nccl_rows(p).items():
            if w:
                bad += 1
                continue
            per.setdefault(s, []).append(t)
    return {s: (best(v), med(v)) for s, v in per.items()}, bad, len(rounds(name))


def link():
    uni, bi = {}, {}
    for p in rounds("ib_write_bw"):
        for line in open(p):
            m = re.match(r"(uni|bidi)\s+(\d+)\s+\d+\s+[\d.]+\s+([\d.]+)", line)
            if m and float(m.group(3)) > 0:  # perftest prints 0 for a run that failed
                d = uni if m.group(1) == "uni" else bi
                d.setdefault(int(m.group(2)), []).append(float(m.group(3)) * 125.0)  # Gb/s -> MB/s
    return ({s: (best(v, False), med(v)) for s, v in uni.items()},
            {s: (best(v, False), med(v)) for s, v in bi.items()})


def size_str(s):
    for u, n in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if s >= n and s % n == 0:
            return "%d %s" % (s // n, u)
    return "%d B" % s


def f(v, fmt="%.1f"):
    return fmt % v if v is not None else "-"


def fp(pair, fmt="%.1f"):
    """best (median)"""
    if not pair or pair[0] is None:
        return "-"
    return (fmt + " (" + fmt + ")") % pair


uni, bi = link()
sr, srbad, srn = collect("coll_sendrecv")
sra, srabad, sran = collect("coll_A_sendrecv")  # run.sh -A: a second coll build
print("### Point to point over rxe (2 ranks, %s; best of %d rounds, median in parentheses)\n" % (where, srn))
print("MB/s = 10^6 bytes/s. `ib_write_bw -b` and coll's `sendrecv_perf` both move data both ways at once")
print("(rank r sends to r+1 and receives from r-1); the percentage compares their totals.\n")
acol = " coll-A sendrecv (both ways) | coll-A / ib_write_bw -b |" if sran else ""
print("| size | ib_write_bw | ib_write_bw -b (both ways) | coll sendrecv (both ways) | coll / ib_write_bw -b |" + acol)
print("|---:|---:|---:|---:|---:|" + ("---:|---:|" if sran else ""))


def sr_cells(tab, s):
    c = (2 * s / tab[s][0], 2 * s / tab[s][1]) if s in tab else None  # bytes per us = MB/s, two directions
    pct = 100.0 * c[0] / bi[s][0] if c and bi.get(s) else None
    return " %s | %s |" % (fp(c), f(pct, "%.0f%%"))


for s in sorted(set(uni) | set(bi) | set(sr) | set(sra)):
    print("| %s | %s | %s |" % (size_str(s), fp(uni.get(s)), fp(bi.get(s))) + sr_cells(sr, s) +
          (sr_cells(sra, s) if sran else ""))
for label, n in (("sendrecv", srbad), ("coll-A sendrecv", srabad)):
    if n:
        print("\n%d %s rows failed their check and were left out." % (n, label))

# coll twice: on a stream (nccl-tests' default: the call is handed to the
# stream's thread, the benchmark synchronizes) and blocking on the NULL stream
# (-y 1: the call runs in the caller's thread), which is what the peers'
# blocking calls measure
peers = [("coll (ib, stream)", "coll_allreduce"), ("coll (ib, blocking)", "coll_allreduce_blocking"),
         ("coll-A (ib, stream)", "coll_A_allreduce"), ("coll-A (ib, blocking)", "coll_A_allreduce_blocking"),
         ("Open MPI 4.1 + UCX rc", "ompi_ucx_allreduce"),
         ("Gloo ibverbs ring", "gloo_ib_ring"), ("Gloo ibverbs halving-doubling", "gloo_ib_hd")]
NCOLL = 4
data = [(label,) + collect(name) for label, name in peers]
data = [d for i, d in enumerate(data) if i >= NCOLL or d[3] > 0 or i == 0]
ncoll = sum(1 for d in data if d[0].startswith("coll"))
print("\n### All-reduce, float32 sum, 2 ranks, %s (time per call in us, out-of-place; best of the rounds, median in parentheses)\n" % where)
print("| size | " + " | ".join(d[0] for d in data) + " | " +
      " | ".join("%s / best peer" % re.sub(r" \(ib, (\w+)\)", r" \1", d[0])
                 for d in data[:ncoll]) + " |")
print("|---:|" + "---:|" * (len(data) + ncoll))
sizes = sorted(set().union(*[set(d[1]) for d in data]))
for s in sizes:
    ts = [d[1].get(s) for d in data]
    others = [t[0] for t in ts[ncoll:] if t]
    ratios = [ts[i][0] / min(others) if ts[i] and others else None for i in range(ncoll)]
    print("| %s | " % size_str(s) + " | ".join(fp(t, "%.0f") for t in ts) + " | " +
          " | ".join(f(r, "%.2f") for r in ratios) + " |")
bad = [(d[0], d[2]) for d in data if d[2]]
for label, n in bad:
    print("\n%s: %d rows failed their check and were left out." % (label, n))
missing = [d[0] for d in data if d[3] == 0]
if missing:
    print("\nNot run: " + ", ".join(missing) + (" (nothing in the guests can start a remote rank)" if two else ""))
