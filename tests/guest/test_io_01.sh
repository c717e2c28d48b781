#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61 debug
# gate: 612 61
# checks: 31
#
# pvscsi_mq against QEMU's stock -device pvscsi, two targets: probe
# (interrupt type, CONFIG fallback to 16 targets, extension query answered
# -1), sg_inq / sg_readcap -l / sg_luns / sg_turs on both disks, then fio
# randwrite + verify=crc32c at 4k and 128k, QD 1 and 32, one disk per
# block size, and a final verify-only pass.  The per-adapter counters
# must add up: requests == completions, no bogus completions, doorbells
# and interrupts counted.
. "$(dirname "$0")/../../scripts/vm/harness.sh"
. "$(dirname "$0")/guest.sh"

guest_setup io
vm_bins fio sg_inq sg_readcap sg_luns sg_turs
guest_hba
guest_disk d0 96M 0
guest_disk d1 96M 3
vm_run guest-io <<'GUEST'
t_check load vps_load pvscsi_mq
h=$(basename "$(dirname "$(grep -l '^pvscsi_mq$' /sys/class/scsi_host/host*/proc_name | head -1)")")
t_match host-found "$h" '^host[0-9]+$'
hn=${h#host}
st=/sys/class/scsi_host/$h/pvscsi
t_check disks vps_wait 20 vps_has_sd "$hn:0:0:0" "$hn:0:3:0"
a=/dev/$(vps_sd_dev "$hn:0:0:0")
b=/dev/$(vps_sd_dev "$hn:0:3:0")
echo "disks: $a $b"
t_equal two-disks "$(vps_scsi_disks pvscsi_mq | wc -l)" 2
t_equal irq-mode "$(cat $st/irq_mode)" msi
t_equal max-targets-fallback "$(cat $st/max_targets)" 16
t_equal ext-absent "$(cat $st/ext)" absent
t_equal ext-status "$(cat $st/ext_status)" 0xffffffff
t_equal msg-ring "$(cat $st/msg_ring)" 1
for x in $a $b; do
	n=${x#/dev/}
	t_match sg_inq-$n "$(sg_inq $x 2>&1)" 'Vendor identification: QEMU'
	t_match sg_readcap-$n "$(sg_readcap -l $x 2>&1)" 'Logical block length=512 bytes'
	t_match sg_readcap-size-$n "$(sg_readcap -l $x 2>&1)" 'Device size: 100663296 bytes'
	t_match sg_luns-$n "$(sg_luns $x 2>&1)" 'Lun list length = 8'
	t_check sg_turs-$n sg_turs $x
done
sz=$(vps_dbg 24M 4M) min_req=$(vps_dbg 10000 1500)
common="--direct=1 --ioengine=libaio --rw=randwrite --do_verify=1 --verify=crc32c --verify_fatal=1 --size=$sz --output-format=terse --minimal"
t_check fio-4k-qd1 fio --name=a1 --filename=$a --bs=4k --iodepth=1 $common
t_check fio-4k-qd32 fio --name=a32 --filename=$a --bs=4k --iodepth=32 $common
t_check fio-128k-qd1 fio --name=b1 --filename=$b --bs=128k --iodepth=1 $common
t_check fio-128k-qd32 fio --name=b32 --filename=$b --bs=128k --iodepth=32 $common
t_check fio-verify-only fio --name=a32 --filename=$a --bs=4k --iodepth=32 --verify_only=1 $common
req=$(cat $st/requests); cmp=$(cat $st/completions)
echo "requests=$req completions=$cmp doorbells=$(cat $st/doorbells) interrupts=$(cat $st/interrupts) max/irq=$(cat $st/cmpl_per_irq_max) skipped=$(cat $st/kicks_skipped) busy=$(cat $st/busy)"
t_equal requests-completed "$cmp" "$req"
t_check requests-counted test "$req" -gt $min_req
t_check doorbells-counted test "$(cat $st/doorbells)" -gt 0
t_check interrupts-counted test "$(cat $st/interrupts)" -gt 0
t_equal no-bogus "$(cat $st/bogus_completions)" 0
vps_dmesg_clean dmesg
GUEST
