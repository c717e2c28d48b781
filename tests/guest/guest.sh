# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# What the guest-suite tests share: pvscsi_mq in a VM against QEMU's stock
# -device pvscsi (id hba), raw images in a scratch folder $d that goes
# away with the test.  Sourced after scripts/vm/harness.sh.

# guest_setup NAME: the scratch folder, sd_mod at boot, pvscsi_mq packed
guest_setup() {
	d=$(mktemp -d "/tmp/vps-guest-$1-XXXXXX")
	# shellcheck disable=SC2064
	trap "rm -rf '$d'" EXIT
	vm_modules sd_mod
	vm_ours pvscsi_mq
}

# guest_hba: QEMU's pvscsi, before the disks that sit on its bus
guest_hba() { vm_qemu -device pvscsi,id=hba; }

# guest_disk ID SIZE [SCSI-ID]: a raw image $d/ID.img as drive ID
# (cache=none: O_DIRECT, as a user's disk), on hba at target SCSI-ID,
# LUN 0; without SCSI-ID the drive waits for a hot-add (device_add)
guest_disk() {
	truncate -s "$2" "$d/$1.img"
	vm_qemu -drive "if=none,id=$1,file=$d/$1.img,format=raw,cache=none,aio=threads"
	[ -z "${3:-}" ] || vm_qemu -device "scsi-hd,bus=hba.0,drive=$1,scsi-id=$3,lun=0"
}
