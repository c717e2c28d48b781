// SPDX-License-Identifier: GPL-2.0
/*
 * sriov_vfcfg: keeps SR-IOV virtual functions configured.
 *
 * A declared policy (module parameter "policy", writable at run time) says,
 * per PF, how many VFs it has and how each VF is set up.  One work item
 * applies it in passes, started by the events of VFCFG_WHY_*.  Why a pass
 * runs decides what it may change.  The VF count (through the PF driver's
 * sriov_configure, as sysfs sriov_numvfs) and the VFs' drivers change only
 * on an explicit write (module load, policy, apply) and in the first pass
 * after a PF's driver bound, because a count change goes through zero and
 * removes every VF, those a guest runs on too; and even then not while a
 * VF is bound to a driver we must not take it from (vfcfg_vf_in_use()),
 * unless the block says "force".  Every other event (the PF's net device
 * up or renamed, its carrier up, a VF driver bound) re-applies the VF
 * attributes only, through the PF's ndo_set_vf_*, retried with backoff
 * while the driver answers busy; so does a periodic drift check (resync=),
 * for a VF reset that sends no event, but only what reads back different.
 * A new VF gets its driver override from a PCI bus notifier that runs
 * before it can probe.  A PF that is not PCI
 * (netdevsim) gets the VF attributes only, on the VFs it has.  Results per
 * PF and VF are in /proc/driver/sriov_vfcfg (a seq_file: sysfs would cut
 * them at one page).
 *
 * Lock order: device_lock(PF) -> device_lock(VF), and device_lock(PF) ->
 * rtnl_lock, the orders of sysfs sriov_numvfs and of a PF driver's unbind;
 * vfcfg_lock is a leaf taken under any of them, and nothing is acquired
 * while holding it.  A pass holds the PF's device lock from its start to
 * its end, so that the PF driver can neither be mid-probe nor unbind under
 * it, and RTNL only around each driver call: igb takes RTNL inside
 * sriov_configure, and a VF driver that probes or goes takes it too.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/device.h>
#include <linux/fault-inject.h>
#include <linux/if_link.h>
#include <linux/kmod.h>
#include <linux/kobject.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/netdevice.h>
#include <linux/notifier.h>
#include <linux/pci.h>
#include <linux/proc_fs.h>
#include <linux/rtnetlink.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/sysfs.h>
#include <linux/workqueue.h>

#include "vfcfg.h"
#include "vfcfg_compat.h"

/*
 * Busy answers (-EBUSY, -EAGAIN: i40e and ice while a VF resets) are
 * retried by later passes, the first VFCFG_RETRY_MS after, each wait twice
 * the one before, at most VFCFG_RETRIES times in a row: 3.1 s in all.
 * Waiting outside the pass keeps the PF's device lock free meanwhile.
 */
#define VFCFG_RETRIES		5
#define VFCFG_RETRY_MS		100

/* see vfcfg.h for what it guards; a leaf: nothing is taken under it */
DEFINE_MUTEX(vfcfg_lock);

/* the published policy; NULL = none.  Guarded by vfcfg_lock. */
static struct vfcfg_set *vfcfg_cur;

/* why the last policy write was refused, "" if it was not; vfcfg_lock */
static char vfcfg_last_err[VFCFG_ERR_LEN];

/*
 * Module life, guarded by vfcfg_lock.  The policy parameter is set before
 * init at load time (nothing to apply to yet: init queues the work) and may
 * be written while exit runs or after init failed (the policy must not be
 * replaced then: nobody would free it).
 */
static enum { VFCFG_LOADING, VFCFG_LIVE, VFCFG_GONE } vfcfg_life;

/* VFCFG_WHY_* of the events since the last pass began; vfcfg_lock */
static unsigned int vfcfg_why;

/*
 * PCI PFs whose driver bound since a pass last applied a block to them,
 * each with a reference; the list is guarded by vfcfg_lock.  The first
 * pass that applies a block to such a PF may set its VF count and VF
 * drivers: that is "at PF probe", also when an ifname= block matches
 * only once udev has renamed the net device.  That holds for
 * probe_window seconds after the bind: a block that comes to match a PF
 * bound long ago (a rename weeks later) is no probe, and must not remove
 * the VFs of running guests with force.
 */
struct vfcfg_probed {
	struct list_head node;
	struct pci_dev *pdev;
	unsigned long bound;		/* jiffies */
};

static unsigned int vfcfg_probe_window = 120;
module_param_named(probe_window, vfcfg_probe_window, uint, 0644);
MODULE_PARM_DESC(probe_window,
		 "seconds after a PF's driver bound during which a pass counts as at its probe (VF count, drivers); default 120");

static LIST_HEAD(vfcfg_probed);

/*
 * Seconds between drift checks; 0: none.  A VF reset or FLR through sysfs
 * with the VF's driver bound sends no event, and some PF drivers (i40e,
 * ice) forget the VF's settings in it; igb restores them itself.  A check
 * reads every VF's settings back and sets again only what differs.
 * Guarded by vfcfg_lock.
 */
static unsigned int vfcfg_resync = 30;

static void vfcfg_resync_tick(struct work_struct *work);
static DECLARE_DELAYED_WORK(vfcfg_resync_work, vfcfg_resync_tick);

/* number of the running or last pass; owned by the work */
static u32 vfcfg_passes;

static void vfcfg_apply_all(struct work_struct *work);
static DECLARE_DELAYED_WORK(vfcfg_work, vfcfg_apply_all);

static struct kobject *vfcfg_kobj;

#define VFCFG_PROC_STATUS	"driver/" KBUILD_MODNAME

/* note why and start a pass now; caller holds vfcfg_lock */
static void vfcfg_kick(unsigned int why)
{
	if (vfcfg_life != VFCFG_LIVE || !vfcfg_cur)
		return;
	vfcfg_why |= why;
	mod_delayed_work(system_unbound_wq, &vfcfg_work, 0);
}

static void vfcfg_kick_locked(unsigned int why)
{
	mutex_lock(&vfcfg_lock);
	vfcfg_kick(why);
	mutex_unlock(&vfcfg_lock);
}

/* (re)arm the next drift check; caller holds vfcfg_lock */
static void vfcfg_resync_arm(void)
{
	if (vfcfg_life == VFCFG_LIVE && vfcfg_resync)
		mod_delayed_work(system_unbound_wq, &vfcfg_resync_work,
				 msecs_to_jiffies(vfcfg_resync * 1000));
	else
		cancel_delayed_work(&vfcfg_resync_work);
}

static void vfcfg_resync_tick(struct work_struct *work)
{
	mutex_lock(&vfcfg_lock);
	if (vfcfg_resync)
		vfcfg_kick(VFCFG_WHY_RESYNC);
	vfcfg_resync_arm();
	mutex_unlock(&vfcfg_lock);
}

static int vfcfg_resync_set(const char *val, const struct kernel_param *kp)
{
	unsigned int secs;
	int ret;

	ret = kstrtouint(val, 0, &secs);
	if (ret)
		return ret;
	if (secs > 86400)
		return -ERANGE;
	mutex_lock(&vfcfg_lock);
	vfcfg_resync = secs;
	vfcfg_resync_arm();
	mutex_unlock(&vfcfg_lock);
	return 0;
}

static int vfcfg_resync_get(char *buf, const struct kernel_param *kp)
{
	unsigned int secs;

	mutex_lock(&vfcfg_lock);
	secs = vfcfg_resync;
	mutex_unlock(&vfcfg_lock);
	return sysfs_emit(buf, "%u\n", secs);
}

static const struct kernel_param_ops vfcfg_resync_ops = {
	.set = vfcfg_resync_set,
	.get = vfcfg_resync_get,
};

module_param_cb(resync, &vfcfg_resync_ops, NULL, 0644);
MODULE_PARM_DESC(resync,
		 "seconds between checks that VF settings still read back as the policy says (re-set if not, e.g. after a VF FLR); 0: off; default 30");

/* caller holds vfcfg_lock */
static struct vfcfg_probed *vfcfg_probed_find(struct pci_dev *pdev)
{
	struct vfcfg_probed *p;

	list_for_each_entry(p, &vfcfg_probed, node)
		if (p->pdev == pdev)
			return p;
	return NULL;
}

static void vfcfg_probed_add(struct pci_dev *pdev)
{
	struct vfcfg_probed *p;

	mutex_lock(&vfcfg_lock);
	if (vfcfg_life == VFCFG_LIVE && vfcfg_cur && !vfcfg_probed_find(pdev)) {
		p = kmalloc(sizeof(*p), GFP_KERNEL);
		if (p) {
			p->pdev = pci_dev_get(pdev);
			p->bound = jiffies;
			list_add(&p->node, &vfcfg_probed);
		} else {
			pci_err(pdev, "%s: out of memory: its VF count is left as it is\n",
				KBUILD_MODNAME);
		}
	}
	vfcfg_kick(VFCFG_WHY_PROBE);
	mutex_unlock(&vfcfg_lock);
}

/*
 * Forget @pdev's probe; returns 1 when there was one, bound less than
 * probe_window seconds ago, -1 for an older one, 0 for none.
 */
static int vfcfg_probed_del(struct pci_dev *pdev)
{
	struct vfcfg_probed *p;
	bool recent;

	mutex_lock(&vfcfg_lock);
	p = vfcfg_probed_find(pdev);
	if (p)
		list_del(&p->node);
	mutex_unlock(&vfcfg_lock);
	if (!p)
		return 0;
	recent = time_before(jiffies, p->bound +
			     (unsigned long)READ_ONCE(vfcfg_probe_window) * HZ);
	pci_dev_put(p->pdev);
	kfree(p);
	return recent ? 1 : -1;
}

static bool vfcfg_probed_peek(struct pci_dev *pdev)
{
	bool ret;

	mutex_lock(&vfcfg_lock);
	ret = vfcfg_probed_find(pdev);
	mutex_unlock(&vfcfg_lock);
	return ret;
}

/* --- test hook: busy answers, debug kernels only ------------------------- */

#ifdef CONFIG_FAULT_INJECTION_DEBUG_FS
/*
 * /sys/kernel/debug/sriov_vfcfg/fail_vf_busy (probability, times, ...: the
 * kernel's fault-injection attributes) makes ndo_set_vf_* calls answer
 * -EBUSY without reaching the driver, as i40e and ice answer while a VF
 * resets: the retries are tested on a PF that never does.  Kernels
 * without fault injection (Debian's) have no such file and no such path.
 */
static DECLARE_FAULT_ATTR(vfcfg_fail_busy);
static struct dentry *vfcfg_debugfs;

static bool vfcfg_inject_busy(void)
{
	return should_fail(&vfcfg_fail_busy, 1);
}

static void vfcfg_debugfs_init(void)
{
	vfcfg_debugfs = debugfs_create_dir(KBUILD_MODNAME, NULL);
	fault_create_debugfs_attr("fail_vf_busy", vfcfg_debugfs,
				  &vfcfg_fail_busy);
}

static void vfcfg_debugfs_exit(void)
{
	debugfs_remove_recursive(vfcfg_debugfs);
}
#else
static bool vfcfg_inject_busy(void)
{
	return false;
}

static void vfcfg_debugfs_init(void)
{
}

static void vfcfg_debugfs_exit(void)
{
}
#endif

/* --- finding the PF ------------------------------------------------------ */

static bool vfcfg_netdev_matches(const struct vfcfg_pf *pf,
				 const struct net_device *dev)
{
	if (pf->ifname[0] && strcmp(pf->ifname, dev->name))
		return false;
	if (pf->has_perm && !ether_addr_equal(pf->permaddr, dev->perm_addr))
		return false;
	return true;
}

static struct pci_dev *vfcfg_netdev_pci(const struct net_device *dev)
{
	struct device *parent = dev->dev.parent;
	struct pci_dev *pdev;

	if (!parent || !dev_is_pci(parent))
		return NULL;
	pdev = to_pci_dev(parent);
	return pdev->is_physfn ? pdev : NULL;
}

/*
 * A PF that is not a PCI device but whose bus counts its VFs (netdevsim):
 * VF attributes go through its ndo_set_vf_* like a PCI PF's, the VF count
 * is its bus's own business (see vfcfg_apply_nonpci()).
 */
static bool vfcfg_netdev_vfbus(const struct net_device *dev)
{
	struct device *parent = dev->dev.parent;

	return parent && !dev_is_pci(parent) && parent->bus &&
	       parent->bus->num_vf && dev->netdev_ops->ndo_get_vf_config;
}

/* the PF's net device in init_net; caller holds RTNL */
static struct net_device *vfcfg_pf_netdev(struct pci_dev *pdev)
{
	struct net_device *dev;

	ASSERT_RTNL();
	for_each_netdev(&init_net, dev)
		if (vfcfg_netdev_pci(dev) == pdev)
			return dev;
	return NULL;
}

/*
 * The PCI device a policy applies to now, with a reference, or NULL.  Netdev
 * keys need the PF's net device to exist: a policy keyed on ifname waits
 * for it.
 */
static struct pci_dev *vfcfg_resolve(const struct vfcfg_pf *pf)
{
	struct pci_dev *pdev = NULL;
	struct net_device *dev;

	if (pf->has_addr) {
		pdev = pci_get_domain_bus_and_slot(pf->domain, pf->bus, pf->devfn);
		if (!pdev || (!pf->ifname[0] && !pf->has_perm))
			return pdev;
	}
	rtnl_lock();
	if (pdev) {
		dev = vfcfg_pf_netdev(pdev);
		if (!dev || !vfcfg_netdev_matches(pf, dev)) {
			pci_dev_put(pdev);
			pdev = NULL;
		}
	} else {
		for_each_netdev(&init_net, dev) {
			if (vfcfg_netdev_pci(dev) && vfcfg_netdev_matches(pf, dev)) {
				pdev = pci_dev_get(vfcfg_netdev_pci(dev));
				break;
			}
		}
	}
	rtnl_unlock();
	return pdev;
}

/*
 * The device a block selects now, with a reference, or NULL: the PCI PF, or
 * for a block without pf= that names a non-PCI PF (netdevsim) the bus
 * device that counts its VFs.  Blocks are compared by this, not by their
 * text: pf= and ifname= can name the same PF.
 */
static struct device *vfcfg_select(const struct vfcfg_pf *pf)
{
	struct pci_dev *pdev = vfcfg_resolve(pf);
	struct device *sel = NULL;
	struct net_device *dev;

	if (pdev)
		return &pdev->dev;
	/* pf= only ever matches a PCI device */
	if (pf->has_addr)
		return NULL;
	rtnl_lock();
	for_each_netdev(&init_net, dev) {
		if (vfcfg_netdev_vfbus(dev) && vfcfg_netdev_matches(pf, dev)) {
			sel = get_device(dev->dev.parent);
			break;
		}
	}
	rtnl_unlock();
	return sel;
}

/* the PF one block is applied to during a pass */
struct vfcfg_target {
	const struct vfcfg_pf *pf;
	struct pci_dev *pdev;		/* a PCI PF, or NULL */
	struct device *bus;		/* else: the device that counts its VFs */
};

/*
 * The target's net device in init_net now, or NULL: looked up again for
 * each driver call, since RTNL is dropped in between.  Caller holds RTNL.
 */
static struct net_device *vfcfg_target_dev(const struct vfcfg_target *t)
{
	struct net_device *dev;

	ASSERT_RTNL();
	if (t->pdev)
		return vfcfg_pf_netdev(t->pdev);
	for_each_netdev(&init_net, dev)
		if (dev->dev.parent == t->bus && vfcfg_netdev_vfbus(dev) &&
		    vfcfg_netdev_matches(t->pf, dev))
			return dev;
	return NULL;
}

/* --- VFs in use ---------------------------------------------------------- */

static bool vfcfg_id_matches(const struct pci_device_id *id,
			     const struct pci_dev *dev)
{
	return (id->vendor == PCI_ANY_ID || id->vendor == dev->vendor) &&
	       (id->device == PCI_ANY_ID || id->device == dev->device) &&
	       (id->subvendor == PCI_ANY_ID ||
		id->subvendor == dev->subsystem_vendor) &&
	       (id->subdevice == PCI_ANY_ID ||
		id->subdevice == dev->subsystem_device) &&
	       !((id->class ^ dev->class) & id->class_mask);
}

/*
 * Whether @drv is the VF's own driver: its ID table names the VF (igbvf's
 * does).  Entries that match only through driver_override (vfio-pci's
 * catch-all) and IDs added through new_id do not count: a VF bound that
 * way was handed over on purpose.  Caller holds the VF's device lock, so
 * that @drv stays bound.
 */
static bool vfcfg_native(const struct pci_dev *vf, struct device_driver *drv)
{
	const struct pci_device_id *id;

	if (drv->bus != &pci_bus_type)
		return false;
	for (id = to_pci_driver(drv)->id_table;
	     id && (id->vendor || id->subvendor || id->class_mask); id++)
		if (!id->override_only && vfcfg_id_matches(id, vf))
			return true;
	return false;
}

/*
 * Whether VF @id (@vf) is bound to a driver we must not take it from: a
 * vfio driver (vfio-pci or a variant such as mlx5_vfio_pci: a guest may be
 * running on it, and unbinding waits for the guest to let go, holding the
 * PF's device lock), or any driver other than the policy's for it.  The
 * policy's driver is the one its driver= names, else the VF's own (igbvf),
 * so a VF the host uses through igbvf is in use when the policy wants it on
 * vfio-pci: the host's interface would vanish under its users.  A VF the
 * policy does not name a driver for may sit on its own driver.  @name gets
 * the bound driver's name.
 *
 * @may_wait false (a pass that only reports, holding the PF's lock): a VF
 * whose device lock stays held for a second (a vfio unbind waiting for its
 * guest; a bind in progress lets go sooner) is not waited for further; it
 * counts as in use, "busy".
 */
static bool vfcfg_vf_in_use(const struct vfcfg_pf *pf, struct pci_dev *vf,
			    int id, char *name, size_t len, bool may_wait)
{
	const struct vfcfg_vf *want = id >= 0 && id < pf->nvf ? &pf->vf[id] : NULL;
	struct device_driver *drv;
	bool ret = false;

	if (!may_wait) {
		int tries = 50;

		while (!device_trylock(&vf->dev)) {
			if (!--tries) {
				strscpy(name, "a driver (busy)", len);
				return true;
			}
			msleep(20);
		}
	} else {
		device_lock(&vf->dev);
	}
	drv = vf->dev.driver;
	if (drv) {
		strscpy(name, drv->name, len);
		if (strstr(drv->name, "vfio"))
			ret = true;
		else if (want && (want->keys & BIT(VFCFG_K_DRIVER)))
			ret = strcmp(drv->name, want->driver);
		else
			ret = !vfcfg_native(vf, drv);
	}
	device_unlock(&vf->dev);
	return ret;
}

/*
 * Count the VFs of @pdev that are in use (vfcfg_vf_in_use()) and name the
 * first of them in @desc.  Caller holds the PF's device lock, so no VF
 * comes or goes meanwhile.
 */
static int vfcfg_vfs_in_use(const struct vfcfg_pf *pf, struct pci_dev *pdev,
			    char *desc, size_t len, bool may_wait)
{
	char name[VFCFG_DRV_LEN];
	struct pci_dev *vf = NULL;
	size_t off = 0;
	int n = 0;

	device_lock_assert(&pdev->dev);
	desc[0] = '\0';
	for_each_pci_dev(vf) {
		int id;

		if (!vf->is_virtfn || pci_physfn(vf) != pdev)
			continue;
		id = pci_iov_vf_id(vf);
		if (!vfcfg_vf_in_use(pf, vf, id, name, sizeof(name), may_wait))
			continue;
		if (n++ < 3)
			off += scnprintf(desc + off, len - off, "%svf%d is bound to %s",
					 off ? ", " : "", id, name);
	}
	if (n > 3)
		scnprintf(desc + off, len - off, " and %d more", n - 3);
	return n;
}

/* --- applying ------------------------------------------------------------ */

/*
 * vfcfg_vfres.res[VFCFG_OP_DRIVER] of a pass that may not bind drivers:
 * the status keeps what the last pass that could found
 */
#define VFCFG_RES_KEEP		3

/* what one pass did to one VF, stored into the policy's status at its end */
struct vfcfg_vfres {
	int res[VFCFG_OP_NR];
	u16 asked;			/* BIT(op): the driver was called */
	bool mac_set;			/* the MAC changed in this pass */
	char bound[VFCFG_DRV_LEN];	/* VFCFG_RES_IN_USE: the driver kept */
};

/*
 * Set the VF count the way sysfs sriov_numvfs does: under the PF's device
 * lock (the caller's: the PF driver cannot unbind meanwhile) and the
 * rescan lock, going through zero.  Returns 1 when it created VFs.
 */
static int vfcfg_set_numvfs(struct pci_dev *pdev, int want, char *why,
			    size_t len)
{
	int ret = 0;

	device_lock_assert(&pdev->dev);
	if (!pdev->driver->sriov_configure) {
		snprintf(why, len, "PF driver %s cannot set the VF count",
			 pdev->driver->name);
		return -EOPNOTSUPP;
	}
	pci_lock_rescan_remove();
	if (pci_num_vf(pdev))
		ret = pdev->driver->sriov_configure(pdev, 0);
	if (ret >= 0 && want)
		ret = pdev->driver->sriov_configure(pdev, want);
	pci_unlock_rescan_remove();
	if (ret >= 0 && pci_num_vf(pdev) != want)
		ret = -EIO;
	if (ret < 0) {
		snprintf(why, len, "setting %d VFs failed: %pe", want, ERR_PTR(ret));
		return ret;
	}
	pci_info(pdev, "%s: %d VFs enabled\n", KBUILD_MODNAME, want);
	return want > 0;
}

/*
 * Bring the VF count to the policy's if this pass may (@full) and no VF is
 * in use, or the block says force.  Caller holds the PF's device lock.
 * Returns 1 when VFs were created, 0 when the count was kept (@note says
 * why), a negative errno when setting it failed (@err says how); @forced
 * names the VFs in use that force removed.
 */
static int vfcfg_count(struct vfcfg_pf *pf, struct pci_dev *pdev, bool full,
		       char *err, char *note, char *forced, size_t len)
{
	char inuse[VFCFG_ERR_LEN];
	int n, cur = pci_num_vf(pdev);

	/* a pass that only reports does not wait on a VF's lock */
	n = vfcfg_vfs_in_use(pf, pdev, inuse, sizeof(inuse), full);
	if (!n)
		pf->warned_count = false;
	if (!full) {
		snprintf(note, len, "numvfs %d not applied (%d VFs): %s%s%s",
			 pf->numvfs, cur, "set only at PF probe or on a policy write",
			 n ? "; " : "", n ? inuse : "");
		return 0;
	}
	if (n && !pf->force) {
		snprintf(note, len, "numvfs %d refused (%d VFs): %s; force overrides",
			 pf->numvfs, cur, inuse);
		/* every event re-applies: say it once while it holds */
		if (!pf->warned_count)
			pr_warn("%s: %s: numvfs %d refused: %s; add force to the block to override\n",
				pci_name(pdev), pf->match, pf->numvfs, inuse);
		pf->warned_count = true;
		return 0;
	}
	if (n) {
		snprintf(forced, len, "numvfs %d removed VFs in use: %s",
			 pf->numvfs, inuse);
		pr_warn("%s: %s: force: setting %d VFs removes VFs in use: %s\n",
			pci_name(pdev), pf->match, pf->numvfs, inuse);
	}
	return vfcfg_set_numvfs(pdev, pf->numvfs, err, len);
}

/* the VF's settings as the driver reports them; caller holds RTNL */
static bool vfcfg_get_vf(struct net_device *dev, int i, struct ifla_vf_info *ivi)
{
	const struct net_device_ops *ops = dev->netdev_ops;

	/* the defaults rtnetlink uses; -1 is never what a policy wants */
	memset(ivi, 0, sizeof(*ivi));
	ivi->vlan_proto = htons(ETH_P_8021Q);
	ivi->spoofchk = -1;
	ivi->trusted = -1;
	ivi->rss_query_en = -1;
	ivi->linkstate = -1;
	return ops->ndo_get_vf_config && !ops->ndo_get_vf_config(dev, i, ivi);
}

static const char *const vfcfg_op_names[VFCFG_OP_NR] = {
	[VFCFG_OP_MAC] = "mac",
	[VFCFG_OP_VLAN] = "vlan",
	[VFCFG_OP_SPOOFCHK] = "spoofchk",
	[VFCFG_OP_TRUST] = "trust",
	[VFCFG_OP_RATE] = "rate",
	[VFCFG_OP_STATE] = "state",
	[VFCFG_OP_QUERY_RSS] = "query_rss",
	[VFCFG_OP_DRIVER] = "driver",
};

/*
 * Whether @ivi, a VF's settings read back from its PF driver, already says
 * what the policy wants for @op; *@can whether the driver has the op.
 */
static bool vfcfg_op_same(const struct net_device_ops *ops,
			  const struct vfcfg_vf *vf, enum vfcfg_op op,
			  const struct ifla_vf_info *ivi, bool *can)
{
	switch (op) {
	case VFCFG_OP_MAC:
		*can = ops->ndo_set_vf_mac;
		return ether_addr_equal(ivi->mac, vf->mac);
	case VFCFG_OP_VLAN:
		*can = ops->ndo_set_vf_vlan;
		return ivi->vlan == vf->vlan && ivi->qos == vf->qos &&
		       ivi->vlan_proto == vf->proto;
	case VFCFG_OP_SPOOFCHK:
		*can = ops->ndo_set_vf_spoofchk;
		return ivi->spoofchk == vf->spoofchk;
	case VFCFG_OP_TRUST:
		*can = ops->ndo_set_vf_trust;
		return ivi->trusted == vf->trust;
	case VFCFG_OP_RATE:
		*can = ops->ndo_set_vf_rate;
		return ivi->min_tx_rate == vf->min_rate &&
		       ivi->max_tx_rate == vf->max_rate;
	case VFCFG_OP_STATE:
		*can = ops->ndo_set_vf_link_state;
		return ivi->linkstate == vf->link_state;
	case VFCFG_OP_QUERY_RSS:
		*can = ops->ndo_set_vf_rss_query_en;
		return ivi->rss_query_en == vf->query_rss;
	default:
		*can = false;
		return false;
	}
}

/*
 * One op on VF @i.  The driver is not asked when @ivi, read back (@known),
 * already says what the policy wants: a set can reset the VF (i40e does).
 * *@asked says whether it was.  Caller holds RTNL.
 */
static int vfcfg_vf_op(struct net_device *dev, int i, const struct vfcfg_vf *vf,
		       enum vfcfg_op op, const struct ifla_vf_info *ivi,
		       bool known, bool *asked)
{
	const struct net_device_ops *ops = dev->netdev_ops;
	bool can, same;

	*asked = false;
	same = vfcfg_op_same(ops, vf, op, ivi, &can);
	if (!can)
		return -EOPNOTSUPP;
	if (known && same)
		return 0;
	*asked = true;
	if (vfcfg_inject_busy())
		return -EBUSY;
	switch (op) {
	case VFCFG_OP_MAC:
		return ops->ndo_set_vf_mac(dev, i, (u8 *)vf->mac);
	case VFCFG_OP_VLAN:
		return ops->ndo_set_vf_vlan(dev, i, vf->vlan, vf->qos, vf->proto);
	case VFCFG_OP_SPOOFCHK:
		return ops->ndo_set_vf_spoofchk(dev, i, vf->spoofchk);
	case VFCFG_OP_TRUST:
		return ops->ndo_set_vf_trust(dev, i, vf->trust);
	case VFCFG_OP_RATE:
		return ops->ndo_set_vf_rate(dev, i, vf->min_rate, vf->max_rate);
	case VFCFG_OP_STATE:
		return ops->ndo_set_vf_link_state(dev, i, vf->link_state);
	default:
		return ops->ndo_set_vf_rss_query_en(dev, i, vf->query_rss);
	}
}

static bool vfcfg_op_wanted(const struct vfcfg_vf *vf, enum vfcfg_op op)
{
	static const u32 keys[VFCFG_OP_NR] = {
		[VFCFG_OP_MAC] = BIT(VFCFG_K_MAC),
		[VFCFG_OP_VLAN] = BIT(VFCFG_K_VLAN),
		[VFCFG_OP_SPOOFCHK] = BIT(VFCFG_K_SPOOFCHK),
		[VFCFG_OP_TRUST] = BIT(VFCFG_K_TRUST),
		[VFCFG_OP_RATE] = BIT(VFCFG_K_MIN_RATE) | BIT(VFCFG_K_MAX_RATE),
		[VFCFG_OP_STATE] = BIT(VFCFG_K_STATE),
		[VFCFG_OP_QUERY_RSS] = BIT(VFCFG_K_QUERY_RSS),
		[VFCFG_OP_DRIVER] = BIT(VFCFG_K_DRIVER),
	};

	return vf->keys & keys[op];
}

/*
 * Whether a drift check may set @op of VF @i again: only a setting that
 * was in place (or not tried yet: a VF made since), never one the driver
 * refused or gave up on busy, which would be tried and logged every
 * period; events and writes still retry those.  res[] is written only by
 * this work, so reading it here needs no lock.
 */
static bool vfcfg_drift_op(const struct vfcfg_pf *pf, unsigned int i,
			   enum vfcfg_op op)
{
	int r = pf->vf[i].res[op];

	return vfcfg_op_wanted(&pf->vf[i], op) &&
	       (!r || r == VFCFG_RES_PENDING || r == -ENODEV);
}

/*
 * Apply the attributes of VFs 0..@nvf-1, RTNL held around each driver call
 * only (and the read-back before a VF's calls), never across the VFs: a
 * PF with many VFs must not stall the rest of networking.  The net device
 * is looked up anew under each hold.  A drift check (@drift) sets only
 * what reads back different: a VF whose driver reports nothing back is
 * left alone, since setting it blindly every period could reset the VF.
 * Returns false when the net device is gone.
 */
static bool vfcfg_apply_attrs(const struct vfcfg_target *t, unsigned int nvf,
			      struct vfcfg_vfres *vr, bool drift)
{
	struct ifla_vf_info ivi;
	struct net_device *dev;
	unsigned int i, op;
	bool known, asked;
	int ret;

	for (i = 0; i < nvf; i++) {
		const struct vfcfg_vf *vf = &t->pf->vf[i];

		if (!(vf->keys & ~BIT(VFCFG_K_DRIVER)))
			continue;
		rtnl_lock();
		dev = vfcfg_target_dev(t);
		known = dev && vfcfg_get_vf(dev, i, &ivi);
		rtnl_unlock();
		if (!dev)
			return false;
		for (op = 0; op < VFCFG_OP_DRIVER; op++) {
			if (!vfcfg_op_wanted(vf, op))
				continue;
			if (drift && (!known || !vfcfg_drift_op(t->pf, i, op))) {
				vr[i].res[op] = VFCFG_RES_KEEP;
				continue;
			}
			asked = false;
			rtnl_lock();
			dev = vfcfg_target_dev(t);
			ret = dev ? vfcfg_vf_op(dev, i, vf, op, &ivi, known, &asked) :
			      -ENODEV;
			rtnl_unlock();
			vr[i].res[op] = ret;
			if (asked)
				vr[i].asked |= BIT(op);
			if (op == VFCFG_OP_MAC && asked && !ret)
				vr[i].mac_set = true;
			if (drift && asked)
				pr_info("%s: vf%u: %s read back different from the policy (a VF reset?): set again: %d\n",
					t->pf->match, i, vfcfg_op_names[op], ret);
		}
	}
	return true;
}

/*
 * Whether a VF attribute of the PF @pf->sel reads back different from the
 * policy, for a drift check: then it gets a pass, else none, so that the
 * status keeps showing the last pass that did something.  Only reads.
 */
static bool vfcfg_drifted(const struct vfcfg_pf *pf)
{
	struct vfcfg_target t = { .pf = pf };
	struct ifla_vf_info ivi;
	struct net_device *dev;
	unsigned int i, op;
	bool drift = false, can;
	int cur;

	if (dev_is_pci(pf->sel))
		t.pdev = to_pci_dev(pf->sel);
	else
		t.bus = pf->sel;
	rtnl_lock();
	dev = vfcfg_target_dev(&t);
	cur = !dev ? 0 : t.pdev ? pci_num_vf(t.pdev) : max(dev_num_vf(t.bus), 0);
	for (i = 0; i < min_t(unsigned int, pf->nvf, cur) && !drift; i++) {
		const struct vfcfg_vf *vf = &pf->vf[i];

		if (!(vf->keys & ~BIT(VFCFG_K_DRIVER)) ||
		    !vfcfg_get_vf(dev, i, &ivi))
			continue;
		for (op = 0; op < VFCFG_OP_DRIVER && !drift; op++)
			drift = vfcfg_drift_op(pf, i, op) &&
				!vfcfg_op_same(dev->netdev_ops, vf, op, &ivi, &can) &&
				can;
	}
	rtnl_unlock();
	return drift;
}

static bool vfcfg_bound_to(struct pci_dev *vf, const char *name)
{
	bool ret;

	device_lock(&vf->dev);
	ret = vf->dev.driver && !strcmp(vf->dev.driver->name, name);
	device_unlock(&vf->dev);
	return ret;
}

static bool vfcfg_bound_native(struct pci_dev *vf)
{
	bool ret;

	device_lock(&vf->dev);
	ret = vf->dev.driver && vfcfg_native(vf, vf->dev.driver);
	device_unlock(&vf->dev);
	return ret;
}

/*
 * Load the VF drivers a block names, before the PF is locked: a module's
 * init attaches its driver to every device it matches, taking each one's
 * device lock, and one that matched the PF would wait for our lock while
 * we waited for it.  Without udev nobody loads a driver that the VF's
 * modalias does not name (vfio-pci).
 */
static void vfcfg_load_drivers(const struct vfcfg_pf *pf)
{
	unsigned int i;

	for (i = 0; i < pf->nvf; i++)
		if ((pf->vf[i].keys & BIT(VFCFG_K_DRIVER)) &&
		    !driver_find(pf->vf[i].driver, &pci_bus_type))
			request_module("%s", pf->vf[i].driver);
}

/*
 * Bind VF @id to the policy's driver, as "echo NAME > driver_override;
 * echo VF > unbind; echo VF > drivers_probe" would, unless the VF is in
 * use (vfcfg_vf_in_use()) and the block has no force: then neither its
 * binding nor its driver_override changes, and @bound names its driver.
 * VFs created by our own sriov_configure already got the override from the
 * bus notifier before they could probe.  Caller holds the PF's device lock.
 */
static int vfcfg_vf_driver(struct vfcfg_pf *pf, struct pci_dev *vf, int id,
			   char *bound, char *forced, size_t len)
{
	const char *name = pf->vf[id].driver;
	char cur[VFCFG_DRV_LEN] = "";
	int ret;

	if (!vfcfg_bound_to(vf, name) &&
	    vfcfg_vf_in_use(pf, vf, id, cur, sizeof(cur), true)) {
		if (!pf->force) {
			strscpy(bound, cur, VFCFG_DRV_LEN);
			return VFCFG_RES_IN_USE;
		}
		scnprintf(forced + strlen(forced), len - strlen(forced),
			  "%svf%d taken from %s", forced[0] ? ", " : "", id, cur);
		pr_warn("%s: %s: force: vf%d taken from %s for %s\n",
			pci_name(vf), pf->match, id, cur, name);
	}
	if (!vfcfg_override_is(vf, name)) {
		ret = vfcfg_override_set(vf, name);
		if (ret)
			return ret;
	}
	if (vfcfg_bound_to(vf, name))
		return 0;
	device_release_driver(&vf->dev);
	ret = device_attach(&vf->dev);
	if (ret < 0)
		return ret;
	return vfcfg_bound_to(vf, name) ? 0 : -ENXIO;
}

/*
 * The steps of a full pass after the attributes: VFs this pass created are
 * probed again by their own driver once their MAC is set (@reprobe), VF
 * drivers are bound.  Caller holds the PF's device lock.
 */
static void vfcfg_vf_steps(struct vfcfg_pf *pf, struct pci_dev *pdev,
			   unsigned int nvf, struct vfcfg_vfres *vr,
			   bool reprobe, char *forced, size_t len)
{
	struct pci_dev *vf = NULL;
	int id;

	for_each_pci_dev(vf) {
		if (!vf->is_virtfn || pci_physfn(vf) != pdev)
			continue;
		id = pci_iov_vf_id(vf);
		if (id < 0 || id >= nvf)
			continue;
		/*
		 * A VF driver reads its MAC from the PF when it probes (igbvf
		 * does), and a VF we just created probed before its MAC was
		 * set: probe it again.  Nobody can be using it yet.  VFs that
		 * existed before are left bound: the new MAC reaches them at
		 * their driver's next reset, as with "ip link set vf mac".
		 */
		if (reprobe && vr[id].mac_set && vfcfg_bound_native(vf)) {
			device_release_driver(&vf->dev);
			if (device_attach(&vf->dev) < 0)
				pci_warn(vf, "%s: reprobe failed\n", KBUILD_MODNAME);
		}
		if (pf->vf[id].keys & BIT(VFCFG_K_DRIVER))
			vr[id].res[VFCFG_OP_DRIVER] =
				vfcfg_vf_driver(pf, vf, id, vr[id].bound, forced, len);
	}
}

/*
 * Record which pass applies @pf now (the work's own counter); no retry is
 * due until vfcfg_store_res() says so.
 */
static void vfcfg_pf_pass(struct vfcfg_pf *pf, unsigned int why, bool full)
{
	pf->retry_now = false;
	mutex_lock(&vfcfg_lock);
	pf->pass = vfcfg_passes;
	pf->why = why;
	pf->full = full;
	if (full) {
		pf->full_pass = vfcfg_passes;
		pf->full_why = why;
	}
	pf->retrying = false;
	mutex_unlock(&vfcfg_lock);
}

static void vfcfg_pf_state(struct vfcfg_pf *pf, const char *found,
			   const char *fmt, ...) __printf(3, 4);

static void vfcfg_pf_state(struct vfcfg_pf *pf, const char *found,
			   const char *fmt, ...)
{
	va_list ap;

	mutex_lock(&vfcfg_lock);
	strscpy(pf->found, found, sizeof(pf->found));
	va_start(ap, fmt);
	vsnprintf(pf->state, sizeof(pf->state), fmt, ap);
	va_end(ap);
	mutex_unlock(&vfcfg_lock);
}

static void vfcfg_pf_refused(struct vfcfg_pf *pf, bool refused)
{
	mutex_lock(&vfcfg_lock);
	pf->refused = refused;
	mutex_unlock(&vfcfg_lock);
}

/* the PF driver is gone and its VFs with it: last results no longer hold */
static void vfcfg_pf_forget(struct vfcfg_pf *pf)
{
	unsigned int i, op;

	pf->retry = 0;
	mutex_lock(&vfcfg_lock);
	pf->retrying = false;
	for (i = 0; i < pf->nvf; i++) {
		for (op = 0; op < VFCFG_OP_NR; op++) {
			pf->vf[i].res[op] = VFCFG_RES_PENDING;
			pf->vf[i].busy[op] = 0;
		}
	}
	mutex_unlock(&vfcfg_lock);
}

static bool vfcfg_busy(int res)
{
	return res == -EBUSY || res == -EAGAIN;
}

/*
 * Store one pass's results and decide on a retry of busy answers; caller
 * holds vfcfg_lock.  A busy count grows with each busy answer and is kept
 * by a retry pass that succeeds ("ok after N busy answers"); a driver call
 * of any other pass starts it afresh.  Returns how many VF settings
 * failed.
 */
static unsigned int vfcfg_store_res(struct vfcfg_pf *pf,
				    const struct vfcfg_vfres *vr,
				    unsigned int why)
{
	unsigned int i, op, failed = 0;
	bool busy = false;
	int r;

	for (i = 0; i < pf->nvf; i++) {
		struct vfcfg_vf *vf = &pf->vf[i];

		for (op = 0; op < VFCFG_OP_NR; op++) {
			if (!vfcfg_op_wanted(vf, op))
				continue;
			r = vr[i].res[op];
			if (r != VFCFG_RES_KEEP)
				vf->res[op] = r;
			if (vr[i].asked & BIT(op)) {
				if (vfcfg_busy(r))
					vf->busy[op] = min(vf->busy[op] + 1, 255);
				else if (!(why & VFCFG_WHY_RETRY))
					vf->busy[op] = 0;
			}
			r = vf->res[op];
			busy |= vfcfg_busy(r);
			if (r < 0 || r == VFCFG_RES_IN_USE)
				failed++;
		}
		if (vr[i].res[VFCFG_OP_DRIVER] != VFCFG_RES_KEEP)
			strscpy(vf->bound, vr[i].bound, sizeof(vf->bound));
	}
	pf->retrying = busy && pf->retry < VFCFG_RETRIES;
	pf->retry = pf->retrying ? pf->retry + 1 : 0;
	pf->retry_now = pf->retrying;
	return failed;
}

/* log a VF kept by its driver once, while it is; the work's own flags */
static void vfcfg_warn_in_use(struct vfcfg_pf *pf, const char *pci,
			      const struct vfcfg_vfres *vr)
{
	unsigned int i;
	bool refused;

	for (i = 0; i < pf->nvf; i++) {
		if (vr[i].res[VFCFG_OP_DRIVER] == VFCFG_RES_KEEP)
			continue;
		refused = vr[i].res[VFCFG_OP_DRIVER] == VFCFG_RES_IN_USE;
		if (refused && !pf->vf[i].warned_drv)
			pr_warn("%s: %s: vf%u is bound to %s, not rebound to %s; add force to the block to override\n",
				pci, pf->match, i, vr[i].bound, pf->vf[i].driver);
		pf->vf[i].warned_drv = refused;
	}
}

static void vfcfg_state_add(struct vfcfg_pf *pf, const char *fmt, ...)
	__printf(2, 3);

/* append to @pf->state; caller holds vfcfg_lock */
static void vfcfg_state_add(struct vfcfg_pf *pf, const char *fmt, ...)
{
	size_t n = strlen(pf->state);
	va_list ap;

	va_start(ap, fmt);
	vscnprintf(pf->state + n, sizeof(pf->state) - n, fmt, ap);
	va_end(ap);
}

static struct vfcfg_vfres *vfcfg_vfres_alloc(const struct vfcfg_pf *pf)
{
	struct vfcfg_vfres *vr;
	unsigned int i;

	vr = kcalloc(pf->nvf ?: 1, sizeof(*vr), GFP_KERNEL);
	/* what is not reached stays "no such VF" */
	for (i = 0; vr && i < pf->nvf; i++)
		memset32((u32 *)vr[i].res, (u32)-ENODEV, VFCFG_OP_NR);
	return vr;
}

/*
 * A policy without pf= whose ifname/permaddr names a non-PCI PF
 * (netdevsim), whose VFs @bus counts.  There is no PCI sriov_configure,
 * and the bus's own VF count knob is a sysfs store we must not call from
 * here: the VF count is not applied (numvfs is reported as not applicable
 * when it differs) and the VF attributes go to the VFs that exist; the
 * others stay "no such VF" until the next apply.  The bus device's lock
 * keeps its driver (and the net device with it) for the pass.  Returns
 * false when the PF's net device is gone (or renamed) since
 * vfcfg_select().
 */
static bool vfcfg_apply_nonpci(struct vfcfg_pf *pf, struct device *bus,
			       unsigned int why)
{
	struct vfcfg_target t = { .pf = pf, .bus = bus };
	char ifname[IFNAMSIZ] = "";
	struct net_device *dev;
	struct vfcfg_vfres *vr;
	unsigned int i, nvf, failed;
	bool present;
	int cur = 0;

	vfcfg_pf_pass(pf, why, false);
	vr = vfcfg_vfres_alloc(pf);
	if (!vr) {
		vfcfg_pf_state(pf, "", "out of memory");
		return true;
	}
	device_lock(bus);
	rtnl_lock();
	dev = bus->driver ? vfcfg_target_dev(&t) : NULL;
	if (dev) {
		strscpy(ifname, dev->name, sizeof(ifname));
		cur = max(dev_num_vf(bus), 0);
	}
	rtnl_unlock();
	nvf = min_t(unsigned int, pf->nvf, cur);
	present = dev && vfcfg_apply_attrs(&t, nvf, vr, why == VFCFG_WHY_RESYNC);
	device_unlock(bus);
	if (!present) {
		kfree(vr);
		return false;
	}
	/* its VFs are not devices of their own: nothing to bind */
	for (i = 0; i < nvf; i++)
		if (pf->vf[i].keys & BIT(VFCFG_K_DRIVER))
			vr[i].res[VFCFG_OP_DRIVER] = -EOPNOTSUPP;

	mutex_lock(&vfcfg_lock);
	pf->found[0] = '\0';
	failed = vfcfg_store_res(pf, vr, why);
	snprintf(pf->state, sizeof(pf->state), "%s %s: %d VFs (not PCI), applied",
		 dev_name(bus), ifname, cur);
	if (pf->numvfs >= 0 && pf->numvfs != cur)
		vfcfg_state_add(pf, ", numvfs %d not applicable", pf->numvfs);
	if (failed)
		vfcfg_state_add(pf, ", %u VF settings failed", failed);
	if (pf->retrying)
		vfcfg_state_add(pf, ", retrying busy VF settings");
	mutex_unlock(&vfcfg_lock);
	kfree(vr);
	return true;
}

/*
 * Lock the PF for a pass and say whether the pass may change its VF count
 * and drivers (@why, or its driver bound since it last could).  Returns
 * false, unlocked, when no driver is bound.  Under the device lock a PF's
 * probe has either finished or not begun: a pass queued by NETDEV_REGISTER
 * from inside the probe waits here until the probe is over.
 */
static bool vfcfg_lock_pf(struct pci_dev *pdev, const struct vfcfg_pf *pf,
			  unsigned int *why, bool *full)
{
	bool loaded = false;
	int probed;

	*full = *why & VFCFG_WHY_FULL;
	if (*full || vfcfg_probed_peek(pdev)) {
		vfcfg_load_drivers(pf);
		loaded = true;
	}
	device_lock(&pdev->dev);
	if (!pdev->dev.driver)
		goto unbound;
	probed = vfcfg_probed_del(pdev);
	if (probed < 0)
		pci_info(pdev, "%s: its driver bound over %u s ago: this pass is not its probe's\n",
			 KBUILD_MODNAME, READ_ONCE(vfcfg_probe_window));
	if (probed > 0) {
		*full = true;
		*why |= VFCFG_WHY_PROBE;
	}
	if (!*full || loaded)
		return true;
	/* the driver bound while we waited for its lock */
	device_unlock(&pdev->dev);
	vfcfg_load_drivers(pf);
	device_lock(&pdev->dev);
	if (pdev->dev.driver)
		return true;
unbound:
	device_unlock(&pdev->dev);
	return false;
}

/* a block that selects the PCI device @pdev; the caller holds a reference */
static void vfcfg_apply_pci(struct vfcfg_pf *pf, struct pci_dev *pdev,
			    unsigned int why)
{
	struct vfcfg_target t = { .pf = pf, .pdev = pdev };
	char err[VFCFG_ERR_LEN] = "", note[VFCFG_ERR_LEN] = "";
	char forced[VFCFG_ERR_LEN] = "", ifname[IFNAMSIZ] = "";
	struct net_device *dev;
	struct vfcfg_vfres *vr;
	unsigned int i, nvf, failed;
	int ret, total, cur, created = 0;
	bool full, running = false;

	if (!vfcfg_lock_pf(pdev, pf, &why, &full)) {
		vfcfg_pf_pass(pf, why, false);
		vfcfg_pf_state(pf, pci_name(pdev), "%s: waiting for a PF driver",
			       pci_name(pdev));
		vfcfg_pf_forget(pf);
		return;
	}
	vfcfg_pf_pass(pf, why, full);
	/* TotalVFs is read only once the driver is there: igb lowers it */
	total = pci_sriov_get_totalvfs(pdev);
	if (!pdev->is_physfn || total <= 0) {
		vfcfg_pf_state(pf, "", "%s has no SR-IOV capability",
			       pci_name(pdev));
		vfcfg_pf_refused(pf, true);
		goto unlock;
	}
	/* validated whole before anything is touched */
	ret = vfcfg_check_totalvfs(pf, total, err, sizeof(err));
	if (ret) {
		vfcfg_pf_state(pf, "", "%s: refused: %s", pci_name(pdev), err);
		pci_err(pdev, "%s: policy %s refused: %s\n", KBUILD_MODNAME,
			pf->match, err);
		vfcfg_pf_refused(pf, true);
		goto unlock;
	}
	vfcfg_pf_refused(pf, false);
	/* publish the address first: the VFs created below look it up */
	vfcfg_pf_state(pf, pci_name(pdev), "applying");
	vr = vfcfg_vfres_alloc(pf);
	if (!vr) {
		vfcfg_pf_state(pf, pci_name(pdev), "out of memory");
		goto unlock;
	}

	if (pf->numvfs < 0 || pf->numvfs == pci_num_vf(pdev))
		pf->warned_count = false;
	else
		created = vfcfg_count(pf, pdev, full, err, note, forced,
				      sizeof(err));
	if (created < 0)
		pci_err(pdev, "%s: %s\n", KBUILD_MODNAME, err);

	cur = pci_num_vf(pdev);
	nvf = min_t(unsigned int, pf->nvf, cur);
	for (i = 0; !full && i < nvf; i++)
		vr[i].res[VFCFG_OP_DRIVER] = VFCFG_RES_KEEP;
	rtnl_lock();
	dev = vfcfg_pf_netdev(pdev);
	if (dev) {
		strscpy(ifname, dev->name, sizeof(ifname));
		/* igb answers a VF's reset (and hands it its MAC) only while up */
		running = netif_running(dev);
	}
	rtnl_unlock();
	if ((!dev || !vfcfg_apply_attrs(&t, nvf, vr, why == VFCFG_WHY_RESYNC)) &&
	    !err[0] && nvf)
		snprintf(err, sizeof(err), "PF has no net device yet");
	if (full)
		vfcfg_vf_steps(pf, pdev, nvf, vr, created > 0 && running,
			       forced, sizeof(forced));
	device_unlock(&pdev->dev);

	vfcfg_warn_in_use(pf, pci_name(pdev), vr);
	mutex_lock(&vfcfg_lock);
	failed = vfcfg_store_res(pf, vr, why);
	if (full)
		strscpy(pf->forced, forced, sizeof(pf->forced));
	snprintf(pf->state, sizeof(pf->state), "%s%s%s: %d VFs (totalvfs %d)%s%s",
		 pci_name(pdev), ifname[0] ? " " : "", ifname, cur, total,
		 err[0] ? ", error: " : ", applied", err);
	if (failed)
		vfcfg_state_add(pf, ", %u VF settings failed", failed);
	if (note[0])
		vfcfg_state_add(pf, ", %s", note);
	if (pf->forced[0])
		vfcfg_state_add(pf, ", forced: %s", pf->forced);
	if (pf->retrying)
		vfcfg_state_add(pf, ", retrying busy VF settings");
	mutex_unlock(&vfcfg_lock);
	kfree(vr);
	return;
unlock:
	device_unlock(&pdev->dev);
}

/*
 * The one block applied to a PF that several blocks select (pf= and
 * ifname=, say): one with pf=, because a PCI address names the function
 * itself while a net device can be renamed away from an ifname= block and
 * back; among those, and when none has pf=, the first in the policy.
 * @pf->sel is set.
 */
static struct vfcfg_pf *vfcfg_winner(struct vfcfg_set *set,
				     const struct vfcfg_pf *pf)
{
	struct vfcfg_pf *other, *first = NULL;

	list_for_each_entry(other, &set->pfs, node) {
		if (other->sel != pf->sel)
			continue;
		if (other->has_addr)
			return other;
		if (!first)
			first = other;
	}
	return first;
}

/*
 * Mark every block that another block wins its PF from, before anything is
 * applied: a stale @found of such a block must not hand the winner's new
 * VFs its driver override (vfcfg_vf_added() takes the first block found).
 */
static void vfcfg_mark_conflicts(struct vfcfg_set *set)
{
	struct vfcfg_pf *pf, *win;

	list_for_each_entry(pf, &set->pfs, node) {
		win = pf->sel ? vfcfg_winner(set, pf) : pf;
		mutex_lock(&vfcfg_lock);
		pf->shadowed = win != pf;
		if (win != pf) {
			pf->found[0] = '\0';
			snprintf(pf->state, sizeof(pf->state),
				 "%s: conflict: %s selects the same PF and is applied instead",
				 dev_name(pf->sel), win->match);
		}
		mutex_unlock(&vfcfg_lock);
		/* this runs on every netdev event: say it once per policy */
		if (win != pf && !pf->warned) {
			pf->warned = true;
			pr_warn("conflict: %s and %s both select %s; only %s is applied\n",
				win->match, pf->match, dev_name(pf->sel), win->match);
		}
	}
}

/*
 * One pass over the policy.  Every block is first resolved to the device it
 * selects, so that blocks naming one PF by different keys are seen as one
 * PF and only one of them is applied to it.  Busy answers schedule the
 * next pass after a backoff.
 */
static void vfcfg_apply_all(struct work_struct *work)
{
	unsigned int why, retry = 0;
	struct vfcfg_set *set;
	struct vfcfg_pf *pf;

	mutex_lock(&vfcfg_lock);
	set = vfcfg_cur;
	if (set)
		kref_get(&set->ref);
	/* none left: a retry's timer, after a pass that took its bit */
	why = vfcfg_why ?: VFCFG_WHY_RETRY;
	vfcfg_why = 0;
	mutex_unlock(&vfcfg_lock);
	if (!set)
		return;
	vfcfg_passes++;
	list_for_each_entry(pf, &set->pfs, node)
		pf->sel = vfcfg_select(pf);
	vfcfg_mark_conflicts(set);
	list_for_each_entry(pf, &set->pfs, node) {
		if (why == VFCFG_WHY_RESYNC &&
		    (!pf->sel || pf->shadowed || !vfcfg_drifted(pf)))
			continue;
		if (!pf->sel) {
			vfcfg_pf_pass(pf, why, false);
			vfcfg_pf_state(pf, "", "not present");
			vfcfg_pf_forget(pf);
		} else if (pf->shadowed) {	/* set just above, by this work */
			continue;
		} else if (dev_is_pci(pf->sel)) {
			vfcfg_apply_pci(pf, to_pci_dev(pf->sel), why);
		} else if (!vfcfg_apply_nonpci(pf, pf->sel, why)) {
			vfcfg_pf_state(pf, "", "not present");
			vfcfg_pf_forget(pf);
		}
		if (pf->retry_now)
			retry = max(retry, pf->retry);
	}
	list_for_each_entry(pf, &set->pfs, node) {
		put_device(pf->sel);
		pf->sel = NULL;
	}
	mutex_lock(&vfcfg_lock);
	if (retry && vfcfg_life == VFCFG_LIVE && vfcfg_cur == set) {
		vfcfg_why |= VFCFG_WHY_RETRY;
		queue_delayed_work(system_unbound_wq, &vfcfg_work,
				   msecs_to_jiffies(VFCFG_RETRY_MS << (retry - 1)));
	}
	mutex_unlock(&vfcfg_lock);
	vfcfg_set_put(set);
}

/* --- notifiers ----------------------------------------------------------- */

/*
 * A VF is being added: give it the policy's driver override now, before
 * pci_bus_add_device() lets it probe, so it never binds its native driver
 * first.  Runs inside a sriov_configure call: ours (device_lock(PF) held)
 * or the PF driver's own during its probe (igb's max_vfs=), before any pass
 * resolved the policy to this PF: then a pf= block that names the PF only
 * by its address is taken as it is.  A block that also needs the PF's net
 * device cannot be matched yet (it registers later in probe); its VFs are
 * rebound by the pass that follows the probe.
 */
static void vfcfg_vf_added(struct pci_dev *vf)
{
	char name[VFCFG_DRV_LEN] = "";
	struct pci_dev *pdev = pci_physfn(vf);
	int id = pci_iov_vf_id(vf);
	struct vfcfg_pf *pf, *use = NULL;

	if (id < 0)
		return;
	mutex_lock(&vfcfg_lock);
	if (vfcfg_cur) {
		list_for_each_entry(pf, &vfcfg_cur->pfs, node) {
			/* a refused block touches nothing, its VFs included */
			if (pf->refused)
				continue;
			if (!strcmp(pf->found, pci_name(pdev))) {
				use = pf;
				break;
			}
			if (!use && !pf->shadowed && pf->has_addr &&
			    !pf->ifname[0] && !pf->has_perm &&
			    pf->domain == pci_domain_nr(pdev->bus) &&
			    pf->bus == pdev->bus->number && pf->devfn == pdev->devfn)
				use = pf;
		}
		if (use && id < use->nvf && (use->vf[id].keys & BIT(VFCFG_K_DRIVER)))
			strscpy(name, use->vf[id].driver, sizeof(name));
	}
	mutex_unlock(&vfcfg_lock);
	if (name[0] && vfcfg_override_set(vf, name))
		pci_warn(vf, "%s: cannot set driver_override %s\n",
			 KBUILD_MODNAME, name);
}

static int vfcfg_pci_event(struct notifier_block *nb, unsigned long action,
			   void *data)
{
	struct pci_dev *pdev = to_pci_dev(data);

	switch (action) {
	case BUS_NOTIFY_ADD_DEVICE:
		if (pdev->is_virtfn)
			vfcfg_vf_added(pdev);
		break;
	case BUS_NOTIFY_BOUND_DRIVER:
		/* sent once probe returned: the PF is ready for its VFs */
		if (pdev->is_physfn)
			vfcfg_probed_add(pdev);
		else if (pdev->is_virtfn)
			vfcfg_kick_locked(VFCFG_WHY_VF);
		break;
	case BUS_NOTIFY_UNBOUND_DRIVER:
		if (pdev->is_physfn) {
			vfcfg_probed_del(pdev);
			vfcfg_kick_locked(VFCFG_WHY_UNBIND);
		}
		break;
	case BUS_NOTIFY_DEL_DEVICE:
		if (pdev->is_physfn)
			vfcfg_probed_del(pdev);
		break;
	}
	return NOTIFY_DONE;
}

static struct notifier_block vfcfg_pci_nb = {
	.notifier_call = vfcfg_pci_event,
};

static int vfcfg_netdev_event(struct notifier_block *nb, unsigned long event,
			      void *ptr)
{
	struct net_device *dev = netdev_notifier_info_to_dev(ptr);
	unsigned int why = VFCFG_WHY_NETDEV;

	switch (event) {
	case NETDEV_CHANGE:
		/*
		 * igb limits VF rates only with link; PF resets (igb's own,
		 * i40e's, ice's) drop and regain the carrier, and have no
		 * event of their own
		 */
		if (!netif_carrier_ok(dev))
			break;
		why = VFCFG_WHY_CARRIER;
		fallthrough;
	case NETDEV_REGISTER:
	case NETDEV_UP:
	case NETDEV_CHANGENAME:
		if (vfcfg_netdev_pci(dev) || vfcfg_netdev_vfbus(dev))
			vfcfg_kick_locked(why);
		break;
	}
	return NOTIFY_DONE;
}

static struct notifier_block vfcfg_netdev_nb = {
	.notifier_call = vfcfg_netdev_event,
};

/* --- interface ----------------------------------------------------------- */

/*
 * Check a new policy against the PFs that are there now, so that a write
 * the hardware cannot take is refused whole, not applied in part.  PFs that
 * appear later are checked by vfcfg_apply_pci() before it touches them.
 */
static int vfcfg_check_present(struct vfcfg_set *set, char *err, size_t len)
{
	char why[64];
	struct vfcfg_pf *pf;
	struct pci_dev *pdev;
	int ret = 0, total;

	list_for_each_entry(pf, &set->pfs, node) {
		pdev = vfcfg_resolve(pf);
		if (!pdev)
			continue;
		total = pci_sriov_get_totalvfs(pdev);
		if (!READ_ONCE(pdev->dev.driver)) {
			ret = 0;	/* igb lowers TotalVFs when it binds */
		} else if (!pdev->is_physfn || total <= 0) {
			snprintf(err, len, "%s: %s has no SR-IOV capability",
				 pf->match, pci_name(pdev));
			ret = -EINVAL;
		} else {
			ret = vfcfg_check_totalvfs(pf, total, why, sizeof(why));
			if (ret)
				snprintf(err, len, "%s: %s", pf->match, why);
		}
		pci_dev_put(pdev);
		if (ret)
			return ret;
	}
	return 0;
}

static int vfcfg_param_set(const char *val, const struct kernel_param *kp)
{
	char err[VFCFG_ERR_LEN];
	struct vfcfg_set *set, *old;
	int ret;

	set = vfcfg_parse(val, err, sizeof(err));
	if (!IS_ERR(set)) {
		ret = vfcfg_check_present(set, err, sizeof(err));
		if (ret) {
			vfcfg_set_put(set);
			set = ERR_PTR(ret);
		}
	}
	mutex_lock(&vfcfg_lock);
	if (IS_ERR(set)) {
		strscpy(vfcfg_last_err, err, sizeof(vfcfg_last_err));
		mutex_unlock(&vfcfg_lock);
		pr_err("policy refused, nothing changed: %s\n", err);
		return PTR_ERR(set);
	}
	if (vfcfg_life == VFCFG_GONE) {
		mutex_unlock(&vfcfg_lock);
		vfcfg_set_put(set);
		return -ENODEV;
	}
	vfcfg_last_err[0] = '\0';
	old = vfcfg_cur;
	vfcfg_cur = set;
	vfcfg_kick(VFCFG_WHY_POLICY);
	mutex_unlock(&vfcfg_lock);
	/* a PF left out of the new policy keeps its VFs as they are */
	vfcfg_set_put(old);
	return 0;
}

/*
 * Forget the policy for good: mark the module gone, so that a write to the
 * parameter (possible until the module's sysfs is torn down) is refused
 * instead of publishing a set nobody frees, and drop the current set.
 */
static void vfcfg_drop_policy(void)
{
	struct vfcfg_set *set;

	mutex_lock(&vfcfg_lock);
	vfcfg_life = VFCFG_GONE;
	set = vfcfg_cur;
	vfcfg_cur = NULL;
	mutex_unlock(&vfcfg_lock);
	vfcfg_set_put(set);
}

/*
 * Called when the module is freed, also when its load fails after the
 * policy was parsed but before vfcfg_init() ran: a later parameter that is
 * refused (modprobe puts the options of modprobe.d before those of its
 * command line), or the module's sysfs failing.  Init and exit have
 * dropped the policy themselves when they ran.
 */
static void vfcfg_param_free(void *arg)
{
	vfcfg_drop_policy();
}

static int vfcfg_param_get(char *buf, const struct kernel_param *kp)
{
	int n;

	mutex_lock(&vfcfg_lock);
	n = scnprintf(buf, PAGE_SIZE, "%s\n", vfcfg_cur ? vfcfg_cur->text : "");
	mutex_unlock(&vfcfg_lock);
	return n;
}

static const struct kernel_param_ops vfcfg_param_ops = {
	.set = vfcfg_param_set,
	.get = vfcfg_param_get,
	.free = vfcfg_param_free,
};

module_param_cb(policy, &vfcfg_param_ops, NULL, 0644);
MODULE_PARM_DESC(policy,
		 "VF policy: PF blocks separated by ';', items by ','; e.g. pf=0000:01:00.0,numvfs=4,mac_base=02:00:00:00:01:00,vf1.vlan=10,vf*.spoofchk=on (see Documentation/sriov-helper.md)");

static const char *const vfcfg_link_states[] = {
	[IFLA_VF_LINK_STATE_AUTO] = "auto",
	[IFLA_VF_LINK_STATE_ENABLE] = "enable",
	[IFLA_VF_LINK_STATE_DISABLE] = "disable",
};

/* in the order of VFCFG_WHY_* bits */
static const char *const vfcfg_why_names[] = {
	"module load", "policy write", "apply write", "PF probe",
	"PF unbind", "PF netdev event", "PF carrier up", "VF driver bound",
	"retry", "drift check",
};

/* one op's result; caller holds vfcfg_lock */
static void vfcfg_show_res(struct seq_file *m, const struct vfcfg_pf *pf,
			   const struct vfcfg_vf *vf, unsigned int op)
{
	int r = vf->res[op];

	if (r == VFCFG_RES_PENDING)
		seq_puts(m, ": pending;");
	else if (r == VFCFG_RES_IN_USE)
		seq_printf(m, ": in use by %s, not rebound (force overrides);",
			   vf->bound);
	else if (!r && vf->busy[op])
		seq_printf(m, ": ok after %u busy answers;", vf->busy[op]);
	else if (!r)
		seq_puts(m, ": ok;");
	else if (vfcfg_busy(r) && pf->retrying)
		seq_printf(m, ": %pe, retrying (%u busy answers);", ERR_PTR(r),
			   vf->busy[op]);
	else if (vfcfg_busy(r))
		seq_printf(m, ": %pe after %u busy answers, gave up;", ERR_PTR(r),
			   vf->busy[op]);
	else if (op == VFCFG_OP_DRIVER && r == -ENXIO)
		seq_puts(m, ": not bound, see dmesg;");
	else if (r == -ENODEV)
		seq_puts(m, ": no such VF;");
	else
		seq_printf(m, ": %pe;", ERR_PTR(r));
}

/* one VF's line of the status file; caller holds vfcfg_lock */
static void vfcfg_show_vf(struct seq_file *m, const struct vfcfg_pf *pf,
			  unsigned int i)
{
	const struct vfcfg_vf *vf = &pf->vf[i];
	unsigned int op;

	seq_printf(m, "  vf%u:", i);
	for (op = 0; op < VFCFG_OP_NR; op++) {
		if (!vfcfg_op_wanted(vf, op))
			continue;
		seq_printf(m, " %s ", vfcfg_op_names[op]);
		switch (op) {
		case VFCFG_OP_MAC:
			seq_printf(m, "%pM", vf->mac);
			break;
		case VFCFG_OP_VLAN:
			seq_printf(m, "%u qos %u %s", vf->vlan, vf->qos,
				   vf->proto == htons(ETH_P_8021AD) ?
				   "802.1ad" : "802.1Q");
			break;
		case VFCFG_OP_SPOOFCHK:
			seq_puts(m, vf->spoofchk ? "on" : "off");
			break;
		case VFCFG_OP_TRUST:
			seq_puts(m, vf->trust ? "on" : "off");
			break;
		case VFCFG_OP_RATE:
			seq_printf(m, "%u-%u", vf->min_rate, vf->max_rate);
			break;
		case VFCFG_OP_STATE:
			seq_puts(m, vfcfg_link_states[vf->link_state]);
			break;
		case VFCFG_OP_QUERY_RSS:
			seq_puts(m, vf->query_rss ? "on" : "off");
			break;
		case VFCFG_OP_DRIVER:
			seq_puts(m, vf->driver);
			break;
		}
		vfcfg_show_res(m, pf, vf, op);
	}
	seq_putc(m, '\n');
}

static void vfcfg_show_why(struct seq_file *m, unsigned int why)
{
	const char *sep = "";
	unsigned int b;

	for (b = 0; b < ARRAY_SIZE(vfcfg_why_names); b++) {
		if (why & BIT(b)) {
			seq_printf(m, "%s%s", sep, vfcfg_why_names[b]);
			sep = " + ";
		}
	}
}

/*
 * Which pass applied @pf last and why, and which pass last could change
 * its VF count and drivers; caller holds vfcfg_lock
 */
static void vfcfg_show_pass(struct seq_file *m, const struct vfcfg_pf *pf)
{
	if (!pf->pass)
		return;
	seq_printf(m, "  last pass: #%u after ", pf->pass);
	vfcfg_show_why(m, pf->why);
	seq_printf(m, " (%s)\n",
		   pf->full ? "count, drivers, attributes" : "attributes");
	if (!pf->full_pass)
		return;
	seq_printf(m, "  last full pass: #%u after ", pf->full_pass);
	vfcfg_show_why(m, pf->full_why);
	seq_putc(m, '\n');
}

/*
 * /proc/driver/sriov_vfcfg, through single_open(): all of it is printed
 * under vfcfg_lock in one call (seq_file calls again with a larger buffer
 * until it fits), so a reader sees one state, however many PFs and VFs.
 */
static int vfcfg_status_show(struct seq_file *m, void *v)
{
	struct vfcfg_pf *pf;
	unsigned int i;

	mutex_lock(&vfcfg_lock);
	if (vfcfg_last_err[0])
		seq_printf(m, "last write refused: %s\n", vfcfg_last_err);
	if (vfcfg_cur) {
		list_for_each_entry(pf, &vfcfg_cur->pfs, node) {
			seq_printf(m, "%s: %s\n", pf->match,
				   pf->state[0] ? pf->state : "not applied yet");
			vfcfg_show_pass(m, pf);
			/* its VFs are another block's business */
			if (pf->shadowed)
				continue;
			for (i = 0; i < pf->nvf; i++)
				if (pf->vf[i].keys)
					vfcfg_show_vf(m, pf, i);
		}
	}
	mutex_unlock(&vfcfg_lock);
	return 0;
}

static ssize_t apply_store(struct kobject *kobj, struct kobj_attribute *attr,
			   const char *buf, size_t count)
{
	vfcfg_kick_locked(VFCFG_WHY_APPLY);
	flush_delayed_work(&vfcfg_work);
	return count;
}

static struct kobj_attribute vfcfg_apply_attr = __ATTR_WO(apply);

static struct attribute *vfcfg_attrs[] = {
	&vfcfg_apply_attr.attr,
	NULL
};

static const struct attribute_group vfcfg_group = {
	.attrs = vfcfg_attrs,
};

/* after the notifiers are gone and the work is stopped: nobody adds more */
static void vfcfg_probed_free(void)
{
	struct vfcfg_probed *p, *tmp;

	list_for_each_entry_safe(p, tmp, &vfcfg_probed, node) {
		list_del(&p->node);
		pci_dev_put(p->pdev);
		kfree(p);
	}
}

static int __init vfcfg_init(void)
{
	int ret = -ENOMEM;

	vfcfg_kobj = kobject_create_and_add(KBUILD_MODNAME, kernel_kobj);
	if (!vfcfg_kobj)
		goto drop_policy;
	ret = sysfs_create_group(vfcfg_kobj, &vfcfg_group);
	if (ret)
		goto put_kobj;
	if (!proc_create_single(VFCFG_PROC_STATUS, 0444, NULL,
				vfcfg_status_show)) {
		ret = -ENOMEM;
		goto put_kobj;
	}
	vfcfg_debugfs_init();

	mutex_lock(&vfcfg_lock);
	vfcfg_life = VFCFG_LIVE;
	mutex_unlock(&vfcfg_lock);

	ret = bus_register_notifier(&pci_bus_type, &vfcfg_pci_nb);
	if (ret)
		goto dead;
	/* replays NETDEV_REGISTER for PFs that are already there */
	ret = register_netdevice_notifier(&vfcfg_netdev_nb);
	if (ret)
		goto unreg_bus;

	mutex_lock(&vfcfg_lock);
	vfcfg_kick(VFCFG_WHY_LOAD);
	vfcfg_resync_arm();
	mutex_unlock(&vfcfg_lock);
	pr_info("loaded; unloading leaves VFs as they are\n");
	return 0;

unreg_bus:
	bus_unregister_notifier(&pci_bus_type, &vfcfg_pci_nb);
dead:
	mutex_lock(&vfcfg_lock);
	vfcfg_life = VFCFG_GONE;
	mutex_unlock(&vfcfg_lock);
	cancel_delayed_work_sync(&vfcfg_resync_work);
	cancel_delayed_work_sync(&vfcfg_work);
	vfcfg_probed_free();
	vfcfg_debugfs_exit();
	remove_proc_entry(VFCFG_PROC_STATUS, NULL);
put_kobj:
	kobject_put(vfcfg_kobj);
drop_policy:
	/* the policy parameter was parsed before init ran */
	vfcfg_drop_policy();
	return ret;
}

/*
 * Unload stops watching; it does not touch the VFs: their count,
 * attributes and driver overrides stay as last applied.
 */
static void __exit vfcfg_exit(void)
{
	mutex_lock(&vfcfg_lock);
	vfcfg_life = VFCFG_GONE;
	mutex_unlock(&vfcfg_lock);
	unregister_netdevice_notifier(&vfcfg_netdev_nb);
	bus_unregister_notifier(&pci_bus_type, &vfcfg_pci_nb);
	cancel_delayed_work_sync(&vfcfg_resync_work);
	cancel_delayed_work_sync(&vfcfg_work);
	vfcfg_probed_free();
	vfcfg_debugfs_exit();
	remove_proc_entry(VFCFG_PROC_STATUS, NULL);
	kobject_put(vfcfg_kobj);
	vfcfg_drop_policy();
	pr_info("unloaded; VFs keep their current configuration\n");
}

module_init(vfcfg_init);
module_exit(vfcfg_exit);

MODULE_DESCRIPTION("Declared SR-IOV VF configuration, applied whenever a PF appears");
MODULE_LICENSE("GPL");
