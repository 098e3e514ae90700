#!/bin/bash
# run_suite.sh BUILD_DIR SOURCE_DIR [full] - the Soft-RoCE suite (guest_suite.sh)
# in one qemu guest (vm.sh): ctest's rdma.softroce. Exit 77 (skipped) where
# vm.sh cannot run (no root, qemu or kernel .deb), or where BUILD_DIR has no
# ib transport (built without <infiniband/verbs.h>).
B=$(realpath "${1:?usage: run_suite.sh BUILD_DIR SOURCE_DIR [full]}")
S=$(realpath "${2:-$(dirname "$0")/../..}")
[ -x "$B/tests/test_ib" ] || { echo "run_suite.sh: skipped: $B has no tests/test_ib (ib transport not built)"; exit 77; }
cd "$S" || exit 2
exec bash tests/rdma/vm.sh -t "${COLL_RDMA_TIMEOUT:-600}" tests/rdma/guest_suite.sh "$B" "${3:-}"
