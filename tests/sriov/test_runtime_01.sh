#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61 debug
# gate: 612
# checks: 50
#
# Run-time policy changes through /sys/module/sriov_vfcfg/parameters/policy
# on a PF that igb already drives: a policy matched by ifname creates 2 VFs
# with VLAN and trust; a new policy matched by permanent MAC changes the
# count to 4 with MACs derived from mac_base, and an 802.1ad VLAN that igb
# refuses is reported for that VF only; an attribute-only change applies
# without recreating VFs; a policy whose ifname does not match says "not
# present" and leaves the VFs alone; drift made with `ip link set ... vf`
# is undone by writing /sys/kernel/sriov_vfcfg/apply; a policy that names
# the PF twice, by ifname= and (second) by pf=, applies the pf= block only
# (no VF recreated, the other block's VLAN not set), says so in the status
# and logs it once; a status longer than a page (200 VF lines of an absent
# PF) is read whole, down to its last line; an empty policy leaves the VFs
# as they are.
. "$(dirname "$0")/../../scripts/vm/harness.sh"
. "$(dirname "$0")/sriov.sh"

sriov_vm
sriov_run sriov-runtime <<'GUEST'
modprobe igb
vps_wait 20 test -e /sys/class/net/eth0
t_check load-empty vps_load sriov_vfcfg
t_equal empty-status "$(cat $ST)" ""
t_equal empty-no-vfs "$(cat $PF/sriov_numvfs)" 0

t_check by-ifname sh -c "echo 'ifname=eth0,numvfs=2,vf0.vlan=100,vf0.qos=2,vf*.trust=on' > $POL"
t_check by-ifname/applied vps_wait 30 grep -q 'eth0: 2 VFs (totalvfs 7), applied' $ST
t_equal by-ifname/numvfs "$(cat $PF/sriov_numvfs)" 2
t_match by-ifname/vf0 "$(vf 0)" 'vlan 100, qos 2,.*trust on'
t_match by-ifname/vf1 "$(vf 1)" 'trust on'

t_check by-permaddr sh -c "echo 'permaddr=52:54:00:12:34:56,numvfs=4,mac_base=02:11:22:00:00:f0,vf*.trust=off,vf3.vlan=7,vf3.proto=802.1ad' > $POL"
t_check by-permaddr/applied vps_wait 30 grep -q 'eth0: 4 VFs (totalvfs 7), applied, 1 VF settings failed' $ST
cat $ST
t_equal by-permaddr/numvfs "$(cat $PF/sriov_numvfs)" 4
t_match by-permaddr/vf0 "$(vf 0)" 'link/ether 02:11:22:00:00:f0 .*trust off'
t_match by-permaddr/vf3 "$(vf 3)" 'link/ether 02:11:22:00:00:f3 .*trust off'
t_equal by-permaddr/vf0-novlan "$(vf 0 | grep -c vlan)" 0
t_match by-permaddr/8021ad "$(grep ' vf3:' $ST)" 'vlan 7 qos 0 802.1ad: -EPROTONOSUPPORT;'
t_match by-permaddr/vf3-rest "$(grep ' vf3:' $ST)" 'mac 02:11:22:00:00:f3: ok;.* trust off: ok;'

vf2dev=$(readlink -f $PF/virtfn2)
t_check attrs-only sh -c "echo 'pf=0000:01:00.0,numvfs=4,mac_base=02:11:22:00:00:f0,vf2.trust=on,vf2.spoofchk=off' > $POL"
t_check attrs-only/applied vps_wait 30 grep -q 'vf2: mac 02:11:22:00:00:f2: ok; spoofchk off: ok; trust on: ok;' $ST
t_match attrs-only/vf2 "$(vf 2)" 'spoof checking off.*trust on'
t_equal attrs-only/same-vf-device "$(readlink -f $PF/virtfn2)" "$vf2dev"
t_equal attrs-only/no-recreate "$(dmesg | grep -c 'sriov_vfcfg: 4 VFs enabled')" 1

before=$($IP link show eth0 | grep -E '^ +vf ')
t_check no-match sh -c "echo 'ifname=eth9,numvfs=1' > $POL"
t_check no-match/status vps_wait 20 grep -q 'ifname=eth9: not present' $ST
t_equal no-match/untouched "$($IP link show eth0 | grep -E '^ +vf ')" "$before"

t_check back sh -c "echo 'pf=0000:01:00.0,ifname=eth0,numvfs=4,mac_base=02:11:22:00:00:f0,vf1.vlan=33' > $POL"
t_check back/applied vps_wait 30 grep -q 'vf1: mac 02:11:22:00:00:f1: ok; vlan 33 qos 0 802.1Q: ok;' $ST
t_check drift $IP link set eth0 vf 1 vlan 0 mac 02:00:00:00:99:99
t_match drift/made "$(vf 1)" 'link/ether 02:00:00:00:99:99'
t_check apply sh -c "echo 1 > /sys/kernel/sriov_vfcfg/apply"
t_match apply/restored "$(vf 1)" 'link/ether 02:11:22:00:00:f1 .*vlan 33,'

# the ifname= block comes first but loses to the pf= block: applied in
# turn, it would make 2 VFs and pf= 4 again, each logging "VFs enabled"
enabled=$(dmesg | grep -c 'sriov_vfcfg: [0-9]* VFs enabled')
t_check conflict sh -c "echo 'ifname=eth0,numvfs=2,vf1.vlan=44;pf=0000:01:00.0,numvfs=4,mac_base=02:11:22:00:00:f0,vf1.vlan=33' > $POL"
t_check conflict/status vps_wait 30 grep -q '^ifname=eth0: 0000:01:00.0: conflict: pf=0000:01:00.0 selects the same PF' $ST
t_check conflict/applied vps_wait 30 grep -q '^pf=0000:01:00.0: 0000:01:00.0 eth0: 4 VFs (totalvfs 7), applied' $ST
t_check conflict/apply sh -c "echo 1 > /sys/kernel/sriov_vfcfg/apply"
cat $ST
t_equal conflict/numvfs "$(cat $PF/sriov_numvfs)" 4
t_equal conflict/no-recreate "$(dmesg | grep -c 'sriov_vfcfg: [0-9]* VFs enabled')" "$enabled"
t_match conflict/vf1 "$(vf 1)" 'vlan 33,'
t_equal conflict/one-vf1-line "$(grep -c ' vf1:' $ST)" 1
t_equal conflict/warned-once "$(dmesg | grep -c 'conflict: pf=0000:01:00.0 and ifname=eth0 both select 0000:01:00.0')" 1

# more than a page of status: nothing of 0000:02:00.0 (not in the VM) is
# checked against a sriov_totalvfs, its 200 VFs are listed "pending"
t_check long sh -c "echo 'pf=0000:01:00.0,numvfs=4,mac_base=02:11:22:00:00:f0,vf1.vlan=33;pf=0000:02:00.0,numvfs=200,vf*.trust=on' > $POL"
t_check long/applied vps_wait 30 grep -q '^pf=0000:02:00.0: not present' $ST
# read through a pipe, not stat()ed (procfs says 0); unquoted, the blanks
# a wc may pad the number with go
t_check long/size test $(cat $ST | wc -c) -gt 4096
t_equal long/vf-lines "$(grep -c '^  vf[0-9]*: trust on: pending;$' $ST)" 200
t_equal long/last-line "$(tail -n 1 $ST)" '  vf199: trust on: pending;'

before=$($IP link show eth0 | grep -E '^ +vf ')
t_check clear sh -c "echo > $POL"
t_equal clear/readback "$(cat $POL)" ""
t_equal clear/numvfs "$(cat $PF/sriov_numvfs)" 4
t_equal clear/untouched "$($IP link show eth0 | grep -E '^ +vf ')" "$before"
vps_dmesg_clean dmesg
GUEST
