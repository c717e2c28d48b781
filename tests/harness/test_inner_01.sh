#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# gate: 612
# checks: 39
#
# vps_inner_wait (scripts/vm/guest.sh) on a fake inner guest whose own
# checks failed, run in busybox sh as in a host VM, without booting one.
# The inner guest finished (exit 35, verdict fail): its checks are relayed
# on fd 3, and the host VM's console must carry, for tests/run's digest
# (which shows a console from its first "FAIL -" line), a FAIL line per
# failing inner check and the inner console around its first FAIL: the
# lines that led up to it, the FAIL, what followed; heartbeats left out.
# CI once showed a failing inner check with an empty console excerpt
# (stack/test_timeout_01 [debug] guest-error-handler).  A passing inner
# guest must add no FAIL line.
#
# Then vps_inner_stuck on a fake inner QEMU (a script by that name that
# sleeps) and a fake vhost_pvscsi debugfs: it must say VPS-INNER-FROZEN
# on the results port (what makes the harness run the host VM once more)
# only for a console silent for 60 s or more with nothing in flight or
# pending in the module, no kernel report on the inner console and the
# QEMU still there; a console still beating, a request in flight, backing
# I/O pending, a BUG on the inner console or no QEMU must not say it; it
# kills the fake QEMU in every case.  And vps_inner_wait_console: it
# returns at once when the line is there, waits by the clock, and gives
# up at once on a console silent for 180 s; vps_inner_wait_mark waits for
# its mark, not for a longer one that starts with it.  vps_field reads an
# adapter's debugfs field by its key, wherever on its line it is (a test
# that read by position broke when a field was added, d1b76cc).
TOP=$(cd "$(dirname "$0")/../.." && pwd)
n=vpsinner$$
w=$(mktemp -d /tmp/vps-inner-XXXXXX)
trap 'rm -rf "$w" /tmp/$n.* /tmp/${n}ok.* /tmp/${n}st.*' EXIT

check() { # name, then a command that must succeed
	local c=$1
	shift
	if "$@"; then echo "VPS-RESULT ok inner/$c"; else echo "VPS-RESULT not ok inner/$c"; fi
}

# the inner guest's two serial ports, as QEMU's file chardevs leave them
{
	for i in $(seq 1 30); do printf 'early-line-%d\r\n' "$i"; done
	printf 'vps: alive at 10.00 s\r\n'
	printf 'sda: iotmo_cnt 0x0 ioerr_cnt 0x0\r\n'
	printf 'FAIL - guest-error-handler: no abort @50.1\r\n'
	printf 'after-fail-line\r\n'
} > "/tmp/$n.console"
printf 'VPS-RESULT ok driver\r\nVPS-RESULT not ok guest-error-handler: no abort\r\nVPS-DONE fail\r\n' > "/tmp/$n.results"
echo 35 > "/tmp/$n.code"
echo 1 > "/tmp/$n.pid"
printf 'VPS-RESULT ok driver\r\nVPS-DONE pass\r\n' > "/tmp/${n}ok.results"
printf 'boot\r\nok - driver @1.0\r\n' > "/tmp/${n}ok.console"
echo 33 > "/tmp/${n}ok.code"
echo 1 > "/tmp/${n}ok.pid"
cat > "$w/run.sh" <<EOF
VPS_LIB=$TOP/scripts/vm
. "$TOP/scripts/vm/guest.sh"
vps_inner_wait $n
vps_inner_wait ${n}ok
EOF
busybox sh "$w/run.sh" > "$w/console" 3> "$w/results" 2> "$w/err"
sed 's/^/# console: /' "$w/console"
sed 's/^/# results: /' "$w/results"

first=$(grep -n -m1 '^FAIL - ' "$w/console" | cut -d: -f1)
check relayed grep -qx "VPS-RESULT not ok $n/guest-error-handler: no abort" "$w/results"
check relayed-pass grep -qx "VPS-RESULT ok ${n}ok/driver" "$w/results"
check fail-line test "$(sed -n "${first:-1}p" "$w/console")" = "FAIL - $n/guest-error-handler: no abort"
# what tests/run's digest shows: 45 lines from the first FAIL
digest=$(sed -n "${first:-1},\$p" "$w/console" | head -46)
check lead-up grep -q '^sda: iotmo_cnt 0x0' <<< "$digest"
check lead-up-bounded test -z "$(grep '^early-line-1[0-5]$' <<< "$digest")"
check context-before grep -q '^early-line-30$' <<< "$digest"
check inner-fail grep -q '^FAIL - guest-error-handler: no abort @50.1$' <<< "$digest"
check after-fail grep -q '^after-fail-line$' <<< "$digest"
check no-heartbeat test -z "$(grep 'vps: alive' <<< "$digest")"
check no-cr test -z "$(tr -d -c '\r' < "$w/console")"
check pass-adds-no-fail test -z "$(grep "^FAIL - ${n}ok" "$w/console")"
check vm-judged grep -qx "VPS-RESULT ok $n/vm" "$w/results"

# --- vps_inner_stuck: which stuck inner guest counts as frozen ---------
mkdir -p "$w/bin" "$w/dbg"
ln -s "$(command -v busybox)" "$w/bin/ps"
printf '#!/bin/sh\nwhile :; do sleep 1; done\n' > "$w/bin/qemu-system-x86_64"
chmod +x "$w/bin/qemu-system-x86_64"
s=${n}st
stuck_case() { # case, console age (s), adapter's in_flight, io_pending, extra console line, qemu?
	local qp="" out
	printf 'boot\r\nvps: alive at 10.00 s\r\n%s\r\n' "$5" > "/tmp/$s.console"
	touch -d "@$(( $(date +%s) - $2 ))" "/tmp/$s.console"
	printf 'req_cons 9 cmp_prod 9 msg_prod 0 in_flight %s io_pending %s\naborts 0 resets 1 msgs 0 unkicked 0\n' \
		"$3" "$4" > "$w/dbg/adapter-1"
	: > "/tmp/$s.qemu"
	if [ "$6" = yes ]; then
		"$w/bin/qemu-system-x86_64" -chardev file,id=con,path="/tmp/$s.console" &
		qp=$!
		sleep 0.3
	fi
	PATH=$w/bin:$PATH VPS_LIB=$TOP/scripts/vm VPS_DEBUGFS=$w/dbg busybox sh -c \
		". '$TOP/scripts/vm/guest.sh'; vps_inner_stuck $s $s/reached-x" > "$w/st-$1.out" 3> "$w/st-$1.res" 2>&1
	sed "s/^/# $1: /" "$w/st-$1.out" "$w/st-$1.res"
	if [ -n "$qp" ]; then
		sleep 0.3
		check "$1-killed" sh -c "! kill -0 $qp 2>/dev/null"
		wait "$qp" 2>/dev/null
	fi
}
stuck_case frozen 120 0 0 'sg_vpd -p 0xb0 /dev/sda' yes
check frozen-said grep -qE "^VPS-INNER-FROZEN $s $s/reached-x: console silent 1[0-9]{2} s, [0-9]+ QEMU thread\(s\) running, nothing in flight$" "$w/st-frozen.res"
stuck_case beating 5 0 0 'sg_vpd' yes
check beating-not-frozen test ! -s "$w/st-beating.res"
stuck_case in-flight 120 2 0 'sg_vpd' yes
check in-flight-not-frozen test ! -s "$w/st-in-flight.res"
stuck_case io-pending 120 0 1 'sg_vpd' yes
check io-pending-not-frozen test ! -s "$w/st-io-pending.res"
stuck_case bug 120 0 0 'BUG: kernel NULL pointer dereference, address: 0000000000000008' yes
check bug-not-frozen test ! -s "$w/st-bug.res"
stuck_case no-qemu 120 0 0 'sg_vpd' no
check no-qemu-not-frozen test ! -s "$w/st-no-qemu.res"

# --- vps_inner_wait_console: by the clock, and not for a silent console --
wc_case() { # console age (s), regex, seconds; prints status and time taken (s)
	local t0 rc
	printf 'boot\r\nVPS-MARK here\r\n' > "/tmp/$s.console"
	touch -d "@$(( $(date +%s) - $1 ))" "/tmp/$s.console"
	t0=$(date +%s%3N)
	busybox sh -c ". '$TOP/scripts/vm/guest.sh'; vps_inner_wait_console $s '$2' $3" > "$w/wc.out" 2>&1
	rc=$?
	t0=$(( $(date +%s%3N) - t0 ))
	echo "$t0" > "$w/wc.ms"
	echo "$rc $(( t0 / 1000 ))"
	sed 's/^/# wait_console: /' "$w/wc.out" >&2
}
# at once: the first look finds it, before the loop's 1-s sleep (whole
# seconds measured across a second's edge said 1 under a loaded gate)
r=$(wc_case 0 'VPS-MARK here' 30)
check wait-console-found sh -c "[ '${r% *}' = 0 ] && [ $(cat "$w/wc.ms") -lt 1000 ]"
r=$(wc_case 5 'VPS-MARK never' 3)
check wait-console-by-clock sh -c "[ '${r% *}' = 1 ] && [ ${r#* } -ge 2 ] && [ ${r#* } -le 5 ]"
r=$(wc_case 200 'VPS-MARK never' 600)
check wait-console-silent-gives-up sh -c "[ '${r% *}' = 1 ] && [ ${r#* } -le 3 ]"
check wait-console-says-why grep -q "console silent 20[0-9] s: stopped waiting for /VPS-MARK never/" "$w/wc.out"
# a console silent past VPS_INNER_KICK_S: the inner monitor gets one
# register query (the kick), and the wait says so
rm -f "/tmp/$s.mon.in"
mkfifo "/tmp/$s.mon.in"
timeout 10 cat "/tmp/$s.mon.in" > "$w/mon.got" &
mp=$!
r=$(wc_case 70 'VPS-MARK never' 3)
wait $mp
check wait-console-kicks grep -qx 'info registers' "$w/mon.got"
check wait-console-kicks-once test "$(grep -c 'info registers' "$w/mon.got")" = 1
check wait-console-says-kick grep -q "console silent 7[0-9] s: its vCPU kicked through the monitor" "$w/wc.out"
rm -f "/tmp/$s.mon.in"

# --- vps_inner_wait_mark: that mark, not a longer one starting with it --
# (scripts/bench read ours-mq's counters around ours-mq1q's mark)
wm_case() { # console text (printf), mark; prints the status
	rm -f "/tmp/$s.code"
	# shellcheck disable=SC2059
	printf "$1" > "/tmp/$s.console"
	busybox sh -c ". '$TOP/scripts/vm/guest.sh'; vps_inner_wait_mark $s '$2' 2" > "$w/wm.out" 2>&1
	echo $?
}
check wait-mark-not-a-longer-one test "$(wm_case 'VPS-MARK start-r2-rr32-ours-mq1q\r\n' start-r2-rr32-ours-mq)" = 1
check wait-mark-not-a-longer-one-lf test "$(wm_case 'VPS-MARK end-r2-rr32-ours-mqpoll\n' end-r2-rr32-ours-mq)" = 1
check wait-mark-crlf test "$(wm_case 'VPS-MARK start-r2-rr32-ours-mq1q\r\nVPS-MARK start-r2-rr32-ours-mq\r\n' start-r2-rr32-ours-mq)" = 0
check wait-mark-lf-last test "$(wm_case 'boot\nVPS-MARK end-qd1' end-qd1)" = 0
check wait-mark-the-longer-one test "$(wm_case 'VPS-MARK start-r2-rr32-ours-mq\r\nVPS-MARK start-r2-rr32-ours-mq1q\r\n' start-r2-rr32-ours-mq1q)" = 0

# --- vps_field: by key, not by position --
printf 'kicks 1 requests 2 completions 3 calls 4\nbounced 5 stale_posted 6 calls_suppressed 7 features 0x2\nbatch_on 8 batch_off 9 new_one 10 doorbells_rung 11 kick_raised 12\n' > "$w/adapter"
vf() { busybox sh -c ". '$TOP/scripts/vm/guest.sh'; vps_field $1 '$w/adapter'"; }
check field-by-key test "$(vf doorbells_rung) $(vf kick_raised) $(vf calls) $(vf calls_suppressed) $(vf features)" = "11 12 4 7 0x2"
check field-absent test -z "$(vf not_there)"
# vps_eh_count: aborts plus resets by key, a field put between them (it
# added the 1st and 3rd numbers of their line until 2026-12-07)
printf 'kicks 1 requests 2\naborts 3 new_one 40 resets 5 msgs 6\n' > "$w/adapter"
eh() { busybox sh -c ". '$TOP/scripts/vm/guest.sh'; vps_eh_count '$1'"; }
check eh-count-by-key test "$(eh "$w/adapter")" = 8
check eh-count-no-file test "$(eh "$w/none")" = 0
