// SPDX-License-Identifier: GPL-2.0
/*
 * sriov_vfcfg: keeps SR-IOV virtual functions configured.
 *
 * A declared policy (module parameter "policy", writable at run time) says,
 * per PF, how many VFs it has and how each VF is set up.  Whenever a
 * matching PF's driver binds or its net device registers, comes up or is
 * renamed, one work item applies the policy: the VF count through the PF
 * driver's sriov_configure (as sysfs sriov_numvfs does), VF attributes
 * through the PF's ndo_set_vf_* under RTNL, and a VF driver override from a
 * PCI bus notifier that runs before the new VF can probe.  A PF that is
 * not PCI (netdevsim) gets the VF attributes only, on the VFs it has.
 * Results per PF and VF are in /proc/driver/sriov_vfcfg (a seq_file: sysfs
 * would cut them at one page).
 *
 * Lock order: device_lock(PF) -> rtnl_lock; vfcfg_lock is a leaf taken
 * under either of them, and nothing is acquired while holding it.  The PF
 * driver takes RTNL inside sriov_configure (igb does), so RTNL is never held
 * across it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bitmap.h>
#include <linux/device.h>
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

static void vfcfg_apply_all(struct work_struct *work);
static DECLARE_WORK(vfcfg_work, vfcfg_apply_all);

static struct kobject *vfcfg_kobj;

#define VFCFG_PROC_STATUS	"driver/" KBUILD_MODNAME

/* caller holds vfcfg_lock */
static void vfcfg_kick(void)
{
	if (vfcfg_life == VFCFG_LIVE && vfcfg_cur)
		queue_work(system_unbound_wq, &vfcfg_work);
}

static struct vfcfg_set *vfcfg_get_set(void)
{
	struct vfcfg_set *set;

	mutex_lock(&vfcfg_lock);
	set = vfcfg_cur;
	if (set)
		kref_get(&set->ref);
	mutex_unlock(&vfcfg_lock);
	return set;
}

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

/* --- applying ------------------------------------------------------------ */

/*
 * Set the VF count the way sysfs sriov_numvfs does: under the PF's device
 * lock (so the PF driver cannot unbind meanwhile) and the rescan lock,
 * going through zero when the count changes.  Returns 1 when it created
 * VFs, 0 when the count was already right.
 */
static int vfcfg_set_numvfs(struct pci_dev *pdev, int want, char *why,
			    size_t len)
{
	int ret = 0;

	device_lock(&pdev->dev);
	if (pci_num_vf(pdev) == want)
		goto out;
	if (!pdev->driver || !pdev->driver->sriov_configure) {
		snprintf(why, len, "PF driver %s cannot set the VF count",
			 pdev->driver ? pdev->driver->name : "(none)");
		ret = -EOPNOTSUPP;
		goto out;
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
	} else {
		pci_info(pdev, "%s: %d VFs enabled\n", KBUILD_MODNAME, want);
		ret = want > 0;
	}
out:
	device_unlock(&pdev->dev);
	return ret;
}

/*
 * Apply one VF's attributes, each op on its own; caller holds RTNL.
 * Returns whether the VF's MAC was changed.
 */
static bool vfcfg_apply_vf(struct net_device *dev, int i,
			   const struct vfcfg_vf *vf, int *res)
{
	bool mac_set = false;

	const struct net_device_ops *ops = dev->netdev_ops;
	struct ifla_vf_info ivi;
	bool known;

	ASSERT_RTNL();
	/* the defaults rtnetlink uses: unknown reads as "always set it" */
	memset(&ivi, 0, sizeof(ivi));
	ivi.vlan_proto = htons(ETH_P_8021Q);
	ivi.spoofchk = -1;
	ivi.trusted = -1;
	ivi.linkstate = -1;
	known = ops->ndo_get_vf_config && !ops->ndo_get_vf_config(dev, i, &ivi);

	if (vf->keys & BIT(VFCFG_K_MAC)) {
		if (!ops->ndo_set_vf_mac)
			res[VFCFG_OP_MAC] = -EOPNOTSUPP;
		else if (known && ether_addr_equal(ivi.mac, vf->mac))
			res[VFCFG_OP_MAC] = 0;
		else
			mac_set = !(res[VFCFG_OP_MAC] =
				    ops->ndo_set_vf_mac(dev, i, (u8 *)vf->mac));
	}
	if (vf->keys & BIT(VFCFG_K_VLAN)) {
		if (!ops->ndo_set_vf_vlan)
			res[VFCFG_OP_VLAN] = -EOPNOTSUPP;
		else if (known && ivi.vlan == vf->vlan && ivi.qos == vf->qos &&
			 ivi.vlan_proto == vf->proto)
			res[VFCFG_OP_VLAN] = 0;
		else
			res[VFCFG_OP_VLAN] = ops->ndo_set_vf_vlan(dev, i, vf->vlan,
								  vf->qos, vf->proto);
	}
	if (vf->keys & BIT(VFCFG_K_SPOOFCHK)) {
		if (!ops->ndo_set_vf_spoofchk)
			res[VFCFG_OP_SPOOFCHK] = -EOPNOTSUPP;
		else if (known && ivi.spoofchk == vf->spoofchk)
			res[VFCFG_OP_SPOOFCHK] = 0;
		else
			res[VFCFG_OP_SPOOFCHK] =
				ops->ndo_set_vf_spoofchk(dev, i, vf->spoofchk);
	}
	if (vf->keys & BIT(VFCFG_K_TRUST)) {
		if (!ops->ndo_set_vf_trust)
			res[VFCFG_OP_TRUST] = -EOPNOTSUPP;
		else if (known && ivi.trusted == vf->trust)
			res[VFCFG_OP_TRUST] = 0;
		else
			res[VFCFG_OP_TRUST] = ops->ndo_set_vf_trust(dev, i, vf->trust);
	}
	if (vf->keys & (BIT(VFCFG_K_MIN_RATE) | BIT(VFCFG_K_MAX_RATE))) {
		if (!ops->ndo_set_vf_rate)
			res[VFCFG_OP_RATE] = -EOPNOTSUPP;
		else if (known && ivi.min_tx_rate == vf->min_rate &&
			 ivi.max_tx_rate == vf->max_rate)
			res[VFCFG_OP_RATE] = 0;
		else
			res[VFCFG_OP_RATE] = ops->ndo_set_vf_rate(dev, i, vf->min_rate,
								  vf->max_rate);
	}
	if (vf->keys & BIT(VFCFG_K_STATE)) {
		if (!ops->ndo_set_vf_link_state)
			res[VFCFG_OP_STATE] = -EOPNOTSUPP;
		else if (known && ivi.linkstate == vf->link_state)
			res[VFCFG_OP_STATE] = 0;
		else
			res[VFCFG_OP_STATE] =
				ops->ndo_set_vf_link_state(dev, i, vf->link_state);
	}
	return mac_set;
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
		[VFCFG_OP_DRIVER] = BIT(VFCFG_K_DRIVER),
	};

	return vf->keys & keys[op];
}

static bool vfcfg_bound_to(struct pci_dev *vf, const char *name)
{
	bool ret;

	device_lock(&vf->dev);
	ret = vf->dev.driver && !strcmp(vf->dev.driver->name, name);
	device_unlock(&vf->dev);
	return ret;
}

/*
 * Bind an existing VF to the named driver, as "echo NAME >
 * driver_override; echo VF > unbind; echo VF > drivers_probe" would.  VFs
 * created by our own sriov_configure already got the override from the bus
 * notifier before they could probe.
 */
static int vfcfg_vf_driver(struct pci_dev *vf, const char *name)
{
	int ret;

	if (!vfcfg_override_is(vf, name)) {
		ret = vfcfg_override_set(vf, name);
		if (ret)
			return ret;
	}
	if (vfcfg_bound_to(vf, name))
		return 0;
	device_release_driver(&vf->dev);
	/* without udev nobody loads a driver the VF's modalias does not name */
	if (!driver_find(name, &pci_bus_type))
		request_module("%s", name);
	ret = device_attach(&vf->dev);
	if (ret < 0)
		return ret;
	return vfcfg_bound_to(vf, name) ? 0 : -ENXIO;
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

/* the PF driver is gone and its VFs with it: last results no longer hold */
static void vfcfg_pf_forget(struct vfcfg_pf *pf)
{
	unsigned int i, op;

	mutex_lock(&vfcfg_lock);
	for (i = 0; i < pf->nvf; i++)
		for (op = 0; op < VFCFG_OP_NR; op++)
			pf->vf[i].res[op] = VFCFG_RES_PENDING;
	mutex_unlock(&vfcfg_lock);
}

/* store one application's results; caller holds vfcfg_lock */
static unsigned int vfcfg_store_res(struct vfcfg_pf *pf,
				    int (*res)[VFCFG_OP_NR])
{
	unsigned int i, op, failed = 0;

	for (i = 0; i < pf->nvf; i++) {
		for (op = 0; op < VFCFG_OP_NR; op++) {
			if (!vfcfg_op_wanted(&pf->vf[i], op))
				continue;
			pf->vf[i].res[op] = res[i][op];
			if (res[i][op])
				failed++;
		}
	}
	return failed;
}

/*
 * A policy without pf= whose ifname/permaddr names a non-PCI PF
 * (netdevsim), whose VFs @bus counts.  There is no PCI sriov_configure,
 * and the bus's own VF count knob is a sysfs store we must not call from
 * here: the VF count is not applied (numvfs is reported as not applicable
 * when it differs) and the VF attributes go to the VFs that exist; the
 * others stay "no such VF" until the next apply.  Returns false when the
 * PF's net device is gone (or renamed) since vfcfg_select().
 */
static bool vfcfg_apply_nonpci(struct vfcfg_pf *pf, struct device *bus)
{
	char ifname[IFNAMSIZ] = "";
	struct net_device *dev, *found = NULL;
	int (*res)[VFCFG_OP_NR];
	unsigned int i, nvf, failed;
	int cur;

	res = kmalloc_array(pf->nvf ?: 1, sizeof(*res), GFP_KERNEL);
	if (!res) {
		vfcfg_pf_state(pf, "", "out of memory");
		return true;
	}
	for (i = 0; i < pf->nvf; i++)
		memset32((u32 *)res[i], (u32)-ENODEV, VFCFG_OP_NR);

	rtnl_lock();
	for_each_netdev(&init_net, dev) {
		if (dev->dev.parent == bus && vfcfg_netdev_vfbus(dev) &&
		    vfcfg_netdev_matches(pf, dev)) {
			found = dev;
			break;
		}
	}
	if (!found) {
		rtnl_unlock();
		kfree(res);
		return false;
	}
	cur = max(dev_num_vf(found->dev.parent), 0);
	nvf = min_t(unsigned int, pf->nvf, cur);
	for (i = 0; i < nvf; i++) {
		vfcfg_apply_vf(found, i, &pf->vf[i], res[i]);
		/* its VFs are not devices of their own: nothing to bind */
		if (pf->vf[i].keys & BIT(VFCFG_K_DRIVER))
			res[i][VFCFG_OP_DRIVER] = -EOPNOTSUPP;
	}
	strscpy(ifname, found->name, sizeof(ifname));
	rtnl_unlock();

	mutex_lock(&vfcfg_lock);
	pf->found[0] = '\0';
	failed = vfcfg_store_res(pf, res);
	snprintf(pf->state, sizeof(pf->state),
		 "%s %s: %d VFs (not PCI), applied", dev_name(bus), ifname, cur);
	if (pf->numvfs >= 0 && pf->numvfs != cur)
		scnprintf(pf->state + strlen(pf->state),
			  sizeof(pf->state) - strlen(pf->state),
			  ", numvfs %d not applicable", pf->numvfs);
	if (failed)
		scnprintf(pf->state + strlen(pf->state),
			  sizeof(pf->state) - strlen(pf->state),
			  ", %u VF settings failed", failed);
	mutex_unlock(&vfcfg_lock);
	kfree(res);
	return true;
}

/* a block that selects the PCI device @pdev; the caller holds a reference */
static void vfcfg_apply_pci(struct vfcfg_pf *pf, struct pci_dev *pdev)
{
	char why[VFCFG_ERR_LEN] = "", ifname[IFNAMSIZ] = "";
	struct net_device *dev;
	struct pci_dev *vf;
	unsigned int i, nvf, failed;
	int (*res)[VFCFG_OP_NR];
	unsigned long *reprobe = NULL;
	int ret, total, cur, created = 0;

	/*
	 * Unlocked peek: the PF driver's probe ends with BUS_NOTIFY_BOUND_DRIVER,
	 * which runs this again; vfcfg_set_numvfs() checks under the lock.
	 * TotalVFs is read only once the driver is there: igb lowers it.
	 */
	if (!READ_ONCE(pdev->dev.driver)) {
		vfcfg_pf_state(pf, pci_name(pdev), "%s: waiting for a PF driver",
			       pci_name(pdev));
		vfcfg_pf_forget(pf);
		return;
	}
	total = pci_sriov_get_totalvfs(pdev);
	if (!pdev->is_physfn || total <= 0) {
		vfcfg_pf_state(pf, "", "%s has no SR-IOV capability",
			       pci_name(pdev));
		return;
	}
	/* validated whole before anything is touched */
	ret = vfcfg_check_totalvfs(pf, total, why, sizeof(why));
	if (ret) {
		vfcfg_pf_state(pf, "", "%s: refused: %s", pci_name(pdev), why);
		pci_err(pdev, "%s: policy %s refused: %s\n", KBUILD_MODNAME,
			pf->match, why);
		return;
	}
	/* publish the address first: the VFs created below look it up */
	vfcfg_pf_state(pf, pci_name(pdev), "applying");

	res = kmalloc_array(pf->nvf ?: 1, sizeof(*res), GFP_KERNEL);
	if (!res) {
		vfcfg_pf_state(pf, pci_name(pdev), "out of memory");
		return;
	}
	/* what is not reached below stays "no such VF" */
	for (i = 0; i < pf->nvf; i++)
		memset32((u32 *)res[i], (u32)-ENODEV, VFCFG_OP_NR);

	if (pf->numvfs >= 0) {
		created = vfcfg_set_numvfs(pdev, pf->numvfs, why, sizeof(why));
		if (created < 0)
			pci_err(pdev, "%s: %s\n", KBUILD_MODNAME, why);
	}

	cur = pci_num_vf(pdev);
	nvf = min_t(unsigned int, pf->nvf, cur);
	rtnl_lock();
	dev = vfcfg_pf_netdev(pdev);
	/* igb answers a VF's reset (and hands it its MAC) only while up */
	if (created > 0 && dev && netif_running(dev))
		reprobe = bitmap_zalloc(nvf, GFP_KERNEL);
	if (dev) {
		strscpy(ifname, dev->name, sizeof(ifname));
		for (i = 0; i < nvf; i++)
			if (vfcfg_apply_vf(dev, i, &pf->vf[i], res[i]) && reprobe)
				__set_bit(i, reprobe);
	} else if (!why[0] && nvf) {
		snprintf(why, sizeof(why), "PF has no net device yet");
	}
	rtnl_unlock();

	for_each_pci_dev(vf) {
		int id;

		if (!vf->is_virtfn || pci_physfn(vf) != pdev)
			continue;
		id = pci_iov_vf_id(vf);
		if (id < 0 || id >= nvf)
			continue;
		/*
		 * A VF driver reads its MAC from the PF when it probes (igbvf
		 * does), and a VF we just created probed before its MAC was
		 * set: reprobe it.  Nobody can be using it yet.  VFs that
		 * existed before are left bound: the new MAC reaches them at
		 * their driver's next reset, as with "ip link set vf mac".
		 */
		if (reprobe && test_bit(id, reprobe) && READ_ONCE(vf->dev.driver)) {
			device_release_driver(&vf->dev);
			if (device_attach(&vf->dev) < 0)
				pci_warn(vf, "%s: reprobe failed\n", KBUILD_MODNAME);
		}
		if (pf->vf[id].keys & BIT(VFCFG_K_DRIVER))
			res[id][VFCFG_OP_DRIVER] =
				vfcfg_vf_driver(vf, pf->vf[id].driver);
	}
	bitmap_free(reprobe);

	mutex_lock(&vfcfg_lock);
	failed = vfcfg_store_res(pf, res);
	snprintf(pf->state, sizeof(pf->state), "%s%s%s: %d VFs (totalvfs %d)%s%s",
		 pci_name(pdev), ifname[0] ? " " : "", ifname, cur, total,
		 why[0] ? ", error: " : ", applied", why);
	if (failed)
		scnprintf(pf->state + strlen(pf->state),
			  sizeof(pf->state) - strlen(pf->state),
			  ", %u VF settings failed", failed);
	mutex_unlock(&vfcfg_lock);
	kfree(res);
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
 * PF and only one of them is applied to it.
 */
static void vfcfg_apply_all(struct work_struct *work)
{
	struct vfcfg_set *set = vfcfg_get_set();
	struct vfcfg_pf *pf;

	if (!set)
		return;
	list_for_each_entry(pf, &set->pfs, node)
		pf->sel = vfcfg_select(pf);
	vfcfg_mark_conflicts(set);
	list_for_each_entry(pf, &set->pfs, node) {
		if (!pf->sel)
			vfcfg_pf_state(pf, "", "not present");
		else if (pf->shadowed)	/* set just above, by this work */
			continue;
		else if (dev_is_pci(pf->sel))
			vfcfg_apply_pci(pf, to_pci_dev(pf->sel));
		else if (!vfcfg_apply_nonpci(pf, pf->sel))
			vfcfg_pf_state(pf, "", "not present");
	}
	list_for_each_entry(pf, &set->pfs, node) {
		put_device(pf->sel);
		pf->sel = NULL;
	}
	vfcfg_set_put(set);
}

/* --- notifiers ----------------------------------------------------------- */

/*
 * A VF is being added: give it the policy's driver override now, before
 * pci_bus_add_device() lets it probe, so it never binds its native driver
 * first.  Runs inside our own sriov_configure call (device_lock(PF) held).
 */
static void vfcfg_vf_added(struct pci_dev *vf)
{
	char name[VFCFG_DRV_LEN] = "";
	struct pci_dev *pdev = pci_physfn(vf);
	int id = pci_iov_vf_id(vf);
	struct vfcfg_pf *pf;

	if (id < 0)
		return;
	mutex_lock(&vfcfg_lock);
	if (vfcfg_cur) {
		list_for_each_entry(pf, &vfcfg_cur->pfs, node) {
			if (strcmp(pf->found, pci_name(pdev)))
				continue;
			if (id < pf->nvf && (pf->vf[id].keys & BIT(VFCFG_K_DRIVER)))
				strscpy(name, pf->vf[id].driver, sizeof(name));
			break;
		}
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
	case BUS_NOTIFY_UNBOUND_DRIVER:
		if (pdev->is_physfn) {
			mutex_lock(&vfcfg_lock);
			vfcfg_kick();
			mutex_unlock(&vfcfg_lock);
		}
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

	switch (event) {
	case NETDEV_CHANGE:
		/* igb limits VF rates only with link: retry when it comes */
		if (!netif_carrier_ok(dev))
			break;
		fallthrough;
	case NETDEV_REGISTER:
	case NETDEV_UP:
	case NETDEV_CHANGENAME:
		if (!vfcfg_netdev_pci(dev) && !vfcfg_netdev_vfbus(dev))
			break;
		mutex_lock(&vfcfg_lock);
		vfcfg_kick();
		mutex_unlock(&vfcfg_lock);
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
	vfcfg_kick();
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

static const char *const vfcfg_op_names[VFCFG_OP_NR] = {
	[VFCFG_OP_MAC] = "mac",
	[VFCFG_OP_VLAN] = "vlan",
	[VFCFG_OP_SPOOFCHK] = "spoofchk",
	[VFCFG_OP_TRUST] = "trust",
	[VFCFG_OP_RATE] = "rate",
	[VFCFG_OP_STATE] = "state",
	[VFCFG_OP_DRIVER] = "driver",
};

static const char *const vfcfg_link_states[] = {
	[IFLA_VF_LINK_STATE_AUTO] = "auto",
	[IFLA_VF_LINK_STATE_ENABLE] = "enable",
	[IFLA_VF_LINK_STATE_DISABLE] = "disable",
};

/* one VF's line of the status file; caller holds vfcfg_lock */
static void vfcfg_show_vf(struct seq_file *m, const struct vfcfg_vf *vf,
			  unsigned int i)
{
	unsigned int op;
	int r;

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
		case VFCFG_OP_DRIVER:
			seq_puts(m, vf->driver);
			break;
		}
		r = vf->res[op];
		if (r == VFCFG_RES_PENDING)
			seq_puts(m, ": pending;");
		else if (!r)
			seq_puts(m, ": ok;");
		else if (op == VFCFG_OP_DRIVER && r == -ENXIO)
			seq_puts(m, ": not bound, see dmesg;");
		else if (r == -ENODEV)
			seq_puts(m, ": no such VF;");
		else
			seq_printf(m, ": %pe;", ERR_PTR(r));
	}
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
			/* its VFs are another block's business */
			if (pf->shadowed)
				continue;
			for (i = 0; i < pf->nvf; i++)
				if (pf->vf[i].keys)
					vfcfg_show_vf(m, &pf->vf[i], i);
		}
	}
	mutex_unlock(&vfcfg_lock);
	return 0;
}

static ssize_t apply_store(struct kobject *kobj, struct kobj_attribute *attr,
			   const char *buf, size_t count)
{
	mutex_lock(&vfcfg_lock);
	vfcfg_kick();
	mutex_unlock(&vfcfg_lock);
	flush_work(&vfcfg_work);
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
	vfcfg_kick();
	mutex_unlock(&vfcfg_lock);
	pr_info("loaded; unloading leaves VFs as they are\n");
	return 0;

unreg_bus:
	bus_unregister_notifier(&pci_bus_type, &vfcfg_pci_nb);
dead:
	mutex_lock(&vfcfg_lock);
	vfcfg_life = VFCFG_GONE;
	mutex_unlock(&vfcfg_lock);
	cancel_work_sync(&vfcfg_work);
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
	cancel_work_sync(&vfcfg_work);
	remove_proc_entry(VFCFG_PROC_STATUS, NULL);
	kobject_put(vfcfg_kobj);
	vfcfg_drop_policy();
	pr_info("unloaded; VFs keep their current configuration\n");
}

module_init(vfcfg_init);
module_exit(vfcfg_exit);

MODULE_DESCRIPTION("Declared SR-IOV VF configuration, applied whenever a PF appears");
MODULE_LICENSE("GPL");
