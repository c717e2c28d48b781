# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=sh
# Inner half of tests/stack/test_boot_01.sh: the test script of a system
# booted from a scripts/mkimage disk (DRV, ID and FW are prepended by the
# test).  The root filesystem must be the image's ext4 partition on the
# only SCSI disk, behind DRV, and writable.
r=$(awk '$2 == "/" {print $1 " " $3}' /proc/mounts | tail -1)
fw=bios
[ -d /sys/firmware/efi ] && fw=uefi
echo "vps-image: root $r, firmware $fw"
t_match root-on-lun-partition "$r" '^/dev/sd[a-z]+2 ext4$'
d=${r%% *}
d=${d#/dev/}
disk=${d%2}
hctl=$(ls "/sys/block/$disk/device/scsi_device/" 2>/dev/null)
t_equal root-driver "$(cat "/sys/class/scsi_host/host${hctl%%:*}/proc_name" 2>/dev/null)" "$DRV"
t_equal root-image-id "$(cat /vps-root-id)" "$ID"
t_equal only-disk "$(ls /sys/block | grep -c '^sd')" 1
t_equal firmware "$fw" "$FW"
t_check root-writable sh -c 'echo "$0" > /vps-written && sync && test "$(cat /vps-written)" = "$0"' "$ID"
vps_dmesg_clean dmesg-clean
