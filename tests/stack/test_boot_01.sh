#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# gate: 612
# checks: 77
# checks-gate: 29
#
# Boot from a vhost-pvscsi disk.  scripts/mkimage builds a bootable raw
# image per guest driver (MBR; a FAT boot partition with SYSLINUX for
# BIOS, GRUB as \EFI\BOOT\BOOTX64.EFI for UEFI, Debian's kernel and an
# initramfs holding vmw_pvscsi or pvscsi_mq; an ext4 root).  In a host VM
# that loads vhost_pvscsi.ko, the patched QEMU boots each as the only
# disk, with no -kernel, on -device vhost-pvscsi: with SeaBIOS (its PVSCSI
# driver reads SYSLINUX, the kernel and the initramfs through our module)
# and with OVMF (PvScsiDxe: scripts/build-ovmf, as Debian's OVMF has
# none); and (not in the gate) the vmw_pvscsi image on QEMU's -device
# pvscsi under both, for comparison.  The gate boots vmw_pvscsi's image
# with SeaBIOS and pvscsi_mq's with OVMF: each firmware and each driver
# once.  Inside (inner_boot.sh) the root filesystem must be that image's
# ext4 partition behind the expected driver, and writable; the host VM
# checks which firmware and loader booted it.
. "$(dirname "$0")/../../scripts/vm/harness.sh"

work=$(mktemp -d /tmp/vps-boot-XXXXXX)
trap 'rm -rf "$work"' EXIT
ovmf=$(cat "$VPS_CACHE/ovmf/current" 2>/dev/null)/OVMF.fd
[ -s "$ovmf" ] || vps_die "no OVMF with PvScsiDxe (scripts/build-ovmf; scripts/setup runs it)"
for drv in vmw_pvscsi pvscsi_mq; do
	id=vps-boot-$drv-$$
	{ echo "DRV=$drv ID=$id"; cat "$(dirname "$0")/inner_boot.sh"; } > "$work/inner-$drv.sh"
	VPS_KERNEL=$VM_KERNEL "$VPS_TOP/scripts/mkimage" --driver "$drv" --firmware both --id "$id" \
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
vm_file "$ovmf" /usr/share/qemu/OVMF-pvscsi.fd
VM_MEM=3072
VM_TIMEOUT=1200
# QEMU's own pvscsi boots the same image only for comparison (a fault of
# the image, not ours, fails there too): check-full's, not the gate's
echo "TIER=${VPS_TIER:-full}" > "$work/host.sh"
cat >> "$work/host.sh" <<'GUEST'
# the images live on ext4 (brd): QEMU opens them with O_DIRECT
modprobe -r brd
modprobe brd rd_nr=1 rd_size=262144
mkfs.ext4 -q /dev/ram0 && mkdir -p /mnt/b && mount /dev/ram0 /mnt/b
cp /inner/vmw_pvscsi.raw /inner/pvscsi_mq.raw /mnt/b/
t_check load vps_load vhost_pvscsi
g=/sys/kernel/debug/vhost_pvscsi/gauges
# boot NAME IMAGE DEVICE FIRMWARE: the image as the only disk, no -kernel
boot() {
	local fwarg= con
	[ "$4" = uefi ] && fwarg="-bios /usr/share/qemu/OVMF-pvscsi.fd"
	# shellcheck disable=SC2086
	vps_inner_start "$1" - - 600 $fwarg \
		-blockdev driver=file,node-name=d0,filename="$2",cache.direct=on \
		-device "$3",id=hba0 \
		-device scsi-hd,bus=hba0.0,drive=d0,scsi-id=0,lun=0,bootindex=0
	vps_inner_wait "$1"
	# what the firmware and the loader printed (escapes out: SYSLINUX
	# moves the cursor between "..." and "ok")
	con=$(tr -d '\r\033' < "/tmp/$1.console" | sed 's/\[[0-9;?]*[A-Za-z]//g' | tr '\n' ' ')
	if [ "$4" = bios ]; then
		t_match "$1/loader-read-disk" "$con" \
			'Booting from Hard Disk.*SYSLINUX.*Loading /vmlinuz\.\.\. *ok.*Loading /initrd.img\.\.\. *ok'
	else
		t_match "$1/loader-read-disk" "$con" 'BdsDxe: starting Boot[0-9A-F]+ .*Scsi\(0x0,0x0\)'
	fi
	t_match "$1/initramfs-found-root" "$con" 'vps-boot: root filesystem UUID=.* on /dev/sd[a-z]2'
	t_match "$1/firmware" "$con" "vps-image: root /dev/sd[a-z]2 ext4, firmware $4"
}
for fw in bios uefi; do
	[ "$TIER:$fw" = gate:uefi ] || boot "vhost-vmw_pvscsi-$fw" /mnt/b/vmw_pvscsi.raw vhost-pvscsi $fw
	[ "$TIER:$fw" = gate:bios ] || boot "vhost-pvscsi_mq-$fw" /mnt/b/pvscsi_mq.raw vhost-pvscsi $fw
	[ "$TIER" = gate ] || boot "qemu-vmw_pvscsi-$fw" /mnt/b/vmw_pvscsi.raw pvscsi $fw
done
vps_wait 10 grep -q 'open_devices 0' $g || true
t_match gauges-zero "$(cat $g | tr '\n' ' ')" '^open_devices 0 requests_in_flight 0 luns 0 $'
t_check unload rmmod vhost_pvscsi
vps_dmesg_clean host-dmesg-clean
GUEST
vm_run boot "$work/host.sh"
