#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# gate: 612
# checks: 11
#
# Nested mode: a host VM under TCG (-cpu max emulates AMD SVM with nested
# paging) loads kvm_amd and starts an inner guest under real KVM with our
# QEMU.  The inner guest checks that it runs under KVM and reports; its
# verdict must reach this harness through the host VM.  Its output and
# results must go through its virtio consoles (hvc0, hvc1: no 8250 that
# waits for an interrupt), and its RAM must be in 2 MiB pages (guest.sh's
# vps_inner_start says why).  The host VM has one vCPU, as every nested
# host VM (harness.sh's vm_nested_host says why).
. "$(dirname "$0")/../../scripts/vm/harness.sh"

work=$(mktemp -d /tmp/vps-nested-XXXXXX)
trap 'rm -rf "$work"' EXIT

# the inner guest: same kernel, its own initramfs
cat > "$work/inner.sh" <<'GUEST'
t_match hypervisor "$(dmesg | grep -m1 'Hypervisor detected')" 'KVM'
# a line on its console, which the host VM's inner-console looks for
echo inner guest alive
t_equal console-hvc0 "$(readlink /proc/$$/fd/1)" /dev/hvc0
t_equal results-hvc1 "$(readlink /proc/$$/fd/3)" /dev/hvc1
GUEST
vm_initramfs "$work/inner.cpio" "$work/inner.sh"
kernel=$(vm_kernel_image)

vm_reset
vm_nested_host
vm_file "$kernel" /inner/vmlinuz
vm_file "$work/inner.cpio" /inner/initramfs.cpio
VM_TIMEOUT=600
vm_run nested <<'GUEST'
t_check kvm-device test -c /dev/kvm
t_equal host-vm-one-vcpu "$(nproc)" 1
t_match svm "$(grep -m1 -o svm /proc/cpuinfo)" '^svm$'
vps_inner_start inner /inner/vmlinuz /inner/initramfs.cpio 300
# its 512 MiB of RAM in 2 MiB pages (in use or reserved)
t_check inner-ram-2m test "$(awk '/^HugePages_(Total|Rsvd):/ {n += $2} /^HugePages_Free:/ {n -= $2} END {print n}' /proc/meminfo)" -ge 256
vps_inner_wait inner
t_match inner-kvm "$(grep -c 'VPS-RESULT ok hypervisor' /tmp/inner.results)" '^1$'
t_match inner-console "$(tr -d '\r' < /tmp/inner.console | grep -cx 'inner guest alive')" '^1$'
GUEST
