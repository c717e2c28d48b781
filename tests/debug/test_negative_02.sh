#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: debug
# checks: 3
#
# The debug lane's sanitizers fail a test: the harness self-test module
# provokes, at load, a KASAN report (a read one byte past a 16-byte slab
# object), a UBSAN report (a 32-bit shift by 40) and a lockdep report (two
# mutexes taken in both orders), one per VM; each run must fail, for the
# report that its kernel log carries (the regex names the report's kind:
# another report, or none, fails this test).  The module loaded with no
# misbehaviour is clean on this kernel: tests/harness loads it so on the
# stock kernels, tests/debug/test_negative_01 (its leak aside) here.
. "$(dirname "$0")/../../scripts/vm/harness.sh"

vm_ours vps_selftest
vm_expect_fail debug-sanitizers kasan 'not ok neg-kasan/vm: .*kernel log: .*KASAN: slab-out-of-bounds' <<'GUEST'
t_check load vps_load vps_selftest kasan=1
GUEST
vm_expect_fail debug-sanitizers ubsan 'not ok neg-ubsan/vm: .*kernel log: .*UBSAN: shift-out-of-bounds' <<'GUEST'
t_check load vps_load vps_selftest ubsan=1
GUEST
vm_expect_fail debug-sanitizers lockdep 'not ok neg-lockdep/vm: .*kernel log: .*possible circular locking dependency' <<'GUEST'
t_check load vps_load vps_selftest lockdep=1
GUEST
