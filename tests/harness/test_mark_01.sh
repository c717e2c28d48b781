#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61
# gate: 612
# checks: 7
#
# A mark the host VM answers (scripts/vm/guest.sh's vps_mark and
# vps_inner_ack), in a VM with the "vps.ack" virtio serial port an inner
# guest gets, the test script playing the host VM.  The answered mark
# waits for its answer (sent 3 s after the mark, an answer to another
# mark first, which must be skipped) and returns 0; an unanswered one
# gives up after its seconds, returns non-zero and fails check
# mark-<MARK>.  The stack tests' inner guests slept a fixed time after
# such marks before (test_stack_02: 41 s in all).
. "$(dirname "$0")/../../scripts/vm/harness.sh"

# The port, its fifos and the answers are guest.sh's own (vps_ack_port,
# vps_inner_ack), run here in busybox sh as in a host VM.
n=vpsmark$$
acker=
trap '[ -z "$acker" ] || kill "$acker" 2>/dev/null; rm -f /tmp/$n.ack.in /tmp/$n.ack.out' EXIT
lib() { busybox sh -c ". '$VPS_TOP/scripts/vm/guest.sh'; $*"; }
vm_modules virtio_pci virtio_console
# shellcheck disable=SC2046
vm_qemu -device virtio-serial-pci,id=vser,max_ports=3 $(lib vps_ack_port "$n")
con=$VPS_LOGDIR/mark.$VM_KERNEL/console.log
rm -rf "$VPS_LOGDIR/mark.$VM_KERNEL"
(
	until grep -aq '^VPS-MARK answered' "$con" 2>/dev/null; do sleep 0.2; done
	sleep 3
	lib vps_inner_ack "$n" other
	lib vps_inner_ack "$n" answered
) &
acker=$!

vm_run mark <<'GUEST'
read -r t0 _ < /proc/uptime
vps_mark answered 60
t_equal answered-returns "$?" 0
read -r t1 _ < /proc/uptime
echo "# answered after $(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}') s"
t_check answered-waited awk -v a="$t0" -v b="$t1" 'BEGIN {exit !(b - a >= 3)}'
t_check answered-in-time awk -v a="$t0" -v b="$t1" 'BEGIN {exit !(b - a < 30)}'
# unanswered: its failure goes to a file here, not to this VM's results
( vps_mark unanswered 4 ) 3> /tmp/unanswered.res
rc=$?
rm -f /tmp/.vps-failed
read -r t2 _ < /proc/uptime
echo "# unanswered: gave up after $(awk -v a="$t1" -v b="$t2" 'BEGIN {print b - a}') s, exit $rc: $(cat /tmp/unanswered.res)"
t_check unanswered-returns-error test "$rc" -ne 0
t_match unanswered-fails-its-check "$(cat /tmp/unanswered.res)" \
	'^VPS-RESULT not ok mark-unanswered: no answer from the host VM in 4 s$'
t_check unanswered-gives-up-in-time awk -v a="$t1" -v b="$t2" 'BEGIN {exit !(b - a >= 4 && b - a < 15)}'
GUEST
