#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: debug
#
# The guest driver's essentials on the debug kernel: pvscsi_mq against
# QEMU's stock pvscsi with fio verify (tests/guest/test_io_01), its
# probe error paths and rmmod/insmod cycles (test_probe_01) and resets
# under fio verify (test_reset_01), eh_abort under load when a throttled
# drive makes commands time out (test_abort_01), booted with
# VPS_KERNEL=debug.
export VPS_KERNEL=debug
rc=0
for t in test_io_01 test_probe_01 test_reset_01 test_abort_01; do
	bash "$(dirname "$0")/../guest/$t.sh" || rc=1
done
exit $rc
