# SPDX-License-Identifier: GPL-2.0
# Shared shell definitions for scripts/ and tests/: where the caches live and
# which Debian kernels and QEMU source we build against.  Sourced, never run.

# shellcheck shell=bash

VPS_TOP=${VPS_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
# Expensive artifacts live outside the repository so that a fresh clone on a
# warm machine reuses them; every entry below is keyed by its inputs.
VPS_CACHE=${VPS_CACHE:-/var/cache/vhost-pvscsi}

# Debian kernels: 6.12 from bookworm-backports (primary) and bookworm's 6.1.
# The ABI names are resolved once by scripts/setup and recorded in the cache
# so that test runs never need apt.
VPS_K612_SUITE=bookworm-backports
VPS_QEMU_SRC_VERSION=${VPS_QEMU_SRC_VERSION:-1:10.0.13+ds-0+deb13u1}
# fio for the test VMs (scripts/build-fio): bookworm's version, from deb-src
VPS_FIO_SRC_VERSION=${VPS_FIO_SRC_VERSION:-3.33-3}

vps_log() { printf '[%s] %s\n' "${0##*/}" "$*" >&2; }
vps_die() { printf '[%s] error: %s\n' "${0##*/}" "$*" >&2; exit 1; }

# vps_result NAME STATUS DETAIL: a check of a test that runs on this
# machine (no VM), in tests/run's format: passed if STATUS is 0, else
# failed with DETAIL
vps_result() {
	if [ "$2" = 0 ]; then echo "VPS-RESULT ok $1"; else echo "VPS-RESULT not ok $1: $3"; fi
}

# kernel release for a short name (612 / 61), from the record setup wrote
vps_krel() {
	local f="$VPS_CACHE/kernels/$1.release"
	[ -r "$f" ] || vps_die "kernel $1 not fetched; run scripts/setup"
	cat "$f"
}

# directory holding the unpacked image package (boot/ and lib/modules/)
vps_kroot() { echo "$VPS_CACHE/kernels/$(vps_krel "$1")"; }

# headers and kbuild, unpacked into the cache by scripts/setup (installing
# Debian's 6.12 headers package would pull the kernel image into /boot)
vps_kdir() { echo "$VPS_CACHE/kernels/$(vps_krel "$1")-headers/usr/src/linux-headers-$(vps_krel "$1")"; }

# The QEMU we built (patched); the path is written by scripts/build-qemu.
vps_qemu() {
	local f="$VPS_CACHE/qemu/current"
	# a QEMU under development (scripts/qemu-dev) can stand in for the cache
	[ -n "${VPS_QEMU_BIN:-}" ] && { echo "$VPS_QEMU_BIN"; return; }
	[ -r "$f" ] || vps_die "QEMU not built; run scripts/setup"
	echo "$(cat "$f")/bin/qemu-system-x86_64"
}

vps_qemu_img() { echo "$(dirname "$(vps_qemu)")/qemu-img"; }

# firmware dirs: Debian's packages, since the +ds source ships no blobs
VPS_QEMU_FW="-L /usr/share/seabios -L /usr/share/qemu -L /usr/lib/ipxe/qemu"
