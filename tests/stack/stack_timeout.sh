# SPDX-License-Identifier: GPL-2.0
#
# The body of tests/stack/test_timeout_0N.sh: guest timeouts against the
# host module's data path, for one guest driver, $DRV.  The host VM (612,
# or the debug kernel: KASAN, lockdep, kmemleak) runs our QEMU with
# -device vhost-pvscsi whose LUN is a device-mapper linear device over a
# RAM disk.  While the KVM guest (stock 6.12) runs a rate-limited fio
# randwrite with verify, the host suspends the dm device for 10 s: every
# command issued meanwhile outlives the guest's 2 s SCSI timeout, the
# guest's error handler sends ABORT_CMD (and, when the abort does not come
# back in time, device/bus resets, which the module completes only once
# the held I/O drains).  With vmw_pvscsi, while such a reset waits in the
# module (its vCPU thread in the reset's quiesce), the inner QEMU's monitor
# answers: the wait runs without QEMU's BQL.  Then the LUN resumes.  fio must verify clean, a
# verify-only pass too, the guest must have run its abort handler and the
# module must have counted aborts or resets.  Then the LUN is suspended
# again under a never-ending fio and the inner QEMU is killed: it exits
# at once, the module holds the device until the held commands complete,
# and shows nothing open or in flight once the LUN resumes.  At the end it unloads, (debug kernel) kmemleak finds nothing
# of it, and neither kernel log may carry a report.
. "$(dirname "$0")/../../scripts/vm/harness.sh"

work=$(mktemp -d /tmp/vps-timeout-XXXXXX)
trap 'rm -rf "$work"' EXIT
# the KVM guest runs the stock kernel, also when the host VM is the debug one
kernel=$(VM_KERNEL=612 vm_kernel_image)
# on the debug kernel (test_timeout_01 only, the unmodified guest's path)
# the nested VM runs 4-8 min; there the inner guest manages some 40-50
# IOPS: a quarter of the data at a quarter of the rate (the write phase
# still spans the pause)
drivers=$DRV io="SZ=16 RATE=500"
[ "${VPS_KERNEL:-612}" = debug ] && io="SZ=4 RATE=125"
for drv in $drivers; do
	vm_reset
	VM_KERNEL=612
	vm_bins fio
	if [ $drv = vmw_pvscsi ]; then vm_modules vmw_pvscsi sd_mod; else vm_ours pvscsi_mq; vm_modules sd_mod; fi
	{ echo "DRV=$drv $io"; cat "$(dirname "$0")/inner_timeout.sh"; } > "$work/inner-$drv.sh"
	vm_initramfs "$work/inner-$drv.cpio" "$work/inner-$drv.sh"
done

vm_reset
vm_nested_host
vm_modules brd dm_mod
vm_ours vhost_pvscsi
vm_bins dmsetup
vm_file "$kernel" /inner/vmlinuz
for drv in $drivers; do vm_file "$work/inner-$drv.cpio" "/inner/$drv.cpio"; done
VM_MEM=3584
VM_TIMEOUT=600
echo "DRIVERS='$drivers'" > "$work/host.sh"
cat >> "$work/host.sh" <<'GUEST'
export DM_DISABLE_UDEV=1
modprobe -r brd
modprobe brd rd_nr=2 rd_size=131072
# one dm device per driver's guest: each is suspended on its own schedule
i=0
for drv in $DRIVERS; do
	t_check "$drv/dm-create" sh -c "echo '0 $(cat /sys/block/ram$i/size) linear /dev/ram$i 0' | dmsetup create vpsl-$drv --noudevsync"
	i=$((i + 1))
done
t_check load vps_load vhost_pvscsi
g=/sys/kernel/debug/vhost_pvscsi/gauges
uptime_ms() { awk '{print int($1 * 1000)}' /proc/uptime; }
# in_reset PID: a thread of QEMU PID waits in the module's reset
in_reset() { grep -qs vps_quiesce_wait /proc/"$1"/task/*/stack; }
# mon_answers NAME: the inner QEMU's monitor answers `info status` in 5 s
# (what an earlier query left unread is read first)
mon_answers() {
	timeout 1 cat "/tmp/$1.mon.out" > /dev/null
	printf 'info status\n' > "/tmp/$1.mon.in"
	timeout 5 cat "/tmp/$1.mon.out" | tr -d '\r' | grep -aq '^VM status: running'
}
# one_drv DRV: DRV's guest on its own adapter and dm device, the host's
# side of its checks
one_drv() {
	local drv=$1 dm=vpsl-$1 stuck= a pid eh0 t0 t1
	VPS_INNER_MEM=512 vps_inner_start "$drv" /inner/vmlinuz "/inner/$drv.cpio" 900 \
		-blockdev driver=host_device,node-name=d0,filename=/dev/mapper/$dm,cache.direct=on \
		-device vhost-pvscsi,id=hba0 \
		-device scsi-hd,bus=hba0.0,drive=d0,scsi-id=0,lun=0 \
		-trace vhost_pvscsi_cmd -trace vhost_pvscsi_ioctl_error
	pid=$(vps_inner_pid "$drv")
	if vps_inner_wait_console "$drv" 'VPS-MARK io-running' 300; then
		a=$(ls /sys/kernel/debug/vhost_pvscsi/adapter-"$pid"-* | head -1)
		# the guest's probe resets the adapter: only what the error
		# handler adds to aborts + resets during the pause counts
		eh0=$(vps_eh_count "$a")
		t_check "$drv/dm-suspend" dmsetup suspend --noudevsync $dm
		t0=$(date +%s)
		sleep 10
		# commands are held: the module has requests in flight
		t_match "$drv/held-in-flight" "$(grep in_flight "$a")" 'in_flight [1-9]'
		# Normally the guest has aborted and reset by now.  A slow
		# host VM (CI's debug run once) can leave the guest's timeout
		# unfired at 10 s: hold on until its first abort or reset
		# reaches the module, then resume at once.  The log lines
		# wait until after the resume, so as not to lengthen the hold.
		# vmw_pvscsi: hold on as well until a reset of the guest's
		# waits in the module: its vCPU thread sits in the reset's
		# quiesce.  Then the monitor must answer: the wait runs without
		# QEMU's BQL (until 2026-12-02 it held it, and the monitor, the
		# main loop and every other vCPU froze for as long as the LUN
		# hung).  vmw_pvscsi gives up an abort after 2 s and resets
		# within some 20 s; pvscsi_mq waits 10 s per abort, and the 8
		# held commands would hold the LUN past a minute and a half.
		while { [ "$(vps_eh_count "$a")" -le "$eh0" ] ||
			{ [ "$drv" = vmw_pvscsi ] && ! in_reset "$pid"; }; } &&
			[ $(( $(date +%s) - t0 )) -lt 40 ]; do
			sleep 1
		done
		if [ "$drv" != vmw_pvscsi ]; then
			:
		elif in_reset "$pid"; then
			t_ok "$drv/reset-waits"
			m0=$(uptime_ms)
			t_check "$drv/monitor-during-reset" mon_answers "$drv"
			echo "monitor: $(( $(uptime_ms) - m0 )) ms for its answer while a reset waited"
			t_check "$drv/reset-still-waits" in_reset "$pid"
		else
			t_fail "$drv/reset-waits" "no reset of the guest's waited in the module in $(( $(date +%s) - t0 )) s"
			vps_inner_threads "$drv"
			tail -20 "/tmp/$drv.qemu"
		fi
		t1=$(date +%s)
		t_check "$drv/dm-resume" dmsetup resume --noudevsync $dm
		echo "held for $(( t1 - t0 )) s; error handler: $eh0 -> $(vps_eh_count "$a")"
		vps_inner_alive "$drv"
		vps_wait 120 sh -c "! grep -q 'in_flight [1-9]' $a" || true
		cat "$a"
		t_check "$drv/module-saw-eh" test "$(vps_eh_count "$a")" -gt "$eh0"
	else
		t_fail "$drv/reached-pause" "the inner guest never started its fio"
		vps_inner_stuck "$drv" "$drv/reached-pause"
		stuck=1
	fi
	# QEMU killed while the suspended LUN holds its commands: the module
	# keeps them, and every one completes once the LUN resumes
	if [ -n "$stuck" ]; then
		vps_inner_wait "$drv"
	elif vps_inner_wait_console "$drv" 'VPS-MARK io-running-at-kill' 600; then
		a=$(ls /sys/kernel/debug/vhost_pvscsi/adapter-"$pid"-* | head -1)
		t_check "$drv/dm-suspend-at-kill" dmsetup suspend --noudevsync $dm
		# the suspend returns once the LUN's I/O has drained; the
		# guest's next requests reach the held device a moment later
		# (long moments on the debug kernel), and only then is the
		# kill the case this test is about
		if ! vps_wait 60 grep -q 'io_pending [1-9]' "$a"; then
			t_fail "$drv/held-before-kill" "no I/O reached the suspended LUN in 60 s"
			cat "$a"
		fi
		kill -9 "$pid"
		# the killed QEMU exits at once, the hung LUN notwithstanding
		# (until 2026-12-02 a thread of it waited in D for the held
		# commands): the module keeps its adapter, and the commands,
		# until the LUN answers again
		vps_wait 10 sh -c "! test -e /proc/$pid" || true
		t_match "$drv/held-after-kill" "$(cat /proc/$pid/stat 2>/dev/null | cut -d' ' -f3) $(cat $g | tr '\n' ' ')" \
			'^ open_devices [1-9] requests_in_flight [1-9][0-9]* luns [1-9] $'
		t_check "$drv/dm-resume-after-kill" dmsetup resume --noudevsync $dm
		vps_inner_wait "$drv" killed
	else
		t_fail "$drv/reached-kill-point" "the inner guest never started its last fio"
		vps_inner_stuck "$drv" "$drv/reached-kill-point"
		vps_inner_wait "$drv"
	fi
	# and once they completed it is gone
	if vps_wait 30 sh -c "! test -e /proc/$pid"; then t_ok "$drv/released"; else
		t_fail "$drv/released" "QEMU $pid still exiting: $(cat /proc/$pid/stack 2>/dev/null | head -5 | tr '\n' ' ')"; fi
}
for drv in $DRIVERS; do
	one_drv "$drv"
done
vps_wait 30 grep -q 'open_devices 0' $g
t_match gauges-zero "$(cat $g | tr '\n' ' ')" '^open_devices 0 requests_in_flight 0 luns 0 $'
for drv in $DRIVERS; do
	dmsetup status vpsl-$drv
	t_check "$drv/dm-remove" dmsetup remove --noudevsync vpsl-$drv
done
t_check unload rmmod vhost_pvscsi
vps_kmemleak_check kmemleak-after-unload
vps_dmesg_clean host-dmesg-clean
GUEST
vm_run "stack-timeout-$DRV" "$work/host.sh"
