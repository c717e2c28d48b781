// SPDX-License-Identifier: GPL-2.0
/*
 * Harness self-test module: it misbehaves on request so that
 * tests/harness/test_negative_01.sh can prove that the VM harness reports
 * a kernel WARNING as a failed test, and tests/debug/test_negative_01.sh
 * that a leak is caught by kmemleak.  Loaded only by those tests.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/bug.h>
#include <linux/slab.h>

static bool warn;
module_param(warn, bool, 0444);
MODULE_PARM_DESC(warn, "emit a WARNING at load (harness self-test)");

static bool leak;
module_param(leak, bool, 0444);
MODULE_PARM_DESC(leak, "leak an allocation at load (kmemleak self-test)");

/* the only reference to the leaked object, dropped right away */
static void *vps_selftest_obj;

static int __init vps_selftest_init(void)
{
	pr_info("loaded (warn=%d)\n", warn);
	WARN(warn, "vps_selftest: deliberate warning requested by the test\n");
	if (leak) {
		vps_selftest_obj = kmalloc(200, GFP_KERNEL);
		WRITE_ONCE(vps_selftest_obj, NULL);
	}
	return 0;
}

static void __exit vps_selftest_exit(void)
{
	pr_info("unloaded\n");
}

module_init(vps_selftest_init);
module_exit(vps_selftest_exit);
MODULE_DESCRIPTION("vhost-pvscsi VM harness self-test module");
MODULE_LICENSE("GPL");
