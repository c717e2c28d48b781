#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61 debug
# gate: 612 61
# checks: 36
#
# sriov_vfcfg.ko loaded with a policy before igb (as /etc/modprobe.d would
# do it): when igb binds the PF, the VFs are created with the configured
# MAC (explicit and derived from mac_base), VLAN + QoS, spoofchk and trust,
# as `ip link show` (iproute2) reports them.  igb has no link_state op: the
# failure is reported for that VF only and the rest applies.  max_tx_rate
# answers EINVAL while the PF link is down and is applied when the carrier
# comes up.  rmmod igb + modprobe igb re-applies everything.  Unloading
# sriov_vfcfg leaves the VFs as they are.  An ifname= block that comes to
# match by a rename sets the VF count within probe_window seconds of the
# PF's bind (udev's rename), not after.
. "$(dirname "$0")/../../scripts/vm/harness.sh"
. "$(dirname "$0")/sriov.sh"

sriov_vm
sriov_run sriov-apply <<'GUEST'
check_vfs() { # $1: label
	t_equal "$1/numvfs" "$(cat $PF/sriov_numvfs)" 3
	t_match "$1/vf0" "$(vf 0)" 'link/ether 02:00:00:00:01:00 .*spoof checking off.*trust off'
	t_match "$1/vf1" "$(vf 1)" 'link/ether 02:00:00:00:01:01 .*vlan 10, qos 3.*spoof checking off.*trust off'
	t_match "$1/vf2" "$(vf 2)" 'link/ether 02:aa:bb:cc:dd:ee .*spoof checking on.*trust on'
	t_match "$1/status-vf2" "$(grep ' vf2:' $ST)" 'mac 02:aa:bb:cc:dd:ee: ok; spoofchk on: ok; trust on: ok; state enable: -EOPNOTSUPP;'
}

t_check load vps_load sriov_vfcfg \
	'policy=pf=0000:01:00.0,numvfs=3,mac_base=02:00:00:00:01:00,vf*.spoofchk=off,vf1.vlan=10,vf1.qos=3,vf2.mac=02:aa:bb:cc:dd:ee,vf2.spoofchk=on,vf2.trust=on,vf2.state=enable,vf0.max_tx_rate=100'
t_match policy-readback "$(cat /sys/module/sriov_vfcfg/parameters/policy)" '^pf=0000:01:00.0,numvfs=3,'
t_match before-igb "$(cat $ST)" 'waiting for a PF driver'
t_equal no-vfs-yet "$(ls -d $PF/virtfn* 2>/dev/null)" ""

modprobe igb
t_check applied vps_wait 30 grep -q 'eth0: 3 VFs (totalvfs 7), applied' $ST
cat $ST
$IP link show eth0
check_vfs probe
t_match rate-link-down "$(grep ' vf0:' $ST)" 'rate 0-100: -EINVAL;'

$IP link set eth0 up
t_check carrier vps_wait 20 grep -q 1 /sys/class/net/eth0/carrier
t_check rate-after-carrier vps_wait 20 grep -q 'vf0:.*rate 0-100: ok;' $ST
t_match rate-ip "$(vf 0)" 'max_tx_rate 100Mbps'
cat $ST

t_check rmmod-igb rmmod igb
t_check status-pf-gone vps_wait 20 grep -q 'waiting for a PF driver' $ST
modprobe igb
t_check reapplied vps_wait 30 grep -q 'eth0: 3 VFs (totalvfs 7), applied' $ST
check_vfs reload

t_check rmmod-vfcfg rmmod sriov_vfcfg
t_equal unload-keeps-numvfs "$(cat $PF/sriov_numvfs)" 3
t_match unload-keeps-vf2 "$(vf 2)" 'link/ether 02:aa:bb:cc:dd:ee .*trust on'
t_match dmesg-unload "$(dmesg | grep sriov_vfcfg | tail -1)" 'unloaded; VFs keep their current configuration'

# The PF probe's leave to set the VF count lasts probe_window seconds
# after the bind (udev's rename falls inside it): a block that comes to
# match a PF bound earlier (a rename later on) changes no VF count
echo 0 > $PF/sriov_numvfs
rmmod igb
t_check window/load vps_load sriov_vfcfg 'policy=ifname=late0,numvfs=2'
echo 3 > /sys/module/sriov_vfcfg/parameters/probe_window
modprobe igb
vps_wait 20 test -e /sys/class/net/eth0
sleep 5
$IP link set eth0 down
t_check window/late-rename $IP link set eth0 name late0
t_check window/late-status vps_wait 20 grep -q 'numvfs 2 not applied (0 VFs)' $ST
t_equal window/late-no-vfs "$(cat $PF/sriov_numvfs)" 0
t_match window/late-said "$(dmesg | grep 'not its probe' | tail -1)" 'bound over 3 s ago'
rmmod igb
echo 120 > /sys/module/sriov_vfcfg/parameters/probe_window
modprobe igb
vps_wait 20 test -e /sys/class/net/eth0
$IP link set eth0 down
t_check window/early-rename $IP link set eth0 name late0
t_check window/early-applied vps_wait 30 grep -q 'late0: 2 VFs' $ST
t_equal window/early-vfs "$(cat $PF/sriov_numvfs)" 2
echo 0 > $PF/sriov_numvfs
rmmod sriov_vfcfg
vps_dmesg_clean dmesg
GUEST
