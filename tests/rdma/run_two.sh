#!/bin/bash
# run_two.sh BUILD_DIR SOURCE_DIR - guest_two.sh in two qemu guests joined by a
# virtual wire (vm.sh -2): two nodes x two ranks, ib between the nodes. ctest's
# rdma.softroce_two_nodes; skipped (77) as run_suite.sh.
B=$(realpath "${1:?usage: run_two.sh BUILD_DIR SOURCE_DIR}")
S=$(realpath "${2:-$(dirname "$0")/../..}")
[ -x "$B/tests/test_ib" ] || { echo "run_two.sh: skipped: $B has no tests/test_ib (ib transport not built)"; exit 77; }
cd "$S" || exit 2
exec bash tests/rdma/vm.sh -2 -t "${COLL_RDMA_TIMEOUT:-900}" tests/rdma/guest_two.sh "$B"
