#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: debug
#
# The host suite on the debug kernel (KASAN, lockdep, kmemleak, UBSAN,
# debug objects): vps_test check (every command, hostile descriptors,
# resets and aborts in flight), the backing faults under a LUN and the
# detach in flight, and the fuzzer's bounded slice.  The same scripts as
# tests/host, booted with VPS_KERNEL=debug (tests/run sets it); any
# sanitizer or lockdep report in the kernel log fails their <name>/vm
# check, any kmemleak suspect of vhost_pvscsi their kmemleak checks.
export VPS_KERNEL=debug
rc=0
for t in test_target_01 test_faults_01 test_fuzz_01; do
	bash "$(dirname "$0")/../host/$t.sh" || rc=1
done
exit $rc
