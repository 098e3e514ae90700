#!/usr/bin/env bash
# tests/gpu/bundle.sh - builds what tests/gpu/run.sh needs on a machine with
# a GPU, here (where the toolchain is), and collects it in one folder to
# carry there: libcoll, the test programs and benchmarks, the PyTorch shim,
# the scripts, and every shared library they load that is not part of glibc
# (hwloc and udev in lib/; cmocka and the CUDA runtime, which only the unit
# tests use, in lib/test/), since that machine may lack Debian's packages.
# Prints the folder's size.
# Usage: tests/gpu/bundle.sh [BUILD_DIR [BUNDLE_DIR]]
#        (defaults: build-gpu, build-gpu-bundle; both are git-ignored)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-gpu}
out=${2:-build-gpu-bundle}
cmake -S . -B "$build" -DCOLL_CUDA=ON -DCOLL_WERROR=ON >/dev/null
benches="allreduce_perf allgather_perf reducescatter_perf broadcast_perf reduce_perf sendrecv_perf alltoall_perf"
# shellcheck disable=SC2086
cmake --build "$build" -j"$(nproc)" --target coll test_reduce_math test_cuda_loader test_exec test_p2p gpu_kernels $benches >/dev/null
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/python" "$out/scripts"
cp -P "$build"/libcoll.so* "$out/lib/"
for t in test_reduce_math test_cuda_loader test_exec test_p2p; do cp "$build/tests/$t" "$out/bin/"; done
cp "$build/tests/gpu/gpu_kernels" "$out/bin/"
cp "$build"/benchmarks/*_perf "$out/bin/"
cp -r python/torch_coll "$out/python/"
find "$out/python" -name __pycache__ -prune -exec rm -rf {} +
cp tests/gpu/run.sh tests/gpu/ddp_cuda.py "$out/scripts/"
git rev-parse --short HEAD >"$out/COMMIT" 2>/dev/null || echo unknown >"$out/COMMIT"
# shared libraries outside glibc (and outside the bundle)
for f in "$out"/bin/* "$out"/lib/libcoll.so.*.*; do
  ldd "$f" 2>/dev/null | awk '/=> \//{print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libcoll.so*) ;;
    libcudart*|libcmocka*) mkdir -p "$out/lib/test" && cp -L "$lib" "$out/lib/test/" ;; # tests only: kept off torch's path
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
# the toolkit's stub driver, for test_cuda_loader's failure cases
stub=$(awk -F= '/^COLL_CUDA_STUB_LIB:/{print $2}' "$build/CMakeCache.txt")
[ -n "$stub" ] && [ -e "$stub" ] && mkdir -p "$out/lib/stubs" && cp "$stub" "$out/lib/stubs/libcuda.so"
strip --strip-debug "$out"/bin/* "$out"/lib/*.so* 2>/dev/null || true
du -sh "$out"
