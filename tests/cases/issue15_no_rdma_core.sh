#!/bin/bash
# issue 15: "libcoll.so must load and run on machines without rdma-core
# (TCP then)", and COLL_NET=ib without it "fails with a clear error".
#  1. libcoll.so has no link-time dependency on libibverbs/librdmacm;
#  2. with libibverbs unloadable (COLL_IB_LIB pointing nowhere; as root also
#     the real libibverbs.so.1 hidden in a private mount namespace), a 2-rank
#     all-reduce over the default transport passes, and one with COLL_NET=ib
#     fails within seconds with the library's name and what to install.
# Usage: issue15_no_rdma_core.sh BUILD_DIR SOURCE_DIR
B=${1:?build dir}
LIB=$B/libcoll.so
[ -f "$LIB" ] || { echo "no $LIB"; exit 1; }
fail() { echo "FAIL: $*"; exit 1; }

deps=$(readelf -d "$LIB" | grep NEEDED)
echo "$deps"
echo "$deps" | grep -qiE "ibverbs|rdmacm" && fail "libcoll.so links rdma-core"
nm -D --undefined-only "$LIB" | grep -E " (ibv|rdma)_" && fail "libcoll.so has undefined verbs symbols"

AR="$B/benchmarks/allreduce_perf -np 2 -b 8 -e 64K -f 8 -n 2 -w 1 -c 1"
run() { # EXPECT(0|1) PATTERN ENV... : runs the all-reduce with ENV
  local want=$1 pat=$2; shift 2
  local t0=$SECONDS out rc
  out=$(env "$@" COLL_SHM_DISABLE=1 COLL_TIMEOUT=30 timeout 60 $AR 2>&1); rc=$?
  echo "  [$*] rc=$rc in $((SECONDS - t0)) s"
  if [ "$want" = 0 ]; then [ $rc = 0 ] || { echo "$out" | tail -5; fail "expected success"; }
  else [ $rc != 0 ] && [ $rc != 124 ] || { echo "$out" | tail -5; fail "expected a prompt failure (rc $rc)"; }; fi
  [ -z "$pat" ] || echo "$out" | grep -q -- "$pat" || { echo "$out" | tail -5; fail "missing: $pat"; }
  [ -z "$pat" ] || echo "$out" | grep -m1 -- "$pat"
}
run 0 "" COLL_IB_LIB=/nonexistent/libibverbs.so.1
run 1 "ib: cannot load /nonexistent/libibverbs.so.1 (.*): install rdma-core's libibverbs1" \
  COLL_IB_LIB=/nonexistent/libibverbs.so.1 COLL_NET=ib

# as root: the real library made unloadable for this process tree only
real=$(ldconfig -p 2>/dev/null | awk '/libibverbs.so.1 .*x86-64/ {print $NF; exit}')
if [ "$(id -u)" = 0 ] && [ -n "$real" ] && command -v unshare >/dev/null; then
  real=$(readlink -f "$real")
  export -f run fail
  export AR
  unshare -m bash -c "mount --bind /dev/null '$real' && \
    run 0 '' COLL_NET=tcp && \
    run 1 \"ib: cannot load libibverbs.so.1 (.*): install rdma-core\" COLL_NET=ib" || exit 1
else
  echo "(not root or no libibverbs.so.1 here: the hidden-library run is skipped)"
fi
echo "PASS"
