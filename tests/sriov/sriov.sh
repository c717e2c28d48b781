# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# What the VF-helper tests share: a VM with one QEMU igb PF (SR-IOV, seven
# VFs) behind a PCIe root port, and the names their guest scripts use.
# Sourced after scripts/vm/harness.sh.

# sriov_vm [extra -device options before the root port...]
sriov_vm() {
	vm_include igb igbvf
	vm_ours sriov_vfcfg
	vm_bins ip
	vm_qemu -machine q35 "$@" -device pcie-root-port,id=rp0,slot=0 \
		-device igb,bus=rp0,netdev=n0 -netdev user,id=n0,restrict=on
}

# sriov_run NAME: vm_run with the guest script on stdin, after the shared
# guest-side names
sriov_run() {
	local script
	script=$(mktemp /tmp/vps-sriov-XXXXXX)
	cat > "$script" <<'GUEST'
IP=/usr/bin/ip		# busybox ash runs its own ip applet for a bare "ip"
ST=/proc/driver/sriov_vfcfg	# a seq_file: not cut at a page
POL=/sys/module/sriov_vfcfg/parameters/policy
PF=/sys/bus/pci/devices/0000:01:00.0
# the line `ip link show eth0` prints for VF $1
vf() { $IP link show eth0 | grep -E "^ +vf $1 "; }
GUEST
	cat >> "$script"
	vm_run "$1" "$script"
	local rc=$?
	rm -f "$script"
	return $rc
}
