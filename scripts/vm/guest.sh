# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=sh
#
# Guest-side test library (busybox ash), sourced by /init before the test
# script runs.  Results go to fd 3 (ttyS1); everything else to the console.

t_ok() { echo "VPS-RESULT ok $1" >&3; echo "ok - $1"; }

t_fail() {
	_n=$1
	shift
	echo "VPS-RESULT not ok $_n: $*" >&3
	echo "FAIL - $_n: $*"
	: > /tmp/.vps-failed
}

# t_check NAME CMD...: pass when CMD exits 0
t_check() {
	_n=$1
	shift
	echo "+ $*"
	if "$@"; then t_ok "$_n"; else t_fail "$_n" "exit $?: $*"; fi
}

# t_check_fails NAME CMD...: pass when CMD exits non-zero
t_check_fails() {
	_n=$1
	shift
	echo "+ ! $*"
	if "$@"; then t_fail "$_n" "succeeded but must fail: $*"; else t_ok "$_n"; fi
}

# t_equal NAME GOT WANT
t_equal() {
	if [ "$2" = "$3" ]; then t_ok "$1"; else t_fail "$1" "got '$2', want '$3'"; fi
}

# t_match NAME TEXT REGEX (grep -E)
t_match() {
	if printf '%s\n' "$2" | grep -qE "$3"; then t_ok "$1"; else
		t_fail "$1" "'$(printf '%s' "$2" | head -c 200)' does not match /$3/"
	fi
}

# vps_load NAME [PARAM=VALUE...]: insmod one of our modules after
# modprobing the in-tree modules it depends on
vps_load() {
	_m=$1
	shift
	for _d in $(modinfo -F depends "/lib/vps/$_m.ko" | tr ',' ' '); do
		modprobe "$_d" || return 1
	done
	insmod "/lib/vps/$_m.ko" "$@"
}

# vps_wait SECONDS CMD...: poll CMD every 0.2 s until it succeeds
vps_wait() {
	_t=$(( $1 * 5 ))
	shift
	while [ $_t -gt 0 ]; do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.2
		_t=$((_t - 1))
	done
	return 1
}

# vps_sd_dev H:C:T:L -> sdX (empty when absent)
vps_sd_dev() {
	ls "/sys/bus/scsi/devices/$1/block/" 2>/dev/null | head -1
}

# vps_scsi_disks DRIVER -> the sdX names behind hosts of that driver
vps_scsi_disks() {
	for _h in /sys/class/scsi_host/host*; do
		[ "$(cat "$_h/proc_name" 2>/dev/null)" = "$1" ] || continue
		_hn=${_h##*/host}
		for _d in /sys/bus/scsi/devices/"$_hn":*/block/*; do
			[ -e "$_d" ] && echo "${_d##*/}"
		done
	done
}

# vps_dmesg_clean LABEL: fail LABEL when the kernel log has a report
vps_dmesg_clean() {
	_hits=$(dmesg | grep -E "$(cat /lib/vps/dmesg-patterns)" | head -3)
	if [ -n "$_hits" ]; then t_fail "$1" "kernel log: $_hits"; else t_ok "$1"; fi
}

# --- nested: run an inner guest from inside this VM --------------------------
# vps_inner_run NAME KERNEL INITRD TIMEOUT [QEMU ARGS...]
# The inner guest is built by the same harness (its /init, its results on
# its ttyS1); its checks are relayed here as NAME/<check>, plus NAME/vm.
vps_inner_accel() {
	if [ -c /dev/kvm ] && grep -qE 'svm|vmx' /proc/cpuinfo; then
		echo "-accel kvm -cpu host"
	else
		echo "-accel tcg -cpu max"
	fi
}

# vps_inner_start NAME KERNEL INITRD TIMEOUT [QEMU ARGS...]: start an inner
# guest in the background; its console is /tmp/NAME.console
vps_inner_start() {
	_n=$1 _k=$2 _i=$3 _to=$4
	shift 4
	rm -f "/tmp/$_n.console" "/tmp/$_n.results" "/tmp/$_n.code"
	echo "+ inner guest $_n: $(vps_inner_accel) $*"
	# shellcheck disable=SC2046
	( timeout "$_to" qemu-system-x86_64 -L /usr/share/qemu $(vps_inner_accel) \
		-m "${VPS_INNER_MEM:-512}" -smp 1 -nographic -nodefaults -no-reboot \
		-chardev file,id=con,path="/tmp/$_n.console" -serial chardev:con \
		-chardev file,id=res,path="/tmp/$_n.results" -serial chardev:res \
		-device isa-debug-exit,iobase=0xf4,iosize=4 \
		-kernel "$_k" -initrd "$_i" \
		-append "console=ttyS0 loglevel=4 panic=-1 oops=panic" "$@" \
		</dev/null >"/tmp/$_n.qemu" 2>&1
	  echo $? > "/tmp/$_n.code" ) &
	echo $! > "/tmp/$_n.pid"
	vps_wait 10 test -s "/tmp/$_n.console" || true
}

# vps_inner_pid NAME: the inner QEMU's pid (for kill tests)
vps_inner_pid() {
	ps -o pid,args | grep "path=/tmp/$1.console" | grep -v grep | grep qemu-system |
		awk '{print $1}' | head -1
}

# vps_inner_wait_console NAME REGEX SECONDS: wait for the inner console
vps_inner_wait_console() {
	vps_wait "$3" grep -aqE "$2" "/tmp/$1.console"
}

# vps_inner_wait NAME [EXPECT]: wait for the inner guest, relay its checks
# as NAME/<check> and judge NAME/vm.  EXPECT=killed: QEMU was killed on
# purpose, only its kernel log is judged.
vps_inner_wait() {
	_n=$1
	wait "$(cat "/tmp/$_n.pid")" 2>/dev/null
	_code=$(cat "/tmp/$_n.code" 2>/dev/null)
	grep -a '^VPS-RESULT ' "/tmp/$_n.results" | tr -d '\r' |
		sed -E "s#^VPS-RESULT (ok|not ok) #VPS-RESULT \\1 $_n/#" >&3
	grep -aq '^VPS-RESULT not ok' "/tmp/$_n.results" && : > /tmp/.vps-failed
	_v=$(grep -a '^VPS-DONE ' "/tmp/$_n.results" | tail -1 | tr -d '\r' | awk '{print $2}')
	_bad=$(sed -n '/^VPS-DMESG-BEGIN/,/^VPS-DMESG-END/p' "/tmp/$_n.results" "/tmp/$_n.console" |
		grep -aE "$(cat /lib/vps/dmesg-patterns)" | head -3 | tr '\n' '|')
	if [ "${2:-}" = killed ] && [ -z "$_bad" ]; then
		t_ok "$_n/vm"
	elif [ "$_code" = 33 ] && [ "$_v" = pass ] && [ -z "$_bad" ]; then
		t_ok "$_n/vm"
	elif [ "$_code" = 35 ] && [ "$_v" = fail ] && [ -z "$_bad" ]; then
		t_ok "$_n/vm"	# the failing checks were relayed above
	else
		# t_fail sets _n: keep the inner guest's name for the console
		_in=$_n
		t_fail "$_in/vm" "inner QEMU exit $_code, verdict '${_v:-none}' $_bad $(tail -3 "/tmp/$_in.qemu" | tr '\n' ' ')"
		echo "--- inner console ($_in) ---"
		tail -40 "/tmp/$_in.console"
	fi
}

# vps_inner_run NAME KERNEL INITRD TIMEOUT [QEMU ARGS...]: start and wait
vps_inner_run() {
	vps_inner_start "$@"
	vps_inner_wait "$1"
}

# t_tap PREFIX CMD...: run a program that prints TAP ("ok N - name",
# "not ok N - name # why") and relay each line as PREFIX/name; the program
# must also exit 0 and report at least one line
t_tap() {
	_p=$1
	shift
	echo "+ $*"
	"$@" > /tmp/.tap 2>&1
	_rc=$?
	cat /tmp/.tap
	_seen=0
	while IFS= read -r _l; do
		case "$_l" in
		"ok "*)
			_seen=1
			t_ok "$_p/$(echo "$_l" | sed -E 's/^ok [0-9]+ - //')" ;;
		"not ok "*)
			_seen=1
			_nm=$(echo "$_l" | sed -E 's/^not ok [0-9]+ - ([^#]*)( # )?.*/\1/' | sed 's/ *$//')
			t_fail "$_p/$_nm" "$(echo "$_l" | sed -E 's/^[^#]*# ?//')" ;;
		esac
	done < /tmp/.tap
	[ $_seen = 1 ] || t_fail "$_p/output" "no TAP lines from: $*"
	[ $_rc = 0 ] || t_fail "$_p/exit" "exit $_rc: $*"
}

# vps_report TEXT...: a measurement line for the build machine (benchmarks)
vps_report() { echo "VPS-REPORT $*" >&3; echo "report: $*"; }

# vps_cpu_busy: jiffies the CPUs spent not idle (user..softirq, no iowait)
vps_cpu_busy() {
	awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat
}

# vps_debug_kernel: true on the debug kernel (KASAN, lockdep, kmemleak).
# There tests may move less data: the checks apply to every access of a
# path, so volume adds time, not coverage.
vps_debug_kernel() {
	case "$(uname -r)" in *-vpsdebug) return 0 ;; esac
	return 1
}

# --- kmemleak (the debug kernel) -----------------------------------------------
# vps_kmemleak_clear: forget the suspects found so far (boot-time leaks of
# the kernel itself); /init does it before the test script runs.  It also
# keeps kmemleak's reports out of dmesg (verbose=0): which suspects fail a
# test is vps_kmemleak_check's rule, not the dmesg patterns'.
vps_kmemleak_clear() {
	[ -w /sys/kernel/debug/kmemleak ] || return 0
	echo 0 > /sys/module/kmemleak/parameters/verbose 2>/dev/null
	echo clear > /sys/kernel/debug/kmemleak
}

# vps_kmemleak_check LABEL: scan now and fail LABEL when a suspect's
# allocation backtrace runs through one of our modules, or through a
# module address that no longer resolves (a module unloaded since: call
# this after rmmod to catch what the module forgot to free).  Other
# suspects (the kernel's own) are printed, not counted.  No check at all
# on a kernel without kmemleak.  Objects younger than 5 s are not
# reported by kmemleak, hence the sleep; a stale copy of a pointer (in a
# task's stack) hides an object from one scan, hence up to
# VPS_KMEMLEAK_SCANS (2) scans, 2 s apart, until one of ours shows up.
VPS_OUR_MODULES='vhost_pvscsi|pvscsi_mq|sriov_vfcfg'
vps_kmemleak_check() {
	_kl=/sys/kernel/debug/kmemleak
	[ -w $_kl ] || return 0
	sleep "${VPS_KMEMLEAK_AGE:-6}"
	_i=${VPS_KMEMLEAK_SCANS:-2}
	while :; do
		echo scan > $_kl
		cat $_kl > /tmp/.kmemleak
		grep -qE "\[($VPS_OUR_MODULES)\]|^ +0xffffffff[a-f][0-9a-f]{7}\$" /tmp/.kmemleak && break
		_i=$((_i - 1))
		[ $_i -gt 0 ] || break
		sleep 2
	done
	echo clear > $_kl
	awk -v ours="\\\\[($VPS_OUR_MODULES)\\\\]|^ +0xffffffff[a-f][0-9a-f]{7}\$" '
		/^unreferenced object/ { if (b != "") { if (hit) print b; else other++ }
					 b = $0; hit = 0; next }
		{ b = b "\n" $0; if ($0 ~ ours) hit = 1 }
		END { if (b != "") { if (hit) print b; else other++ }
		      if (other) printf "(%d other suspect(s), not ours)\n", other > "/dev/stderr" }
	' /tmp/.kmemleak > /tmp/.kmemleak.ours
	if [ -s /tmp/.kmemleak.ours ]; then
		echo "--- kmemleak: suspects of our modules ---"
		cat /tmp/.kmemleak.ours
		t_fail "$1" "kmemleak: $(grep -c '^unreferenced object' /tmp/.kmemleak.ours) object(s) leaked by our modules: $(grep -m1 -A12 backtrace /tmp/.kmemleak.ours | grep -E "$VPS_OUR_MODULES|0xffffffff" | head -2 | tr -s ' \n' ' ')"
	else
		t_ok "$1"
	fi
}
