#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# checks: 5
# serial: a 2-vCPU host VM (two TCG threads)
#
# Two inner guests at once in a 2-vCPU host VM, the case every other
# nested test avoids by giving its host VM one vCPU: scripts/stress-nested
# --concurrent 2 boots pairs of 1-vCPU inner guests (vmw_pvscsi on our
# device, a file LUN on ext4) that run fio, 16 inner runs in all.  No host
# VM may die and no inner guest may fail or panic.  Regression for QEMU
# patch 0006: any vCPU's FPU state load cleared IGNNE# in CPU 0's hflags2
# from its own thread, racing CPU 0's VMRUN/#VMEXIT updates of its
# nested-paging bit; the host VM reset, or an inner guest triple-faulted,
# every few minutes (before the patch, 3 of 6 host-VM boots died and 3
# inner guests triple-faulted in 56 inner runs; Documentation/testing.md,
# "the first CPU's hflags2").
# check-full only: about 5 minutes of both cores.
TOP=$(cd "$(dirname "$0")/../.." && pwd)
res() { if [ "$2" = 0 ]; then echo "VPS-RESULT ok smp/$1"; else echo "VPS-RESULT not ok smp/$1: $3"; fi; }
work=$(mktemp -d /tmp/vps-smp-XXXXXX)
trap 'rm -rf "$work"' EXIT

runs=16
cell=vhost-pvscsi/vmw_pvscsi/2/yes/16/612
"$TOP/scripts/stress-nested" --backing file --concurrent 2 --runs "$runs" --seconds 10 \
	--out "$work/s.tsv" "$cell" > "$work/out" 2>&1
rc=$?
sed 's/^/# /' "$work/out"
res stress-exit-0 "$rc" "scripts/stress-nested exited $rc"
# the cell's line: cell, settings, inner runs, inner panics, other inner
# failures, host VM boots, host VM deaths, seconds
line=$(awk -F'\t' -v c="$cell" '$1 == c' "$work/s.tsv" | tail -1)
IFS=$'\t' read -r _ _ nrun ipanic ifail _ deaths _ <<< "$line"
res inner-runs-done "$([ "${nrun:-0}" = "$runs" ]; echo $?)" "${nrun:-none} of $runs inner runs done"
res no-inner-panic "$([ "${ipanic:-x}" = 0 ]; echo $?)" "${ipanic:-no result} inner guests panicked"
res no-inner-failure "$([ "${ifail:-x}" = 0 ]; echo $?)" "${ifail:-no result} inner guests failed (reset, exit, fio)"
res no-host-vm-death "$([ "${deaths:-x}" = 0 ]; echo $?)" "${deaths:-no result} host VMs died"
