#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# gate: 612
# checks: 28
#
# Guest timeouts (the SCSI error handler's aborts and resets) against the
# host module, with our guest driver, pvscsi_mq.  tests/stack/stack_timeout.sh
# says what is checked.
DRV=pvscsi_mq
. "$(dirname "$0")/stack_timeout.sh"
