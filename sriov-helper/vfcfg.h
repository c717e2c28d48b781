/* SPDX-License-Identifier: GPL-2.0 */
/*
 * sriov_vfcfg: declared SR-IOV VF policy, applied by the kernel whenever a
 * matching PF appears.  Shared between the policy parser (vfcfg_policy.c)
 * and the notifier/apply side (vfcfg_core.c).
 */
#ifndef VFCFG_H
#define VFCFG_H

#include <linux/etherdevice.h>
#include <linux/if.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/types.h>

/* larger than any SR-IOV NIC's TotalVFs we know of; bounds allocations */
#define VFCFG_MAX_VFS		256
#define VFCFG_DRV_LEN		32
#define VFCFG_ERR_LEN		160

/* policy keys of one VF; bit numbers in vfcfg_vf.keys */
enum vfcfg_key {
	VFCFG_K_MAC,
	VFCFG_K_VLAN,
	VFCFG_K_QOS,
	VFCFG_K_PROTO,
	VFCFG_K_SPOOFCHK,
	VFCFG_K_TRUST,
	VFCFG_K_MIN_RATE,
	VFCFG_K_MAX_RATE,
	VFCFG_K_STATE,
	VFCFG_K_DRIVER,
	VFCFG_K_NR
};

/* what is applied to a VF in one step, each with its own result */
enum vfcfg_op {
	VFCFG_OP_MAC,
	VFCFG_OP_VLAN,		/* vlan + qos + proto: one ndo call */
	VFCFG_OP_SPOOFCHK,
	VFCFG_OP_TRUST,
	VFCFG_OP_RATE,		/* min + max: one ndo call */
	VFCFG_OP_STATE,
	VFCFG_OP_DRIVER,
	VFCFG_OP_NR
};

/* vfcfg_vf.res[] value of an op that has not been attempted yet */
#define VFCFG_RES_PENDING	1

struct vfcfg_vf {
	/* policy: immutable once the set is published */
	u32 keys;			/* BIT(VFCFG_K_*) given */
	u8 mac[ETH_ALEN];
	u16 vlan;
	u8 qos;
	__be16 proto;
	bool spoofchk;
	bool trust;
	u32 min_rate;
	u32 max_rate;
	u32 link_state;			/* IFLA_VF_LINK_STATE_* */
	char driver[VFCFG_DRV_LEN];

	/* result of the last application, per op; guarded by vfcfg_lock */
	int res[VFCFG_OP_NR];
};

struct vfcfg_pf {
	struct list_head node;		/* in vfcfg_set.pfs */

	/* policy: immutable once the set is published */
	char match[64];			/* the match keys, for messages */
	bool has_addr;
	u32 domain;
	u8 bus;
	u8 devfn;
	char ifname[IFNAMSIZ];		/* "" = any */
	bool has_perm;
	u8 permaddr[ETH_ALEN];
	int numvfs;			/* -1: leave the VF count alone */
	unsigned int nvf;		/* entries in vf[] */
	struct vfcfg_vf *vf;

	/*
	 * Status, guarded by vfcfg_lock.  @found is the PCI address the
	 * policy was last resolved to: the PCI bus notifier reads it to give
	 * a new VF its driver override before the VF's driver can probe.
	 * @shadowed: another block selects the same PF and is applied instead
	 * (the status shows no VF lines for this one).
	 */
	char found[16];
	char state[VFCFG_ERR_LEN];
	bool shadowed;

	/*
	 * Owned by the apply work (vfcfg_apply_all(); a work item never runs
	 * twice at once), nobody else touches them: @sel is the device this
	 * block selects during one pass, with a reference; @warned says the
	 * conflict with another block for that device was logged, once per
	 * published policy.
	 */
	struct device *sel;
	bool warned;
};

/*
 * One whole policy: replaced, never edited, so that a write is applied
 * entirely or not at all.  The apply work holds a reference while it runs.
 */
struct vfcfg_set {
	struct kref ref;
	struct list_head pfs;
	char *text;			/* as accepted, for reading it back */
};

/* guards the current set pointer, all status fields and the last error */
extern struct mutex vfcfg_lock;

struct vfcfg_set *vfcfg_parse(const char *text, char *err, size_t errlen);
void vfcfg_set_put(struct vfcfg_set *set);
int vfcfg_check_totalvfs(const struct vfcfg_pf *pf, unsigned int total,
			 char *err, size_t errlen);
const char *vfcfg_key_name(enum vfcfg_key k);

#endif /* VFCFG_H */
