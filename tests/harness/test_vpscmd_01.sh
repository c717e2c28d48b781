#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# gate: 612
# checks: 8
#
# tests/stack/vps_cmd, the tool the stack tests write a hostile PVSCSI
# command with, on a plain 4 KiB file in place of the BAR (no VM): CMD
# lands at COMMAND (offset 0), the last data dword at COMMAND_DATA
# (offset 4: every one goes there), what COMMAND_STATUS (offset 8) holds
# is printed; COUNT*VALUE expands; a bad number, a bad COUNT*VALUE, more
# than a page of dwords, a missing file and one that cannot be mapped are
# refused with a message and exit 1, before anything is written.
TOP=$(cd "$(dirname "$0")/../.." && pwd)
. "$TOP/scripts/lib.sh"
w=$(mktemp -d /tmp/vps-vpscmd-XXXXXX)
trap 'rm -rf "$w"' EXIT
res() { vps_result "vpscmd/$1" "$2" "$3"; }
cmd=$TOP/tests/stack/vps_cmd
[ -x "$cmd" ] || make -s -C "$TOP/tests" stack/vps_cmd
# the "BAR": zeros, COMMAND_STATUS 0xdeadbeef
head -c 4096 /dev/zero > "$w/bar"
printf '\357\276\255\336' | dd of="$w/bar" bs=1 seek=8 conv=notrunc 2> /dev/null
out=$("$cmd" "$w/bar" 0x5651 1 2 3*7 9 2>&1)
rc=$?
res status-printed "$([ "$rc" = 0 ] && [ "$out" = 0xDEADBEEF ]; echo $?)" "exit $rc: $out"
regs=$(od -An -tx4 -N8 "$w/bar" | tr -s ' ')
res command-and-last-dword "$([ "$regs" = " 00005651 00000009" ]; echo $?)" "COMMAND, COMMAND_DATA: $regs"
out=$("$cmd" "$w/bar" 3 2*5 2>&1)
regs=$(od -An -tx4 -N8 "$w/bar" | tr -s ' ')
res count-value-expands "$([ "$regs" = " 00000003 00000005" ]; echo $?)" "COMMAND, COMMAND_DATA: $regs ($out)"
# refused: exit 1, a message, the file untouched
refused() { # name, pattern, args...
	local n=$1 pat=$2 rc=0 before
	shift 2
	before=$(od -An -tx4 -N8 "$w/bar")
	out=$("$cmd" "$@" 2>&1) || rc=$?
	res "refuses-$n" "$([ "$rc" = 1 ] && echo "$out" | grep -q -- "$pat" &&
		[ "$(od -An -tx4 -N8 "$w/bar")" = "$before" ]; echo $?)" "exit $rc: $out"
}
refused bad-number 'not a 32-bit number: 0x1g' "$w/bar" 0x77 0x1g
refused bad-count 'not a 32-bit number: $' "$w/bar" 0x77 '*0'
refused too-many 'more than 1024 dwords: 1025\*0' "$w/bar" 0x77 1025*0
refused no-file "$w/none: No such file" "$w/none" 3
refused unmappable 'mapping /dev/null' /dev/null 3
