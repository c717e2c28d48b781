#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61 debug
# gate: 612
# checks: 23
#
# Hot plug through the message ring: while fio randwrite+verify=crc32c
# runs on disk A (target 0), the QEMU monitor adds a scsi-hd at target 5
# (device_add); QEMU posts DEV_ADDED, pvscsi_mq's message work adds the
# scsi_device, and the new disk takes verified I/O.  Then device_del:
# DEV_REMOVED, the scsi_device goes away.  A second add/remove round
# checks the message ring keeps going.  fio on disk A must verify clean
# throughout.
. "$(dirname "$0")/../../scripts/vm/harness.sh"
. "$(dirname "$0")/guest.sh"

guest_setup hotplug
vm_bins fio sg_inq
vm_monitor
guest_hba
guest_disk d0 64M 0
guest_disk hd1 64M
guest_disk hd2 64M
vm_run guest-hotplug <<'GUEST'
mon() { echo "VPS-MON $*" >&3; }
t_check load vps_load pvscsi_mq
h=$(basename "$(dirname "$(grep -l '^pvscsi_mq$' /sys/class/scsi_host/host*/proc_name | head -1)")")
hn=${h#host}
st=/sys/class/scsi_host/$h/pvscsi
t_check disk-a vps_wait 20 vps_has_sd "$hn:0:0:0"
a=/dev/$(vps_sd_dev "$hn:0:0:0")
t_equal msg-ring "$(cat $st/msg_ring)" 1
hot_present() { test -n "$(vps_sd_dev "$hn:0:5:0")"; }
# disk A: back-to-back verified fio runs until told to stop
(
	while [ ! -e /tmp/stop ]; do
		fio --name=a --filename=$a --direct=1 --ioengine=libaio --bs=4k --iodepth=16 \
			--rw=randwrite --do_verify=1 --verify=crc32c --verify_fatal=1 --size=$(vps_dbg 16M 4M) \
			--output-format=terse --minimal > /tmp/fio-a.out 2>&1 || { echo fail > /tmp/fio-a.rc; exit 1; }
		echo run >> /tmp/fio-a.runs
	done
) &
fpid=$!
sleep 2
for round in 1 2; do
	mon device_add scsi-hd,bus=hba.0,drive=hd$round,scsi-id=5,lun=0,id=hot$round
	t_check added-$round vps_wait 30 hot_present
	n=$(vps_sd_dev "$hn:0:5:0")
	t_check new-disk-block-$round vps_wait 10 test -b /dev/$n
	t_match new-disk-inq-$round "$(sg_inq /dev/$n 2>&1)" 'Vendor identification: QEMU'
	t_check new-disk-io-$round fio --name=h --filename=/dev/$n --direct=1 --ioengine=libaio \
		--bs=64k --iodepth=8 --rw=randwrite --do_verify=1 --verify=crc32c \
		--verify_fatal=1 --size=8M --output-format=terse --minimal
	mon device_del hot$round
	t_check removed-$round vps_wait 30 test ! -e "/sys/bus/scsi/devices/$hn:0:5:0"
	t_check fio-a-still-running kill -0 $fpid
done
: > /tmp/stop
wait $fpid
rc=$?
tail -2 /tmp/fio-a.out
echo "disk A: $(wc -l < /tmp/fio-a.runs) verified fio runs"
t_equal fio-verify-during-hotplug "$rc" 0
# (fio-a-still-running showed disk A busy at each round; a KASAN kernel
# may finish only one 16 MiB run meanwhile)
t_check fio-runs test "$(wc -l < /tmp/fio-a.runs)" -ge 1
t_equal msgs "$(cat $st/msgs)" 4
t_equal no-bogus-msgs "$(cat $st/bogus_msgs)" 0
dmesg | grep -E 'device (added|removed)'
t_equal added-logged "$(dmesg | grep -c 'device added: 0:5:0')" 2
t_equal removed-logged "$(dmesg | grep -c 'device removed: 0:5:0')" 2
vps_dmesg_clean dmesg
GUEST
