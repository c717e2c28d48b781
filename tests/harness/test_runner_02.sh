#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# gate: 612
# checks: 22
#
# tests/run's limits, on fake tests that boot nothing:
# - a test that reports fewer checks than its "# checks: N" line fails,
#   and so does one that declares no count;
# - a test past its timeout (from tests/times-style recorded seconds) is
#   killed with every process it started, a child that made a process
#   group of its own (as timeout(1) does for QEMU) included;
# - when the run's --budget runs out, nothing new starts, the running test
#   is killed, the tests not started are reported "not run", the summary
#   line is still printed and the exit status is non-zero;
# - --tier gate runs only the kernels of a test's "# gate:" line, and
#   holds a test to its "# checks-gate:" count there only;
# - with its slots full, a job recorded as light (its CPU over its time)
#   starts beside them when the recorded shares fit the cores, and one
#   beside jobs with no CPU recorded waits.
TOP=$(cd "$(dirname "$0")/../.." && pwd)
w=$(mktemp -d /tmp/vps-runner2-XXXXXX)
trap 'pkill -f "vps-runner2-sleeper-$$" 2>/dev/null; rm -rf "$w"' EXIT
mkdir -p "$w/cache"
rel=$(realpath --relative-to="$TOP/tests" "$w")

check() { # name, then a command that must succeed
	local n=$1
	shift
	if "$@"; then echo "VPS-RESULT ok runner2/$n"; else echo "VPS-RESULT not ok runner2/$n"; fi
}

# --- declared counts ---
cat > "$w/test_few_01.sh" <<'EOF'
# kernels: 612
# checks: 3
echo "VPS-RESULT ok fake/one"
EOF
cat > "$w/test_nocount_01.sh" <<'EOF'
# kernels: 612
echo "VPS-RESULT ok fake/two"
EOF
VPS_CACHE=$w/cache VPS_LOGDIR=$w/logs "$TOP/tests/run" -j 1 \
	"$rel/test_few_01.sh" "$rel/test_nocount_01.sh" > "$w/out1" 2>&1
rc=$?
sed 's/^/# /' "$w/out1"
check count-exit-nonzero test "$rc" != 0
check too-few-checks grep -q 'test_few_01.sh \[612\]: reported 1 checks, declares at least 3' "$w/out1"
check no-declared-count grep -q 'test_nocount_01.sh \[612\]: declares no count' "$w/out1"
check count-summary test "$(tail -1 "$w/out1")" = "2 passed, 2 failed"

# --- per-test timeout from the recorded time ---
# timeout(1) puts its command in a process group of its own, as it does
# for the harness's QEMU
cat > "$w/test_slow_01.sh" <<EOF
# kernels: 612
# checks: 1
echo "VPS-RESULT ok fake/started"
timeout 300 bash -c 'exec -a vps-runner2-sleeper-$$ sleep 300' &
sleep 300
EOF
echo "$rel/test_slow_01.sh 612 1" > "$w/cache/test-times"
t0=$(date +%s)
VPS_CACHE=$w/cache VPS_LOGDIR=$w/logs VPS_TIMEOUT_FACTOR=1 VPS_TIMEOUT_SLACK=3 \
	"$TOP/tests/run" -j 1 "$rel/test_slow_01.sh" > "$w/out2" 2>&1
rc=$?
t=$(( $(date +%s) - t0 ))
sed 's/^/# /' "$w/out2"
check timeout-exit-nonzero test "$rc" != 0
check timeout-reported grep -q 'test_slow_01.sh \[612\]: killed: over its timeout of 4s (recorded 1s)' "$w/out2"
check timeout-quick test "$t" -lt 30
sleep 1
check timeout-kills-other-groups test -z "$(pgrep -f "vps-runner2-sleeper-$$")"
check timeout-summary test "$(tail -1 "$w/out2")" = "1 passed, 1 failed"

# --- the run's budget ---
for x in a b c; do
	cat > "$w/test_budget${x}_01.sh" <<'EOF'
# kernels: 612
# checks: 1
echo "VPS-RESULT ok fake/budget"
sleep 30
EOF
done
rm -f "$w/cache/test-times"
t0=$(date +%s)
VPS_CACHE=$w/cache VPS_LOGDIR=$w/logs "$TOP/tests/run" -j 1 --budget 3 \
	"$rel/test_budgeta_01.sh" "$rel/test_budgetb_01.sh" "$rel/test_budgetc_01.sh" > "$w/out3" 2>&1
rc=$?
t=$(( $(date +%s) - t0 ))
sed 's/^/# /' "$w/out3"
check budget-exit-nonzero test "$rc" != 0
check budget-quick test "$t" -lt 25
check budget-not-run test "$(grep -c 'not run: the run.s time budget ran out' "$w/out3")" = 2
check budget-summary-last grep -qx '[0-9]* passed, [0-9]* failed' <(tail -1 "$w/out3")

# --- the gate tier ---
cat > "$w/test_tier_01.sh" <<'EOF'
# kernels: 612 61
# gate: 61
# checks: 1
echo "VPS-RESULT ok fake/tier-$VPS_KERNEL-$VPS_TIER"
EOF
VPS_CACHE=$w/cache VPS_LOGDIR=$w/logs "$TOP/tests/run" -j 1 --tier gate "$rel/test_tier_01.sh" > "$w/out4" 2>&1
sed 's/^/# /' "$w/out4"
check gate-tier-kernels test "$(grep -c '^ok .*fake/tier-61-gate$' "$w/out4"):$(grep -c '^ok' "$w/out4")" = 1:1

# a test that does less in the gate: "# checks-gate:" counts there only
cat > "$w/test_less_01.sh" <<'EOF'
# kernels: 612
# gate: 612
# checks: 3
# checks-gate: 1
echo "VPS-RESULT ok fake/less-$VPS_TIER"
[ "$VPS_TIER" = gate ] || { echo "VPS-RESULT ok fake/more"; echo "VPS-RESULT ok fake/most"; }
EOF
VPS_CACHE=$w/cache VPS_LOGDIR=$w/logs "$TOP/tests/run" -j 1 --tier gate "$rel/test_less_01.sh" > "$w/out5" 2>&1
sed 's/^/# /' "$w/out5"
check gate-count-passes test "$(tail -1 "$w/out5")" = "1 passed, 0 failed"
VPS_CACHE=$w/cache VPS_LOGDIR=$w/logs "$TOP/tests/run" -j 1 --tier full "$rel/test_less_01.sh" > "$w/out6" 2>&1
sed 's/^/# /' "$w/out6"
check full-count-passes test "$(tail -1 "$w/out6")" = "3 passed, 0 failed"
# the gate's count is no excuse outside the gate: the gate's output, told
# it is full, fails
sed -i 's/^\[ "$VPS_TIER" = gate \] ||.*/true/' "$w/test_less_01.sh"
VPS_CACHE=$w/cache VPS_LOGDIR=$w/logs "$TOP/tests/run" -j 1 --tier full "$rel/test_less_01.sh" > "$w/out7" 2>&1
sed 's/^/# /' "$w/out7"
check full-count-enforced grep -q 'test_less_01.sh \[612\]: reported 1 checks, declares at least 3' "$w/out7"

# --- a light job beside full slots (the CPU shares of the times file) ---
# Two "heavy" tests fill -j 2; a third recorded at 20% of a core starts
# beside them when they are recorded at 84% each (168 + 20 <= 200), and
# waits for a slot when they have no CPU recorded (a whole core each).
for x in a b; do
	cat > "$w/test_heavy${x}_01.sh" <<EOF
# kernels: 612
# checks: 1
date +%s.%N > "$w/start-heavy$x"
sleep 6
echo "VPS-RESULT ok fake/heavy"
EOF
done
cat > "$w/test_light_01.sh" <<EOF
# kernels: 612
# checks: 1
date +%s.%N > "$w/start-light"
sleep 1
echo "VPS-RESULT ok fake/light"
EOF
fill_run() { # output file, CPU of the heavy ones (empty: none recorded)
	printf '%s\n' "$rel/test_heavya_01.sh 612 6 $2" "$rel/test_heavyb_01.sh 612 6 $2" \
		"$rel/test_light_01.sh 612 5 1" > "$w/cache/test-times"
	rm -f "$w"/start-*
	VPS_CACHE=$w/cache VPS_LOGDIR=$w/logs "$TOP/tests/run" -j 2 \
		"$rel/test_heavya_01.sh" "$rel/test_heavyb_01.sh" "$rel/test_light_01.sh" > "$1" 2>&1
	sed 's/^/# /' "$1" >&2
	# how long after the first heavy one the light one started
	cat "$w/start-heavya" "$w/start-heavyb" "$w/start-light" |
		awk 'NR < 3 && (!h || $1 < h) {h = $1} NR == 3 {printf "%d\n", $1 - h}'
}
late=$(fill_run "$w/out8" 5)
echo "# light job started ${late}s after the heavy ones (their CPU recorded)"
check fill-starts-light grep -q 'test_light_01.sh \[612\] starts beside 2 (CPU shares: running 168%, its own 20%)' "$w/out8"
check fill-light-beside test "${late:-99}" -lt 4
check fill-summary test "$(tail -1 "$w/out8")" = "3 passed, 0 failed"
late=$(fill_run "$w/out9" "")
echo "# light job started ${late}s after the heavy ones (no CPU recorded)"
check fill-unknown-waits test "${late:-0}" -ge 5
check fill-unknown-not-beside test -z "$(grep 'starts beside' "$w/out9")"
