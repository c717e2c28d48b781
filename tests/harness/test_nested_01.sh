#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# serial: the host VM has two vCPUs (two TCG threads)
#
# Nested mode: a host VM under TCG (-cpu max emulates AMD SVM with nested
# paging) loads kvm_amd and starts an inner guest under real KVM with our
# QEMU.  The inner guest checks that it runs under KVM and reports; its
# verdict must reach this harness through the host VM.
. "$(dirname "$0")/../lib/harness.sh"

work=$(mktemp -d /tmp/vps-nested-XXXXXX)
trap 'rm -rf "$work"' EXIT

# the inner guest: same kernel, its own initramfs
cat > "$work/inner.sh" <<'GUEST'
t_match hypervisor "$(dmesg | grep -m1 'Hypervisor detected')" 'KVM'
t_check echo sh -c 'echo inner guest alive'
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
t_match svm "$(grep -m1 -o svm /proc/cpuinfo)" '^svm$'
vps_inner_run inner /inner/vmlinuz /inner/initramfs.cpio 300
t_match inner-kvm "$(grep -c 'VPS-RESULT ok hypervisor' /tmp/inner.results)" '^1$'
GUEST
