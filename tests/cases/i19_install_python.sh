#!/usr/bin/env bash
# issue 19 "README and install": `cmake --install` installs the PyTorch shim
# too, so that a user needs no source tree on PYTHONPATH. Installs the build
# into a DESTDIR, checks that torch_coll landed in COLL_PYTHON_INSTALL_DIR
# (with the default prefix: a directory on /usr/bin/python3's own sys.path)
# next to a link to the installed libcoll.so.0, then imports it from outside
# the source tree with /usr/bin/python3 and runs a 2-rank all_reduce on it.
# Exit 77 (skipped) when the shim is not installed by this build
# (COLL_INSTALL_PYTHON=OFF), /usr/bin/python3 has no torch, or the library is
# built with a sanitizer (Python cannot load it).
# Usage: i19_install_python.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(realpath "$1")
py=/usr/bin/python3
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
[ "$(cache COLL_INSTALL_PYTHON)" != OFF ] || { echo "COLL_INSTALL_PYTHON=OFF: nothing to check"; exit 77; }
prefix=$(cache CMAKE_INSTALL_PREFIX)
pydir=$(cache COLL_PYTHON_INSTALL_DIR)
case $pydir in /*) ;; *) pydir=$prefix/$pydir ;; esac

DESTDIR=$tmp/root cmake --install "$build" >"$tmp/install.log"
pkg=$tmp/root$pydir/torch_coll
[ -f "$pkg/__init__.py" ] || { echo "FAIL: no torch_coll in $tmp/root$pydir"; find "$tmp/root" -name '*.py' | head; exit 1; }
[ -L "$pkg/libcoll.so" ] && [ -e "$pkg/libcoll.so" ] ||
  { echo "FAIL: $pkg/libcoll.so is not a link to the installed library"; ls -l "$pkg"; exit 1; }
echo "installed: $pydir/torch_coll (libcoll.so -> $(readlink "$pkg/libcoll.so"))"
[ -x "$py" ] || { echo "no $py"; exit 77; }
if [ "$prefix" = /usr/local ]; then
  "$py" -c 'import sys; sys.exit(0 if sys.argv[1] in sys.path else 1)' "$pydir" ||
    { echo "FAIL: $pydir is not on $py's sys.path"; exit 1; }
  echo "$pydir is on $py's sys.path: a real install needs no PYTHONPATH"
fi
deps=$(ldd "$pkg/libcoll.so" 2>/dev/null || true) # not piped into grep -q: pipefail would see ldd's SIGPIPE
if grep -Eq 'lib(asan|tsan|ubsan)' <<<"$deps"; then
  echo "the installed libcoll.so is built with a sanitizer that Python cannot load: import skipped"
  exit 77
fi
cd "$tmp" # outside the source tree: nothing of it on the path
export PYTHONPATH=$tmp/root$pydir
unset COLL_LIBRARY
"$py" -c 'import torch' 2>/dev/null || { echo "$py has no torch"; exit 77; }
cat >"$tmp/rank.py" <<'PY'
import sys
import torch
import torch.distributed as dist
import torch_coll

rank, store_path, root = int(sys.argv[1]), sys.argv[2], sys.argv[3]
assert torch_coll.__file__.startswith(root), torch_coll.__file__
assert torch_coll.library_path.startswith(root), torch_coll.library_path
dist.init_process_group("coll", store=dist.FileStore(store_path, 2), rank=rank, world_size=2)
t = torch.full((1000,), float(rank + 1))
dist.all_reduce(t)
assert bool(t.eq(3).all()), t[:4]
dist.destroy_process_group()
print("rank %d: all_reduce gave 3.0 everywhere, libcoll from %s" % (rank, torch_coll.library_path))
PY
for r in 0 1; do
  timeout -k 5 120 "$py" "$tmp/rank.py" $r "$tmp/store" "$tmp/root" >"$tmp/out.$r" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
pids=()
cat "$tmp"/out.*
[ $rc = 0 ] || { echo "FAIL: a rank failed"; exit 1; }
echo "i19_install_python: passed"
