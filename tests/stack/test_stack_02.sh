#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# gate: 612
# checks: 69
#
# The full stack with our guest driver: pvscsi_mq in a KVM guest on
# -device vhost-pvscsi, nested in a host VM that loads vhost_pvscsi.ko
# (tests/stack/stack_io.sh says what is checked).
DRV=pvscsi_mq EXTRAS=0
. "$(dirname "$0")/stack_io.sh"
