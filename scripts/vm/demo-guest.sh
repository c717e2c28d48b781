# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=sh
# Inner guest of scripts/demo: a short fio mix on
# the first disk behind a PVSCSI adapter.  Around each job it prints
# "VPS-MARK start-<job>" / "VPS-MARK end-<job>" and waits a moment, so the
# host VM can read KVM's exit counters exactly around the job, and it
# reports the guest's side as VPS-REPORT lines.  JOBS and SECS are
# prepended by the caller.
vps_wait 30 test -b /dev/sda || { t_fail disk "no /dev/sda"; exit 1; }
drv=$(cat /sys/class/scsi_host/host*/proc_name | sort -u | head -1)
irqs() { awk -v d="$drv" '$0 ~ d { s = 0; for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/) s += $i; t += s } END { print t + 0 }' /proc/interrupts; }
for job in $JOBS; do
	qd=${job#qd}
	echo "VPS-MARK start-$job"
	sleep 2
	i0=$(irqs)
	out=$(fio --name="$job" --filename=/dev/sda --direct=1 --ioengine=libaio \
		--rw=randrw --rwmixread=70 --bs=4k --iodepth="$qd" --size=64M \
		--time_based --runtime="$SECS" --output-format=terse --terse-version=3)
	i1=$(irqs)
	echo "VPS-MARK end-$job"
	sleep 2
	ios=$(echo "$out" | awk -F';' '{print $6 / 4 + $47 / 4}')
	iops=$(echo "$out" | awk -F';' '{print $8 + $49}')
	vps_report "job=$job ios=$ios iops=$iops guest_irqs=$((i1 - i0))"
	t_match "fio-$job" "$ios" '^[1-9][0-9.]*$'
done
