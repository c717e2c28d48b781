#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61 debug
# gate: 612 61
# checks: 426
#
# vhost_pvscsi.ko driven by tests/host/vps_test, which plays VMM and guest
# over /dev/vhost-pvscsi.  Against a memory-backed null_blk (with discard),
# a sparse file on ext4 on brd (UNMAP -> punched holes) and a read-only brd
# LUN it checks: every ioctl and its errors, every emulated SCSI command
# with its data and sense, READ/WRITE 6/10/12/16 integrity with per-block
# patterns and SG lists that split blocks, hostile descriptors (context 0,
# bad CDB lengths, SG count/addresses/lengths, addresses outside the memory
# table, a producer more than a ring ahead, a completion consumer ahead of
# the producer), bad ring setups, kicks before setup, resets and aborts with
# I/O in flight (each command completes exactly once), the message ring;
# an O_APPEND LUN refused at attach; a memory table or ring setup that
# fails part-way leaves no half-set-up ring and a new setup works; two
# resets at once with I/O in flight (each command completes once); a LUN
# reset leaves the other LUN's completions alone; an abort or a LUN reset
# with the completion ring full and nothing reaped still consumes the whole
# request ring, each command completing once; a SIGKILLed owner whose
# fd another process holds lets go of the guest's RAM, its I/O and its
# LUNs, and the fd refuses the owner's ioctls; then the same run with brd as the
# disk; closing the fd with I/O in flight; null_blk made read-only on the
# host after the attach (blockdev --setro): UNMAP, WRITE SAME and WRITE
# refused DATA PROTECT, the data kept, and before that an UNMAP dropping
# the host's page cache of the range; an abort behind 128 UNMAPs of
# 64 MiB waits under 100 ms (500 on the debug kernel) or under an eighth
# of what all 128 took (a discard weighs a whole worker pass; VPD B0 caps
# one at 64 MiB); the worker in the
# owner's cgroup;
# and that the module unloads with no request or LUN left behind.
. "$(dirname "$0")/../../scripts/vm/harness.sh"

vm_modules null_blk brd ext4
vm_ours vhost_pvscsi
vm_bins "$VPS_TOP/tests/host/vps_test" mkfs.ext4
VM_MEM=1536
vm_run host-target <<'GUEST'
modprobe -r null_blk
modprobe null_blk nr_devices=1 gb=1 memory_backed=1 discard=1
modprobe -r brd
modprobe brd rd_nr=2 rd_size=262144
mkfs.ext4 -q /dev/ram1 && mkdir -p /mnt/f && mount /dev/ram1 /mnt/f
truncate -s 200M /mnt/f/lun.img
dd if=/dev/zero of=/dev/ram0 bs=1M count=16 2>/dev/null
t_check load vps_load vhost_pvscsi
t_check devnode test -c /dev/vhost-pvscsi
t_tap nullb vps_test check /dev/nullb0 /mnt/f/lun.img /dev/ram0
t_tap brd vps_test check /dev/ram0 /mnt/f/lun.img /dev/nullb0
t_tap close vps_test close-inflight /dev/nullb0
# a block device made read-only on the host after the attach refuses
# UNMAP and WRITE SAME too; an UNMAP drops the host's page cache of it
t_tap ro-bdev vps_test ro-bdev /dev/nullb0
# an abort waits for one discard at most, not for a ring of them: under
# 100 ms, 500 on the debug kernel (150 ms seen there; 24.7 s was the bug),
# or under an eighth of the time all of them took (a loaded host: 178.7 ms
# seen in a gate on 6.1)
t_tap discard-abort vps_test discard-abort /dev/nullb0 "$(vps_dbg 100 500)"
# the worker runs in the VMM's cgroups (6.1: a kthread moved there)
grep -q ' /sys/fs/cgroup ' /proc/mounts || mount -t cgroup2 none /sys/fs/cgroup
mkdir -p /sys/fs/cgroup/vps-owner
t_tap cgroup sh -c 'echo $$ > /sys/fs/cgroup/vps-owner/cgroup.procs && exec vps_test cgroup'
g=/sys/kernel/debug/vhost_pvscsi/gauges
t_match gauges-zero "$(cat $g | tr '\n' ' ')" '^open_devices 0 requests_in_flight 0 luns 0 $'
t_check unload rmmod vhost_pvscsi
t_check reload vps_load vhost_pvscsi
t_check unload-again rmmod vhost_pvscsi
vps_dmesg_clean dmesg-clean
GUEST
