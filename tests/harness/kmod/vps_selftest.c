// SPDX-License-Identifier: GPL-2.0
/*
 * Harness self-test module: it misbehaves on request so that
 * tests/harness/test_negative_01.sh can prove that the VM harness reports
 * a kernel WARNING as a failed test, tests/debug/test_negative_01.sh that
 * a leak is caught by kmemleak, and tests/debug/test_negative_02.sh that
 * KASAN, UBSAN and lockdep reports fail a test too.  Loaded only by those
 * tests; every misbehaviour is one that the kernel survives.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/bug.h>
#include <linux/slab.h>
#include <linux/mutex.h>
#include <linux/compiler.h>

static bool warn;
module_param(warn, bool, 0444);
MODULE_PARM_DESC(warn, "emit a WARNING at load (harness self-test)");

static bool leak;
module_param(leak, bool, 0444);
MODULE_PARM_DESC(leak, "leak an allocation at load (kmemleak self-test)");

static bool kasan;
module_param(kasan, bool, 0444);
MODULE_PARM_DESC(kasan, "read a byte past a slab object at load (KASAN self-test)");

static bool ubsan;
module_param(ubsan, bool, 0444);
MODULE_PARM_DESC(ubsan, "shift by more than the type's width at load (UBSAN self-test)");

static bool lockdep;
module_param(lockdep, bool, 0444);
MODULE_PARM_DESC(lockdep, "take two mutexes in both orders at load (lockdep self-test)");

/* the only reference to the leaked object, dropped right away */
static void *vps_selftest_obj;

/* two locks that the lockdep case takes in A-B, then B-A order */
static DEFINE_MUTEX(vps_selftest_a);
static DEFINE_MUTEX(vps_selftest_b);

static noinline void vps_selftest_kasan(void)
{
	size_t n = 16;
	char *p = kmalloc(n, GFP_KERNEL);

	if (!p)
		return;
	/* hidden from the compiler, which would refuse a constant overrun */
	OPTIMIZER_HIDE_VAR(n);
	pr_info("the byte past the object: %d\n", READ_ONCE(p[n]));
	kfree(p);
}

static noinline void vps_selftest_ubsan(void)
{
	unsigned int shift = 40;
	u32 one = 1;

	OPTIMIZER_HIDE_VAR(shift);
	pr_info("1 << %u: %u\n", shift, one << shift);
}

/* one thread, so no deadlock: lockdep reports the order it has seen */
static noinline void vps_selftest_lockdep(void)
{
	mutex_lock(&vps_selftest_a);
	mutex_lock(&vps_selftest_b);
	mutex_unlock(&vps_selftest_b);
	mutex_unlock(&vps_selftest_a);

	mutex_lock(&vps_selftest_b);
	mutex_lock(&vps_selftest_a);
	mutex_unlock(&vps_selftest_a);
	mutex_unlock(&vps_selftest_b);
}

static int __init vps_selftest_init(void)
{
	pr_info("loaded (warn=%d)\n", warn);
	WARN(warn, "vps_selftest: deliberate warning requested by the test\n");
	if (leak) {
		vps_selftest_obj = kmalloc(200, GFP_KERNEL);
		WRITE_ONCE(vps_selftest_obj, NULL);
	}
	if (kasan)
		vps_selftest_kasan();
	if (ubsan)
		vps_selftest_ubsan();
	if (lockdep)
		vps_selftest_lockdep();
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
