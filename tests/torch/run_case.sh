#!/bin/sh
# run_case.sh BUILD_DIR SECONDS SCRIPT [ARGS...]
# Runs tests/torch/SCRIPT (a user case or issue point through the PyTorch shim)
# against BUILD_DIR/libcoll.so under every torch this machine has: the host's
# /usr/bin/python3 (Debian bookworm: torch 1.13) and, when the Debian sid chroot
# of sid_chroot.sh is set up ($COLL_SID_CHROOT, default /var/tmp/coll-sid-chroot)
# and we are root, torch 2.x inside it.  Each run is limited to SECONDS.
# Exit: 0 every run passed, 1 one failed, 77 skipped (no torch, or a sanitizer
# build that Python cannot load).  tests/cases/*_torch_*.sh call this.
set -u
BUILD_DIR=${1:?usage: $0 BUILD_DIR SECONDS SCRIPT [ARGS...]}
SECS=${2:?usage: $0 BUILD_DIR SECONDS SCRIPT [ARGS...]}
SCRIPT=${3:?usage: $0 BUILD_DIR SECONDS SCRIPT [ARGS...]}
shift 3
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "$BUILD_DIR" && pwd -P)
LIB=$BUILD/libcoll.so
if [ ! -f "$LIB" ]; then
  echo "run_case.sh: $LIB not found (build the library first)"
  exit 1
fi
if ldd "$LIB" 2>/dev/null | grep -Eq 'lib(asan|tsan|ubsan)'; then
  echo "run_case.sh: $LIB is built with a sanitizer that Python cannot load: skipped"
  exit 77
fi
export COLL_LIBRARY="$LIB" COLL_BUILD_DIR="$BUILD" PYTHONWARNINGS=ignore OMP_NUM_THREADS=1 USE_LIBUV=0
export COLL_SOCKET_IFNAME="${COLL_SOCKET_IFNAME:-lo}"
ran=0; failed=0
if /usr/bin/python3 -c "import torch.distributed as d; assert d.is_available()" >/dev/null 2>&1; then
  ran=$((ran + 1))
  echo "=== $SCRIPT on the host's torch"
  timeout -k 5 "$SECS" /usr/bin/python3 "$HERE/$SCRIPT" "$@" || { echo "=== FAILED (exit $?)"; failed=$((failed + 1)); }
fi
SID=${COLL_SID_CHROOT:-/var/tmp/coll-sid-chroot}
if [ "$(id -u)" -eq 0 ] && [ -f "$SID/.coll-sid-ready" ]; then
  ran=$((ran + 1))
  echo "=== $SCRIPT on torch 2.x in $SID"
  COLL_SID_CHROOT=$SID timeout -k 5 "$SECS" "$HERE/sid_chroot.sh" run -- python3 "$HERE/$SCRIPT" "$@" ||
    { echo "=== FAILED (exit $?)"; failed=$((failed + 1)); }
fi
if [ "$ran" -eq 0 ]; then
  echo "run_case.sh: no torch here (host python3 without torch.distributed, no sid chroot): skipped"
  exit 77
fi
echo "run_case.sh: $SCRIPT: $((ran - failed)) of $ran torch versions passed"
[ "$failed" -eq 0 ]
