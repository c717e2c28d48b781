#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61 debug
# gate: 612
# checks: 15
#
# Binding: in-tree vmw_pvscsi and pvscsi_mq both match 15ad:07c0.  With
# vmw_pvscsi loaded first it owns the HBA; driver_override + unbind +
# drivers_probe (Documentation/guest-driver.md) moves it to pvscsi_mq,
# which then writes a verified fio pattern.  Moved back the same way,
# vmw_pvscsi reads the pattern pvscsi_mq wrote and verifies it: two
# independent drivers agree on the data.
. "$(dirname "$0")/../../scripts/vm/harness.sh"
. "$(dirname "$0")/guest.sh"

guest_setup bind
vm_modules vmw_pvscsi
vm_bins fio
guest_hba
guest_disk d0 64M 0
vm_run guest-bind <<'GUEST'
dev=$(grep -l 0x07c0 /sys/bus/pci/devices/*/device | head -1)
dev=$(basename "$(dirname "$dev")")
drv() { basename "$(readlink /sys/bus/pci/devices/$dev/driver)"; }
move_to() {
	echo "$1" > /sys/bus/pci/devices/$dev/driver_override
	echo "$dev" > /sys/bus/pci/devices/$dev/driver/unbind
	echo "$dev" > /sys/bus/pci/drivers_probe
}
common="--filename=/dev/sda --direct=1 --ioengine=libaio --bs=8k --iodepth=16 --rw=randwrite --verify=crc32c --verify_fatal=1 --size=$(vps_dbg 16M 4M) --output-format=terse --minimal"
t_equal in-tree-owns-it "$(drv)" vmw_pvscsi
t_check load-ours vps_load pvscsi_mq
t_equal still-in-tree "$(drv)" vmw_pvscsi
t_check move-to-ours move_to pvscsi_mq
t_equal ours-owns-it "$(drv)" pvscsi_mq
t_check ours-disk vps_wait 20 test -b /dev/sda
t_equal ours-host "$(vps_scsi_disks pvscsi_mq)" sda
t_check ours-write-verify fio --name=x --do_verify=1 $common
t_check move-back move_to vmw_pvscsi
t_equal in-tree-again "$(drv)" vmw_pvscsi
t_check in-tree-disk vps_wait 20 test -b /dev/sda
t_equal in-tree-host "$(vps_scsi_disks vmw_pvscsi)" sda
t_check in-tree-verifies-ours fio --name=x --verify_only=1 $common
vps_dmesg_clean dmesg
GUEST
