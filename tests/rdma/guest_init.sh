#!/bin/sh
# guest_init.sh - /init of the initramfs that tests/rdma/vm.sh builds (busybox
# only). Mounts the host's / (9p, read-only) under a tmpfs overlay, mounts the
# result share on /tmp/vmout, and switch_roots into the host's userland, so
# that PID 1 runs in the final root: the kernel's request_module() (rdma_rxe
# asks for crc32) then finds the host's modprobe and the guest kernel's
# modules (bind-mounted on /lib/modules). There it runs /tmp/vmout/cmd.sh,
# writes its status to /tmp/vmout/rc and powers off.
export PATH=/bin
mount -t proc p /proc; mount -t sysfs s /sys; mount -t devtmpfs d /dev
for a in $(cat /proc/cmdline); do case $a in moddir=*) MD=${a#moddir=};; keep=*) KEEP=${a#keep=};; esac; done
for m in $(cat /mods/order); do insmod /mods/$m; done
mkdir -p /lower /rw /newroot; N=/newroot
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /lower || poweroff -f
mount -t tmpfs rw /rw; mkdir /rw/up /rw/wk
mount -t overlay -o lowerdir=/lower,upperdir=/rw/up,workdir=/rw/wk ovl $N || poweroff -f
mount -t proc p $N/proc; mount -t sysfs s $N/sys; mount -t devtmpfs d $N/dev
mkdir -p $N/dev/pts $N/dev/shm; mount -t devpts pts $N/dev/pts; mount -t tmpfs shm $N/dev/shm
# the guest's /tmp, /run and /var/tmp are its own, except the directory
# vm.sh was started from when it lies there (keep=, e.g. a clone in /tmp)
[ -n "$KEEP" ] && mkdir -p /keep && mount --bind $N$KEEP /keep
for d in tmp run var/tmp; do mount -t tmpfs tmp $N/$d; done
[ -n "$KEEP" ] && mkdir -p $N$KEEP && mount -o move /keep $N$KEEP
mkdir -p $N/tmp/vmout $N/lib/modules
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 vmout $N/tmp/vmout
mkdir -p $N/tmp/vmshared  # two guests: one host directory both see (uncached)
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 vmshared $N/tmp/vmshared 2>/dev/null
mount --bind /lower$MD $N/lib/modules; cp /bin/busybox $N/run/busybox
cat > $N/run/stage2 <<'S2'
hostname guest
/bin/sh /tmp/vmout/cmd.sh > /tmp/vmout/guest.log 2>&1; rc=$?
echo $rc > /tmp/vmout/rc; echo "GUEST_RC=$rc uptime $(cut -d' ' -f1 /proc/uptime)"
sync; umount /tmp/vmout; exec /run/busybox poweroff -f
S2
exec switch_root $N /bin/sh /run/stage2 < /dev/console > /dev/console 2>&1
