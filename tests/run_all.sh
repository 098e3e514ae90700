#!/usr/bin/env bash
# Runs every test of coll: a gcc build with -Werror and its ctest suite, a
# clang -Werror build, the suite again under AddressSanitizer + UBSan, and
# each libFuzzer target for COLL_FUZZ_SECONDS (default 30).
# Usage: tests/run_all.sh [build-root]   (default: ./build-tests)
set -euo pipefail
cd "$(dirname "$0")/.."
root=${1:-build-tests}
jobs=$(nproc)
export COLL_SOCKET_IFNAME=${COLL_SOCKET_IFNAME:-lo}
step() { printf '\n=== %s ===\n' "$*"; }

step "gcc -Werror build + tests"
cmake -S . -B "$root/gcc" -DCMAKE_C_COMPILER=gcc -DCOLL_WERROR=ON >/dev/null
cmake --build "$root/gcc" -j "$jobs"
ctest --test-dir "$root/gcc" --output-on-failure -j 1

step "clang -Werror build"
cmake -S . -B "$root/clang" -DCMAKE_C_COMPILER=clang -DCOLL_WERROR=ON >/dev/null
cmake --build "$root/clang" -j "$jobs"

step "AddressSanitizer + UBSan build + tests"
cmake -S . -B "$root/asan" -DCMAKE_C_COMPILER=gcc -DCOLL_WERROR=ON -DCOLL_SANITIZE=ON \
  -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build "$root/asan" -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$root/asan" --output-on-failure -j 1

step "libFuzzer targets (bounded time each)"
bash tests/fuzz/run.sh "${COLL_FUZZ_SECONDS:-30}" "$root/fuzz"

step "all test suites passed"
