#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# gate: 612
# checks: 6
#
# scripts/setup changes nothing outside its cache but the packages the
# build needs: no package it installs pulls a kernel image in (Debian's
# 6.12 headers package depends on its image, which lands in /boot and
# becomes the next boot's default; the headers are unpacked into the
# cache instead), the closure check does see an image where there is one
# (the headers package itself), the module builds find both kernels'
# headers and kbuild tools in the cache, and a warm set-up leaves /boot
# and the installed package list exactly as they were.  Runs on the
# build machine, no VM.
TOP=$(cd "$(dirname "$0")/../.." && pwd)
. "$TOP/scripts/lib.sh"
res() { if [ "$2" = 0 ]; then echo "VPS-RESULT ok setup/$1"; else echo "VPS-RESULT not ok setup/$1: $3"; fi; }
closure() { # packages -> the kernel images in their Depends closure
	apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
		--no-breaks --no-replaces --no-enhances "$@" 2>/dev/null |
		grep -oE 'linux-image-[^ ]*' | sort -u
}
pk=$("$TOP/scripts/setup" --print-packages 2>/dev/null)
res package-list "$([ "$(echo "$pk" | grep -c .)" -gt 10 ]; echo $?)" "setup --print-packages: $(echo "$pk" | head -3 | tr '\n' ' ')"
# shellcheck disable=SC2046
img=$(closure $(echo "$pk" | sed 's|/.*||'))
res no-kernel-image "$([ -z "$img" ]; echo $?)" "the packages pull in: $(echo "$img" | tr '\n' ' ')"
img=$(closure "linux-headers-$(vps_krel 612)")
res closure-sees-images "$([ -n "$img" ]; echo $?)" "no image in the closure of linux-headers-$(vps_krel 612): the check is blind"
bad=""
for k in 612 61; do
	d=$(vps_kdir "$k")
	case "$d" in "$VPS_CACHE"/*) ;; *) bad="$bad $k:not-in-cache:$d" ;; esac
	[ -f "$d/Makefile" ] && [ -x "$d/scripts/mod/modpost" ] || bad="$bad $k:incomplete:$d"
done
res headers-in-cache "$([ -z "$bad" ]; echo $?)" "$bad"
snap() { ls -la --time-style=+%s /boot; dpkg-query -W -f='${Package} ${Version} ${Status}\n'; }
before=$(snap)
"$TOP/scripts/setup" > /tmp/vps-setup-warm.$$ 2>&1
rc=$?
res warm-setup-runs "$rc" "$(tail -3 /tmp/vps-setup-warm.$$ | tr '\n' ' ')"
rm -f /tmp/vps-setup-warm.$$
after=$(snap)
res warm-setup-changes-nothing "$([ "$before" = "$after" ]; echo $?)" \
	"$(diff <(echo "$before") <(echo "$after") | head -4 | tr '\n' ' ')"
