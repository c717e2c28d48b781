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

w=$(mktemp -d /tmp/vps-mark-XXXXXX)
acker=
trap '[ -z "$acker" ] || kill "$acker" 2>/dev/null; rm -rf "$w"' EXIT
# what vps_inner_start gives an inner guest, and what vps_inner_ack writes
mkfifo "$w/ack.in" "$w/ack.out"
vm_modules virtio_pci virtio_console
vm_qemu -device virtio-serial-pci,id=vser,max_ports=2 \
	-chardev pipe,id=vps_ack,path="$w/ack" \
	-device virtserialport,bus=vser.0,nr=1,chardev=vps_ack,name=vps.ack
con=$VPS_LOGDIR/mark.$VM_KERNEL/console.log
rm -rf "$VPS_LOGDIR/mark.$VM_KERNEL"
(
	until grep -aq '^VPS-MARK answered' "$con" 2>/dev/null; do sleep 0.2; done
	sleep 3
	echo other 1<> "$w/ack.in"
	echo answered 1<> "$w/ack.in"
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
