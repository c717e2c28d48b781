# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=sh
# Inner-guest half of tests/stack/test_timeout_01.sh: a KVM guest whose
# PVSCSI adapter is -device vhost-pvscsi over a device-mapper LUN that the
# host VM suspends while this guest writes.  DRV (vmw_pvscsi or pvscsi_mq)
# is prepended by the test.
if [ "$DRV" = pvscsi_mq ]; then
	t_check load-pvscsi_mq vps_load pvscsi_mq
fi
vps_wait 30 test -b /dev/sda
t_equal driver "$(cat /sys/class/scsi_host/host*/proc_name | sort -u | tr '\n' ' ')" "$DRV "
# 2 s: a command held by the suspended LUN times out well inside the pause
echo 2 > /sys/block/sda/device/timeout
v="--direct=1 --ioengine=libaio --bs=4k --iodepth=8 --rw=randwrite --size=16M --verify=crc32c --verify_fatal=1 --output-format=terse --minimal"
# rate-limited so that the write phase (about 8 s) spans the moment the
# host suspends the LUN, whatever the speed of this nested guest
fio --name=t --filename=/dev/sda --do_verify=1 --rate_iops=500 $v > /tmp/t.log 2>&1 &
f=$!
sleep 2
t_check fio-running kill -0 $f
echo "VPS-MARK io-running"
wait $f
rc=$?
tail -3 /tmp/t.log
t_equal fio-verify-across-timeouts "$rc" 0
t_check fio-verify-only fio --name=t --filename=/dev/sda --verify_only=1 $v
dmesg | grep -iE 'abort|reset|timing out|timed out' | head -20
# the midlayer's error handler ran: the pause outlived the timeout
t_match guest-error-handler "$(dmesg)" '[Aa]bort'
if [ "$DRV" = pvscsi_mq ]; then
	st=$(ls -d /sys/class/scsi_host/host*/pvscsi | head -1)
	echo "aborts=$(cat $st/aborts) failed=$(cat $st/aborts_failed) device_resets=$(cat $st/device_resets) bus_resets=$(cat $st/bus_resets) host_resets=$(cat $st/host_resets)"
	t_check aborts-counted test "$(cat $st/aborts)" -ge 1
	# every command came back once: nothing completed twice or unknown
	t_equal no-bogus-completions "$(cat $st/bogus_completions)" 0
fi
t_check after-pause-io fio --name=a --filename=/dev/sda --do_verify=1 $v --size=4M --offset=32M --iodepth=32
vps_dmesg_clean dmesg

# fio that never ends: the host VM suspends the LUN and kills this QEMU
# with commands held in the suspended device
echo "VPS-MARK io-forever"
fio --name=k --filename=/dev/sda --rw=randrw --iodepth=16 --size=32M \
	--time_based --runtime=600 --direct=1 --ioengine=libaio --bs=16k > /dev/null 2>&1 &
sleep 2
echo "VPS-MARK io-running-at-kill"
sleep 600
