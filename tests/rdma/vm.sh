#!/bin/bash
# vm.sh - run a script as root inside a qemu guest that has Soft-RoCE (rdma_rxe).
#
#   tests/rdma/vm.sh [-t SECONDS] [-o OUTDIR] [-2] GUEST_SCRIPT [ARGS...]
#
# Boots Debian's own kernel (from the linux-image-*-amd64 .deb, never
# installed on the host) under qemu TCG, with this machine's / as the guest's
# root: shared read-only over virtio-9p, with a tmpfs overlay on top, so the
# guest runs the host's binaries, libibverbs and build tree unchanged and its
# writes vanish with it. Inside, GUEST_SCRIPT runs as root with ARGS, in the
# directory vm.sh was started from (the guest's /tmp, /run and /var/tmp are
# its own, but a start directory there is bound in), with the environment
# variables named in
# COLL_VM_ENV (space separated) copied in. Files it writes to $VMOUT land in
# OUTDIR on the host. vm.sh returns the script's exit status.
#
#  -t SECONDS  the whole guest's lifetime (default 600); on expiry qemu is
#              killed and vm.sh returns 124
#  -o OUTDIR   where $VMOUT goes (default: a temporary directory, removed)
#  -2          two guests joined by a virtual wire (a qemu stream socket on a
#              host unix socket; no IP traffic reaches the host): guest A runs
#              GUEST_SCRIPT with VM_NODE=0 and 198.18.0.1 on eth0, guest B with
#              VM_NODE=1 and 198.18.0.2; the status is A's, or B's if A passed
#
# COLL_VM_SMP sets each guest's vCPUs (default 1: CI and the benchmark tables
# use one), COLL_VM_MEM its MiB (default 2048).
#
# The guest's own helpers, sourced by GUEST_SCRIPT: tests/rdma/guest_lib.sh.
#
# Needs root (9p export of /, modules), qemu-system-x86_64, a static busybox,
# cpio, kmod, python3 and the kernel .deb: COLL_RDMA_KDEB, or
# /var/cache/coll-rdma/linux-image-*-amd64_*.deb (.ci/install-deps puts it
# there). Without them it exits 77 (skipped). The unpacked kernel and the
# initramfs are kept in COLL_RDMA_WORK (default /var/tmp/coll-rdma) for the
# next run; everything else (qemu, sockets, temporary files) is removed on
# exit, on failure, on timeout and on Ctrl-C.
set -u
TMO=600 OUTDIR="" TWO=0
while getopts "t:o:2" o; do
  case $o in
    t) TMO=$OPTARG ;;
    o) OUTDIR=$OPTARG ;;
    2) TWO=1 ;;
    *) echo "usage: $0 [-t SECONDS] [-o OUTDIR] [-2] GUEST_SCRIPT [ARGS...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "usage: $0 [-t SECONDS] [-o OUTDIR] [-2] GUEST_SCRIPT [ARGS...]" >&2; exit 2; }
SCRIPT=$(realpath "$1") || exit 2
shift

skip() { echo "vm.sh: skipped: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root"
for t in qemu-system-x86_64 cpio depmod modprobe python3 dpkg-deb; do
  command -v $t >/dev/null || skip "$t not installed (.ci/install-deps)"
done
BB=$(command -v busybox) || skip "busybox not installed"
file -L "$BB" 2>/dev/null | grep -q "statically linked" || [ -x /bin/busybox ] || skip "busybox is not static"
DEB=${COLL_RDMA_KDEB:-$(ls /var/cache/coll-rdma/linux-image-*-amd64_*_amd64.deb 2>/dev/null | sort -V | tail -1)}
[ -n "$DEB" ] && [ -f "$DEB" ] || skip "no kernel .deb (COLL_RDMA_KDEB or /var/cache/coll-rdma, see .ci/install-deps)"
K=$(basename "$DEB" | sed -E 's/^linux-image-([^_]+)_.*/\1/')
WORK=${COLL_RDMA_WORK:-/var/tmp/coll-rdma}
W=$WORK/$K
mkdir -p "$WORK"

# ---- one-time preparation (locked: parallel runs share it) -----------------
prepare() {
  rm -rf "$W.tmp" && mkdir -p "$W.tmp/ir/bin" "$W.tmp/ir/mods" "$W.tmp/ir/proc" "$W.tmp/ir/sys" "$W.tmp/ir/dev" || return 1
  dpkg-deb -x "$DEB" "$W.tmp/root" && depmod -b "$W.tmp/root" "$K" || return 1
  # qemu boots the uncompressed ELF through PVH: no firmware, no in-guest unxz
  python3 - "$W.tmp/root/boot/vmlinuz-$K" "$W.tmp/vmlinux" <<'PY' || return 1
import lzma, sys
d = open(sys.argv[1], "rb").read()
i = d.find(b"\xfd7zXZ\x00")
open(sys.argv[2], "wb").write(lzma.LZMADecompressor().decompress(d[i:]))
PY
  cp "$BB" "$W.tmp/ir/bin/busybox"
  for a in sh mount insmod mkdir cat echo poweroff switch_root cp; do ln -s busybox "$W.tmp/ir/bin/$a"; done
  for m in virtio_pci 9pnet_virtio 9p overlay; do modprobe -d "$W.tmp/root" -S "$K" --show-depends $m; done |
    awk '$1 == "insmod" && !s[$2]++ {print $2}' | while read -r f; do
      cp "$f" "$W.tmp/ir/mods/" && basename "$f" >> "$W.tmp/ir/mods/order"
    done
  cp "$SELF_DIR/guest_init.sh" "$W.tmp/ir/init" && chmod +x "$W.tmp/ir/init" || return 1
  (cd "$W.tmp/ir" && find . | cpio -o -H newc --quiet | gzip -1) > "$W.tmp/initrd.gz" || return 1
  rm -rf "$W" && mv "$W.tmp" "$W"
}
SELF_DIR=$(cd "$(dirname "$0")" && pwd)
(
  flock 9
  if [ ! -f "$W/initrd.gz" ] || ! cmp -s "$SELF_DIR/guest_init.sh" "$W/ir/init"; then
    t0=$(date +%s.%N)
    prepare || { echo "vm.sh: preparing the guest kernel failed" >&2; exit 1; }
    echo "vm.sh: prepared $K in $(echo "$(date +%s.%N) - $t0" | bc 2>/dev/null || echo '?') s"
  fi
) 9>"$WORK/.lock" || exit 1

# ---- per-run state, removed on every exit ----------------------------------
RUN=$(mktemp -d /tmp/coll-vm.XXXXXX)
PIDS=""
cleanup() {
  for p in $PIDS; do kill -9 "$p" 2>/dev/null; done
  for p in $PIDS; do wait "$p" 2>/dev/null; done
  rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The guest's command: environment, working directory, then the script.
mkcmd() { # DIR NODE
  {
    echo "export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp TERM=dumb VMOUT=/tmp/vmout VM_NODE=$2 VM_NODES=$((TWO + 1))"
    for v in ${COLL_VM_ENV:-}; do
      [ -n "${!v+x}" ] && printf 'export %s=%q\n' "$v" "${!v}"
    done
    printf 'cd %q || exit 126\n' "$PWD"
    printf '/bin/bash /tmp/vmout/script.sh'; for a in "${@:3}"; do printf ' %q' "$a"; done; echo
  } > "$1/cmd.sh"
  cp "$SCRIPT" "$1/script.sh"
}

boot() { # DIR EXTRA...
  local d=$1; shift
  qemu-system-x86_64 -accel tcg,thread=multi -cpu max -smp "${COLL_VM_SMP:-1}" -m "${COLL_VM_MEM:-2048}" \
    -nodefaults -display none -no-reboot -serial "file:$d/console.log" -monitor none \
    -kernel "$W/vmlinux" -initrd "$W/initrd.gz" \
    -append "console=ttyS0 panic=-1 quiet moddir=$W/root/lib/modules$KEEP" \
    -fsdev local,id=r,path=/,security_model=none,readonly=on,multidevs=remap \
    -device virtio-9p-pci,fsdev=r,mount_tag=hostroot \
    -fsdev "local,id=o,path=$d,security_model=none,multidevs=remap" \
    -device virtio-9p-pci,fsdev=o,mount_tag=vmout "$@" </dev/null >"$d/qemu.log" 2>&1
}

# a start directory under a path the guest mounts afresh stays visible there
KEEP=""
case $PWD in /tmp/* | /run/* | /var/tmp/*) KEEP=" keep=$PWD" ;; esac
case $KEEP in *[[:space:]]*[[:space:]]*) echo "vm.sh: cannot pass a start directory with spaces ($PWD)" >&2; exit 2 ;; esac

mkdir -p "$RUN/a"
mkcmd "$RUN/a" 0 "$@"
if [ $TWO = 1 ]; then
  mkdir -p "$RUN/b" "$RUN/shared"
  SHARED="-fsdev local,id=s,path=$RUN/shared,security_model=none,multidevs=remap -device virtio-9p-pci,fsdev=s,mount_tag=vmshared"
  mkcmd "$RUN/b" 1 "$@"
  SOCK=$RUN/wire.sock
  boot "$RUN/a" -netdev "stream,id=n0,server=on,addr.type=unix,addr.path=$SOCK" \
    -device virtio-net-pci,netdev=n0,mac=52:54:00:00:00:0a $SHARED &
  PIDS="$!"
  for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
  boot "$RUN/b" -netdev "stream,id=n0,server=off,addr.type=unix,addr.path=$SOCK" \
    -device virtio-net-pci,netdev=n0,mac=52:54:00:00:00:0b $SHARED &
  PIDS="$PIDS $!"
else
  boot "$RUN/a" &
  PIDS="$!"
fi

# Wait for every guest, up to the deadline.
end=$(($(date +%s) + TMO))
timedout=0
for p in $PIDS; do
  while kill -0 "$p" 2>/dev/null; do
    if [ "$(date +%s)" -ge $end ]; then timedout=1; break 2; fi
    sleep 0.2
  done
done

status() { # DIR
  if [ -f "$1/rc" ]; then cat "$1/rc"; else echo 125; fi
}
rc=$(status "$RUN/a")
[ $TWO = 1 ] && [ "$rc" = 0 ] && rc=$(status "$RUN/b")
[ $timedout = 1 ] && { echo "vm.sh: the guest ran past $TMO s and was killed" >&2; rc=124; }
for d in "$RUN"/a "$RUN"/b; do
  [ -d "$d" ] || continue
  [ $TWO = 1 ] && echo "==== guest $(basename "$d") ===="
  cat "$d/guest.log" 2>/dev/null
  if [ "$rc" != 0 ]; then echo "---- console of guest $(basename "$d") (tail) ----"; tail -n 60 "$d/console.log"; fi
  if [ -n "$OUTDIR" ]; then
    mkdir -p "$OUTDIR/$(basename "$d")" && cp -r "$d"/. "$OUTDIR/$(basename "$d")/"
  fi
done
exit "$rc"
