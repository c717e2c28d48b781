#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# gate: 612
# checks: 23
#
# The user-facing scripts (benchmarks, soak, stress, image builder) answer
# --help with their usage on stdout and exit 0, and refuse a bad argument
# with a message naming it, exit 2, before they set anything up, build or
# boot: the refusal comes within seconds and says nothing of set-up.
# scripts/bench-host took its arguments unchecked and ran the set-up
# first: `--help` ran scripts/setup and then died on "help: unbound
# variable".
TOP=$(cd "$(dirname "$0")/../.." && pwd)
w=$(mktemp -d /tmp/vps-scripts-XXXXXX)
trap 'rm -rf "$w"' EXIT

. "$TOP/scripts/lib.sh"
res() { vps_result "scripts/$1" "$2" "$3"; }

# check_help NAME: --help prints something, exits 0, sets nothing up
check_help() {
	local rc=0
	timeout 20 "$TOP/scripts/$1" --help > "$w/out" 2> "$w/err" || rc=$?
	res "$1-help" "$([ "$rc" = 0 ] && [ -s "$w/out" ] && ! grep -q '^\[setup\]' "$w/out" "$w/err"; echo $?)" \
		"exit $rc, $(wc -c < "$w/out") bytes of help: $(head -c 300 "$w/err")"
}

# check_bad NAME PATTERN ARGS...: refused with exit 2 and a message matching
# PATTERN, before any set-up
check_bad() {
	local n=$1 pat=$2 rc=0
	shift 2
	timeout 20 "$TOP/scripts/$n" "$@" > "$w/out" 2> "$w/err" || rc=$?
	res "$n-refuses-${BAD_NAME:-$(echo "$*" | tr -c 'a-zA-Z0-9\n' - | tr -s - | sed 's/^-//; s/-$//')}" \
		"$([ "$rc" = 2 ] && grep -q -- "$pat" "$w/err" && ! grep -q '^\[setup\]' "$w/out" "$w/err"; echo $?)" \
		"exit $rc: $(head -c 300 "$w/err") $(head -c 300 "$w/out")"
}

check_help bench
check_bad bench "unknown argument --bogus" --bogus
check_bad bench "no job 'rr64'" --jobs rr64
check_bad bench "--pin is none, cross or co, not 'x'" --pin x
check_help bench-host
check_help bench-guest
check_bad bench-guest "unknown argument --bogus" --bogus
check_help soak
check_bad soak "unknown option --bogus" --bogus
check_help stress-nested
check_bad stress-nested "unknown option --bogus" --bogus
check_help mkimage
check_bad mkimage "unknown argument '--bogus'" --bogus
check_bad bench-provision "unknown argument --bogus" --bogus
check_bad bench-migrate "usage: scripts/bench-migrate" x

# scripts/bench-host: its three numbers, each checked
check_bad bench-host "SECONDS must be a positive number, not 'x'" x
check_bad bench-host "SECONDS must be a positive number, not '0'" 0
check_bad bench-host "REPEATS must be a positive number, not '-1'" 5 -1
check_bad bench-host "KERNEL must be 612 or 61, not '99'" 5 3 99
check_bad bench-host "usage: scripts/bench-host" 1 2 61 4
POLL_US=fast BAD_NAME=poll-us check_bad bench-host "POLL_US is a number of microseconds"

# the help texts say what the scripts are for
res bench-host-help-text "$(timeout 20 "$TOP/scripts/bench-host" --help | grep -q '^Benchmark (not a test)'; echo $?)" \
	"its help does not start with its header"
res bench-help-text "$(timeout 20 "$TOP/scripts/bench" --help | grep -q -- '--quick'; echo $?)" \
	"its help does not name --quick"
