#!/bin/sh
# Runs the PyTorch shim tests (python/torch_coll) against BUILD_DIR/libcoll.so
# in bounded time (under 5 minutes on 2 cores).  Not PyTorch's own suite: that
# is tests/torch/run_torch_suite.py (long).
#   tests/torch/run_tests.sh BUILD_DIR
# Exit: 0 all passed, 1 a failure, 77 skipped (no Python with torch).
# COLL_TORCH_PYTHON picks the interpreter (default: the first of /usr/bin/python3,
# python3 that imports torch.distributed).
set -u
BUILD_DIR=${1:?usage: $0 BUILD_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=
for p in ${COLL_TORCH_PYTHON:-} /usr/bin/python3 python3; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c "import torch.distributed as d; assert d.is_available()" >/dev/null 2>&1; then
    PY=$p; break
  fi
done
if [ -z "$PY" ]; then
  echo "run_tests.sh: no Python with torch.distributed: skipped"
  exit 77
fi
LIB=$(cd "$BUILD_DIR" && pwd)/libcoll.so
if [ ! -f "$LIB" ]; then
  echo "run_tests.sh: $LIB not found (build the library first)"
  exit 1
fi
# A library built with ASan/TSan cannot be dlopen()ed by an uninstrumented Python.
if ldd "$LIB" 2>/dev/null | grep -Eq 'lib(asan|tsan)'; then
  echo "run_tests.sh: $LIB is built with a sanitizer that Python cannot load: skipped"
  exit 77
fi
export COLL_LIBRARY="$LIB" COLL_TORCH_QUICK=1 PYTHONWARNINGS=ignore OMP_NUM_THREADS=1
"$PY" -c "import torch; print('torch', torch.__version__, 'python', __import__('sys').version.split()[0])"
passed=0; failed=0; names=
run() {  # run SECONDS FILE
  echo "=== $2"
  if timeout -k 5 "$1" "$PY" "$HERE/$2"; then
    passed=$((passed + 1))
  else
    echo "=== $2 FAILED (exit $?)"; failed=$((failed + 1)); names="$names $2"
  fi
}
run 90 test_errors.py
run 150 test_ops.py
run 120 test_ddp.py
run 120 test_fsdp.py
run 180 test_example.py
[ -n "$names" ] && echo "failed:$names"
echo "torch: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
