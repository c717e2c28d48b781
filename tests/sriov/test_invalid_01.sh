#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61 debug
# gate: 612
# checks: 100
#
# Every kind of bad policy is refused with its own error, and nothing is
# half-applied: a bad policy at load time fails the module load (also
# after a good one: modprobe puts the options of modprobe.d before those
# of its command line; the good one, already published, must be freed:
# kmemleak on the debug kernel, at the end); a bad
# run-time write leaves the published policy, the VF count and every VF
# attribute exactly as they were (compared with `ip link show` before and
# after), and the reason shows in the status file.  Covers multicast and
# zero MACs, duplicate MACs (explicit, derived from mac_base, across PF
# blocks), VF index beyond numvfs and beyond sriov_totalvfs, numvfs beyond
# sriov_totalvfs, min rate > max rate, unknown keys, out-of-range VLAN,
# QoS without VLAN, a key given twice (the bare force keyword too, which
# takes no value), a query_rss that is not on or off, a missing or
# malformed PF match, and a multi-PF write whose first block is fine and
# whose second is not.  Last, a block refused only when its PF's driver
# came (too many VFs): VFs made by hand afterwards get none of its driver
# overrides.
. "$(dirname "$0")/../../scripts/vm/harness.sh"
. "$(dirname "$0")/sriov.sh"

sriov_vm
sriov_run sriov-invalid <<'GUEST'
modprobe igb
vps_wait 20 test -e /sys/class/net/eth0

t_check_fails load-bad-policy vps_load sriov_vfcfg 'policy=pf=0000:01:00.0,numvfs=2,vf0.mac=01:00:5e:00:00:01'
t_match load-bad-reason "$(dmesg | grep 'policy refused' | tail -1)" 'vf0.mac: 01:00:5e:00:00:01 is a multicast address'
t_equal load-bad-not-loaded "$(grep -c '^sriov_vfcfg ' /proc/modules)" 0
t_equal load-bad-no-vfs "$(cat $PF/sriov_numvfs)" 0
t_check_fails load-good-then-bad vps_load sriov_vfcfg 'policy=pf=0000:01:00.0,numvfs=2' \
	'policy=pf=0000:01:00.0,numvfs=2,vf0.vlan=4096'
t_equal load-good-then-bad/not-loaded "$(grep -c '^sriov_vfcfg ' /proc/modules)" 0
t_equal load-good-then-bad/no-vfs "$(cat $PF/sriov_numvfs)" 0

good='pf=0000:01:00.0,numvfs=2,vf0.mac=02:00:00:00:00:01,vf1.vlan=5,vf*.trust=on'
t_check load-good vps_load sriov_vfcfg "policy=$good"
t_check applied vps_wait 30 grep -q 'eth0: 2 VFs (totalvfs 7), applied' $ST
snap() { cat $POL $PF/sriov_numvfs; $IP link show eth0 | grep -E '^ +vf '; }
before=$(snap)
echo "$before"
t_match good-vf0 "$before" 'vf 0 +link/ether 02:00:00:00:00:01 .*trust on'
t_match good-vf1 "$before" 'vf 1 .*vlan 5,.*trust on'

P=pf=0000:01:00.0
while IFS='|' read -r name want pol; do
	[ -n "$name" ] || continue
	t_check_fails "$name/refused" sh -c "echo '$pol' > $POL"
	t_match "$name/reason" "$(head -1 $ST)" "^last write refused: .*$want"
	t_equal "$name/untouched" "$(snap)" "$before"
done <<EOF
multicast|vf0.mac: 01:00:5e:00:00:01 is a multicast address|$P,numvfs=3,vf0.mac=01:00:5e:00:00:01
zero-mac|vf1.mac: zero MAC address|$P,numvfs=3,vf1.mac=00:00:00:00:00:00
dup-mac|vf1: MAC 02:00:00:00:00:05 also given to pf=0000:01:00.0 vf0|$P,numvfs=3,vf0.mac=02:00:00:00:00:05,vf1.mac=02:00:00:00:00:05
dup-derived|vf1: MAC 02:00:00:00:00:10 also given to pf=0000:01:00.0 vf0|$P,numvfs=3,mac_base=02:00:00:00:00:10,vf1.mac=02:00:00:00:00:10
dup-across-pfs|MAC 02:00:00:00:00:07 also given to|$P,numvfs=1,vf0.mac=02:00:00:00:00:07;pf=0000:02:00.0,vf3.mac=02:00:00:00:00:07
index-beyond-numvfs|vf2: VF index beyond numvfs 2|$P,numvfs=2,vf2.trust=on
numvfs-beyond-total|numvfs 8 beyond sriov_totalvfs 7|$P,numvfs=8
index-beyond-total|vf7 beyond sriov_totalvfs 7|$P,vf7.trust=on
min-gt-max|vf0: min_tx_rate 200 > max_tx_rate 100|$P,numvfs=2,vf0.min_tx_rate=200,vf0.max_tx_rate=100
unknown-key|color: unknown key|$P,numvfs=2,color=blue
unknown-vf-key|vf0.colour: unknown key|$P,numvfs=2,vf0.colour=red
vlan-range|vf0.vlan: '4096' is not a number in 0..4095|$P,numvfs=2,vf0.vlan=4096
qos-no-vlan|vf1: qos and proto need vf1.vlan|$P,numvfs=2,vf1.qos=3
bad-proto|vf0.proto: '802.1x' is not 802.1Q or 802.1ad|$P,numvfs=2,vf0.vlan=3,vf0.proto=802.1x
bad-state|vf0.state: 'up' is not auto, enable or disable|$P,numvfs=2,vf0.state=up
bad-bool|vf0.spoofchk: 'maybe' is not on or off|$P,numvfs=2,vf0.spoofchk=maybe
twice|vf0.trust: given twice|$P,numvfs=2,vf0.trust=on,vf0.trust=off
no-match|no pf=, ifname= or permaddr= to match the PF|numvfs=2
bad-pci|pf: '01:00.0' is not a PCI address|pf=01:00.0,numvfs=2
two-for-one-pf|pf=0000:01:00.0: two policies for one PF|$P,numvfs=2;$P,numvfs=3
bad-driver|vf0.driver: 'vfio/pci' is not a driver name|$P,numvfs=2,vf0.driver=vfio/pci
base-needs-numvfs|mac_base and vf\*.KEY need numvfs|$P,mac_base=02:00:00:00:00:20
second-block-bad|policy 2: vf0.mac: ff:ff:ff:ff:ff:ff is a multicast address|$P,numvfs=3,vf0.vlan=99;pf=0000:02:00.0,vf0.mac=ff:ff:ff:ff:ff:ff
force-twice|force: given twice|$P,numvfs=3,force,force
force-value|force: unknown key|$P,numvfs=3,force=on
bad-query-rss|vf0.query_rss: 'sometimes' is not on or off|$P,numvfs=2,vf0.query_rss=sometimes
EOF

# a good write afterwards still works and clears the error
t_check good-write-after sh -c "echo '$P,numvfs=2,vf0.mac=02:00:00:00:00:01,vf1.vlan=6' > $POL"
t_check good-applied vps_wait 30 grep -q 'vf1: vlan 6 qos 0 802.1Q: ok;' $ST
t_equal error-cleared "$(grep -c 'last write refused' $ST)" 0
t_match vf1-vlan6 "$($IP link show eth0 | grep -E '^ +vf 1 ')" 'vlan 6,'

# A block that could only be checked against TotalVFs once the PF's
# driver came (published while igb was away) is refused by that pass, and
# refused whole: VFs made by hand afterwards get none of its driver
# overrides (they did until 2026-12-02: vf0 went to vfio-pci)
echo 0 > $PF/sriov_numvfs
rmmod sriov_vfcfg
rmmod igb
t_check late-refusal/load vps_load sriov_vfcfg "policy=$P,numvfs=8,vf0.driver=vfio-pci"
modprobe igb
vps_wait 20 test -e /sys/class/net/eth0
t_check late-refusal/refused vps_wait 30 grep -q 'refused: numvfs 8 beyond sriov_totalvfs 7' $ST
t_equal late-refusal/no-vfs "$(cat $PF/sriov_numvfs)" 0
t_check late-refusal/by-hand sh -c "echo 2 > $PF/sriov_numvfs"
vf0=$(readlink -f $PF/virtfn0)
t_equal late-refusal/no-override "$(cat "$vf0/driver_override" 2>&1)" '(null)'
echo 0 > $PF/sriov_numvfs
vps_dmesg_clean dmesg
GUEST
