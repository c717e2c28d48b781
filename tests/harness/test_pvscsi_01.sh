#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61
# gate: 612
# checks: 6
#
# Baseline: Linux's in-tree vmw_pvscsi against QEMU's stock userspace
# -device pvscsi.  fio randwrite with verify=crc32c (4k, QD 16, 64 MiB) then
# a separate verify-only pass, and sg_inq.  This is the reference that our
# driver and backend are later compared with.
. "$(dirname "$0")/../../scripts/vm/harness.sh"

img=$(mktemp /tmp/vps-pvscsi-XXXXXX.img)
trap 'rm -f "$img"' EXIT
truncate -s 128M "$img"

vm_modules vmw_pvscsi sd_mod
vm_bins fio sg_inq
vm_qemu -device pvscsi,id=hba \
	-drive if=none,id=d0,file="$img",format=raw,cache=none,aio=threads \
	-device scsi-hd,bus=hba.0,drive=d0,scsi-id=0,lun=0
vm_run pvscsi-stock <<'GUEST'
vps_wait 20 test -b /dev/sda
t_check disk-present test -b /dev/sda
t_match sg_inq "$(sg_inq /dev/sda 2>&1)" 'Vendor identification: QEMU'
t_equal driver "$(cat /sys/class/scsi_host/host*/proc_name | sort -u | tr '\n' ' ')" "vmw_pvscsi "
common="--filename=/dev/sda --direct=1 --ioengine=libaio --bs=4k --iodepth=16 --size=64M --verify=crc32c --verify_fatal=1 --output-format=terse --minimal"
t_check fio-randwrite-verify fio --name=w --rw=randwrite --do_verify=1 $common
t_check fio-verify-only fio --name=w --rw=randwrite --verify_only=1 $common
GUEST
