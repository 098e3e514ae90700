#!/usr/bin/env python3
"""table.py OUT_DIR --libs "coll ompi .." --colls ".." --nps "2 4"

Reads OUT_DIR/raw/LIB.COLL.npN.runR.log (nccl-tests rows), takes the median
time over the runs of every (library, collective, ranks, size, placement),
and writes OUT_DIR/table.md (one table per collective and rank count, plus
the in-place tables), OUT_DIR/results.csv and the gnuplot inputs in
OUT_DIR/plot/. Python 3 standard library only.
"""
import argparse
import collections
import glob
import os
import re
import statistics

NAMES = {"coll": "coll", "ompi": "Open MPI", "mpich": "MPICH", "gloo": "Gloo",
         "torch": "torch/gloo"}
COLLS = ("allreduce", "allgather", "reducescatter")
COLOR = {"coll": 1, "ompi": 2, "mpich": 3, "gloo": 4, "torch": 7}


def human(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


# Memory traffic (bytes read + bytes written) every rank needs per byte of
# `size`, on one node whose ranks read each other's buffers directly (no copy
# through a staging buffer): the least any algorithm moves.
#  all-reduce: read its 1/n of all n inputs (size), write its reduced 1/n,
#    read the n-1 other reduced slices and write them into its output:
#    1 + 1/n + 2(n-1)/n = (3n-1)/n;
#  reduce-scatter (size = input): read its 1/n of all inputs, write it: (n+1)/n;
#  all-gather (size = output): read every slice and write it: 2 (in place,
#    its own slice stays: 2(n-1)/n).
def traffic(coll, n, ip):
    if coll == "allreduce":
        return (3 * n - 1) / n
    if coll == "reducescatter":
        return (n + 1) / n
    return 2 * (n - 1) / n if ip else 2.0


def limit_busbw(coll, n, ip, mem):
    """busbw (GB/s) at the memory limit: time >= size * traffic over one
    core's traffic rate (a rank is one thread) and >= n * size * traffic over
    all cores' rate; mem = {threads: copy GB/s}; traffic rate = 2 x copy."""
    if not mem:
        return None
    th = [t for t in mem if t != "llc"]
    one, allc = 2 * mem[min(th)], 2 * mem[max(th)]
    per_byte = traffic(coll, n, ip) * max(1 / one, n / allc)  # seconds per GB of size
    return factor(coll, n) / per_byte


def parse_membw(out):
    """{threads: best copy GB/s} from OUT/membw.txt, and its load lines."""
    mem, notes = {}, []
    path = os.path.join(out, "membw.txt")
    if not os.path.exists(path):
        return mem, notes
    for line in open(path):
        f = line.split()
        if line.startswith("# membw"):
            notes.append(line[2:].strip())
        elif len(f) == 5 and f[0] == "membw":
            t, g = int(f[2]), float(f[4])
            mem[t] = max(mem.get(t, 0.0), g)
        elif len(f) == 3 and f[0] == "membw" and f[1] == "llc_bytes":
            if "llc" not in mem:
                notes.append(f"last-level cache {human(int(f[2]))}")
            mem["llc"] = int(f[2])
    return mem, notes


def beyond_cache(coll, n, size, mem):
    """The limit holds once the node's data (inputs and outputs of all
    ranks) are at least 4x the last-level cache: smaller sets run partly
    from the cache, faster than memory."""
    per_rank = {"allreduce": 2 * size, "reducescatter": size + size / n}.get(coll, size + size / n)
    return n * per_rank >= 4 * mem.get("llc", 32 << 20)


def factor(coll, n):
    return 2 * (n - 1) / n if coll == "allreduce" else (n - 1) / n


def parse_logs(out):
    """{(lib, coll, np): {size: [(t_oop, wrong_oop, t_ip, wrong_ip), ...]}},
    {(lib, coll, np): notes}, commands of run 1, load averages."""
    data = collections.defaultdict(lambda: collections.defaultdict(list))
    notes = collections.defaultdict(set)
    cmds, loads = [], []
    for path in sorted(glob.glob(os.path.join(out, "raw", "*.log")), key=os.path.getmtime):
        m = re.match(r"(\w+)\.(\w+)\.np(\d+)\.run(\d+)\.log$", os.path.basename(path))
        if not m:
            continue
        lib, np_, run = m.group(1), int(m.group(3)), int(m.group(4))
        coll = m.group(2)  # "all": a peer log with one section per collective
        keys = [(lib, c, np_) for c in COLLS] if coll == "all" else [(lib, coll, np_)]
        key = keys[0]
        for line in open(path, errors="replace"):
            f = line.split()
            sec = re.match(r"# (allreduce|allgather|reducescatter) ", line) or \
                re.match(r"# Collective test starting: (\w+)_perf", line)
            if sec:
                key = (lib, sec.group(1), np_)
            elif line.startswith("# exit") and f[2] in ("124", "137"):
                for k in keys:  # a timeout cuts this and the later sections
                    notes[k].add("timeout")
            elif line.startswith("+ ") and run == 1:
                cmds.append(line[2:].strip())
            elif line.startswith("# loadavg"):
                loads.append(float(f[3]))
            elif line.startswith("# not supported"):
                notes[key].add("not supported")
            elif len(f) == 13 and f[2] == "float" and not line.startswith("#"):
                size = int(f[0])
                if size == 0:
                    continue  # 0 elements per rank: nothing moved
                wr = [None if w == "N/A" else int(float(w)) for w in (f[8], f[12])]
                data[key][size].append((float(f[5]), wr[0], float(f[9]), wr[1]))
    return data, notes, cmds, loads


def summarize(coll, np_, runs):
    """Median times (us) per placement, busbw, worst #wrong, run count."""
    res = {"runs": len(runs)}
    for ip, (ti, wi) in enumerate(((0, 1), (2, 3))):
        t = statistics.median(r[ti] for r in runs)
        wrongs = [r[wi] for r in runs if r[wi] is not None]
        res[ip] = {"t": t, "wrong": max(wrongs) if wrongs else None}
    return res


def bus(size, t_us, coll, np_):
    return size / (t_us * 1e-6) / 1e9 * factor(coll, np_) if t_us > 0 else 0.0


def fmt_us(t):
    return f"{t:.3g}" if t < 100 else f"{t:.0f}"


def fmt_bw(v):
    return f"{v:.2f}" if v >= 0.1 else f"{v:.3g}"


def table(coll, np_, ip, libs, stats, notes, flags, runs, mem):
    """One markdown table; appends (size, ratio) findings to flags."""
    lim = limit_busbw(coll, np_, ip, mem)
    peers = [l for l in libs if l != "coll"]
    sizes = sorted({s for l in libs for s in stats.get((l, coll, np_), {})})
    what = "in-place" if ip else "out-of-place"
    lines = [f"### {coll}, {np_} ranks, {what}", "",
             "busbw GB/s (time us); median of the runs. coll/best = best peer time / coll time."
             + (f" coll/limit = coll's busbw / {lim:.2f} GB/s, the memory limit (where the data are 4x the cache)." if lim else ""),
             "",
             "| size | " + " | ".join(NAMES[l] for l in libs) + " | best peer | coll/best |"
             + (" coll/limit |" if lim else ""),
             "|---:|" + "---:|" * len(libs) + "---|---:|" + ("---:|" if lim else "")]
    for s in sizes:
        cells, best, best_lib = [], None, None
        for l in libs:
            st = stats.get((l, coll, np_), {}).get(s)
            if st is None:
                n = notes.get((l, coll, np_), set())
                cells.append("n/s" if "not supported" in n else "–")
                continue
            c = st[ip]
            cell = f"{fmt_bw(bus(s, c['t'], coll, np_))} ({fmt_us(c['t'])})"
            if st["runs"] < runs:
                cell += f" [{st['runs']} run{'s' if st['runs'] > 1 else ''}]"
            if c["wrong"]:
                cell += f" ✗{c['wrong']} wrong"
            elif l != "coll" and (best is None or c["t"] < best):
                best, best_lib = c["t"], l
            cells.append(cell)
        me = stats.get(("coll", coll, np_), {}).get(s)
        ratio = ""
        if best is not None and me is not None and me[ip]["t"] > 0:
            r = best / me[ip]["t"]
            ratio = f"{r:.3g}"
            if r < 1.5:
                ratio = f"**{ratio}**"
                flags.append((coll, np_, what, s, r, NAMES[best_lib]))
        frac = ""
        if lim and me is not None and beyond_cache(coll, np_, s, mem) and me[ip]["t"] > 0:
            frac = f"{bus(s, me[ip]['t'], coll, np_) / lim:.0%}"
        lines.append(f"| {human(s)} | " + " | ".join(cells) +
                     f" | {NAMES[best_lib] if best_lib else '–'} | {ratio} |" + (f" {frac} |" if lim else ""))
    return lines + [""]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--libs", default="coll ompi mpich gloo torch")
    ap.add_argument("--colls", default="allreduce allgather reducescatter")
    ap.add_argument("--nps", default="2 4")
    ap.add_argument("--smoke", action="store_true",
                    help="the run was run.sh --smoke: say that its numbers and findings mean nothing")
    a = ap.parse_args()
    libs = a.libs.split()
    libs = (["coll"] if "coll" in libs else []) + [l for l in libs if l != "coll"]
    colls, nps = a.colls.split(), [int(x) for x in a.nps.split()]
    data, notes, cmds, loads = parse_logs(a.out)
    mem, memnotes = parse_membw(a.out)
    stats = {k: {s: summarize(k[1], k[2], runs) for s, runs in v.items()}
             for k, v in data.items()}

    runs = max((st["runs"] for v in stats.values() for st in v.values()), default=0)
    flags, body = [], []
    for ip in (0, 1):
        if ip:
            body += ["## In-place tables", "",
                     "In place: MPI_IN_PLACE; Gloo's classic algorithms and torch all_reduce "
                     "are natively in place; Gloo gloo::allgather / torch all_gather pass the "
                     "output only / the rank's own output view as input.", ""]
        for coll in colls:
            for np_ in nps:
                body += table(coll, np_, ip, libs, stats, notes, flags, runs, mem)

    csv = ["lib,coll,np,size,runs,time_oop_us,busbw_oop,wrong_oop,time_ip_us,busbw_ip,wrong_ip"]
    os.makedirs(os.path.join(a.out, "plot"), exist_ok=True)
    for coll in colls:
        plots = []
        for np_ in nps:
            for l in libs:
                st = stats.get((l, coll, np_))
                if not st:
                    continue
                path = os.path.join(a.out, "plot", f"{coll}.np{np_}.{l}.dat")
                with open(path, "w") as f:
                    for s in sorted(st):
                        b = [bus(s, st[s][ip]["t"], coll, np_) for ip in (0, 1)]
                        f.write(f"{s} {b[0]:.6g} {b[1]:.6g}\n")
                        csv.append(f"{l},{coll},{np_},{s},{st[s]['runs']},{st[s][0]['t']:.6g},"
                                   f"{b[0]:.6g},{st[s][0]['wrong']},{st[s][1]['t']:.6g},"
                                   f"{b[1]:.6g},{st[s][1]['wrong']}")
                plots.append(f"'{path}' using 1:2 with linespoints lc {COLOR[l]} "
                             f"lw {3 if l == 'coll' else 1} "
                             f"dt {1 if np_ == min(nps) else 2} pt {1 + nps.index(np_)} "
                             f"title '{NAMES[l]} np={np_}'")
        if plots:
            with open(os.path.join(a.out, "plot", f"{coll}.plot"), "w") as f:
                f.write("plot " + ", \\\n     ".join(plots) + "\n")
    with open(os.path.join(a.out, "results.csv"), "w") as f:
        f.write("\n".join(csv) + "\n")

    smoke = ("**Smoke run (run.sh --smoke): 1 run, 2 sizes, few iterations, on whatever load the machine had. "
             "It checks that every library builds, runs and gets correct results; its times, ratios and "
             "findings are noise, not measurements. Compare without --smoke.**")
    head = ["# coll vs. peers: busbw per size", ""] + ([smoke, ""] if a.smoke else [])
    vfile = os.path.join(a.out, "versions.txt")
    if os.path.exists(vfile):
        head += ["```"] + open(vfile).read().strip().splitlines() + ["```", ""]
    head += [f"Runs per cell: {runs} (median; results checked in the runs that say so in "
             "their command, -c 1). float32, sum. time = max over ranks of "
             "(total / iterations). Load average seen during the runs: "
             + (f"{min(loads):.1f} .. {max(loads):.1f}" if loads else "n/a") + ".",
             "Out-of-place: Gloo's classic algorithms and torch all_reduce are in-place only; "
             "their out-of-place time includes the memcpy a user needs for out-of-place "
             "semantics. n/s: not supported (torch 1.13's gloo backend has no reduce_scatter). "
             "✗: wrong results (never counted as best peer). [k runs]: a cell with fewer runs "
             "than the others (a timeout).", ""]
    if mem:
        head += ["Memory limit, measured in this run (benchmarks/compare/membw.c: copies of 64 MiB per "
                 "thread, memcpy or a load/store loop, the faster, best of 5, before and after the "
                 "libraries): "
                 + ", ".join(f"{t} thread{'s' if t > 1 else ''} {g:.2f} GB/s copied"
                            for t, g in sorted((t, g) for t, g in mem.items() if t != "llc"))
                 + " (" + "; ".join(memnotes) + "). A copied byte is one read and one write. The limit of a "
                 "collective is the least memory traffic (reads + writes) any algorithm needs when the ranks "
                 "of a node read each other's buffers directly: per byte of size and rank, all-reduce "
                 "(3n-1)/n, reduce-scatter (n+1)/n, all-gather 2 (in place 2(n-1)/n); its time is at least "
                 "that traffic over one core's rate and n times it over all cores' rate. It is shown where the "
                 "node's data (all ranks' inputs and outputs) are at least 4x the last-level cache. Algorithms "
                 "that copy through a staging buffer move more than this limit counts.", ""]
    odd = [f"- {NAMES[k[0]]} {k[1]} np={k[2]}: {', '.join(sorted(v))}"
           for k, v in sorted(notes.items())]
    wrong = [f"- {NAMES[l]} {c} np={n} {human(s)} {'in-place' if ip else 'out-of-place'}: "
             f"{st[ip]['wrong']} wrong"
             for (l, c, n), v in sorted(stats.items()) for s, st in sorted(v.items())
             for ip in (0, 1) if st[ip]["wrong"]]
    groups = collections.OrderedDict()
    for c, n, w, s, r, b in flags:
        groups.setdefault((c, n, w), []).append(f"{human(s)} {r:.3g} ({b})")
    slow = [f"- {c} np={n} {w}: " + ", ".join(v) for (c, n, w), v in groups.items()]
    tail = ["## Findings" + (" (smoke run: not meaningful)" if a.smoke else ""), ""]
    if a.smoke:
        tail += ["A smoke run's times are noise (1 run, few iterations): the list below is not a finding. "
                 "Only the wrong results and unfinished runs further down mean something.", ""]
    tail += ["Where coll is below 1.5x the best peer (bold in the tables): "
             "size, coll/best, best peer.", ""]
    tail += slow or ["- none"]
    tail += ["", "Wrong results:", ""] + (wrong or ["- none"])
    tail += ["", "Runs that did not finish / unsupported:", ""] + (odd or ["- none"])
    tail += ["", "## Commands (run 1)", "", "```"] + cmds + ["```", ""]
    text = "\n".join(head + body + tail)
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(text)
    print(text)
    empty = [l for l in libs if not any(k[0] == l for k in stats)]
    if empty:
        print("no rows at all from: " + " ".join(empty))
        return 3
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
