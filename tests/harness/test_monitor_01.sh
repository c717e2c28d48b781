#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# gate: 612
# checks: 4
#
# The guest's channel to QEMU's monitor (vm_monitor, VPS-MON lines): a
# command reaches the monitor whole even when the serial port is caught
# mid-line.  The guest writes a `logfile` command in two halves a second
# apart (the feeder looks every 0.2 s, so it sees the first half alone),
# then turns on the trace event of HMP commands and runs one.  The log
# must land in the file named whole and hold that command, and no file
# named by the first half may exist.  Regression test: the feeder sent
# the half line, then skipped the whole one, and a benchmark run's trace
# file went missing (guest/test_bench_01: "9 of 10 runs measured").
. "$(dirname "$0")/../../scripts/vm/harness.sh"

# outside the VM's log folder, which a passing vm_run removes
dir=$(mktemp -d /tmp/vps-monitor-XXXXXX)
trap 'rm -rf "$dir"' EXIT
vm_monitor
vm_run monitor <<GUEST
if printf 'VPS-MON logfile $dir/split-' >&3 && sleep 1 && printf 'whole.log\n' >&3 &&
	echo "VPS-MON trace-event handle_hmp_command on" >&3 && echo "VPS-MON info version" >&3; then
	t_ok sent
else
	t_fail sent "a write to the monitor channel (fd 3) failed"
fi
sleep 2
GUEST
rc=$?
if [ -e "$dir/split-" ]; then
	echo "VPS-RESULT not ok monitor/no-half-command: QEMU got the first half alone (logfile $dir/split-)"
else
	echo "VPS-RESULT ok monitor/no-half-command"
fi
if grep -q 'cmdline: info version' "$dir/split-whole.log" 2>/dev/null; then
	echo "VPS-RESULT ok monitor/whole-command"
else
	echo "VPS-RESULT not ok monitor/whole-command: $dir/split-whole.log lacks the traced 'info version'"
fi
exit $rc
