#!/bin/bash
# interleaved A/B: main's libcoll (/tmp/ag-main) vs this branch, same binary
cd "$(git rev-parse --show-toplevel)"
out=${1:-/tmp/ag-ab/raw.txt}; : > $out
for round in 1 2 3 4 5; do
  for np in 2 4; do
    for lib in main new; do
      echo "## round $round np $np lib $lib load $(cut -d' ' -f1-3 /proc/loadavg)" >> $out
      if [ $lib = main ]; then L=/tmp/ag-main; else L=; fi
      LD_LIBRARY_PATH=$L build/benchmarks/allgather_perf -np $np -b 256K -e 64M -f 4 -w 3 -n 10 2>&1 | grep -E "^ +[0-9]" >> $out
    done
  done
done
echo "## end load $(cut -d' ' -f1-3 /proc/loadavg)" >> $out
