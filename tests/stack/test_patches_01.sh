#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
#
# The QEMU series, without a VM: its copy of the uAPI header
# (qemu-patches/0001-*) is what scripts/sync-qemu-header makes from
# include/uapi/vhost_pvscsi.h today, every patch has a Signed-off-by, and
# QEMU's own checkpatch finds no error in any of them.
TOP=$(cd "$(dirname "$0")/../.." && pwd)
res() { if [ "$2" = 0 ]; then echo "VPS-RESULT ok patches/$1"; else echo "VPS-RESULT not ok patches/$1: $3"; fi; }

out=$("$TOP/scripts/sync-qemu-header" --check 2>&1)
res header-copy-current $? "$(echo "$out" | tail -3 | tr '\n' ' ')"

bad=""
for p in $(grep -v '^#' "$TOP/qemu-patches/series"); do
	[ -f "$TOP/qemu-patches/$p" ] || bad="$bad missing:$p"
	grep -q '^Signed-off-by: ' "$TOP/qemu-patches/$p" || bad="$bad unsigned:$p"
done
res series-signed-off "$([ -z "$bad" ]; echo $?)" "$bad"

out=$("$TOP/scripts/qemu-dev" check 2>&1)
errs=$(echo "$out" | grep -c '^ERROR')
res qemu-checkpatch "$errs" "$(echo "$out" | grep -A2 '^ERROR' | head -6 | tr '\n' ' ')"
