#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: debug
# checks: 58
#
# sriov_vfcfg on a non-PCI PF: netdevsim (CONFIG_NETDEVSIM in the debug
# kernel), which implements every VF op, link state included.  A policy
# matched by ifname is applied at load to the 4 VFs enabled through
# /sys/bus/netdevsim/devices/netdevsim10/sriov_numvfs: MAC (explicit and
# from mac_base), VLAN + QoS, spoofchk, trust, min/max rate and link
# state, read back with `ip link show`; numvfs that differs from the VF
# count is reported as not applicable and leaves the count alone; a
# run-time change applies; drift is undone (at the latest) by
# /sys/kernel/sriov_vfcfg/apply;
# a VF driver override is refused per VF; bad policies are refused whole.
export VPS_KERNEL=debug
. "$(dirname "$0")/../../scripts/vm/harness.sh"

vm_include netdevsim
vm_ours sriov_vfcfg
vm_bins ip
vm_run nsim <<'GUEST'
IP=/usr/bin/ip		# busybox ash runs its own ip applet for a bare "ip"
ST=/proc/driver/sriov_vfcfg
POL=/sys/module/sriov_vfcfg/parameters/policy
ND=/sys/bus/netdevsim/devices/netdevsim10
t_check modprobe modprobe netdevsim
t_check new-device sh -c 'echo "10 1" > /sys/bus/netdevsim/new_device'
t_check netdev vps_wait 20 sh -c "ls $ND/net/ | grep -q ."
NS=$(ls $ND/net/ | head -1)
echo "netdevsim PF: $NS"
t_check up $IP link set "$NS" up
t_check numvfs sh -c "echo 4 > $ND/sriov_numvfs"
vf() { $IP link show "$NS" | grep -E "^ +vf $1 "; }

pol="ifname=$NS,numvfs=4,mac_base=02:aa:00:00:00:10,vf0.mac=02:bb:00:00:00:01,vf0.vlan=100,vf0.qos=3,vf*.spoofchk=off,vf1.trust=on,vf2.min_tx_rate=10,vf2.max_tx_rate=100,vf3.state=disable,vf1.state=enable"
t_check load vps_load sriov_vfcfg "policy=$pol"
t_check applied vps_wait 30 grep -q "netdevsim10 $NS: 4 VFs (not PCI), applied" $ST
cat $ST
$IP link show "$NS"
t_match vf0 "$(vf 0)" 'link/ether 02:bb:00:00:00:01 .*vlan 100, qos 3,.*spoof checking off'
t_match vf1 "$(vf 1)" 'link/ether 02:aa:00:00:00:11 .*spoof checking off, link-state enable, trust on'
t_match vf2 "$(vf 2)" 'link/ether 02:aa:00:00:00:12 .*max_tx_rate 100Mbps, min_tx_rate 10Mbps'
t_match vf3 "$(vf 3)" 'link/ether 02:aa:00:00:00:13 .*link-state disable'
t_match vf3-status "$(grep ' vf3:' $ST)" 'state disable: ok;'
t_equal numvfs-kept "$(cat $ND/sriov_numvfs)" 4

t_check runtime sh -c "echo 'ifname=$NS,numvfs=4,mac_base=02:aa:00:00:00:10,vf0.vlan=200,vf0.qos=1,vf1.state=disable,vf1.trust=off,vf3.state=auto' > $POL"
t_check runtime/applied vps_wait 30 grep -q 'vf3: mac 02:aa:00:00:00:13: ok; state auto: ok;' $ST
cat $ST
t_match runtime/vf0 "$(vf 0)" 'link/ether 02:aa:00:00:00:10 .*vlan 200, qos 1,'
t_match runtime/vf1 "$(vf 1)" 'link-state disable, trust off'
t_match runtime/vf3 "$(vf 3)" 'link-state auto'

t_check not-applicable sh -c "echo 'ifname=$NS,numvfs=6,vf*.trust=on,vf0.driver=vfio-pci' > $POL"
t_check not-applicable/status vps_wait 30 grep -q "netdevsim10 $NS: 4 VFs (not PCI), applied, numvfs 6 not applicable" $ST
cat $ST
t_equal not-applicable/count "$(cat $ND/sriov_numvfs)" 4
t_match not-applicable/vf3 "$(vf 3)" 'trust on'
t_match not-applicable/vf5 "$(grep ' vf5:' $ST)" 'trust on: no such VF;'
t_match not-applicable/driver "$(grep ' vf0:' $ST)" 'driver vfio-pci: -EOPNOTSUPP;'

t_check back sh -c "echo 'ifname=$NS,numvfs=4,vf2.mac=02:cc:00:00:00:02,vf2.state=enable' > $POL"
t_check back/applied vps_wait 30 grep -q 'vf2: mac 02:cc:00:00:00:02: ok; state enable: ok;' $ST
t_check drift $IP link set "$NS" vf 2 mac 02:00:00:00:99:99 state disable
# no check of the drift itself: the NETDEV_CHANGE that rtnetlink sends
# after "ip link set" may already have re-applied the policy
t_check apply sh -c "echo 1 > /sys/kernel/sriov_vfcfg/apply"
# the write ran a pass of its own (it waits for it), whatever the event did
t_match apply/pass "$(grep '^  last pass' $ST | head -1)" 'apply write'
t_match apply/restored "$(vf 2)" 'link/ether 02:cc:00:00:00:02 .*link-state enable'

snap() { cat $POL $ND/sriov_numvfs; $IP link show "$NS" | grep -E '^ +vf '; }
before=$(snap)
bad() {
	t_check_fails "bad/$1" sh -c "echo '$2' > $POL"
	t_match "bad/$1/reason" "$(grep 'last write refused' $ST)" "$3"
	t_equal "bad/$1/untouched" "$(snap)" "$before"
}
bad multicast "ifname=$NS,numvfs=4,vf1.mac=01:00:5e:00:00:01" 'is a multicast address'
bad zero "ifname=$NS,numvfs=4,vf1.mac=00:00:00:00:00:00" 'zero MAC address'
bad dup "ifname=$NS,numvfs=4,vf0.mac=02:00:00:00:00:07,vf1.mac=02:00:00:00:00:07" 'also given to'
bad rate "ifname=$NS,numvfs=4,vf1.min_tx_rate=50,vf1.max_tx_rate=10" 'min_tx_rate 50 > max_tx_rate 10'
bad state "ifname=$NS,numvfs=4,vf1.state=up" 'is not auto, enable or disable'
bad unknown "ifname=$NS,numvfs=4,vf1.colour=red" 'unknown key'
bad beyond "ifname=$NS,numvfs=2,vf3.trust=on" 'VF index beyond numvfs'

t_check clear sh -c "echo > $POL"
t_equal clear/untouched "$($IP link show "$NS" | grep -E '^ +vf ')" "$(echo "$before" | grep -E '^ +vf ')"
t_check unload rmmod sriov_vfcfg
t_check del-device sh -c 'echo 10 > /sys/bus/netdevsim/del_device'
vps_dmesg_clean dmesg
GUEST
