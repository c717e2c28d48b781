#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61 debug
# gate: 612
# checks: 13
#
# What scripts/vfcfg-from-link prints is a policy sriov_vfcfg takes.  On
# the build machine, a .link file for the VM's igb PF (Path=, [Link]
# Name=eth0, 3 VFs; VF0 with MAC, VLAN, QoS and trust; VF1 with spoof
# check, link state and RSS query) and an interfaces file whose post-up
# line sets VF2's MAC (merged into the PF's block through Name=) are
# converted (tests/static/test_convert_01 checks the text itself); in the
# VM the policy is written as it is: accepted whole (read back unchanged,
# no refusal), 3 VFs made, each setting igb supports read back with `ip
# link show`, the two it lacks (link state, RSS query) reported for VF1
# only.
. "$(dirname "$0")/../../scripts/vm/harness.sh"
. "$(dirname "$0")/sriov.sh"

src=$(mktemp -d /tmp/vps-convert-vm-XXXXXX)
trap 'rm -rf "$src"' EXIT
cat > "$src/10-vm-igb.link" <<'EOF'
[Match]
Path=pci-0000:01:00.0

[Link]
Name=eth0
SR-IOVVirtualFunctions=3

[SR-IOV]
VirtualFunction=0
MACAddress=02:00:00:00:0c:00
VLANId=100
QualityOfService=3
Trust=yes

[SR-IOV]
VirtualFunction=1
MACSpoofCheck=no
LinkState=auto
QueryReceiveSideScaling=yes
EOF
cat > "$src/interfaces" <<'EOF'
iface eth0 inet manual
	post-up ip link set $IFACE vf 2 mac 02:00:00:00:0c:02
EOF
if "$VPS_TOP/scripts/vfcfg-from-link" "$src/10-vm-igb.link" "$src/interfaces" \
	> "$src/policy" 2> "$src/err"; then
	echo "VPS-RESULT ok sriov-convert/converted"
else
	echo "VPS-RESULT not ok sriov-convert/converted: $(tr '\n' ' ' < "$src/err")"
fi

sriov_vm
vm_file "$src/policy" /lib/vps/policy
sriov_run sriov-convert <<'GUEST'
cat /lib/vps/policy
t_check igb modprobe igb
vps_wait 20 test -e /sys/class/net/eth0
t_check load vps_load sriov_vfcfg
t_check write sh -c "cat /lib/vps/policy > $POL"
t_equal readback "$(cat $POL)" "$(cat /lib/vps/policy)"
t_check applied vps_wait 30 grep -q 'eth0: 3 VFs (totalvfs 7), applied, 2 VF settings failed' $ST
cat $ST
t_equal not-refused "$(grep -c 'last write refused' $ST)" 0
t_match vf0 "$(vf 0)" 'link/ether 02:00:00:00:0c:00 .*vlan 100, qos 3,.*trust on'
t_match vf1 "$(vf 1)" 'spoof checking off'
t_match vf1-status "$(grep ' vf1:' $ST)" 'spoofchk off: ok; state auto: -EOPNOTSUPP; query_rss on: -EOPNOTSUPP;$'
t_match vf2 "$(vf 2)" 'link/ether 02:00:00:00:0c:02'
vps_dmesg_clean dmesg
GUEST
