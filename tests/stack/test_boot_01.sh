#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# gate: 612
# checks: 35
#
# Boot from a vhost-pvscsi disk.  scripts/mkimage builds the BIOS variant
# of a bootable raw image per guest driver (MBR with SYSLINUX, a FAT boot
# partition with Debian's kernel and an initramfs holding vmw_pvscsi or
# pvscsi_mq, an ext4 root).  In a host VM that loads vhost_pvscsi.ko, the
# patched QEMU boots each as the only disk on -device vhost-pvscsi, with
# no -kernel: SeaBIOS's PVSCSI driver reads the boot loader, the kernel
# and the initramfs through our module.  The vmw_pvscsi image boots on
# QEMU's -device pvscsi too, for comparison.  Inside (inner_boot.sh) the
# root filesystem must be that image's ext4 partition behind the
# expected driver, and writable.
#
# UEFI: Debian 12's OVMF is built without PvScsiDxe (edk2 2022.11 turned
# PVSCSI_ENABLE off by default), so no OVMF the project may install can
# see a PVSCSI disk; the image's GRUB-EFI loader is not booted here
# (Documentation/qemu-device.md).
. "$(dirname "$0")/../../scripts/vm/harness.sh"

work=$(mktemp -d /tmp/vps-boot-XXXXXX)
trap 'rm -rf "$work"' EXIT
for drv in vmw_pvscsi pvscsi_mq; do
	id=vps-boot-$drv-$$
	{ echo "DRV=$drv ID=$id FW=bios"; cat "$(dirname "$0")/inner_boot.sh"; } > "$work/inner-$drv.sh"
	VPS_KERNEL=$VM_KERNEL "$VPS_TOP/scripts/mkimage" --driver "$drv" --firmware bios --id "$id" \
		--append "nokaslr vps.heartbeat=10 vps.hvc" \
		--script "$work/inner-$drv.sh" --out "$work/$drv.raw" ||
		vps_die "scripts/mkimage failed for $drv"
done

vm_reset
vm_nested_host
vm_modules ext4 brd
vm_ours vhost_pvscsi
vm_bins mkfs.ext4
vm_file "$work/vmw_pvscsi.raw" /inner/vmw_pvscsi.raw
vm_file "$work/pvscsi_mq.raw" /inner/pvscsi_mq.raw
VM_MEM=3072
VM_TIMEOUT=900
cat > "$work/host.sh" <<'GUEST'
# the images live on ext4 (brd): QEMU opens them with O_DIRECT
modprobe -r brd
modprobe brd rd_nr=1 rd_size=262144
mkfs.ext4 -q /dev/ram0 && mkdir -p /mnt/b && mount /dev/ram0 /mnt/b
cp /inner/vmw_pvscsi.raw /inner/pvscsi_mq.raw /mnt/b/
t_check load vps_load vhost_pvscsi
g=/sys/kernel/debug/vhost_pvscsi/gauges
# boot NAME IMAGE DEVICE: the image as the only disk, no -kernel
boot() {
	vps_inner_start "$1" - - 400 \
		-blockdev driver=file,node-name=d0,filename="$2",cache.direct=on \
		-device "$3",id=hba0 \
		-device scsi-hd,bus=hba0.0,drive=d0,scsi-id=0,lun=0,bootindex=0
	vps_inner_wait "$1"
	# SeaBIOS found the disk and SYSLINUX loaded the kernel from it
	# (SYSLINUX moves the cursor between "..." and "ok": escapes out)
	t_match "$1/firmware-read-disk" "$(tr -d '\r\033' < "/tmp/$1.console" |
		sed 's/\[[0-9;?]*[A-Za-z]//g' | tr '\n' ' ')" \
		'Booting from Hard Disk.*SYSLINUX.*Loading /vmlinuz\.\.\. *ok.*Loading /initrd.img\.\.\. *ok'
	t_match "$1/initramfs-found-root" "$(cat "/tmp/$1.console")" 'vps-boot: root filesystem UUID=.* on /dev/sd[a-z]2'
}
boot vhost-vmw_pvscsi /mnt/b/vmw_pvscsi.raw vhost-pvscsi
boot vhost-pvscsi_mq /mnt/b/pvscsi_mq.raw vhost-pvscsi
boot qemu-vmw_pvscsi /mnt/b/vmw_pvscsi.raw pvscsi
vps_wait 10 grep -q 'open_devices 0' $g || true
t_match gauges-zero "$(cat $g | tr '\n' ' ')" '^open_devices 0 requests_in_flight 0 luns 0 $'
t_check unload rmmod vhost_pvscsi
vps_dmesg_clean host-dmesg-clean
GUEST
vm_run boot "$work/host.sh"
