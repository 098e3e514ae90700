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
# `size`, on one node whose ranks read and write each other's buffers
# directly: the least any algorithm moves. Every input byte is read once
# (into a cache or register, where it is reduced or passed on) and every
# output byte that changes is written once (streaming stores: no read for
# ownership); a value read once can be stored into several outputs. Per rank,
# the node's total over n:
#  all-reduce: the n inputs (n x size) read, the n outputs written: 2, in
#    place too (every byte of the buffer changes);
#  reduce-scatter (size = input): the n inputs read, n results of size/n
#    written: (n+1)/n, in place too;
#  all-gather (size = output): the n slices of size/n read, the n outputs
#    written: (n+1)/n; in place the rank's own slice is already there: the
#    slices read, n x (n-1)/n x size written: 1.
def traffic(coll, n, ip):
    if coll == "allreduce":
        return 2.0
    if coll == "reducescatter" or not ip:
        return (n + 1) / n
    return 1.0


def node_data(coll, n, size, ip):
    """Bytes of all ranks' buffers (inputs and outputs; one buffer in place)."""
    if ip:
        return n * size
    return n * (2 * size if coll == "allreduce" else size + size // n)


def rate_at(mem, threads, data):
    """The copy rate (GB/s) of `threads` threads for `data` bytes: the
    fastest measured at the largest working set not above `data` or at any
    larger set (a smaller set never moves slower than a larger one; membw's
    figures need not fall with the set, since the caches' share varies), or
    None when every measured set is larger."""
    sets = [w for (w, t) in mem if t == threads and w <= data]
    if not sets:
        return None
    return max(g for (w, t), g in mem.items() if t == threads and w >= max(sets))


def limit_busbw(coll, n, ip, size, mem):
    """busbw (GB/s) at the memory limit, or None where membw measured no
    set this small: time >= size x traffic over one core's traffic rate (a
    rank is one thread) and >= n x size x traffic over all cores' rate, both
    measured at the node's data size; mem = {(set_bytes, threads): copy
    GB/s}; traffic rate = 2 x copy (a copied byte: one read, one write)."""
    if not mem:
        return None
    th = {t for (_, t) in mem}
    data = node_data(coll, n, size, ip)
    one, allc = rate_at(mem, min(th), data), rate_at(mem, max(th), data)
    if one is None or allc is None:
        return None
    per_byte = traffic(coll, n, ip) * max(1 / (2 * one), n / (2 * allc))  # seconds per GB of size
    return factor(coll, n) / per_byte


def parse_membw(out):
    """{(set_bytes, threads): best copy GB/s} from OUT/membw.txt, and its
    load lines."""
    mem, notes = {}, []
    path = os.path.join(out, "membw.txt")
    if not os.path.exists(path):
        return mem, notes
    for line in open(path):
        f = line.split()
        if line.startswith("# membw"):
            notes.append(line[2:].strip())
        elif len(f) == 7 and f[0] == "membw" and f[1] == "set_bytes":
            k = (int(f[2]), int(f[4]))
            mem[k] = max(mem.get(k, 0.0), float(f[6]))
    return mem, notes


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
    lim = bool(mem)
    peers = [l for l in libs if l != "coll"]
    sizes = sorted({s for l in libs for s in stats.get((l, coll, np_), {})})
    what = "in-place" if ip else "out-of-place"
    lines = [f"### {coll}, {np_} ranks, {what}", "",
             "busbw GB/s (time us); median of the runs. coll/best = best peer time / coll time."
             + (" coll/limit = coll's busbw / the busbw at the memory limit of this size (GB/s)." if lim else ""),
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
        top = limit_busbw(coll, np_, ip, s, mem) if lim else None
        if top and me is not None and me[ip]["t"] > 0:
            frac = f"{bus(s, me[ip]['t'], coll, np_) / top:.0%} ({top:.2f})"
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
        rates = collections.defaultdict(dict)
        for (w, t), g in mem.items():
            rates[w][t] = g
        head += ["Memory limit, measured in this run (benchmarks/compare/membw.c, before and after the "
                 "libraries, best of both; per working set = all source and destination bytes, one thread "
                 "and all threads, memcpy, a load/store loop, a streaming-store copy or an in-place update, "
                 "the fastest, best of 5): copy GB/s "
                 + ", ".join(f"{human(w)}: " + " / ".join(f"{rates[w][t]:.2f}" for t in sorted(rates[w]))
                             for w in sorted(rates))
                 + " (threads " + " / ".join(str(t) for t in sorted({t for (_, t) in mem})) + "; "
                 + "; ".join(memnotes) + "). A copied byte is one read and one write. The limit of a "
                 "collective is the least memory traffic (reads + writes) any algorithm needs when the ranks "
                 "of a node read and write each other's buffers directly: per byte of size and rank, "
                 "all-reduce 2, reduce-scatter (n+1)/n, all-gather (n+1)/n (in place 1); its time is at least "
                 "that traffic over one core's rate and n times it over all cores' rate, each rate the fastest "
                 "measured at the largest working set not above the node's data (all ranks' buffers) or at a "
                 "larger one (a smaller set never moves slower). Rates include "
                 "whatever the caches give at that set, so coll/limit above 100% means coll kept more of its "
                 "data in a cache than membw did: the rate is measured, not a proof. Algorithms that copy "
                 "through a staging buffer move more than this limit counts.", ""]
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
