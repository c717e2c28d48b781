#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61
# gate: 612
# checks: 19
#
# The harness must report broken tests as failed.  Each case boots a VM
# that misbehaves in one way and checks that vm_run fails with the right
# reason: a script that exits 1, a failing check, a kernel WARNING (from
# tests/harness/kmod/vps_selftest.ko), a kernel panic, a hang (timeout),
# and a script that reports no check at all.  On 6.12 only: a nested
# host VM (VM_NESTED=1) that dies of the nested-TCG fault is run once
# more, and only then: the fault twice fails, so do another panic, a
# panic with a frame of one of our modules, and a failing check (faked
# here: the guest prints the fault's signature and resets itself).  A
# nested host VM whose heartbeat stops is stopped early and run once more.
# An inner guest found frozen (VPS-INNER-FROZEN, faked) is rerun once when
# only the check that found it and its vm check failed; not twice, and
# not with any other failing check.
. "$(dirname "$0")/../../scripts/vm/harness.sh"

expect_fail() { vm_expect_fail negative "$@"; }

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

# --- the nested-TCG fault's one rerun (harness.sh _vm_nested_tcg_fault) ---
# A nested host VM boots 6.12 or the debug kernel, never 6.1: the rule is
# the harness's own, and proven where it is used.
[ "$VM_KERNEL" = 61 ] && exit 0
fake_fault() { # the signature, then an immediate reset (QEMU exits 0)
	printf '%s\n' "Kernel panic - not syncing: corrupted stack end detected inside scheduler" \
		"CPU: 0 UID: 0 PID: 204 Comm: qemu-system-x86 Tainted: G OE" "$@" > /dev/console
	echo b > /proc/sysrq-trigger
}
nested_case() { # case: run with VM_NESTED=1, guest script on stdin
	local out rc
	VM_NESTED=1
	out=$(vm_run "neg-$1" 2>&1)
	rc=$?
	vm_reset
	echo "$rc"
	echo "$out"
}
guest_lib=$(declare -f fake_fault)

# said RESULT CASE OUTPUT TEST...: report RESULT by TEST, with the case's
# output when it failed, and drop the case's logs
said() {
	local n=$1 c=$2 r=$3
	shift 3
	if "$@"; then
		echo "VPS-RESULT ok negative/$n"
	else
		echo "VPS-RESULT not ok negative/$n: $(tr '\n' ' ' <<< "$r" | cut -c1-300)"
	fi
	rm -rf "$VPS_LOGDIR/neg-$c.$VM_KERNEL"
}
# rerun_case RESULT CASE REGEX: the first attempt met the fault (guest
# script on stdin), the VPS-RERUN line says which (REGEX), the second
# attempt's checks are the ones that count and all pass, and the first
# attempt's console is kept
rerun_ok() { # case, regex, output
	[ "$(head -1 <<< "$3")" = 0 ] && grep -qE "^VPS-RERUN neg-$1: .*$2" <<< "$3" &&
		grep -q "VPS-RESULT ok neg-$1/second-attempt" <<< "$3" &&
		! grep -q 'VPS-RESULT not ok' <<< "$3" &&
		[ -s "$VPS_LOGDIR/neg-$1.$VM_KERNEL/console.attempt1.log" ]
}
rerun_case() {
	local r
	r=$(nested_case "$2")
	said "$1" "$2" "$r" rerun_ok "$2" "$3" "$r"
}
rerun_case nested-fault-rerun-passes rerun-passes 'corrupted stack end' <<GUEST
$guest_lib
t_ok before
grep -qw vps.attempt=1 /proc/cmdline && fake_fault
t_ok second-attempt
GUEST
rerun_case nested-silent-reset-rerun silent-reset 'reset with nothing logged' <<GUEST
t_ok before
grep -qw vps.attempt=1 /proc/cmdline && echo b > /proc/sysrq-trigger
t_ok second-attempt
GUEST

# a frozen host VM: its heartbeat stops, the harness stops it long before
# its timeout and runs it once more
VPS_HEARTBEAT_DEAD=20 rerun_case nested-freeze-rerun freeze 'froze: console silent for [0-9]+ s' <<'GUEST'
t_ok before
if grep -qw vps.attempt=1 /proc/cmdline; then
	kill "$(cat /tmp/.vps-heartbeat.pid)"
	sleep 600
fi
t_ok second-attempt
GUEST

# an inner guest that froze with nothing of ours involved (guest.sh,
# vps_inner_stuck says so: faked here) while the host VM ran on: rerun
# once when the check that found it and its vm check are all that failed
fake_inner_frozen() {
	t_fail in0/reached-x "the inner guest never printed VPS-MARK x"
	echo "VPS-INNER-FROZEN in0 in0/reached-x: console silent 200 s, 1 QEMU thread(s) running, nothing in flight" >&3
	t_fail in0/vm "inner QEMU exit 137, verdict 'none'"
}
guest_lib="$guest_lib
$(declare -f fake_inner_frozen)"
rerun_case nested-inner-frozen-rerun inner-frozen 'inner guest in0 froze \(console silent 200 s' <<GUEST
$guest_lib
t_ok before
grep -qw vps.attempt=1 /proc/cmdline && fake_inner_frozen
t_ok second-attempt
GUEST

# no_second_chance CASE REGEX RERUNS: the run fails with REGEX after
# RERUNS reruns (guest script on stdin)
failed_ok() { # regex, reruns, output
	[ "$(head -1 <<< "$3")" != 0 ] && grep -qE "$1" <<< "$3" &&
		[ "$(grep -c '^VPS-RERUN ' <<< "$3")" = "$2" ]
}
no_second_chance() {
	local r
	r=$(nested_case "$1")
	said "nested-$1" "$1" "$r" failed_ok "$2" "$3" "$r"
}
no_second_chance fault-twice 'not ok neg-fault-twice/vm: QEMU exited 0' 1 <<GUEST
$guest_lib
t_ok before
fake_fault
GUEST
no_second_chance other-panic 'not ok neg-other-panic/vm: QEMU exited' 0 <<'GUEST'
t_ok before
echo c > /proc/sysrq-trigger
GUEST
no_second_chance our-frame 'not ok neg-our-frame/vm: QEMU exited 0' 0 <<GUEST
$guest_lib
t_ok before
fake_fault " vps_round+0x1c/0x200 [vhost_pvscsi]"
GUEST
no_second_chance failed-check 'not ok neg-failed-check/false-check' 0 <<'GUEST'
t_check false-check false
GUEST
no_second_chance inner-frozen-twice 'not ok neg-inner-frozen-twice/in0/reached-x' 1 <<GUEST
$guest_lib
t_ok before
fake_inner_frozen
GUEST
no_second_chance inner-frozen-other-fail 'not ok neg-inner-frozen-other-fail/other-check' 0 <<GUEST
$guest_lib
t_check other-check false
fake_inner_frozen
GUEST
