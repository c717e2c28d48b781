// SPDX-License-Identifier: GPL-2.0
/*
 * sriov_vfcfg policy parser and validator.
 *
 * A policy is a list of PF blocks separated by ';' or newlines; a block is a
 * list of key=value items separated by ',' or blanks (see
 * Documentation/sriov-helper.md).  The whole text is validated before the
 * caller publishes it, so a bad policy never reaches a device.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/ctype.h>
#include <linux/if_link.h>
#include <linux/if_vlan.h>
#include <linux/kernel.h>
#include <linux/netdevice.h>
#include <linux/pci.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "vfcfg.h"

static const char *const vfcfg_keys[VFCFG_K_NR] = {
	[VFCFG_K_MAC] = "mac",
	[VFCFG_K_VLAN] = "vlan",
	[VFCFG_K_QOS] = "qos",
	[VFCFG_K_PROTO] = "proto",
	[VFCFG_K_SPOOFCHK] = "spoofchk",
	[VFCFG_K_TRUST] = "trust",
	[VFCFG_K_MIN_RATE] = "min_tx_rate",
	[VFCFG_K_MAX_RATE] = "max_tx_rate",
	[VFCFG_K_STATE] = "state",
	[VFCFG_K_QUERY_RSS] = "query_rss",
	[VFCFG_K_DRIVER] = "driver",
};

/* parse state of one PF block */
struct vfcfg_block {
	struct vfcfg_pf *pf;
	bool has_base;
	u8 mac_base[ETH_ALEN];
	int max_index;			/* highest vfN seen, -1 none */
	struct vfcfg_vf all;		/* vf*.KEY defaults */
	struct vfcfg_vf vf[VFCFG_MAX_VFS];
};

static int vfcfg_mac(const char *val, u8 *mac, bool unicast, char *err,
		     size_t errlen, const char *what)
{
	if (strlen(val) != 17 || !mac_pton(val, mac)) {
		snprintf(err, errlen, "%s: '%s' is not a MAC address", what, val);
		return -EINVAL;
	}
	if (!unicast)
		return 0;
	if (is_zero_ether_addr(mac)) {
		snprintf(err, errlen, "%s: zero MAC address", what);
		return -EINVAL;
	}
	if (is_multicast_ether_addr(mac)) {
		snprintf(err, errlen, "%s: %pM is a multicast address", what, mac);
		return -EINVAL;
	}
	return 0;
}

static int vfcfg_u32(const char *val, u32 max, u32 *out, char *err,
		     size_t errlen, const char *what)
{
	if (kstrtou32(val, 10, out) || *out > max) {
		snprintf(err, errlen, "%s: '%s' is not a number in 0..%u", what,
			 val, max);
		return -EINVAL;
	}
	return 0;
}

static int vfcfg_vf_key(struct vfcfg_vf *vf, const char *key, const char *val,
			const char *what, char *err, size_t errlen)
{
	unsigned int k;
	bool b;
	u32 n;
	int ret = 0;

	for (k = 0; k < VFCFG_K_NR; k++)
		if (!strcmp(key, vfcfg_keys[k]))
			break;
	if (k == VFCFG_K_NR) {
		snprintf(err, errlen, "%s: unknown key", what);
		return -EINVAL;
	}
	if (vf->keys & BIT(k)) {
		snprintf(err, errlen, "%s: given twice", what);
		return -EINVAL;
	}

	switch (k) {
	case VFCFG_K_MAC:
		ret = vfcfg_mac(val, vf->mac, true, err, errlen, what);
		break;
	case VFCFG_K_VLAN:
		ret = vfcfg_u32(val, VLAN_VID_MASK, &n, err, errlen, what);
		vf->vlan = n;
		break;
	case VFCFG_K_QOS:
		ret = vfcfg_u32(val, 7, &n, err, errlen, what);
		vf->qos = n;
		break;
	case VFCFG_K_PROTO:
		if (!strcasecmp(val, "802.1Q")) {
			vf->proto = htons(ETH_P_8021Q);
		} else if (!strcasecmp(val, "802.1ad")) {
			vf->proto = htons(ETH_P_8021AD);
		} else {
			snprintf(err, errlen, "%s: '%s' is not 802.1Q or 802.1ad",
				 what, val);
			ret = -EINVAL;
		}
		break;
	case VFCFG_K_SPOOFCHK:
	case VFCFG_K_TRUST:
	case VFCFG_K_QUERY_RSS:
		if (kstrtobool(val, &b)) {
			snprintf(err, errlen, "%s: '%s' is not on or off", what, val);
			ret = -EINVAL;
		} else if (k == VFCFG_K_SPOOFCHK) {
			vf->spoofchk = b;
		} else if (k == VFCFG_K_TRUST) {
			vf->trust = b;
		} else {
			vf->query_rss = b;
		}
		break;
	case VFCFG_K_MIN_RATE:
		ret = vfcfg_u32(val, INT_MAX, &vf->min_rate, err, errlen, what);
		break;
	case VFCFG_K_MAX_RATE:
		ret = vfcfg_u32(val, INT_MAX, &vf->max_rate, err, errlen, what);
		break;
	case VFCFG_K_STATE:
		if (!strcmp(val, "auto")) {
			vf->link_state = IFLA_VF_LINK_STATE_AUTO;
		} else if (!strcmp(val, "enable")) {
			vf->link_state = IFLA_VF_LINK_STATE_ENABLE;
		} else if (!strcmp(val, "disable")) {
			vf->link_state = IFLA_VF_LINK_STATE_DISABLE;
		} else {
			snprintf(err, errlen, "%s: '%s' is not auto, enable or disable",
				 what, val);
			ret = -EINVAL;
		}
		break;
	case VFCFG_K_DRIVER:
		/* a PCI driver name; also handed to request_module() */
		for (n = 0; val[n]; n++)
			if (!isalnum(val[n]) && val[n] != '_' && val[n] != '-')
				break;
		if (!n || val[n] || n >= VFCFG_DRV_LEN) {
			snprintf(err, errlen, "%s: '%s' is not a driver name", what,
				 val);
			ret = -EINVAL;
		} else {
			strscpy(vf->driver, val, sizeof(vf->driver));
		}
		break;
	}
	if (!ret)
		vf->keys |= BIT(k);
	return ret;
}

static int vfcfg_item(struct vfcfg_block *b, char *item, char *err,
		      size_t errlen)
{
	struct vfcfg_pf *pf = b->pf;
	char *val = strchr(item, '=');
	unsigned int dom, bus, dev, fn, idx;
	u32 n;
	int len = 0;
	char *dot;

	/* the one item without a value: it only ever adds a permission */
	if (!strcmp(item, "force")) {
		if (pf->force)
			goto twice;
		pf->force = true;
		return 0;
	}
	if (!val || val == item || !val[1]) {
		snprintf(err, errlen, "'%s': expected key=value", item);
		return -EINVAL;
	}
	*val++ = '\0';

	dot = strchr(item, '.');
	if (!strncmp(item, "vf", 2) && dot) {
		*dot = '\0';
		if (!strcmp(item + 2, "*")) {
			*dot = '.';
			return vfcfg_vf_key(&b->all, dot + 1, val, item, err, errlen);
		}
		if (kstrtouint(item + 2, 10, &idx) || idx >= VFCFG_MAX_VFS) {
			*dot = '.';
			snprintf(err, errlen, "%s: VF index not in 0..%u", item,
				 VFCFG_MAX_VFS - 1);
			return -EINVAL;
		}
		*dot = '.';
		b->max_index = max_t(int, b->max_index, idx);
		return vfcfg_vf_key(&b->vf[idx], dot + 1, val, item, err, errlen);
	}

	if (!strcmp(item, "pf")) {
		if (pf->has_addr)
			goto twice;
		if (sscanf(val, "%x:%x:%x.%x%n", &dom, &bus, &dev, &fn, &len) != 4 ||
		    val[len] || dom > 0xffff || bus > 0xff || dev > 0x1f || fn > 7) {
			snprintf(err, errlen, "pf: '%s' is not a PCI address DDDD:BB:DD.F",
				 val);
			return -EINVAL;
		}
		pf->has_addr = true;
		pf->domain = dom;
		pf->bus = bus;
		pf->devfn = PCI_DEVFN(dev, fn);
	} else if (!strcmp(item, "ifname")) {
		if (pf->ifname[0])
			goto twice;
		if (!dev_valid_name(val)) {
			snprintf(err, errlen, "ifname: '%s' is not an interface name",
				 val);
			return -EINVAL;
		}
		strscpy(pf->ifname, val, sizeof(pf->ifname));
	} else if (!strcmp(item, "permaddr")) {
		if (pf->has_perm)
			goto twice;
		if (vfcfg_mac(val, pf->permaddr, true, err, errlen, "permaddr"))
			return -EINVAL;
		pf->has_perm = true;
	} else if (!strcmp(item, "numvfs")) {
		if (pf->numvfs >= 0)
			goto twice;
		if (vfcfg_u32(val, VFCFG_MAX_VFS, &n, err, errlen, "numvfs"))
			return -EINVAL;
		pf->numvfs = n;
	} else if (!strcmp(item, "mac_base")) {
		if (b->has_base)
			goto twice;
		if (vfcfg_mac(val, b->mac_base, true, err, errlen, "mac_base"))
			return -EINVAL;
		b->has_base = true;
	} else {
		snprintf(err, errlen, "%s: unknown key", item);
		return -EINVAL;
	}
	return 0;
twice:
	snprintf(err, errlen, "%s: given twice", item);
	return -EINVAL;
}

/* per-VF consistency once vf*.KEY defaults are merged in */
static int vfcfg_check_vf(const struct vfcfg_vf *vf, unsigned int i, char *err,
			  size_t errlen)
{
	u32 vlan_extra = BIT(VFCFG_K_QOS) | BIT(VFCFG_K_PROTO);

	if ((vf->keys & vlan_extra) && !(vf->keys & BIT(VFCFG_K_VLAN))) {
		snprintf(err, errlen, "vf%u: qos and proto need vf%u.vlan", i, i);
		return -EINVAL;
	}
	if (vf->max_rate && vf->min_rate > vf->max_rate) {
		snprintf(err, errlen, "vf%u: min_tx_rate %u > max_tx_rate %u", i,
			 vf->min_rate, vf->max_rate);
		return -EINVAL;
	}
	return 0;
}

/* a VF's MAC derived from mac_base: base + index in the low three octets */
static int vfcfg_derive_mac(const u8 *base, unsigned int i, u8 *mac)
{
	u32 low = (base[3] << 16 | base[4] << 8 | base[5]) + i;

	if (low > 0xffffff)
		return -ERANGE;
	memcpy(mac, base, 3);
	mac[3] = low >> 16;
	mac[4] = low >> 8;
	mac[5] = low;
	return 0;
}

static void vfcfg_match_text(struct vfcfg_pf *pf)
{
	size_t n = 0, sz = sizeof(pf->match);

	if (pf->has_addr)
		n += scnprintf(pf->match + n, sz - n, "pf=%04x:%02x:%02x.%x",
			       pf->domain, pf->bus, PCI_SLOT(pf->devfn),
			       PCI_FUNC(pf->devfn));
	if (pf->ifname[0])
		n += scnprintf(pf->match + n, sz - n, "%sifname=%s", n ? "," : "",
			       pf->ifname);
	if (pf->has_perm)
		scnprintf(pf->match + n, sz - n, "%spermaddr=%pM", n ? "," : "",
			  pf->permaddr);
}

/* the block's items are parsed; check it as a whole and size pf->vf[] */
static int vfcfg_finish(struct vfcfg_block *b, char *err, size_t errlen)
{
	struct vfcfg_pf *pf = b->pf;
	unsigned int i, k;
	int ret;

	if (!pf->has_addr && !pf->ifname[0] && !pf->has_perm) {
		snprintf(err, errlen, "no pf=, ifname= or permaddr= to match the PF");
		return -EINVAL;
	}
	vfcfg_match_text(pf);
	if (pf->numvfs >= 0 && b->max_index >= pf->numvfs) {
		snprintf(err, errlen, "vf%d: VF index beyond numvfs %d",
			 b->max_index, pf->numvfs);
		return -EINVAL;
	}
	if ((b->has_base || b->all.keys) && pf->numvfs < 0) {
		snprintf(err, errlen, "mac_base and vf*.KEY need numvfs");
		return -EINVAL;
	}
	pf->nvf = pf->numvfs >= 0 ? pf->numvfs : b->max_index + 1;
	if (!pf->nvf)
		return 0;
	pf->vf = kcalloc(pf->nvf, sizeof(*pf->vf), GFP_KERNEL);
	if (!pf->vf) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (i = 0; i < pf->nvf; i++) {
		struct vfcfg_vf *vf = &pf->vf[i];

		*vf = b->vf[i];
		for (k = 0; k < VFCFG_K_NR; k++) {
			if ((vf->keys & BIT(k)) || !(b->all.keys & BIT(k)))
				continue;
			switch (k) {
			case VFCFG_K_MAC:
				memcpy(vf->mac, b->all.mac, ETH_ALEN);
				break;
			case VFCFG_K_VLAN:
				vf->vlan = b->all.vlan;
				break;
			case VFCFG_K_QOS:
				vf->qos = b->all.qos;
				break;
			case VFCFG_K_PROTO:
				vf->proto = b->all.proto;
				break;
			case VFCFG_K_SPOOFCHK:
				vf->spoofchk = b->all.spoofchk;
				break;
			case VFCFG_K_TRUST:
				vf->trust = b->all.trust;
				break;
			case VFCFG_K_MIN_RATE:
				vf->min_rate = b->all.min_rate;
				break;
			case VFCFG_K_MAX_RATE:
				vf->max_rate = b->all.max_rate;
				break;
			case VFCFG_K_STATE:
				vf->link_state = b->all.link_state;
				break;
			case VFCFG_K_QUERY_RSS:
				vf->query_rss = b->all.query_rss;
				break;
			case VFCFG_K_DRIVER:
				strscpy(vf->driver, b->all.driver, sizeof(vf->driver));
				break;
			}
			vf->keys |= BIT(k);
		}
		if (b->has_base && !(b->vf[i].keys & BIT(VFCFG_K_MAC))) {
			if (vfcfg_derive_mac(b->mac_base, i, vf->mac)) {
				snprintf(err, errlen,
					 "vf%u: mac_base %pM + %u leaves the low three octets",
					 i, b->mac_base, i);
				return -EINVAL;
			}
			vf->keys |= BIT(VFCFG_K_MAC);
		}
		if (!(vf->keys & BIT(VFCFG_K_PROTO)))
			vf->proto = htons(ETH_P_8021Q);
		ret = vfcfg_check_vf(vf, i, err, errlen);
		if (ret)
			return ret;
		for (k = 0; k < VFCFG_OP_NR; k++)
			vf->res[k] = VFCFG_RES_PENDING;
	}
	return 0;
}

/*
 * Checks that span PFs: one block per set of match keys, no MAC given to
 * two VFs.  Blocks whose different keys select one PF (pf= and ifname=)
 * are only known as such when applied: vfcfg_apply_all() picks one.
 */
static int vfcfg_check_set(struct vfcfg_set *set, char *err, size_t errlen)
{
	struct vfcfg_pf *a, *b;
	unsigned int i, j;

	list_for_each_entry(a, &set->pfs, node) {
		list_for_each_entry(b, &set->pfs, node) {
			if (b == a)
				break;
			if (!strcmp(a->match, b->match)) {
				snprintf(err, errlen, "%s: two policies for one PF",
					 a->match);
				return -EINVAL;
			}
		}
	}
	list_for_each_entry(a, &set->pfs, node) {
		for (i = 0; i < a->nvf; i++) {
			if (!(a->vf[i].keys & BIT(VFCFG_K_MAC)))
				continue;
			list_for_each_entry(b, &set->pfs, node) {
				for (j = 0; j < b->nvf; j++) {
					if (b == a && j == i)
						goto next;
					if (!(b->vf[j].keys & BIT(VFCFG_K_MAC)) ||
					    !ether_addr_equal(a->vf[i].mac, b->vf[j].mac))
						continue;
					snprintf(err, errlen,
						 "%s vf%u: MAC %pM also given to %s vf%u",
						 a->match, i, a->vf[i].mac, b->match, j);
					return -EINVAL;
				}
			}
next:
			;
		}
	}
	return 0;
}

int vfcfg_check_totalvfs(const struct vfcfg_pf *pf, unsigned int total,
			 char *err, size_t errlen)
{
	if (pf->numvfs > (int)total) {
		snprintf(err, errlen, "numvfs %d beyond sriov_totalvfs %u",
			 pf->numvfs, total);
		return -ERANGE;
	}
	if (pf->nvf > total) {
		snprintf(err, errlen, "vf%u beyond sriov_totalvfs %u", pf->nvf - 1,
			 total);
		return -ERANGE;
	}
	return 0;
}

static void vfcfg_set_free(struct kref *ref)
{
	struct vfcfg_set *set = container_of(ref, struct vfcfg_set, ref);
	struct vfcfg_pf *pf, *tmp;

	list_for_each_entry_safe(pf, tmp, &set->pfs, node) {
		kfree(pf->vf);
		kfree(pf);
	}
	kfree(set->text);
	kfree(set);
}

void vfcfg_set_put(struct vfcfg_set *set)
{
	if (set)
		kref_put(&set->ref, vfcfg_set_free);
}

/*
 * Parse and validate a whole policy.  Returns the new set or an ERR_PTR,
 * with the reason in @err.
 */
struct vfcfg_set *vfcfg_parse(const char *text, char *err, size_t errlen)
{
	struct vfcfg_block *b;
	struct vfcfg_set *set;
	char *copy, *cur, *blk, *item;
	unsigned int nblk = 0;
	int ret = -ENOMEM;

	err[0] = '\0';
	set = kzalloc(sizeof(*set), GFP_KERNEL);
	b = kvzalloc(sizeof(*b), GFP_KERNEL);
	copy = kstrdup(text, GFP_KERNEL);
	if (set) {
		kref_init(&set->ref);
		INIT_LIST_HEAD(&set->pfs);
		set->text = kstrdup(strim(copy ?: ""), GFP_KERNEL);
	}
	if (!set || !b || !copy || !set->text) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}

	cur = copy;
	while ((blk = strsep(&cur, ";\n"))) {
		blk = strim(blk);
		if (!*blk)
			continue;
		nblk++;
		memset(b, 0, sizeof(*b));
		b->max_index = -1;
		b->pf = kzalloc(sizeof(*b->pf), GFP_KERNEL);
		if (!b->pf) {
			snprintf(err, errlen, "out of memory");
			goto fail;
		}
		b->pf->numvfs = -1;
		list_add_tail(&b->pf->node, &set->pfs);
		ret = 0;
		while (!ret && (item = strsep(&blk, ", \t")))
			if (*item)
				ret = vfcfg_item(b, item, err, errlen);
		if (!ret)
			ret = vfcfg_finish(b, err, errlen);
		if (ret) {
			/* name the block: its match keys may not be parsed yet */
			char *tmp = kstrdup(err, GFP_KERNEL);

			if (tmp) {
				snprintf(err, errlen, "policy %u: %s", nblk, tmp);
				kfree(tmp);
			}
			goto fail;
		}
	}
	ret = vfcfg_check_set(set, err, errlen);
	if (ret)
		goto fail;
	kvfree(b);
	kfree(copy);
	return set;
fail:
	kvfree(b);
	kfree(copy);
	vfcfg_set_put(set);
	return ERR_PTR(ret ?: -EINVAL);
}
