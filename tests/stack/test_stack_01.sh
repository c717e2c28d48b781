#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# gate: 612
# checks: 72
#
# The full stack with the unmodified guest's driver: in-tree vmw_pvscsi
# in a KVM guest on -device vhost-pvscsi, nested in a host VM that loads
# vhost_pvscsi.ko (tests/stack/stack_io.sh says what is checked).  Then
# QEMU's vhostfd= (QEMU uses the descriptor it is given and opens no
# other) and max-targets properties, and its message when the module is
# not loaded.
DRV=vmw_pvscsi EXTRAS=1
. "$(dirname "$0")/stack_io.sh"
