#!/usr/bin/env python3
"""limit.py - table.py's memory limit for scripts outside run.sh
(benchmarks/zerocopy_bench.sh), from the same model and code.

  limit.py sets SIZE "NPS"       the working sets (MiB, comma-separated, for
                                 membw -s) of all-reduce and reduce-scatter
                                 of SIZE bytes on each rank count of NPS, out
                                 of place and in place: the node's data
  limit.py bound DIR COLL N IP SIZE
                                 the busbw (GB/s) at the limit of one cell
                                 (IP 1: in place) with DIR/membw.txt's rates;
                                 "-" where membw measured no set that small
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import table  # noqa: E402

COLLS = ("allreduce", "reducescatter")


def main(argv):
    if len(argv) == 3 and argv[0] == "sets":
        size, nps = int(argv[1]), [int(n) for n in argv[2].split()]
        sets = {max(1, table.node_data(c, n, size, ip) >> 20) for c in COLLS for n in nps for ip in (0, 1)}
        print(",".join(str(s) for s in sorted(sets)))
        return 0
    if len(argv) == 6 and argv[0] == "bound":
        mem, _ = table.parse_membw(argv[1])
        lim = table.limit_busbw(argv[2], int(argv[3]), argv[4] == "1", int(argv[5]), mem)
        print("-" if lim is None else f"{lim:.2f}")
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
