#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# gate: 612
# checks: 7
#
# `make static`, check by check, on a copy of the tree (it rebuilds every
# object with C=2; the VM tests running beside it pack the .ko files of
# the work tree): the modules build with W=1 and sparse (C=2) against
# Debian's 6.12 and 6.1 headers with no warning of either, and
# checkpatch --strict finds nothing in the kernel or the userspace sources.
# A check whose tool is missing fails: it proves nothing.  The caps the
# module parameters' descriptions state are the ones the code applies.
TOP=$(cd "$(dirname "$0")/../.." && pwd)
. "$TOP/scripts/lib.sh"
w=$(mktemp -d /tmp/vps-static-XXXXXX)
trap 'rm -rf "$w"' EXIT
res() { # name, status, why
	if [ "$2" = 0 ]; then echo "VPS-RESULT ok static/$1"; else echo "VPS-RESULT not ok static/$1: $3"; fi
}
rsync -a --exclude=logs --exclude='*.o' --exclude='*.ko' --exclude='.*.cmd' --exclude='.build-*' \
	--exclude='*.mod*' --exclude=Module.symvers --exclude=modules.order \
	"$TOP/Makefile" "$TOP/VERSION" "$TOP/Kbuild" "$TOP/include" "$TOP/guest-driver" \
	"$TOP/vhost-host" "$TOP/sriov-helper" "$TOP/tests" "$w/"
cp=$VPS_CACHE/checkpatch/scripts/checkpatch.pl

# one step of the Makefile's static target (the one definition of the
# flags); a compiler (W=1) or sparse warning fails a sparse step, and a
# sparse step that never ran sparse fails too
step() { # check name, make target
	local out rc
	out=$(make -C "$w" "$2" 2>&1)
	rc=$?
	echo "$out" | grep -E 'warning|error|ERROR|WARNING|CHECK:' | sed 's/^/# /' | head -20
	case "$2" in
	static-sparse-*)
		if ! command -v sparse >/dev/null; then
			res "$1" 1 "sparse is not installed"
		elif [ $rc != 0 ]; then
			res "$1" 1 "make $2 failed: $(echo "$out" | grep -m2 -E 'error|Error' | tr '\n' ' ')"
		elif ! echo "$out" | grep -q ' CHECK '; then
			res "$1" 1 "sparse did not run (no CHECK line)"
		else
			res "$1" "$(echo "$out" | grep -cE 'warning:|error:')" \
				"$(echo "$out" | grep -m2 -E 'warning:|error:' | tr '\n' ' ')"
		fi ;;
	*)
		if [ ! -x "$cp" ]; then
			res "$1" 1 "checkpatch.pl missing at $cp (scripts/setup extracts it)"
		else
			# --terse prints nothing for a clean file
			res "$1" "$rc" "$(echo "$out" | grep -v '^make' | head -3 | tr '\n' ' ')"
		fi ;;
	esac
}
step sparse-612 static-sparse-612
step sparse-61 static-sparse-61
step checkpatch-kernel static-checkpatch-kernel
step checkpatch-user static-checkpatch-user

# checkpatch must be able to fail: a planted defect is reported
printf '// SPDX-License-Identifier: GPL-2.0\nint f(int a) {\n\treturn a;\n}\n' > "$w/bad.c"
# (its own finding and exit status: any output, a perl error too, is not one)
out=$("$cp" --strict --no-tree --terse -f "$w/bad.c" 2>&1)
rc=$?
res checkpatch-catches-defect "$( [ "$rc" = 1 ] && echo "$out" | grep -q "bad.c:2: ERROR: open brace '{' following function" && echo 0 || echo 1)" \
	"exit $rc, not the brace on the function line: $(echo "$out" | head -2 | tr '\n' ' ')"

# a module parameter's description says the cap the code applies (the
# poll_us change once rewrote coalesce_us's "at most 1000" to 20000)
for pc in poll_us:VPS_POLL_US_MAX coalesce_us:VPS_COALESCE_US_MAX; do
	p=${pc%%:*} c=${pc#*:}
	said=$(grep -A2 "MODULE_PARM_DESC($p," "$TOP/vhost-host/vps_main.c" | grep -o 'at most [0-9]*' | awk '{print $3}')
	is=$(awk -v c="$c" '$1 == "#define" && $2 == c {print $3}' "$TOP/vhost-host/vps.h")
	res "param-cap-$p" "$( [ -n "$is" ] && [ "$said" = "$is" ] && echo 0 || echo 1)" \
		"the description says at most '$said', $c is '$is'"
done
