#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61 debug
# gate: 612
# checks: 187
#
# Probe and remove: every probe error path (fail_probe=1..8, plus
# irq_mode=1 which needs MSI-X that QEMU's pvscsi does not have) must fail
# the probe cleanly: no SCSI host, no IRQ left in /proc/interrupts, BAR0
# released (the next probe can claim it), the driver's count of coherent
# DMA allocations back to 0, and no memory lost over the repeated failing
# probes (ring_pages=32: each probe allocates about 4.5 MiB of DMA memory,
# so a leak on any path shows as tens of MiB).  Invalid module parameters
# are refused.  Then 5 rmmod/insmod cycles with I/O in each, alternating
# with and without I/O before remove; INTx (irq_mode=3) with I/O; ext=0
# reports the extension disabled; the stock device answers the extension
# query with -1.
. "$(dirname "$0")/../../scripts/vm/harness.sh"
. "$(dirname "$0")/guest.sh"

guest_setup probe
vm_bins fio
guest_hba
guest_disk d0 64M 0
vm_run guest-probe <<'GUEST'
dev=$(grep -l 0x07c0 /sys/bus/pci/devices/*/device | head -1)
dev=$(basename "$(dirname "$dev")")
echo "pvscsi at $dev"
host_of() { grep -l '^pvscsi_mq$' /sys/class/scsi_host/host*/proc_name 2>/dev/null | head -1; }
live() { cat /sys/kernel/debug/pvscsi_mq/live_dma_allocs; }
# unbind: the driver lets go of the device (its remove path runs) while
# the module, and with it the debugfs count, stays loaded to be read
unbind() {
	echo "$dev" > /sys/bus/pci/drivers/pvscsi_mq/unbind && [ ! -e "/sys/bus/pci/devices/$dev/driver" ]
}
fio_quick() {
	fio --name=q --filename="$1" --direct=1 --ioengine=libaio --bs=4k --iodepth=8 \
		--rw=randwrite --do_verify=1 --verify=crc32c --verify_fatal=1 --size=$(vps_dbg 4M 1M) \
		--output-format=terse --minimal >/dev/null
}
modprobe sd_mod
# warm up the allocators so the memory comparison is fair
t_check warmup-load vps_load pvscsi_mq ring_pages=32
t_check warmup-disk vps_wait 20 vps_has_disks pvscsi_mq
t_check warmup-unload rmmod pvscsi_mq
m0=$(vps_memfree_nonslab)
for step in 1 2 3 4 5 6 7 8 irq; do
	if [ $step = irq ]; then p="irq_mode=1"; else p="fail_probe=$step"; fi
	for i in 1 2; do
		t_check load-$step-$i vps_load pvscsi_mq ring_pages=32 $p
		t_equal no-host-$step-$i "$(host_of)" ""
		t_equal unbound-$step-$i "$(readlink /sys/bus/pci/devices/$dev/driver)" ""
		t_equal no-dma-left-$step-$i "$(live)" 0
		t_equal no-irq-$step-$i "$(grep -c pvscsi_mq /proc/interrupts)" 0
		t_equal no-iomem-$step-$i "$(grep -c pvscsi_mq /proc/iomem)" 0
		t_check unload-$step-$i rmmod pvscsi_mq
	done
done
dmesg | grep -E 'fault injection|probe failed' | tail -4
m1=$(vps_memfree_nonslab)
echo "MemFree$(vps_dbg '' ' + Slab') before $m0 kB, after 18 failed probes $m1 kB"
t_check no-memory-lost test $((m0 - m1)) -lt 8192
t_check_fails bad-ring-pages vps_load pvscsi_mq ring_pages=3
t_check_fails bad-msg-pages vps_load pvscsi_mq msg_ring_pages=32
t_check_fails bad-irq-mode vps_load pvscsi_mq irq_mode=7
t_check modinfo-params test "$(modinfo -F parm /lib/vps/pvscsi_mq.ko | grep -c .)" -ge 8
for c in 1 2 3 4 5; do
	t_check cycle-$c-load vps_load pvscsi_mq
	t_check cycle-$c-disk-up vps_wait 20 vps_has_disks pvscsi_mq
	disk=$(vps_scsi_disks pvscsi_mq | head -1)
	t_match cycle-$c-disk "$disk" '^sd[a-z]+$'
	# odd cycles remove right after I/O, even ones after an idle disk
	if [ $((c % 2)) = 1 ]; then t_check cycle-$c-io fio_quick /dev/$disk; fi
	# the count is read before rmmod: its debugfs file goes with the
	# module, and a file that is not there must fail, not read as 0
	t_check cycle-$c-unbind unbind
	t_equal cycle-$c-no-dma-left "$(live 2>&1)" 0
	t_check cycle-$c-unload rmmod pvscsi_mq
done
dmesg | grep -c 'coherent DMA allocations leaked' > /tmp/leaks
t_equal no-leak-report "$(cat /tmp/leaks)" 0
t_check intx-load vps_load pvscsi_mq irq_mode=3
t_check intx-disk vps_wait 20 vps_has_disks pvscsi_mq
h=$(host_of); st=$(dirname "$h")/pvscsi
t_equal intx-mode "$(cat $st/irq_mode)" intx
t_check intx-io fio_quick /dev/$(vps_scsi_disks pvscsi_mq | head -1)
t_check intx-interrupts test "$(cat $st/interrupts)" -gt 0
t_check intx-unload rmmod pvscsi_mq
t_check ext0-load vps_load pvscsi_mq ext=0
t_check ext0-disk vps_wait 20 vps_has_disks pvscsi_mq
h=$(host_of); st=$(dirname "$h")/pvscsi
t_equal ext0-disabled "$(cat $st/ext)" disabled
t_equal ext0-not-asked "$(cat $st/ext_status)" 0x00000000
t_check ext0-io fio_quick /dev/$(vps_scsi_disks pvscsi_mq | head -1)
t_check ext0-unload rmmod pvscsi_mq
t_check ext1-load vps_load pvscsi_mq
t_check ext1-disk vps_wait 20 vps_has_disks pvscsi_mq
h=$(host_of); st=$(dirname "$h")/pvscsi
t_equal ext-fallback "$(cat $st/ext)" absent
t_match ext-fallback-log "$(dmesg)" 'no vhost-pvscsi extension \(status 0xffffffff\): plain PVSCSI ABI'
t_check ext1-io fio_quick /dev/$(vps_scsi_disks pvscsi_mq | head -1)
vps_dmesg_clean dmesg
GUEST
