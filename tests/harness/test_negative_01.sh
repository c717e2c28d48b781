#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61
#
# The harness must report broken tests as failed.  Each case boots a VM
# that misbehaves in one way and checks that vm_run fails with the right
# reason: a script that exits 1, a failing check, a kernel WARNING (from
# tests/harness/kmod/vps_selftest.ko), a kernel panic, a hang (timeout),
# and a script that reports no check at all.
. "$(dirname "$0")/../lib/harness.sh"

expect_fail() { # case regex (guest script on stdin)
	local c=$1 want=$2 out rc
	out=$(vm_run "neg-$c" 2>&1)
	rc=$?
	if [ $rc = 0 ]; then
		echo "VPS-RESULT not ok negative/$c: vm_run passed a broken test"
	elif ! grep -qE "$want" <<< "$out"; then
		echo "VPS-RESULT not ok negative/$c: failed without /$want/: $(grep 'not ok' <<< "$out" | head -2 | tr '\n' ' ')"
	else
		echo "VPS-RESULT ok negative/$c"
	fi
	rm -rf "$VPS_LOGDIR/neg-$c.$VM_KERNEL"
}

expect_fail exit1 'not ok neg-exit1/script-exit' <<'GUEST'
t_ok fine
exit 1
GUEST

expect_fail check 'not ok neg-check/false-check' <<'GUEST'
t_check false-check false
GUEST

vm_ours vps_selftest
expect_fail warn 'not ok neg-warn/vm: .*kernel log: .*WARNING' <<'GUEST'
t_check load vps_load vps_selftest warn=1
GUEST
vm_reset

expect_fail panic 'not ok neg-panic/vm: QEMU exited' <<'GUEST'
t_ok before-panic
echo c > /proc/sysrq-trigger
GUEST

VM_TIMEOUT=20
expect_fail hang 'not ok neg-hang/vm: timeout' <<'GUEST'
t_ok before-hang
sleep 600
GUEST
vm_reset

expect_fail silent 'not ok neg-silent/vm: the guest reported no checks' <<'GUEST'
true
GUEST

# and a clean module load passes: the WARN case failed for its WARN only
vm_ours vps_selftest
vm_run selftest-clean <<'GUEST'
t_check load vps_load vps_selftest
t_check unload rmmod vps_selftest
GUEST
