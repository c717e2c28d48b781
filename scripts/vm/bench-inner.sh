# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=sh
# Inner guest of scripts/bench: one guest with eight (ten) adapters, told apart
# by PCI slot, each with two LUNs of the host VM: a null_blk device (1 GiB)
# and a file on ext4 (smaller; the size tells them apart):
#   10 vhost-pvscsi, in-tree vmw_pvscsi      11 QEMU pvscsi
#   12 QEMU virtio-scsi (iothread)           13 vhost-scsi (LIO)
#   14 QEMU lsi53c895a                       15 QEMU megasas-gen2
#   16 vhost-pvscsi, our pvscsi_mq (moved to it with driver_override)
#   17 vhost-pvscsi,num-queues=1, pvscsi_mq too (with a multi-vCPU guest)
#   18 vhost-pvscsi,num-queues=vCPUs+1, pvscsi_mq with a poll queue: its
#      fio runs io_uring with hipri (polled), the others libaio
#   19 vhost-scsi on one virtqueue (with a multi-vCPU guest)
# For each round, backing, job and adapter (the adapter order reversed
# every other round) it prints "VPS-MARK start-<tag>" / "VPS-MARK end-<tag>"
# around fio, so that the host VM reads its counters exactly around the
# run, and reports the guest's side: I/Os, IOPS, p50/p99 completion
# latency, guest interrupts.  ROUNDS, JOBS, BACKINGS, ADAPTERS and SECS
# are prepended by the caller.
slot() {
	case $1 in
	ours-vmw) echo 10 ;; pvscsi) echo 11 ;; virtio-scsi) echo 12 ;; vhost-scsi) echo 13 ;;
	lsi) echo 14 ;; megasas) echo 15 ;; ours-mq) echo 16 ;; ours-mq1q) echo 17 ;;
	ours-mqpoll) echo 18 ;; vhost-scsi1q) echo 19 ;;
	esac
}
# disk ADAPTER BACKING -> sdX (null: the 1 GiB LUN, file: the smaller one)
disk() {
	for b in /sys/block/sd*; do
		case "$(readlink -f "$b")" in
		*"/0000:00:$(slot "$1").0/"*) ;;
		*) continue ;;
		esac
		big=$(( $(cat "$b/size") >= 2097152 ))
		if { [ "$2" = null ] && [ $big = 1 ]; } || { [ "$2" = file ] && [ $big = 0 ]; }; then
			basename "$b"
			return
		fi
	done
}
found() {
	for d in $ADAPTERS; do
		for k in $BACKINGS; do [ -n "$(disk "$d" "$k")" ] || return 1; done
	done
}
# our other adapters go to pvscsi_mq: vmw_pvscsi took them at boot.  Its
# poll_queues=1 gives a poll queue only where the device offers a queue
# beyond one per vCPU: ours-mqpoll
for d in ours-mq ours-mq1q ours-mqpoll; do
	case " $ADAPTERS " in *" $d "*) ;; *) continue ;; esac
	mq=0000:00:$(slot $d).0
	echo pvscsi_mq > "/sys/bus/pci/devices/$mq/driver_override"
	[ -e "/sys/bus/pci/devices/$mq/driver" ] && echo "$mq" > "/sys/bus/pci/devices/$mq/driver/unbind"
	lsmod | grep -q '^pvscsi_mq ' || t_check load-pvscsi_mq vps_load pvscsi_mq poll_queues=1
	echo "$mq" > /sys/bus/pci/drivers_probe
	t_equal "pvscsi_mq-owns-$(slot $d)" "$(basename "$(readlink "/sys/bus/pci/devices/$mq/driver")")" pvscsi_mq
	p=$(echo "/sys/bus/pci/devices/$mq"/host*/scsi_host/host*/pvscsi)
	echo "$d: $(cat "$p/queues") queue(s), $(cat "$p/poll_queues") polled"
	[ $d != ours-mqpoll ] || t_equal ours-mqpoll-polled "$(cat "$p/poll_queues")" 1
done
if ! vps_wait 90 found; then
	t_fail disks "not every adapter has its disks: $(ls /sys/block)"
	exit 1
fi
t_ok disks
for d in $ADAPTERS; do
	h=/sys/bus/pci/devices/0000:00:$(slot "$d").0
	for k in $BACKINGS; do
		echo "$d $k: /dev/$(disk "$d" "$k") $(basename "$(readlink $h/driver)")"
	done
done
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
# job -> fio arguments
jobargs() {
	case $1 in
	rr1) echo "--rw=randread --bs=4k --iodepth=1" ;;
	rr32) echo "--rw=randread --bs=4k --iodepth=32" ;;
	rw1) echo "--rw=randwrite --bs=4k --iodepth=1" ;;
	rw32) echo "--rw=randwrite --bs=4k --iodepth=32" ;;
	sr) echo "--rw=read --bs=128k --iodepth=8" ;;
	sw) echo "--rw=write --bs=128k --iodepth=8" ;;
	rr2j) echo "--rw=randread --bs=4k --iodepth=16 --numjobs=2" ;;
	esac
}
r=1
while [ "$r" -le "$ROUNDS" ]; do
	order=$ADAPTERS
	[ $((r % 2)) = 0 ] && order=$(echo "$ADAPTERS" | tr ' ' '\n' | tac | tr '\n' ' ')
	for k in $BACKINGS; do
		for job in $JOBS; do
			a=$(jobargs "$job")
			case $a in *write*) o=41 ;; *) o=0 ;; esac
			case $a in *128k*) kb=128 ;; *) kb=4 ;; esac
			for d in $order; do
				s=$(disk "$d" "$k")
				tag="r$r-$k-$job-$d"
				# the host VM reads its counters, then answers:
				# the window holds the whole run and little else
				gs=$(vps_up_ms)
				vps_mark "start-$tag"
				# the guest's own clock from the answer to fio's end:
				# a long host window beside a run of the usual length
				# lost its time in the marks' exchange, not in fio
				g0=$(vps_up_ms)
				i0=$(irqs "$s")
				e="--ioengine=libaio"
				[ "$d" != ours-mqpoll ] || e="--ioengine=io_uring --hipri=1"
				# shellcheck disable=SC2086
				out=$(fio --name="$tag" --filename="/dev/$s" --direct=1 $e \
					$a --size=64M --group_reporting --time_based --runtime="$SECS" \
					--output-format=terse --terse-version=3)
				i1=$(irqs "$s")
				g1=$(vps_up_ms)
				vps_mark "end-$tag"
				ge=$(vps_up_ms)
				# terse v3: the read part from field 6, the write part 41
				# fields later; io in KiB, IOPS, clat percentiles in us
				# shellcheck disable=SC2046
				set -- $(echo "$out" | awk -F';' -v o=$o -v kb=$kb '{
					p50 = p99 = 0
					for (i = 18 + o; i <= 37 + o; i++) {
						split($i, a, "=")
						if (a[1] == "50.000000%") p50 = a[2]
						if (a[1] == "99.000000%") p99 = a[2]
					}
					print int($(6 + o) / kb), $(8 + o), p50, p99 }')
				vps_report "tag=$tag dev=$d backing=$k job=$job round=$r ios=$1 iops=$2 p50_us=$3 p99_us=$4 guest_irqs=$((i1 - i0)) guest_ms=$((g1 - g0)) mark_start_ms=$((g0 - gs)) mark_end_ms=$((ge - g1))"
				t_match "fio-$tag" "$1" '^[1-9][0-9]*$'
			done
		done
	done
	r=$((r + 1))
done
