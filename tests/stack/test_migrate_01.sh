#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# gate: 612
# checks: 91
# checks-gate: 51
#
# Live migration of a KVM guest with in-tree vmw_pvscsi on -device
# vhost-pvscsi, 10 times in a row (2 in the gate) under a verified write
# load, a migration cancelled midway, and migrations while the guest
# resets (tests/stack/stack_migrate.sh says what is checked).
DRV=vmw_pvscsi
. "$(dirname "$0")/stack_migrate.sh"
