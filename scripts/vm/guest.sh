# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=sh
#
# Guest-side test library (busybox ash), sourced by /init before the test
# script runs.  Results go to fd 3 (ttyS1); everything else to the console.

# where this library and the host module's debugfs are (tests that run it
# outside a VM point them elsewhere)
VPS_LIB=${VPS_LIB:-/lib/vps}
VPS_DEBUGFS=${VPS_DEBUGFS:-/sys/kernel/debug/vhost_pvscsi}

# the console line carries the guest's uptime (read, not a forked cut:
# a fork per check is dear on the debug kernel)
t_ok() {
	read -r _up _ < /proc/uptime
	echo "VPS-RESULT ok $1" >&3
	echo "ok - $1 @$_up"
}

t_fail() {
	_n=$1
	shift
	echo "VPS-RESULT not ok $_n: $*" >&3
	read -r _up _ < /proc/uptime
	echo "FAIL - $_n: $* @$_up"
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

# vps_run_until_grown FILE BASE N CMD...: run CMD (a fio pass, say) up to
# three times, until the counter in FILE is at least BASE + N (a host hook
# that fires while I/O runs has done its N); fails only when a run fails:
# whether the counter got there is the caller's check
vps_run_until_grown() {
	_f=$1 _b=$2 _g=$3
	shift 3
	for _i in 1 2 3; do
		"$@" || return 1
		[ $(( $(cat "$_f") - _b )) -ge "$_g" ] && return 0
	done
	return 0
}

# vps_load NAME [PARAM=VALUE...]: insmod one of our modules after
# modprobing the in-tree modules it depends on
vps_load() {
	_m=$1
	shift
	for _d in $(modinfo -F depends "/lib/vps/$_m.ko" | tr ',' ' '); do
		modprobe "$_d" || return 1
	done
	rm -f /tmp/.vps-kmemleak-covered
	insmod "/lib/vps/$_m.ko" "$@" || return 1
	# on the console, for a frozen VM's RIP (harness: _vm_frozen_regs)
	echo "vps: module $_m .text $(cat "/sys/module/$_m/sections/.text" 2>/dev/null)" > "${VPS_CON:-/dev/console}"
}

# vps_blk_ios DEV: I/Os DEV (sda) has completed or holds in flight
# (/sys/block/DEV/stat: reads, writes, in flight)
vps_blk_ios() {
	awk '{print $1 + $5 + $9}' "/sys/block/$1/stat"
}

# vps_io_started DEV BEFORE: wait (up to 120 s) until DEV has seen I/O
# past BEFORE (vps_blk_ios): a fio just started may take seconds to
# submit its first I/O on a slow nested guest, and a "VPS-MARK io-..."
# the host acts on must mean I/O is flowing
vps_io_started() {
	vps_wait 120 _vps_io_past "$1" "$2"
}
_vps_io_past() { [ "$(vps_blk_ios "$1")" -gt "$2" ]; }

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

# vps_eh_count ADAPTER_DEBUGFS: the aborts plus resets the module has
# served on that adapter (what a guest's SCSI error handler sends), by
# key as vps_field (0: no such file)
vps_eh_count() {
	[ -e "$1" ] || { echo 0; return; }
	awk '{ for (i = 1; i < NF; i++) if ($i == "aborts" || $i == "resets") s += $(i + 1) }
	     END { print s + 0 }' "$1"
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

# vps_has_sd H:C:T:L...: every one of those LUNs has its sdX;
# vps_has_disks DRIVER: a host of DRIVER has at least one.  Predicates
# for vps_wait, which runs its command anew each poll.  Not "vps_wait N
# test -n "$(...)"": that substitution expands once, before vps_wait
# runs, and the wait re-tests a fixed string (tests/harness/test_lint_01
# looks for it).  Several LUNs: sd probes asynchronously, a later target
# may get its disk first.
vps_has_sd() {
	[ $# -gt 0 ] || return 1
	for _lun in "$@"; do [ -n "$(vps_sd_dev "$_lun")" ] || return 1; done
}
vps_has_disks() { [ -n "$(vps_scsi_disks "$1")" ]; }

# vps_lio_vhost NAME DEV WWPN: LIO's vhost fabric serving the block
# device DEV (iblock backstore NAME) as LUN 0 of WWPN, for QEMU's
# -device vhost-scsi-pci,wwpn=WWPN (scripts/bench, stress-nested)
vps_lio_vhost() {
	_T=/sys/kernel/config/target
	mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config
	mkdir -p "$_T/core/iblock_0/$1" &&
		echo "udev_path=$2" > "$_T/core/iblock_0/$1/control" &&
		echo 1 > "$_T/core/iblock_0/$1/enable" &&
		mkdir -p "$_T/vhost/$3/tpgt_1/lun/lun_0" &&
		echo naa.5001405000000002 > "$_T/vhost/$3/tpgt_1/nexus" &&
		ln -s "$_T/core/iblock_0/$1" "$_T/vhost/$3/tpgt_1/lun/lun_0/$1"
}

# vps_dmesg_clean LABEL: fail LABEL when the kernel log has a report
vps_dmesg_clean() {
	_hits=$(dmesg | grep -E "$(cat "$VPS_LIB/dmesg-patterns")" | head -3)
	if [ -n "$_hits" ]; then t_fail "$1" "kernel log: $_hits"; else t_ok "$1"; fi
}

# --- nested: run an inner guest from inside this VM --------------------------
# vps_inner_run NAME KERNEL INITRD TIMEOUT [QEMU ARGS...]
# The inner guest is built by the same harness (its /init, its results on
# its ttyS1); its checks are relayed here as NAME/<check>, plus NAME/vm.
vps_inner_accel() {
	if [ -c /dev/kvm ] && grep -qE 'svm|vmx' /proc/cpuinfo; then
		# VPS_INNER_CPU: another model (scripts/stress-nested --inner-cpu)
		echo "-accel kvm -cpu ${VPS_INNER_CPU:-host}"
	else
		echo "-accel tcg -cpu max"
	fi
}

# vps_inner_hugepages MIB: make MIB of 2 MiB pages free for an inner
# guest's RAM; false when this kernel cannot
vps_inner_hugepages() {
	_need=$(( ($1 + 1) / 2 ))
	[ -w /proc/sys/vm/nr_hugepages ] || return 1
	_free=$(awk '/^HugePages_Free:/ {print $2}' /proc/meminfo)
	if [ "${_free:-0}" -lt "$_need" ]; then
		echo $(( $(cat /proc/sys/vm/nr_hugepages) + _need - ${_free:-0} )) > /proc/sys/vm/nr_hugepages
		_free=$(awk '/^HugePages_Free:/ {print $2}' /proc/meminfo)
	fi
	[ "${_free:-0}" -ge "$_need" ]
}

# vps_inner_start NAME KERNEL INITRD TIMEOUT [QEMU ARGS...]: start an inner
# guest in the background; its console is /tmp/NAME.console.  One vCPU,
# or VPS_INNER_SMP (a guest with a queue per vCPU: stack/test_mq_01)
vps_inner_start() {
	_n=$1 _k=$2 _i=$3 _to=$4
	shift 4
	_mem=${VPS_INNER_MEM:-512}
	# A VMRUN of this guest that the emulated SVM refuses (SVM_EXIT_ERR;
	# CI saw one in stack/test_migrate_02): KVM dumps the VMCB it gave,
	# the evidence of which check failed (Documentation/testing.md)
	if [ -w /sys/module/kvm_amd/parameters/dump_invalid_vmcb ]; then
		echo Y > /sys/module/kvm_amd/parameters/dump_invalid_vmcb
	fi
	# The inner guest's RAM in 2 MiB pages.  Each page of it touched first
	# costs a nested page fault, emulated by TCG; the debug kernel has no
	# THP, so there every 4 KiB took one: an inner guest unpacking its
	# 89 MB initramfs (fio's libraries) spent minutes in silent boot, the
	# "stall" of test_timeout_01 [debug] (Documentation/testing.md).
	# VPS_INNER_HUGEPAGES=0 (scripts/stress-nested --no-hugepages): 4 KiB
	# pages, to measure what the 2 MiB pages do to the nested ground
	_ram=
	if [ "${VPS_INNER_HUGEPAGES:-1}" = 0 ]; then
		echo "inner $_n: RAM in 4 KiB pages (VPS_INNER_HUGEPAGES=0)"
	elif vps_inner_hugepages "$_mem"; then
		_ram="-object memory-backend-memfd,id=ram,size=${_mem}M,hugetlb=on,hugetlbsize=2M -machine memory-backend=ram"
	else
		echo "inner $_n: no ${_mem} MiB of 2 MiB pages to be had; its RAM is in 4 KiB pages"
	fi
	# KERNEL "-": no -kernel; the firmware boots a disk the arguments name
	# (scripts/mkimage's images carry the command line below themselves).
	# VPS_INNER_APPEND: more of the command line (stack/test_mq_01:
	# iomem=relaxed, to map a bound adapter's BAR and write its registers)
	if [ "$_k" != - ]; then
		set -- -kernel "$_k" -initrd "$_i" \
			-append "console=ttyS0 loglevel=4 panic=-1 oops=panic nokaslr vps.heartbeat=10 vps.hvc${VPS_INNER_APPEND:+ $VPS_INNER_APPEND}" "$@"
	fi
	# VPS_INNER_INCOMING=URI: a migration's destination for the inner
	# guest NAME that runs (tests/stack/stack_migrate.sh): the guest goes
	# on writing the same console and results files, vps_inner_wait waits
	# for this QEMU, the monitor fifos are its, and only the QEMU started
	# last (_inst) gives NAME its exit code
	_inst=$(( $(cat "/tmp/$_n.inst" 2>/dev/null || echo 0) + 1 ))
	if [ -n "${VPS_INNER_INCOMING:-}" ]; then
		set -- "$@" -incoming "$VPS_INNER_INCOMING"
		rm -f "/tmp/$_n.code"
	else
		_inst=1
		rm -f "/tmp/$_n.console" "/tmp/$_n.results" "/tmp/$_n.code" "/tmp/$_n.qemu"
	fi
	echo "$_inst" > "/tmp/$_n.inst"
	# its monitor, for vps_inner_threads (where its vCPU is)
	rm -f "/tmp/$_n.mon.in" "/tmp/$_n.mon.out"
	mkfifo "/tmp/$_n.mon.in" "/tmp/$_n.mon.out"
	# the answers to its marks (vps_mark); a migration's destination
	# shares its source's
	[ "$_inst" != 1 ] || rm -f "/tmp/$_n.ack.in" "/tmp/$_n.ack.out"
	echo "+ inner guest $_n (QEMU $_inst): $(vps_inner_accel) $*"
	# The heartbeat tells a frozen guest (silent) from one whose I/O hangs.
	# vps.hvc: the init writes its output and results to virtio consoles
	# (hvc0, hvc1), not to the 8250s, whose userspace output waits for a
	# THRE interrupt (first suspected for the debug host VM's boot stall,
	# which turned out to be the RAM faults above).  A virtio console's
	# write spins until QEMU has taken the buffer, and with ioeventfd=off
	# QEMU takes it in the trapping vCPU thread: no interrupt is waited for.
	# The kernel's own console stays on ttyS0 (printk polls the 8250), and
	# both write the same file (append=on), as do both results ports (the
	# init falls back to ttyS1 when no hvc1 comes).
	# loglevel=4: each console byte is a nested exit, dear under TCG (on
	# the debug host VM, loglevel=6 made the inner guest's boot take 400 s
	# and the SCSI error handler's messages drove test_timeout_01 to fail)
	# nokaslr and named threads: a stuck guest's RIP (vps_inner_threads)
	# reads against any 6.12 VM's /proc/kallsyms less its KASLR offset
	# (Debian's System.map carries no symbols), and the busy thread is named
	# shellcheck disable=SC2046,SC2086
	( timeout "$_to" qemu-system-x86_64 -L /usr/share/qemu $(vps_inner_accel) \
		-m "$_mem" $_ram -smp "${VPS_INNER_SMP:-1}" -nographic -nodefaults -no-reboot \
		-chardev file,id=con,path="/tmp/$_n.console",append=on -serial chardev:con \
		-chardev file,id=res,path="/tmp/$_n.results",append=on -serial chardev:res \
		-device virtio-serial-pci,id=vser,ioeventfd=off,max_ports=3 \
		-chardev file,id=hcon,path="/tmp/$_n.console",append=on -device virtconsole,bus=vser.0,nr=0,chardev=hcon \
		-chardev file,id=hres,path="/tmp/$_n.results",append=on -device virtconsole,bus=vser.0,nr=1,chardev=hres \
		$(vps_ack_port "$_n") \
		-device isa-debug-exit,iobase=0xf4,iosize=4 \
		-name "$_n,debug-threads=on" -chardev pipe,id=vps_imon,path="/tmp/$_n.mon" -mon chardev=vps_imon,mode=readline \
		"$@" \
		</dev/null >>"/tmp/$_n.qemu" 2>&1
	  _rc=$?
	  echo "$_rc" > "/tmp/$_n.code.$_inst"
	  [ "$(cat "/tmp/$_n.inst")" != "$_inst" ] || echo "$_rc" > "/tmp/$_n.code" ) &
	echo $! > "/tmp/$_n.pid"
	# vps.inner_console on the host VM's command line (VPS_VM_CMDLINE):
	# the inner console goes to the host VM's as well, for the last words
	# of an inner guest when the host VM itself dies
	if [ "$_inst" = 1 ] && grep -qw vps.inner_console /proc/cmdline; then
		( tail -F "/tmp/$_n.console" 2>/dev/null |
			while IFS= read -r _l; do echo "inner/$_n| $_l"; done > "${VPS_CON:-/dev/console}" ) &
	fi
	vps_wait 10 test -s "/tmp/$_n.console" || true
}

# vps_inner_pid NAME: the inner QEMU's pid (for kill tests); while a
# migration runs two QEMUs, the one started last.  Not its busybox
# timeout's watchdog, a child of the QEMU process whose arguments name
# the QEMU's too.
vps_inner_pid() {
	ps -o pid,args | grep "path=/tmp/$1.console" | awk '$2 ~ /qemu-system/ {print $1}' |
		sort -n | tail -1
}

# vps_inner_alive NAME: for a failure's log, when the inner console was
# last written (the heartbeat writes it every 10 s)
vps_inner_alive() {
	if [ ! -e "/tmp/$1.console" ]; then
		echo "inner $1: no console file: its QEMU never started ($(tail -2 "/tmp/$1.qemu" 2>/dev/null | tr '\n' ' '))"
		return 0
	fi
	echo "inner $1: console last written $(( $(date +%s) - $(stat -c %Y "/tmp/$1.console") )) s ago, $(grep -ac 'vps: alive' "/tmp/$1.console") heartbeats"
}

# vps_inner_threads NAME: for a failure's log, the inner QEMU's threads
# (state, where they sleep, CPU ticks used in 2 s) and the kernel stack
# of any stuck in D: a vCPU thread blocked in one of our ioctls freezes
# the guest as well.  Then what its monitor says of the guest's CPU (no
# answer in 5 s: QEMU's main loop is stuck too).
vps_inner_threads() {
	_p=$(vps_inner_pid "$1")
	[ -n "$_p" ] || { echo "inner $1: no QEMU running"; return 0; }
	for _t in /proc/"$_p"/task/*; do
		echo "${_t##*/} $(sed 's/.*) //' "$_t/stat" 2>/dev/null | cut -d' ' -f12,13)"
	done > /tmp/.vps-ticks
	sleep 2
	for _t in /proc/"$_p"/task/*; do
		_st=$(awk '/^State:/ {print $2}' "$_t/status" 2>/dev/null)
		# utime and stime: fields 14 and 15, counted after the "(comm)"
		# that may hold spaces ("CPU 0/KVM")
		_tk=$(sed 's/.*) //' "$_t/stat" 2>/dev/null | cut -d' ' -f12,13)
		_t0=$(awk -v t="${_t##*/}" '$1 == t {print $2 + $3}' /tmp/.vps-ticks)
		echo "inner $1 thread $(cat "$_t/comm" 2>/dev/null): $_st $(cat "$_t/wchan" 2>/dev/null), $(( ${_tk% *} + ${_tk#* } - ${_t0:-0} )) ticks in 2 s"
		[ "$_st" = D ] && head -12 "$_t/stack" 2>/dev/null
	done
	if [ -p "/tmp/$1.mon.in" ]; then
		printf 'info status\ninfo registers\n' > "/tmp/$1.mon.in"
		timeout 5 cat "/tmp/$1.mon.out" | tr -d '\r' |
			grep -aE '^VM status|^RIP=|^RAX=|^RSI=|^CS |^CR0=|^EFER=' || echo "inner $1: its monitor did not answer in 5 s"
	fi
	return 0
}

# vps_inner_frozen NAME: did the inner guest freeze the way DESIGN.md's
# nested-TCG fault freezes one, with nothing of ours involved?  Its QEMU
# still runs; its console has been silent for VPS_INNER_FROZEN_S seconds
# despite the 10 s heartbeat (a guest whose I/O hangs keeps beating); no
# QEMU thread sleeps in D or has one of our modules on its stack (a vCPU
# blocked in our ioctl freezes the guest too); no vhost_pvscsi adapter
# holds a request (in_flight) or backing I/O (io_pending); its console
# carries no kernel report.  Prints why it thinks so.
vps_inner_frozen() {
	_p=$(vps_inner_pid "$1")
	[ -n "$_p" ] || return 1
	_age=$(( $(date +%s) - $(stat -c %Y "/tmp/$1.console") ))
	[ "$_age" -ge "${VPS_INNER_FROZEN_S:-60}" ] || return 1
	_r=0
	for _t in /proc/"$_p"/task/*; do
		_st=$(awk '/^State:/ {print $2}' "$_t/status" 2>/dev/null)
		[ "$_st" = D ] && return 1
		grep -qE '\[(vhost_pvscsi|pvscsi_mq)\]' "$_t/stack" 2>/dev/null && return 1
		[ "$_st" = R ] && _r=$((_r + 1))
	done
	for _a in "$VPS_DEBUGFS"/adapter-*; do
		[ -e "$_a" ] || continue
		grep -qE 'in_flight [1-9]|io_pending -?[1-9]' "$_a" && return 1
	done
	tr -d '\r' < "/tmp/$1.console" | grep -aqE "$(cat "$VPS_LIB/dmesg-patterns")" && return 1
	echo "console silent ${_age} s, $_r QEMU thread(s) running, nothing in flight"
}

# vps_inner_stuck NAME CHECK...: an inner guest never got where the test
# waited for it, and CHECK (and any other CHECK named) failed for that:
# what that looks like from both
# sides (the guest's first; tests/run repeats the lines after a FAIL at
# the end of a run), then kill its QEMU rather than wait for its timeout.
# A freeze that is not ours (vps_inner_frozen) is said on the results
# port: the harness then names the nested-TCG fault in the TAP stream, if
# the CHECKs and NAME/vm are all that failed (harness.sh,
# _vm_nested_tcg_fault); the test fails all the same.
vps_inner_stuck() {
	_sn=$1
	shift
	vps_inner_alive "$_sn"
	vps_inner_threads "$_sn"
	echo "--- inner console ($_sn) ---"
	grep -av 'vps: alive' "/tmp/$_sn.console" | tail -20
	cat "$VPS_DEBUGFS"/adapter-* 2>/dev/null
	grep -v 'irqfd' "/tmp/$_sn.qemu" | tail -10
	if _why=$(vps_inner_frozen "$_sn"); then
		echo "VPS-INNER-FROZEN $_sn $*: $_why" >&3
		echo "inner $_sn froze, not in our code: $_why"
	fi
	_p=$(vps_inner_pid "$_sn")
	[ -z "$_p" ] || kill -9 "$_p"
}

# vps_inner_wait_console NAME REGEX SECONDS: wait for the inner console,
# by the clock (a poll costs a second of fork and grep on the debug
# kernel: vps_wait's poll count lasted three times as long); give up
# early once the console has been silent for VPS_INNER_SILENT_S (180)
# seconds, heartbeat (10 s) included: that guest is frozen, and a
# frozen guest (vps_inner_stuck) is looked at while its QEMU still runs.
# Once per silent stretch of VPS_INNER_KICK_S (60) seconds it asks the
# inner monitor for the registers, which takes the vCPU out of KVM_RUN:
# CI-like run of 2026-12-01, an inner guest on the debug host VM silent
# for 182 s, busy in module code, beat again within seconds of such a
# query (vps_inner_threads').  Said on the console when done.
# It stops at once when the inner guest's kernel panicked or oopsed, or
# its QEMU is gone (/tmp/NAME.code written): nothing more can come, and a
# panic must be reported when it happens, not after the wait.
VPS_INNER_DEAD='Kernel panic - not syncing|BUG: |Oops: |general protection fault|Fatal exception'
vps_inner_wait_console() {
	_end=$(( $(date +%s) + $3 ))
	_kicked=
	while ! grep -aqE "$2" "/tmp/$1.console" 2>/dev/null; do
		_now=$(date +%s)
		[ "$_now" -lt "$_end" ] || return 1
		if grep -aqE "$VPS_INNER_DEAD" "/tmp/$1.console" 2>/dev/null; then
			echo "inner $1: its kernel died while we waited for /$2/:"
			grep -aE -m1 -A12 "$VPS_INNER_DEAD" "/tmp/$1.console" | tr -d '\r'
			return 1
		fi
		if [ -s "/tmp/$1.code" ] && ! grep -aqE "$2" "/tmp/$1.console" 2>/dev/null; then
			# 0 with nothing said: the guest reset (-no-reboot), or a
			# signal QEMU names on its stderr
			echo "inner $1: its QEMU exited ($(cat "/tmp/$1.code")) before /$2/: $(tail -3 "/tmp/$1.qemu" 2>/dev/null | tr '\n' ' ')"
			return 1
		fi
		_m=$(stat -c %Y "/tmp/$1.console" 2>/dev/null || echo "$_now")
		if [ $(( _now - _m )) -ge "${VPS_INNER_KICK_S:-60}" ] && [ "$_kicked" != "$_m" ] &&
		   [ -p "/tmp/$1.mon.in" ]; then
			_kicked=$_m
			printf 'info registers\n' > "/tmp/$1.mon.in"
			echo "inner $1: console silent $(( _now - _m )) s: its vCPU kicked through the monitor"
		fi
		if [ $(( _now - _m )) -ge "${VPS_INNER_SILENT_S:-180}" ]; then
			echo "inner $1: console silent $(( _now - _m )) s: stopped waiting for /$2/"
			return 1
		fi
		sleep 1
	done
}

# vps_inner_wait_mark NAME MARK SECONDS: vps_inner_wait_console for the
# console line "VPS-MARK MARK" itself, not a longer mark that starts
# with it: scripts/bench waited for "start-r2-null-rr32-ours-mq", matched
# "start-r2-null-rr32-ours-mq1q" printed before it (the adapter order is
# reversed every other round) and read ours-mq's counters around nothing
vps_inner_wait_mark() {
	vps_inner_wait_console "$1" "VPS-MARK $2([^[:alnum:]_.-]|\$)" "$3"
}

# A mark the host VM answers.  vps_mark MARK [SECONDS] (in an inner
# guest) prints "VPS-MARK MARK" and waits, up to SECONDS (120), until the
# host VM has done what the mark asks of it (armed a hook of the module,
# read a counter) and said so with vps_inner_ack NAME MARK; no answer
# fails check mark-MARK (and returns non-zero).  A fixed sleep after the
# mark stood in for the answer before: too long for most runs (41 s of
# test_stack_02 slept) and still a guess for a host VM slowed by the VMs
# beside it.  The answer comes on a virtio serial port of its own,
# "vps.ack" (vps_inner_start), opened before the mark is printed: the
# guest's driver drops what comes to a port nobody holds open, and QEMU
# keeps what the host VM writes until the guest has opened it.  Answers
# to other marks (one that came after its guest gave up) are skipped.
_vps_ack_port() {
	for _mk_f in /sys/class/virtio-ports/*/name; do
		[ "$(cat "$_mk_f" 2>/dev/null)" = vps.ack ] || continue
		_mk_port=${_mk_f%/name}
		_mk_port=/dev/${_mk_port##*/}
		[ -r "$_mk_port" ] && return 0
	done
	return 1
}
vps_mark() {
	_mk_port=
	# (a port comes up a little after the kernel starts /init; and a
	# redirection of exec that fails ends a script: the test first)
	if ! vps_wait 10 _vps_ack_port; then
		echo "VPS-MARK $1"
		t_fail "mark-$1" "no vps.ack port to hear the host VM's answer on"
		return 1
	fi
	exec 8< "$_mk_port"
	echo "VPS-MARK $1"
	_mk_end=$(( $(cut -d. -f1 /proc/uptime) + ${2:-120} ))
	while [ "$(cut -d. -f1 /proc/uptime)" -lt "$_mk_end" ]; do
		if read -t 5 -r _mk_a <&8; then
			[ "$_mk_a" != "$1" ] || { exec 8<&-; return 0; }
		else
			# (at once when the port reads end-of-file)
			sleep 1
		fi
	done
	exec 8<&-
	t_fail "mark-$1" "no answer from the host VM in ${2:-120} s"
	return 1
}

# vps_up_ms: this machine's uptime in milliseconds (scripts/bench reads
# its windows with it in the host VM, bench-inner.sh its guest's clock)
vps_up_ms() { awk '{ printf "%d", $1 * 1000 }' /proc/uptime; }

# vps_field KEY FILE...: the number after KEY in an adapter's debugfs
# file, found by its key: a field added to a line moves the others
# (d1b76cc: a test that read them by position broke)
vps_field() {
	_vf_k=$1
	shift
	awk -v k="$_vf_k" '{ for (i = 1; i < NF; i++) if ($i == k) { print $(i + 1); exit } }' "$@"
}

# vps_ack_port NAME: make the fifos NAME's answers go through (if not
# there) and print the QEMU arguments of its "vps.ack" port, port 2 of
# the virtio-serial device "vser" (vps_inner_start; tests/harness/
# test_mark_01 in a VM of its own)
vps_ack_port() {
	[ -p "/tmp/$1.ack.in" ] || mkfifo "/tmp/$1.ack.in" "/tmp/$1.ack.out"
	echo "-chardev pipe,id=vps_ack,path=/tmp/$1.ack -device virtserialport,bus=vser.0,nr=2,chardev=vps_ack,name=vps.ack"
}

# vps_inner_ack NAME MARK: answer inner guest NAME's vps_mark MARK.  The
# fifo opened read-write: the write never blocks, even when that QEMU is
# gone (nothing then reads it)
vps_inner_ack() {
	echo "$2" 1<> "/tmp/$1.ack.in"
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
	if grep -aq '^VPS-RESULT not ok' "/tmp/$_n.results"; then
		: > /tmp/.vps-failed
		# for tests/run's digest, which shows this console from its
		# first FAIL line: the inner checks that failed and the inner
		# console around its own first FAIL (what led up to it first)
		grep -a '^VPS-RESULT not ok' "/tmp/$_n.results" | tr -d '\r' | head -5 |
			sed -E "s#^VPS-RESULT not ok #FAIL - $_n/#"
		echo "--- inner console ($_n) around its first FAIL ---"
		grep -av 'vps: alive' "/tmp/$_n.console" | tr -d '\r' |
			awk '/^FAIL - / && !f {f = NR} {l[NR] = $0}
			     END {if (!f) f = NR; for (i = (f > 15 ? f - 15 : 1); i <= f + 25 && i <= NR; i++) print l[i]}'
	fi
	_v=$(grep -a '^VPS-DONE ' "/tmp/$_n.results" | tail -1 | tr -d '\r' | awk '{print $2}')
	_bad=$(sed -n '/^VPS-DMESG-BEGIN/,/^VPS-DMESG-END/p' "/tmp/$_n.results" "/tmp/$_n.console" |
		grep -aE "$(cat "$VPS_LIB/dmesg-patterns")" | head -3 | tr '\n' '|')
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
		vps_inner_alive "$_in"
		grep -av 'vps: alive' "/tmp/$_in.console" | tail -40
	fi
}

# vps_inner_run NAME KERNEL INITRD TIMEOUT [QEMU ARGS...]: start and wait
vps_inner_run() {
	vps_inner_start "$@"
	vps_inner_wait "$1"
}

# --- QMP of an inner QEMU, over a pipe chardev --------------------------------
# Give QEMU "-chardev pipe,id=qmp,path=/tmp/TAG.qmp -mon chardev=qmp,mode=control"
# (vps_qmp_args TAG), after vps_qmp_fifos TAG; once it started,
# vps_qmp_attach TAG.  Its answers and events collect in /tmp/TAG.qmp.log.
vps_qmp_fifos() {
	rm -f "/tmp/$1.qmp.in" "/tmp/$1.qmp.out" "/tmp/$1.qmp.log"
	mkfifo "/tmp/$1.qmp.in" "/tmp/$1.qmp.out"
	: > "/tmp/$1.qmp.log"
}
vps_qmp_args() { echo "-chardev pipe,id=qmp,path=/tmp/$1.qmp -mon chardev=qmp,mode=control"; }
vps_qmp_attach() {
	cat "/tmp/$1.qmp.out" >> "/tmp/$1.qmp.log" &
	vps_qmp "$1" '{"execute":"qmp_capabilities"}' > /dev/null
}
# vps_qmp TAG JSON: send one command, print its answer (30 s at most);
# false on an error or none.  The write is timed too: a fifo whose QEMU
# is gone would block it for ever.
vps_qmp() {
	_ql=$(wc -l < "/tmp/$1.qmp.log")
	timeout 5 sh -c 'printf "%s\n" "$1" > "$2"' sh "$2" "/tmp/$1.qmp.in" || { echo "qmp $1: cannot write"; return 1; }
	_qe=$(( $(date +%s) + 30 ))
	while [ "$(date +%s)" -lt "$_qe" ]; do
		_qa=$(tail -n +$((_ql + 1)) "/tmp/$1.qmp.log" | grep -m1 -E '"(return|error)"')
		if [ -n "$_qa" ]; then
			echo "$_qa"
			case "$_qa" in *'"error"'*) return 1 ;; esac
			return 0
		fi
		sleep 0.2
	done
	echo "qmp $1: no answer in 30 s to $2"
	return 1
}
# vps_qmp_status ANSWER: the "status" of a query-migrate or query-status
vps_qmp_status() { echo "$1" | sed -n 's/.*"status": "\([a-z-]*\)".*/\1/p' | head -1; }
# vps_qmp_num ANSWER KEY: a number in an answer (total-time, downtime, ...)
vps_qmp_num() { echo "$1" | sed -n "s/.*\"$2\": \([0-9]*\).*/\1/p" | head -1; }
# vps_migrate TAG URI SECONDS: migrate TAG's QEMU to URI and wait for the
# end (SECONDS at most); prints query-migrate's last answer, true when
# the migration completed
vps_migrate() {
	vps_qmp "$1" "{\"execute\":\"migrate\",\"arguments\":{\"uri\":\"$2\"}}" > /dev/null || return 1
	_me=$(( $(date +%s) + $3 ))
	while [ "$(date +%s)" -lt "$_me" ]; do
		_ma=$(vps_qmp "$1" '{"execute":"query-migrate"}')
		case "$(vps_qmp_status "$_ma")" in
		completed) echo "$_ma"; return 0 ;;
		failed|cancelled) echo "$_ma"; return 1 ;;
		esac
		sleep 0.5
	done
	echo "$_ma"
	return 1
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

# vps_dbg STOCK DEBUG: STOCK on the stock kernels, DEBUG on the debug one
# (a fio size, a repeat count: see vps_debug_kernel)
vps_dbg() {
	if vps_debug_kernel; then echo "$2"; else echo "$1"; fi
}

# vps_memfree: MemFree in kB once freed memory is really free: page cache
# and slab dropped, and on the debug kernel KASAN's quarantine emptied
# (it keeps up to 1/32 of RAM of freed slab objects out of use, 64 MiB in
# a 2 GiB debug VM, and drains only when a cache is shrunk) after an RCU
# grace period or two (SLUB_RCU_DEBUG frees through RCU).
vps_memfree() {
	sync
	echo 3 > /proc/sys/vm/drop_caches
	if vps_debug_kernel; then
		sleep 1
		for _s in /sys/kernel/slab/*/shrink; do echo 1 > "$_s"; done 2>/dev/null
		echo 3 > /proc/sys/vm/drop_caches
	fi
	awk '/^MemFree:/ {print $2}' /proc/meminfo
}

# vps_memfree_nonslab: in kB, the memory a leak of pages lowers: MemFree
# (vps_memfree) on the stock kernels, MemFree + Slab on the debug one, and
# both numbers on the console (stderr).  There freed slab objects wait in
# KASAN's quarantine, still counted as Slab, past what vps_memfree can
# drain: test_probe_01 [debug] saw MemFree 15968 kB lower after 18 failed
# probes that leaked nothing.  Memory neither free nor slab is what was
# lost.  Slab leaks are kmemleak's to find on that kernel; the leak this
# is for, DMA-coherent ring memory, comes from the page allocator.
vps_memfree_nonslab() {
	_mf=$(vps_memfree)
	_sl=$(awk '/^Slab:/ {print $2}' /proc/meminfo)
	echo "memory: MemFree $_mf kB, Slab $_sl kB" >&2
	if vps_debug_kernel; then echo $((_mf + _sl)); else echo "$_mf"; fi
}

# --- kmemleak (the debug kernel) -----------------------------------------------
# vps_kmemleak_clear: forget the suspects found so far (boot-time leaks of
# the kernel itself); /init does it before the test script runs.  It also
# keeps kmemleak's reports out of dmesg (verbose=0): which suspects fail a
# test is vps_kmemleak_check's rule, not the dmesg patterns'.
vps_kmemleak_clear() {
	if [ ! -w /sys/kernel/debug/kmemleak ]; then
		# the debug kernel is known by its release (vps_debug_kernel),
		# not by kmemleak: there its absence is a failure, not a skip
		vps_debug_kernel && t_fail boot/kmemleak "kmemleak missing on the debug kernel (no writable /sys/kernel/debug/kmemleak)"
		return 0
	fi
	echo 0 > /sys/module/kmemleak/parameters/verbose 2>/dev/null
	# no automatic scans: the first would start 60 s after boot and take
	# tens of seconds of the VM's TCG vCPU from the test; the checks scan
	# when they judge
	echo scan=off > /sys/kernel/debug/kmemleak
	echo clear > /sys/kernel/debug/kmemleak
}

# vps_ours_loaded: is a module of this run's overlay (/lib/vps) loaded?
vps_ours_loaded() {
	for _k in /lib/vps/*.ko; do
		_m=${_k##*/}
		[ -e "/sys/module/${_m%.ko}" ] && return 0
	done
	return 1
}

# vps_kmemleak_check LABEL: scan now and fail LABEL when a suspect's
# allocation backtrace runs through one of our modules, or through a
# module address that no longer resolves (a module unloaded since: call
# this after rmmod to catch what the module forgot to free).  Other
# suspects (the kernel's own) are printed, not counted.  On the debug
# kernel (known by its release, vps_debug_kernel) a missing kmemleak
# fails LABEL; on the stock kernels, which have none, LABEL is not
# reported at all (a check skipped must not count as passed), only said
# on the console.  Objects younger than 5 s are not
# reported by kmemleak, hence the sleep; a stale copy of a pointer (in a
# task's stack) hides an object from one scan, hence up to
# VPS_KMEMLEAK_SCANS (2) scans, 2 s apart, until one of ours shows up.
VPS_OUR_MODULES='vhost_pvscsi|pvscsi_mq|sriov_vfcfg'
vps_kmemleak_check() {
	_kl=/sys/kernel/debug/kmemleak
	if [ ! -w $_kl ]; then
		if vps_debug_kernel; then
			t_fail "$1" "kmemleak missing on the debug kernel (no writable $_kl)"
		else
			echo "kmemleak: not in this kernel ($1 not checked)"
		fi
		return 0
	fi
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
	# a scan with none of ours loaded covers the run up to here: /init's
	# final check is left out unless vps_load loads one again
	if vps_ours_loaded; then rm -f /tmp/.vps-kmemleak-covered; else echo "$1" > /tmp/.vps-kmemleak-covered; fi
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
