# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=sh
# Inner guest of scripts/demo, booted from target 0 of its PVSCSI adapter
# (scripts/mkimage's image): a short fio mix on target 1 (QEMU's pvscsi
# has LUN 0 only).  Around each job it prints
# "VPS-MARK start-<job>" / "VPS-MARK end-<job>" and waits a moment, so the
# host VM can read KVM's exit counters exactly around the job, and it
# reports the guest's side as VPS-REPORT lines.  JOBS and SECS are
# prepended by the caller.
# the data disk: target 1 (the root filesystem is on target 0's second
# partition)
tgt() { ls /sys/class/scsi_disk/ | grep ":0:$1:0\$" | head -1; }
has_tgt1() { [ -n "$(tgt 1)" ]; }
vps_wait 30 has_tgt1 || { t_fail disk "no disk at target 1"; exit 1; }
disk=/dev/$(ls "/sys/class/scsi_disk/$(tgt 1)/device/block/")
root=$(awk '$2 == "/" {print $1}' /proc/mounts | tail -1)
echo "demo guest: root filesystem $root ($(cat /vps-root-id)), fio on $disk"
t_match root-on-target0 "$root" "^/dev/$(ls "/sys/class/scsi_disk/$(tgt 0)/device/block/")2\$"
drv=$(cat /sys/class/scsi_host/host*/proc_name | sort -u | head -1)
irqs() { awk -v d="$drv" '$0 ~ d { s = 0; for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/) s += $i; t += s } END { print t + 0 }' /proc/interrupts; }
for job in $JOBS; do
	qd=${job#qd}
	# the host VM reads its counters, then answers: the window holds the
	# whole run and little else
	vps_mark "start-$job"
	i0=$(irqs)
	out=$(fio --name="$job" --filename="$disk" --direct=1 --ioengine=libaio \
		--rw=randrw --rwmixread=70 --bs=4k --iodepth="$qd" --size=64M \
		--time_based --runtime="$SECS" --output-format=terse --terse-version=3)
	i1=$(irqs)
	vps_mark "end-$job"
	ios=$(echo "$out" | awk -F';' '{print $6 / 4 + $47 / 4}')
	iops=$(echo "$out" | awk -F';' '{print $8 + $49}')
	vps_report "job=$job ios=$ios iops=$iops guest_irqs=$((i1 - i0))"
	t_match "fio-$job" "$ios" '^[1-9][0-9.]*$'
done
