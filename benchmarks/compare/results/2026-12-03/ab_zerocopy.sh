#!/usr/bin/env bash
# ab_zerocopy.sh OLD_BUILD NEW_BUILD [rounds]: benchmarks/zerocopy_bench.sh
# (64 MiB, -n 10, one round each) run on OLD and NEW alternately, so both
# see the same machine; prints every line tagged old/new, then per row the
# median over rounds of each build's collMemAlloc median busbw. OLD_BUILD
# may hold only benchmarks/*_perf and libcoll.so* (run with LD_LIBRARY_PATH).
set -euo pipefail
OLD=$1 NEW=$2 R=${3:-5}
HERE=$(cd "$(dirname "$0")/../../../.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((i = 1; i <= R; i++)); do
  for b in old new; do
    dir=$([ $b = old ] && echo "$OLD" || echo "$NEW")
    LD_LIBRARY_PATH=$dir "$HERE/benchmarks/zerocopy_bench.sh" -B "$dir" -r 1 | grep -v '^#' | sed "s/^/$b $i /" | tee -a "$tmp/all"
  done
done
echo "# medians over $R rounds of the per-round busbw (GB/s), malloc | collMemAlloc"
awk '{k = $3 " np " $5 " " $6; m[$1 " " k] = m[$1 " " k] " " $11; z[$1 " " k] = z[$1 " " k] " " $17; keys[k] = 1}
  function med(s,  a, n, i, j, t) { n = split(s, a, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  END { for (k in keys) printf "%-34s old malloc %6.2f zc %6.2f (zc/malloc %.2f) | new malloc %6.2f zc %6.2f (zc/malloc %.2f) | new zc / old zc %.2f\n", k,
    med(m["old " k]), med(z["old " k]), med(z["old " k]) / med(m["old " k]), med(m["new " k]), med(z["new " k]), med(z["new " k]) / med(m["new " k]), med(z["new " k]) / med(z["old " k]) }' "$tmp/all" | sort
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
