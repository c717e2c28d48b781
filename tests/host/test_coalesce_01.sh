#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61 debug
# gate: 612
# checks: 16
#
# The module's interrupt coalescing (coalesce_us): tests/host/vps_test
# coalesce on a null_blk whose I/O takes 50 ms (irqmode=2), so that a READ
# stays in flight while TEST UNIT READYs complete beside it.  Their
# interrupt is held and comes by the timer before the READ is done; a
# burst of twelve shares at most four; a request alone in flight, and
# everything with coalesce_us=0, is signalled at once; an adapter closed
# with an interrupt held goes cleanly (on the debug kernel: KASAN,
# lockdep, kmemleak look at the timer's teardown).
. "$(dirname "$0")/../../scripts/vm/harness.sh"

vm_modules null_blk
vm_ours vhost_pvscsi
vm_bins "$VPS_TOP/tests/host/vps_test"
VM_MEM=1024
vm_run host-coalesce <<'GUEST'
modprobe -r null_blk
modprobe null_blk nr_devices=1 gb=1 irqmode=2 completion_nsec=50000000
t_check load vps_load vhost_pvscsi
t_tap coalesce vps_test coalesce /dev/nullb0
t_equal coalesce-us-default-again "$(cat /sys/module/vhost_pvscsi/parameters/coalesce_us)" 0
t_check unload rmmod vhost_pvscsi
vps_dmesg_clean dmesg
GUEST
