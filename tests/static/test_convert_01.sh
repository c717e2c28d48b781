#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# gate: 612
# checks: 22
#
# scripts/vfcfg-from-link, without a VM, on files as hosts have them; each
# case checks the exit status, stdout and stderr exactly.  (1) A
# systemd/network directory: a PF matched by Path= (Driver= dropped with a
# warning) with 4 VFs, two [SR-IOV] sections and a drop-in adding a third,
# renamed uplink0 by [Link] Name=; a PF matched by MACAddress= (permaddr=,
# with a warning); 99-default.link (no SR-IOV: not ours); a masked file;
# a later file matching the same PF (skipped, as systemd-udevd would) --
# plus an interfaces file whose post-up lines for uplink0 ($IFACE, dev,
# two commands on one line) land in the first PF's block, and a stanza
# with pre-up sriov_numvfs writes (echo 0 then 3, `|| true`), a continued
# line, a silenced command and commands that are not about VFs (left
# alone, shell variables and all).  (2) -m prints a modprobe.d options line.
# (3) A .link the policy cannot express: a glob, a host condition, a VF
# beyond SR-IOVVirtualFunctions=, a section without VirtualFunction=, a
# multicast MAC, a QoS beyond 7 -- each reported at its FILE:LINE, no
# policy printed.  (4) interfaces lines that cannot be converted: a shell
# loop, an InfiniBand attribute, a sysfs path not naming the PF, qos
# without vlan, a `source` line.  (5) interfaces lines that contradict the
# .link of the PF they rename into: another MAC, a VF beyond its count, a
# MAC given twice, another count.  (6) A second [SR-IOV] section for one
# VF replaces the first, with a warning, as in systemd; QoS without VLANId
# is dropped, as systemd drops it.  (7) Files without SR-IOV settings and
# (8) no arguments fail.
TOP=$(cd "$(dirname "$0")/../.." && pwd)
CONV=$TOP/scripts/vfcfg-from-link
w=$(mktemp -d /tmp/vps-convert-XXXXXX)
trap 'rm -rf "$w"' EXIT
res() { # name, status, why
	if [ "$2" = 0 ]; then echo "VPS-RESULT ok convert/$1"; else echo "VPS-RESULT not ok convert/$1: $3"; fi
}
# case NAME WANT_RC ARGS...: stdin holds the wanted stdout, a line
# "--- stderr", then the wanted stderr
case_() {
	local name=$1 want_rc=$2 rc
	shift 2
	awk '/^--- stderr$/ { f = 1; next } { print > (f ? "'"$w/want.err"'" : "'"$w/want.out"'") }' \
		> /dev/null
	touch "$w/want.out" "$w/want.err"
	(cd "$w" && "$CONV" "$@" > "$w/got.out" 2> "$w/got.err")
	rc=$?
	res "$name/status" "$([ "$rc" = "$want_rc" ]; echo $?)" "exit $rc, want $want_rc"
	res "$name/stdout" "$(cmp -s "$w/got.out" "$w/want.out"; echo $?)" \
		"$(diff "$w/want.out" "$w/got.out" | head -5 | tr '\n' ' ')"
	res "$name/stderr" "$(cmp -s "$w/got.err" "$w/want.err"; echo $?)" \
		"$(diff "$w/want.err" "$w/got.err" | head -5 | tr '\n' ' ')"
	rm -f "$w/want.out" "$w/want.err"
}

if [ ! -x /usr/bin/python3 ]; then
	res python3 1 "/usr/bin/python3 is missing: the converter needs it"
	exit 0
fi

mkdir -p "$w/network/10-uplink.link.d" "$w/bad"
cat > "$w/network/10-uplink.link" <<'EOF'
# the uplink PF: 4 VFs, VF0 for the router VM
[Match]
Path=pci-0000:01:00.0
Driver=igb

[Link]
Name=uplink0
SR-IOVVirtualFunctions=4

[SR-IOV]
VirtualFunction=0
MACAddress=02:00:00:00:01:00
VLANId=100
QualityOfService=3
Trust=yes
MACSpoofCheck=no

[SR-IOV]
VirtualFunction=2
LinkState=auto
QueryReceiveSideScaling=true
VLANId=200
VLANProtocol=802.1ad
EOF
cat > "$w/network/10-uplink.link.d/50-vf3.conf" <<'EOF'
[SR-IOV]
VirtualFunction=3
MACSpoofCheck=off
EOF
cat > "$w/network/20-storage.link" <<'EOF'
[Match]
MACAddress=52:54:00:AB:CD:EF

[Link]
SR-IOVVirtualFunctions=2

[SR-IOV]
VirtualFunction=1
MACAddress=02-00-00-00-02-01
LinkState=no
EOF
cat > "$w/network/99-default.link" <<'EOF'
[Match]
OriginalName=*

[Link]
NamePolicy=keep kernel database onboard slot path
MACAddressPolicy=persistent
EOF
: > "$w/network/30-retired.link"
cat > "$w/network/40-again.link" <<'EOF'
[Match]
Path=pci-0000:01:00.0

[Link]
SR-IOVVirtualFunctions=7
EOF
cat > "$w/interfaces" <<'EOF'
auto lo
iface lo inet loopback

auto uplink0
iface uplink0 inet manual
	post-up /usr/bin/ip link set $IFACE vf 1 mac 02:00:00:00:01:01 spoofchk off
	post-up ip link set dev uplink0 vf 3 max_tx_rate 500 min_tx_rate 100 ; ip link set uplink0 vf 3 trust on

iface enp2s0f1 inet manual
	pre-up echo 0 > /sys/class/net/enp2s0f1/device/sriov_numvfs
	pre-up echo 3 > /sys/class/net/$IFACE/device/sriov_numvfs || true
	post-up ip link set enp2s0f1 vf 0 vlan 30 qos 2 \
		state enable
	post-up ip link set enp2s0f1 vf 2 mac 02:00:00:00:03:02 2>/dev/null
	post-up ip link set $IFACE up
	post-up ip route add 10.9.0.0/16 via $GATEWAY dev $IFACE
EOF
case_ hosts 0 network interfaces <<'EOF'
pf=0000:01:00.0,numvfs=4,vf0.mac=02:00:00:00:01:00,vf0.vlan=100,vf0.qos=3,vf0.spoofchk=off,vf0.trust=on,vf1.mac=02:00:00:00:01:01,vf1.spoofchk=off,vf2.vlan=200,vf2.proto=802.1ad,vf2.state=auto,vf2.query_rss=on,vf3.spoofchk=off,vf3.trust=on,vf3.min_tx_rate=100,vf3.max_tx_rate=500;permaddr=52:54:00:ab:cd:ef,numvfs=2,vf1.mac=02:00:00:00:02:01,vf1.state=disable;ifname=enp2s0f1,numvfs=3,vf0.vlan=30,vf0.qos=2,vf0.state=enable,vf2.mac=02:00:00:00:03:02
--- stderr
network/10-uplink.link:4: warning: Driver=igb dropped: sriov_vfcfg does not match by driver; the other keys name the PF
network/20-storage.link:2: warning: MACAddress=52:54:00:ab:cd:ef becomes permaddr=: sriov_vfcfg matches the PF's permanent address, which is its address unless it was changed
network/30-retired.link:0: warning: masked (empty or /dev/null): skipped
network/40-again.link:1: warning: skipped: it matches what network/10-uplink.link:1 matches, and systemd applies only the first
EOF

case_ modprobe 0 -m network/20-storage.link <<'EOF'
options sriov_vfcfg policy=permaddr=52:54:00:ab:cd:ef,numvfs=2,vf1.mac=02:00:00:00:02:01,vf1.state=disable
--- stderr
network/20-storage.link:2: warning: MACAddress=52:54:00:ab:cd:ef becomes permaddr=: sriov_vfcfg matches the PF's permanent address, which is its address unless it was changed
EOF

cat > "$w/bad/30-bad.link" <<'EOF'
[Match]
Path=pci-0000:03:00.*
KernelCommandLine=sriov

[Link]
SR-IOVVirtualFunctions=2

[SR-IOV]
VirtualFunction=5
Trust=yes

[SR-IOV]
VLANId=10

[SR-IOV]
VirtualFunction=1
QualityOfService=9
VLANId=12
MACAddress=01:00:5e:00:00:01
EOF
case_ bad-link 1 bad/30-bad.link <<'EOF'
--- stderr
bad/30-bad.link:2: error: Path=pci-0000:03:00.*: negations and globs cannot be converted
bad/30-bad.link:3: error: KernelCommandLine= cannot be converted: the policy applies on every host that loads it
bad/30-bad.link:9: error: VirtualFunction=5 is not below SR-IOVVirtualFunctions=2 (bad/30-bad.link:6): systemd drops the section, sriov_vfcfg refuses the policy
bad/30-bad.link:12: error: [SR-IOV] without VirtualFunction=
bad/30-bad.link:17: error: QualityOfService=9: a VF's VLAN priority is 0..7
bad/30-bad.link:19: error: MACAddress=01:00:5e:00:00:01: not a unicast MAC address
6 error(s): no policy written
EOF

cat > "$w/bad/interfaces" <<'EOF'
iface eth3 inet manual
	post-up for i in 0 1; do ip link set eth3 vf $i spoofchk off; done
	post-up ip link set eth3 vf 0 node_guid 00:11:22:33:44:55:66:77
	post-up echo 2 > /sys/devices/pci0000:00/0000:00:03.0/sriov_numvfs
	post-up ip link set eth3 vf 1 qos 2
source /etc/network/interfaces.d/*
EOF
case_ bad-interfaces 1 bad/interfaces <<'EOF'
--- stderr
bad/interfaces:2: error: 'do ip link set eth3 vf $i spoofchk off': shell variables other than $IFACE cannot be converted
bad/interfaces:3: error: vf 0 node_guid: not a VF attribute sriov_vfcfg knows
bad/interfaces:4: error: /sys/devices/pci0000:00/0000:00:03.0/sriov_numvfs: only /sys/class/net/IF/device/sriov_numvfs and /sys/bus/pci/devices/DDDD:BB:DD.F/sriov_numvfs convert
bad/interfaces:5: error: vf 1: qos and proto need vlan in the same command
bad/interfaces:6: error: source is not followed: give the files it names as arguments
5 error(s): no policy written
EOF

cat > "$w/bad/uplink-interfaces" <<'EOF'
iface uplink0 inet manual
	post-up ip link set uplink0 vf 0 mac 02:00:00:00:09:00
	post-up ip link set uplink0 vf 5 trust on
	post-up ip link set uplink0 vf 1 mac 02:00:00:00:01:00
	post-up echo 6 > /sys/class/net/uplink0/device/sriov_numvfs
EOF
case_ contradictions 1 network/10-uplink.link bad/uplink-interfaces <<'EOF'
--- stderr
bad/uplink-interfaces:2: error: vf0 mac=02:00:00:00:09:00 conflicts with mac=02:00:00:00:01:00 at network/10-uplink.link:12
bad/uplink-interfaces:3: error: vf5 is beyond numvfs=4 (network/10-uplink.link:8)
bad/uplink-interfaces:4: error: MAC 02:00:00:00:01:00 also given at network/10-uplink.link:12
bad/uplink-interfaces:5: error: numvfs 6 conflicts with SR-IOVVirtualFunctions=4 at network/10-uplink.link:8
network/10-uplink.link:4: warning: Driver=igb dropped: sriov_vfcfg does not match by driver; the other keys name the PF
4 error(s): no policy written
EOF

cat > "$w/bad/50-twice.link" <<'EOF'
[Match]
PermanentMACAddress=52:54:00:00:00:50

[SR-IOV]
VirtualFunction=1
Trust=on
QualityOfService=4

[SR-IOV]
VirtualFunction=1
MACAddress=02:00:00:00:50:01
EOF
case_ systemd-drops 0 bad/50-twice.link <<'EOF'
permaddr=52:54:00:00:00:50,vf1.mac=02:00:00:00:50:01
--- stderr
bad/50-twice.link:1: warning: no SR-IOVVirtualFunctions=: systemd creates VFs up to vf1 when fewer exist, sriov_vfcfg leaves the VF count alone; add numvfs= to the policy to set it
bad/50-twice.link:7: warning: QualityOfService= without VLANId= dropped, as systemd ignores it
bad/50-twice.link:10: warning: vf1: a second [SR-IOV] section replaces the one at bad/50-twice.link:4, as in systemd
EOF

case_ no-sriov 1 network/99-default.link <<'EOF'
--- stderr
no SR-IOV settings found
EOF

"$CONV" > /dev/null 2>&1
res usage "$([ $? = 2 ]; echo $?)" "no arguments: want exit 2"
exit 0
