#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: debug
# checks: 13
#
# Out of memory at every allocation of an adapter's set-up: the debug
# kernel's FAILSLAB and FAIL_PAGE_ALLOC, driven by the VMM's own thread's
# fail-nth (tests/host/vps_test failnth).  A round opens an adapter, sets
# it up (owner, memory table, a LUN, rings, message ring, eventfds, a
# second queue, the dirty log, stop and run, the LUN detached and attached
# again, an adapter reset and the rings and queue set up again), serves
# I/O and closes it, with the k-th allocation of one step failed; k goes
# up until the step makes fewer, then the next step.  Each failure must
# answer ENOMEM (or be one the step can do without), its retry and the
# later steps must take, and the adapter then serve a write, its
# read-back and a second queue's TUR.  After the sweep: no worker left,
# the module unloads, kmemleak finds nothing (the unwindings leak
# nothing) and the kernel log is clean.
. "$(dirname "$0")/../../scripts/vm/harness.sh"

vm_modules null_blk
vm_ours vhost_pvscsi
vm_bins "$VPS_TOP/tests/host/vps_test"
vm_run debug-failnth <<'GUEST'
modprobe -r null_blk
modprobe null_blk nr_devices=1 gb=1 memory_backed=1
t_check load vps_load vhost_pvscsi
# fail-nth fails the n-th allocation whatever its flags: sleeping ones
# (GFP_KERNEL) too, and single pages; and quietly (verbose 0: the counts
# of vps_test say what was failed)
fs=/sys/kernel/debug/failslab
fp=/sys/kernel/debug/fail_page_alloc
t_check fault-knobs sh -c "echo N > $fs/ignore-gfp-wait && echo 0 > $fs/verbose &&
	echo N > $fp/ignore-gfp-wait && echo N > $fp/ignore-gfp-highmem &&
	echo 0 > $fp/min-order && echo 0 > $fp/verbose"
t_tap failnth vps_test failnth /dev/nullb0
t_check unload rmmod vhost_pvscsi
vps_kmemleak_check kmemleak-after-unload
vps_dmesg_clean dmesg-clean
GUEST
