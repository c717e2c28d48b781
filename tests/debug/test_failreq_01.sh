#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: debug
# checks: 32
#
# fail_make_request (the debug kernel's block-layer fault injection) under
# a LUN: a device-mapper LUN over null_blk whose chunk at block 1024 is
# mapped through a second dm device; make-it-fail on that one fails every
# bio to the chunk (reads, then writes) -> MEDIUM ERROR, each of a burst
# once, the rest clean; make-it-fail off -> the data intact and a new
# write + verify clean (tests/host/vps_test faults).
. "$(dirname "$0")/../../scripts/vm/harness.sh"

vm_modules null_blk dm_mod
vm_ours vhost_pvscsi
vm_bins "$VPS_TOP/tests/host/vps_test" dmsetup
vm_run debug-failreq <<'GUEST'
export DM_DISABLE_UDEV=1
modprobe -r null_blk
modprobe null_blk nr_devices=1 gb=1 memory_backed=1
t_check load vps_load vhost_pvscsi
S=$(cat /sys/block/nullb0/size)
B=1024
L=64
E=$((B + L))
fi=/sys/kernel/debug/fail_make_request
t_check fail-make-request-knobs sh -c "echo 100 > $fi/probability && echo 1 > $fi/interval && echo -1 > $fi/times && echo 0 > $fi/verbose"
t_check dm-mif sh -c "echo '0 $L linear /dev/nullb0 $B' | dmsetup create mif --noudevsync"
printf '0 %s linear /dev/nullb0 0\n%s %s linear /dev/mapper/mif 0\n%s %s linear /dev/nullb0 %s\n' \
	$B $B $L $E $((S - E)) $E > /tmp/top
t_check dm-top dmsetup create f1 --noudevsync /tmp/top
mif=$(dmsetup info -c --noheadings -o blkdevname mif | tr -d ' ')
t_match mif-name "$mif" '^dm-[0-9]+$'
for k in read write; do
	t_tap make-it-fail-$k vps_test faults /dev/mapper/f1 $B $k \
		"echo 1 > /sys/block/$mif/make-it-fail" "echo 0 > /sys/block/$mif/make-it-fail"
done
t_check dm-remove sh -c "dmsetup remove --noudevsync f1 && dmsetup remove --noudevsync mif"
t_check unload rmmod vhost_pvscsi
vps_kmemleak_check kmemleak-after-unload
vps_dmesg_clean dmesg-clean
GUEST
