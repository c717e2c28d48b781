#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61 debug
# gate: 612
# checks: 24
#
# Resets under load: while fio randwrite+verify=crc32c (4k, QD 32) runs on
# disk A, sg_reset issues a device reset, a bus reset and a host reset
# (pvscsi_mq's eh handlers: RESET_DEVICE, RESET_BUS, ADAPTER_RESET with
# every outstanding command given back exactly once).  fio must still
# verify clean, a separate verify-only pass must too, the reset counters
# must show each reset, every request must be accounted for (completed
# by the device or failed back by the host reset), and the adapter must
# keep working afterwards (sg_turs, I/O to disk B).
. "$(dirname "$0")/../../scripts/vm/harness.sh"
. "$(dirname "$0")/guest.sh"

guest_setup reset
vm_bins fio sg_reset sg_turs
guest_hba
guest_disk d0 64M 0
guest_disk d1 64M 1
vm_run guest-reset <<'GUEST'
t_check load vps_load pvscsi_mq
h=$(basename "$(dirname "$(grep -l '^pvscsi_mq$' /sys/class/scsi_host/host*/proc_name | head -1)")")
hn=${h#host}
st=/sys/class/scsi_host/$h/pvscsi
t_check disks vps_wait 20 vps_has_sd "$hn:0:0:0" "$hn:0:1:0"
a=/dev/$(vps_sd_dev "$hn:0:0:0")
b=/dev/$(vps_sd_dev "$hn:0:1:0")
sz=$(vps_dbg 32M 8M)
common="--direct=1 --ioengine=libaio --bs=4k --iodepth=32 --rw=randwrite --verify=crc32c --verify_fatal=1 --size=$sz --output-format=terse --minimal"
for kind in device bus host; do
	n0=$(vps_blk_ios ${a#/dev/})
	fio --name=r --filename=$a --do_verify=1 $common > /tmp/fio-$kind.out 2>&1 &
	pid=$!
	# the reset is "under load" only if fio's I/O is flowing and fio still
	# runs when it fires: the disk's counters must have moved (a slow VM
	# may take seconds to submit the first I/O), then the queue fills
	t_check fio-io-started-$kind vps_io_started ${a#/dev/} "$n0"
	sleep 1
	case $kind in
	device) flag=-d ;;
	bus) flag=-b ;;
	host) flag=-H ;;
	esac
	t_check fio-running-at-$kind-reset kill -0 $pid
	t_check sg_reset-$kind sg_reset $flag $a
	wait $pid
	rc=$?
	tail -3 /tmp/fio-$kind.out
	t_equal fio-verify-during-$kind-reset "$rc" 0
done
t_check fio-verify-only fio --name=r --filename=$a --verify_only=1 $common
t_equal device-resets "$(cat $st/device_resets)" 1
t_equal bus-resets "$(cat $st/bus_resets)" 1
t_equal host-resets "$(cat $st/host_resets)" 1
dmesg | grep -E 'host reset done|device reset|bus reset'
# the first command after the bus reset gets the UNIT ATTENTION it owes
sg_turs $b || true
t_check after-reset-turs sg_turs $b
t_check after-reset-io fio --name=b --filename=$b --do_verify=1 $common --size=$(vps_dbg 8M 4M)
t_equal no-bogus "$(cat $st/bogus_completions)" 0
# each request was completed by the device or failed back by the reset
failed=$(dmesg | sed -n 's/.*host reset done, \([0-9]*\) commands failed back.*/\1/p' | tail -1)
echo "requests=$(cat $st/requests) completions=$(cat $st/completions) failed-back=$failed"
t_equal all-accounted "$(( $(cat $st/completions) + ${failed:-0} ))" "$(cat $st/requests)"
vps_dmesg_clean dmesg
GUEST
