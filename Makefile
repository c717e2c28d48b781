# SPDX-License-Identifier: GPL-2.0
#
# vhost-pvscsi top-level Makefile.
#
#   make                 build every module against KDIR (default: Debian 6.12)
#   make KDIR=<dir>      the same sources against other headers (e.g. 6.1)
#   make static          sparse (C=2) on both kernels + checkpatch --strict
#   make modules-debug   build against the debug kernel (scripts/build-debug-kernel)
#   make check           the gate (CI): set-up, builds, every suite on 6.12,
#                        a 6.1 smoke, the nested stack, fixed fuzz seeds,
#                        static checks; stops itself inside VPS_CHECK_BUDGET
#   make check-full [SUITE=x] [KERNEL=612|61|debug]
#                        everything: all suites on 6.12, 6.1 and the debug
#                        kernel, fresh fuzz seeds, the benchmark gate
#   make demo            the end-to-end demo
#
# W=1 is always on: the modules must build free of its warnings.

VPS_CACHE ?= /var/cache/vhost-pvscsi
TOP := $(CURDIR)
release = $(shell cat $(VPS_CACHE)/kernels/$(1).release 2>/dev/null)
K612 := $(call release,612)
K61 := $(call release,61)
# the headers scripts/setup unpacked into the cache (never /usr/src: the
# 6.12 headers package would install its kernel image into /boot)
khdr = $(VPS_CACHE)/kernels/$(1)-headers/usr/src/linux-headers-$(1)
KDIR ?= $(call khdr,$(K612))
KDIR61 := $(call khdr,$(K61))
KDIRDBG = $(VPS_CACHE)/kernels/$(call release,debug)/build
CHECKPATCH ?= $(VPS_CACHE)/checkpatch/scripts/checkpatch.pl

# our C sources: kernel code, and userspace test programs (kernel style
# too, but with the C library's fixed-width types, as in the kernel's tools/)
CSRC_ALL = $(shell find include guest-driver vhost-host sriov-helper tests \
	-name '*.[ch]' ! -name '*.mod.c' ! -path '*/logs/*' 2>/dev/null | sort)
USRC = $(filter tests/%,$(filter-out tests/harness/kmod/%,$(CSRC_ALL)))
KSRC = $(filter-out $(USRC),$(CSRC_ALL))

.PHONY: all modules modules-61 modules-debug tools static $(STATIC_STEPS) check check-full demo clean setup help \
	dkms-src dkms-install

VERSION := $(shell cat $(TOP)/VERSION)
DKMS_SRC := /usr/src/vhost-pvscsi-$(VERSION)

all: modules tools

modules:
	$(MAKE) -C $(KDIR) M=$(TOP) W=1 modules

# the same sources against Debian's 6.1 headers, in a separate output tree
modules-61:
	rm -rf $(TOP)/.build-61 && mkdir -p $(TOP)/.build-61
	rsync -a --exclude=logs --exclude='*.o' --exclude='*.ko' --exclude='.*.cmd' \
		Kbuild include guest-driver vhost-host sriov-helper tests $(TOP)/.build-61/ 2>/dev/null; \
		[ -f $(TOP)/.build-61/Kbuild ]
	$(MAKE) -C $(KDIR61) M=$(TOP)/.build-61 W=1 modules

# the same against the debug kernel's build tree (tests/debug)
modules-debug:
	rm -rf $(TOP)/.build-debug && mkdir -p $(TOP)/.build-debug
	rsync -a --exclude=logs --exclude='*.o' --exclude='*.ko' --exclude='.*.cmd' \
		Kbuild include guest-driver vhost-host sriov-helper tests $(TOP)/.build-debug/ 2>/dev/null; \
		[ -f $(TOP)/.build-debug/Kbuild ]
	$(MAKE) -C $(KDIRDBG) M=$(TOP)/.build-debug W=1 modules

tools:
	@[ ! -f tests/Makefile ] || $(MAKE) -C tests

# make static, one step a target: tests/static runs each on a copy of the
# tree and reports it as a check of its own
STATIC_STEPS := static-sparse-612 static-sparse-61 static-checkpatch-kernel static-checkpatch-user
static: $(STATIC_STEPS)

static-sparse-612:
	$(MAKE) -C $(KDIR) M=$(TOP) W=1 C=2 modules

static-sparse-61: modules-61
	$(MAKE) -C $(KDIR61) M=$(TOP)/.build-61 W=1 C=2 modules

# --no-tree: checkpatch cannot see that kernel names (struct Scsi_Host)
# are not ours, so its CamelCase check is off; the rest is --strict
static-checkpatch-kernel:
	$(CHECKPATCH) --strict --no-tree --show-types --terse --ignore CAMELCASE -f $(KSRC)

static-checkpatch-user:
	$(CHECKPATCH) --strict --no-tree --show-types --terse \
		--ignore PREFER_KERNEL_TYPES,SPDX_LICENSE_TAG -f $(USRC)

setup:
	scripts/setup

# The gate's clock starts when make does: tests/run stops starting tests
# when VPS_CHECK_BUDGET seconds (default 80 min; CI kills at 90) have gone
# since, kills what runs, and still prints its summary line and fails.
CHECK_T0 := $(shell date +%s)
VPS_CHECK_BUDGET ?= 4800

# stack/test_boot_01's UEFI boots need an OVMF with PvScsiDxe (built once;
# cached), which the demo does not
check: setup
	scripts/build-ovmf
	$(MAKE) all modules-61
	tests/run --tier gate --deadline $$(( $(CHECK_T0) + $(VPS_CHECK_BUDGET) )) $(SUITE)

# the debug kernel is built (once; cached) unless only 612 or 61 is asked for
check-full: setup
	scripts/build-ovmf
	$(if $(filter-out debug,$(KERNEL)),,scripts/build-debug-kernel)
	$(MAKE) all modules-61 $(if $(filter-out debug,$(KERNEL)),,modules-debug)
	tests/run --tier full $(if $(KERNEL),--kernel $(KERNEL)) $(SUITE)

demo: setup
	scripts/demo

clean:
	$(MAKE) -C $(KDIR) M=$(TOP) clean
	rm -rf $(TOP)/.build-61 $(TOP)/.build-debug tests/logs
	[ ! -f tests/Makefile ] || $(MAKE) -C tests clean

# the module sources as DKMS wants them (no tests, dkms.conf versioned)
dkms-src:
	rm -rf $(DKMS_SRC) && mkdir -p $(DKMS_SRC)
	cp -a Kbuild include guest-driver vhost-host sriov-helper $(DKMS_SRC)/
	find $(DKMS_SRC) \( -name '*.o' -o -name '*.ko' -o -name '*.mod*' -o -name '.*.cmd' \
		-o -name '*.order' -o -name Module.symvers \) -delete
	sed 's/@VERSION@/$(VERSION)/' dkms.conf > $(DKMS_SRC)/dkms.conf

dkms-install: dkms-src
	dkms add vhost-pvscsi/$(VERSION) || true
	dkms build vhost-pvscsi/$(VERSION)
	dkms install vhost-pvscsi/$(VERSION)

help:
	@sed -n '3,18p' Makefile | sed 's/^# \{0,1\}//'
