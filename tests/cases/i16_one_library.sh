#!/usr/bin/env bash
# cases.i16_one_library (issue 16, "Build"): one libcoll.so for everyone.
#  - it names no CUDA library among its dependencies and has no undefined
#    CUDA symbol: it loads on a machine without GPU, driver or runtime;
#  - built with CUDA, it embeds every kernel devexec.c looks up by name
#    (collDevCopy, collDevReduce_<op>_<type>, collDevAvg_<type>) for each
#    SASS architecture of the build, so the names of the C side and of
#    kernels.cu cannot drift apart unnoticed on a machine without a GPU;
#  - a host-only job never touches the driver: 2 processes run all-reduce
#    with -c 1 while COLL_CUDA_LIBRARY names the toolkit's stub driver and
#    COLL_DEBUG=INFO logs everything; no line mentions CUDA.
# Usage (ctest): i16_one_library.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=$1
lib="$build/libcoll.so"
fail=0
bad() { echo "FAILED: $*"; fail=1; }

[ -e "$lib" ] || { echo "FAILED: no $lib"; exit 1; }
deps=$(readelf -d "$lib" | awk '/NEEDED/ {print $5}')
echo "libcoll.so needs: $(echo "$deps" | tr "\n" " ")"
echo "$deps" | grep -qiE 'cuda|cudart|nvidia|nvrtc' && bad "libcoll.so depends on a CUDA library"
undef=$(nm -D --undefined-only "$lib" | awk '{print $2}' | grep -E '^cu[A-Z]|^cuda' || true)
[ -z "$undef" ] || bad "undefined CUDA symbols: $undef"

if [ "${COLL_TEST_HAVE_CUDA:-OFF}" = ON ]; then
  [ "$(nm "$lib" | grep -c ' collDevFatbin$')" = 1 ] || bad "no embedded kernels (collDevFatbin) in a CUDA build"
  narch=$(strings "$lib" | grep -c '^\.text\.collDevCopy$')
  [ "$narch" -ge 1 ] || bad "collDevCopy not in the embedded fatbin"
  missing=0
  for t in i8 u8 i32 u32 i64 u64 f16 f32 f64 bf16; do
    for k in collDevReduce_sum_$t collDevReduce_prod_$t collDevReduce_max_$t collDevReduce_min_$t collDevAvg_$t; do
      n=$(strings "$lib" | grep -c "^\.text\.$k\$")
      [ "$n" = "$narch" ] || { echo "kernel $k: $n of $narch architectures"; missing=$((missing + 1)); }
    done
  done
  [ "$missing" = 0 ] || bad "$missing kernels missing from the embedded fatbin"
  echo "embedded kernels: all 51 names, each in as many cubin string tables as collDevCopy ($narch)"
  stub=${COLL_TEST_CUDA_STUB:-}
  [ -n "$stub" ] && [ -e "$stub" ] || bad "no stub driver (COLL_TEST_CUDA_STUB=$stub)"
else
  echo "built without CUDA: the kernel checks do not apply"
  stub=/nonexistent/libcuda.so.1
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
COLL_CUDA_LIBRARY=$stub COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=ALL timeout 120 \
  "$build/benchmarks/allreduce_perf" -np 2 -b 8 -e 1M -f 32 -c 1 >"$log" 2>&1
rc=$?
[ "$rc" = 0 ] || { tail -20 "$log"; bad "host all-reduce exited $rc"; }
grep -q "Out of bounds values : 0 OK" "$log" || bad "host all-reduce results wrong"
# every message of the loader, the executor and the p2p transport starts
# with "CUDA:", "CUDA driver" or "p2p:" (the parameter table's rows, which
# mention them too, are left out)
if grep -E "CUDA( driver|:)|p2p:" "$log" | grep -vE "INFO COLL_[A-Z0-9_]+ +[a-z]+ +default "; then
  bad "a host-only job touched the CUDA driver (lines above)"
fi
echo "host-only job: $(grep -c 'INFO' "$log") INFO lines, none from the CUDA loader"
[ "$fail" = 0 ] && echo "passed"
exit "$fail"
