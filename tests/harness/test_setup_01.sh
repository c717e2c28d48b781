#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# gate: 612
# checks: 7
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
# The headers and kbuild packages are unpacked, not installed, so their
# own Depends (the tools a module build runs: gcc-12, pahole) must be in
# set-up's list; a missing one failed the first module build on a new
# machine (pahole, 2026-12-02).
deps() { apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks \
	--no-replaces --no-enhances "$@" 2>/dev/null | awk '/ Depends: [^<]/ {print $2}' | sort -u; }
need=""
for k in 612 61; do
	h="linux-headers-$(vps_krel "$k")"
	# shellcheck disable=SC2046
	need="$need $(deps "$h" $(deps "$h" | grep -E '^linux-(kbuild|headers)-'))"
done
miss=""
# libraries and the packages every Debian system has are not listed
for p in $(echo "$need" | tr ' ' '\n' | grep -vE '^(linux-|lib)' | sort -u); do
	apt-cache show "$p" 2>/dev/null | grep -qE '^(Priority: (required|important)|Section: libs)$' && continue
	echo "$pk" | sed 's|/.*||' | grep -qx "$p" || miss="$miss $p"
done
# (need always holds the loop's spaces: a word in it is a package apt knew)
res kbuild-deps-listed "$([ -n "$(echo $need)" ] && [ -z "$miss" ]; echo $?)" \
	"missing from set-up's list:$miss (needed:$(echo $need | head -c 200))"
snap() { ls -la --time-style=+%s /boot; dpkg-query -W -f='${Package} ${Version} ${Status}\n'; }
before=$(snap)
"$TOP/scripts/setup" > /tmp/vps-setup-warm.$$ 2>&1
rc=$?
res warm-setup-runs "$rc" "$(tail -3 /tmp/vps-setup-warm.$$ | tr '\n' ' ')"
rm -f /tmp/vps-setup-warm.$$
after=$(snap)
res warm-setup-changes-nothing "$([ "$before" = "$after" ]; echo $?)" \
	"$(diff <(echo "$before") <(echo "$after") | head -4 | tr '\n' ' ')"
