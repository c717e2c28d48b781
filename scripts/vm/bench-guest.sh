# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=sh
# Inner guest of scripts/bench-stack: one unmodified guest (in-tree
# vmw_pvscsi, virtio_scsi) with four adapters, told apart by PCI slot:
# 10 vhost-pvscsi, 11 QEMU pvscsi, 12 QEMU virtio-scsi, 13 vhost-scsi, each
# with one null_blk LUN of the host VM.  For each round, job and adapter
# (the adapter order reversed every other round) it prints
# "VPS-MARK start-<tag>" / "VPS-MARK end-<tag>" around fio so that the host
# VM reads its counters exactly around the run, and reports the guest's
# side (I/Os, IOPS, guest interrupts).  ROUNDS, JOBS and SECS are
# prepended by the caller.
DEVS="vhost-pvscsi pvscsi virtio-scsi vhost-scsi"
slot() {
	case $1 in
	vhost-pvscsi) echo 10 ;; pvscsi) echo 11 ;; virtio-scsi) echo 12 ;; vhost-scsi) echo 13 ;;
	esac
}
disk() { # adapter -> sdX
	for b in /sys/block/sd*; do
		case "$(readlink -f "$b")" in
		*"/0000:00:$(slot "$1").0/"*) basename "$b"; return ;;
		esac
	done
}
found() { for d in $DEVS; do [ -n "$(disk "$d")" ] || return 1; done; }
if ! vps_wait 60 found; then
	t_fail disks "not every adapter has its disk: $(ls /sys/block)"
	exit 1
fi
t_ok disks
for d in $DEVS; do echo "$d: /dev/$(disk "$d") $(cat "/sys/block/$(disk "$d")/device/vendor")"; done
# the adapter's interrupts, whatever the driver names them
irqs() { # sdX
	h=$(readlink -f "/sys/block/$1" | sed -n 's#.*/\(0000:00:[0-9a-f]*\.0\)/.*#\1#p')
	for i in /sys/bus/pci/devices/"$h"/msi_irqs/* /sys/bus/pci/devices/"$h"/irq; do
		[ -e "$i" ] || continue
		n=$(basename "$i")
		[ "$n" = irq ] && n=$(cat "$i")
		awk -v n="$n:" '$1 == n { s = 0; for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/) s += $i; print s }' /proc/interrupts
	done | awk '{ t += $1 } END { print t + 0 }'
}
r=1
while [ "$r" -le "$ROUNDS" ]; do
	order=$DEVS
	[ $((r % 2)) = 0 ] && order=$(echo "$DEVS" | tr ' ' '\n' | tac | tr '\n' ' ')
	for job in $JOBS; do
		qd=${job#qd}
		for d in $order; do
			s=$(disk "$d")
			tag="r$r-$job-$d"
			echo "VPS-MARK start-$tag"
			sleep 1
			i0=$(irqs "$s")
			out=$(fio --name="$tag" --filename="/dev/$s" --direct=1 --ioengine=libaio \
				--rw=randread --bs=4k --iodepth="$qd" --size=512M \
				--time_based --runtime="$SECS" --output-format=terse --terse-version=3)
			i1=$(irqs "$s")
			echo "VPS-MARK end-$tag"
			sleep 1
			ios=$(echo "$out" | awk -F';' '{print int($6 / 4)}')
			iops=$(echo "$out" | awk -F';' '{print $8}')
			vps_report "tag=$tag dev=$d job=$job round=$r ios=$ios iops=$iops guest_irqs=$((i1 - i0))"
			t_match "fio-$tag" "$ios" '^[1-9][0-9]*$'
		done
	done
	r=$((r + 1))
done
