#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: debug
# checks: 11
#
# The debug lane's kmemleak check catches a leak: the harness self-test
# module leaks a 200-byte allocation (kmalloc-256) at load (vps_selftest leak=1); after
# rmmod, vps_kmemleak_check must report it (the backtrace's frames of the
# unloaded module no longer resolve: the rule counts those) and fail.
# The failing check is captured and inverted here; a check that passes
# fails this test.  That scan, made with nothing of ours loaded, covers
# the run so far (/init's final check is left out); loading a module again
# must undo that.
. "$(dirname "$0")/../../scripts/vm/harness.sh"

vm_ours vps_selftest
# the report this test provokes is printed on the console
VM_DMESG_ALLOW='unreferenced object'
vm_run debug-kmemleak-negative <<'GUEST'
t_check kmemleak-present test -w /sys/kernel/debug/kmemleak
t_check load vps_load vps_selftest leak=1
t_check unload rmmod vps_selftest
had=0
[ -e /tmp/.vps-failed ] && had=1
( exec 3>/tmp/kl.res; vps_kmemleak_check leak )
[ $had = 1 ] || rm -f /tmp/.vps-failed
cat /tmp/kl.res
t_match leak-reported "$(cat /tmp/kl.res)" '^VPS-RESULT not ok leak: kmemleak: [1-9][0-9]* object'
t_match leak-backtrace "$(cat /tmp/.kmemleak.ours)" 'size 256'
t_equal scan-covers-run "$(cat /tmp/.vps-kmemleak-covered)" leak
t_check reload vps_load vps_selftest
t_check reload-uncovers test ! -e /tmp/.vps-kmemleak-covered
t_check unload-again rmmod vps_selftest
GUEST
