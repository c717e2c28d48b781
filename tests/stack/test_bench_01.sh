#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# checks: 111
# serial: a benchmark; another VM on the other core would skew its ratios
# (make check-full only: about 6 minutes)
#
# scripts/bench --quick --check: the benchmark of everything runs end to
# end.  One KVM guest in a TCG host VM with eight adapters (ours with
# vmw_pvscsi, with pvscsi_mq and with pvscsi_mq polled, QEMU's pvscsi,
# virtio-scsi with an iothread, vhost-scsi on LIO, lsi53c895a,
# megasas-gen2), each with a null_blk LUN and a file LUN on ext4: 4k
# randread at QD 1 and 32 on every adapter and backing moves data and has
# the host VM's counters read around it (32 cases), in a window as long
# as the run (32 more), the Markdown report and the PNG chart are
# written.  It checks that the benchmark works, not what it measures.
TOP=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp -d /tmp/vps-bench-check-XXXXXX)
trap 'rm -rf "$out"' EXIT
"$TOP/scripts/bench" --quick --check --out "$out"
