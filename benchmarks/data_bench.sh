#!/usr/bin/env bash
# data_bench.sh - side-by-side measurements for the data path (issue 14):
#
#   sig   the cost of call signatures at 8 B: all-reduce of 2 floats on 2
#         ranks, shared memory with the mailbox, without it, and TCP; this
#         build against another one (-O, e.g. a build of the commit before),
#         interleaved run by run so both see the same machine.
#   half  float16 all-reduce and reduce-scatter busbw per size on 2 and 4
#         ranks, COLL_HALF_ACCUM=float (the default: float32 partial sums)
#         against COLL_HALF_ACCUM=native (per-step rounding), interleaved.
#
# Every configuration runs -R times (default 5) and the median is printed
# (sig: -N iterations per run, default 20000; a loaded machine needs fewer);
# the load average is printed before and after (the machine may be shared:
# speed claims need a quiet one).
#
# usage: benchmarks/data_bench.sh [-B build] [-O other_build] [-R rounds] [-N iterations] [sig|half|all]
set -euo pipefail
B=build O="" R=5 N=20000
while getopts "B:O:R:N:" o; do
  case $o in
    B) B=$OPTARG ;;
    O) O=$OPTARG ;;
    R) R=$OPTARG ;;
    N) N=$OPTARG ;;
    *) echo "usage: $0 [-B build] [-O other_build] [-R rounds] [-N iterations] [sig|half|all]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
what=${1:-all}
export COLL_SOCKET_IFNAME=lo

median() { sort -g | awk '{v[NR]=$1} END {if (NR) print (NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2); else print "-"}'; }
minimum() { sort -g | head -1; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

# out-of-place time (us) of the single size an allreduce_perf run printed
time8() { awk '$1 ~ /^[0-9]+$/ && NF >= 13 {print $6; exit}'; }

sig() {
  local builds=("$B") tmp
  [ -n "$O" ] && builds=("$O" "$B")
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  local envs=("shm+mailbox|" "shm|COLL_MAILBOX_BYTES=0" "tcp|COLL_SHM_DISABLE=1")
  for ((r = 0; r < R; r++)); do
    for e in "${envs[@]}"; do
      for b in "${builds[@]}"; do
        local name=${e%%|*} env=${e#*|} key
        key=$(echo "$b" | tr '/' '_')
        env $env "$b/benchmarks/allreduce_perf" -np 2 -b 8 -e 8 -n "$N" -w $((N / 10)) -c 0 | time8 >> "$tmp/$key.$name"
      done
    done
  done
  echo "# 8 B all-reduce on 2 ranks, out-of-place time in us, median (min) of $R (load before/after: $LOAD0 / $(load))"
  printf "%-14s" "path"
  for b in "${builds[@]}"; do printf " %22s" "$b"; done
  echo
  for e in "${envs[@]}"; do
    local name=${e%%|*} f
    printf "%-14s" "$name"
    for b in "${builds[@]}"; do
      f="$tmp/$(echo "$b" | tr '/' '_').$name"
      printf " %22s" "$(median < "$f") ($(minimum < "$f"))"
    done
    echo
  done
}

# busbw per size of one run: "size busbw" lines (out-of-place)
busbw() { awk '$1 ~ /^[0-9]+$/ && NF >= 13 {print $1, $8}'; }

half() {
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  for np in 2 4; do
    for coll in allreduce reducescatter; do
      for ((r = 0; r < R; r++)); do
        for mode in float native; do
          COLL_HALF_ACCUM=$mode "$B/benchmarks/${coll}_perf" -np $np -b 1K -e 64M -f 4 -d half -n 20 -w 3 -c 0 |
            busbw > "$tmp/$coll.$np.$mode.$r"
        done
      done
      echo "# float16 $coll on $np ranks, busbw GB/s, median of $R (load before/after: $LOAD0 / $(load))"
      printf "%12s %10s %10s %8s\n" "bytes" "float" "native" "ratio"
      for size in $(awk '{print $1}' "$tmp/$coll.$np.float.0"); do
        local f n
        f=$(cat "$tmp/$coll.$np.float."* | awk -v s="$size" '$1 == s {print $2}' | median)
        n=$(cat "$tmp/$coll.$np.native."* | awk -v s="$size" '$1 == s {print $2}' | median)
        printf "%12s %10s %10s %8s\n" "$size" "$f" "$n" "$(awk -v a="$f" -v b="$n" 'BEGIN {printf (b > 0 ? "%.2f" : "-"), a / b}')"
      done
    done
  done
}

LOAD0=$(load)
case $what in
  sig) sig ;;
  half) half ;;
  all) sig; half ;;
  *) echo "unknown: $what" >&2; exit 2 ;;
esac
