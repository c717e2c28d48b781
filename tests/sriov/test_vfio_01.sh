#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61 debug
# gate: 612
# checks: 77
#
# A VF handed to vfio-pci is never taken away by sriov_vfcfg, unless the
# policy says force.  A policy makes 2 VFs; then the admin makes 3 by hand
# (sriov_numvfs) and binds the third to vfio-pci (driver_override +
# drivers_probe; Debian's kernels have no VFIO_NOIOMMU, so QEMU's
# intel-iommu gives it an IOMMU group, as in test_driver_01).  Three PF
# carrier flaps, `ip link set ... vf` changes (on a VF the policy covers:
# undone at once; on the vfio VF, which it does not: kept) and policy
# re-applies (a new policy with 4 VFs, a write to apply, a policy that
# wants vf2 on igbvf) each leave the VF count at 3 and vf2 on vfio-pci,
# and igb never allocates VFs again; the status says why (count not
# applied outside PF probe and policy writes; refused while vf2 is bound
# to vfio-pci), the kernel log says the refusal once, and attributes of
# the other VFs are still re-applied.  With force in the block, the count
# does become 4, vf2 leaves vfio-pci, and the status and log say so.
# Last, VFs that igb creates itself during its probe (max_vfs=2) get the
# policy's vfio-pci override before they can probe: igbvf never has VF0.
. "$(dirname "$0")/../../scripts/vm/harness.sh"
. "$(dirname "$0")/sriov.sh"

vm_include vfio-pci
VM_CMDLINE="intel_iommu=on"
sriov_vm -device intel-iommu,intremap=off
sriov_run sriov-vfio <<'GUEST'
D=/sys/bus/pci/devices
VF2=0000:01:10.4
drv() { basename "$(readlink "$D/$1/driver" 2>/dev/null)"; }
bound_to() { [ "$(drv "$1")" = "$2" ]; }
vf_mac() { vf "$1" | grep -q "link/ether $2"; }
pass() { sed -n 's/^  last pass: #\([0-9]*\) .*/\1/p' $ST | head -1; }
# a pass numbered above $1 whose "last pass" line matches $2
pass_after() { [ "$(pass)" -gt "$1" ] 2>/dev/null && grep -qE "^  last pass: .*$2" $ST; }
# the count, vf2 on vfio-pci, igb's VF allocations: as the admin left them
kept() {
	t_equal "$1/numvfs" "$(cat $PF/sriov_numvfs)" 3
	t_equal "$1/vf2-vfio" "$(drv $VF2)" vfio-pci
	t_equal "$1/no-realloc" "$(dmesg | grep -c 'VFs allocated')" "$alloc"
}
POLICY='pf=0000:01:00.0,numvfs=2,vf0.mac=02:00:00:00:0a:00,vf1.vlan=10'

t_check igb modprobe igb
vps_wait 20 test -e /sys/class/net/eth0
t_check load vps_load sriov_vfcfg "policy=$POLICY"
t_check applied vps_wait 30 grep -q 'eth0: 2 VFs (totalvfs 7), applied' $ST

# the admin's own VFs: three instead of two, the third for a guest
t_check by-hand/0 sh -c "echo 0 > $PF/sriov_numvfs"
t_check by-hand/3 sh -c "echo 3 > $PF/sriov_numvfs"
t_check vfio/modprobe modprobe vfio-pci
t_check vfio/override sh -c "echo vfio-pci > $D/$VF2/driver_override"
t_check vfio/probe sh -c "echo $VF2 > /sys/bus/pci/drivers_probe"
t_equal vfio/bound "$(drv $VF2)" vfio-pci
alloc=$(dmesg | grep -c 'VFs allocated')
# the VF driver binding started a pass: attributes only
t_check by-hand/status vps_wait 20 grep -q 'numvfs 2 not applied (3 VFs): set only at PF probe or on a policy write; vf2 is bound to vfio-pci' $ST
t_check by-hand/vf0-mac vps_wait 20 vf_mac 0 02:00:00:00:0a:00
cat $ST
kept by-hand

i=1
while [ $i -le 3 ]; do
	n=$(pass)
	t_check "flap$i/up" $IP link set eth0 up
	t_check "flap$i/carrier" vps_wait 20 grep -q 1 /sys/class/net/eth0/carrier
	t_check "flap$i/pass" vps_wait 20 pass_after "$n" 'PF carrier up.*\(attributes\)$'
	kept "flap$i"
	[ $i = 3 ] || t_check "flap$i/down" $IP link set eth0 down
	i=$((i + 1))
done
t_match flaps/why "$(grep '^pf=' $ST)" 'numvfs 2 not applied \(3 VFs\): set only at PF probe or on a policy write; vf2 is bound to vfio-pci'

# the PF is up: rtnetlink's NETDEV_CHANGE after each change starts a pass
t_check vf-set/vf0 $IP link set eth0 vf 0 mac 02:00:00:00:99:99
t_check vf-set/vf0-undone vps_wait 20 vf_mac 0 02:00:00:00:0a:00
t_check vf-set/vf2 $IP link set eth0 vf 2 mac 02:00:00:00:0b:02
sleep 1
t_match vf-set/vf2-kept "$(vf 2)" 'link/ether 02:00:00:00:0b:02'
kept vf-set

t_check rewrite sh -c "echo 'pf=0000:01:00.0,numvfs=4,vf0.mac=02:00:00:00:0a:00,vf1.vlan=10' > $POL"
t_check rewrite/status vps_wait 30 grep -q 'numvfs 4 refused (3 VFs): vf2 is bound to vfio-pci; force overrides' $ST
kept rewrite
t_check apply sh -c "echo 1 > /sys/kernel/sriov_vfcfg/apply"
t_match apply/pass "$(grep '^  last pass' $ST)" 'apply write.*\(count, drivers, attributes\)$'
kept apply
t_match apply/vf1-vlan "$(vf 1)" 'vlan 10,'
t_equal refused-logged-once "$(dmesg | grep -c 'numvfs 4 refused: vf2 is bound to vfio-pci')" 1

t_check igbvf modprobe igbvf
t_check driver sh -c "echo 'pf=0000:01:00.0,numvfs=3,vf2.driver=igbvf' > $POL"
t_check driver/status vps_wait 30 grep -q 'vf2: driver igbvf: in use by vfio-pci, not rebound (force overrides);' $ST
cat $ST
kept driver
t_equal driver/logged "$(dmesg | grep -c 'vf2 is bound to vfio-pci, not rebound to igbvf')" 1

t_check force sh -c "echo 'pf=0000:01:00.0,numvfs=4,force,vf0.mac=02:00:00:00:0a:00' > $POL"
t_check force/applied vps_wait 30 grep -q 'eth0: 4 VFs (totalvfs 7), applied, forced: numvfs 4 removed VFs in use: vf2 is bound to vfio-pci' $ST
cat $ST
t_equal force/numvfs "$(cat $PF/sriov_numvfs)" 4
t_check force/vf2-igbvf vps_wait 20 bound_to $VF2 igbvf
t_match force/logged "$(dmesg | grep 'force: setting 4 VFs')" 'removes VFs in use: vf2 is bound to vfio-pci'
t_match force/vf0 "$(vf 0)" 'link/ether 02:00:00:00:0a:00'

# VFs igb makes itself during its probe (max_vfs=) get their override
# before they can probe, on this first bind of the PF too
t_check probe-vfs/rmmod rmmod igb
t_check probe-vfs/policy sh -c "echo 'pf=0000:01:00.0,numvfs=2,vf0.driver=vfio-pci' > $POL"
t_check probe-vfs/waiting vps_wait 20 grep -q 'waiting for a PF driver' $ST
igbvf0=$(dmesg | grep -c 'igbvf 0000:01:10.0')
enabled=$(dmesg | grep -c 'sriov_vfcfg: [0-9]* VFs enabled')
t_check probe-vfs/igb modprobe igb max_vfs=2
t_check probe-vfs/applied vps_wait 30 grep -q 'eth[0-9]*: 2 VFs (totalvfs 7), applied' $ST
cat $ST
t_equal probe-vfs/vf0-vfio "$(drv 0000:01:10.0)" vfio-pci
t_equal probe-vfs/vf0-never-igbvf "$(dmesg | grep -c 'igbvf 0000:01:10.0')" "$igbvf0"
t_equal probe-vfs/count-by-igb "$(dmesg | grep -c 'sriov_vfcfg: [0-9]* VFs enabled')" "$enabled"
vps_dmesg_clean dmesg
GUEST
