#!/usr/bin/env python3
"""zc_limit.py ZEROCOPY_TXT MEMBW_TXT_DIR: each zerocopy_bench.sh median
(collMemAlloc) as a fraction of table.py's memory limit at that size, with
the rates of DIR/membw.txt (run.sh's, measured in the same session)."""
import os, re, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../.."))
import table  # noqa: E402
mem, _ = table.parse_membw(sys.argv[2])
size = 64 << 20
for line in open(sys.argv[1]):
    m = re.match(r"(\w+)\s+np (\d+) (\S+)\s+malloc best\s+\S+ median\s+(\S+) \| collMemAlloc best\s+\S+ median\s+(\S+)", line)
    if m:
        coll, n, ip = m.group(1), int(m.group(2)), m.group(3) == "in-place"
        lim = table.limit_busbw(coll, n, ip, size, mem)
        print(f"{coll:14s} np {n} {m.group(3):12s} limit {lim:6.2f} GB/s | malloc {float(m.group(4)):6.2f} "
              f"({float(m.group(4)) / lim:4.0%}) | collMemAlloc {float(m.group(5)):6.2f} ({float(m.group(5)) / lim:4.0%})")
