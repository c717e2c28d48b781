#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# checks: 5
# serial: it times fio jobs (the demo's table): another test beside it would skew them
#
# make demo as a user runs it (scripts/demo, 4 s per fio job): it exits 0,
# says PASSED, prints the table with both devices at both queue depths,
# and showed its progress while it ran (each guest's boot from its disk
# image, and fio jobs with the job length).  Regression: the demo once ended with exit 1
# after a VM that passed (the harness's watcher returned 143 under the
# demo's errexit).  check-full only: the gate's nested tests cover the
# same path.
TOP=$(cd "$(dirname "$0")/../.." && pwd)
out=$("$TOP/scripts/demo" 4 2>&1)
rc=$?
echo "$out" | sed 's/^/# /'
res() { if [ "$2" = 0 ]; then echo "VPS-RESULT ok demo/$1"; else echo "VPS-RESULT not ok demo/$1: $3"; fi; }
res exit-0 "$rc" "exit $rc"
echo "$out" | grep -q 'PASSED: both guests ran'
res says-passed $? "no PASSED line"
n=$(echo "$out" | grep -cE '^(vhost-pvscsi|pvscsi) +qd(1|16) +[0-9]+ ')
res table-rows "$([ "$n" = 4 ]; echo $?)" "$n of 4 table rows"
# each guest boots from its disk on the adapter, no -kernel (issue 18)
echo "$out" | grep -q 'booting the inner guest on -device vhost-pvscsi (KVM, vmw_pvscsi) from its disk on the adapter (SeaBIOS, no -kernel)' &&
	echo "$out" | grep -q 'booting the inner guest on -device pvscsi (KVM, vmw_pvscsi) from its disk'
res progress-boots $? "no progress line for a guest's boot"
echo "$out" | grep -q 'fio qd16 running (4 s)'
res progress-jobs $? "no progress line for a fio job with its length"
