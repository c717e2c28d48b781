# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=sh
# Inner-guest half of tests/stack/stack_timeout.sh (test_timeout_01, _02): a KVM guest whose
# PVSCSI adapter is -device vhost-pvscsi over a device-mapper LUN that the
# host VM suspends while this guest writes.  DRV (vmw_pvscsi or pvscsi_mq)
# and SZ (MiB) and RATE (IOPS) of the paused fio are prepended by the test.
if [ "$DRV" = pvscsi_mq ]; then
	t_check load-pvscsi_mq vps_load pvscsi_mq
fi
vps_wait 30 test -b /dev/sda
t_equal driver "$(cat /sys/class/scsi_host/host*/proc_name | sort -u | tr '\n' ' ')" "$DRV "
# 2 s: a command held by the suspended LUN times out well inside the pause
echo 2 > /sys/block/sda/device/timeout
v="--direct=1 --ioengine=libaio --bs=4k --iodepth=8 --rw=randwrite --size=${SZ}M --verify=crc32c --verify_fatal=1 --output-format=terse --minimal"
# rate-limited so that the write phase (about 8 s) spans the moment the
# host suspends the LUN, whatever the speed of this nested guest
n0=$(vps_blk_ios sda)
fio --name=t --filename=/dev/sda --do_verify=1 --rate_iops=$RATE $v > /tmp/t.log 2>&1 &
f=$!
# the host suspends the LUN on the mark: its I/O must be flowing by then
t_check fio-io-started vps_io_started sda "$n0"
t_check fio-running kill -0 $f
echo "VPS-MARK io-running"
wait $f
rc=$?
tail -3 /tmp/t.log
# how often the midlayer saw a command time out (0: the timer never fired)
echo "sda: iotmo_cnt $(cat /sys/block/sda/device/iotmo_cnt) ioerr_cnt $(cat /sys/block/sda/device/ioerr_cnt)"
# the pause outlived the 2 s timeout: at least one command timed out
# (iotmo_cnt reads "0x%llx"; $((...)) takes the hex)
tmo=$(cat /sys/block/sda/device/iotmo_cnt)
case "$tmo" in 0x[0-9a-f]*) tmo=$((tmo)) ;; esac
t_check command-timed-out test "$tmo" -ge 1
t_equal fio-verify-across-timeouts "$rc" 0
t_check fio-verify-only fio --name=t --filename=/dev/sda --verify_only=1 $v
dmesg | grep -iE 'abort|reset|timing out|timed out' | head -20
# the midlayer's error handler ran the driver's abort handler, known by
# what that handler logs (not any "abort" in the log): vmw_pvscsi's
# pvscsi_abort "task abort on host %u, %p" (scmd_printk, KERN_DEBUG:
# in dmesg all the same), pvscsi_mq's pvscsi_eh_abort "abort tag %u op %#x"
case "$DRV" in
vmw_pvscsi) eh='task abort on host [0-9]+, ' ;;
pvscsi_mq) eh='abort tag [0-9]+ op (0x[0-9a-f]+|0)' ;;
*) eh="^no abort message known for DRV=$DRV\$" ;;
esac
t_match guest-error-handler "$(dmesg)" "$eh"
if [ "$DRV" = pvscsi_mq ]; then
	st=$(ls -d /sys/class/scsi_host/host*/pvscsi | head -1)
	echo "aborts=$(cat $st/aborts) failed=$(cat $st/aborts_failed) device_resets=$(cat $st/device_resets) bus_resets=$(cat $st/bus_resets) host_resets=$(cat $st/host_resets)"
	t_check aborts-counted test "$(cat $st/aborts)" -ge 1
	# every command came back once: nothing completed twice or unknown
	t_equal no-bogus-completions "$(cat $st/bogus_completions)" 0
fi
t_check after-pause-io fio --name=a --filename=/dev/sda --do_verify=1 $v --size=$((SZ / 4))M --offset=32M --iodepth=32
vps_dmesg_clean dmesg

# fio that never ends: the host VM suspends the LUN and kills this QEMU
# with commands held in the suspended device.  The default timeout again:
# this phase is about the kill, and the error handler's aborts and resets
# racing it (the debug-kernel host VM is slow) would only blur it.
echo 30 > /sys/block/sda/device/timeout
echo "VPS-MARK io-forever"
n0=$(vps_blk_ios sda)
fio --name=k --filename=/dev/sda --rw=randrw --iodepth=16 --size=32M \
	--time_based --runtime=600 --direct=1 --ioengine=libaio --bs=16k > /dev/null 2>&1 &
vps_io_started sda "$n0"
echo "VPS-MARK io-running-at-kill"
sleep 600
