#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61 debug
# gate: 612
# checks: 15
#
# The completion event index (VPS_SET_FEATURES VPS_FEAT_CMP_EVENT_IDX, the
# module's side of the extension's INTR_MODERATION): tests/host/vps_test
# event on null_blk.  The module offers the feature and refuses unknown
# bits, a bad pointer and a call without rings; with it off every
# completion has its interrupt; on, an interrupt comes for the completion the guest's index
# names (at once, or three completions later), none while the index
# stays behind (counted as suppressed), one for a burst of sixteen; a new
# SETUP_RINGS turns it off again.
. "$(dirname "$0")/../../scripts/vm/harness.sh"

vm_modules null_blk
vm_ours vhost_pvscsi
vm_bins "$VPS_TOP/tests/host/vps_test"
VM_MEM=1024
vm_run host-event <<'GUEST'
modprobe -r null_blk
modprobe null_blk nr_devices=1 gb=1
t_check load vps_load vhost_pvscsi
t_tap event vps_test event /dev/nullb0
t_check unload rmmod vhost_pvscsi
vps_dmesg_clean dmesg
GUEST
