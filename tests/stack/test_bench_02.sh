#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# checks: 42
# serial: a benchmark that pins threads to each of the two host VM CPUs
# (make check-full only: about 2 minutes)
#
# scripts/bench --pin cross with two host VM CPUs and a two-vCPU guest:
# our multi-queue adapter on two queues and on one, and vhost-scsi on
# two and on one, run the two-job case (rr2j) on both backings; the
# pinner finds both guest vCPUs and our queue workers (by the thread ids
# in debugfs; ours-mq's queue 1 among them), and each of them, read back
# from /proc/TID/status when the first job starts, is allowed only the
# CPU the plan gave it (bench's pin/cross and pin/cross-readback checks),
# besides every case moving data and the report and chart being written.
# It checks that pinning works, not what it gains.
TOP=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp -d /tmp/vps-bench-pin-XXXXXX)
trap 'rm -rf "$out"' EXIT
"$TOP/scripts/bench" --quick --check --jobs rr2j --host-cpus 2 --guest-cpus 2 --pin cross \
	--adapters ours-mq,ours-mq1q,vhost-scsi,vhost-scsi1q --out "$out"
