#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: debug
# checks: 31
#
# Busy answers and query_rss, on netdevsim (the debug kernel's: Debian's
# have no CONFIG_NETDEVSIM), which implements ndo_set_vf_rss_query_en.
# query_rss from the policy reads back with `ip link show` (on, then off
# after a run-time write).  The debug kernel has fault injection, and
# sriov_vfcfg then has /sys/kernel/debug/sriov_vfcfg/fail_vf_busy: its
# ndo_set_vf_* calls answer -EBUSY as i40e and ice answer while a VF
# resets.  Three busy answers in a row: the VLAN is set by the third retry
# ("ok after 3 busy answers", the last pass a retry); a driver that stays
# busy: one try and five retries, then the status says it gave up, the
# PF line counts the failure and no retry is pending, the VLAN is the old
# one; once the driver answers again, a write to apply sets it.
export VPS_KERNEL=debug
. "$(dirname "$0")/../../scripts/vm/harness.sh"

vm_include netdevsim
vm_ours sriov_vfcfg
vm_bins ip
vm_run sriov-busy <<'GUEST'
IP=/usr/bin/ip		# busybox ash runs its own ip applet for a bare "ip"
ST=/proc/driver/sriov_vfcfg
POL=/sys/module/sriov_vfcfg/parameters/policy
ND=/sys/bus/netdevsim/devices/netdevsim10
FI=/sys/kernel/debug/sriov_vfcfg/fail_vf_busy
t_check modprobe modprobe netdevsim
t_check new-device sh -c 'echo "10 1" > /sys/bus/netdevsim/new_device'
t_check netdev vps_wait 20 sh -c "ls $ND/net/ | grep -q ."
NS=$(ls $ND/net/ | head -1)
t_check numvfs sh -c "echo 2 > $ND/sriov_numvfs"
vf() { $IP link show "$NS" | grep -E "^ +vf $1 "; }

t_check load vps_load sriov_vfcfg "policy=ifname=$NS,numvfs=2,vf1.query_rss=on"
t_check rss/applied vps_wait 30 grep -q 'vf1: query_rss on: ok;' $ST
t_match rss/on "$(vf 1)" 'query_rss on'
t_check rss/write sh -c "echo 'ifname=$NS,numvfs=2,vf1.query_rss=off' > $POL"
t_check rss/applied-off vps_wait 30 grep -q 'vf1: query_rss off: ok;' $ST
t_match rss/off "$(vf 1)" 'query_rss off'

t_check knob test -d $FI
t_check arm sh -c "echo 0 > $FI/verbose && echo 3 > $FI/times && echo 100 > $FI/probability"
t_check busy3 sh -c "echo 'ifname=$NS,numvfs=2,vf0.vlan=10' > $POL"
t_check busy3/ok vps_wait 30 grep -q 'vf0: vlan 10 qos 0 802.1Q: ok after 3 busy answers;' $ST
cat $ST
t_match busy3/vlan "$(vf 0)" 'vlan 10,'
t_match busy3/retry-pass "$(grep '^  last pass' $ST)" 'retry'

t_check arm-always sh -c "echo -1 > $FI/times"
t_check always sh -c "echo 'ifname=$NS,numvfs=2,vf0.vlan=20' > $POL"
t_check always/gave-up vps_wait 30 grep -q 'vf0: vlan 20 qos 0 802.1Q: -EBUSY after 6 busy answers, gave up;' $ST
cat $ST
t_match always/pf-line "$(grep "^ifname=$NS:" $ST)" 'applied, 1 VF settings failed$'
t_equal always/no-retry-pending "$(grep -c retrying $ST)" 0
t_match always/old-vlan "$(vf 0)" 'vlan 10,'

t_check disarm sh -c "echo 0 > $FI/probability"
t_check apply sh -c "echo 1 > /sys/kernel/sriov_vfcfg/apply"
t_match apply/ok "$(grep ' vf0:' $ST)" 'vlan 20 qos 0 802.1Q: ok;$'
t_match apply/vlan "$(vf 0)" 'vlan 20,'

t_check unload rmmod sriov_vfcfg
t_check del-device sh -c 'echo 10 > /sys/bus/netdevsim/del_device'
vps_dmesg_clean dmesg
GUEST
