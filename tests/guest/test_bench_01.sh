#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# checks: 16
# serial: a benchmark; another VM on the other core would skew its ratios
# (6.12 only in make check: the comparison takes 3 min per kernel; run
# scripts/bench-guest for 6.1)
#
# Issue 4 item 9: scripts/bench-guest --check, pvscsi_mq and in-tree
# vmw_pvscsi side by side in one VM against the same QEMU pvscsi and disk
# (4k randread QD 1, QD 32, and QD 32 submitted in batches of 8), 5
# interleaved rounds per workload (A B, B A, ...).  Fails when
# pvscsi_mq's median needs more doorbell writes or register writes per
# I/O than vmw_pvscsi's (5 % slack) or more guest interrupts per I/O
# (15 % slack: how many completions QEMU batches per MSI at QD 32 depends
# on timing, and one driver's runs spread over +-15 % here).  The table,
# and every run, go to the test log.
TOP=$(cd "$(dirname "$0")/../.." && pwd)
exec "$TOP/scripts/bench-guest" --kernel "${VPS_KERNEL:-612}" --rounds 5 --check
