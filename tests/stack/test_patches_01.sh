#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# gate: 612
# checks: 6
#
# The QEMU series, without a VM: its copy of the uAPI header
# (qemu-patches/0001-*) is what scripts/sync-qemu-header makes from
# include/uapi/vhost_pvscsi.h today, every patch has a Signed-off-by, and
# QEMU's own checkpatch runs over every one of them and finds no error.
# And the QEMU the VMs run has patch 0004: in the source it was built
# from, helper_vmrun() (TCG, runs without the BQL) leaves
# interrupt_request to cpu_interrupt() under the BQL; its plain |= lost
# the APIC timer's CPU_INTERRUPT_POLL now and then, and the host VM froze
# in HLT with its timer interrupt in the APIC's IRR (the nested-TCG
# freeze, Documentation/testing.md).  And patch 0005: helper_vmrun's
# INTR injection, delivered in the helper, clears exception_index; left
# at the vector, the cpu loop delivered it a second time into the inner
# guest at an exit request, IF or not (entry_SYSCALL_64 panics, entry
# stack overflows, a migrated vector 0xec exception; Documentation/
# testing.md, "the stale injected interrupt").  And patch 0006: an FPU
# state load (XRSTOR...) on any vCPU cleared IGNNE# in the first CPU's
# hflags2 with a plain read-modify-write from its own thread, racing that
# CPU's VMRUN/#VMEXIT updates of its nested-paging bit: 2-vCPU host VMs
# reset, and nested guests triple-faulted, on CPU 0 (Documentation/
# testing.md, "the first CPU's hflags2").
TOP=$(cd "$(dirname "$0")/../.." && pwd)
res() { if [ "$2" = 0 ]; then echo "VPS-RESULT ok patches/$1"; else echo "VPS-RESULT not ok patches/$1: $3"; fi; }

out=$("$TOP/scripts/sync-qemu-header" --check 2>&1)
res header-copy-current $? "$(echo "$out" | tail -3 | tr '\n' ' ')"

bad=""
# an empty series would sign off nothing
[ -n "$(grep -v '^#' "$TOP/qemu-patches/series")" ] || bad="empty series"
for p in $(grep -v '^#' "$TOP/qemu-patches/series"); do
	[ -f "$TOP/qemu-patches/$p" ] || bad="$bad missing:$p"
	grep -q '^Signed-off-by: ' "$TOP/qemu-patches/$p" || bad="$bad unsigned:$p"
done
res series-signed-off "$([ -z "$bad" ]; echo $?)" "$bad"

# Passed only on proof that checkpatch ran over every patch and found no
# error: qemu-dev check exits 0, and prints one "total: 0 errors, ..."
# summary per patch of the series (checkpatch's own line, printed for
# each file it checked).  Counting ERROR lines alone passed when
# checkpatch was missing or qemu-dev failed before it ran.
out=$("$TOP/scripts/qemu-dev" check 2>&1)
rc=$?
npatch=$(grep -v '^#' "$TOP/qemu-patches/series" | awk 'NF' | wc -l)
nclean=$(echo "$out" | grep -cE '^total: 0 errors, [0-9]+ warnings, [0-9]+ lines checked$')
why=""
[ "$rc" = 0 ] || why="qemu-dev check exited $rc;"
[ "$npatch" -gt 0 ] && [ "$nclean" = "$npatch" ] ||
	why="$why $nclean of $npatch patches checked clean;"
echo "$out" | grep -q '^ERROR' && why="$why $(echo "$out" | grep -A2 '^ERROR' | head -6 | tr '\n' ' ')"
res qemu-checkpatch "$([ -z "$why" ]; echo $?)" "$why $(echo "$out" | grep -vE '^(ERROR|total:)' | tail -3 | tr '\n' ' ')"

# helper_vmrun's body in the source of the QEMU build the VMs use (kept
# beside its binary by scripts/build-qemu)
. "$TOP/scripts/lib.sh"
src=$(cat "$VPS_CACHE/qemu/current" 2>/dev/null)/src
body=$(awk '/^void helper_vmrun\(/ {f = 1} f {print} f && /^}/ {exit}' \
	"$src/target/i386/tcg/system/svm_helper.c" 2>/dev/null)
why=""
[ -n "$body" ] || why="no helper_vmrun in $src (QEMU not built?)"
echo "$body" | grep -q 'interrupt_request *[|&]=' && why="a plain read-modify-write of interrupt_request in helper_vmrun"
echo "$body" | grep -q 'cpu_interrupt(cs, CPU_INTERRUPT_VIRQ)' || why="$why; no cpu_interrupt(VIRQ) there"
res vmrun-virq-under-bql "$([ -z "$why" ]; echo $?)" "$why"

# the INTR case of the EVENTINJ switch: from its label to its break
intr=$(echo "$body" | awk '/case SVM_EVTINJ_TYPE_INTR:/ {f = 1} f {print} f && /break;/ {exit}')
why=""
[ -n "$intr" ] || why="no INTR case in helper_vmrun of $src"
echo "$intr" | grep -q 'do_interrupt_x86_hardirq' || why="$why; the INTR case does not deliver the interrupt itself"
echo "$intr" | awk '/do_interrupt_x86_hardirq/ {d = 1} d && /cs->exception_index = -1;/ {ok = 1} END {exit !ok}' ||
	why="$why; exception_index is not cleared after the INTR case's delivery (patch 0005 missing)"
res vmrun-intr-clears-exception "$([ -z "$why" ]; echo $?)" "$why"

# cpu_clear_ignne() clears the caller's own flag; nothing outside the first
# CPU's thread read-modify-writes its hflags2
fpu=$(cat "$src/target/i386/tcg/system/fpu_helper.c" 2>/dev/null)
clear=$(echo "$fpu" | awk '/^void cpu_clear_ignne\(/ {f = 1} f {print} f && /^}/ {exit}')
setf=$(echo "$fpu" | awk '/^void cpu_set_ignne\(/ {f = 1} f {print} f && /^}/ {exit}')
why=""
[ -n "$clear" ] || why="no cpu_clear_ignne in $src (QEMU not built?)"
echo "$clear" | grep -q 'first_cpu' && why="$why; cpu_clear_ignne writes the first CPU's hflags2 (patch 0006 missing)"
echo "$clear" | grep -q '^void cpu_clear_ignne(CPUX86State \*env)' || why="$why; cpu_clear_ignne does not take the caller's env"
grep -q 'cpu_clear_ignne(env);' "$src/target/i386/tcg/fpu_helper.c" 2>/dev/null ||
	why="$why; cpu_set_fpus does not pass its own env"
echo "$setf" | grep -q 'async_run_on_cpu(first_cpu' || why="$why; cpu_set_ignne writes the first CPU's flags from another vCPU's thread"
res first-cpu-hflags2-own-thread "$([ -z "$why" ]; echo $?)" "$why"
