#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# gate: 612
# checks: 56
#
# The multi-queue extension end to end: a KVM guest with two vCPUs runs
# pvscsi_mq on -device vhost-pvscsi,num-queues=3 (our QEMU), nested in a
# host VM that loads vhost_pvscsi.ko; the LUN is a RAM disk.  The guest
# driver takes two queues (sysfs queues, two blk-mq hardware queues, a
# vector each); fio writes and verifies with a job pinned to each vCPU,
# so each vCPU's requests go down its own queue: both vectors take
# interrupts and the host module's debugfs shows both queues with
# requests and interrupts of their own, and each queue's worker by its
# thread id (three distinct threads of QEMU's).  A host reset sets both
# queues up again and both carry I/O after it.  A third queue is a poll queue
# (pvscsi_mq poll_queues=4: the queues with a vector, one per vCPU, come
# first; the one left is polled): no vector, HCTX_TYPE_POLL; fio's
# io_uring with hipri (IOPOLL) writes and verifies through it, the
# guest's mq_poll reaps it, and the module raised no interrupt on it
# while it carried requests.  Then the module's stale_completions hook
# posts 10 completions a second time, each once its tag is in use again
# on its queue, while fio writes and verifies from both vCPUs: pvscsi_mq
# refuses all 10 (it matches and claims a completion by one
# compare-and-exchange of the command's in-flight context; a match then a
# separate claim could take a stale one for the tag's next command
# submitted on the other vCPU in between) and no command fails.  The
# race itself is too narrow to provoke on purpose: this checks that the
# refusal holds with two queues and two vCPUs.  QEMU refuses num-queues
# out of 1..16.
#
# Then PVSCSI_CMD_EXT_SETUP_QUEUES from a hostile guest, through our
# QEMU device to the module: the same guest unloads pvscsi_mq and loads
# it on one queue (queues=1; its probe's SETUP_RINGS must take the other
# two away, in the module too), so two of the three offered are free,
# then writes EXT_SETUP_QUEUES straight to the adapter's registers
# (tests/stack/vps_cmd maps the BAR's sysfs resource0; its kernel boots
# with iomem=relaxed so that a bound driver's BAR maps), each time with
# one mistake: a bad magic, queue 0, a queue out of order, a queue
# beyond those offered, a request ring larger than the device's limit
# (QEMU refuses these itself), a ring of 0 pages and a ring page outside
# the guest's RAM (QEMU asks the module, which refuses: EINVAL,
# EFAULT).  Each must read back COMMAND_STATUS -1, QEMU's trace must show
# each refusal, and nothing may change: the module's adapter still has
# one queue and the disk still writes and verifies.  (One guest does both
# halves: a second one cost the gate an inner boot.)  At the end the
# module unloads and no kernel log has a report.
. "$(dirname "$0")/../../scripts/vm/harness.sh"

work=$(mktemp -d /tmp/vps-mq-XXXXXX)
trap 'rm -rf "$work"' EXIT
kernel=$(VM_KERNEL=612 vm_kernel_image)

vm_reset
VM_KERNEL=612
vm_bins fio sg_reset "$VPS_TOP/tests/stack/vps_cmd"
vm_ours pvscsi_mq
vm_modules sd_mod
cat > "$work/inner.sh" <<'INNER'
t_check load-pvscsi_mq vps_load pvscsi_mq poll_queues=4
vps_wait 30 test -b /dev/sda
h=$(ls -d /sys/class/scsi_host/host* | head -1)/pvscsi
t_equal cpus "$(nproc)" 2
t_equal queues "$(cat "$h/queues")" 3
t_equal poll-queues "$(cat "$h/poll_queues")" 1
t_equal hw-queues "$(ls /sys/block/sda/mq | wc -l)" 3
t_equal io-poll "$(cat /sys/block/sda/queue/io_poll)" 1
t_equal vectors "$(grep -c pvscsi_mq /proc/interrupts)" 2
# interrupts of each pvscsi_mq vector, summed over the CPUs
irqs() { grep pvscsi_mq /proc/interrupts | awk '{s = 0; for (i = 2; i <= 3; i++) s += $i; printf "%s ", s}'; }
v="--direct=1 --ioengine=libaio --bs=4k --iodepth=16 --numjobs=2 --cpus_allowed=0-1 --cpus_allowed_policy=split --size=8M --offset_increment=8M --verify=crc32c --verify_fatal=1 --group_reporting --output-format=terse --minimal"
i0=$(irqs)
t_check fio-verify-two-queues fio --name=t --filename=/dev/sda --rw=randwrite --do_verify=1 $v
i1=$(irqs)
echo "# vector interrupts before: $i0 after: $i1"
t_match both-vectors-interrupted "$(echo $i0 $i1 | awk '{print ($3 > $1) " " ($4 > $2)}')" '^1 1$'
# the host VM reads the adapter's queues
vps_mark queues-used
# a host reset: both queues are set up again and carry I/O after it
t_check host-reset sg_reset -H /dev/sda
t_equal host-resets "$(cat "$h/host_resets")" 1
i0=$(irqs)
t_check fio-after-reset fio --name=t --filename=/dev/sda --rw=randwrite --do_verify=1 $v
i1=$(irqs)
t_match both-vectors-after-reset "$(echo $i0 $i1 | awk '{print ($3 > $1) " " ($4 > $2)}')" '^1 1$'
t_equal aborts "$(cat "$h/aborts")" 0
echo "VPS-MARK reset-done"
# polled I/O: the poll queue, reaped by mq_poll, no interrupt
p0=$(cat "$h/polled")
t_check fio-polled fio --name=p --filename=/dev/sda --rw=randwrite --do_verify=1 \
	--direct=1 --ioengine=io_uring --hipri=1 --bs=4k --iodepth=8 --size=8M \
	--verify=crc32c --verify_fatal=1 --output-format=terse --minimal
p1=$(cat "$h/polled")
echo "# polled completions before: $p0 after: $p1"
t_check polled-reaped test "$p1" -ge $((p0 + 2048))
t_equal aborts-after-polled "$(cat "$h/aborts")" 0
vps_mark polled-done
# stale completions on two queues from two vCPUs (the host VM arms the
# module's hook; a wrongly claimed one fails its command, and fio)
b0=$(cat "$h/bogus_completions")
vps_mark stale
t_check stale-fio-verify vps_run_until_grown "$h/bogus_completions" "$b0" 10 \
	fio --name=s --filename=/dev/sda --rw=randwrite --do_verify=1 $v
t_equal stale-refused "$(( $(cat "$h/bogus_completions") - b0 ))" 10
t_equal aborts-after-stale "$(cat "$h/aborts")" 0
vps_mark stale-done
# the hostile guest: pvscsi_mq again, on one queue this time (its probe's
# SETUP_RINGS takes the other two away: the module must show one), then
# EXT_SETUP_QUEUES written straight to the bound adapter's registers
t_check unload-pvscsi_mq rmmod pvscsi_mq
t_check reload-pvscsi_mq vps_load pvscsi_mq queues=1
vps_wait 30 test -b /dev/sda
h=$(ls -d /sys/class/scsi_host/host* | head -1)/pvscsi
t_equal one-queue "$(cat "$h/queues")" 1
t_match iomem-relaxed "$(cat /proc/cmdline)" 'iomem=relaxed'
d=$(dirname "$(grep -l 0x07c0 /sys/bus/pci/devices/*/device | head -1)")
t_equal bar-is-mmio "$(( $(awk 'NR == 1 {print $3}' "$d/resource") & 0x200 ))" 512
# sq NAME QUEUE MAGIC REQ_PAGES CMP_PAGES PPN: EXT_SETUP_QUEUES (0x5651)
# with its 132 data dwords (tests/stack/vps_cmd, one process): magic,
# queue, the page counts, then 32 request and 32 completion ring PPNs
# (64 bits each; the first of each is PPN, 62 zero dwords the other 31);
# COMMAND_STATUS must read -1
sq() {
	lo=$(($6 & 0xffffffff)) hi=$(($6 >> 32))
	t_equal "refused-$1" "$(vps_cmd "$d/resource0" 0x5651 "$3" "$2" "$4" "$5" $lo $hi 62*0 $lo $hi 62*0)" 0xFFFFFFFF
}
M=0x56505351
# 4 GiB: beyond this 512 MiB guest's RAM, in no memory region
far=$((0x100000))
echo "VPS-MARK poking"
sq bad-magic 1 0x12345678 1 1 $far
sq queue-0 0 $M 1 1 $far
sq out-of-order 2 $M 1 1 $far
sq not-offered 3 $M 1 1 $far
sq ring-too-big 1 $M 64 1 $far
sq no-pages 1 $M 0 1 $far
sq page-outside-ram 1 $M 1 1 $far
vps_mark poked
t_equal queues-after "$(cat "$h/queues")" 1
t_check fio-verify-after fio --name=t --filename=/dev/sda --rw=randwrite --do_verify=1 \
	--direct=1 --ioengine=libaio --bs=4k --iodepth=16 --size=16M \
	--verify=crc32c --verify_fatal=1 --output-format=terse --minimal
t_equal aborts-after-pokes "$(cat "$h/aborts")" 0
INNER
vm_initramfs "$work/inner.cpio" "$work/inner.sh"

vm_reset
vm_nested_host
vm_modules brd
vm_ours vhost_pvscsi
vm_file "$kernel" /inner/vmlinuz
vm_file "$work/inner.cpio" /inner/mq.cpio
VM_MEM=2560
VM_TIMEOUT=900
vm_run stack-mq <<'GUEST'
modprobe -r brd
modprobe brd rd_nr=1 rd_size=65536
t_check load vps_load vhost_pvscsi
g=/sys/kernel/debug/vhost_pvscsi/gauges
# out of range: refused at realize, with the range
t_match num-queues-bounded "$(timeout 20 qemu-system-x86_64 -L /usr/share/qemu -accel kvm -cpu host \
	-S -display none -nodefaults -device vhost-pvscsi,num-queues=17 2>&1)" 'num-queues must be 1..16'
VPS_INNER_SMP=2 VPS_INNER_MEM=512 VPS_INNER_APPEND=iomem=relaxed vps_inner_start mq /inner/vmlinuz /inner/mq.cpio 600 \
	-blockdev driver=host_device,node-name=d0,filename=/dev/ram0,cache.direct=on \
	-device vhost-pvscsi,id=hba0,num-queues=3 \
	-device scsi-hd,bus=hba0.0,drive=d0,scsi-id=0,lun=0 \
	-trace vhost_pvscsi_queue -trace vhost_pvscsi_ioctl_error
pid=$(vps_inner_pid mq)
# q FIELD N: queue N's FIELD in the adapter's debugfs file
q() { awk -v f="$1" -v n="$2" '$1 == "queue" && $2 == n {for (i = 3; i < NF; i++) if ($i == f) print $(i + 1)}' "$a"; }
if vps_inner_wait_mark mq queues-used 300; then
	a=$(ls /sys/kernel/debug/vhost_pvscsi/adapter-"$pid"-* | head -1)
	cat "$a"
	t_match adapter-queues "$(grep '^queues' "$a")" '^queues 3$'
	t_check queue0-requests test "$(q reqs 0)" -gt 0
	t_check queue1-requests test "$(q reqs 1)" -gt 100
	t_check queue1-interrupts test "$(q irqs 1)" -gt 0
	t_check queue1-doorbells test "$(q doorbells 1)" -gt 0
	# each queue's worker by its thread id (for pinning: its comm is
	# cut short of the queue's number): three threads of QEMU's, apart
	w=" $(q worker 0) $(q worker 1) $(q worker 2) "
	n=0
	for t in $w; do
		case "$(cat "/proc/$pid/task/$t/comm" 2>/dev/null)" in vhost-pvscsi-*) n=$((n + 1)) ;; esac
	done
	t_equal queue-worker-tids "$n $(echo $w | tr ' ' '\n' | sort -u | wc -l)" "3 3"
	vps_inner_ack mq queues-used
fi
if vps_inner_wait_mark mq polled-done 300; then
	cat "$a"
	# fio's 2048 writes, its reads to verify them: all on the poll queue
	t_check poll-queue-requests test "$(q reqs 2)" -ge 4096
	t_check poll-queue-doorbells test "$(q doorbells 2)" -gt 0
	t_equal poll-queue-no-interrupt "$(q irqs 2)" 0
	vps_inner_ack mq polled-done
fi
if vps_inner_wait_mark mq stale 300; then
	echo 10 > /sys/kernel/debug/vhost_pvscsi/stale_completions
	vps_inner_ack mq stale
	vps_inner_wait_mark mq stale-done 300 &&
		t_equal stale-posted "$(vps_field stale_posted "$a")" 10
	echo 0 > /sys/kernel/debug/vhost_pvscsi/stale_completions
	vps_inner_ack mq stale-done
fi
if vps_inner_wait_mark mq poked 300; then
	t_match poked-adapter-one-queue "$(grep '^queues' "$a")" '^queues 1$'
	tr=$(grep -a 'vhost_pvscsi_queue' "/tmp/mq.qemu" | tr -d '\r')
	echo "$tr"
	# five refused by QEMU's own checks, one (0 pages) by the module
	t_equal refusals-einval "$(echo "$tr" | grep -c 'queue [0-9]*: -22$')" 6
	# the page outside RAM: the module's EFAULT
	t_equal refusals-efault "$(echo "$tr" | grep -c 'queue 1: -14$')" 1
	t_equal module-refusals "$(grep -ac 'vhost_pvscsi_ioctl_error SETUP_QUEUE' "/tmp/mq.qemu")" 2
	vps_inner_ack mq poked
fi
vps_inner_wait mq
t_match gauges-zero "$(cat $g | tr '\n' ' ')" '^open_devices 0 requests_in_flight 0 luns 0 $'
t_check unload rmmod vhost_pvscsi
vps_dmesg_clean host-dmesg-clean
GUEST
