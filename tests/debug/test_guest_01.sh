#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: debug
#
# The guest driver's essentials on the debug kernel: pvscsi_mq against
# QEMU's stock pvscsi, its probe error paths and rmmod/insmod cycles
# (tests/guest/test_probe_01), resets under fio verify (test_reset_01),
# eh_abort under load when a throttled drive makes commands time out
# (test_abort_01), booted with VPS_KERNEL=debug.  The plain I/O matrix
# (test_io_01) is left to the stock kernels: the reset and abort tests
# already run fio verify through the same I/O path, and KASAN makes the
# matrix the longest item of a cold make check.
export VPS_KERNEL=debug
rc=0
for t in test_probe_01 test_reset_01 test_abort_01; do
	bash "$(dirname "$0")/../guest/$t.sh" || rc=1
done
exit $rc
