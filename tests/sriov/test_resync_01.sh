#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61 debug
# gate: 612
# checks: 35
#
# The periodic drift check (resync=), for what sends no event: a VF reset
# or FLR through sysfs while its driver stays bound.  igb keeps the PF down
# here, so a VF setting changed by hand (`ip link set ... vf`) starts no
# pass (no carrier: test_events_01 shows it stays changed without the
# check).  With resync=2 the check finds the drift and sets only what
# differs, by a pass the status names "drift check", attributes only, and
# the kernel log says which VF setting it set again.  A check that finds
# nothing leaves no pass behind, and a setting the driver refused (igb's
# max_tx_rate without link: -EINVAL) is not tried again every period.  resync=0 stops the checks (the drift
# stays), a write of a period starts them again.  An FLR through sysfs
# leaves the VF's settings as the policy says.  A drift check never
# changes the VF count: VFs the admin made by hand (3 instead of 2) stay,
# and get their attributes.  Bad periods are refused.
. "$(dirname "$0")/../../scripts/vm/harness.sh"
. "$(dirname "$0")/sriov.sh"

sriov_vm
sriov_run sriov-resync <<'GUEST'
RS=/sys/module/sriov_vfcfg/parameters/resync
pass() { sed -n 's/^  last pass: #\([0-9]*\) .*/\1/p' $ST | head -1; }
# a pass numbered above $1 whose "last pass" line matches $2
pass_after() { [ "$(pass)" -gt "$1" ] 2>/dev/null && grep -qE "^  last pass: .*$2" $ST; }
mac0() { vf 0 | grep -q 'link/ether 02:00:00:00:0d:00'; }
vlan10() { vf 1 | grep -q 'vlan 10,'; }

t_check igb modprobe igb
vps_wait 20 test -e /sys/class/net/eth0
t_check load vps_load sriov_vfcfg resync=2 'policy=pf=0000:01:00.0,numvfs=2,vf0.mac=02:00:00:00:0d:00,vf0.max_tx_rate=100,vf1.vlan=10'
t_check applied vps_wait 30 grep -q 'eth0: 2 VFs (totalvfs 7), applied, 1 VF settings failed$' $ST
t_equal pf-down "$(cat /sys/class/net/eth0/operstate)" down
t_equal period "$(cat $RS)" 2

# nothing drifted: checks run, no pass is recorded
n=$(pass)
sleep 5
t_equal quiet/no-pass "$(pass)" "$n"
t_match quiet/rate-refused "$(grep ' vf0:' $ST)" 'rate 0-100: -EINVAL;'
t_equal quiet/refused-not-retried "$(dmesg | grep -c 'rate read back different')" 0

# drift by hand: set again by the next check.  A check may run between
# the two commands, so the two settings may come back in two passes: wait
# for each (and its log line, printed after the setting) on its own.
t_check drift/mac $IP link set eth0 vf 0 mac 02:00:00:00:0b:0b
t_check drift/vlan $IP link set eth0 vf 1 vlan 0
t_check drift/pass vps_wait 10 pass_after "$n" 'drift check \(attributes\)$'
t_check drift/mac-restored vps_wait 10 mac0
t_check drift/vlan-restored vps_wait 10 vlan10
vps_wait 5 sh -c "dmesg | grep -q 'vf0: mac read back different'"
vps_wait 5 sh -c "dmesg | grep -q 'vf1: vlan read back different'"
t_match drift/logged "$(dmesg | grep 'vf0: mac read back different')" 'set again: 0$'
t_match drift/logged-vlan "$(dmesg | grep 'vf1: vlan read back different')" 'set again: 0$'

# off: the drift stays
t_check off sh -c "echo 0 > $RS"
n=$(pass)
t_check off/drift $IP link set eth0 vf 0 mac 02:00:00:00:0b:0b
sleep 5
t_check off/kept sh -c "$IP link show eth0 | grep -q 'vf 0 .*link/ether 02:00:00:00:0b:0b'"
t_equal off/no-pass "$(pass)" "$n"
t_check on sh -c "echo 1 > $RS"
t_check on/restored vps_wait 10 mac0

# a VF FLR through sysfs: its settings stay as the policy says.  (igb
# itself keeps a MAC and a VLAN the PF set across a VF reset, so this
# shows that nothing undoes them, not that the module set them again.)
t_check flr sh -c 'echo 1 > /sys/bus/pci/devices/0000:01:10.0/reset'
sleep 3
t_check flr/mac mac0
t_check flr/vlan vlan10

# a drift check never changes the count
t_check by-hand/0 sh -c "echo 0 > $PF/sriov_numvfs"
t_check by-hand/3 sh -c "echo 3 > $PF/sriov_numvfs"
t_check by-hand/mac vps_wait 10 mac0
t_check by-hand/vlan vps_wait 10 vlan10
sleep 3
t_equal by-hand/numvfs "$(cat $PF/sriov_numvfs)" 3
t_match by-hand/status "$(grep '^pf=' $ST)" 'numvfs 2 not applied \(3 VFs\): set only at PF probe or on a policy write'

# bad periods
t_check_fails bad/word sh -c "echo soon > $RS"
t_check_fails bad/range sh -c "echo 86401 > $RS"
t_equal bad/kept "$(cat $RS)" 1
vps_dmesg_clean dmesg
GUEST
