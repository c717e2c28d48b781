#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# gate: 612
# checks: 9
#
# tests/run's own report, on two fake tests that boot nothing (one passes,
# one fails and leaves a "kept" VM folder whose console has a FAIL line and
# a state dump after it): the run must exit non-zero and end with
# "2 passed, 1 failed"; after every result and before the plan line it
# must repeat the failing test's failing check and its VM's console from
# the FAIL line on (carriage returns gone); the passing test must not be
# in that digest.  A third fake test's VM "reset" after its last check: its
# console has no FAIL line, so the digest must show the console's last
# lines, heartbeats left out, and say how its results and QEMU ended.  CI
# shows only a run's last lines: this is what it sees of a failure.
TOP=$(cd "$(dirname "$0")/../.." && pwd)
w=$(mktemp -d /tmp/vps-runner-XXXXXX)
trap 'rm -rf "$w"' EXIT
mkdir -p "$w/vm" "$w/vm2" "$w/cache"
printf 'boot\r\nok - fake/a @1.0\r\nFAIL - fake/b: boom @2.0\r\nstate-dump-line\r\n' > "$w/vm/console.log"
{ printf 'boot\r\n'; for i in $(seq 1 40); do printf 'early-%s\r\nvps: alive at %s s\r\n' "$i" "$i"; done
  printf 'ok - fake/d @9.0\r\nlast-words\r\n'; } > "$w/vm2/console.log"
printf 'VPS-RESULT ok d\r\nVPS-DONE pass\r\n' > "$w/vm2/results.log"
printf 'qemu-last-line\n' > "$w/vm2/qemu.log"
cat > "$w/test_reset_01.sh" <<EOF
# kernels: 612
# checks: 2
echo "VPS-RESULT ok fake/d"
echo "VPS-RESULT not ok fake/vm: QEMU exited 0 (crash or panic?)"
echo "# logs kept in $w/vm2" >&2
exit 1
EOF
cat > "$w/test_fail_01.sh" <<EOF
# kernels: 612
# checks: 2
echo "VPS-RESULT ok fake/a"
echo "VPS-RESULT not ok fake/b: boom"
echo "# logs kept in $w/vm" >&2
exit 1
EOF
cat > "$w/test_pass_01.sh" <<'EOF'
# kernels: 612
# checks: 1
echo "VPS-RESULT ok fake/c"
EOF
rel=$(realpath --relative-to="$TOP/tests" "$w")
VPS_CACHE=$w/cache VPS_LOGDIR=$w/logs "$TOP/tests/run" -j 1 \
	"$rel/test_pass_01.sh" "$rel/test_fail_01.sh" "$rel/test_reset_01.sh" > "$w/out" 2>&1
rc=$?
sed 's/^/# /' "$w/out"

check() { # name, then a command that must succeed
	local n=$1
	shift
	if "$@"; then echo "VPS-RESULT ok runner/$n"; else echo "VPS-RESULT not ok runner/$n"; fi
}
check exit-nonzero test "$rc" != 0
check count test "$(tail -1 "$w/out")" = "3 passed, 2 failed"
# line numbers: the last result, the digest's parts, the plan
last_result=$(grep -n '^\(not \)\?ok [0-9]' "$w/out" | tail -1 | cut -d: -f1)
head=$(grep -n '^# --- the failures again' "$w/out" | cut -d: -f1)
check_ln=$(grep -n '^#   not ok fake/b: boom$' "$w/out" | cut -d: -f1)
fail_ln=$(grep -n '^#   FAIL - fake/b: boom @2.0$' "$w/out" | cut -d: -f1)
dump_ln=$(grep -n '^#   state-dump-line$' "$w/out" | cut -d: -f1)
plan=$(grep -n '^1\.\.5$' "$w/out" | cut -d: -f1)
in_order() { # line numbers, strictly increasing, none missing
	local p=0 x
	for x in "$@"; do
		[ -n "$x" ] && [ "$x" -gt "$p" ] || return 1
		p=$x
	done
}
check digest-after-results in_order "$last_result" "$head" "$check_ln" "$fail_ln" "$dump_ln" "$plan"
check digest-no-console-before-fail test -z "$(sed -n "${head:-1},\$p" "$w/out" | grep 'ok - fake/a')"
check digest-no-cr test -z "$(sed -n "${head:-1},\$p" "$w/out" | tr -d -c '\r')"
check digest-not-passing test -z "$(sed -n "${head:-1},\$p" "$w/out" | grep test_pass_01)"
reset_ln=$(grep -n '^#   .*/vm2/console.log has no FAIL line; its last lines:$' "$w/out" | cut -d: -f1)
words_ln=$(grep -n '^#   last-words$' "$w/out" | cut -d: -f1)
ended_ln=$(grep -n '^#   results: 1 result(s), VPS-DONE pass; qemu.log: qemu-last-line $' "$w/out" | cut -d: -f1)
check digest-no-fail-tail in_order "$head" "$reset_ln" "$words_ln" "$ended_ln" "$plan"
check digest-no-fail-tail-bounded test -z "$(sed -n "${head:-1},\$p" "$w/out" | grep -x '#   early-1[0-5]')"
check digest-no-fail-no-heartbeat test -z "$(sed -n "${head:-1},\$p" "$w/out" | grep 'vps: alive')"
