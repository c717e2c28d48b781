#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61 debug
# gate: 612
# checks: 42
#
# When sriov_vfcfg applies a policy, trigger by trigger, on QEMU igb.
# PF probe: loaded before igb, the policy's VF count is set after igb's
# probe has finished (its last line, "Using ... interrupts", comes before
# our "2 VFs enabled" in the kernel log), by a pass that may change the
# count ("last full pass ... PF probe"), never by one started while igb
# registered its net device.  PF link-up: a VF VLAN changed by hand while
# the PF is down stays changed (no event: nothing is re-applied), and is
# restored when the PF comes up, by a pass that re-applies attributes
# only.  PF reset: igb resets its MAC on an MTU change while up (igb_down,
# igb_up) and has no event of its own; the carrier it drops and regains
# starts a pass, after which every VF setting reads ok.  VF reset: igbvf
# probing a VF again (unbind + bind, as after a VF reset) restores its
# VLAN changed by hand.  query_rss, which igb lacks, is reported for its
# VF only (-EOPNOTSUPP).  None of these events changes the VF count: VFs
# are enabled once, at probe.  The periodic drift check is off here
# (resync=0), so that every pass is one of these events'; test_resync_01
# tests it.
. "$(dirname "$0")/../../scripts/vm/harness.sh"
. "$(dirname "$0")/sriov.sh"

sriov_vm
sriov_run sriov-events <<'GUEST'
pass() { sed -n 's/^  last pass: #\([0-9]*\) .*/\1/p' $ST | head -1; }
# a pass numbered above $1 whose "last pass" line matches $2
pass_after() { [ "$(pass)" -gt "$1" ] 2>/dev/null && grep -qE "^  last pass: .*$2" $ST; }
# the line number of the first kernel log line matching $1, 0 if none
logline() { dmesg | grep -n "$1" | head -1 | cut -d: -f1 | grep . || echo 0; }
# no pass for a second: the events of the last step are all served
settled() { _p=$(pass); sleep 1; [ "$(pass)" = "$_p" ]; }
vlan10() { vf 1 | grep -q 'vlan 10, qos 2'; }
no_vlan10() { ! vlan10; }

t_check load vps_load sriov_vfcfg resync=0 'policy=pf=0000:01:00.0,numvfs=2,vf0.mac=02:00:00:00:0e:00,vf0.query_rss=on,vf1.vlan=10,vf1.qos=2'
t_check igb modprobe igb
t_check probe/applied vps_wait 30 grep -q 'eth0: 2 VFs (totalvfs 7), applied, 1 VF settings failed$' $ST
cat $ST
t_match probe/full-pass "$(grep '^  last full pass' $ST)" 'PF probe'
probe_end=$(logline 'igb 0000:01:00.0: Using .* interrupts')
enabled=$(logline 'sriov_vfcfg: 2 VFs enabled')
t_check probe/end-logged test "$probe_end" -gt 0
t_check probe/count-after-probe test "$enabled" -gt "$probe_end"
t_match probe/vf0 "$(vf 0)" 'link/ether 02:00:00:00:0e:00'
t_match probe/vf1 "$(vf 1)" 'vlan 10, qos 2'
t_match probe/query-rss "$(grep ' vf0:' $ST)" 'mac 02:00:00:00:0e:00: ok; query_rss on: -EOPNOTSUPP;'

# PF link-up
t_check link/settled vps_wait 20 settled
t_check link/drift $IP link set eth0 vf 1 vlan 0
sleep 1
t_check link/drift-kept-while-down no_vlan10
n=$(pass)
t_check link/up $IP link set eth0 up
t_check link/carrier vps_wait 20 grep -q 1 /sys/class/net/eth0/carrier
t_check link/pass vps_wait 20 pass_after "$n" 'PF carrier up.*\(attributes\)$'
t_check link/restored vlan10
t_equal link/numvfs "$(cat $PF/sriov_numvfs)" 2

# PF reset
n=$(pass)
t_check reset/mtu $IP link set eth0 mtu 1400
t_check reset/pass vps_wait 30 pass_after "$n" 'PF carrier up.*\(attributes\)$'
t_check reset/carrier grep -q 1 /sys/class/net/eth0/carrier
t_match reset/status "$(grep '^pf=' $ST)" 'eth0: 2 VFs \(totalvfs 7\), applied, 1 VF settings failed$'
t_match reset/vf0-status "$(grep ' vf0:' $ST)" 'mac 02:00:00:00:0e:00: ok;'
t_match reset/vf1-status "$(grep ' vf1:' $ST)" 'vlan 10 qos 2 802.1Q: ok;'
t_match reset/vf0 "$(vf 0)" 'link/ether 02:00:00:00:0e:00'
t_check reset/vf1 vlan10
t_equal reset/numvfs "$(cat $PF/sriov_numvfs)" 2

# VF reset: its driver binds it again
t_check vf/igbvf modprobe igbvf
t_check vf/bound vps_wait 20 test -e /sys/bus/pci/drivers/igbvf/0000:01:10.2
t_check vf/pf-down $IP link set eth0 down
t_check vf/settled vps_wait 20 settled
t_check vf/drift $IP link set eth0 vf 1 vlan 0
sleep 1
t_check vf/drift-kept no_vlan10
n=$(pass)
t_check vf/unbind sh -c 'echo 0000:01:10.2 > /sys/bus/pci/drivers/igbvf/unbind'
t_check vf/bind sh -c 'echo 0000:01:10.2 > /sys/bus/pci/drivers/igbvf/bind'
t_check vf/pass vps_wait 20 pass_after "$n" 'VF driver bound.*\(attributes\)$'
t_check vf/restored vlan10
t_equal vf/numvfs "$(cat $PF/sriov_numvfs)" 2

cat $ST
t_match full-pass-still-probe "$(grep '^  last full pass' $ST)" 'PF probe'
t_equal enabled-once "$(dmesg | grep -c 'sriov_vfcfg: [0-9]* VFs enabled')" 1
t_equal allocated-once "$(dmesg | grep -c 'VFs allocated')" 1
vps_dmesg_clean dmesg
GUEST
