#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61 debug
# gate: 612
# checks: 10
#
# Loaded early, as Documentation/sriov-helper.md tells a host whose NIC
# driver is in the initramfs: the module installed where modprobe finds
# it, a `softdep igb pre: sriov_vfcfg` line in /etc/modprobe.d (which
# initramfs-tools copies), the policy on the kernel command line.  Then a
# bare `modprobe igb`, as the initramfs's udev does, loads sriov_vfcfg
# first, with the command line's policy, and the PF's first probe gets its
# VFs configured: created once, MAC set, no pass needed afterwards.
. "$(dirname "$0")/../../scripts/vm/harness.sh"
. "$(dirname "$0")/sriov.sh"

sriov_vm
VM_CMDLINE="sriov_vfcfg.policy=pf=0000:01:00.0,numvfs=2,vf0.mac=02:00:00:00:0e:00,vf1.vlan=7"
sriov_run sriov-early <<'GUEST'
rel=$(uname -r)
mkdir -p "/lib/modules/$rel/updates" /etc/modprobe.d
cp /lib/vps/sriov_vfcfg.ko "/lib/modules/$rel/updates/"
/sbin/depmod -a
echo 'softdep igb pre: sriov_vfcfg' > /etc/modprobe.d/sriov_vfcfg.conf
t_equal nothing-loaded "$(grep -cE '^(igb|sriov_vfcfg) ' /proc/modules)" 0
# kmod's modprobe: busybox's applet knows no softdep
t_check modprobe-igb /sbin/modprobe igb
t_match softdep-loaded-it "$(grep -oE '^sriov_vfcfg ' /proc/modules)" '^sriov_vfcfg $'
t_match policy-from-cmdline "$(cat /sys/module/sriov_vfcfg/parameters/policy)" '^pf=0000:01:00.0,numvfs=2,vf0.mac=02:00:00:00:0e:00,vf1.vlan=7$'
t_check applied vps_wait 30 grep -q 'eth0: 2 VFs (totalvfs 7), applied' $ST
cat $ST
t_match vf0-mac "$(vf 0)" 'link/ether 02:00:00:00:0e:00 '
t_match vf1-vlan "$(vf 1)" 'vlan 7'
# sriov_vfcfg's "loaded" line comes before igb's first one
t_match loaded-first "$(dmesg | grep -E 'sriov_vfcfg: loaded|igb: Intel' | head -1)" 'sriov_vfcfg: loaded'
t_equal vfs-enabled-once "$(dmesg | grep -c 'sriov_vfcfg: [0-9]* VFs enabled')" 1
GUEST
