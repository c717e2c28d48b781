#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 61
#
# Issue 4 item 9: scripts/bench-guest --check, pvscsi_mq and in-tree
# vmw_pvscsi side by side against the same QEMU pvscsi and disk (4k
# randread QD 1, QD 32, and QD 32 submitted in batches of 8).  Fails when
# pvscsi_mq needs more doorbell writes or register writes per I/O than
# vmw_pvscsi (5 % slack) or more guest interrupts per I/O (15 % slack:
# interrupt coalescing at QD 32 depends on QEMU's timing).  The table goes
# to the test log.
TOP=$(cd "$(dirname "$0")/../.." && pwd)
exec "$TOP/scripts/bench-guest" --kernel "${VPS_KERNEL:-612}" --check
