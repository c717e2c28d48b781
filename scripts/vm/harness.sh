# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# VM test harness, build-machine side.  A test script (tests/<suite>/
# test_<group>_NN.sh) sources this file, describes a VM and hands a guest
# script to vm_run:
#
#	. "$(dirname "$0")/../../scripts/vm/harness.sh"
#	vm_modules vmw_pvscsi sd_mod          # in-tree, loaded at boot
#	vm_bins fio sg_inq                    # host binaries + their libraries
#	vm_qemu -device pvscsi,id=hba ...     # QEMU device options
#	vm_run pvscsi-fio <<'EOF'
#	t_check fio-verify fio --name=x ...   # guest side: scripts/vm/guest.sh
#	EOF
#
# vm_run builds an initramfs (a cached base: busybox, kmod, the named
# in-tree modules with their dependencies, decompressed, and binaries; plus
# a small overlay: our modules, files, the guest script), boots it under
# QEMU with a timeout, and prints one line per check:
#	VPS-RESULT ok <name>/<check>
#	VPS-RESULT not ok <name>/<check>: <reason>
# plus one <name>/vm line that fails on a crash, a timeout, a verdict that
# QEMU's exit code and the results channel disagree on, or a kernel BUG,
# WARNING, KASAN/UBSAN, lockdep or kmemleak report in dmesg.  tests/run
# turns these lines into TAP.  The kernel comes from $VPS_KERNEL (612, 61,
# or debug: the KASAN/lockdep/kmemleak kernel of scripts/build-debug-kernel,
# which gets at least 2 GiB and VPS_DEBUG_SLOWDOWN (4) times the timeout).

VPS_TOP=${VPS_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
. "$VPS_TOP/scripts/lib.sh"

VPS_LOGDIR=${VPS_LOGDIR:-$VPS_TOP/tests/logs}
# where `make` left our .ko files: the tree itself for 6.12, .build-61 for 6.1,
# .build-debug for the debug kernel
VPS_BUILD=${VPS_BUILD:-$VPS_TOP}

# kernel-log lines that fail a test (a test may excuse some with VM_DMESG_ALLOW);
# the same file serves the guest side for nested guests
VPS_DMESG_BAD=$(cat "$VPS_TOP/scripts/vm/dmesg-patterns")

vm_reset() {
	VM_KERNEL=${VPS_KERNEL:-612}
	VM_MODULES=()		# in-tree, loaded at boot
	VM_INCLUDE=()		# in-tree, included only
	VM_OURS=()		# ours, included in /lib/vps, loaded by the script
	VM_BINS=()
	VM_FILES=()		# "src:dst"
	VM_QEMU=()
	VM_MEM=${VM_MEM_DEFAULT:-1024}
	[ "$VM_KERNEL" = debug ] && VM_MEM=${VM_MEM_DEFAULT:-2048}
	VM_SMP=1
	VM_CPU=""
	VM_ACCEL=""		# "" = probe
	VM_TIMEOUT=300
	VM_CMDLINE=""
	VM_DMESG_ALLOW=""
	VM_QEMU_BIN=""
	VM_MONITOR=0		# 1: the guest may send HMP commands (vm_monitor)
	VM_NESTED=0		# 1: a KVM host for an inner guest (vm_nested_host)
}
vm_reset

vm_modules() { VM_MODULES+=("$@"); }
vm_include() { VM_INCLUDE+=("$@"); }
vm_ours() { VM_OURS+=("$@"); }
vm_bins() { VM_BINS+=("$@"); }
vm_file() { VM_FILES+=("$1:$2"); }
vm_qemu() { VM_QEMU+=("$@"); }

# vm_monitor: give the VM an HMP monitor that the guest script drives.  A
# guest line "VPS-MON <command>" on the results channel (fd 3), e.g.
#	echo "VPS-MON device_add scsi-hd,bus=hba.0,drive=h,scsi-id=5" >&3
# is fed to the monitor within about 0.2 s; the guest then polls for the
# effect.  The monitor's answers are kept in <logs>/monitor.log.
vm_monitor() { VM_MONITOR=1; }

# background: forward VPS-MON lines of results.log to the monitor FIFO
_vm_monitor_feed() { # dir
	local dir=$1 n=0 i
	local -a lines
	# read-write opens of a FIFO never block, whether QEMU is up or not
	exec 7<> "$dir/mon.in"
	while :; do
		# whole lines only: the guest's serial port writes a line byte
		# by byte, and a command caught half-written would go to the
		# monitor cut short (a logfile name, say) and never whole
		head -c "$(stat -c %s "$dir/results.log" 2>/dev/null || echo 0)" \
			"$dir/results.log" > "$dir/mon.snap" 2>/dev/null
		[ "$(tail -c 1 "$dir/mon.snap" | od -An -tx1 | tr -d ' ')" = 0a ] ||
			sed -i '$d' "$dir/mon.snap"
		mapfile -t lines < <(grep -a '^VPS-MON ' "$dir/mon.snap" | tr -d '\r')
		for ((i = n; i < ${#lines[@]}; i++)); do
			printf '%s\n' "${lines[$i]#VPS-MON }" >&7
		done
		n=${#lines[@]}
		[ -e "$dir/mon.stop" ] && break
		sleep 0.2
	done
	exec 7>&-
}

# --- helpers -------------------------------------------------------------------

_vm_krel() {
	case "$VM_KERNEL" in
	612|61|debug) vps_krel "$VM_KERNEL" ;;
	*) vps_die "unknown kernel '$VM_KERNEL' (612, 61, debug)" ;;
	esac
}

_vm_kroot() { echo "$VPS_CACHE/kernels/$(_vm_krel)"; }

vm_kernel_image() { echo "$(_vm_kroot)/boot/vmlinuz-$(_vm_krel)"; }

# path of one of our modules in the build tree
_vm_our_ko() {
	local f d=$VPS_BUILD
	[ "$VM_KERNEL" = 61 ] && d=$VPS_BUILD/.build-61
	[ "$VM_KERNEL" = debug ] && d=$VPS_BUILD/.build-debug
	f=$(find "$d" \( -path "$d/tests/logs" -o -path "$d/.build-*" \) -prune -o \
		-name "$1.ko" -print 2>/dev/null | head -1)
	[ -n "$f" ] || vps_die "module $1.ko not built for kernel $VM_KERNEL (run make check)"
	echo "$f"
}

# in-tree module files (relative to lib/modules/<rel>) for names + deps
_vm_resolve_modules() {
	local root rel m
	root=$(_vm_kroot)
	rel=$(_vm_krel)
	for m in "$@"; do
		modprobe -d "$root" -S "$rel" --show-depends --ignore-install "$m" 2>/dev/null |
			awk '$1 == "insmod" {print $2}' ||
			true
	done | sed "s|^$root/lib/modules/$rel/||" | awk '!seen[$0]++'
}

# _vm_install_modules ROOT NAME...: the named in-tree modules and their
# dependencies, decompressed, into ROOT/lib/modules/<rel>, then depmod
# (our own .ko files, if any, are put under it by the caller first)
_vm_install_modules() {
	local st=$1 rel root m
	shift
	rel=$(_vm_krel)
	root=$(_vm_kroot)
	mkdir -p "$st/lib/modules/$rel"
	_vm_resolve_modules "$@" | while read -r m; do
		mkdir -p "$st/lib/modules/$rel/$(dirname "$m")"
		case "$m" in
		*.xz) xz -dc "$root/lib/modules/$rel/$m" > "$st/lib/modules/$rel/${m%.xz}" ;;
		*.zst) zstd -qdc "$root/lib/modules/$rel/$m" > "$st/lib/modules/$rel/${m%.zst}" ;;
		*) cp "$root/lib/modules/$rel/$m" "$st/lib/modules/$rel/$m" ;;
		esac
	done
	cp "$root/lib/modules/$rel"/modules.{order,builtin,builtin.modinfo} "$st/lib/modules/$rel/" 2>/dev/null || true
	depmod -b "$st" "$rel"
}

# the build machine's binary for a name: fio is scripts/build-fio's (the
# engines test VMs use, none of Debian's fio's 89 MB of libraries),
# scsi_id udev's as scripts/setup unpacked it
_vm_bin_path() {
	local f
	if [ "$1" = fio ] && f=$(cat "$VPS_CACHE/fio/current" 2>/dev/null) && [ -x "$f/bin/fio" ]; then
		echo "$f/bin/fio"
		return 0
	fi
	if [ "$1" = scsi_id ] && [ -x "$VPS_CACHE/udev/lib/udev/scsi_id" ]; then
		echo "$VPS_CACHE/udev/lib/udev/scsi_id"
		return 0
	fi
	command -v "$1"
}

# copy a binary and the libraries it links into a staging root
_vm_copy_bin() {
	local dst=$1 b=$2 p lib
	p=$(_vm_bin_path "$b") || vps_die "binary $b not found on the build machine"
	mkdir -p "$dst/usr/bin"
	# stripped: the initramfs is copied into guest RAM at every boot
	strip --strip-unneeded -o "$dst/usr/bin/$(basename "$b")" "$p" 2>/dev/null ||
		cp -L "$p" "$dst/usr/bin/$(basename "$b")"
	ldd "$p" 2>/dev/null | awk '/=> \// {print $3} /^\t\/lib/ {print $1}' |
	while read -r lib; do
		mkdir -p "$dst$(dirname "$lib")"
		[ -e "$dst$lib" ] || cp -L "$lib" "$dst$lib"
	done
}

# the cached base initramfs for the current config; prints its path
_vm_base() {
	local rel key out st mods m b
	rel=$(_vm_krel)
	mods=$( { printf '%s\n' "${VM_MODULES[@]}" "${VM_INCLUDE[@]}"
		for m in "${VM_OURS[@]}"; do
			modinfo -F depends "$(_vm_our_ko "$m")" | tr ',' '\n'
		done; } | awk 'NF' | sort -u)
	key=$( {
		echo "$rel"; echo "$mods"
		for b in "${VM_BINS[@]}"; do
			b=$(_vm_bin_path "$b") && stat -L -c '%n %s %Y' "$b"
		done
		stat -L -c '%s %Y' /bin/busybox /usr/bin/kmod
		cat "$VPS_TOP/scripts/vm/init"
	} | sha256sum | cut -c1-16)
	out="$VPS_CACHE/initramfs/base-$key.cpio"
	if [ ! -s "$out" ]; then
		st=$(mktemp -d)
		mkdir -p "$st"/{bin,sbin,usr/bin,proc,sys,dev,tmp,run,mnt,lib/vps,etc}
		cp /bin/busybox "$st/bin/busybox"
		_vm_copy_bin "$st" kmod
		for b in modprobe insmod rmmod lsmod modinfo depmod; do
			ln -sf /usr/bin/kmod "$st/sbin/$b"
		done
		for b in "${VM_BINS[@]}"; do _vm_copy_bin "$st" "$b"; done
		# shellcheck disable=SC2086
		_vm_install_modules "$st" $mods
		cp "$VPS_TOP/scripts/vm/init" "$st/init"
		chmod +x "$st/init"
		mkdir -p "$(dirname "$out")"
		(cd "$st" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) > "$out.$$.tmp"
		mv "$out.$$.tmp" "$out"
		rm -rf "$st"
	fi
	echo "$out"
}

# per-run overlay: guest library, our modules, files, the guest script
_vm_overlay() { # out script
	local out=$1 script=$2 st f m
	st=$(mktemp -d)
	mkdir -p "$st/lib/vps"
	cp "$VPS_TOP/scripts/vm/guest.sh" "$VPS_TOP/scripts/vm/dmesg-patterns" "$st/lib/vps/"
	cp "$script" "$st/lib/vps/test.sh"
	printf '%s\n' "${VM_MODULES[@]}" > "$st/lib/vps/boot-modules"
	for m in "${VM_OURS[@]}"; do cp "$(_vm_our_ko "$m")" "$st/lib/vps/"; done
	for f in "${VM_FILES[@]}"; do
		mkdir -p "$st$(dirname "${f#*:}")"
		cp -aL "${f%%:*}" "$st${f#*:}"
	done
	(cd "$st" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) > "$out"
	rm -rf "$st"
}

# Build the initramfs for the current config into $1 (base + overlay,
# concatenated: the kernel unpacks both).  Used by vm_run and, for the
# inner guest of a nested test, by the test itself.
vm_initramfs() { # out script
	local base
	base=$(_vm_base)
	_vm_overlay "$1.ovl" "$2"
	cat "$base" "$1.ovl" > "$1"
	rm -f "$1.ovl"
}

# Can this machine run a stock kernel under KVM?  Probed once per boot of
# the build machine: /dev/kvm may exist and still fail (it does here).
vm_accel() {
	local f boot k out
	[ -n "$VM_ACCEL" ] && { echo "$VM_ACCEL"; return; }
	boot=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo none)
	f="$VPS_CACHE/accel-$boot"
	if [ ! -s "$f" ]; then
		echo tcg > "$f.$$"
		if [ -w /dev/kvm ]; then
			k=$(mktemp -d)
			mkdir -p "$k/bin"
			cp /bin/busybox "$k/bin/"
			printf '#!/bin/busybox sh\necho VPS-PROBE-OK\n/bin/busybox poweroff -f\n' > "$k/init"
			chmod +x "$k/init"
			(cd "$k" && find . | cpio -o -H newc --quiet) > "$k.cpio"
			out=$(timeout 60 "$(vps_qemu)" $VPS_QEMU_FW -accel kvm -cpu host \
				-m 512 -nographic -nodefaults -serial stdio -no-reboot \
				-kernel "$(VM_KERNEL=612 vm_kernel_image)" -initrd "$k.cpio" \
				-append "console=ttyS0 panic=-1 quiet" 2>&1) || true
			case "$out" in *VPS-PROBE-OK*) echo kvm > "$f.$$" ;; esac
			rm -rf "$k" "$k.cpio"
		fi
		mv "$f.$$" "$f"
	fi
	cat "$f"
}

# vm_run NAME [SCRIPT]: boot the VM, run SCRIPT (default: stdin) inside,
# print VPS-RESULT lines; returns non-zero when anything failed.
# vm_expect_fail GROUP CASE REGEX: the guest script on stdin, run as VM
# neg-CASE, must fail, and vm_run's output must match REGEX (the harness's
# negative tests: a broken test is reported as broken); one check,
# GROUP/CASE
vm_expect_fail() {
	local g=$1 c=$2 want=$3 out rc
	out=$(vm_run "neg-$c" 2>&1)
	rc=$?
	if [ $rc = 0 ]; then
		echo "VPS-RESULT not ok $g/$c: vm_run passed a broken test"
	elif ! grep -qE "$want" <<< "$out"; then
		echo "VPS-RESULT not ok $g/$c: failed without /$want/: $(grep 'not ok' <<< "$out" | head -2 | tr '\n' ' ')"
	else
		echo "VPS-RESULT ok $g/$c"
	fi
	rm -rf "$VPS_LOGDIR/neg-$c.$VM_KERNEL"
}

vm_run() {
	local name=$1 script=${2:-} dir rd accel qemu rc=0 verdict code bad m
	local mem=$VM_MEM tmo=$VM_TIMEOUT
	local -a cpu
	dir="$VPS_LOGDIR/$name.$VM_KERNEL"
	rm -rf "$dir"
	mkdir -p "$dir"
	for m in "${VM_OURS[@]}"; do
		if ! (_vm_our_ko "$m" >/dev/null 2>&1); then
			echo "VPS-RESULT not ok $name/vm: $m.ko is not built for kernel $VM_KERNEL (make check builds 612 and 61, make check-full the debug kernel)"
			return 1
		fi
	done
	if [ -z "$script" ]; then
		script="$dir/test.sh"
		cat > "$script"
	fi
	# the debug kernel: KASAN shadow and slow checks (lockdep, kmemleak)
	local kargs=""
	if [ "$VM_KERNEL" = debug ]; then
		[ "$mem" -ge 2048 ] || mem=2048
		tmo=$((tmo * ${VPS_DEBUG_SLOWDOWN:-4}))
		# 4-level paging: while identify_cpu() rebuilds the boot CPU's
		# feature bits, LA57 (of -cpu max) reads as off, and KASAN
		# flags an interrupt's access to the 5-level direct map as a
		# wild-memory-access (seen at 0.004 s of boot in handle_edge_irq)
		kargs="no5lvl"
	fi
	rd="$dir/initramfs.cpio"
	vm_initramfs "$rd" "$script"
	accel=$(vm_accel)
	if [ "$accel" = kvm ]; then cpu=(-cpu "${VM_CPU:-host}"); else cpu=(-cpu "${VM_CPU:-max}"); fi
	# More than one vCPU under TCG: a CPU may still run a translated
	# block with the int3 that text_poke_bp() put there after the patch
	# is done, and the kernel, no longer patching, oopses on it (QEMU's
	# cross-modifying code, not ours: "Oops: int3" in sched_clock_tick()
	# at 2.26 s of a 6.12 boot, when sched_clock turned stable and its
	# static key flipped).  tsc=unstable keeps that key as it boots (6.1
	# finds the TSCs unsynchronized itself); tests/harness/test_smp_01.
	if [ "$accel" = tcg ] && [ "$VM_SMP" -gt 1 ]; then
		kargs="$kargs tsc=unstable"
	fi
	qemu=${VM_QEMU_BIN:-$(vps_qemu)}
	: > "$dir/results.log"
	local -a mon=()
	local mon_feed="" mon_log=""
	if [ "$VM_MONITOR" = 1 ]; then
		# QEMU's pipe chardev reads <path>.in and writes <path>.out
		mkfifo "$dir/mon.in" "$dir/mon.out"
		mon=(-chardev "pipe,id=vpsmon,path=$dir/mon" -mon chardev=vpsmon,mode=readline)
		_vm_monitor_feed "$dir" &
		mon_feed=$!
		cat 0<> "$dir/mon.out" > "$dir/monitor.log" &
		mon_log=$!
	fi
	echo "$qemu -accel $accel ${cpu[*]} -m $mem -smp $VM_SMP ${VM_QEMU[*]}" > "$dir/cmdline"
	local fault
	# ttyS0: kernel console and the script's output; ttyS1: results only
	code=0
	: > "$dir/results.log"
	rm -f "$dir/frozen"
	: > "$dir/console.log"
	local hb="" app=""
	local -a hmp=() hvc=()
	if [ "$VM_NESTED" = 1 ]; then
		hb="vps.heartbeat=$VPS_HEARTBEAT_S"
		# The script's output, the heartbeat and the results go to
		# virtio consoles, as an inner guest's do (guest.sh's
		# vps_inner_start): a tty on an 8250 sends each buffer on a THRE
		# interrupt, and a writer whose interrupt never comes blocks for
		# good, the heartbeat with it, in a VM otherwise idle (hlt,
		# IF=1): the freezes of 1-vCPU host VMs looked exactly so.  A
		# virtio console's write spins until QEMU has taken the buffer;
		# no interrupt is waited for.  The kernel's console stays on
		# ttyS0 (printk polls the 8250); both write one file (append).
		app=",append=on"
		hvc=(-device virtio-serial-pci,id=vser,max_ports=2
			-chardev "file,id=hcon,path=$dir/console.log,append=on"
			-device virtconsole,bus=vser.0,nr=0,chardev=hcon
			-chardev "file,id=hres,path=$dir/results.log,append=on"
			-device virtconsole,bus=vser.0,nr=1,chardev=hres)
		hb="$hb vps.hvc"
		# a frozen host VM's registers say where it stopped (nokaslr:
		# System.map names a kernel address)
		rm -f "$dir/hmp.sock" "$dir/frozen-regs"
		hmp=(-monitor "unix:$dir/hmp.sock,server=on,wait=off")
		kargs="$kargs nokaslr"
	fi
	# shellcheck disable=SC2086
	timeout -k 10 "$tmo" "$qemu" $VPS_QEMU_FW -accel "$accel" "${cpu[@]}" \
		-m "$mem" -smp "$VM_SMP" -nographic -nodefaults -no-reboot \
		-chardev file,id=con,path="$dir/console.log$app" -serial chardev:con \
		-chardev file,id=res,path="$dir/results.log$app" -serial chardev:res \
		-device isa-debug-exit,iobase=0xf4,iosize=4 \
		-kernel "$(vm_kernel_image)" -initrd "$rd" \
		-append "console=ttyS0 loglevel=4 panic=-1 oops=panic panic_on_warn=0 $hb $kargs $VM_CMDLINE ${VPS_VM_CMDLINE:-}" \
		"${mon[@]}" "${hmp[@]}" "${hvc[@]}" "${VM_QEMU[@]}" > "$dir/qemu.log" 2>&1 </dev/null &
	local qpid=$! watch=""
	if [ -n "$hb" ]; then
		_vm_watch_heartbeat "$dir" "$qpid" &
		watch=$!
	fi
	wait "$qpid" || code=$?
	if [ -n "$watch" ]; then
		kill "$watch" 2>/dev/null
		wait "$watch" 2>/dev/null
	fi
	# Nothing is rerun: a run in which a VM died is not a pass.  When a
	# nested run failed the way the emulation beneath it fails (see
	# _vm_nested_tcg_fault), the TAP stream says so, for whoever looks.
	if [ "$VM_NESTED" = 1 ] && fault=$(_vm_nested_tcg_fault "$dir" "$code"); then
		echo "VPS-FAULT $name: the nested-TCG fault's signature ($fault): not excused (Documentation/testing.md)"
	fi
	if [ -n "$mon_feed" ]; then
		: > "$dir/mon.stop"
		wait "$mon_feed" 2>/dev/null
		kill "$mon_log" 2>/dev/null
		wait "$mon_log" 2>/dev/null
		rm -f "$dir/mon.in" "$dir/mon.out" "$dir/mon.stop"
	fi
	rm -f "$rd"

	# per-check results the guest reported
	grep -a '^VPS-RESULT ' "$dir/results.log" | tr -d '\r' |
		sed -E "s#^VPS-RESULT (ok|not ok) #VPS-RESULT \1 $name/#"
	grep -aq '^VPS-RESULT not ok' "$dir/results.log" && rc=1
	# free-form measurements (benchmarks): passed through as they are
	grep -a '^VPS-REPORT ' "$dir/results.log" | tr -d '\r'

	# the VM itself: exit path, verdict, kernel log
	verdict=$(grep -a '^VPS-DONE ' "$dir/results.log" | tail -1 | tr -d '\r' | awk '{print $2}')
	bad=""
	[ -e "$dir/frozen" ] && code=frozen
	case "$code" in
	frozen) bad="the VM froze: its console silent for $(cat "$dir/frozen") s despite its heartbeat" ;;
	33) [ "$verdict" = pass ] || bad="QEMU exit says pass, results say '${verdict:-nothing}'" ;;
	35) [ "$verdict" = fail ] || bad="QEMU exit says fail, results say '${verdict:-nothing}'" ;;
	124|137) bad="timeout after ${tmo}s" ;;
	*) bad="QEMU exited $code (crash or panic?); $(tail -2 "$dir/qemu.log" | tr '\n' ' ')" ;;
	esac
	sed -n '/^VPS-DMESG-BEGIN/,/^VPS-DMESG-END/p' "$dir/results.log" > "$dir/dmesg.log"
	local hits
	hits=$(cat "$dir/dmesg.log" "$dir/console.log" | tr -d '\r' | grep -aE "$VPS_DMESG_BAD" |
		{ if [ -n "$VM_DMESG_ALLOW" ]; then grep -avE "$VM_DMESG_ALLOW"; else cat; fi; } | head -3)
	[ -n "$hits" ] && bad="${bad:+$bad; }kernel log: $(echo "$hits" | tr '\n' '|')"
	if [ -z "$bad" ] && ! grep -aq '^VPS-RESULT ' "$dir/results.log"; then
		bad="the guest reported no checks"
	fi
	if [ -n "$bad" ]; then
		echo "VPS-RESULT not ok $name/vm: $bad"
		rc=1
	else
		echo "VPS-RESULT ok $name/vm"
	fi
	if [ $rc = 0 ] && [ -z "${VPS_KEEP_LOGS:-}" ]; then
		rm -rf "$dir"
	else
		echo "# logs kept in $dir" >&2
	fi
	return $rc
}

# A nested host VM also freezes now and then (it stops taking interrupts):
# it prints a heartbeat (scripts/vm/init) every VPS_HEARTBEAT_S seconds,
# and a console silent for VPS_HEARTBEAT_DEAD seconds stops it at once
# instead of at its timeout, marked "frozen".
VPS_HEARTBEAT_S=${VPS_HEARTBEAT_S:-10}
VPS_HEARTBEAT_DEAD=${VPS_HEARTBEAT_DEAD:-180}
# where a frozen VM's vCPU is: its monitor's registers, twice a second
# apart (a RIP that moves is a guest loop, one that stays a stuck or a
# halted vCPU), and whether that is the kernel's text, one of our modules
# (vps_load prints where each one's text went) or user space (nokaslr:
# Debian's System.map is a stub, the addresses are fixed)
_vm_frozen_regs() { # dir
	python3 - "$1/hmp.sock" "$1/console.log" <<'PY'
import re, socket, sys, time
try:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    s.connect(sys.argv[1])
    for _ in range(2):
        s.sendall(b"info registers\n")
        time.sleep(1)
    s.sendall(b"info lapic\n")
    time.sleep(1)
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except OSError:
        pass
except OSError as e:
    print("the monitor did not answer: %s" % e)
    sys.exit(0)
lines = out.decode(errors="replace").replace("\r", "").split("\n")
print("\n".join(l for l in lines if l.startswith(("RIP=", "RAX=", "CS =", "CR0=", "EFER="))))
# the local APIC: a vector set in IRR with nothing in ISR and IF=1 is an
# interrupt raised but not taken; an idle IRR with the timer armed is a
# timer that did not fire
lapic = False
for l in lines:
    if l.startswith("dumping local APIC"):
        lapic = True
    if lapic and l.startswith(("LVT", "Timer", "SPIV", "ICR", "ESR", "ISR", "IRR", "APR", "TPR", "PPR", "dumping")):
        print("lapic: " + l)
mods = []
for l in open(sys.argv[2], errors="replace"):
    m = re.search(r"vps: module (\S+) \.text 0x([0-9a-f]+)", l)
    if m:
        mods.append((int(m.group(2), 16), m.group(1)))
for rip in sorted(set(re.findall(r"RIP=([0-9a-f]+)", "\n".join(lines)))):
    a = int(rip, 16)
    if a < 1 << 63:
        what = "user space"
    elif a < 0xffffffffa0000000:
        what = "kernel text"
    else:
        what = "a module"
        near = [m for m in mods if m[0] <= a < m[0] + (1 << 20)]
        if near:
            what = "%s+0x%x" % (max(near)[1], a - max(near)[0])
    print("RIP %s: %s" % (rip, what))
PY
}

# What the guest cannot show: the emulator's own state of the frozen vCPU,
# read with gdb from the QEMU process that runs the VM (the hidden flags
# that gate interrupts: GIF and V_INTR_MASKING in hflags2, the interrupt
# shadow in hflags, the pending-interrupt bits, the halted flag, the APIC
# timer's deadline against the virtual clock), and the vCPU thread's
# stack (asleep in a halt, or running guest code).  Then an NMI through
# the monitor: a console that speaks again after it was a wake-up lost,
# one that stays silent is a vCPU that takes nothing.  The run still
# fails; this only says how.
_vm_frozen_emu() { # dir, QEMU pid
	local dir=$1 pid=$2 cpu='((X86CPU *)cpus_queue.tqh_first)' apic t0
	apic="((APICCommonState *)$cpu->apic_state)"
	[ -n "$pid" ] && command -v gdb > /dev/null || { echo "emu: no gdb or no QEMU pid"; return 0; }
	timeout 60 gdb -nx -batch -p "$pid" \
		-ex 'set pagination off' -ex 'set print pretty off' \
		-ex "printf \"emu: halted=%d interrupt_request=0x%x exit_request=%d icount_decr=0x%x\\n\", $cpu->parent_obj.halted, $cpu->parent_obj.interrupt_request, $cpu->parent_obj.exit_request, $cpu->parent_obj.neg.icount_decr.u32" \
		-ex "printf \"emu: hflags=0x%x hflags2=0x%x eflags=0x%x int_ctl=0x%x intercept=0x%lx eip=0x%lx\\n\", $cpu->env.hflags, $cpu->env.hflags2, $cpu->env.eflags, $cpu->env.int_ctl, $cpu->env.intercept, $cpu->env.eip" \
		-ex "printf \"emu: apic timer expire=%ld next_time=%ld vclock=%ld tsc_deadline=%lu lvt_timer=0x%x\\n\", $apic->timer->expire_time, $apic->next_time, qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL), $cpu->env.tsc_deadline, $apic->lvt[0]" \
		-ex "printf \"emu: apic irr=%08x%08x isr=%08x%08x tpr=0x%x\\n\", $apic->irr[7], $apic->irr[6], $apic->isr[7], $apic->isr[6], $apic->tpr" \
		-ex 'thread apply all bt 6' 2>&1 | grep -E '^emu:|^Thread|^#[0-5] ' | cut -c1-200 | head -60
	t0=$(stat -c %Y "$dir/console.log")
	timeout 5 python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.settimeout(3); s.connect(sys.argv[1])
s.sendall(b"nmi\n"); time.sleep(1)' "$dir/hmp.sock" 2>/dev/null
	# up to 15 s (a console that speaks ends the wait)
	for _ in $(seq 30); do
		[ "$(stat -c %Y "$dir/console.log")" -le "$t0" ] || break
		sleep 0.5
	done
	if [ "$(stat -c %Y "$dir/console.log")" -gt "$t0" ]; then
		echo "emu: after an NMI the console spoke again: $(tail -c 300 "$dir/console.log" | tr -d '\r' | tail -2 | tr '\n' '|')"
	else
		echo "emu: after an NMI the console stayed silent"
	fi
}

_vm_watch_heartbeat() { # dir, pid of the VM's timeout(1)
	local age
	while sleep 5; do
		kill -0 "$2" 2>/dev/null || return 0
		age=$(( $(date +%s) - $(stat -c %Y "$1/console.log") ))
		if [ "$age" -ge "$VPS_HEARTBEAT_DEAD" ]; then
			_vm_frozen_regs "$1" > "$1/frozen-regs" 2>&1
			_vm_frozen_emu "$1" "$(pgrep -P "$2" | head -1)" >> "$1/frozen-regs" 2>&1
			echo "$age" > "$1/frozen"
			kill "$2"
			return 0
		fi
	done
}

# _vm_nested_tcg_fault DIR CODE: did a nested host VM, or its inner guest,
# meet the fault of TCG's SVM emulation (DESIGN.md, "Caveat measured
# here")?  Prints which.
# It strikes the inner QEMU's vCPU thread, the one that runs VMRUN: its
# kernel stack's end marker is overwritten and the scheduler panics, or
# the host VM resets with nothing logged.  Anything else in the log (an
# oops, BUG, KASAN..., a frame of one of our modules) is not this.
_vm_nested_tcg_fault() {
	local con=$1/console.log code=$2 sig='Kernel panic - not syncing: corrupted stack end detected inside scheduler'
	# the kernel-log patterns every test judges (but the fault's own
	# panic line), a soft lockup, or a frame of one of our modules
	if grep -avF "$sig" "$con" |
	   grep -aqE "$VPS_DMESG_BAD|soft lockup|\[(vhost_pvscsi|pvscsi_mq|sriov_vfcfg)\]"; then
		return 1
	fi
	if [ -e "$1/frozen" ]; then
		echo "froze: console silent for $(cat "$1/frozen") s; $(grep -a '^RIP ' "$1/frozen-regs" 2>/dev/null | tr '\n' ' ' || echo "no registers")"
		return 0
	fi
	# The fault froze an inner guest instead (guest.sh, vps_inner_stuck
	# says so once it ruled out our code), and the host VM ran to its
	# end: excused only when the checks that found the inner guest stuck
	# ("VPS-INNER-FROZEN NAME CHECK...: why") and that guest's own vm
	# check are all that failed.
	local res=$1/results.log froze inner checks c
	local -a keep
	froze=$(grep -a '^VPS-INNER-FROZEN ' "$res" | tr -d '\r')
	if [ -n "$froze" ]; then
		case "$code" in 33|35) ;; *) return 1 ;; esac
		[ "$(wc -l <<< "$froze")" = 1 ] || return 1
		read -r _ inner checks <<< "${froze%%: *}"
		keep=(-e "$inner/vm")
		for c in $checks; do keep+=(-e "$c"); done
		if grep -a '^VPS-RESULT not ok ' "$res" | tr -d '\r' |
		   sed -E 's/^VPS-RESULT not ok ([^:]*).*/\1/' |
		   grep -qvxF "${keep[@]}"; then
			return 1
		fi
		echo "inner guest $inner froze (${froze#*: })"
		return 0
	fi
	case "$code" in 33|35|124|137) return 1 ;; esac
	if grep -aqF "$sig" "$con"; then
		grep -aA3 -F "$sig" "$con" |
			grep -aq 'Comm: qemu-system-x86' || return 1
		echo "scheduler: corrupted stack end of the inner QEMU's vCPU thread"
		return 0
	fi
	# QEMU also exits 0 when killed (SIGTERM, SIGINT): not a reset
	if [ "$code" = 0 ] && ! grep -aq '^VPS-DONE ' "$1/results.log" &&
	   ! grep -aq 'terminating on signal' "$1/qemu.log"; then
		echo "reset with nothing logged"
		return 0
	fi
	return 1
}

# Make the VM a KVM host for a nested guest: our QEMU with its firmware,
# kvm_amd (TCG's -cpu max emulates SVM with nested paging), room for the
# inner guest.  The guest script then calls vps_inner_run (guest.sh).
# One vCPU (VPS_NESTED_SMP overrides): a 1-vCPU host VM runs one TCG
# thread, uses one core, and runs beside other tests.  Two vCPUs running
# nested guests at once used to break the emulated SVM (host VMs reset or
# with a corrupted stack end, inner guests triple-faulting): QEMU patch
# 0006 mended that, stack/test_smp_01 keeps it mended (Documentation/
# testing.md, "The first CPU's hflags2").
vm_nested_host() {
	local f
	vm_modules kvm_amd
	vm_bins "$(vps_qemu)"
	for f in /usr/share/seabios/bios-256k.bin /usr/share/qemu/linuxboot_dma.bin \
		/usr/share/qemu/kvmvapic.bin; do
		vm_file "$f" "/usr/share/qemu/${f##*/}"
	done
	VM_SMP=${VPS_NESTED_SMP:-1}
	VM_MEM=3072
	VM_CPU=max
	VM_NESTED=1
}
