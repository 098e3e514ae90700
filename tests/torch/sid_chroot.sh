#!/usr/bin/env bash
# sid_chroot.sh - a Debian sid chroot with torch 2.x (Debian's python3-torch), so the
# coll PyTorch shim can be tested on torch 2.x from a bookworm host without PyPI.
#
#   sid_chroot.sh setup    [DIR]            debootstrap sid + python3-torch (idempotent)
#   sid_chroot.sh run      [DIR] -- CMD...  run CMD inside (default: bash)
#   sid_chroot.sh teardown [DIR]            unmount and delete the chroot
#
# DIR defaults to $COLL_SID_CHROOT or /var/tmp/coll-sid-chroot. "run" bind-mounts /proc,
# /sys, /dev, /dev/pts, /dev/shm, this repository and $COLL_BUILD_DIR (if set) at the same
# paths inside, and starts CMD in the current directory when that exists inside. The
# mounts live in a private mount namespace (unshare) when possible, so they vanish with
# the process and never leak to the host; they are also unmounted by a trap on exit.
# The chroot's glibc is newer than bookworm's, so a libcoll.so built on the host loads.
# Environment: COLL_SID_MIRROR (Debian mirror; default: the one apt on the host uses),
# COLL_SID_PACKAGES (extra packages for setup). Exit status 77: not root, or no network.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
SELF="$REPO/tests/torch/sid_chroot.sh"
read -r -a PKG_LIST <<<"python3-torch python3-numpy python3-pytest python3-expecttest procps ${COLL_SID_PACKAGES:-}"
PKGS="${PKG_LIST[*]}"  # one space-separated string: compared with the marker
MARKER=.coll-sid-ready  # in DIR; holds the package list of the last complete setup

die()  { echo "sid_chroot: $*" >&2; exit 1; }
skip() { echo "sid_chroot: SKIP: $*" >&2; exit 77; }

# The first Debian archive URI in the host's apt sources (one-line or deb822 format).
host_mirror() {
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -r "$f" ] || continue
        sed -nE -e 's/^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?([^[:space:]]+).*/\2/p' \
                -e 's/^URIs:[[:space:]]*//p' "$f"
    done | tr ' ' '\n' | grep -E '/debian/?$' | head -n1 || true
}

url_ok() { curl -fsI --max-time 30 "$1" >/dev/null 2>&1 || wget -q --spider -T 30 "$1" >/dev/null 2>&1; }

# Mount points (absolute, inside DIR) currently mounted on this host namespace.
mounts_under() {
    awk -v d="$1" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/self/mounts
}

MOUNTED=()  # what do_mounts mounted, in order
do_mounts() {  # DIR
    local src dst
    for src in /proc /sys /dev /dev/pts /dev/shm "$REPO" ${COLL_BUILD_DIR:+"$COLL_BUILD_DIR"}; do
        [ -d "$src" ] || die "not a directory: $src"
        src=$(cd "$src" && pwd -P); dst="$1$src"
        mkdir -p "$dst"
        mount --bind "$src" "$dst"
        MOUNTED+=("$dst")
    done
}
undo_mounts() {  # reverse order, lazily if busy; never fails
    local i
    for ((i = ${#MOUNTED[@]} - 1; i >= 0; i--)); do
        umount "${MOUNTED[i]}" 2>/dev/null || umount -l "${MOUNTED[i]}" 2>/dev/null || true
    done
    MOUNTED=()
}

# run_in DIR CMD...: mount, chroot, run CMD (in $PWD if it exists inside), unmount.
# A subshell, so the traps and the exec stay local to it.
run_in() (
    dir=$1; shift
    # gloo resolves the hostname; the chroot's /etc/hosts does not know this host's name.
    grep -qw -- "$(uname -n)" "$dir/etc/hosts" 2>/dev/null ||
        echo "127.0.1.1 $(uname -n)" >>"$dir/etc/hosts"
    if [ -z "${COLL_SID_NS:-}" ] && unshare --mount --propagation private true 2>/dev/null; then
        # Re-run ourselves in a private mount namespace; the mounts die with it.
        COLL_SID_NS=1 exec unshare --mount --propagation private "$SELF" run "$dir" -- "$@"
    fi
    trap undo_mounts EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM HUP
    do_mounts "$dir"
    # Not exec: the EXIT trap must run after CMD; CMD's exit status is ours.
    # shellcheck disable=SC2016  # $1 and $@ are expanded by the inner sh
    chroot "$dir" /bin/sh -c 'cd "$1" 2>/dev/null || cd /; shift; exec "$@"' sh "$PWD" "$@"
)

setup() {
    local dir=$1 mirror
    if [ -f "$dir/$MARKER" ] && [ "$(cat "$dir/$MARKER")" = "$PKGS" ]; then
        echo "sid_chroot: $dir is ready"
    else
        mirror=${COLL_SID_MIRROR:-$(host_mirror)}
        mirror=${mirror:-http://deb.debian.org/debian}
        url_ok "$mirror/dists/sid/Release" || skip "Debian mirror $mirror unreachable"
        command -v debootstrap >/dev/null ||
            { apt-get update -qq && apt-get install -y -qq debootstrap; } ||
            skip "cannot install debootstrap (network?)"
        if [ ! -f "$dir/.coll-debootstrap-done" ]; then
            # A half-finished debootstrap is thrown away; anything else is not ours to delete.
            if [ -d "$dir" ] && [ -n "$(ls -A "$dir")" ]; then
                if [ ! -d "$dir/debootstrap" ] || [ -n "$(mounts_under "$dir")" ]; then
                    die "$dir is not empty and not a partial debootstrap; remove it yourself"
                fi
                rm -rf --one-file-system "$dir"
            fi
            echo "sid_chroot: debootstrap sid into $dir from $mirror"
            debootstrap --variant=minbase sid "$dir" "$mirror" ||
                die "debootstrap failed (log: $dir/debootstrap/debootstrap.log)"
            touch "$dir/.coll-debootstrap-done"
        fi
        echo "deb $mirror sid main" >"$dir/etc/apt/sources.list"
        # A snapshot mirror's Release may be past Valid-Until; tests do not need freshness.
        echo 'Acquire::Check-Valid-Until "false";' >"$dir/etc/apt/apt.conf.d/99coll-novalid"
        cp -L /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
        run_in "$dir" env DEBIAN_FRONTEND=noninteractive sh -ec "
            apt-get update -q
            apt-get install -y -q --no-install-recommends $PKGS
            apt-get clean"
        echo "$PKGS" >"$dir/$MARKER"
    fi
    run_in "$dir" python3 -c 'import torch; print("sid_chroot: torch", torch.__version__)'
}

teardown() {
    local dir=$1
    [ -e "$dir" ] || { echo "sid_chroot: $dir does not exist"; return 0; }
    [ -f "$dir/$MARKER" ] || [ -f "$dir/.coll-debootstrap-done" ] || [ -d "$dir/debootstrap" ] ||
        die "$dir does not look like a chroot made by this script; not removing it"
    mounts_under "$dir" | sort -r | while read -r m; do umount "$m" || umount -l "$m" || true; done
    [ -z "$(mounts_under "$dir")" ] || die "still mounted under $dir: $(mounts_under "$dir" | xargs)"
    rm -rf --one-file-system "$dir"
    echo "sid_chroot: removed $dir"
}

usage() { sed -n '5,7p' "$SELF" | sed 's/^# */usage: /' >&2; exit 2; }

cmd=${1:-}; [ $# -gt 0 ] && shift
dir=${COLL_SID_CHROOT:-/var/tmp/coll-sid-chroot}
if [ $# -gt 0 ] && [ "$1" != "--" ]; then dir=$1; shift; fi
case $dir in /*) ;; *) dir=$PWD/$dir ;; esac
dir=${dir%/}
[ -n "$dir" ] || die "refusing to use / as the chroot"
case $cmd in setup|run|teardown) ;; *) usage ;; esac
[ "$(id -u)" -eq 0 ] || skip "must be root (debootstrap, mount, chroot)"

case $cmd in
    setup) setup "$dir" ;;
    teardown) teardown "$dir" ;;
    run)
        [ "${1:-}" = "--" ] && shift
        [ -f "$dir/.coll-debootstrap-done" ] || die "no chroot in $dir; run: $SELF setup $dir"
        [ $# -gt 0 ] || set -- bash
        run_in "$dir" "$@" ;;
esac
