#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# gate: 612
# checks: 9
#
# Checks that cannot fail, looked for in the test scripts, without a VM.
# (a) No test script (tests/**/*.sh, the inner guests' included, and the
# shell scripts of scripts/) carries one of the patterns that made checks
# pass whatever happened: a command substitution in vps_wait's arguments
# (it expands once, before vps_wait runs: the wait re-tests a fixed
# string); checkpatch's output judged by counting its ERROR lines (no
# checkpatch, no ERROR line); a debugfs read whose failure reads as 0
# ("2>/dev/null || echo 0": the file went with its module).  Each pattern
# is one check, naming the offending file:line.  (b) The scanner can fail:
# planted snippets of each pattern are flagged, and a snippet of their
# right forms is not.  (c) vps_wait itself, from scripts/vm/guest.sh (in
# busybox sh when there is one, as in a guest): waiting on a LUN that is
# not there fails within its time, and it runs its command anew each
# poll (a predicate that turns true half a second in).
TOP=$(cd "$(dirname "$0")/../.." && pwd)
w=$(mktemp -d /tmp/vps-lint-XXXXXX)
trap 'rm -rf "$w"' EXIT
. "$TOP/scripts/lib.sh"
res() { vps_result "lint/$1" "$2" "$3"; }

# lint_scan FILE...: one line per hit, "ID FILE:LINE: text", ID one of
#   wait-subst        $( or ` in vps_wait's arguments (outside single
#                     quotes: sh -c '...$(...)...' runs anew each poll)
#   checkpatch-count  grep -c (--count) of ERROR lines
#   debugfs-fallback  "2>/dev/null || echo 0" on a line that reads
#                     debugfs: a path under /sys/kernel/debug or
#                     $VPS_DEBUGFS, a variable set to one, or a function
#                     of the same file whose one-line body reads one
# Comment lines are skipped.
lint_scan() {
	local f
	for f in "$@"; do
		awk -v q="'" -v file="$f" '
		function strip_sq(s,  re) { re = q "[^" q "]*" q; gsub(re, "", s); return s }
		function word_re(n) { return "(^|[^A-Za-z0-9_])" n "([^A-Za-z0-9_]|$)" }
		BEGIN { dbg = "/sys/kernel/debug|VPS_DEBUGFS|debugfs"; nf = nv = 0 }
		# first pass: the functions and variables that stand for debugfs
		NR == FNR {
			if ($0 ~ /^[[:space:]]*#/ || $0 !~ dbg) next
			if ($0 ~ /^[[:space:]]*[A-Za-z_][A-Za-z0-9_]*[[:space:]]*\(\)/) {
				n = $0; sub(/^[[:space:]]*/, "", n); sub(/[[:space:]]*\(\).*/, "", n)
				fn[++nf] = n
			} else if ($0 ~ /^[[:space:]]*(local[[:space:]]+)?[A-Za-z_][A-Za-z0-9_]*=/) {
				n = $0; sub(/^[[:space:]]*(local[[:space:]]+)?/, "", n); sub(/=.*/, "", n)
				va[++nv] = n
			}
			next
		}
		/^[[:space:]]*#/ { next }
		{
			where = file ":" FNR ": " $0
			if (strip_sq($0) ~ /(^|[^A-Za-z0-9_])vps_wait[[:space:]]+[0-9]+[[:space:]][^;&|]*(\$\(|`)/)
				print "wait-subst " where
			if ($0 ~ /grep([[:space:]]+[^|;[:space:]]+)*[[:space:]]+(-[A-Za-z]*c[A-Za-z]*|--count)[[:space:]][^|;]*ERROR/)
				print "checkpatch-count " where
			if ($0 ~ /2>[[:space:]]*\/dev\/null[[:space:]]*\|\|[[:space:]]*echo[[:space:]]+"?0"?([^0-9.]|$)/) {
				hit = ($0 ~ dbg)
				for (i = 1; !hit && i <= nf; i++) if ($0 ~ word_re(fn[i])) hit = 1
				for (i = 1; !hit && i <= nv; i++) if ($0 ~ ("\\$\\{?" va[i] "([^A-Za-z0-9_]|$)")) hit = 1
				if (hit) print "debugfs-fallback " where
			}
		}' "$f" "$f"
	done
}
IDS="wait-subst checkpatch-count debugfs-fallback"

# --- (a) the tree ---------------------------------------------------------
mapfile -t files < <(cd "$TOP" && { find tests -name '*.sh'; grep -lE '^#!/bin/(ba)?sh' scripts/* 2>/dev/null; } | sort -u)
echo "# scanning ${#files[@]} files"
(cd "$TOP" && lint_scan "${files[@]}") > "$w/tree.hits"
sed 's/^/# hit: /' "$w/tree.hits"
for id in $IDS; do
	hits=$(grep "^$id " "$w/tree.hits" | cut -d' ' -f2 | cut -d: -f1,2 | tr '\n' ' ')
	if [ "${#files[@]}" -lt 20 ]; then
		res "no-$id" 1 "only ${#files[@]} files found to scan under $TOP"
	else
		res "no-$id" "$([ -z "$hits" ]; echo $?)" "$hits"
	fi
done

# --- (b) the scanner on planted snippets ----------------------------------
# Written with stand-ins (@( for $(, ERR@R, 2>@null, /sys/kernel/@debug)
# so that this file does not hold the patterns it looks for.
unplant() { sed -e 's/@(/$(/g' -e 's/ERR@R/ERROR/g' -e 's#2>@null#2>/dev/null#g' -e 's#/sys/kernel/@debug#/sys/kernel/debug#g'; }
unplant > "$w/bad-wait-subst.sh" <<'EOF'
t_check disks vps_wait 20 test -n "@(vps_sd_dev "$hn:0:1:0")"
vps_wait 20 test -n "@(vps_scsi_disks pvscsi_mq)"
EOF
unplant > "$w/bad-checkpatch-count.sh" <<'EOF'
errs=@(echo "$out" | grep -c '^ERR@R')
n=@(grep -cE "^ERR@R" "$log")
EOF
unplant > "$w/bad-debugfs-fallback.sh" <<'EOF'
live() { cat /sys/kernel/@debug/pvscsi_mq/live_dma_allocs; }
t_equal cycle-no-dma-left "@(live 2>@null || echo 0)" 0
g=/sys/kernel/@debug/vhost_pvscsi/gauges
t_equal x "@(awk '/^luns/ {print $2}' $g 2>@null || echo 0)" 0
t_equal y "@(cat $VPS_DEBUGFS/gauges 2>@null || echo "0")" 0
EOF
unplant > "$w/good.sh" <<'EOF'
# vps_wait 20 test -n "@(vps_sd_dev x)" said in a comment
t_check disks vps_wait 20 vps_has_sd "$hn:0:0:0" "$hn:0:1:0"
vps_wait 20 sh -c 'test -n "@(ls /sys/class/scsi_host)"'
n0=@(vps_blk_ios sda); vps_wait 5 true
nclean=@(echo "$out" | grep -cE '^total: 0 errors, [0-9]+ warnings')
echo "$out" | grep -q '^ERR@R' && why="errors"
live() { cat /sys/kernel/@debug/pvscsi_mq/live_dma_allocs; }
t_equal cycle-no-dma-left "@(live 2>&1)" 0
t=@(cat "$log.time" 2>@null || echo 0)
EOF
for id in $IDS; do
	# every line of the snippet that is not a definition must be flagged
	want=$(grep -vcE '^[a-z]+(\(\) \{|=/)' "$w/bad-$id.sh")
	got=$(lint_scan "$w/bad-$id.sh" | grep -c "^$id ")
	others=$(lint_scan "$w/bad-$id.sh" | grep -vc "^$id ")
	res "catches-$id" "$([ "$got" = "$want" ] && [ "$want" -gt 0 ] && [ "$others" = 0 ]; echo $?)" \
		"$got of $want planted lines flagged, $others flagged as something else: $(lint_scan "$w/bad-$id.sh" | tr '\n' ' ')"
done
good=$(lint_scan "$w/good.sh")
res good-snippet-clean "$([ -z "$good" ]; echo $?)" "$(echo "$good" | tr '\n' ' ')"

# --- (c) vps_wait and its predicates, as the guest runs them --------------
sh=sh
command -v busybox >/dev/null && sh="busybox sh"
guest() { # script: run with guest.sh sourced, results (fd 3) to $w/fd3
	VPS_LIB=$TOP/scripts/vm $sh -c ". '$TOP/scripts/vm/guest.sh'; $1" 3>> "$w/fd3"
}
t0=$EPOCHREALTIME
# (exit 7: guest.sh did not give vps_has_sd; only vps_wait's own 1 is a pass)
guest 'command -v vps_has_sd >/dev/null || exit 7; vps_wait 1 vps_has_sd 99:0:99:0'
rc=$?
ms=$(( (${EPOCHREALTIME//[.,]/} - ${t0//[.,]/}) / 1000 ))
res wait-has-sd-fails-fast "$([ "$rc" = 1 ] && [ "$ms" -lt 3000 ]; echo $?)" \
	"vps_wait 1 vps_has_sd on no such LUN: exit $rc after $ms ms ($sh)"
t0=$EPOCHREALTIME
guest "there() { [ -e '$w/f' ]; }; there && exit 9; (sleep 0.5; touch '$w/f') & vps_wait 5 there"
rc=$?
ms=$(( (${EPOCHREALTIME//[.,]/} - ${t0//[.,]/}) / 1000 ))
res wait-re-evaluates "$([ "$rc" = 0 ] && [ "$ms" -ge 400 ]; echo $?)" \
	"vps_wait 5 on a file made after 0.5 s: exit $rc after $ms ms ($sh)"
[ -s "$w/fd3" ] && sed 's/^/# fd3: /' "$w/fd3"
exit 0
