#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# gate: 612
# checks: 5
#
# `make static`, check by check, on a copy of the tree (it rebuilds every
# object with C=2; the VM tests running beside it pack the .ko files of
# the work tree): the modules build with W=1 and sparse (C=2) against
# Debian's 6.12 and 6.1 headers with no warning of either, and
# checkpatch --strict finds nothing in the kernel or the userspace sources.
# A check whose tool is missing fails: it proves nothing.
TOP=$(cd "$(dirname "$0")/../.." && pwd)
. "$TOP/scripts/lib.sh"
w=$(mktemp -d /tmp/vps-static-XXXXXX)
trap 'rm -rf "$w"' EXIT
res() { # name, status, why
	if [ "$2" = 0 ]; then echo "VPS-RESULT ok static/$1"; else echo "VPS-RESULT not ok static/$1: $3"; fi
}
rsync -a --exclude=logs --exclude='*.o' --exclude='*.ko' --exclude='.*.cmd' --exclude='.build-*' \
	--exclude='*.mod*' --exclude=Module.symvers --exclude=modules.order \
	"$TOP/Kbuild" "$TOP/include" "$TOP/guest-driver" "$TOP/vhost-host" "$TOP/sriov-helper" "$TOP/tests" "$w/"
k612=$(vps_kdir 612)
k61=$(vps_kdir 61)
cp=$VPS_CACHE/checkpatch/scripts/checkpatch.pl

# sparse: a warning of the compiler (W=1) or of sparse fails the check
sp() { # name, headers
	local out
	if ! command -v sparse >/dev/null; then res "$1" 1 "sparse is not installed"; return; fi
	if [ ! -d "$2" ]; then res "$1" 1 "no headers at $2"; return; fi
	make -C "$2" M="$w" clean >/dev/null 2>&1
	out=$(make -C "$2" M="$w" W=1 C=2 modules 2>&1)
	local rc=$?
	echo "$out" | grep -E 'warning|error' | sed 's/^/# /' | head -20
	if [ $rc != 0 ]; then
		res "$1" 1 "build failed: $(echo "$out" | grep -m2 -E 'error|Error' | tr '\n' ' ')"
	elif ! echo "$out" | grep -q ' CHECK '; then
		res "$1" 1 "sparse did not run (no CHECK line)"
	else
		res "$1" "$(echo "$out" | grep -cE 'warning:|error:')" \
			"$(echo "$out" | grep -m2 -E 'warning:|error:' | tr '\n' ' ')"
	fi
}
sp sparse-612 "$k612"
sp sparse-61 "$k61"

# the file lists the Makefile's static target uses
ksrc=$(make -s -C "$TOP" -f - print-ksrc <<'EOF'
include Makefile
print-ksrc:
	@echo $(KSRC)
EOF
)
usrc=$(make -s -C "$TOP" -f - print-usrc <<'EOF'
include Makefile
print-usrc:
	@echo $(USRC)
EOF
)
cpk() { # name, extra flags, files
	local name=$1 flags=$2 out rc
	shift 2
	if [ ! -x "$cp" ]; then res "$name" 1 "checkpatch.pl missing at $cp (scripts/setup extracts it)"; return; fi
	if [ $# = 0 ]; then res "$name" 1 "no file to check"; return; fi
	out=$(cd "$TOP" && "$cp" --strict --no-tree --show-types --terse $flags -f "$@" 2>&1)
	rc=$?
	echo "$out" | head -20 | sed 's/^/# /'
	# --terse prints nothing for a clean file; a report line names file:line
	res "$name" "$rc" "$(echo "$out" | head -3 | tr '\n' ' ')"
}
# shellcheck disable=SC2086
cpk checkpatch-kernel "--ignore CAMELCASE" $ksrc
# shellcheck disable=SC2086
cpk checkpatch-user "--ignore PREFER_KERNEL_TYPES,SPDX_LICENSE_TAG" $usrc

# checkpatch must be able to fail: a planted defect is reported
printf '// SPDX-License-Identifier: GPL-2.0\nint f(int a) {\n\treturn a;\n}\n' > "$w/bad.c"
out=$("$cp" --strict --no-tree --terse -f "$w/bad.c" 2>&1)
res checkpatch-catches-defect "$( [ -n "$out" ] && echo 0 || echo 1)" "no report on a brace on the function line"
