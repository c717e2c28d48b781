#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61 debug
# gate: 612
# checks: 22
#
# The workers' scheduling policy (batch_workers): tests/host/vps_test
# batch reads the queue's worker's policy (sched_getscheduler) while it
# rings the doorbell for one request at a time and for four at once.
# SCHED_NORMAL for single requests; SCHED_BATCH once a round takes four,
# kept through seven single rounds and given up at the eighth; after 64
# single rounds one round's try of SCHED_BATCH, ended by a single
# request; batch_workers=0 keeps it SCHED_NORMAL after a batch, 2 makes
# it SCHED_BATCH for a single request; a change of policy that fails (the
# fail_once hook "setattr") leaves the worker as it was, counts in
# policy_failed, and the next round makes it; a real-time policy set from
# outside (SCHED_FIFO) is left alone.  Every command completes, and the
# debugfs counts batch_on and batch_off follow.  The re-armed ring's
# second look (recheck_ms) is put off for the test: a request it took
# would be a round the policy does not count, and the counts above would
# be off by one.
. "$(dirname "$0")/../../scripts/vm/harness.sh"

vm_modules null_blk
vm_ours vhost_pvscsi
vm_bins "$VPS_TOP/tests/host/vps_test"
VM_MEM=1024
vm_run host-batch <<'GUEST'
modprobe -r null_blk
modprobe null_blk nr_devices=1 gb=1
t_check load vps_load vhost_pvscsi
t_equal batch-workers-default "$(cat /sys/module/vhost_pvscsi/parameters/batch_workers)" 1
r=/sys/kernel/debug/vhost_pvscsi/recheck_ms
old=$(cat $r)
echo 60000 > $r
t_tap batch vps_test batch /dev/nullb0
echo "$old" > $r
t_check unload rmmod vhost_pvscsi
vps_dmesg_clean dmesg
GUEST
