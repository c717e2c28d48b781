#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# gate: 612
# checks: 7
#
# scripts/bench's report (scripts/vm/bench-report.py) from a made-up raw
# file, no VM: two rounds of one job on ours-vmw and virtio-scsi.  The
# ratio column is the medians' quotient, per-I/O counts are per I/O, and
# the windows line names a run whose host window was more than twice the
# median (idle time counted in its per-I/O figures: the 2026-12-07
# all-job run's first window held 20 s of it, unnoticed until read by
# hand), with the guest's own measures of that run (from the answer to
# its start mark to fio's end) and of its marks' exchanges: where the
# time went; and says "none" when no window is that long.
TOP=$(cd "$(dirname "$0")/../.." && pwd)
. "$TOP/scripts/lib.sh"
w=$(mktemp -d /tmp/vps-benchreport-XXXXXX)
trap 'rm -rf "$w"' EXIT
res() { vps_result "benchreport/$1" "$2" "$3"; }

# run TAG DEV ROUND IOS IOPS EXITS WIN_MS GUEST_MS [MARK_END_MS]: a run's
# guest and host halves
run() {
	echo "tag=$1 dev=$2 backing=null job=rr32 round=$3 ios=$4 iops=$5 p50_us=100 p99_us=900 guest_irqs=$(($4 / 10)) guest_ms=$8 mark_start_ms=700 mark_end_ms=${9:-600}"
	echo "tag=$1 exits=$6 mmio_exits=0 io_exits=0 irq_injections=$(($4 / 4)) cpu_ms=$(($4 / 2)) vps_kicks=0 vps_calls=0 vps_cmps=0 vps_bells=0 win_ms=$7"
}
{
	run r1-null-rr32-ours-vmw ours-vmw 1 8000 2000 4000 5600 4500
	run r1-null-rr32-virtio-scsi virtio-scsi 1 4000 1000 4000 5700 4600
	run r2-null-rr32-virtio-scsi virtio-scsi 2 4800 1200 4800 5800 4500
	run r2-null-rr32-ours-vmw ours-vmw 2 9600 2400 4800 24400 4700 19000
} > "$w/raw"
rc=0
python3 "$TOP/scripts/vm/bench-report.py" "$w/raw" "$w/md" "$w/dat" 2> "$w/err" || rc=$?
res report-written "$([ "$rc" = 0 ] && [ -s "$w/md" ]; echo $?)" "exit $rc: $(head -c 300 "$w/err")"
row=$(grep '^| ours-vmw |' "$w/md")
# medians: 2200 against 1100 IOPS; 0.5 exits per I/O in both rounds
res ratio "$(echo "$row" | grep -q '^| ours-vmw | 2200 | 2000-2400 | 2.00 |'; echo $?)" "row: $row"
res per-io "$(echo "$row" | awk -F'|' '{print $8, $11}' | grep -q '^ 0.50   0.10 $'; echo $?)" "row: $row"
win=$(grep '^Windows' "$w/md")
res long-window-named "$(echo "$win" | grep -q "median 5750 ms, 5600-24400 ms;.*: r2-null-rr32-ours-vmw (24400 ms, the guest's run 4700 ms, its marks' exchanges 700 + 19000 ms)\.\$"; echo $?)" "$win"
# a raw file from before guest_ms: the window alone
sed 's/ guest_ms=[0-9]*//; s/ mark_[a-z]*_ms=[0-9]*//g' "$w/raw" > "$w/raw0"
python3 "$TOP/scripts/vm/bench-report.py" "$w/raw0" "$w/md0" "$w/dat0" 2> "$w/err"
win=$(grep '^Windows' "$w/md0")
res long-window-without-guest-ms "$(echo "$win" | grep -q ': r2-null-rr32-ours-vmw (24400 ms)\.$'; echo $?)" "$win"
# the same runs with the long window as long as the others: none named
sed -i 's/win_ms=24400/win_ms=5900/' "$w/raw"
: > "$w/md"
python3 "$TOP/scripts/vm/bench-report.py" "$w/raw" "$w/md" "$w/dat" 2> "$w/err"
win=$(grep '^Windows' "$w/md")
res no-long-window "$(echo "$win" | grep -q 'median 5750 ms, 5600-5900 ms;.*: none\.$'; echo $?)" "$win"
# no window recorded (a raw file from before win_ms): said so
sed -i 's/ win_ms=[0-9]*//' "$w/raw"
: > "$w/md"
python3 "$TOP/scripts/vm/bench-report.py" "$w/raw" "$w/md" "$w/dat" 2> "$w/err"
res no-windows "$(grep -q '^Windows: none recorded\.$' "$w/md"; echo $?)" "$(grep '^Windows' "$w/md")"
