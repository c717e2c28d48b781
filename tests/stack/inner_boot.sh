# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=sh
# Inner half of tests/stack/test_boot_01.sh: the test script of a system
# booted from a scripts/mkimage disk (DRV and ID are prepended by the
# test).  The root filesystem must be the image's ext4 partition on the
# only SCSI disk, behind DRV, and writable; the firmware that booted it is
# printed for the host VM to check (the same image boots under both).
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
n=0
for b in /sys/block/sd*; do [ -e "$b" ] && n=$((n + 1)); done
t_equal only-disk "$n" 1
# The same image boots under both firmwares: what a boot writes is its
# own (the other boot's file must not pass for it), and it is read back
# from the disk, not from the page cache.
t_match root-mounted-rw "$(awk '$2 == "/" {print $4}' /proc/mounts | tail -1)" '^rw(,|$)'
w="$ID-$fw-$(cat /proc/sys/kernel/random/uuid)"
t_check root-write-synced sh -c "echo '$w' > /vps-written && sync"
echo 3 > /proc/sys/vm/drop_caches
t_equal root-writable "$(cat /vps-written)" "$w"
vps_dmesg_clean dmesg-clean
