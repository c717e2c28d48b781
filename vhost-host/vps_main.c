// SPDX-License-Identifier: GPL-2.0
/*
 * vhost_pvscsi: the host-kernel data path of a PVSCSI adapter.
 *
 * A VMM opens /dev/vhost-pvscsi per adapter, becomes its owner, hands over
 * the guest memory table, the ring pages the guest gave to SETUP_RINGS, a
 * kick eventfd (the doorbell registers) and call eventfds (interrupts),
 * and attaches LUNs by file descriptor.  A worker thread that adopts the
 * owner's mm then consumes request descriptors, answers them from the SCSI
 * target in vps_scsi.c or submits asynchronous O_DIRECT I/O to the LUN's
 * file, and posts completions.
 *
 * Everything in guest memory is hostile: descriptors are copied once and
 * validated, indices are bounded by the ring size, guest addresses are
 * translated only through the memory table, and the work per round is
 * capped.  A ring that makes no sense puts the adapter in an error state
 * until the VMM resets it; a malformed request fails only that request.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/miscdevice.h>
#include <linux/eventfd.h>
#include <linux/file.h>
#include <linux/cgroup.h>
#include <linux/kthread.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/sort.h>
#include <linux/debugfs.h>
#include <linux/vhost.h>
#include <linux/log2.h>
#include <scsi/scsi_proto.h>

#include "vps.h"

static unsigned int max_outstanding = 128;
module_param(max_outstanding, uint, 0644);
MODULE_PARM_DESC(max_outstanding,
		 "READ/WRITE commands in flight per LUN before TASK SET FULL (default 128; a LUN may override)");

static struct kmem_cache *vps_req_cache;
/* the LUNs whose last reference went in a worker (vps_lun_put_release) */
static struct workqueue_struct *vps_free_wq;

static void vps_worker_wake(struct vps_dev *dev);
static void vps_owner_gone(struct vps_dev *dev);

/* module-wide gauges, for the leak checks of the tests (debugfs) */
static atomic_long_t vps_open_devs;
static atomic_long_t vps_inflight_reqs;
static atomic_long_t vps_luns;
static struct dentry *vps_debugfs;

/* ---------------------------------------------------------------------- */
/* guest memory                                                           */
/* ---------------------------------------------------------------------- */

static const struct vps_region *vps_find_region(const struct vps_mem *mem,
						u64 gpa)
{
	u32 i;

	if (!mem)
		return NULL;
	for (i = 0; i < mem->nregions; i++) {
		const struct vps_region *r = &mem->r[i];

		if (gpa >= r->gpa && gpa - r->gpa < r->size)
			return r;
	}
	return NULL;
}

/* a guest range that must lie in one region (ring pages, SG chunks) */
static void __user *vps_gpa_to_user(const struct vps_mem *mem, u64 gpa,
				    u64 len)
{
	const struct vps_region *r = vps_find_region(mem, gpa);
	u64 off;

	if (!r)
		return NULL;
	off = gpa - r->gpa;
	if (len > r->size - off)
		return NULL;
	return (void __user *)(uintptr_t)(r->uaddr + off);
}

/* append the user-space iovecs behind [gpa, gpa + len) to the request */
static int vps_map_range(const struct vps_mem *mem, struct vps_req *req,
			 u64 gpa, u64 len)
{
	while (len) {
		const struct vps_region *r = vps_find_region(mem, gpa);
		u64 off, chunk;

		if (!r)
			return -EFAULT;
		off = gpa - r->gpa;
		chunk = min(len, r->size - off);
		if (req->nr_iovs && req->iov[req->nr_iovs - 1].iov_base +
		    req->iov[req->nr_iovs - 1].iov_len ==
		    (void __user *)(uintptr_t)(r->uaddr + off)) {
			req->iov[req->nr_iovs - 1].iov_len += chunk;
		} else {
			if (req->nr_iovs == VPS_MAX_IOVS)
				return -E2BIG;
			req->iov[req->nr_iovs].iov_base =
				(void __user *)(uintptr_t)(r->uaddr + off);
			req->iov[req->nr_iovs].iov_len = chunk;
			req->nr_iovs++;
		}
		gpa += chunk;
		len -= chunk;
	}
	return 0;
}

/* SG page: walk elements until data_len is covered, at most one page's */
static int vps_map_sg(const struct vps_mem *mem, struct vps_req *req,
		      u64 sg_gpa)
{
	struct pvscsi_sg_element sg[16];
	u64 left = req->data_len;
	u32 i = 0, n, j;
	int ret;

	while (left) {
		void __user *p;

		if (i >= PVSCSI_MAX_SG_ENTRIES_PER_SEGMENT)
			return -E2BIG;	/* SG total short of data_len */
		n = min_t(u32, ARRAY_SIZE(sg),
			  PVSCSI_MAX_SG_ENTRIES_PER_SEGMENT - i);
		p = vps_gpa_to_user(mem, sg_gpa + (u64)i * sizeof(sg[0]),
				    n * sizeof(sg[0]));
		if (!p || copy_from_user(sg, p, n * sizeof(sg[0])))
			return -EFAULT;
		for (j = 0; j < n && left; j++, i++) {
			u64 addr = le64_to_cpu(sg[j].addr);
			u64 elen = le32_to_cpu(sg[j].length);

			if (sg[j].flags)
				return -EINVAL;	/* no chaining in this ABI */
			elen = min(elen, left);
			if (!elen)
				continue;
			ret = vps_map_range(mem, req, addr, elen);
			if (ret)
				return ret;
			left -= elen;
		}
	}
	return 0;
}

static int vps_xfer_guest(struct vps_req *req, void *buf, u32 len, bool out)
{
	u32 i, done = 0;

	for (i = 0; i < req->nr_iovs && done < len; i++) {
		u32 n = min_t(u64, req->iov[i].iov_len, len - done);
		unsigned long left;

		if (out)
			left = copy_to_user(req->iov[i].iov_base, buf + done, n);
		else
			left = copy_from_user(buf + done, req->iov[i].iov_base, n);
		if (left)
			return -EFAULT;
		done += n;
	}
	return done;
}

/* copy an emulated response to the request's data buffer; bytes or -err */
int vps_copy_to_guest(struct vps_dev *dev, struct vps_req *req,
		      const void *buf, u32 len)
{
	return vps_xfer_guest(req, (void *)buf, len, true);
}

int vps_copy_from_guest(struct vps_dev *dev, struct vps_req *req,
			void *buf, u32 len)
{
	return vps_xfer_guest(req, buf, len, false);
}

/* ---------------------------------------------------------------------- */
/* rings                                                                  */
/* ---------------------------------------------------------------------- */

static int vps_translate_pages(const struct vps_mem *mem, const __le64 *ppns,
			       u32 n, void __user **out)
{
	u32 i;

	for (i = 0; i < n; i++) {
		u64 ppn = le64_to_cpu(ppns[i]);

		if (ppn >> (64 - PVSCSI_PAGE_SHIFT))
			return -EFAULT;
		out[i] = vps_gpa_to_user(mem, ppn << PVSCSI_PAGE_SHIFT,
					 PVSCSI_PAGE_SIZE);
		if (!out[i])
			return -EFAULT;
	}
	return 0;
}

static bool vps_pages_ok(u32 n, u32 max)
{
	return n >= 1 && n <= max && is_power_of_2(n);
}

/* translate the ring pages of the saved SETUP_RINGS through dev->mem */
static int vps_map_rings(struct vps_dev *dev)
{
	const struct pvscsi_cmd_setup_rings *c = &dev->ring_cfg;
	u32 nreq = le32_to_cpu(c->req_ring_num_pages);
	u32 ncmp = le32_to_cpu(c->cmp_ring_num_pages);
	u64 rs_ppn = le64_to_cpu(c->rings_state_ppn);
	int ret;

	if (!vps_pages_ok(nreq, PVSCSI_SETUP_RINGS_MAX_PAGES) ||
	    !vps_pages_ok(ncmp, PVSCSI_SETUP_RINGS_MAX_PAGES))
		return -EINVAL;
	if (rs_ppn >> (64 - PVSCSI_PAGE_SHIFT))
		return -EFAULT;
	dev->rs = vps_gpa_to_user(dev->mem, rs_ppn << PVSCSI_PAGE_SHIFT,
				  PVSCSI_PAGE_SIZE);
	if (!dev->rs)
		return -EFAULT;
	ret = vps_translate_pages(dev->mem, c->req_ring_ppns, nreq,
				  dev->req_pages);
	if (ret)
		return ret;
	return vps_translate_pages(dev->mem, c->cmp_ring_ppns, ncmp,
				   dev->cmp_pages);
}

static int vps_map_msg_ring(struct vps_dev *dev)
{
	u32 n = le32_to_cpu(dev->msg_cfg.num_pages);

	if (!vps_pages_ok(n, PVSCSI_SETUP_MSG_RING_MAX_PAGES))
		return -EINVAL;
	return vps_translate_pages(dev->mem, dev->msg_cfg.ring_ppns, n,
				   dev->msg_pages);
}

static int vps_rs_get(struct vps_dev *dev, __le32 __user *field, u32 *val)
{
	__le32 v;

	if (get_user(v, field))
		return -EFAULT;
	*val = le32_to_cpu(v);
	return 0;
}

static int vps_rs_put(__le32 __user *field, u32 val)
{
	return put_user(cpu_to_le32(val), field);
}

static void vps_break(struct vps_dev *dev, const char *why)
{
	if (!dev->broken)
		pr_warn_ratelimited("adapter of pid %d stopped: %s (reset clears it)\n",
				    dev->owner ? task_pid_nr(dev->owner) : 0, why);
	dev->broken = true;
	dev->stats.errors_guest++;
}

/* ---------------------------------------------------------------------- */
/* completion                                                             */
/* ---------------------------------------------------------------------- */

static void vps_lun_free(struct vps_lu *lun)
{
	fput(lun->file);
	kfree(lun);
	atomic_long_dec(&vps_luns);
}

#ifdef VPS_HAVE_VHOST_TASK
/* a kworker: its fput() hands the file to delayed_fput, done at once */
static void vps_lun_free_work(struct work_struct *work)
{
	vps_lun_free(container_of(work, struct vps_lu, free_work));
}
#endif

static void vps_lun_put_release(struct kref *ref)
{
	struct vps_lu *lun = container_of(ref, struct vps_lu, ref);

#ifdef VPS_HAVE_VHOST_TASK
	/*
	 * The last reference can go with a completion in the worker, a
	 * vhost_task that never returns to user mode: fput() there queues
	 * task work that runs only when the worker exits, and the LUN's
	 * device or file would stay open until the adapter is closed
	 * (dmsetup remove and umount: EBUSY).  A 6.1 kthread's fput() is
	 * already deferred to a kworker.
	 */
	if (current->flags & PF_USER_WORKER) {
		INIT_WORK(&lun->free_work, vps_lun_free_work);
		queue_work(vps_free_wq, &lun->free_work);
		return;
	}
#endif
	vps_lun_free(lun);
}

void vps_lun_put(struct vps_lu *lun)
{
	if (lun)
		kref_put(&lun->ref, vps_lun_put_release);
}

static void vps_req_free(struct vps_dev *dev, struct vps_req *req)
{
	list_del(&req->node);
	dev->nr_inflight--;
	if (req->active)
		atomic_dec(&req->lun->outstanding);
	vps_lun_put(req->lun);
	kmem_cache_free(vps_req_cache, req);
	atomic_long_dec(&vps_inflight_reqs);
}

/*
 * Post one completion.  Returns false when the completion ring is full:
 * the request stays on the backlog and is retried.
 */
static bool vps_post(struct vps_dev *dev, struct vps_req *req)
{
	u32 entries = 1u << dev->cmp_entries_log2, cons, slot;
	struct pvscsi_cmp_desc c = {};
	void __user *p;

	if (vps_rs_get(dev, &dev->rs->cmp_cons_idx, &cons)) {
		vps_break(dev, "rings state unreadable");
		return false;
	}
	if (dev->cmp_prod - cons >= entries) {
		if (dev->cmp_prod - cons > entries)
			vps_break(dev, "completion consumer index ahead of producer");
		return false;
	}

	if (req->abort_status) {
		req->host_status = req->abort_status;
		req->scsi_status = 0;
		req->xfer = 0;
	}
	c.context = cpu_to_le64(req->context);
	c.data_len = cpu_to_le64(req->xfer);
	c.host_status = cpu_to_le16(req->host_status);
	c.scsi_status = cpu_to_le16(req->scsi_status);
	if (req->host_status == BTSTAT_SUCCESS &&
	    req->scsi_status == SAM_STAT_CHECK_CONDITION && req->sense_len) {
		u32 n = min_t(u32, req->sense_len, sizeof(req->sense));
		void __user *s = vps_gpa_to_user(dev->mem, req->sense_addr, n);

		if (s && !copy_to_user(s, req->sense, n))
			c.sense_len = cpu_to_le32(n);
		else
			dev->stats.errors_guest++;
	}

	slot = dev->cmp_prod & (entries - 1);
	p = dev->cmp_pages[slot / PVSCSI_CMP_DESCS_PER_PAGE] +
		(slot % PVSCSI_CMP_DESCS_PER_PAGE) * sizeof(c);
	if (copy_to_user(p, &c, sizeof(c))) {
		vps_break(dev, "completion ring unwritable");
		return false;
	}
	/* the descriptor must be visible before the index that publishes it */
	smp_wmb();
	dev->cmp_prod++;
	if (vps_rs_put(&dev->rs->cmp_prod_idx, dev->cmp_prod)) {
		vps_break(dev, "rings state unwritable");
		return false;
	}
	dev->stats.completions++;
	return true;
}

/* a request has its result: post it, or park it behind a full ring */
static bool vps_finish(struct vps_dev *dev, struct vps_req *req)
{
	if (req->active) {
		atomic_dec(&req->lun->outstanding);
		req->active = false;
	}
	if (!dev->rings_ok || dev->broken) {
		/* adapter reset or broken: nobody can receive it */
		vps_req_free(dev, req);
		return false;
	}
	if (!list_empty(&dev->cmp_backlog) || !vps_post(dev, req)) {
		list_move_tail(&req->node, &dev->cmp_backlog);
		return false;
	}
	vps_req_free(dev, req);
	dev->need_call = true;
	return true;
}

static void vps_call(struct vps_dev *dev)
{
	dev->need_call = false;
	if (dev->call_cmpl) {
		vps_eventfd_signal(dev->call_cmpl);
		dev->stats.calls++;
	}
}

/* synchronous completion from the target (emulated commands, errors) */
static bool vps_complete_now(struct vps_dev *dev, struct vps_req *req)
{
	return vps_finish(dev, req);
}

static bool vps_drain_backlog(struct vps_dev *dev)
{
	struct vps_req *req, *tmp;
	bool posted = false;

	list_for_each_entry_safe(req, tmp, &dev->cmp_backlog, node) {
		if (!dev->rings_ok || dev->broken) {
			vps_req_free(dev, req);
			continue;
		}
		if (!vps_post(dev, req))
			break;
		vps_req_free(dev, req);
		posted = true;
		dev->need_call = true;
	}
	return posted;
}

static void vps_iocb_done(struct kiocb *iocb, long ret)
{
	struct vps_req *req = container_of(iocb, struct vps_req, iocb);
	struct vps_dev *dev = req->dev;
	unsigned long flags;

	req->ret = ret;
	/*
	 * Drop the write's freeze protection here, as aio does, not in the
	 * worker: a freeze waits for every write holding it, and the worker
	 * may itself be blocked in kiocb_start_write() for that very freeze
	 * (fsfreeze, LVM snapshots would hang with writes in flight).
	 */
	if (req->write && !req->lun->is_bdev)
		kiocb_end_write(iocb);
	llist_add(&req->done_node, &dev->done);
	vps_worker_wake(dev);
	/*
	 * Last touch of dev: a waiter for io_pending == 0 checks it under the
	 * same lock, so it cannot free dev before we drop the lock.
	 */
	spin_lock_irqsave(&dev->io_wait.lock, flags);
	if (atomic_dec_and_test(&dev->io_pending))
		wake_up_locked(&dev->io_wait);
	spin_unlock_irqrestore(&dev->io_wait.lock, flags);
}

/* submit READ/WRITE to the backing file; the target calls this */
void vps_submit_io(struct vps_dev *dev, struct vps_req *req,
		   struct iov_iter *iter, loff_t pos, bool fua)
{
	struct file *file = req->lun->file;
	struct kiocb *iocb = &req->iocb;
	ssize_t ret;

	init_sync_kiocb(iocb, file);
	iocb->ki_pos = pos;
	iocb->ki_complete = vps_iocb_done;
	iocb->ki_flags |= IOCB_DIRECT;
	atomic_inc(&dev->io_pending);
	dev->stats.rw_ios++;
	if (req->write) {
		iocb->ki_flags |= IOCB_WRITE;
		if (fua)
			iocb->ki_flags |= IOCB_DSYNC;
		/* a filesystem's freeze protection, as aio takes it */
		if (!req->lun->is_bdev)
			kiocb_start_write(iocb);
		ret = file->f_op->write_iter(iocb, iter);
	} else {
		ret = file->f_op->read_iter(iocb, iter);
	}
	if (ret != -EIOCBQUEUED)
		vps_iocb_done(iocb, ret);
}

static bool vps_process_done(struct vps_dev *dev)
{
	struct llist_node *list = llist_del_all(&dev->done);
	struct vps_req *req, *tmp;
	bool posted = false;

	list = llist_reverse_order(list);
	llist_for_each_entry_safe(req, tmp, list, done_node) {
		vps_scsi_complete_io(dev, req);
		posted |= vps_finish(dev, req);
	}
	return posted;
}

/* ---------------------------------------------------------------------- */
/* request ring                                                           */
/* ---------------------------------------------------------------------- */

static struct vps_req *vps_req_alloc(struct vps_dev *dev)
{
	struct vps_req *req = kmem_cache_alloc(vps_req_cache, GFP_KERNEL);

	if (!req)
		return NULL;
	memset(req, 0, offsetof(struct vps_req, iov));
	req->dev = dev;
	list_add_tail(&req->node, &dev->inflight);
	dev->nr_inflight++;
	atomic_long_inc(&vps_inflight_reqs);
	return req;
}

static bool vps_scope_has(const struct vps_scope *s, const struct vps_req *req)
{
	if (s->all)
		return true;
	if (req->target != s->target)
		return false;
	return s->by_context ? req->context == s->context : req->lun_id == s->lun;
}

/* one descriptor, copied once; the copy is all we look at afterwards */
static bool vps_handle_desc(struct vps_dev *dev,
			    const struct pvscsi_req_desc *d)
{
	struct vps_req *req = vps_req_alloc(dev);
	u32 flags, dir;
	int ret;

	if (!req)
		return false;
	dev->stats.requests++;
	req->context = le64_to_cpu(d->context);
	req->data_len = le64_to_cpu(d->data_len);
	req->sense_addr = le64_to_cpu(d->sense_addr);
	req->sense_len = le32_to_cpu(d->sense_len);
	req->target = d->target;
	/* single-level LUN, peripheral addressing */
	req->lun_id = U32_MAX;
	if (!d->lun[0] && !d->lun[2] && !d->lun[3] && !d->lun[4] &&
	    !d->lun[5] && !d->lun[6] && !d->lun[7] && d->lun[1] < VPS_MAX_LUNS)
		req->lun_id = d->lun[1];
	flags = le32_to_cpu(d->flags);
	dir = flags & PVSCSI_FLAG_CMD_DIR_MASK;

	if (dev->cancel.on && vps_scope_has(&dev->cancel.scope, req)) {
		dev->cancel.hits++;
		req->abort_status = dev->cancel.status;
		vps_complete_now(dev, req);
		return true;
	}

	/*
	 * The context is the guest's cookie, echoed back.  Zero is legal:
	 * SeaBIOS's PVSCSI boot driver leaves it zero, and QEMU's and
	 * VMware's devices accept it.
	 */
	if (d->cdb_len == 0 ||
	    d->cdb_len > PVSCSI_MAX_CDB_LEN ||
	    (flags & ~(PVSCSI_FLAG_CMD_WITH_SG_LIST | PVSCSI_FLAG_CMD_DIR_MASK)) ||
	    (dir && !is_power_of_2(dir)) ||
	    req->data_len > VPS_MAX_DATA_LEN) {
		req->host_status = BTSTAT_INVPARAM;
		goto bad;
	}
	if (req->data_len && dir != PVSCSI_FLAG_CMD_DIR_NONE) {
		if (flags & PVSCSI_FLAG_CMD_WITH_SG_LIST)
			ret = vps_map_sg(dev->mem, req, le64_to_cpu(d->data_addr));
		else
			ret = vps_map_range(dev->mem, req,
					    le64_to_cpu(d->data_addr),
					    req->data_len);
		if (ret) {
			req->host_status = BTSTAT_INVPARAM;
			goto bad;
		}
	} else {
		req->data_len = 0;
	}
	vps_scsi_execute(dev, req, d);
	return true;

bad:
	dev->stats.errors_guest++;
	vps_complete_now(dev, req);
	return true;
}

/* the target finished a request without backing I/O */
void vps_req_done_sync(struct vps_dev *dev, struct vps_req *req)
{
	dev->stats.emulated++;
	vps_complete_now(dev, req);
}

/*
 * Consume up to VPS_WORK_WEIGHT descriptors (a command the target runs
 * synchronously weighs more: vps_scsi_extra_weight()).  Returns true when more may
 * be waiting (the caller comes back after completions had a turn).
 * @peek: a second look, not a doorbell: an empty ring leaves the armed
 * threshold alone.
 */
static bool vps_process_ring(struct vps_dev *dev, bool peek)
{
	u32 entries = 1u << dev->req_entries_log2;
	u32 cmp_entries = 1u << dev->cmp_entries_log2;
	struct pvscsi_req_desc d;
	bool armed = false;
	u32 budget = VPS_WORK_WEIGHT;

	if (peek) {
		u32 prod;

		if (vps_rs_get(dev, &dev->rs->req_prod_idx, &prod)) {
			vps_break(dev, "rings state unreadable");
			return false;
		}
		if (prod == dev->req_cons)
			return false;
	}
	/* we are polling now: ask the guest not to ring the doorbell */
	if (dev->req_threshold)
		vps_rs_put(&dev->rs->req_call_threshold, entries);

	for (;;) {
		u32 prod, avail, slot;
		void __user *p;

		if (vps_rs_get(dev, &dev->rs->req_prod_idx, &prod)) {
			vps_break(dev, "rings state unreadable");
			return false;
		}
		/* descriptors are read after the index that published them */
		smp_rmb();
		avail = prod - dev->req_cons;
		if (avail > entries) {
			vps_break(dev, "request producer more than a ring ahead");
			return false;
		}
		if (!avail) {
			if (!dev->req_threshold || armed)
				break;
			/*
			 * Going idle: re-arm the doorbell, then look once
			 * more so a request posted meanwhile is not missed.
			 */
			vps_rs_put(&dev->rs->req_call_threshold, 1);
			/* order the threshold store before the index reload */
			smp_mb();
			armed = true;
			/*
			 * That handshake needs a full barrier in the guest
			 * too, between its req_prod_idx store and its
			 * threshold load.  vmw_pvscsi has none: its load
			 * can pass its store, it reads the old threshold and
			 * skips the doorbell while we read the old index.
			 * Its store lands in nanoseconds, so one look a few
			 * milliseconds later finds what both sides missed.
			 */
			WRITE_ONCE(dev->recheck_ns, ktime_get_ns() +
				   VPS_RECHECK_MS * NSEC_PER_MSEC);
			WRITE_ONCE(dev->recheck, true);
			continue;
		}
		if (!budget--)
			return true;
		/*
		 * Every completion must find room in the completion ring;
		 * vps_round() comes back once completions free a slot.
		 */
		if (dev->nr_inflight >= cmp_entries) {
			dev->cmp_stall = true;
			return false;
		}

		slot = dev->req_cons & (entries - 1);
		p = dev->req_pages[slot / PVSCSI_REQ_DESCS_PER_PAGE] +
			(slot % PVSCSI_REQ_DESCS_PER_PAGE) * sizeof(d);
		if (copy_from_user(&d, p, sizeof(d))) {
			vps_break(dev, "request ring unreadable");
			return false;
		}
		if (!vps_handle_desc(dev, &d))
			return true;	/* no memory: retry the same slot */
		/* what it weighs beyond one (d is our copy: read once) */
		budget -= min(budget, vps_scsi_extra_weight(d.cdb));
		dev->req_cons++;
		if (vps_rs_put(&dev->rs->req_cons_idx, dev->req_cons)) {
			vps_break(dev, "rings state unwritable");
			return false;
		}
		if (dev->broken)
			return false;
	}
	return false;
}

/* ---------------------------------------------------------------------- */
/* message ring                                                           */
/* ---------------------------------------------------------------------- */

static void vps_post_msg(struct vps_dev *dev, u32 type, u32 target, u32 lun)
{
	u32 entries = 1u << dev->msg_entries_log2, cons, slot;
	struct pvscsi_msg_dev_status m = {};
	void __user *p;

	if (!dev->msg_ok || dev->broken)
		return;
	if (vps_rs_get(dev, &dev->rs->msg_cons_idx, &cons) ||
	    dev->msg_prod - cons >= entries)
		return;		/* full: the guest will rescan anyway */
	m.type = cpu_to_le32(type);
	m.bus = 0;
	m.target = cpu_to_le32(target);
	m.lun[1] = lun;
	slot = dev->msg_prod & (entries - 1);
	p = dev->msg_pages[slot / PVSCSI_MSG_DESCS_PER_PAGE] +
		(slot % PVSCSI_MSG_DESCS_PER_PAGE) * sizeof(m);
	if (copy_to_user(p, &m, sizeof(m)))
		return;
	/* the message must be visible before the index that publishes it */
	smp_wmb();
	dev->msg_prod++;
	if (vps_rs_put(&dev->rs->msg_prod_idx, dev->msg_prod))
		return;
	dev->stats.msgs++;
	if (dev->call_msg)
		vps_eventfd_signal(dev->call_msg);
}

/* ---------------------------------------------------------------------- */
/* worker                                                                 */
/* ---------------------------------------------------------------------- */

/* one round; returns true when the worker should run again at once */
static bool vps_round(struct vps_dev *dev)
{
	bool again = false, kicked, peek;
	u32 cons;

	mutex_lock(&dev->mutex);
	vps_drain_backlog(dev);
	vps_process_done(dev);
	kicked = test_and_clear_bit(VPS_EV_KICK, &dev->events);
	/*
	 * Timed by the clock, not by jiffies: on a CPU that does not own the
	 * tick, jiffies may lag by several ticks (a descheduled vCPU), and
	 * the look must not come early.
	 */
	peek = !kicked && dev->recheck && ktime_get_ns() >= dev->recheck_ns;
	if (kicked || peek)
		WRITE_ONCE(dev->recheck, false);
	if (kicked)
		dev->stats.kicks++;
	if ((kicked || peek) &&
	    dev->rings_ok && !dev->broken && !dev->quiesce) {
		cons = dev->req_cons;
		again = vps_process_ring(dev, peek);
		/* consumed, so bounded by the work weight */
		if (peek)
			dev->unkicked += dev->req_cons - cons;
		if (again)
			set_bit(VPS_EV_KICK, &dev->events);
		vps_process_done(dev);
	}
	/* one interrupt for everything this round posted */
	if (dev->need_call)
		vps_call(dev);
	/*
	 * The ring was left alone for want of completion slots: go on once
	 * there are some, the guest's doorbell was already rung.
	 */
	if (dev->cmp_stall &&
	    dev->nr_inflight < (1u << dev->cmp_entries_log2)) {
		dev->cmp_stall = false;
		set_bit(VPS_EV_KICK, &dev->events);
		again = true;
	}
	/* a guest that does not consume completions: look again soon */
	dev->backlog_wait = !list_empty(&dev->cmp_backlog);
	mutex_unlock(&dev->mutex);
	return again;
}

/* is there anything for the worker? (it is about to sleep otherwise) */
static bool vps_worker_has_work(struct vps_dev *dev)
{
	return test_bit(VPS_EV_KICK, &dev->events) || !llist_empty(&dev->done);
}

/*
 * How long the idle worker may sleep unwoken: a tick while completions
 * wait for ring room, until a re-armed request ring is due its second
 * look, or for good.
 */
static long vps_worker_timeout(struct vps_dev *dev)
{
	long t;

	if (READ_ONCE(dev->backlog_wait))
		return 1;
	if (!READ_ONCE(dev->recheck))
		return MAX_SCHEDULE_TIMEOUT;
	t = (s64)(READ_ONCE(dev->recheck_ns) - ktime_get_ns());
	/* an early wake-up only costs a round that does not look yet */
	return t > 0 ? nsecs_to_jiffies(t) + 1 : 1;
}

#ifdef VPS_HAVE_VHOST_TASK
/*
 * vhost_task: the worker is a thread of the owner process, so it shares
 * the owner's mm, is accounted to it (cgroups, limits, ps) and dies with it.
 */
static bool vps_worker_step(void *data)
{
	struct vps_dev *dev = data;

	if (!vps_worker_has_work(dev)) {
		long t = vps_worker_timeout(dev);

		if (t == MAX_SCHEDULE_TIMEOUT)
			return false;	/* vhost_task sleeps until woken */
		schedule_timeout(t);
	}
	__set_current_state(TASK_RUNNING);
	vps_round(dev);
	/*
	 * vhost_task_fn() only schedules when we return false, and we
	 * return true while there is work: yield here, or a busy guest
	 * keeps this CPU from everything else on a non-preemptible kernel.
	 */
	cond_resched();
	return true;
}

/*
 * The owner's process got SIGKILL or exited, and with it this thread,
 * which is about to exit too: let go of the owner's memory now (the
 * thread's own hold on it goes with it), and make sure nothing wakes a
 * task that is gone.  release() frees the rest.
 */
static void vps_worker_killed(void *data)
{
	struct vps_dev *dev = data;

	mutex_lock(&dev->mutex);
	vps_owner_gone(dev);
	mutex_unlock(&dev->mutex);
}

static int vps_worker_start(struct vps_dev *dev, const char *name)
{
	struct vhost_task *vtsk = vhost_task_create(vps_worker_step,
						    vps_worker_killed, dev, name);

	if (IS_ERR(vtsk))
		return PTR_ERR(vtsk);
	dev->worker.vtsk = vtsk;
	vhost_task_start(vtsk);
	return 0;
}

static void vps_worker_wake(struct vps_dev *dev)
{
	/*
	 * A killed vhost_task exits: vps_owner_gone() stops every source of
	 * wake-ups (kick, I/O, ioctls) before it returns to let it go.
	 */
	if (dev->worker.vtsk && !READ_ONCE(dev->owner_gone))
		vhost_task_wake(dev->worker.vtsk);
}

static void vps_worker_stop(struct vps_dev *dev)
{
	if (dev->worker.vtsk)
		vhost_task_stop(dev->worker.vtsk);
	dev->worker.vtsk = NULL;
}
#else
/*
 * A kthread that adopts the owner's mm to reach guest memory, a round at
 * a time: between rounds it holds no user of the mm, so the address space
 * goes when the owner's process exits.
 */
static void vps_kthread_round(struct vps_dev *dev)
{
	if (!mmget_not_zero(dev->mm)) {
		/* the owner exited: what it left is let go of here */
		mutex_lock(&dev->mutex);
		vps_owner_gone(dev);
		mutex_unlock(&dev->mutex);
		return;
	}
	kthread_use_mm(dev->mm);
	vps_round(dev);
	kthread_unuse_mm(dev->mm);
	/* the owner may have exited meanwhile: the address space goes here */
	mmput(dev->mm);
}

static int vps_worker_fn(void *data)
{
	struct vps_dev *dev = data;

	for (;;) {
		set_current_state(TASK_INTERRUPTIBLE);
		if (kthread_should_stop())
			break;
		if (!vps_worker_has_work(dev)) {
			long t = vps_worker_timeout(dev);

			schedule_timeout(t);
			if (t == MAX_SCHEDULE_TIMEOUT)
				continue;
		}
		__set_current_state(TASK_RUNNING);
		vps_kthread_round(dev);
		cond_resched();
	}
	__set_current_state(TASK_RUNNING);
	return 0;
}

static int vps_worker_start(struct vps_dev *dev, const char *name)
{
	struct task_struct *task = kthread_create(vps_worker_fn, dev, "%s", name);
	int ret;

	if (IS_ERR(task))
		return PTR_ERR(task);
	/*
	 * A kthread starts in the root cgroups: join the owner's, as vhost
	 * did before vhost_task, or the I/O and CPU a guest makes us spend
	 * escape the VMM's cpu.max, io.max and memory limits.
	 */
	ret = cgroup_attach_task_all(current, task);
	if (ret) {
		kthread_stop(task);
		return ret;
	}
	dev->worker.task = task;
	wake_up_process(task);
	return 0;
}

static void vps_worker_wake(struct vps_dev *dev)
{
	if (dev->worker.task)
		wake_up_process(dev->worker.task);
}

static void vps_worker_stop(struct vps_dev *dev)
{
	if (dev->worker.task)
		kthread_stop(dev->worker.task);
	dev->worker.task = NULL;
}
#endif

static void vps_kick_worker(struct vps_dev *dev)
{
	set_bit(VPS_EV_KICK, &dev->events);
	vps_worker_wake(dev);
}

/* eventfd wake-up: the guest rang a doorbell (atomic context) */
static int vps_kick_wakeup(wait_queue_entry_t *wait, unsigned int mode,
			   int sync, void *key)
{
	struct vps_poll *poll = container_of(wait, struct vps_poll, wait);

	if (!(key_to_poll(key) & EPOLLIN))
		return 0;
	vps_kick_worker(poll->dev);
	return 0;
}

static void vps_kick_queue(struct file *file, wait_queue_head_t *wqh,
			   poll_table *pt)
{
	struct vps_poll *poll = container_of(pt, struct vps_poll, table);

	poll->wqh = wqh;
	add_wait_queue(wqh, &poll->wait);
}

static void vps_kick_stop(struct vps_dev *dev)
{
	if (dev->kick.wqh) {
		remove_wait_queue(dev->kick.wqh, &dev->kick.wait);
		dev->kick.wqh = NULL;
	}
	if (dev->kick.file) {
		fput(dev->kick.file);
		dev->kick.file = NULL;
	}
}

static int vps_kick_start(struct vps_dev *dev, int fd)
{
	struct file *file = eventfd_fget(fd);
	__poll_t mask;

	if (IS_ERR(file))
		return PTR_ERR(file);
	vps_kick_stop(dev);
	dev->kick.file = file;
	dev->kick.dev = dev;
	init_waitqueue_func_entry(&dev->kick.wait, vps_kick_wakeup);
	init_poll_funcptr(&dev->kick.table, vps_kick_queue);
	mask = vfs_poll(file, &dev->kick.table);
	if (mask & EPOLLIN)
		vps_kick_worker(dev);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* waiting for the backing I/O                                            */
/* ---------------------------------------------------------------------- */

/*
 * Wait until no backing I/O is in flight, then collect the results.  The
 * caller holds dev->mutex and has raised dev->quiesce so that the worker
 * submits nothing new; the mutex is dropped while waiting so completions
 * can run (and another reset can come in and wait too).
 */
static void vps_wait_io(struct vps_dev *dev)
{
	mutex_unlock(&dev->mutex);
	spin_lock_irq(&dev->io_wait.lock);
	wait_event_interruptible_locked_irq(dev->io_wait,
					    !atomic_read(&dev->io_pending));
	if (atomic_read(&dev->io_pending)) {
		/* a signal: a reset cannot be half done, wait regardless */
		spin_unlock_irq(&dev->io_wait.lock);
		wait_event(dev->io_wait, !atomic_read(&dev->io_pending));
		spin_lock_irq(&dev->io_wait.lock);
	}
	spin_unlock_irq(&dev->io_wait.lock);
	mutex_lock(&dev->mutex);
	vps_process_done(dev);
}

/* a reset's wait: consume nothing until the backing I/O has drained */
static void vps_quiesce_wait(struct vps_dev *dev)
{
	dev->quiesce++;
	vps_wait_io(dev);
	dev->quiesce--;
}

/* the requests consumed and not yet posted that @s covers get @status */
static u32 vps_mark_aborted(struct vps_dev *dev, u16 status,
			    const struct vps_scope *s)
{
	struct list_head *lists[] = { &dev->inflight, &dev->cmp_backlog };
	struct vps_req *req;
	u32 i, n = 0;

	for (i = 0; i < ARRAY_SIZE(lists); i++) {
		list_for_each_entry(req, lists[i], node) {
			if (!vps_scope_has(s, req))
				continue;
			if (!req->abort_status)
				req->abort_status = status;
			n++;
		}
	}
	return n;
}

/*
 * A reset or an abort also covers what the guest posted and we have not
 * consumed yet (a doorbell that the reset's quiesce swallowed, or one the
 * guest skipped): consume the ring now, completing the cancelled requests
 * unexecuted and starting the rest.  The caller posts the call.  Returns
 * how many were cancelled.  vmw_pvscsi reaps the completion ring right
 * after the command and from then on treats the commands as done (its
 * error handler retries them): one consumed later would complete a
 * retried command a second time.
 */
static u32 vps_consume_cancelling(struct vps_dev *dev, u16 status,
				  const struct vps_scope *s)
{
	/* a bound: a failed allocation retries the same slot */
	u32 rounds = (1u << dev->req_entries_log2) / VPS_WORK_WEIGHT + 2;

	if (!dev->rings_ok || dev->broken)
		return 0;
	dev->cancel.on = true;
	dev->cancel.status = status;
	dev->cancel.scope = *s;
	dev->cancel.hits = 0;
	while (rounds-- && vps_process_ring(dev, false))
		vps_process_done(dev);
	vps_process_done(dev);
	dev->cancel.on = false;
	return dev->cancel.hits;
}

static void vps_drop_rings(struct vps_dev *dev)
{
	dev->rings_ok = false;
	dev->msg_ok = false;
	dev->req_threshold = false;
	WRITE_ONCE(dev->recheck, false);
	dev->broken = false;
	dev->cmp_stall = false;
	dev->rs = NULL;
	memset(dev->req_pages, 0, sizeof(dev->req_pages));
	memset(dev->cmp_pages, 0, sizeof(dev->cmp_pages));
	memset(dev->msg_pages, 0, sizeof(dev->msg_pages));
}

/*
 * Let go of what the owner handed us: its LUNs, its eventfds, the table of
 * its memory.  Caller: nothing can use them any more (dev->mutex held with
 * the owner gone, or release after the worker stopped).
 */
static void vps_put_owner_refs(struct vps_dev *dev)
{
	u32 t, l;

	for (t = 0; t < VPS_MAX_TARGETS; t++) {
		for (l = 0; l < VPS_MAX_LUNS; l++) {
			vps_lun_put(dev->luns[t][l]);
			dev->luns[t][l] = NULL;
		}
	}
	if (dev->call_cmpl)
		eventfd_ctx_put(dev->call_cmpl);
	dev->call_cmpl = NULL;
	if (dev->call_msg)
		eventfd_ctx_put(dev->call_msg);
	dev->call_msg = NULL;
	kvfree(dev->mem);
	dev->mem = NULL;
}

/*
 * The owner's process has exited (SIGKILL included).  Let go now of what
 * it gave us and of what reaches into its memory, rather than at the last
 * close: another process may hold the fd (inherited, passed) for as long
 * as it likes.  The rings and the memory table go; the backing I/O in
 * flight, which pins guest pages and points at our requests, is waited
 * for; LUNs and eventfds are put.  Called from the worker with
 * dev->mutex held; after it, nothing wakes the worker and no ioctl but
 * the stats gets through.
 */
static void vps_owner_gone(struct vps_dev *dev)
{
	if (dev->owner_gone)
		return;
	/* first: the I/O completions below must not wake the worker */
	WRITE_ONCE(dev->owner_gone, true);
	vps_kick_stop(dev);
	vps_drop_rings(dev);
	vps_quiesce_wait(dev);
	/* the rings are gone: this frees what waited for ring room */
	vps_drain_backlog(dev);
	clear_bit(VPS_EV_KICK, &dev->events);
	dev->backlog_wait = false;
	vps_put_owner_refs(dev);
	pr_debug("owner of an adapter exited: its memory is let go\n");
}

/* ---------------------------------------------------------------------- */
/* ioctls                                                                 */
/* ---------------------------------------------------------------------- */

static int vps_dev_show(struct seq_file *m, void *v)
{
	struct vps_dev *dev = m->private;
	const struct vps_stats *st = &dev->stats;

	mutex_lock(&dev->mutex);
	seq_printf(m, "owner %d\nrings %d broken %d threshold %d msg %d\n",
		   dev->owner ? task_pid_nr(dev->owner) : 0, dev->rings_ok,
		   dev->broken, dev->req_threshold, dev->msg_ok);
	seq_printf(m, "req_cons %u cmp_prod %u msg_prod %u in_flight %u io_pending %d\n",
		   dev->req_cons, dev->cmp_prod, dev->msg_prod, dev->nr_inflight,
		   atomic_read(&dev->io_pending));
	seq_printf(m, "kicks %llu requests %llu completions %llu calls %llu\n",
		   st->kicks, st->requests, st->completions, st->calls);
	seq_printf(m, "rw_ios %llu emulated %llu errors_guest %llu errors_backing %llu\n",
		   st->rw_ios, st->emulated, st->errors_guest, st->errors_backing);
	seq_printf(m, "aborts %llu resets %llu msgs %llu unkicked %llu\n",
		   st->aborts, st->resets, st->msgs, dev->unkicked);
	mutex_unlock(&dev->mutex);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(vps_dev);

static int vps_set_owner(struct vps_dev *dev)
{
	char name[32];
	static atomic_t seq = ATOMIC_INIT(0);

	int ret;

	if (dev->owner)
		return -EBUSY;
	if (!current->mm)
		return -EINVAL;
	/*
	 * The mm_struct only, not its address space (mmget): the guest's
	 * RAM must go with the owner's process.  Whatever reaches into it
	 * runs in the owner's context: its ioctls, a worker that is one of
	 * its threads (vhost_task) or, as a kthread, mmget_not_zero()s it
	 * for each round.
	 */
	dev->mm = current->mm;
	mmgrab(dev->mm);
	snprintf(name, sizeof(name), "vhost-pvscsi-%d", task_pid_nr(current));
	ret = vps_worker_start(dev, name);
	if (ret) {
		mmdrop(dev->mm);
		dev->mm = NULL;
		return ret;
	}
	get_task_struct(current->group_leader);
	dev->owner = current->group_leader;
	/* one file per adapter: counters and ring indices for debugging */
	snprintf(name, sizeof(name), "adapter-%d-%d", task_pid_nr(current),
		 atomic_inc_return(&seq));
	dev->debugfs = debugfs_create_file(name, 0400, vps_debugfs, dev,
					   &vps_dev_fops);
	return 0;
}

static int vps_region_cmp(const void *a, const void *b)
{
	const struct vps_region *x = a, *y = b;

	return x->gpa < y->gpa ? -1 : x->gpa > y->gpa;
}

static int vps_set_mem_table(struct vps_dev *dev, void __user *argp)
{
	struct vhost_memory hdr;
	struct vhost_memory_region vr;
	struct vps_mem *mem, *old;
	u32 i;
	int ret;

	if (copy_from_user(&hdr, argp, sizeof(hdr)))
		return -EFAULT;
	if (hdr.padding || hdr.nregions > VPS_MAX_MEM_REGIONS)
		return -E2BIG;
	mem = kvzalloc(struct_size(mem, r, hdr.nregions), GFP_KERNEL);
	if (!mem)
		return -ENOMEM;
	mem->nregions = hdr.nregions;
	for (i = 0; i < hdr.nregions; i++) {
		struct vps_region *r = &mem->r[i];

		if (copy_from_user(&vr, argp + sizeof(hdr) + i * sizeof(vr),
				   sizeof(vr))) {
			ret = -EFAULT;
			goto err;
		}
		ret = -EINVAL;
		if (vr.flags_padding || !vr.memory_size ||
		    vr.guest_phys_addr + vr.memory_size - 1 < vr.guest_phys_addr ||
		    vr.userspace_addr + vr.memory_size - 1 < vr.userspace_addr ||
		    vr.userspace_addr != (unsigned long)vr.userspace_addr)
			goto err;
		ret = -EFAULT;
		if (!access_ok((void __user *)(uintptr_t)vr.userspace_addr,
			       vr.memory_size))
			goto err;
		r->gpa = vr.guest_phys_addr;
		r->size = vr.memory_size;
		r->uaddr = vr.userspace_addr;
	}
	sort(mem->r, mem->nregions, sizeof(mem->r[0]), vps_region_cmp, NULL);
	for (i = 1; i < mem->nregions; i++) {
		if (mem->r[i].gpa <= mem->r[i - 1].gpa + mem->r[i - 1].size - 1) {
			ret = -EINVAL;	/* overlapping regions */
			goto err;
		}
	}

	old = dev->mem;
	dev->mem = mem;
	/*
	 * Rings live in guest memory: look them up again in the new table.
	 * Rings it no longer covers cannot be read or posted to, and a
	 * failed lookup leaves them half translated: drop them, as an
	 * adapter reset does, until the guest sets them up again.  What is
	 * in flight completes unposted.
	 */
	if (dev->rings_ok && vps_map_rings(dev)) {
		pr_warn_ratelimited("adapter of pid %d: ring pages outside the new memory table, rings dropped\n",
				    task_pid_nr(dev->owner));
		dev->stats.errors_guest++;
		vps_drop_rings(dev);
		vps_drain_backlog(dev);
	}
	if (dev->msg_ok && vps_map_msg_ring(dev))
		dev->msg_ok = false;
	kvfree(old);
	return 0;
err:
	kvfree(mem);
	return ret;
}

static int vps_setup_rings(struct vps_dev *dev, void __user *argp)
{
	struct pvscsi_cmd_setup_rings c;
	u32 nreq, ncmp;
	int ret;

	if (copy_from_user(&c, argp, sizeof(c)))
		return -EFAULT;
	if (!dev->mem)
		return -EINVAL;
	if (dev->nr_inflight)
		return -EBUSY;	/* ADAPTER_RESET first */
	nreq = le32_to_cpu(c.req_ring_num_pages);
	ncmp = le32_to_cpu(c.cmp_ring_num_pages);
	if (!vps_pages_ok(nreq, PVSCSI_SETUP_RINGS_MAX_PAGES) ||
	    !vps_pages_ok(ncmp, PVSCSI_SETUP_RINGS_MAX_PAGES))
		return -EINVAL;
	dev->ring_cfg = c;
	ret = vps_map_rings(dev);
	if (ret) {
		vps_drop_rings(dev);
		return ret;
	}
	dev->req_entries_log2 = ilog2(nreq * PVSCSI_REQ_DESCS_PER_PAGE);
	dev->cmp_entries_log2 = ilog2(ncmp * PVSCSI_CMP_DESCS_PER_PAGE);
	dev->req_cons = 0;
	dev->cmp_prod = 0;
	dev->broken = false;
	dev->req_threshold = false;
	if (vps_rs_put(&dev->rs->req_cons_idx, 0) ||
	    vps_rs_put(&dev->rs->req_num_entries_log2, dev->req_entries_log2) ||
	    vps_rs_put(&dev->rs->cmp_prod_idx, 0) ||
	    vps_rs_put(&dev->rs->cmp_num_entries_log2, dev->cmp_entries_log2)) {
		vps_drop_rings(dev);
		return -EFAULT;
	}
	dev->rings_ok = true;
	vps_kick_worker(dev);
	return 0;
}

static int vps_setup_msg_ring(struct vps_dev *dev, void __user *argp)
{
	struct pvscsi_cmd_setup_msg_ring c;
	u32 n;

	if (copy_from_user(&c, argp, sizeof(c)))
		return -EFAULT;
	if (!dev->rings_ok)
		return -EINVAL;	/* the message indices live in rings state */
	n = le32_to_cpu(c.num_pages);
	if (!vps_pages_ok(n, PVSCSI_SETUP_MSG_RING_MAX_PAGES))
		return -EINVAL;
	/* from here a failure leaves no message ring, not half of one */
	dev->msg_ok = false;
	dev->msg_cfg = c;
	if (vps_map_msg_ring(dev))
		return -EFAULT;
	dev->msg_entries_log2 = ilog2(n * PVSCSI_MSG_DESCS_PER_PAGE);
	dev->msg_prod = 0;
	if (vps_rs_put(&dev->rs->msg_prod_idx, 0) ||
	    vps_rs_put(&dev->rs->msg_num_entries_log2, dev->msg_entries_log2))
		return -EFAULT;
	dev->msg_ok = true;
	return 0;
}

static int vps_set_call(struct vps_dev *dev, void __user *argp)
{
	struct eventfd_ctx *ctx = NULL, **slot;
	struct vps_eventfd e;

	if (copy_from_user(&e, argp, sizeof(e)))
		return -EFAULT;
	if (e.index == VPS_EVENT_CMPL)
		slot = &dev->call_cmpl;
	else if (e.index == VPS_EVENT_MSG)
		slot = &dev->call_msg;
	else
		return -EINVAL;
	if (e.fd != -1) {
		ctx = eventfd_ctx_fdget(e.fd);
		if (IS_ERR(ctx))
			return PTR_ERR(ctx);
	}
	if (*slot)
		eventfd_ctx_put(*slot);
	*slot = ctx;
	return 0;
}

static int vps_set_kick(struct vps_dev *dev, void __user *argp)
{
	struct vps_eventfd e;

	if (copy_from_user(&e, argp, sizeof(e)))
		return -EFAULT;
	if (e.index != 0)
		return -EINVAL;	/* one request queue until the extension */
	if (e.fd == -1) {
		vps_kick_stop(dev);
		return 0;
	}
	return vps_kick_start(dev, e.fd);
}

bool vps_target_present(struct vps_dev *dev, u32 target)
{
	u32 l;

	for (l = 0; l < VPS_MAX_LUNS; l++)
		if (dev->luns[target][l])
			return true;
	return false;
}

static int vps_attach_lun(struct vps_dev *dev, void __user *argp)
{
	struct vps_lun u;
	struct vps_lu *lun;
	struct file *file;
	fmode_t need;
	u32 i;
	int ret;

	if (copy_from_user(&u, argp, sizeof(u)))
		return -EFAULT;
	for (i = 0; i < ARRAY_SIZE(u.reserved); i++)
		if (u.reserved[i])
			return -EINVAL;
	if (u.target >= VPS_MAX_TARGETS || u.lun >= VPS_MAX_LUNS ||
	    (u.flags & ~VPS_LUN_FLAGS_ALL) ||
	    (u.block_size && u.block_size != 512 && u.block_size != 4096))
		return -EINVAL;
	if (dev->luns[u.target][u.lun])
		return -EEXIST;

	file = fget(u.fd);
	if (!file)
		return -EBADF;
	ret = -EINVAL;
	if (!S_ISBLK(file_inode(file)->i_mode) &&
	    !S_ISREG(file_inode(file)->i_mode))
		goto err_file;
	/* the VMM's open mode is the permission: we never reopen */
	need = FMODE_READ | ((u.flags & VPS_LUN_READ_ONLY) ? 0 : FMODE_WRITE);
	ret = -EACCES;
	if ((file->f_mode & need) != need)
		goto err_file;
	ret = -EINVAL;
	if (!(file->f_mode & FMODE_CAN_ODIRECT) || !file->f_op->read_iter ||
	    !file->f_op->write_iter)
		goto err_file;
	/* an O_APPEND file sends every WRITE to its end, whatever the LBA */
	if (file->f_flags & O_APPEND)
		goto err_file;

	ret = -ENOMEM;
	lun = kzalloc(sizeof(*lun), GFP_KERNEL);
	if (!lun)
		goto err_file;
	kref_init(&lun->ref);
	lun->file = file;
	lun->target = u.target;
	lun->lun = u.lun;
	lun->flags = u.flags;
	lun->max_outstanding = u.max_outstanding ?: max_outstanding;
	memcpy(lun->vendor, u.vendor, sizeof(lun->vendor));
	memcpy(lun->product, u.product, sizeof(lun->product));
	memcpy(lun->serial, u.serial, sizeof(lun->serial));
	ret = vps_lun_probe(lun, u.block_size);
	if (ret) {
		kfree(lun);
		goto err_file;
	}
	atomic_long_inc(&vps_luns);
	dev->luns[u.target][u.lun] = lun;
	vps_post_msg(dev, PVSCSI_MSG_DEV_ADDED, u.target, u.lun);
	return 0;

err_file:
	fput(file);
	return ret;
}

static int vps_detach_lun(struct vps_dev *dev, void __user *argp)
{
	struct vps_lun_addr a;
	struct vps_lu *lun;

	if (copy_from_user(&a, argp, sizeof(a)))
		return -EFAULT;
	if (a.target >= VPS_MAX_TARGETS || a.lun >= VPS_MAX_LUNS)
		return -EINVAL;
	lun = dev->luns[a.target][a.lun];
	if (!lun)
		return -ENOENT;
	/* requests in flight keep their reference and complete normally */
	dev->luns[a.target][a.lun] = NULL;
	vps_post_msg(dev, PVSCSI_MSG_DEV_REMOVED, a.target, a.lun);
	vps_lun_put(lun);
	return 0;
}

/*
 * Resets complete every affected command before they return: a guest
 * driver reuses the contexts of a reset device right after the reset.
 */
static int vps_reset(struct vps_dev *dev, void __user *argp)
{
	struct vps_scope s = {};
	struct vps_reset r;

	if (copy_from_user(&r, argp, sizeof(r)))
		return -EFAULT;
	if (r.reserved)
		return -EINVAL;
	switch (r.kind) {
	case VPS_RESET_ADAPTER:
	case VPS_RESET_BUS:
		s.all = true;
		break;
	case VPS_RESET_DEVICE:
		if (r.target >= VPS_MAX_TARGETS || r.lun >= VPS_MAX_LUNS)
			return -EINVAL;
		s.target = r.target;
		s.lun = r.lun;
		break;
	default:
		return -EINVAL;
	}
	/* what an adapter reset leaves in the ring the guest fails back */
	if (r.kind != VPS_RESET_ADAPTER)
		vps_consume_cancelling(dev, BTSTAT_BUSRESET, &s);
	vps_mark_aborted(dev, BTSTAT_BUSRESET, &s);
	dev->stats.resets++;
	vps_quiesce_wait(dev);
	if (r.kind == VPS_RESET_ADAPTER) {
		/* the rings are gone: nothing more is written to the guest */
		vps_drop_rings(dev);
		vps_drain_backlog(dev);
		clear_bit(VPS_EV_KICK, &dev->events);
	} else {
		vps_drain_backlog(dev);
		/* the guest reaps the reset's completions right after */
		if (dev->need_call)
			vps_call(dev);
		vps_kick_worker(dev);
	}
	return 0;
}

static int vps_abort(struct vps_dev *dev, void __user *argp)
{
	struct vps_scope s = { .by_context = true };
	struct vps_abort a;
	u32 found;

	if (copy_from_user(&a, argp, sizeof(a)))
		return -EFAULT;
	if (a.reserved)
		return -EINVAL;
	s.target = a.target;
	s.context = a.context;
	/* still in the ring: it completes aborted before we return */
	found = vps_consume_cancelling(dev, BTSTAT_ABORTQUEUE, &s);
	if (dev->need_call)
		vps_call(dev);
	found += vps_mark_aborted(dev, BTSTAT_ABORTQUEUE, &s);
	if (!found)
		return -ENOENT;
	/* the backing I/O cannot be cancelled: it completes as aborted */
	dev->stats.aborts++;
	return 0;
}

static int vps_set_threshold(struct vps_dev *dev, void __user *argp)
{
	u32 enable;

	if (get_user(enable, (u32 __user *)argp))
		return -EFAULT;
	if (enable > 1 || !dev->rings_ok)
		return -EINVAL;
	dev->req_threshold = enable;
	if (vps_rs_put(&dev->rs->req_call_threshold, 1))
		return -EFAULT;
	return 0;
}

static long vps_ioctl(struct file *f, unsigned int cmd, unsigned long arg)
{
	struct vps_dev *dev = f->private_data;
	void __user *argp = (void __user *)arg;
	long ret;

	switch (cmd) {
	case VPS_GET_ABI_VERSION:
		return put_user((u32)VPS_ABI_VERSION, (u32 __user *)argp);
	case VPS_GET_STATS: {
		struct vps_stats st;

		mutex_lock(&dev->mutex);
		st = dev->stats;
		st.in_flight = dev->nr_inflight;
		st.pinned_pages = atomic_read(&dev->io_pending);
		mutex_unlock(&dev->mutex);
		return copy_to_user(argp, &st, sizeof(st)) ? -EFAULT : 0;
	}
	}

	mutex_lock(&dev->mutex);
	if (cmd == VHOST_SET_OWNER) {
		ret = vps_set_owner(dev);
		goto out;
	}
	/*
	 * Everything else belongs to the owner, as in vhost; once its
	 * process is gone, to nobody (a process sharing its mm included).
	 */
	ret = -EPERM;
	if (!dev->owner || dev->owner_gone || dev->mm != current->mm)
		goto out;

	switch (cmd) {
	case VHOST_SET_MEM_TABLE:
		ret = vps_set_mem_table(dev, argp);
		break;
	case VPS_SETUP_RINGS:
		ret = vps_setup_rings(dev, argp);
		break;
	case VPS_SETUP_MSG_RING:
		ret = vps_setup_msg_ring(dev, argp);
		break;
	case VPS_SET_KICK_FD:
		ret = vps_set_kick(dev, argp);
		break;
	case VPS_SET_CALL_FD:
		ret = vps_set_call(dev, argp);
		break;
	case VPS_SET_REQ_CALL_THRESHOLD:
		ret = vps_set_threshold(dev, argp);
		break;
	case VPS_ATTACH_LUN:
		ret = vps_attach_lun(dev, argp);
		break;
	case VPS_DETACH_LUN:
		ret = vps_detach_lun(dev, argp);
		break;
	case VPS_RESET:
		ret = vps_reset(dev, argp);
		break;
	case VPS_ABORT:
		ret = vps_abort(dev, argp);
		break;
	default:
		ret = -ENOTTY;
		break;
	}
out:
	mutex_unlock(&dev->mutex);
	return ret;
}

static int vps_open(struct inode *inode, struct file *f)
{
	/*
	 * The LUN table makes this an order-4 allocation: a fragmented host
	 * would refuse a VM its disk for want of contiguous pages.  Charged
	 * to the VMM's memory cgroup, as everything a guest makes us hold.
	 */
	struct vps_dev *dev = kvzalloc(sizeof(*dev), GFP_KERNEL_ACCOUNT);

	if (!dev)
		return -ENOMEM;
	dev->scratch = kmalloc(VPS_SCRATCH_SIZE, GFP_KERNEL_ACCOUNT);
	if (!dev->scratch) {
		kvfree(dev);
		return -ENOMEM;
	}
	mutex_init(&dev->mutex);
	INIT_LIST_HEAD(&dev->inflight);
	INIT_LIST_HEAD(&dev->cmp_backlog);
	init_llist_head(&dev->done);
	init_waitqueue_head(&dev->io_wait);
	atomic_set(&dev->io_pending, 0);
	f->private_data = dev;
	atomic_long_inc(&vps_open_devs);
	return 0;
}

static int vps_release(struct inode *inode, struct file *f)
{
	struct vps_dev *dev = f->private_data;
	struct vps_req *req, *tmp;

	debugfs_remove(dev->debugfs);
	mutex_lock(&dev->mutex);
	vps_kick_stop(dev);
	/*
	 * Nothing more goes to guest memory: on owner exit we may run
	 * after the owner's mm is gone.  I/O in flight pins guest pages
	 * and points at our requests, so wait for it.
	 */
	vps_drop_rings(dev);
	dev->quiesce++;		/* for good: dev goes */
	vps_wait_io(dev);
	mutex_unlock(&dev->mutex);

	vps_worker_stop(dev);
	/* the worker is gone; nothing else can touch dev now */
	vps_process_done(dev);
	list_for_each_entry_safe(req, tmp, &dev->cmp_backlog, node)
		vps_req_free(dev, req);
	list_for_each_entry_safe(req, tmp, &dev->inflight, node)
		vps_req_free(dev, req);
	vps_put_owner_refs(dev);
	if (dev->mm)
		mmdrop(dev->mm);
	if (dev->owner)
		put_task_struct(dev->owner);
	kfree(dev->scratch);
	kvfree(dev);
	atomic_long_dec(&vps_open_devs);
	return 0;
}

static const struct file_operations vps_fops = {
	.owner		= THIS_MODULE,
	.open		= vps_open,
	.release	= vps_release,
	.unlocked_ioctl	= vps_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.llseek		= noop_llseek,
};

static struct miscdevice vps_misc = {
	.minor	= MISC_DYNAMIC_MINOR,
	.name	= "vhost-pvscsi",
	.fops	= &vps_fops,
	.mode	= 0600,
};

static int vps_gauges_show(struct seq_file *m, void *v)
{
	seq_printf(m, "open_devices %ld\nrequests_in_flight %ld\nluns %ld\n",
		   atomic_long_read(&vps_open_devs),
		   atomic_long_read(&vps_inflight_reqs),
		   atomic_long_read(&vps_luns));
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(vps_gauges);

static int __init vps_init(void)
{
	int ret;

	/*
	 * sense is the one field copied to the guest (hardened usercopy).
	 * SLAB_ACCOUNT: a guest that stops reaping completions keeps up to
	 * a ring of requests alive; they count against the VMM's cgroup.
	 */
	vps_req_cache = KMEM_CACHE_USERCOPY(vps_req, SLAB_ACCOUNT, sense);
	if (!vps_req_cache)
		return -ENOMEM;
	vps_free_wq = alloc_workqueue("vhost_pvscsi_free", 0, 0);
	if (!vps_free_wq) {
		kmem_cache_destroy(vps_req_cache);
		return -ENOMEM;
	}
	ret = misc_register(&vps_misc);
	if (ret) {
		destroy_workqueue(vps_free_wq);
		kmem_cache_destroy(vps_req_cache);
		return ret;
	}
	vps_debugfs = debugfs_create_dir(KBUILD_MODNAME, NULL);
	debugfs_create_file("gauges", 0444, vps_debugfs, NULL, &vps_gauges_fops);
	return 0;
}

static void __exit vps_exit(void)
{
	debugfs_remove_recursive(vps_debugfs);
	misc_deregister(&vps_misc);
	/* the last LUNs a worker let go of */
	destroy_workqueue(vps_free_wq);
	kmem_cache_destroy(vps_req_cache);
}

module_init(vps_init);
module_exit(vps_exit);
MODULE_DESCRIPTION("vhost-pvscsi: PVSCSI adapter data path in the host kernel");
MODULE_LICENSE("GPL");
MODULE_ALIAS("devname:vhost-pvscsi");
