#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: debug
#
# The VF helper's essentials on the debug kernel: a policy applied at igb
# probe, igb reload and unload (tests/sriov/test_apply_01) and run-time
# policy changes (test_runtime_01), booted with VPS_KERNEL=debug.
export VPS_KERNEL=debug
rc=0
for t in test_apply_01 test_runtime_01; do
	bash "$(dirname "$0")/../sriov/$t.sh" || rc=1
done
exit $rc
