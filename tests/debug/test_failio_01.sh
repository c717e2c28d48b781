#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: debug
# checks: 13
#
# The host out of memory under I/O: the debug kernel's FAILSLAB and
# FAIL_PAGE_ALLOC fail one in ten of the allocations the module's
# workers make (task-filter: only threads whose make-it-fail is set;
# vps_test failio sets it on each worker), while writes and their
# read-backs, flat and bounced (buffers off 512-byte alignment), go to a
# null_blk LUN and a file on ext4.  Each command must answer once, with
# its interrupt, GOOD or TASK SET FULL (a guest retries that, and so does
# vps_test); no other answer, nothing lost (each read-back equals its
# write); once the workers are let go every block reads back at the
# first try.  After: the module unloads, kmemleak finds nothing and the
# kernel log is clean.
. "$(dirname "$0")/../../scripts/vm/harness.sh"

vm_modules null_blk brd ext4
vm_ours vhost_pvscsi
vm_bins "$VPS_TOP/tests/host/vps_test" mkfs.ext4
vm_run debug-failio <<'GUEST'
modprobe -r null_blk
modprobe null_blk nr_devices=1 gb=1 memory_backed=1
modprobe -r brd
modprobe brd rd_nr=1 rd_size=131072
# Backings that allocate nothing of their own under the LUN once written:
# null_blk and brd allocate a page at a block's first write (and fail
# the write, ENOSPC or EIO, when they cannot: the backing's error, which
# the LUN reports), ext4 does at an extent's first write and at the
# writeback of dirty pages.  Every block the test touches is written
# first, and synced.
t_check prefill sh -c "dd if=/dev/zero of=/dev/nullb0 bs=1M count=8 oflag=direct status=none &&
	dd if=/dev/zero of=/dev/ram0 bs=1M count=128 oflag=direct status=none"
t_check ext4 sh -c "mkfs.ext4 -q /dev/ram0 && mkdir -p /mnt/f && mount /dev/ram0 /mnt/f &&
	dd if=/dev/zero of=/mnt/f/lun.img bs=1M count=32 conv=fsync status=none && sync"
t_check load vps_load vhost_pvscsi
# one in ten, forever, for the tasks marked (task-filter), sleeping
# allocations and single pages included, quietly
for k in failslab fail_page_alloc; do
	d=/sys/kernel/debug/$k
	echo 10 > $d/probability && echo 1 > $d/interval && echo -1 > $d/times &&
		echo Y > $d/task-filter && echo N > $d/ignore-gfp-wait &&
		echo 0 > $d/verbose || t_fail fault-knobs-$k "could not set $d"
done
echo N > /sys/kernel/debug/fail_page_alloc/ignore-gfp-highmem
echo 0 > /sys/kernel/debug/fail_page_alloc/min-order
t_tap failio vps_test failio /dev/nullb0 /mnt/f/lun.img
t_check unload rmmod vhost_pvscsi
umount /mnt/f
vps_kmemleak_check kmemleak-after-unload
vps_dmesg_clean dmesg-clean
GUEST
