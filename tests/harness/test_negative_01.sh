#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61
# gate: 612
# checks: 15
# checks-61: 9
#
# The harness must report broken tests as failed.  Each case boots a VM
# that misbehaves in one way and checks that vm_run fails with the right
# reason: a script that exits 1, a failing check, a kernel WARNING (from
# tests/harness/kmod/vps_selftest.ko), a kernel panic, a hang (timeout),
# and a script that reports no check at all.  On 6.12 only, nested host
# VMs (VM_NESTED=1): none is run again, whatever killed it.  A fault with
# the emulation's signature (faked here: the guest prints it and resets
# itself), a reset with nothing logged, a host VM whose heartbeat stops
# (stopped early, not at its timeout) and an inner guest found frozen
# (VPS-INNER-FROZEN, faked) each fail, and the TAP stream names the
# signature (VPS-FAULT); another panic and a panic with a frame of one of
# our modules fail without it.
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

VM_TIMEOUT=12
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

# --- the nested-TCG fault: named, never excused (harness.sh) ---
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
# fails_named CASE REGEX FAULT: the run (guest script on stdin) fails with
# REGEX; FAULT (a regex) is in the fault's name in its VPS-FAULT line, or
# is "" for no such line
failed_ok() { # regex, fault, output
	[ "$(head -1 <<< "$3")" != 0 ] && grep -qE "$1" <<< "$3" || return 1
	if [ -n "$2" ]; then grep -qE "^VPS-FAULT neg-.*: the nested-TCG fault's signature \(.*$2" <<< "$3"
	else ! grep -q '^VPS-FAULT ' <<< "$3"; fi
}
fails_named() {
	local r
	r=$(nested_case "$1")
	said "nested-$1" "$1" "$r" failed_ok "$2" "$3" "$r"
}
fails_named fault 'not ok neg-fault/vm: QEMU exited 0' 'corrupted stack end' <<GUEST
$guest_lib
t_ok before
fake_fault
GUEST
fails_named silent-reset 'not ok neg-silent-reset/vm: QEMU exited 0' 'reset with nothing logged' <<'GUEST'
t_ok before
echo b > /proc/sysrq-trigger
GUEST
# a frozen host VM: its heartbeat stops, the harness stops it long before
# its timeout
# its timeout; the emulator's state of its vCPU is read (gdb on QEMU) and
# an NMI probes it: this planted freeze is an idle VM that still takes
# interrupts, so its console speaks again
freeze_emu_ok() {
	grep -qE '^emu: halted=[01] interrupt_request=0x[0-9a-f]+' "$1" &&
		grep -qE '^emu: hflags=0x[0-9a-f]+ hflags2=0x[0-9a-f]+ eflags=0x[0-9a-f]+ ' "$1" &&
		grep -q '^emu: apic timer expire=' "$1" &&
		grep -q '^lapic: ' "$1" &&
		grep -q '^emu: after an NMI the console spoke again' "$1"
}
r=$(VPS_HEARTBEAT_DEAD=15 nested_case freeze-emu <<'GUEST'
t_ok before
kill "$(cat /tmp/.vps-heartbeat.pid)"
sleep 600
GUEST
)
said nested-freeze "freeze-emu" "$r $(cat "$VPS_LOGDIR/neg-freeze-emu.$VM_KERNEL/frozen-regs" 2>/dev/null)" \
	eval 'failed_ok "not ok neg-freeze-emu/vm: the VM froze" "froze: console silent for [0-9]+ s; RIP [0-9a-f]+: kernel text" "$r" &&
	freeze_emu_ok "$VPS_LOGDIR/neg-freeze-emu.$VM_KERNEL/frozen-regs"'
# an inner guest that froze with nothing of ours involved (guest.sh,
# vps_inner_stuck says so: faked here) while the host VM ran on
fake_inner_frozen() {
	t_fail in0/reached-x "the inner guest never printed VPS-MARK x"
	echo "VPS-INNER-FROZEN in0 in0/reached-x: console silent 200 s, 1 QEMU thread(s) running, nothing in flight" >&3
	t_fail in0/vm "inner QEMU exit 137, verdict 'none'"
}
guest_lib="$guest_lib
$(declare -f fake_inner_frozen)"
fails_named inner-frozen 'not ok neg-inner-frozen/in0/reached-x' 'inner guest in0 froze \(console silent 200 s' <<GUEST
$guest_lib
t_ok before
fake_inner_frozen
GUEST
# not the emulation's: another panic, a frame of one of our modules
fails_named other-panic 'not ok neg-other-panic/vm: QEMU exited' '' <<'GUEST'
t_ok before
echo c > /proc/sysrq-trigger
GUEST
fails_named our-frame 'not ok neg-our-frame/vm: QEMU exited 0' '' <<GUEST
$guest_lib
t_ok before
fake_fault " vps_round+0x1c/0x200 [vhost_pvscsi]"
GUEST
