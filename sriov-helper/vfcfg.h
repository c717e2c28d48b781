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
	VFCFG_K_QUERY_RSS,
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
	VFCFG_OP_QUERY_RSS,
	VFCFG_OP_DRIVER,	/* last: the only op that is not an ndo call */
	VFCFG_OP_NR
};

/* vfcfg_vf.res[] value of an op that has not been attempted yet */
#define VFCFG_RES_PENDING	1
/*
 * vfcfg_vf.res[VFCFG_OP_DRIVER] when the VF was left bound to a driver
 * that may be serving a guest or a user program (vfcfg_vf.bound names it)
 * and the block has no "force"
 */
#define VFCFG_RES_IN_USE	2

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
	bool query_rss;
	char driver[VFCFG_DRV_LEN];

	/*
	 * Status, guarded by vfcfg_lock: the result of the last attempt per
	 * op; how many busy answers (-EBUSY, -EAGAIN) in a row the driver
	 * gave for it; the driver a VF in use was left bound to.
	 */
	int res[VFCFG_OP_NR];
	u8 busy[VFCFG_OP_NR];
	char bound[VFCFG_DRV_LEN];

	/*
	 * Owned by the apply work: the refusal to rebind this VF was
	 * logged; cleared when the refusal no longer holds.
	 */
	bool warned_drv;
};

struct vfcfg_pf {
	struct list_head node;		/* in vfcfg_set.pfs */

	/* policy: immutable once the set is published */
	char match[80];			/* the match keys, for messages */
	bool has_addr;
	u32 domain;
	u8 bus;
	u8 devfn;
	char ifname[IFNAMSIZ];		/* "" = any */
	bool has_perm;
	u8 permaddr[ETH_ALEN];
	int numvfs;			/* -1: leave the VF count alone */
	bool force;			/* count and drivers change under VFs in use */
	unsigned int nvf;		/* entries in vf[] */
	struct vfcfg_vf *vf;

	/*
	 * Status, guarded by vfcfg_lock.  @found is the PCI address the
	 * policy was last resolved to: the PCI bus notifier reads it to give
	 * a new VF its driver override before the VF's driver can probe.
	 * @shadowed: another block selects the same PF and is applied instead
	 * (the status shows no VF lines for this one).  @refused: the last
	 * pass refused the block for the PF it selects (no SR-IOV, more VFs
	 * than TotalVFs): the bus notifier gives its VFs no driver override.
	 */
	char found[16];
	char state[2 * VFCFG_ERR_LEN];
	bool shadowed;
	bool refused;
	/*
	 * Also status, vfcfg_lock: @pass, @why and @full describe the last
	 * pass that applied this block: its number, the VFCFG_WHY_* bits that
	 * started it, and whether it could change the VF count and drivers;
	 * @full_pass and @full_why the last pass that could.  @forced: the
	 * VFs in use that "force" let that pass remove or rebind, "" if none.
	 * @retrying: some VF op answered busy and a retry is scheduled.
	 */
	u32 pass;
	unsigned int why;
	bool full;
	u32 full_pass;
	unsigned int full_why;
	bool retrying;
	char forced[VFCFG_ERR_LEN];

	/*
	 * Owned by the apply work (vfcfg_apply_all(); a work item never runs
	 * twice at once), nobody else touches them: @sel is the device this
	 * block selects during one pass, with a reference; @warned says the
	 * conflict with another block for that device was logged, once per
	 * published policy.  @retry: passes in a row that met a busy answer
	 * (bounds the retries); @retry_now: this pass met one and wants the
	 * next pass after a backoff; @warned_count: a VF count kept back by
	 * VFs in use was logged (cleared when that no longer holds).
	 */
	struct device *sel;
	bool warned;
	unsigned int retry;
	bool retry_now;
	bool warned_count;
};

/*
 * Why a pass runs, as bits: only VFCFG_WHY_FULL reasons (and a PF whose
 * driver has just bound) may change a VF count or a VF's driver; the rest
 * re-apply VF attributes.
 */
enum {
	VFCFG_WHY_LOAD		= BIT(0),	/* module loaded */
	VFCFG_WHY_POLICY	= BIT(1),	/* policy written */
	VFCFG_WHY_APPLY		= BIT(2),	/* apply written */
	VFCFG_WHY_PROBE		= BIT(3),	/* a PF driver bound: its probe finished */
	VFCFG_WHY_UNBIND	= BIT(4),	/* a PF driver unbound */
	VFCFG_WHY_NETDEV	= BIT(5),	/* PF net device registered, up, renamed */
	VFCFG_WHY_CARRIER	= BIT(6),	/* PF carrier up, also after a PF reset */
	VFCFG_WHY_VF		= BIT(7),	/* a VF driver bound: after its reset/FLR */
	VFCFG_WHY_RETRY		= BIT(8),	/* a driver answered busy */
	VFCFG_WHY_RESYNC	= BIT(9),	/* periodic: a VF attribute reads back different */
	VFCFG_WHY_FULL		= VFCFG_WHY_LOAD | VFCFG_WHY_POLICY | VFCFG_WHY_APPLY,
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

#endif /* VFCFG_H */
