#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61 debug
# gate: 612
# checks: 53
#
# The multi-queue extension, the module's side (VPS_SETUP_QUEUE,
# PVSCSI_CMD_EXT_SETUP_QUEUES): tests/host/vps_test mq on null_blk.  The
# module offers it (not as a settable feature); refuses queues out of
# order, queue 0, a bad magic, bad page counts, pages outside the memory
# table, a bad pointer and eventfd indices beyond VPS_MAX_QUEUES; three
# queues beside queue 0 publish their ring sizes and a doorbell
# threshold of 1; a command on each completes on its own ring with its
# own interrupt (none on queue 0); data written through one queue reads
# back through another; bursts on all four at once complete once each, on
# their queue; a bus reset covers requests waiting unkicked in a queue;
# the completion event index works per queue; SETUP_RINGS drops the
# queues (a doorbell on one is not served, the next setup must start at
# 1 again); VPS_RESUME_QUEUE takes a queue back at the indices its state
# holds; an adapter reset drops them and no queue is taken without rings.
# Then vps_test mq-freeze: each queue has a worker of its own (its
# thread id in the adapter's debugfs file, for pinning), and the
# queues share no lock on the data path: while queue 1's worker waits in
# a WRITE to a file LUN on a frozen ext4 (fsfreeze), queue 2 serves a
# READ and a TEST UNIT READY and the stats are read; after the thaw the
# WRITE completes and reads back.  Last, vps_test worker-fail: a worker
# whose creation fails (the module's fail_once hook "worker") at
# VHOST_SET_OWNER, at a queue's VPS_SET_KICK_FD and at its
# VPS_SETUP_QUEUE fails that ioctl with ENOMEM and leaves nothing half
# done: no owner, no thread, no doorbell connected, no queue taken; each
# retry works and every queue serves I/O.  And the hook "backing_nomem":
# a WRITE, then a READ, whose backing answers ENOMEM answers TASK SET
# FULL, the retry GOOD and the data read back (HARDWARE ERROR until
# 2026-12-07: a guest's write failed for a passing shortage).  And the
# hook "req_nomem": with no memory for requests for 100 ms, a TEST UNIT
# READY waits in its slot, tried again a tick at a time (2 to 100 failed
# tries; until 2026-12-07 the worker spun on it, thousands), and
# completes GOOD once the shortage ends.
. "$(dirname "$0")/../../scripts/vm/harness.sh"

vm_modules null_blk ext4
vm_ours vhost_pvscsi
vm_bins "$VPS_TOP/tests/host/vps_test" mkfs.ext4 fsfreeze
VM_MEM=1024
vm_run host-mq <<'GUEST'
modprobe -r null_blk
modprobe null_blk nr_devices=2 gb=1 memory_backed=1
t_check load vps_load vhost_pvscsi
t_tap mq vps_test mq /dev/nullb0
mkdir -p /mnt/z
t_check mkfs sh -c "mkfs.ext4 -q -E nodiscard /dev/nullb1 && mount /dev/nullb1 /mnt/z &&
	dd if=/dev/zero of=/mnt/z/lun.img bs=1M count=8 conv=fsync 2>/dev/null"
t_tap mq-freeze vps_test mq-freeze /dev/nullb0 /mnt/z/lun.img /mnt/z
t_check umount umount /mnt/z
t_tap worker-fail vps_test worker-fail /dev/nullb0
t_check unload rmmod vhost_pvscsi
vps_dmesg_clean dmesg
GUEST
