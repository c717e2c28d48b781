# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=sh
# Inner-guest half of tests/stack/stack_migrate.sh (test_migrate_01, _02):
# a KVM guest whose only SCSI disk, sda, is a LUN of -device vhost-pvscsi
# and which the host VM live-migrates between QEMU processes while this
# guest writes and verifies.  The host's orders come through a mailbox,
# the first sector of a virtio-blk disk (vda), so that no order adds a
# command to the adapter whose commands are counted.  DRV (vmw_pvscsi or
# pvscsi_mq) is prepended by the test.
if [ "$DRV" = pvscsi_mq ]; then
	t_check load-pvscsi_mq vps_load pvscsi_mq
fi
t_check load-virtio_blk modprobe virtio_blk
vps_wait 30 test -b /dev/sda
vps_wait 30 test -b /dev/vda
t_equal driver "$(cat /sys/class/scsi_host/host*/proc_name | sort -u | tr '\n' ' ')" "$DRV "
# mailbox WORD: wait (up to 20 min) for the host's order WORD
mailbox() {
	_e=$(( $(cut -d. -f1 /proc/uptime) + 1200 ))
	while [ "$(dd if=/dev/vda bs=512 count=1 iflag=direct 2>/dev/null | tr -dc 'a-z0-9')" != "$1" ]; do
		[ "$(cut -d. -f1 /proc/uptime)" -lt "$_e" ] || return 1
		sleep 0.5
	done
}
# fio_rounds TAG BASE: write and verify (crc32c) 16 MiB rounds until the
# host's order TAG-stop, and at least two, round N at BASE + (N mod 4) *
# 16 MiB; prints the rounds that ran and those that failed.  At least two:
# the host's order may come within the first (the gate's three migrations
# in a row can), and the checks want a round written after another.
v="--direct=1 --ioengine=libaio --bs=4k --iodepth=16 --rw=randwrite --size=16M --verify=crc32c --verify_fatal=1 --output-format=terse --minimal"
# MQ=2: a writer per vCPU, each on its own CPU and so on its own queue,
# each on its half of the round's 16 MiB
if [ "$MQ" = 2 ]; then
	v="$v --size=8M --numjobs=2 --offset_increment=8M --cpus_allowed=0-1 --cpus_allowed_policy=split --group_reporting"
	t_equal mq-queues "$(cat /sys/class/scsi_host/host*/pvscsi/queues | head -1)" 2
fi
# interrupts of each pvscsi_mq vector, summed over the CPUs
irqs() { grep pvscsi_mq /proc/interrupts | awk '{s = 0; for (i = 2; i < NF - 2; i++) if ($i ~ /^[0-9]+$/) s += $i; printf "%s ", s}'; }
fio_rounds() {
	_r=0 _bad=0
	while [ "$_r" -lt 2 ] || ! dd if=/dev/vda bs=512 count=1 iflag=direct 2>/dev/null | grep -q "$1-stop"; do
		_r=$((_r + 1))
		if ! fio --name=m --filename=/dev/sda --do_verify=1 --offset=$(( $2 + (_r % 4) * 16 ))M $v > /tmp/m.log 2>&1; then
			_bad=$((_bad + 1))
			echo "round $_r failed:"
			tail -5 /tmp/m.log
		fi
	done
	echo "$_r $_bad"
}
# Nothing timed out, nothing failed: a command lost across a migration
# would time out (30 s) and be aborted.  The counts are the midlayer's
# (every command dispatched to the driver, every one completed), set
# against the module's requests by the host.
counts() {
	d=/sys/block/sda/device
	echo "iorequest=$(($(cat $d/iorequest_cnt))) iodone=$(($(cat $d/iodone_cnt))) ioerr=$(($(cat $d/ioerr_cnt))) iotmo=$(($(cat $d/iotmo_cnt)))"
}

# verify_written BASE ROUNDS: read back once more what the last rounds
# (up to 4) at BASE left
verify_written() {
	_i=1
	while [ "$_i" -le "$2" ] && [ "$_i" -le 4 ]; do
		fio --name=m --filename=/dev/sda --verify_only=1 \
			--offset=$(( $1 + (_i % 4) * 16 ))M $v > /tmp/v.log 2>&1 ||
			{ echo "verify-only at $(( $1 + (_i % 4) * 16 ))M:"; tail -5 /tmp/v.log; return 1; }
		_i=$((_i + 1))
	done
}

# phase 1: migrations under a verified write load, in the LUN's first
# 64 MiB
c0=$(counts)
echo "after the probe: $c0"
e0=${c0#* ioerr=}
e0=${e0%% *}
n0=$(vps_blk_ios sda)
i0=$(irqs)
fio_rounds p1 0 > /tmp/p1.out 2>&1 &
f=$!
t_check io-started vps_io_started sda "$n0"
echo "VPS-MARK io-running"
wait $f
cat /tmp/p1.out
set -- $(tail -1 /tmp/p1.out)
echo "phase 1: $1 rounds of write+verify, $2 failed"
t_equal rounds-verified "$2" 0
# the data the last rounds left, read back once more after every move
t_check verify-only verify_written 0 "$1"
c=$(counts)
echo "$c"
# (the probe's commands may fail: VPD pages the LUN lacks)
t_match nothing-timed-out "$c" "ioerr=$e0 iotmo=0\$"
# Linux counts a command dispatched and completed: iodone must be
# iorequest, and the host sets iorequest against the module's requests
req=${c#iorequest=}
req=${req%% *}
done_=${c#* iodone=}
done_=${done_%% *}
t_equal all-completed "$done_" "$req"
if [ "$MQ" = 2 ]; then
	# both queues carried the load across the migrations
	i1=$(irqs)
	echo "vector interrupts before phase 1: $i0 after: $i1"
	t_match mq-both-vectors "$(echo $i0 $i1 | awk '{print ($3 > $1) " " ($4 > $2)}')" '^1 1$'
fi
echo "VPS-MARK phase1 $c"
t_check mailbox-go2 mailbox go2

# phase 2: migrations while the guest resets (device, bus, host resets)
# under the same load
fio_rounds p2 64 > /tmp/p2.out 2>&1 &
f=$!
(
	i=0
	while ! dd if=/dev/vda bs=512 count=1 iflag=direct 2>/dev/null | grep -q p2-stop; do
		case $((i % 3)) in 0) fl=-d ;; 1) fl=-b ;; *) fl=-H ;; esac
		sg_reset $fl /dev/sda > /dev/null 2>&1 || echo "sg_reset $fl failed"
		i=$((i + 1))
		sleep 0.3
	done
	echo "$i resets"
) > /tmp/r.out 2>&1 &
r=$!
echo "VPS-MARK resets-running"
wait $f
wait $r
cat /tmp/p2.out /tmp/r.out
set -- $(tail -1 /tmp/p2.out)
echo "phase 2: $1 rounds of write+verify, $2 failed"
t_equal reset-rounds-verified "$2" 0
t_check resets-ran grep -q '^[1-9][0-9]* resets$' /tmp/r.out
t_check resets-succeeded sh -c '! grep -q failed /tmp/r.out'
t_check reset-verify-only verify_written 64 "$1"
if [ "$DRV" = pvscsi_mq ]; then
	# every command came back once: nothing completed twice or unknown
	st=$(ls -d /sys/class/scsi_host/host*/pvscsi | head -1)
	t_equal no-bogus-completions "$(cat $st/bogus_completions)" 0
fi
vps_dmesg_clean dmesg
echo "VPS-MARK done"
