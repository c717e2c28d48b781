#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernels: 612
# checks: 95
#
# Live migration with the multi-queue extension: pvscsi_mq on two vCPUs
# and -device vhost-pvscsi,num-queues=2, a writer per vCPU, 10
# migrations in a row under the verified load, a cancelled one, a LUN
# mismatch and migrations during resets (tests/stack/stack_migrate.sh):
# both queues go on working on every destination (the vhost-pvscsi/queues
# subsection, VPS_RESUME_QUEUE).  check-full only: it adds some four
# minutes.
DRV=pvscsi_mq MQ=2
. "$(dirname "$0")/stack_migrate.sh"
