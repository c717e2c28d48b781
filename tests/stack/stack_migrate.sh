# SPDX-License-Identifier: GPL-2.0
#
# The body of tests/stack/test_migrate_0N.sh: live migration of a KVM
# guest on -device vhost-pvscsi, for one guest driver, $DRV.  The host VM
# (612) loads vhost_pvscsi.ko and runs our QEMU; the inner guest's LUN is
# a RAM disk both QEMUs open (the same path on "both hosts"), its
# mailbox a virtio-blk disk (tests/stack/inner_migrate.sh).  While the
# guest writes and verifies (crc32c) in rounds, the host moves it to a
# new QEMU, MIGRATIONS times in a row (10, 2 in the gate: VPS_TIER; or
# VPS_MIGRATIONS), each over a
# UNIX socket through QMP: the migration must complete, the source's
# adapter must hold nothing in flight once the VM stopped (VPS_STOP
# drained it: requests = completions), the destination must run.  Then
# the commands the guest's midlayer dispatched to sda must be exactly
# the requests the module's adapters (one per QEMU) took from the ring:
# none lost, none doubled.  A migration is then cancelled midway (the
# bandwidth held to 2 MB/s): the source goes on running, the destination
# exits.  A destination whose adapter lacks the guest's LUN refuses the
# device state, says why, and the source runs on.  Then two more
# migrations while the guest resets the device,
# the bus and the adapter in a loop under the same load.  The guest
# judges its data (every round verified, the last ones read back again)
# and its log; at the end nothing is open in the module, it unloads, and
# the host VM's log has no report.  Every source took requests of the
# guest's while it ran: the load spanned every migration.  Each migration's total time and
# downtime are printed.  MQ=N (test_migrate_03): the adapter has
# num-queues=N and the guest N vCPUs, a writer on each: pvscsi_mq's
# queues travel with the device state and go on working.
. "$(dirname "$0")/../../scripts/vm/harness.sh"

work=$(mktemp -d /tmp/vps-migrate-XXXXXX)
trap 'rm -rf "$work"' EXIT
kernel=$(VM_KERNEL=612 vm_kernel_image)
vm_reset
vm_bins fio sg_reset
if [ "$DRV" = vmw_pvscsi ]; then vm_modules vmw_pvscsi sd_mod; else vm_ours pvscsi_mq; vm_modules sd_mod; fi
vm_modules virtio_blk
{ echo "DRV=$DRV MQ=${MQ:-1}"; cat "$(dirname "$0")/inner_migrate.sh"; } > "$work/inner-$DRV.sh"
vm_initramfs "$work/inner-$DRV.cpio" "$work/inner-$DRV.sh"

vm_reset
vm_nested_host
vm_modules brd
vm_ours vhost_pvscsi
vm_file "$kernel" /inner/vmlinuz
vm_file "$work/inner-$DRV.cpio" "/inner/$DRV.cpio"
VM_MEM=3072
VM_TIMEOUT=1500
# the gate's two in a row already hand the ring over source to
# destination to a second destination (the first's state migrated
# again); the two during resets follow; check-full's ten find what needs
# more
migrations=10
[ "${VPS_TIER:-full}" != gate ] || migrations=2
echo "DRV=$DRV MIGRATIONS=${VPS_MIGRATIONS:-$migrations} MQ=${MQ:-1}" > "$work/host.sh"
cat >> "$work/host.sh" <<'GUEST'
modprobe -r brd
modprobe brd rd_nr=2 rd_size=131072
t_check load vps_load vhost_pvscsi
D=/sys/kernel/debug/vhost_pvscsi
drv=$DRV

# qemu_start TAG [incoming [nolun]]: this driver's guest on a QEMU whose
# QMP is TAG's (a migration destination with "incoming"; "nolun": one
# whose adapter lacks the guest's LUN)
sock=/tmp/mig-$drv.sock
qemu_start() {
	local lun="-device scsi-hd,bus=hba0.0,drive=d0,scsi-id=0,lun=0"
	[ "${3:-}" != nolun ] || lun=
	vps_qmp_fifos "$1"
	if [ -n "${2:-}" ]; then rm -f "$sock"; export VPS_INNER_INCOMING=unix:$sock; fi
	# shellcheck disable=SC2086
	VPS_INNER_SMP=$MQ VPS_INNER_MEM=384 VPS_INNER_HUGEPAGES=0 vps_inner_start "$drv" /inner/vmlinuz "/inner/$drv.cpio" 1400 \
		-blockdev driver=host_device,node-name=d0,filename=/dev/ram0,cache.direct=on \
		-device vhost-pvscsi,id=hba0,max-targets=1,num-queues=$MQ $lun \
		-blockdev driver=host_device,node-name=mb,filename=/dev/ram1,cache.direct=on \
		-device virtio-blk-pci,drive=mb \
		$(vps_qmp_args "$1") \
		-trace vhost_pvscsi_stop -trace vhost_pvscsi_log -trace vhost_pvscsi_ioctl_error
	unset VPS_INNER_INCOMING
	vps_qmp_attach "$1"
}
# mailbox WORD: the guest's next order
mailbox() {
	printf '%s' "$1" | dd of=/dev/ram1 bs=512 count=1 conv=sync oflag=direct 2>/dev/null
}
# adapter PID: the module's debugfs file of QEMU PID's adapter
adapter() { ls "$D"/adapter-"$1"-* 2>/dev/null | head -1; }
# cons_all FILE: the consumer indices of every queue of an adapter added
# up (its "queue N cons X" lines; 0: no file)
cons_all() { awk '$1 == "queue" && $3 == "cons" {s += $4} END {print s + 0}' "$1" 2>/dev/null || echo 0; }
# field FILE KEY: KEY's value in an adapter's debugfs file (0: no file)
field() {
	if [ -n "$1" ] && [ -e "$1" ]; then vps_field "$2" "$1"; else echo 0; fi
}

# migrate LABEL: move the guest from QEMU $cur to a new one; sets cur
requests=0
migrate() {
	local l=$1 next src a st ans took
	n=$((n + 1))
	next=$drv-q$n
	src=$(vps_inner_pid "$drv")
	a=$(adapter "$src")
	qemu_start "$next" incoming
	vps_wait 30 test -S "$sock" || echo "$l: no socket $sock: $(tail -3 /tmp/$drv.qemu)"
	ans=$(vps_migrate "$cur" "unix:$sock" 300)
	st=$(vps_qmp_status "$ans")
	echo "$l: total-time $(vps_qmp_num "$ans" total-time) ms downtime $(vps_qmp_num "$ans" downtime) ms setup-time $(vps_qmp_num "$ans" setup-time) ms"
	t_equal "$l/completed" "$st" completed
	if [ "$st" != completed ]; then
		echo "$ans"
		tail -5 "/tmp/$drv.qemu"
	fi
	# the stopped source: VPS_STOP completed what was in flight
	if [ -n "$a" ] && [ -e "$a" ]; then
		cat "$a" | tr '\n' ' '
		echo
		t_match "$l/source-drained" "$(cat "$a" | tr '\n' ' ')" ' in_flight 0 io_pending 0 '
		t_equal "$l/source-all-completed" "$(field "$a" completions)" "$(field "$a" requests)"
		# the guest's resets reached this source while it ran it
		case $l in reset-*) t_check "$l/source-served-resets" test "$(field "$a" resets)" -gt 0 ;; esac
		# the guest's load ran on this source: it took requests of its
		# own (the first's also count the firmware's probe)
		if [ "$n" = 1 ]; then took=$(cons_all "$a"); else took=$(field "$a" requests); fi
		t_check "$l/source-took-io" test "$took" -gt 0
		requests=$((requests + $(field "$a" requests)))
		# the firmware's commands (SeaBIOS probes the adapter) went
		# before the guest's driver set the rings up from index 0
		[ "$n" != 1 ] || fw=$(( $(field "$a" requests) - $(cons_all "$a") ))
	else
		t_fail "$l/source-drained" "no adapter of QEMU $src in $D"
	fi
	vps_qmp "$cur" '{"execute":"quit"}' > /dev/null
	vps_wait 30 sh -c "! test -e /proc/$src" || t_fail "$l/source-exits" "QEMU $src still runs"
	cur=$next
	t_match "$l/destination-runs" "$(vps_qmp "$cur" '{"execute":"query-status"}')" '"status": "running"'
}

# --- the guest on its first QEMU
n=0
cur=$drv-q0
qemu_start "$cur"
if vps_inner_wait_console "$drv" 'VPS-MARK io-running' 300; then
	i=1
	while [ "$i" -le "$MIGRATIONS" ]; do
		migrate "mig-$i"
		i=$((i + 1))
	done
	mailbox p1-stop
	if vps_inner_wait_console "$drv" 'VPS-MARK phase1 ' 300; then
		line=$(grep -a 'VPS-MARK phase1 ' "/tmp/$drv.console" | tail -1 | tr -d '\r')
		a=$(adapter "$(vps_inner_pid "$drv")")
		[ -n "$a" ] && cat "$a"
		total=$((requests + $(field "$a" requests) - ${fw:-0}))
		cons=$(cons_all "$a")
		guest=$(echo "$line" | sed -n 's/.*iorequest=\([0-9]*\).*/\1/p')
		echo "commands: the guest's midlayer dispatched $guest; the rings' consumer indices add up to $cons; the module's $((n + 1)) adapters took $total requests (less ${fw:-0} of the firmware's)"
		# none lost: every command the guest's driver queued was taken
		# from the ring, whose index each destination took over
		t_equal commands-match "$cons" "$guest"
		# none doubled: no destination took a request its source had
		t_equal none-doubled "$total" "$cons"
	else
		t_fail commands-match "the guest never ended its first phase"
	fi

	# a migration cancelled midway: the source keeps the guest
	src=$(vps_inner_pid "$drv")
	inst=$(cat "/tmp/$drv.inst")
	pidf=$(cat "/tmp/$drv.pid")
	# back_to_source: once the destination is gone, the source is NAME's
	# QEMU again; its own monitor fifos are gone
	back_to_source() {
		echo "$inst" > "/tmp/$drv.inst"
		echo "$pidf" > "/tmp/$drv.pid"
		rm -f "/tmp/$drv.code" "/tmp/$drv.mon.in" "/tmp/$drv.mon.out"
	}
	vps_qmp "$cur" '{"execute":"migrate-set-parameters","arguments":{"max-bandwidth":2097152}}'
	n=$((n + 1))
	next=$drv-q$n
	qemu_start "$next" incoming
	dst=$(vps_inner_pid "$drv")
	vps_wait 30 test -S "$sock"
	vps_qmp "$cur" "{\"execute\":\"migrate\",\"arguments\":{\"uri\":\"unix:$sock\"}}"
	sleep 4
	st=$(vps_qmp_status "$(vps_qmp "$cur" '{"execute":"query-migrate"}')")
	t_equal cancel/active-before "$st" active
	vps_qmp "$cur" '{"execute":"migrate_cancel"}'
	t0=$(date +%s)
	while [ $(( $(date +%s) - t0 )) -lt 60 ]; do
		st=$(vps_qmp_status "$(vps_qmp "$cur" '{"execute":"query-migrate"}')")
		case "$st" in cancelled|completed|failed) break ;; esac
		sleep 1
	done
	t_equal cancel/cancelled "$st" cancelled
	t_match cancel/source-runs "$(vps_qmp "$cur" '{"execute":"query-status"}')" '"status": "running"'
	# the destination gives up by itself once its stream breaks
	if vps_wait 60 sh -c "! test -e /proc/$dst"; then t_ok cancel/destination-exits; else
		t_fail cancel/destination-exits "QEMU $dst still runs: $(tail -3 /tmp/$drv.qemu)"
		kill -9 "$dst"
	fi
	sleep 1
	back_to_source
	a=$(adapter "$src")
	t_match cancel/adapter-runs "$([ -n "$a" ] && tr '\n' ' ' < "$a")" '^owner [0-9]+ rings 1 broken 0 '
	vps_qmp "$cur" '{"execute":"migrate-set-parameters","arguments":{"max-bandwidth":1073741824}}'

	# a destination whose adapter lacks the guest's LUN refuses the
	# device state and says why; the source goes on (QEMU resumes it, or
	# it is told to "cont" when it had sent everything)
	n=$((n + 1))
	next=$drv-q$n
	qemu_start "$next" incoming nolun
	dst=$(vps_inner_pid "$drv")
	vps_wait 30 test -S "$sock"
	ans=$(vps_migrate "$cur" "unix:$sock" 120)
	echo "lun-mismatch: $(vps_qmp_status "$ans")"
	if vps_wait 60 sh -c "! test -e /proc/$dst"; then t_ok lun-mismatch/destination-refuses; else
		t_fail lun-mismatch/destination-refuses "QEMU $dst still runs: $(tail -3 /tmp/$drv.qemu)"
		kill -9 "$dst"
	fi
	t_match lun-mismatch/says-why "$(tail -5 "/tmp/$drv.qemu")" \
		'target 0: the source served LUNs 0x1, this destination serves 0x0: give it the same scsi-hd devices'
	sleep 1
	back_to_source
	case "$(vps_qmp_status "$(vps_qmp "$cur" '{"execute":"query-status"}')")" in
	running) ;;
	*) vps_qmp "$cur" '{"execute":"cont"}' ;;
	esac
	t_match lun-mismatch/source-runs "$(vps_qmp "$cur" '{"execute":"query-status"}')" '"status": "running"'

	# migrations while the guest resets its device, bus and adapter
	mailbox go2
	if vps_inner_wait_console "$drv" 'VPS-MARK resets-running' 120; then
		sleep 3
		migrate reset-mig-1
		sleep 2
		migrate reset-mig-2
	else
		t_fail reset-mig "the guest never started its resets"
	fi
	mailbox p2-stop
	vps_inner_wait_console "$drv" 'VPS-MARK done' 300 || vps_inner_stuck "$drv" done
else
	t_fail reached-io "the inner guest never started its fio"
	vps_inner_stuck "$drv" reached-io
fi
vps_inner_wait "$drv"
echo "QEMU exits: $(cd /tmp && for f in "$drv".code.*; do printf '%s=%s ' "${f#$drv.code.}" "$(cat "$f")"; done)"
vps_wait 30 grep -q 'open_devices 0' "$D/gauges"
t_match gauges-zero "$(cat "$D/gauges" | tr '\n' ' ')" '^open_devices 0 requests_in_flight 0 luns 0 $'
t_check unload rmmod vhost_pvscsi
vps_dmesg_clean host-dmesg-clean
GUEST
vm_run "stack-migrate-$DRV" "$work/host.sh"
