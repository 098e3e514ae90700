#!/usr/bin/env bash
# Installs coll into a temporary prefix and checks what a user gets there:
# only coll* symbols exported, a SONAME, pkg-config and find_package(coll)
# consumers that build and run (2 ranks launched with torchrun-style vars).
# Usage: test_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(realpath "$1") src=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
lib=$(ls "$tmp"/prefix/lib*/libcoll.so | head -n1)
libdir=$(dirname "$lib")

soname=$(readelf -d "$lib" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = "libcoll.so.0" ] || { echo "FAIL: SONAME is '$soname', expected libcoll.so.0"; exit 1; }
foreign=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^coll' | grep -v '^COLL_' || true)
[ -z "$foreign" ] || { echo "FAIL: libcoll.so exports non-coll symbols:"; echo "$foreign"; exit 1; }
# exactly the functions declared in coll.h are exported
exported=$(nm -D --defined-only "$lib" | awk '$2 == "T" {print $3}' | sed 's/@.*//' | sort -u)
declared=$(grep -oE '^[a-zA-Z_ ]*\*? *(coll[A-Za-z]+)\(' "$src/include/coll.h" | grep -oE "coll[A-Za-z]+\\(" | tr -d "(" | sort -u)
[ "$exported" = "$declared" ] || { echo "FAIL: exported functions differ from coll.h:"; diff <(echo "$declared") <(echo "$exported"); exit 1; }
nm -D --defined-only "$lib" | grep -q ' collAllReduce@' || { echo "FAIL: collAllReduce not exported"; exit 1; }
[ -f "$tmp/prefix/include/coll.h" ] || { echo "FAIL: coll.h not installed"; exit 1; }
ls "$libdir"/libcoll.a >/dev/null

export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc -std=c11 -Wall -Werror "$src/examples/allreduce_env.c" -o "$tmp/ex_pc" \
  $(pkg-config --cflags --libs coll) -Wl,-rpath,"$libdir"

mkdir -p "$tmp/cm"
cat > "$tmp/cm/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.18)
project(consumer C)
find_package(coll REQUIRED)
add_executable(ex_cm "$src/examples/allreduce_env.c")
target_link_libraries(ex_cm coll::coll)
CM
cmake -S "$tmp/cm" -B "$tmp/cm/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_BUILD_RPATH="$libdir" >/dev/null
cmake --build "$tmp/cm/build" >/dev/null

for exe in "$tmp/ex_pc" "$tmp/cm/build/ex_cm"; do
  port=$((20000 + RANDOM % 20000))
  pids=()
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port COLL_SOCKET_IFNAME=lo \
      timeout 60 "$exe" > "$tmp/out.$r" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { echo "FAIL: $exe rank exited non-zero"; cat "$tmp"/out.*; exit 1; }; done
  grep -q "rank 0 of 2: sum 3, 0 wrong" "$tmp/out.0" || { echo "FAIL: unexpected output"; cat "$tmp"/out.*; exit 1; }
done
echo "install: 1 passed, 0 failed"
