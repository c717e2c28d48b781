#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61 debug
# gate: 612
# checks: 16
#
# The ring fuzzer's bounded slice (tests/host/vps_fuzz.c): a fixed seed
# for 10 s (the same stream every run), then a fresh seed for
# VPS_FUZZ_SECONDS (20) seconds, then the fresh seed + 1 for 10 s with the
# disk behind dm-delay (3 ms per I/O, so that resets, aborts, detaches and
# closes catch backing I/O in flight): random and mutated descriptors, SG lists,
# ring-state index writes, resets, aborts, attach/detach, memory table
# changes and closes, migration stops (VPS_STOP: nothing in flight once
# stopped, nothing consumed until run again) with the dirty log turned
# on, off and checked while stopped, further queues of the multi-queue
# extension (VPS_SETUP_QUEUE, valid and refused, the I/O spread over
# them), interleaved with I/O against null_blk, an ext4 file
# and a read-only brd LUN.  Every completion valid, once and on the
# queue it was posted on, no hang in a sane epoch, the gauges at 0 after
# every close, every run reached the queues, the module unloads.
# A run's first refused queue set-up is made sure of (vps_fuzz.c
# add_queue): left to a 1-in-7 draw, a slow debug-kernel run missed it.
# No short run checks that here: how far a short run gets depends on
# timing (300 iterations reached the queues once under a loaded gate).
# The fresh seed is in the check's name: replay it with VPS_FUZZ_SEED=N.
# In the gate (tests/run --tier gate) the "fresh" seed is a fixed one too:
# the gate must fail only on a change, and fresh seeds run in check-full.
. "$(dirname "$0")/../../scripts/vm/harness.sh"

secs=${VPS_FUZZ_SECONDS:-20}
if [ "${VPS_TIER:-full}" = gate ]; then
	seed=${VPS_FUZZ_SEED:-20261202}
else
	seed=${VPS_FUZZ_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
fi
echo "fuzz seed $seed"
vm_modules null_blk brd ext4 dm_mod dm_delay
vm_ours vhost_pvscsi
vm_bins "$VPS_TOP/tests/host/vps_fuzz" mkfs.ext4 dmsetup
VM_MEM=1536
vm_run host-fuzz <<GUEST
modprobe -r null_blk
modprobe null_blk nr_devices=1 gb=1 memory_backed=1 discard=1
modprobe -r brd
modprobe brd rd_nr=2 rd_size=262144
mkfs.ext4 -q /dev/ram1 && mkdir -p /mnt/f && mount /dev/ram1 /mnt/f
truncate -s 200M /mnt/f/lun.img
t_check load vps_load vhost_pvscsi
fz() { vps_fuzz "\$@" /dev/nullb0 /mnt/f/lun.img /dev/ram0; }
t_tap seed-1 fz --seed 1 --seconds 10 --iterations 100000000
t_tap seed-$seed fz --seed $seed --seconds $secs --iterations 100000000
export DM_DISABLE_UDEV=1
t_check dm-delay sh -c "echo '0 \$(cat /sys/block/nullb0/size) delay /dev/nullb0 0 3' | dmsetup create slow --noudevsync"
t_tap slow-seed-$((seed + 1)) vps_fuzz --seed $((seed + 1)) --seconds 10 --iterations 100000000 \
	/dev/mapper/slow /mnt/f/lun.img /dev/ram0
t_check dm-delay-remove dmsetup remove --noudevsync slow
g=/sys/kernel/debug/vhost_pvscsi/gauges
t_match gauges-zero "\$(cat \$g | tr '\n' ' ')" '^open_devices 0 requests_in_flight 0 luns 0 \$'
t_check unload rmmod vhost_pvscsi
vps_kmemleak_check kmemleak-after-unload
vps_dmesg_clean dmesg-clean
GUEST
