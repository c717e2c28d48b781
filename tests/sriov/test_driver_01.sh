#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61 debug
# gate: 612
# checks: 25
#
# VF driver override.  igb is loaded and its PF is up, igbvf is loaded (it
# would take every VF); then sriov_vfcfg is loaded with a policy that gives
# vf0 to vfio-pci and vf2 explicitly to igbvf: as the VFs are created, vf0
# gets its override from the PCI bus notifier before it can probe, so igbvf
# never touches it, and sriov_vfcfg loads vfio-pci for it (no udev in the
# VM).  VFs created this way are reprobed after their MAC is set, so igbvf
# on vf2 starts with the policy's MAC (igb hands a VF its MAC only while the
# PF is up, hence the order).  QEMU's intel-iommu gives vfio-pci a real
# IOMMU group.  Traffic-free checks: the vfio group node exists, the igbvf
# VF netdev carries the MAC from the policy.  Then a run-time policy wants
# vf1, which the host uses through igbvf, on vfio-pci: refused, since igbvf
# is not the policy's driver for it (the status and the log say so, and
# the VF keeps its driver); the same policy with force moves it (unbind +
# reprobe), and vf0, left out of the new policy, stays as it is.
. "$(dirname "$0")/../../scripts/vm/harness.sh"
. "$(dirname "$0")/sriov.sh"

vm_include vfio-pci
VM_CMDLINE="intel_iommu=on"
sriov_vm -device intel-iommu,intremap=off
sriov_run sriov-driver <<'GUEST'
D=/sys/bus/pci/devices
drv() { basename "$(readlink "$D/$1/driver" 2>/dev/null)"; }
t_check igb modprobe igb
vps_wait 20 test -e /sys/class/net/eth0
t_check pf-up /usr/bin/ip link set eth0 up
t_check igbvf-first modprobe igbvf
t_check load vps_load sriov_vfcfg \
	'policy=pf=0000:01:00.0,numvfs=3,vf0.driver=vfio-pci,vf2.driver=igbvf,vf2.mac=02:00:00:00:22:02'
t_check applied vps_wait 30 grep -q '3 VFs (totalvfs 7), applied' $ST
cat $ST
ls -l $D/*/driver
t_equal vf0-vfio "$(drv 0000:01:10.0)" vfio-pci
t_equal vf0-override "$(cat $D/0000:01:10.0/driver_override)" vfio-pci
t_equal vf0-never-igbvf "$(dmesg | grep -c 'igbvf 0000:01:10.0')" 0
t_equal vf1-native "$(drv 0000:01:10.2)" igbvf
t_equal vf2-igbvf "$(drv 0000:01:10.4)" igbvf
t_match status "$(cat $ST)" 'vf0: driver vfio-pci: ok;'
g=$(basename "$(readlink $D/0000:01:10.0/iommu_group)")
t_check vfio-group-node test -c "/dev/vfio/$g"
n=$(ls $D/0000:01:10.4/net/ 2>/dev/null)
t_check vf2-netdev test -n "$n"
t_equal vf2-netdev-mac "$(cat /sys/class/net/$n/address 2>/dev/null)" 02:00:00:00:22:02

t_check runtime-write sh -c "echo 'pf=0000:01:00.0,numvfs=3,vf1.driver=vfio-pci' > $POL"
t_check runtime-refused vps_wait 30 grep -q 'vf1: driver vfio-pci: in use by igbvf, not rebound (force overrides);' $ST
t_equal runtime-kept-igbvf "$(drv 0000:01:10.2)" igbvf
t_equal runtime-logged "$(dmesg | grep -c 'vf1 is bound to igbvf, not rebound to vfio-pci')" 1
t_check runtime-force sh -c "echo 'pf=0000:01:00.0,numvfs=3,force,vf1.driver=vfio-pci' > $POL"
t_check runtime-applied vps_wait 30 grep -q 'vf1: driver vfio-pci: ok;' $ST
t_equal vf1-moved "$(drv 0000:01:10.2)" vfio-pci
t_equal vf0-kept "$(drv 0000:01:10.0)" vfio-pci
t_equal vf2-kept "$(drv 0000:01:10.4)" igbvf
vps_dmesg_clean dmesg
GUEST
