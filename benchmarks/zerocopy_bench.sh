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
# usage: benchmarks/zerocopy_bench.sh [-B build] [-r rounds] [-s size] [-n iters] [-p "2 4"]
set -euo pipefail
B=build R=7 S=64M N=10 P="2 4"
while getopts "B:r:s:n:p:" o; do
  case $o in
    B) B=$OPTARG ;;
    r) R=$OPTARG ;;
    s) S=$OPTARG ;;
    n) N=$OPTARG ;;
    p) P=$OPTARG ;;
    *) echo "usage: $0 [-B build] [-r rounds] [-s size] [-n iters] [-p \"2 4\"]" >&2; exit 2 ;;
  esac
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $S float sum, -n $N -w 3 -c 1, $R rounds alternating -R 0 / -R 1"
for coll in allreduce reducescatter; do
  for np in $P; do
    for ((i = 0; i < R; i++)); do
      for reg in 0 1; do
        # the size row: out-of-place busbw is field 8, in-place field 12; #wrong must be 0
        "$B/benchmarks/${coll}_perf" -np "$np" -b "$S" -e "$S" -d float -o sum -n "$N" -w 3 -c 1 -R "$reg" 2>&1 |
          awk -v f="$tmp/$coll.$np.$reg" '$1 ~ /^[0-9]+$/ && NF >= 13 {
            if ($9 != 0 || $13 != 0) { print "wrong results: " $0 > "/dev/stderr"; exit 1 }
            print $8 >> (f ".oop"); print $12 >> (f ".ip") }'
      done
    done
    for pl in oop ip; do
      stats() { sort -g "$1" | awk '{v[NR] = $1} END {printf "%.2f %.2f", v[NR], (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
      read -r b0 m0 <<<"$(stats "$tmp/$coll.$np.0.$pl")"
      read -r b1 m1 <<<"$(stats "$tmp/$coll.$np.1.$pl")"
      printf "%-14s np %d %-12s malloc best %6s median %6s | collMemAlloc best %6s median %6s | ratio of medians %.2f\n" \
        "$coll" "$np" "$([ $pl = oop ] && echo out-of-place || echo in-place)" "$b0" "$m0" "$b1" "$m1" \
        "$(awk -v a="$m1" -v b="$m0" 'BEGIN {print (b > 0) ? a / b : 0}')"
    done
  done
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
