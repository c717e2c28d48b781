#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# gate: 612
# checks: 32
#
# The multi-queue extension end to end: a KVM guest with two vCPUs runs
# pvscsi_mq on -device vhost-pvscsi,num-queues=3 (our QEMU), nested in a
# host VM that loads vhost_pvscsi.ko; the LUN is a RAM disk.  The guest
# driver takes two queues (sysfs queues, two blk-mq hardware queues, a
# vector each); fio writes and verifies with a job pinned to each vCPU,
# so each vCPU's requests go down its own queue: both vectors take
# interrupts and the host module's debugfs shows both queues with
# requests and interrupts of their own.  A host reset sets both queues up
# again and both carry I/O after it.  A third queue is a poll queue
# (pvscsi_mq poll_queues=4: the queues with a vector, one per vCPU, come
# first; the one left is polled): no vector, HCTX_TYPE_POLL; fio's
# io_uring with hipri (IOPOLL) writes and verifies through it, the
# guest's mq_poll reaps it, and the module raised no interrupt on it
# while it carried requests.  QEMU refuses num-queues out of 1..16.  At
# the end the module unloads and no kernel log has a report.
. "$(dirname "$0")/../../scripts/vm/harness.sh"

work=$(mktemp -d /tmp/vps-mq-XXXXXX)
trap 'rm -rf "$work"' EXIT
kernel=$(VM_KERNEL=612 vm_kernel_image)

vm_reset
VM_KERNEL=612
vm_bins fio sg_reset
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
echo "VPS-MARK queues-used"
# the host VM reads the adapter's queues meanwhile
sleep 5
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
echo "VPS-MARK polled-done"
sleep 5
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
VPS_INNER_SMP=2 VPS_INNER_MEM=512 vps_inner_start mq /inner/vmlinuz /inner/mq.cpio 600 \
	-blockdev driver=host_device,node-name=d0,filename=/dev/ram0,cache.direct=on \
	-device vhost-pvscsi,id=hba0,num-queues=3 \
	-device scsi-hd,bus=hba0.0,drive=d0,scsi-id=0,lun=0
pid=$(vps_inner_pid mq)
# q FIELD N: queue N's FIELD in the adapter's debugfs file
q() { awk -v f="$1" -v n="$2" '$1 == "queue" && $2 == n {for (i = 3; i < NF; i++) if ($i == f) print $(i + 1)}' "$a"; }
if vps_inner_wait_console mq 'VPS-MARK queues-used' 300; then
	a=$(ls /sys/kernel/debug/vhost_pvscsi/adapter-"$pid"-* | head -1)
	cat "$a"
	t_match adapter-queues "$(grep '^queues' "$a")" '^queues 3$'
	t_check queue0-requests test "$(q reqs 0)" -gt 0
	t_check queue1-requests test "$(q reqs 1)" -gt 100
	t_check queue1-interrupts test "$(q irqs 1)" -gt 0
	t_check queue1-doorbells test "$(q doorbells 1)" -gt 0
fi
if vps_inner_wait_console mq 'VPS-MARK polled-done' 300; then
	cat "$a"
	# fio's 2048 writes, its reads to verify them: all on the poll queue
	t_check poll-queue-requests test "$(q reqs 2)" -ge 4096
	t_check poll-queue-doorbells test "$(q doorbells 2)" -gt 0
	t_equal poll-queue-no-interrupt "$(q irqs 2)" 0
fi
vps_inner_wait mq
t_match gauges-zero "$(cat $g | tr '\n' ' ')" '^open_devices 0 requests_in_flight 0 luns 0 $'
t_check unload rmmod vhost_pvscsi
vps_dmesg_clean host-dmesg-clean
GUEST
