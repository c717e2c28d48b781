#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61 debug
# gate: 612
# checks: 37
#
# The module's busy-polling (poll_us), in a VM with two vCPUs (polling
# helps only while the guest runs on another CPU; on one, the poller gives
# the CPU up at once): tests/host/vps_test poll, a guest simulator at
# queue depth 1 that follows the doorbell rule and spins on its completion
# ring, pinned to CPU 1 with the module's worker on CPU 0 (left to the
# scheduler, whether any request is polled varies from machine to
# machine: 0 of 200 on one, 191 on another).  poll_us is the cap, 20 ms:
# a busy host takes a TCG vCPU off its CPU for milliseconds (1 ms polls
# caught 12 of 2000 requests on one CI machine).  Every request completes
# once, and the polling worker takes at least 20 of them with no
# doorbell; an ioctl (VPS_ABORT) issued while the worker polls waits a
# few milliseconds, not the poll's 20 (the worker yields to the control
# path); a thread issuing ioctls back to back does not starve the worker
# (50 doorbelled requests within 10 s); poll_us is 0 again afterwards.
# Then the interrupt held while the guest posts (hold_us), in the same VM:
# tests/host/vps_test hold, batches of 8 requests 100 us apart, the
# doorbell by the same rule, reaped in the interrupt as vmw_pvscsi does:
# 10 batches take one interrupt each (within 200), and requests came
# while held (a module that does not hold has none), unless the batches
# formed by themselves without hold_us (the debug kernel), and later
# batches are signalled once all 8 are out (the ceiling a hold learnt),
# not after hold_us of quiet; the holds learnt a mean gap between
# requests, and with hold_gaps 1 (the window that mean) a burst of 3 that
# ends below the ceiling waits for its interrupt no more than the mean and
# 2 ms (twice the mean where that is more: the host VM's stalls); a
# queue-depth-1 guest after them is held once at most; with poll_us on,
# the passes a wasted hold waits out are counted once a pass (the drop in
# hold_skip at most the doorbells rung, in a run where a pass polled),
# not once per request the pass took; every request completes once;
# hold_us is its default (2000) again afterwards, as the other modes of
# vps_test leave it (they run with 0); new rings keep nothing the holds learnt
# (hold_skip and hold_ceiling 0); vps_test burst (scripts/bench-host's
# measure of what the hold costs bursts) runs with the module as set,
# measures both burst sizes, and refuses bad sizes; the module unloads.
. "$(dirname "$0")/../../scripts/vm/harness.sh"

vm_modules null_blk
vm_ours vhost_pvscsi
vm_bins "$VPS_TOP/tests/host/vps_test"
VM_MEM=1024
VM_SMP=2
vm_run host-poll <<'GUEST'
modprobe -r null_blk
modprobe null_blk nr_devices=1 gb=1 memory_backed=1
t_check load vps_load vhost_pvscsi
t_tap poll vps_test poll /dev/nullb0
t_equal poll-us-default-again "$(cat /sys/module/vhost_pvscsi/parameters/poll_us)" 0
t_tap hold vps_test hold /dev/nullb0
t_equal hold-us-default-again "$(cat /sys/module/vhost_pvscsi/parameters/hold_us)" 2000
t_equal hold-gaps-default-again "$(cat /sys/module/vhost_pvscsi/parameters/hold_gaps)" 16
# scripts/bench-host's burst runs: the module as it is set, both sizes
# measured, every request completed (it exits 1 on a lost or failed
# one), bad sizes refused
out=$(vps_test burst /dev/nullb0 1 8,3 1000 50)
t_equal burst-ran "$?" 0
t_equal burst-sizes "$(echo "$out" | awk '$1 == "size" && $4 > 0 { printf "%s ", $2 }')" "8 3 "
t_equal burst-ios "$(echo "$out" | awk '$1 == "ios" { print ($2 >= 11) }')" 1
t_equal burst-hold-us-kept "$(cat /sys/module/vhost_pvscsi/parameters/hold_us)" 2000
t_check_fails burst-bad-sizes vps_test burst /dev/nullb0 1 8,x 0
t_check unload rmmod vhost_pvscsi
vps_dmesg_clean dmesg
GUEST
