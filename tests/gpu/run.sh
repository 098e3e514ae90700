#!/usr/bin/env bash
# tests/gpu/run.sh - everything coll checks on a machine with one GPU (made
# for one H200 with CUDA and PyTorch 2.x, no network; under 8 minutes).
#
# Usage: tests/gpu/run.sh [BUNDLE]
#   BUNDLE: the folder tests/gpu/bundle.sh made (default build-gpu-bundle,
#   next to this script's repository, or the folder holding this script when
#   it runs from inside a bundle). Results go to $OUT (default ./gpu-out):
#   summary.md (the tables) and one log per step.
#
# Stages (each step has its own timeout; a stage that cannot run says why):
#  probe    the GPU (nvidia-smi), the driver as libcoll loads it, and whether
#           CUDA memory can be shared between processes here (the P2P
#           transport's process case): if not, later stages use threads only
#  unit     test_reduce_math (host), test_cuda_loader (real device, pinned and
#           managed memory types; mixed buffers refused; a collective on
#           device and on managed buffers, exact results), test_exec (the device executor against the host one, every type x
#           op), test_p2p (the P2P transport: threads, processes, a killed peer)
#  kernels  gpu_kernels: every kernel against the host reference, the stream
#           gate, and kernel bandwidth against cuMemcpy device-to-device
#  ddp      DDP on CUDA tensors through the shim against CPU/gloo
#  colls    every collective's *_perf --device cuda, 2 and 4 ranks, as
#           processes (-np) and as threads (-t), -c 1, busbw per size
#           (needs benchmarks that take device buffers: skipped otherwise);
#           steps that would start after COLL_GPU_BUDGET seconds (default
#           420) of the script are skipped; and no step runs past
#           COLL_GPU_LIMIT seconds (default 460) of the script: a step's
#           timeout is cut to what is left, and a step with under 10 s left
#           is skipped, so the whole stays under 8 min
# COLL_GPU_SKIP="kernels unit_*": steps left out (glob patterns), e.g. for a
# dry run on tests/fakecuda's driver (COLL_CUDA_LIBRARY), whose emulated
# kernels are too slow for the bandwidth sweep.
# Exit status: 0 when nothing failed (skips allowed), 1 otherwise.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -ge 1 ]; then B=$(cd "$1" && pwd)
elif [ -x "$here/../bin/gpu_kernels" ]; then B=$(cd "$here/.." && pwd)
else B=$(cd "$here/../.." && pwd)/build-gpu-bundle; fi
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
S="$OUT/summary.md"
export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export COLL_LIBRARY="$B/lib/libcoll.so"
export PYTHONPATH="$B/python${PYTHONPATH:+:$PYTHONPATH}"
export COLL_SOCKET_IFNAME=${COLL_SOCKET_IFNAME:-lo}
export COLL_TEST_CUDA_STUB="$B/lib/stubs/libcuda.so"
export COLL_TIMEOUT=${COLL_TIMEOUT:-60}
# a python3 that has torch (pyenv shims may hide the system's)
PY=${PYTHON:-python3}
if ! "$PY" -c 'import torch' 2>/dev/null && /usr/bin/python3 -c 'import torch' 2>/dev/null; then PY=/usr/bin/python3; fi
t_start=$(date +%s)
failed=0

say() { printf '%s\n' "$*" | tee -a "$S"; }
# step NAME TIMEOUT CMD...: runs CMD with its output in $OUT/NAME.log; prints
# and records passed / skipped (77) / FAILED (rc) with the wall time.
step() {
  local name=$1 limit=$2
  shift 2
  local t0 rc pat
  for pat in ${COLL_GPU_SKIP:-}; do
    # shellcheck disable=SC2053
    if [[ $name == $pat ]]; then
      : >"$OUT/$name.log"
      say "| $name | skipped | 0 s | COLL_GPU_SKIP |"
      return 77
    fi
  done
  local left=$(( ${COLL_GPU_LIMIT:-460} - ($(date +%s) - t_start) ))
  if [ "$left" -lt 10 ]; then
    : >"$OUT/$name.log"
    say "| $name | skipped | 0 s | COLL_GPU_LIMIT=${COLL_GPU_LIMIT:-460} s reached |"
    return 77
  fi
  [ "$limit" -le "$left" ] || limit=$left
  t0=$(date +%s.%N)
  timeout -k 5 "$limit" "$@" >"$OUT/$name.log" 2>&1
  rc=$?
  local dt
  dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  local res
  case $rc in
    0) res=passed ;;
    77) res=skipped ;;
    124|137) res="FAILED (timeout after ${limit} s)"; failed=1 ;;
    *) res="FAILED (exit $rc)"; failed=1 ;;
  esac
  say "| $name | $res | $dt s | $(grep -m1 -E 'skipped|SKIPPED' "$OUT/$name.log" | cut -c1-160) |"
  return $rc
}

: >"$S"
say "# coll on a GPU: tests/gpu/run.sh"
say ""
say "bundle: $B (commit $(cat "$B/COMMIT" 2>/dev/null || echo ?)), $(date -u +%Y-%m-%dT%H:%M:%SZ), host $(hostname)"
say ""
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "nvidia-smi: not available"; } |
  sed 's/^/GPU: /' | tee -a "$S"
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' \
  2>/dev/null | sed 's/^/PyTorch: /' | tee -a "$S" || say "PyTorch: not importable"
say ""
say "| step | result | wall | note |"
say "|---|---|---|---|"

# ---- probe and unit --------------------------------------------------------
tl="$B/lib/test:$LD_LIBRARY_PATH" # cmocka and the CUDA runtime, for the unit tests only
step unit_reduce_math 60 env LD_LIBRARY_PATH="$tl" "$B/bin/test_reduce_math"
step unit_cuda_loader 60 env LD_LIBRARY_PATH="$tl" "$B/bin/test_cuda_loader"
step unit_exec 60 env LD_LIBRARY_PATH="$tl" "$B/bin/test_exec"
step unit_p2p 150 env LD_LIBRARY_PATH="$tl" "$B/bin/test_p2p"
gpu=1
grep -q "skipped: the p2p transport needs a GPU" "$OUT/unit_p2p.log" && gpu=0
xproc=1
if grep -q "test_device_buffers_processes" "$OUT/unit_p2p.log" &&
   grep -E -q "\[  (FAILED|SKIPPED) +\] test_device_buffers_processes" "$OUT/unit_p2p.log"; then
  xproc=0
fi
[ "$gpu" = 1 ] || xproc=0

# ---- kernels -----------------------------------------------------------------
step kernels 180 "$B/bin/gpu_kernels" --md "$OUT/kernel_bandwidth.md"

# ---- DDP on CUDA ---------------------------------------------------------------
if [ "$gpu" = 1 ]; then
  step ddp 150 "$PY" "$B/scripts/ddp_cuda.py" --world 2 --steps 20
else
  say "| ddp | skipped | 0 s | no GPU |"
fi

# ---- collectives on device buffers ----------------------------------------------
# The benchmarks take device buffers with COLL_GPU_BENCH_FLAGS (default
# "--device cuda"); their --help must mention it.
flags=${COLL_GPU_BENCH_FLAGS:---device cuda}
budget=${COLL_GPU_BUDGET:-420}
over_budget=0
colls_rows=()
if [ "$gpu" != 1 ]; then
  say "| colls | skipped | 0 s | no GPU |"
elif ! "$B/bin/allreduce_perf" -h 2>&1 | grep -q -- "${flags%% *}"; then
  say "| colls | skipped | 0 s | the benchmarks take no device buffers yet (no ${flags%% *} in allreduce_perf -h) |"
else
  layouts="-t"
  [ "$xproc" = 1 ] && layouts="-np -t"
  for c in allreduce allgather reducescatter broadcast reduce sendrecv alltoall; do
    for n in 2 4; do
      for how in $layouts; do
        name="colls_${c}_${how#-}${n}"
        if [ $(( $(date +%s) - t_start + 45 )) -gt "$budget" ]; then
          over_budget=$((over_budget + 1))
          continue
        fi
        # shellcheck disable=SC2086
        step "$name" 45 "$B/bin/${c}_perf" "$how" "$n" -b 8 -e 128M -f 8 -c 1 -n 5 -w 2 $flags
        [ -s "$OUT/$name.log" ] || continue # skipped: no row
        rows=$(awk '!/^#/ && NF >= 9 && $1 ~ /^[0-9]+$/ { printf "%s:%s ", $1, $8 }' "$OUT/$name.log")
        colls_rows+=("| $c | ${how#-} $n | $rows |")
      done
    done
  done
  [ "$xproc" = 1 ] || say "| colls_processes | skipped | 0 s | CUDA memory cannot be shared between processes here (unit_p2p): threads only |"
  [ "$over_budget" = 0 ] || say "| colls_rest | skipped | 0 s | $over_budget runs left out: the script reached COLL_GPU_BUDGET=$budget s |"
fi

# ---- tables ----------------------------------------------------------------------
say ""
if [ -s "$OUT/kernel_bandwidth.md" ]; then
  say "## Kernel bandwidth (gpu_kernels; bytes read + written per second, x CE = fraction of cuMemcpy D2D)"
  say ""
  cat "$OUT/kernel_bandwidth.md" | tee -a "$S"
  say ""
fi
grep -E "^(reductions|copy kernel|stream gate):" "$OUT/kernels.log" 2>/dev/null | sed 's/^/- /' | tee -a "$S"
if [ ${#colls_rows[@]} -gt 0 ]; then
  say ""
  say "## busbw per size (out of place, GB/s, size:busbw)"
  say ""
  say "| collective | ranks | size:busbw |"
  say "|---|---|---|"
  for r in "${colls_rows[@]}"; do say "$r"; done
fi
if grep -q "^| step | gloo" "$OUT/ddp.log" 2>/dev/null; then
  say ""
  say "## DDP losses (coll on CUDA vs gloo on CPU)"
  say ""
  grep -E "^\||agree" "$OUT/ddp.log" | tee -a "$S"
fi
say ""
say "cross-process CUDA memory sharing: $([ "$xproc" = 1 ] && echo works || echo 'not available (or no GPU)')"
say "total: $(( $(date +%s) - t_start )) s; $([ "$failed" = 0 ] && echo 'nothing failed' || echo 'SOME STEPS FAILED')"
exit "$failed"
