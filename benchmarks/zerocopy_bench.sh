#!/usr/bin/env bash
# zerocopy_bench.sh - registered buffers against malloc'd ones, side by side
# (issue 17 point 4): all-reduce and reduce-scatter of -s bytes (default
# 64M) on 2 and 4 ranks, float sum, `-R 1` (collMemAlloc buffers registered
# with collCommRegister: the zero-copy path) alternated with `-R 0` (malloc:
# the usual schedules) run by run, -r rounds (default 7) each, so both modes
# see the same machine. Prints per collective, rank count and placement the
# best and the median busbw of each mode and the ratio of the medians, and
# the load average before and after (others may load the machine: a speed
# claim needs a quiet one, or at least the ratio measured this way).
#
# Each row also shows the memory limit of its cell (benchmarks/compare
# table.py's model: the least traffic per byte, at the copy rates of
# compare/membw.c for the node's data, one core and all cores), measured in
# the same run (membw before and after the rounds, the better of both), and
# each mode's median as a fraction of it.
#
# -A DIR: a reference library (DIR/libcoll.so.0, e.g. main's) for an A/B in
# the same run: every round also runs -R 1 with LD_LIBRARY_PATH=DIR, and each
# row adds that median and this build's collMemAlloc median over it.
#
# usage: benchmarks/zerocopy_bench.sh [-B build] [-r rounds] [-s size] [-n iters] [-p "2 4"] [-A refdir]
set -euo pipefail
B=build R=7 S=64M N=10 P="2 4" A=
while getopts "B:r:s:n:p:A:" o; do
  case $o in
    B) B=$OPTARG ;;
    r) R=$OPTARG ;;
    s) S=$OPTARG ;;
    n) N=$OPTARG ;;
    p) P=$OPTARG ;;
    A) A=$OPTARG ;;
    *) echo "usage: $0 [-B build] [-r rounds] [-s size] [-n iters] [-p \"2 4\"] [-A refdir]" >&2; exit 2 ;;
  esac
done
if [ -n "$A" ] && [ ! -e "$A/libcoll.so.0" ]; then echo "$0: -A $A: no libcoll.so.0 there" >&2; exit 2; fi
HERE=$(cd "$(dirname "$0")" && pwd)
bytes=$(numfmt --from=iec "$S")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O2 -std=c11 -pthread -o "$tmp/membw" "$HERE/compare/membw.c"
sets=$(python3 "$HERE/compare/limit.py" sets "$bytes" "$P")
membw() {  # when: the copy rates of the cells' working sets, into membw.txt
  { echo "# membw $1, loadavg $(cut -d' ' -f1-3 /proc/loadavg)"; "$tmp/membw" -s "$sets"; } >>"$tmp/membw.txt"
}
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
membw before
echo "# $S float sum, -n $N -w 3 -c 1, $R rounds alternating -R 0 / -R 1$([ -n "$A" ] && echo " / -R 1 with $A")"
for coll in allreduce reducescatter; do
  for np in $P; do
    for ((i = 0; i < R; i++)); do
      for mode in 0 1 $([ -n "$A" ] && echo ref); do
        reg=$([ "$mode" = 0 ] && echo 0 || echo 1)
        # the size row: out-of-place busbw is field 8, in-place field 12; #wrong must be 0
        env ${A:+$([ "$mode" = ref ] && echo "LD_LIBRARY_PATH=$A")} \
          "$B/benchmarks/${coll}_perf" -np "$np" -b "$S" -e "$S" -d float -o sum -n "$N" -w 3 -c 1 -R "$reg" 2>&1 |
          awk -v f="$tmp/$coll.$np.$mode" '$1 ~ /^[0-9]+$/ && NF >= 13 {
            if ($9 != 0 || $13 != 0) { print "wrong results: " $0 > "/dev/stderr"; exit 1 }
            print $8 >> (f ".oop"); print $12 >> (f ".ip") }'
      done
    done
  done
done
membw after
for coll in allreduce reducescatter; do
  for np in $P; do
    for pl in oop ip; do
      stats() { sort -g "$1" | awk '{v[NR] = $1} END {printf "%.2f %.2f", v[NR], (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
      read -r b0 m0 <<<"$(stats "$tmp/$coll.$np.0.$pl")"
      read -r b1 m1 <<<"$(stats "$tmp/$coll.$np.1.$pl")"
      lim=$(python3 "$HERE/compare/limit.py" bound "$tmp" "$coll" "$np" "$([ $pl = ip ] && echo 1 || echo 0)" "$bytes")
      frac() { awk -v a="$1" -v l="$lim" 'BEGIN {if (l + 0 > 0) printf "%.0f%%", 100 * a / l; else printf "-"}'; }
      printf "%-14s np %d %-12s malloc best %6s median %6s | collMemAlloc best %6s median %6s | ratio of medians %.2f | bound %6s: malloc %4s collMemAlloc %4s" \
        "$coll" "$np" "$([ $pl = oop ] && echo out-of-place || echo in-place)" "$b0" "$m0" "$b1" "$m1" \
        "$(awk -v a="$m1" -v b="$m0" 'BEGIN {print (b > 0) ? a / b : 0}')" "$lim" "$(frac "$m0")" "$(frac "$m1")"
      if [ -n "$A" ]; then
        read -r _ mr <<<"$(stats "$tmp/$coll.$np.ref.$pl")"
        printf " | ref collMemAlloc median %6s (%4s) | this/ref %.2f" "$mr" "$(frac "$mr")" \
          "$(awk -v a="$m1" -v b="$mr" 'BEGIN {print (b > 0) ? a / b : 0}')"
      fi
      echo
    done
  done
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# membw (copy GB/s of the cells' working sets, threads 1 / all; bound: the better of before and after):"
sed 's/^/#   /' "$tmp/membw.txt"
