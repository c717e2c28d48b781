#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61 debug
# gate: 612
# checks: 90
#
# Faults beneath a LUN (device mapper over null_blk, driven by
# tests/host/vps_test): a dm-flakey segment that fails reads, then one
# that fails writes (table swapped in and out with dmsetup while the LUN
# stays attached) -> MEDIUM ERROR 11/00 or 0C/00 for the bad chunk, each
# of a burst of 32 commands completing exactly once, the rest of the LUN
# unaffected, and once the fault is gone the old data intact and a new
# write + verify clean.  The same with null_blk's bad blocks (configfs)
# for reads.  Then a LUN over dm-delay (200 ms per I/O) is
# detached with 48 commands in flight: each completes once, GOOD, the
# LUN answers LOGICAL UNIT NOT SUPPORTED afterwards, and the dm device can
# be removed while the adapter stays open; over another slow
# LUN, the per-LUN cap on commands in flight (a LUN override, then the
# max_outstanding module parameter) answers the excess TASK SET FULL.
# Last, fsfreeze of ext4 under a file LUN (over dm-delay) with writes in
# flight: the freeze completes in seconds, the thaw lets the held writes
# through, each completes once and reads back.  And a LUN that stops
# answering (dm suspended) with writes held: a VMM killed while it waits
# in a reset behind it, and a VMM closing the adapter, both exit at once
# (QEMU holds its global lock there); the module keeps the adapter until
# the LUN resumes, then lets everything go.
. "$(dirname "$0")/../../scripts/vm/harness.sh"

vm_modules null_blk dm_mod dm_flakey dm_delay ext4
vm_ours vhost_pvscsi
vm_bins "$VPS_TOP/tests/host/vps_test" dmsetup mkfs.ext4 fsfreeze
vm_run host-faults <<'GUEST'
export DM_DISABLE_UDEV=1	# no udev here: dmsetup makes /dev/mapper nodes itself
modprobe -r null_blk
modprobe null_blk nr_devices=2 gb=1 memory_backed=1
t_check load vps_load vhost_pvscsi
S=$(cat /sys/block/nullb0/size)
B=1024			# bad chunk: blocks 1024..1087 (512-byte sectors)
L=64
E=$((B + L))
bad() { # flakey feature args: linear, a flakey segment always down, linear
	printf '0 %s linear /dev/nullb0 0\n%s %s flakey /dev/nullb0 %s 0 1 %s\n%s %s linear /dev/nullb0 %s\n' \
		$B $B $L $B "$1" $E $((S - E)) $E
}
echo "0 $S linear /dev/nullb0 0" > /tmp/linear
bad 0 > /tmp/bad_r			# no feature: reads (and writes) fail
bad "1 error_writes" > /tmp/bad_w	# writes fail, reads pass
t_check dm-create dmsetup create f0 --noudevsync /tmp/linear
t_check dm-node test -b /dev/mapper/f0
sw='dmsetup suspend --noudevsync f0 && dmsetup load --noudevsync f0'
t_tap reads vps_test faults /dev/mapper/f0 $B read \
	"$sw /tmp/bad_r && dmsetup resume --noudevsync f0" \
	"$sw /tmp/linear && dmsetup resume --noudevsync f0"
t_tap writes vps_test faults /dev/mapper/f0 $B write \
	"$sw /tmp/bad_w && dmsetup resume --noudevsync f0" \
	"$sw /tmp/linear && dmsetup resume --noudevsync f0"
t_check dm-remove dmsetup remove --noudevsync f0
# null_blk's own bad blocks: I/O to them fails with BLK_STS_IOERR
n=/sys/kernel/config/nullb/nb1
# configfs is a module on Debian: /init could not mount it before null_blk
grep -q ' /sys/kernel/config ' /proc/mounts || mount -t configfs configfs /sys/kernel/config
t_check nullb-configfs sh -c "mkdir $n && echo 1 > $n/memory_backed && echo 512 > $n/size && echo 1 > $n/power"
# configfs devices take the directory's name (older kernels: nullb<index>)
nb=/dev/nb1
[ -b $nb ] || nb=/dev/nullb$(cat $n/index)
t_check nullb-node test -b "$nb"
t_tap badblocks vps_test faults "$nb" $B read "echo +$B-$((E - 1)) > $n/badblocks" \
	"echo -$B-$((E - 1)) > $n/badblocks"
echo 0 > $n/power; rmdir $n
t_check dm-delay sh -c "echo '0 $S delay /dev/nullb0 0 200' | dmsetup create d0 --noudevsync"
# detached with I/O in flight, the device is free again while the
# adapter stays open (the last reference went in the worker)
t_check dm-delay-1 sh -c "echo '0 $S delay /dev/nullb0 0 200' | dmsetup create d1 --noudevsync"
t_tap detach vps_test detach-inflight /dev/mapper/d1 "dmsetup remove --noudevsync d1"
# a LUN that stops answering (suspended) with writes held: a VMM killed
# in a reset behind it and one closing the adapter exit at once; the
# adapter stays in the gauges until the resume, then goes
t_check dm-linear-hung sh -c "echo '0 $S linear /dev/nullb1 0' | dmsetup create h0 --noudevsync"
t_tap hung vps_test hung-lun /dev/mapper/h0 h0
t_check dm-linear-hung-remove dmsetup remove --noudevsync h0
# rings dropped by a memory table with READs in flight on the slow LUN
t_tap remap vps_test remap-inflight /dev/mapper/d0
# the per-LUN cap: a LUN override of 3, then the module parameter (2)
t_tap cap-lun vps_test cap /dev/mapper/d0 3 3
p=/sys/module/vhost_pvscsi/parameters/max_outstanding
old=$(cat $p)
echo 2 > $p
t_tap cap-param vps_test cap /dev/mapper/d0 0 2
echo "$old" > $p
t_check dm-delay-remove dmsetup remove --noudevsync d0
# fsfreeze of the filesystem under a file LUN with writes in flight
# (ext4 over dm-delay, 300 ms per I/O): the freeze completes, and the
# writes the worker held complete once the filesystem thaws
mkfs.ext4 -q -E nodiscard /dev/nullb1 && mkdir -p /mnt/z && mount /dev/nullb1 /mnt/z &&
	dd if=/dev/zero of=/mnt/z/lun.img bs=1M count=8 conv=fsync 2>/dev/null && umount /mnt/z
t_check dm-delay-fs sh -c "echo '0 $(cat /sys/block/nullb1/size) delay /dev/nullb1 0 300' | dmsetup create z0 --noudevsync && mount /dev/mapper/z0 /mnt/z"
t_tap freeze vps_test freeze /mnt/z/lun.img /mnt/z
t_check dm-delay-fs-remove sh -c "umount /mnt/z && dmsetup remove --noudevsync z0"
g=/sys/kernel/debug/vhost_pvscsi/gauges
t_match gauges-zero "$(cat $g | tr '\n' ' ')" '^open_devices 0 requests_in_flight 0 luns 0 $'
t_check unload rmmod vhost_pvscsi
vps_kmemleak_check kmemleak-after-unload
vps_dmesg_clean dmesg-clean
GUEST
