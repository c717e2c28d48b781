#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612 debug
# gate: 612
# checks: 28
# checks-debug: 24
#
# Guest timeouts (the SCSI error handler's aborts and resets) against the
# host module, with the unmodified guest's driver, in-tree vmw_pvscsi; on
# the debug kernel too (KASAN, lockdep, kmemleak in the host VM).
# tests/stack/stack_timeout.sh says what is checked.
DRV=vmw_pvscsi
. "$(dirname "$0")/stack_timeout.sh"
