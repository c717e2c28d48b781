#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61 debug
# gate: 612
# checks: 18
#
# eh_abort under load: fio randwrite+verify=crc32c (4k, QD 4) runs on
# disk A with a 2 s SCSI timeout; during its write phase the QEMU monitor
# throttles the drive to 1 IOPS (block_set_io_throttle), so queued
# commands outlive their timeout.  The midlayer aborts them: pvscsi_mq's eh_abort issues
# ABORT_CMD, QEMU's stock pvscsi cancels the request and posts it back
# with BTSTAT_ABORTQUEUE, the handler waits for that completion and
# reports SUCCESS, and the midlayer retries the command.  Once the guest
# sees an abort the throttle is lifted.  fio must verify clean, a
# verify-only pass must too, the abort counter must have moved without a
# failed abort, every request must come back through the completion
# ring, and QEMU's own trace must show ABORT_CMD arriving.
. "$(dirname "$0")/../../scripts/vm/harness.sh"
. "$(dirname "$0")/guest.sh"

guest_setup abort
vm_bins fio
vm_monitor
vm_qemu -D "$d/trace.log" -trace enable=pvscsi_on_cmd_abort
guest_hba
guest_disk d0 64M 0
out=$(vm_run guest-abort <<'GUEST'
mon() { echo "VPS-MON $*" >&3; }
t_check load vps_load pvscsi_mq
h=$(basename "$(dirname "$(grep -l '^pvscsi_mq$' /sys/class/scsi_host/host*/proc_name | head -1)")")
hn=${h#host}
st=/sys/class/scsi_host/$h/pvscsi
t_check disk vps_wait 20 vps_has_sd "$hn:0:0:0"
n=$(vps_sd_dev "$hn:0:0:0")
a=/dev/$n
echo 2 > /sys/block/$n/device/timeout
t_equal timeout-2s "$(cat /sys/block/$n/device/timeout)" 2
common="--direct=1 --ioengine=libaio --bs=4k --iodepth=4 --rw=randwrite --verify=crc32c --verify_fatal=1 --size=$(vps_dbg 32M 8M) --output-format=terse --minimal"
fio --name=r --filename=$a --do_verify=1 $common > /tmp/fio.out 2>&1 &
pid=$!
# still in fio's write phase (8192 writes; 2048 dearer ones on the debug
# kernel): the aborted commands are WRITEs
sleep 1
t_check fio-running kill -0 $pid
# 1 IOPS: with 4 commands queued, each waits up to 4 s > its 2 s timeout
mon block_set_io_throttle d0 0 0 0 1 0 0
aborted() { test "$(cat $st/aborts)" -gt 0; }
t_check abort-happened vps_wait 60 aborted
mon block_set_io_throttle d0 0 0 0 0 0 0
wait $pid
rc=$?
tail -3 /tmp/fio.out
t_equal fio-verify-across-aborts "$rc" 0
t_check fio-verify-only fio --name=r --filename=$a --verify_only=1 $common
dmesg | grep -E 'abort|timing out' | head -20
t_match aborted-writes "$(dmesg | grep 'abort tag')" 'op 0x2a'
echo "aborts=$(cat $st/aborts) failed=$(cat $st/aborts_failed) device_resets=$(cat $st/device_resets) bus_resets=$(cat $st/bus_resets) host_resets=$(cat $st/host_resets)"
t_check aborts-counted test "$(cat $st/aborts)" -ge 1
t_equal aborts-failed "$(cat $st/aborts_failed)" 0
t_equal no-escalation "$(cat $st/device_resets)/$(cat $st/bus_resets)/$(cat $st/host_resets)" 0/0/0
t_equal no-bogus "$(cat $st/bogus_completions)" 0
# no host reset: the device gave every request back, aborted ones included
echo "requests=$(cat $st/requests) completions=$(cat $st/completions)"
# (two reads that fail would be equal too)
t_check requests-counted test "$(cat $st/requests)" -gt 0
t_equal all-accounted "$(cat $st/completions)" "$(cat $st/requests)"
t_check after-abort-io fio --name=b --filename=$a --do_verify=1 $common --size=4M --iodepth=32
echo "VPS-REPORT abort aborts=$(cat $st/aborts)" >&3
vps_dmesg_clean dmesg
GUEST
)
echo "$out"
# the device side: QEMU saw ABORT_CMD (not just the guest counting them)
n=$(grep -ac 'pvscsi_on_cmd_abort' "$d/trace.log")
echo "QEMU pvscsi_on_cmd_abort events: $n"
if [ "$n" -ge 1 ]; then
	echo "VPS-RESULT ok guest-abort/device-saw-abort-cmd"
else
	echo "VPS-RESULT not ok guest-abort/device-saw-abort-cmd: no pvscsi_on_cmd_abort in QEMU's trace"
fi
