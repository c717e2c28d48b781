// SPDX-License-Identifier: GPL-2.0
/*
 * vhost_pvscsi: the rings and the workers.  The ring pages the guest gave
 * to SETUP_RINGS, EXT_SETUP_QUEUES and SETUP_MSG_RING, translated through
 * the memory table; the request ring walk (each descriptor copied once and
 * validated, then handed to the SCSI target); the completion rings and
 * their backlogs; the message ring; a worker per queue (a vhost_task, or
 * a kthread on 6.1), each under its queue's lock, and the kick eventfd
 * that wakes it; and what resets, aborts and the owner's exit do to all
 * of that.
 *
 * Layering: called by the control plane (vps_main.c) through vps_ring.h;
 * calls down into the SCSI target (vps_scsi.h) and the I/O interface
 * (vps_io.h).  The target answers at once or queues backing I/O
 * (vps_scsi_execute()'s result): either way the completion is posted here.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/eventfd.h>
#include <linux/file.h>
#include <linux/cgroup.h>
#include <linux/kthread.h>
#include <linux/sched/clock.h>
#include <linux/sched/mm.h>
#include <uapi/linux/sched/types.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/log2.h>
#include <scsi/scsi_proto.h>

#include "vps.h"
#include "vps_io.h"
#include "vps_scsi.h"
#include "vps_ring.h"

/* struct vps_req, from descriptor to completion; vps_init() creates it */
struct kmem_cache *vps_req_cache;
/* requests consumed and not completed: a module-wide gauge (debugfs) */
atomic_long_t vps_inflight_reqs;

static void vps_owner_gone(struct vps_dev *dev);

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

bool vps_pages_ok(u32 n, u32 max)
{
	return n >= 1 && n <= max && is_power_of_2(n);
}

/* point @q's indices into the rings state page (dev->rs, mapped) */
static void vps_queue_indices(struct vps_dev *dev, struct vps_queue *q)
{
	struct pvscsi_rings_state __user *rs = dev->rs;
	struct pvscsi_ext_queue_state __user *qs;

	if (!q->index) {
		q->req_prod_idx = &rs->req_prod_idx;
		q->req_cons_idx = &rs->req_cons_idx;
		q->req_num_log2 = &rs->req_num_entries_log2;
		q->req_call_threshold = &rs->req_call_threshold;
		q->cmp_prod_idx = &rs->cmp_prod_idx;
		q->cmp_cons_idx = &rs->cmp_cons_idx;
		q->cmp_num_log2 = &rs->cmp_num_entries_log2;
		q->cmp_event_idx = (__le32 __user *)((u8 __user *)rs +
						     PVSCSI_EXT_CMP_EVENT_OFFSET);
		return;
	}
	qs = (struct pvscsi_ext_queue_state __user *)((u8 __user *)rs +
		PVSCSI_EXT_QUEUE_STATE_OFFSET(q->index));
	q->req_prod_idx = &qs->req_prod_idx;
	q->req_cons_idx = &qs->req_cons_idx;
	q->req_num_log2 = &qs->req_num_entries_log2;
	q->req_call_threshold = &qs->req_call_threshold;
	q->cmp_prod_idx = &qs->cmp_prod_idx;
	q->cmp_cons_idx = &qs->cmp_cons_idx;
	q->cmp_num_log2 = &qs->cmp_num_entries_log2;
	q->cmp_event_idx = &qs->cmp_event_idx;
}

/* translate @q's ring pages, as the guest gave them, through dev->mem */
int vps_map_queue(struct vps_dev *dev, struct vps_queue *q)
{
	int ret;

	if (!vps_pages_ok(q->nreq_pages, PVSCSI_SETUP_RINGS_MAX_PAGES) ||
	    !vps_pages_ok(q->ncmp_pages, PVSCSI_SETUP_RINGS_MAX_PAGES))
		return -EINVAL;
	vps_queue_indices(dev, q);
	ret = vps_translate_pages(dev->mem, q->req_ppns, q->nreq_pages,
				  q->req_pages);
	if (ret)
		return ret;
	return vps_translate_pages(dev->mem, q->cmp_ppns, q->ncmp_pages,
				   q->cmp_pages);
}

/* translate the rings state page and every queue's rings through dev->mem */
int vps_map_rings(struct vps_dev *dev)
{
	u32 i;
	int ret;

	if (dev->rs_ppn >> (64 - PVSCSI_PAGE_SHIFT))
		return -EFAULT;
	dev->rs = vps_gpa_to_user(dev->mem, dev->rs_ppn << PVSCSI_PAGE_SHIFT,
				  PVSCSI_PAGE_SIZE);
	if (!dev->rs)
		return -EFAULT;
	for (i = 0; i < dev->nr_queues; i++) {
		ret = vps_map_queue(dev, &dev->q[i]);
		if (ret)
			return ret;
	}
	return 0;
}

int vps_map_msg_ring(struct vps_dev *dev)
{
	u32 n = le32_to_cpu(dev->msg_cfg.num_pages);

	if (!vps_pages_ok(n, PVSCSI_SETUP_MSG_RING_MAX_PAGES))
		return -EINVAL;
	return vps_translate_pages(dev->mem, dev->msg_cfg.ring_ppns, n,
				   dev->msg_pages);
}

int vps_rs_get(struct vps_dev *dev, __le32 __user *field, u32 *val)
{
	__le32 v;

	if (get_user(v, field))
		return -EFAULT;
	*val = le32_to_cpu(v);
	return 0;
}

int vps_rs_put(struct vps_dev *dev, __le32 __user *field, u32 val)
{
	if (put_user(cpu_to_le32(val), field))
		return -EFAULT;
	vps_log_write(dev, field, sizeof(*field));
	return 0;
}

/* any queue's worker, or the control path: a latch until a reset */
static void vps_break(struct vps_dev *dev, const char *why)
{
	if (!READ_ONCE(dev->broken))
		pr_warn_ratelimited("adapter of pid %d stopped: %s (reset clears it)\n",
				    dev->owner ? task_pid_nr(dev->owner) : 0, why);
	WRITE_ONCE(dev->broken, true);
	vps_count(dev, s.errors_guest);
}

/* ---------------------------------------------------------------------- */
/* completion                                                             */
/* ---------------------------------------------------------------------- */

void vps_req_free(struct vps_dev *dev, struct vps_req *req)
{
	list_del(&req->node);
	req->q->nr_inflight--;
	if (req->active)
		atomic_dec(&req->lun->outstanding);
	vps_lun_put(req->lun);
	vps_bounce_free(req->bounce);
	kmem_cache_free(vps_req_cache, req);
	atomic_long_dec(&vps_inflight_reqs);
}

/* room for one more completion?  (a consumer ahead of us breaks the ring) */
static bool vps_cmp_room(struct vps_queue *q)
{
	u32 entries = 1u << q->cmp_entries_log2, cons;
	struct vps_dev *dev = q->dev;

	if (vps_rs_get(dev, q->cmp_cons_idx, &cons)) {
		vps_break(dev, "rings state unreadable");
		return false;
	}
	if (q->cmp_prod - cons >= entries) {
		if (q->cmp_prod - cons > entries)
			vps_break(dev, "completion consumer index ahead of producer");
		return false;
	}
	return true;
}

/* write one completion descriptor and publish it */
static bool vps_post_desc(struct vps_queue *q, const struct pvscsi_cmp_desc *c)
{
	u32 entries = 1u << q->cmp_entries_log2, slot;
	struct vps_dev *dev = q->dev;
	void __user *p;

	slot = q->cmp_prod & (entries - 1);
	p = q->cmp_pages[slot / PVSCSI_CMP_DESCS_PER_PAGE] +
		(slot % PVSCSI_CMP_DESCS_PER_PAGE) * sizeof(*c);
	if (copy_to_user(p, c, sizeof(*c))) {
		vps_break(dev, "completion ring unwritable");
		return false;
	}
	vps_log_write(dev, p, sizeof(*c));
	/* the descriptor must be visible before the index that publishes it */
	smp_wmb();
	q->cmp_prod++;
	if (vps_rs_put(dev, q->cmp_prod_idx, q->cmp_prod)) {
		vps_break(dev, "rings state unwritable");
		return false;
	}
	return true;
}

/*
 * The stale_completions test hook: a device that posts a completion
 * twice, the second time once the guest has given the tag to a new
 * command (same low 32 bits of the context), while that one is in
 * flight.  The copy says "selection timeout", as a late completion of a
 * command the device gave up on would: a guest driver that matched
 * completions by tag alone would fail the new command with it, and the
 * test sees that as an I/O error (an early success would go unseen when
 * the data lands before the guest looks).  Armed and fired on one queue.
 */
static void vps_stale_arm(struct vps_queue *q, u64 context)
{
	if (!q->stale_armed) {
		q->stale_ctx = context;
		q->stale_armed = true;
	}
}

/* counted down here, not when armed: writing 0 disarms at once */
static void vps_stale_fire(struct vps_queue *q, u64 context)
{
	struct vps_dev *dev = q->dev;
	struct pvscsi_cmp_desc c = {};

	if (lower_32_bits(context) != lower_32_bits(q->stale_ctx) ||
	    !vps_cmp_room(q))
		return;
	q->stale_armed = false;
	if (!atomic_add_unless(&vps_stale_left, -1, 0))
		return;
	c.context = cpu_to_le64(q->stale_ctx);
	c.host_status = cpu_to_le16(BTSTAT_SELTIMEO);
	c.scsi_status = cpu_to_le16(SAM_STAT_GOOD);
	if (vps_post_desc(q, &c)) {
		vps_count(dev, stale_posted);
		q->need_call = true;
	}
}

/*
 * Post one completion on its request's queue.  Returns false when that
 * completion ring is full: the request stays on the backlog and is retried.
 */
static bool vps_post(struct vps_dev *dev, struct vps_req *req)
{
	struct pvscsi_cmp_desc c = {};
	struct vps_queue *q = req->q;

	if (!vps_cmp_room(q))
		return false;

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

		if (s && !copy_to_user(s, req->sense, n)) {
			vps_log_write(dev, s, n);
			c.sense_len = cpu_to_le32(n);
		} else {
			vps_count(dev, s.errors_guest);
		}
	}

	if (!vps_post_desc(q, &c))
		return false;
	vps_count(dev, s.completions);
	if (unlikely(atomic_read(&vps_stale_left)))
		vps_stale_arm(q, req->context);
	return true;
}

/* a request has its result: post it, or park it behind a full ring */
static bool vps_finish(struct vps_dev *dev, struct vps_req *req)
{
	struct vps_queue *q = req->q;
	u32 i;

	/*
	 * The data a command moved to the guest is there now (the backing
	 * I/O and a bounce's copy are done): log it before its completion,
	 * also when nobody receives that (it still changed guest pages)
	 */
	for (i = 0; dev->log.on && !req->write && i < req->nr_iovs; i++)
		vps_log_write(dev, req->iov[i].iov_base, req->iov[i].iov_len);
	if (req->active) {
		atomic_dec(&req->lun->outstanding);
		req->active = false;
	}
	if (!q->ok || READ_ONCE(dev->broken)) {
		/* adapter reset, queue gone or broken: nobody can receive it */
		vps_req_free(dev, req);
		return false;
	}
	if (!list_empty(&q->cmp_backlog) || !vps_post(dev, req)) {
		list_move_tail(&req->node, &q->cmp_backlog);
		/*
		 * The worker looks for room each tick from now on: tell it,
		 * as it may be asleep for good (a completion the control
		 * path posts, an abort's: nothing else wakes it).
		 */
		if (!q->backlog_wait) {
			WRITE_ONCE(q->backlog_wait, true);
			vps_queue_wake(q);
		}
		return false;
	}
	vps_req_free(dev, req);
	q->need_call = true;
	return true;
}

/*
 * VPS_FEAT_CMP_EVENT_IDX: does the guest want an interrupt for what was
 * posted on @q since the last decision?  cmpProdIdx is published already;
 * the barrier orders that before the event index is read, against the
 * guest's write of the index, barrier, read of cmpProdIdx (one of the
 * two sides then sees the other).  An unreadable index: interrupt.
 * The features are on only with rings (vps_drop_rings() clears them), so
 * the index is mapped here.
 */
static bool vps_event_wanted(struct vps_queue *q)
{
	u32 old = q->event_old, event;

	q->event_old = q->cmp_prod;
	/* cmpProdIdx stored before the event index is loaded */
	smp_mb();
	if (vps_rs_get(q->dev, q->cmp_event_idx, &event))
		return true;
	return pvscsi_ext_need_event(event, q->cmp_prod, old);
}

void vps_call(struct vps_queue *q)
{
	struct vps_dev *dev = q->dev;

	q->need_call = false;
	q->call_cmp = q->cmp_prod;
	if (q->coalesce_armed) {
		q->coalesce_armed = false;
		/* running already: it only adds a round with nothing due */
		hrtimer_try_to_cancel(&q->coalesce_timer);
	}
	if ((dev->features & VPS_FEAT_CMP_EVENT_IDX) && !vps_event_wanted(q)) {
		vps_count(dev, s.calls_suppressed);
		return;
	}
	if (q->call) {
		vps_eventfd_signal(q->call);
		vps_count(dev, s.calls);
		q->calls++;
	}
}

/* every queue's interrupt for what was posted: resets, stop, aborts */
void vps_call_all(struct vps_dev *dev)
{
	u32 i;

	for (i = 0; i < VPS_MAX_QUEUES; i++)
		if (dev->q[i].need_call)
			vps_call(&dev->q[i]);
}

/*
 * Interrupt coalescing (coalesce_us): a guest that takes an interrupt per
 * completion (vmw_pvscsi at queue depth 32, 0.8 per I/O) gets one for
 * several.  While other requests of the queue are in flight, the
 * interrupt for what a round posted waits up to coalesce_us for the
 * completions that follow, or until VPS_COALESCE_MAX of them are posted;
 * the last request in flight is signalled at once, so queue depth 1 waits
 * for nothing.  The timer only wakes the queue's worker, which raises the
 * interrupt under the queue's lock like every other.  ESXi coalesces PVSCSI's
 * interrupts too.  True when the interrupt is held.
 */
static bool vps_coalesce_hold(struct vps_queue *q)
{
	u32 us = min_t(u32, READ_ONCE(vps_coalesce_us), VPS_COALESCE_US_MAX);
	struct vps_dev *dev = q->dev;

	if (!us || !q->nr_inflight || dev->stopped || dev->quiesce ||
	    q->cmp_prod - q->call_cmp >= VPS_COALESCE_MAX)
		return false;
	if (!q->coalesce_armed) {
		q->coalesce_armed = true;
		vps_count(dev, coalesced);
		hrtimer_start(&q->coalesce_timer, us * NSEC_PER_USEC,
			      HRTIMER_MODE_REL);
	}
	return true;
}

static enum hrtimer_restart vps_coalesce_due(struct hrtimer *t)
{
	struct vps_queue *q = container_of(t, struct vps_queue, coalesce_timer);
	unsigned long flags;

	set_bit(VPS_EV_CALL, &q->events);
	/* under io_wait.lock, as a completion wakes it: see vps_owner_gone() */
	spin_lock_irqsave(&q->io_wait.lock, flags);
	vps_queue_wake(q);
	spin_unlock_irqrestore(&q->io_wait.lock, flags);
	return HRTIMER_NORESTART;
}

/* at open: every queue's fixed parts */
void vps_queues_init(struct vps_dev *dev)
{
	u32 i;

	for (i = 0; i < VPS_MAX_QUEUES; i++) {
		struct vps_queue *q = &dev->q[i];

		q->dev = dev;
		q->index = i;
		mutex_init(&q->lock);
		INIT_LIST_HEAD(&q->cmp_backlog);
		INIT_LIST_HEAD(&q->inflight);
		init_llist_head(&q->done);
		init_waitqueue_head(&q->io_wait);
		atomic_set(&q->io_pending, 0);
		hrtimer_init(&q->coalesce_timer, CLOCK_MONOTONIC,
			     HRTIMER_MODE_REL);
		q->coalesce_timer.function = vps_coalesce_due;
	}
}

/* no interrupt is held from here on (the timers wake the worker) */
void vps_coalesce_cancel(struct vps_dev *dev)
{
	u32 i;

	for (i = 0; i < VPS_MAX_QUEUES; i++)
		hrtimer_cancel(&dev->q[i].coalesce_timer);
}

/* synchronous completion from the target (emulated commands, errors) */
static bool vps_complete_now(struct vps_dev *dev, struct vps_req *req)
{
	return vps_finish(dev, req);
}

/* post what waited for room in @q's completion ring */
static void vps_drain_backlog_q(struct vps_queue *q)
{
	struct vps_dev *dev = q->dev;
	struct vps_req *req, *tmp;

	list_for_each_entry_safe(req, tmp, &q->cmp_backlog, node) {
		if (!q->ok || READ_ONCE(dev->broken)) {
			vps_req_free(dev, req);
			continue;
		}
		if (!vps_post(dev, req))
			break;
		vps_req_free(dev, req);
		q->need_call = true;
	}
}

/* the same for every queue (the control path) */
void vps_drain_backlog(struct vps_dev *dev)
{
	u32 i;

	for (i = 0; i < VPS_MAX_QUEUES; i++)
		vps_drain_backlog_q(&dev->q[i]);
}

/* is any completion waiting for ring room? */
bool vps_backlog_any(struct vps_dev *dev)
{
	u32 i;

	for (i = 0; i < VPS_MAX_QUEUES; i++)
		if (!list_empty(&dev->q[i].cmp_backlog))
			return true;
	return false;
}

/* post @q's backing I/O that completed (vps_io.c put it on q->done) */
static void vps_process_done_q(struct vps_queue *q)
{
	struct llist_node *list = llist_del_all(&q->done);
	struct vps_dev *dev = q->dev;
	struct vps_req *req, *tmp;

	list = llist_reverse_order(list);
	llist_for_each_entry_safe(req, tmp, list, done_node) {
		vps_scsi_complete_io(dev, req);
		vps_finish(dev, req);
	}
}

/* the same for every queue (the control path) */
void vps_process_done(struct vps_dev *dev)
{
	u32 i;

	for (i = 0; i < VPS_MAX_QUEUES; i++)
		vps_process_done_q(&dev->q[i]);
}

/* ---------------------------------------------------------------------- */
/* request ring                                                           */
/* ---------------------------------------------------------------------- */

static struct vps_req *vps_req_alloc(struct vps_queue *q)
{
	struct vps_dev *dev = q->dev;
	struct vps_req *req;

	if (unlikely(vps_fail_req_nomem()))
		return NULL;
	req = kmem_cache_alloc(vps_req_cache, GFP_KERNEL);
	if (!req)
		return NULL;
	memset(req, 0, offsetof(struct vps_req, iov));
	req->dev = dev;
	req->q = q;
	list_add_tail(&req->node, &q->inflight);
	q->nr_inflight++;
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

/* the target answered a request at once, without backing I/O */
static void vps_req_done_sync(struct vps_dev *dev, struct vps_req *req)
{
	vps_count(dev, s.emulated);
	vps_complete_now(dev, req);
}

/* one descriptor, copied once; the copy is all we look at afterwards */
static bool vps_handle_desc(struct vps_queue *q,
			    const struct pvscsi_req_desc *d)
{
	struct vps_req *req = vps_req_alloc(q);
	struct vps_dev *dev = q->dev;
	u32 flags, dir;
	int ret;

	if (!req)
		return false;
	vps_count(dev, s.requests);
	q->requests++;
	req->context = le64_to_cpu(d->context);
	if (unlikely(q->stale_armed))
		vps_stale_fire(q, req->context);
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
	 * A discard runs synchronously (vps_scsi_extra_weight()): run here,
	 * in the abort or reset that consumes the whole ring, a ring of them
	 * would hold the guest's vCPU in its abort for as long as they all
	 * take.  The target is busy with a task management function: BUSY,
	 * and the guest sends the discard again.
	 */
	if (dev->cancel.on && vps_scsi_extra_weight(d->cdb)) {
		req->host_status = BTSTAT_SUCCESS;
		req->scsi_status = SAM_STAT_BUSY;
		vps_count(dev, cancel_busy);
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
	if (vps_scsi_execute(dev, req, d) == VPS_EXEC_DONE)
		vps_req_done_sync(dev, req);
	return true;

bad:
	vps_count(dev, s.errors_guest);
	vps_complete_now(dev, req);
	return true;
}

/* a doorbell's pass watching its dry ring: vps_poll_ring()'s state */
struct vps_watch {
	u64 end;		/* local_clock(): when the poll_us watch ends */
	u64 hold_end;		/* ... when a hold ends, whatever comes */
	u64 last;		/* ... when it began or its last request came */
	u32 took;		/* requests the pass took */
	u32 got;		/* ... that came while it held */
	u32 out_max;		/* the most the guest had out while held */
	bool hold;		/* holding the interrupt (hold_us) */
	bool unheld;		/* the pass counted why it held not (once) */
};

/*
 * Hold the interrupt while the guest is still posting (hold_us)?  With a
 * vCPU of its own, the worker wakes at the guest's first doorbell, takes
 * the one or few requests there, completes them at once (null_blk, the
 * page cache) and interrupts: a queue-depth-32 guest then rings and takes
 * an interrupt every 1.6-3.7 requests (Documentation/bench/
 * host-2cpu-2026-12-07.md).  A guest that posts a batch is still posting
 * when its first requests complete, so their interrupt waits for the
 * rest.  Only where it pays: a pass that took two or more, or after a
 * hold that saw requests come.  A queue-depth-1 guest never posts two,
 * and a hold that saw nothing come (the guest had posted all it had: a
 * worker that shares the vCPU's CPU runs only once it halts) is not
 * tried again for 2, 4, ... VPS_HOLD_RETRY passes (vps_hold_done()).
 * Passes, not looks: with poll_us a pass looks at its dry ring once per
 * request a queue-depth-1 guest posts, and counting looks would end the
 * wait that many times sooner.
 */
static bool vps_hold_wanted(struct vps_queue *q, struct vps_watch *pl)
{
	if (q->dev->cancel.on)
		return false;
	if (q->hold_fruitful)
		return true;
	if (q->hold_skip) {
		/* hold_skip only changes when a hold ends: one reason a pass */
		if (!pl->unheld) {
			pl->unheld = true;
			WRITE_ONCE(q->hold_skip, q->hold_skip - 1);
			vps_count(q->dev, unheld_waiting);
		}
		return false;
	}
	if (pl->took >= 2)
		return true;
	/*
	 * After a hold that saw nothing come, a pass of one request holds
	 * not, however many the guest posted before; counted, as the usual
	 * source of interrupts at queue depth 32 under nested TCG
	 * (Documentation/bench/results-7jobs-e31b167.md)
	 */
	if (!pl->unheld) {
		pl->unheld = true;
		vps_count(q->dev, unheld_one);
	}
	return false;
}

/*
 * The requests the guest has out: taken and not yet reaped (in flight,
 * or completed and waiting in the completion ring).  0 when its
 * completion consumer index is unreadable or out of bounds (a guest's
 * value: it only times an interrupt).
 */
static u32 vps_hold_out(struct vps_queue *q)
{
	u32 cons, out;

	if (vps_rs_get(q->dev, q->cmp_cons_idx, &cons))
		return 0;
	out = q->req_cons - cons;
	if (out > (1u << q->req_entries_log2) + (1u << q->cmp_entries_log2))
		return 0;
	return out;
}

/*
 * A hold ended: did requests come while it held?  If so, the most the
 * guest had out is its ceiling (its queue depth, as fio's iodepth): the
 * next holds signal once the guest has that many out and none of them
 * is still with the backing, without waiting for hold_us of quiet.
 */
static void vps_hold_done(struct vps_queue *q, struct vps_watch *pl)
{
	if (!pl->hold)
		return;
	pl->hold = false;
	q->hold_since = q->need_call ? 0 : pl->last;
	q->hold_fruitful = pl->got > 0;
	if (pl->got) {
		WRITE_ONCE(q->hold_ceiling, pl->out_max);
		q->hold_misses = 0;
		return;
	}
	/*
	 * 2, 4, ... VPS_HOLD_RETRY passes without one as holds in a row see
	 * nothing come: one that missed in a stream (the guest's gap longer
	 * than the window, once) costs the stream two passes (a fixed 64
	 * skipped 1500-2000 of a QD-32 run's 3500 doorbell passes under
	 * nested TCG), and a guest that never posts while we hold (a
	 * queue-depth-2 one waits for each pair) pays a window once in
	 * VPS_HOLD_RETRY passes after six.  Not longer: a guest whose
	 * batches begin with a doorbell per request (the hold starts only at
	 * a batch's end, where nothing comes) would be locked out of holds
	 * that pay for as long (1024 did that to vps_test hold's batches,
	 * 8 holds in 88 batches, all at a batch's end)
	 */
	if (q->hold_misses < ilog2(VPS_HOLD_RETRY))
		q->hold_misses++;
	WRITE_ONCE(q->hold_skip, 1u << q->hold_misses);
	/*
	 * No gap known: the next window is half this one, down to an
	 * eighth of hold_us.  Not less: a slow guest (nested TCG) that
	 * began with bursts that did not fill a window (a boot, mkfs) must
	 * still be able to show its gaps to a later hold.
	 */
	if (!q->hold_gap_ns && q->hold_blind < VPS_HOLD_BLIND_MAX)
		q->hold_blind++;
	vps_count(q->dev, hold_wasted);
}

/*
 * How long a hold waits for the guest's next request: hold_gaps times the
 * guest's mean gap between requests (vps_hold_gap()), within hold_us and
 * VPS_HOLD_FLOOR_NS.  A guest at full speed posts a batch a
 * few microseconds a request apart, one under nested TCG hundreds: one
 * fixed window either costs the first a burst's end (a guest whose
 * burst ends below its ceiling waits it out for its interrupt) or misses
 * the second's next request.  Before any gap is known (the holds so far
 * saw nothing come), hold_us halved per such hold, down to an eighth.
 * hold_gaps 0: hold_us.
 */
static u64 vps_hold_window(const struct vps_queue *q)
{
	u64 cap_ns = (u64)min_t(u32, READ_ONCE(vps_hold_us), VPS_HOLD_US_MAX) * NSEC_PER_USEC;
	u32 gaps = min_t(u32, READ_ONCE(vps_hold_gaps), VPS_HOLD_GAPS_MAX);
	u64 w;

	if (!gaps)
		return cap_ns;
	if (q->hold_gap_ns)
		w = q->hold_gap_ns * gaps;
	else
		w = cap_ns >> q->hold_blind;
	return clamp_t(u64, w, min_t(u64, VPS_HOLD_FLOOR_NS, cap_ns), cap_ns);
}

/*
 * A gap between the guest's requests joins the running mean, an eighth
 * each: one seen while holding (from the last request, or from the
 * hold's start: the requests before it were taken earlier, so no longer
 * than the true gap) is within the window, one just missed within
 * VPS_HOLD_MISSED windows, so one long wait moves the mean by an eighth
 * of that at most.
 */
static void vps_hold_gap(struct vps_queue *q, u64 gap)
{
	u64 m = q->hold_gap_ns;

	WRITE_ONCE(q->hold_gap_ns, m ? m - m / 8 + gap / 8 : gap);
}

/*
 * Requests came after a hold that ended with nothing held back: the time
 * since its last request is a gap its window just missed, if within
 * VPS_HOLD_MISSED windows (otherwise only the gaps that came within one
 * are seen, and the mean would learn short gaps only: under nested TCG
 * it would miss the guest's turn from an interrupt to its next
 * requests).  Longer: the guest's burst had ended.  Only once a gap
 * seen while holding set the mean: before, the window is hold_us's, and
 * four of those would take a real host's guest's pauses between bursts
 * for gaps.  (Once the mean is set, a guest whose pauses are shorter
 * than four windows has them taken all the same, and its window grows
 * to hold_us: scripts/bench-host's bursts 50 us a request apart, 1 ms
 * between, Documentation/vhost-host.md item 9.)  (Two windows did worse
 * under nested TCG, 0.97-1.11 exits per I/O on the file, four
 * 0.33-0.35; up to hold_us 0.35-0.71, but a real host's pauses between
 * bursts taken for gaps: Documentation/bench/hold-gaps-2026-12-07.md.)
 */
static void vps_hold_gap_missed(struct vps_queue *q)
{
	u64 gap = local_clock() - q->hold_since;

	q->hold_since = 0;
	if (q->hold_gap_ns && gap <= VPS_HOLD_MISSED * vps_hold_window(q))
		vps_hold_gap(q, gap);
}

/*
 * Signal what a watch posted now?  Always, unless held; a hold lets
 * VPS_HOLD_MAX wait, and stops waiting when the guest is at its ceiling
 * with nothing left at the backing: it can post no more until it reaps.
 */
static bool vps_hold_signal(struct vps_queue *q, struct vps_watch *pl)
{
	u32 out;

	if (!pl->hold || q->cmp_prod - q->call_cmp >= VPS_HOLD_MAX)
		return true;
	out = vps_hold_out(q);
	pl->out_max = max(pl->out_max, out);
	if (q->hold_ceiling < 2 || out < q->hold_ceiling || q->nr_inflight)
		return false;
	vps_count(q->dev, held_full);
	return true;
}

/*
 * Busy-poll before re-arming the doorbell: watch the request ring, so
 * that a guest's next request is seen without a doorbell or a wake-up
 * (the doorbell threshold stays high meanwhile).  Two watches: poll_us
 * (from the pass's first look), where completions are posted and
 * signalled as they come, for a queue-depth-1 guest; and a hold (hold_us,
 * vps_hold_wanted()), where the interrupt waits until the guest is at
 * its ceiling (vps_hold_signal()), a window (vps_hold_window(); 0 while
 * hold_us is 0) passes without a request, or VPS_HOLD_SPAN windows since
 * the hold began.  True when a request came; false once the time is up,
 * another task wants the CPU, an ioctl wants the adapter (it would wait
 * for the whole poll), or the ring broke.  The clock is local_clock(), as
 * vhost's busy-polling uses: the CPU's own counter, where ktime_get_ns()
 * may read a device (HPET when the TSC is not trusted, an MMIO exit per
 * look in a VM).
 */
static bool vps_poll_ring(struct vps_queue *q, struct vps_watch *pl)
{
	u32 us = min_t(u32, READ_ONCE(vps_poll_us), VPS_POLL_US_MAX), prod;
	struct vps_dev *dev = q->dev;
	u64 now = local_clock(), end, window = vps_hold_window(q);

	if (window && !pl->hold && pl->took && vps_hold_wanted(q, pl)) {
		pl->hold = true;
		pl->hold_end = now + window * VPS_HOLD_SPAN;
		pl->last = now;
		vps_count(dev, held);
	}
	if (!us && !pl->hold)
		return false;
	if (!pl->end)
		pl->end = now + (u64)us * NSEC_PER_USEC;
	end = pl->end;
	/* a hold watches hold_us from the last request, within its span */
	if (pl->hold)
		end = max(end, min(now + window, pl->hold_end));
	while (now < end && !need_resched() && !vps_ctl_wants(dev)) {
		if (!llist_empty(&q->done)) {
			vps_process_done_q(q);
			if (READ_ONCE(dev->broken) || !q->ok)
				return false;
		}
		/* what this pass posted reaches the guest now, not after it */
		if (q->need_call && vps_hold_signal(q, pl))
			vps_call(q);
		if (vps_rs_get(dev, q->req_prod_idx, &prod))
			return false;
		if (prod != q->req_cons) {
			vps_count(dev, polled);
			if (pl->hold) {
				pl->got++;
				vps_hold_gap(q, now - pl->last);
				pl->last = now;
				vps_count(dev, held_got);
			}
			return true;
		}
		cpu_relax();
		now = local_clock();
	}
	vps_hold_done(q, pl);
	if (now < end)
		vps_count(dev, poll_yield);
	else
		vps_count(dev, poll_idle);
	return false;
}

/*
 * Consume up to VPS_WORK_WEIGHT descriptors (a command the target runs
 * synchronously weighs more: vps_scsi_extra_weight()).  Returns true when more may
 * be waiting (the caller comes back after completions had a turn).
 * @peek: a second look, not a doorbell: an empty ring leaves the armed
 * threshold alone.
 */
static bool vps_process_ring(struct vps_queue *q, bool peek)
{
	u32 entries = 1u << q->req_entries_log2;
	u32 cmp_entries = 1u << q->cmp_entries_log2;
	struct vps_dev *dev = q->dev;
	struct pvscsi_req_desc d;
	bool armed = false;
	u32 budget = VPS_WORK_WEIGHT;
	struct vps_watch pl = {};

	if (peek) {
		u32 prod;

		if (vps_rs_get(dev, q->req_prod_idx, &prod)) {
			vps_break(dev, "rings state unreadable");
			return false;
		}
		if (prod == q->req_cons)
			return false;
	}
	if (q->hold_since)
		vps_hold_gap_missed(q);
	/* we are polling now: ask the guest not to ring the doorbell */
	if (dev->req_threshold) {
		vps_rs_put(dev, q->req_call_threshold, entries);
		/* ... and let the doorbell say so itself (vps_kick_wakeup) */
		if (READ_ONCE(q->kick_thr) != q->req_call_threshold) {
			q->kick_thr_entries = entries;
			/* the size before the field: vps_kick_wakeup's acquire */
			smp_store_release(&q->kick_thr, q->req_call_threshold);
		}
	}

	for (;;) {
		u32 prod, avail, slot;
		void __user *p;

		if (vps_rs_get(dev, q->req_prod_idx, &prod)) {
			vps_break(dev, "rings state unreadable");
			return false;
		}
		/* descriptors are read after the index that published them */
		smp_rmb();
		avail = prod - q->req_cons;
		if (avail > entries) {
			vps_break(dev, "request producer more than a ring ahead");
			return false;
		}
		if (!avail) {
			/* a doorbell's pass polls (not a second look's) */
			if (!peek && !armed && vps_poll_ring(q, &pl))
				continue;
			if (!dev->req_threshold || armed)
				break;
			/*
			 * Going idle: re-arm the doorbell, then look once
			 * more so a request posted meanwhile is not missed.
			 */
			vps_rs_put(dev, q->req_call_threshold, 1);
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
			WRITE_ONCE(q->recheck_ns, ktime_get_ns() +
				   min_t(u32, READ_ONCE(vps_recheck_ms), 60000) *
				   NSEC_PER_MSEC);
			WRITE_ONCE(q->recheck, true);
			continue;
		}
		if (!budget--)
			return true;
		/*
		 * Every completion must find room in the completion ring;
		 * vps_round() comes back once completions free a slot.  Not
		 * while cancelling: an abort or reset that stopped here would
		 * leave requests the guest counts as answered (the aborted
		 * one too) for later.  Its completions wait in cmp_backlog,
		 * bounded by what the request ring holds.
		 */
		if (q->nr_inflight >= cmp_entries && !dev->cancel.on) {
			q->cmp_stall = true;
			return false;
		}

		slot = q->req_cons & (entries - 1);
		p = q->req_pages[slot / PVSCSI_REQ_DESCS_PER_PAGE] +
			(slot % PVSCSI_REQ_DESCS_PER_PAGE) * sizeof(d);
		if (copy_from_user(&d, p, sizeof(d))) {
			vps_break(dev, "request ring unreadable");
			return false;
		}
		if (!vps_handle_desc(q, &d)) {
			vps_count(dev, req_nomem);
			/* an abort or reset retries at once, a bounded number of times */
			if (dev->cancel.on)
				return true;
			/*
			 * No memory for the request: the slot waits for a
			 * second look a tick later (the guest's doorbell is
			 * off meanwhile).  Taken again at once, as until
			 * 2026-12-07, the worker spun on the allocator for as
			 * long as the shortage lasted.
			 */
			WRITE_ONCE(q->recheck_ns, ktime_get_ns() + NSEC_PER_MSEC);
			WRITE_ONCE(q->recheck, true);
			return false;
		}
		/*
		 * what it weighs beyond one (d is our copy: read once); none
		 * while cancelling, which runs no discard
		 */
		if (!dev->cancel.on)
			budget -= min(budget, vps_scsi_extra_weight(d.cdb));
		q->req_cons++;
		pl.took++;
		if (vps_rs_put(dev, q->req_cons_idx, q->req_cons)) {
			vps_break(dev, "rings state unwritable");
			return false;
		}
		if (READ_ONCE(dev->broken))
			return false;
	}
	return false;
}

/* ---------------------------------------------------------------------- */
/* message ring                                                           */
/* ---------------------------------------------------------------------- */

void vps_post_msg(struct vps_dev *dev, u32 type, u32 target, u32 lun)
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
	vps_log_write(dev, p, sizeof(m));
	/* the message must be visible before the index that publishes it */
	smp_wmb();
	dev->msg_prod++;
	if (vps_rs_put(dev, &dev->rs->msg_prod_idx, dev->msg_prod))
		return;
	vps_count(dev, s.msgs);
	if (dev->call_msg)
		vps_eventfd_signal(dev->call_msg);
}

/* ---------------------------------------------------------------------- */
/* worker                                                                 */
/* ---------------------------------------------------------------------- */

/*
 * One round of @q's worker, under the queue's lock: what waited for ring
 * room, the backing I/O that completed, the ring when kicked or due a
 * second look, then one interrupt for everything the round posted (or
 * held a while).  Returns true when it wants another round at once.
 */
static bool vps_round(struct vps_queue *q)
{
	struct vps_dev *dev = q->dev;
	bool again = false, kicked, peek, due;
	u32 cons;

	/* an ioctl waiting for the adapter goes first (vps_dev.ctl_waiting) */
	vps_ctl_wait(dev);
	mutex_lock(&q->lock);
	vps_drain_backlog_q(q);
	vps_process_done_q(q);
	/* stopped for a migration: the doorbell waits for the way back */
	kicked = !dev->stopped && test_and_clear_bit(VPS_EV_KICK, &q->events);
	/*
	 * Timed by the clock, not by jiffies: on a CPU that does not own the
	 * tick, jiffies may lag by several ticks (a descheduled vCPU), and
	 * the look must not come early.
	 */
	peek = !kicked && !dev->stopped && q->recheck &&
	       ktime_get_ns() >= q->recheck_ns;
	if (kicked || peek)
		WRITE_ONCE(q->recheck, false);
	if (kicked) {
		vps_count(dev, s.kicks);
		q->kicks++;
	}
	if ((kicked || peek) && q->ok && !READ_ONCE(dev->broken) &&
	    !dev->quiesce) {
		cons = q->req_cons;
		again = vps_process_ring(q, peek);
		/* a doorbell's batch: the worker's policy (vps_worker_policy) */
		if (kicked) {
			q->took += q->req_cons - cons;
			if (q->req_cons != cons)
				vps_count(dev, passes_took);
		}
		/* consumed, so bounded by the work weight */
		if (peek)
			vps_count_add(dev, unkicked, q->req_cons - cons);
		if (again)
			set_bit(VPS_EV_KICK, &q->events);
		vps_process_done_q(q);
	}
	due = test_and_clear_bit(VPS_EV_CALL, &q->events);
	if (q->need_call && (due || !vps_coalesce_hold(q))) {
		/* the backing answered after a pass ended; coalesce_us's timer */
		if (!kicked && !peek)
			vps_count(dev, calls_done);
		vps_call(q);
	}
	/*
	 * The ring was left alone for want of completion slots: go on once
	 * there are some, the guest's doorbell was already rung.
	 */
	if (q->cmp_stall && q->nr_inflight < (1u << q->cmp_entries_log2)) {
		q->cmp_stall = false;
		set_bit(VPS_EV_KICK, &q->events);
		again = true;
	}
	/* a guest that does not consume completions: look again soon */
	WRITE_ONCE(q->backlog_wait, !list_empty(&q->cmp_backlog));
	mutex_unlock(&q->lock);
	return again;
}

/*
 * Is there anything for @q's worker? (it is about to sleep otherwise)  A
 * doorbell rung while the adapter is stopped waits for VPS_STOP 0, which
 * wakes the worker: until 2026-12-03 it counted as work, and the worker
 * spun on it for as long as the VM stayed stopped.
 */
static bool vps_worker_has_work(struct vps_queue *q)
{
	unsigned long ev = READ_ONCE(q->events);

	/*
	 * The owner is gone: nothing more is done here, and what completes
	 * late waits on q->done for the release (a 6.1 kthread woken by it
	 * spun until then, taking every lock each turn)
	 */
	if (READ_ONCE(q->dev->owner_gone))
		return false;
	return (!READ_ONCE(q->dev->stopped) && (ev & BIT(VPS_EV_KICK))) ||
	       (ev & BIT(VPS_EV_CALL)) || !llist_empty(&q->done);
}

/*
 * How long the idle worker may sleep unwoken: a tick while completions
 * wait for ring room, until the re-armed request ring is due its second
 * look, or for good.
 */
static long vps_worker_timeout(struct vps_queue *q)
{
	s64 left;

	if (READ_ONCE(q->backlog_wait))
		return 1;
	/* stopped: no second look until VPS_STOP 0, which kicks every queue */
	if (!READ_ONCE(q->recheck) || READ_ONCE(q->dev->stopped))
		return MAX_SCHEDULE_TIMEOUT;
	left = (s64)(READ_ONCE(q->recheck_ns) - ktime_get_ns());
	/* an early wake-up only costs a round that does not look yet */
	return left > 0 ? nsecs_to_jiffies(left) + 1 : 1;
}

/*
 * batch_workers: a queue's worker as SCHED_BATCH or SCHED_NORMAL, set by
 * the worker itself between rounds (a vhost_task's task is not ours to
 * reach).  The fair class does not let a waking SCHED_BATCH task preempt
 * the running one.  Where the guest's vCPU and the worker share a CPU (an
 * overcommitted host, a nested one), a doorbell otherwise switches to the
 * worker at once: it takes the one request, the backing completes it
 * within the round (null_blk, the page cache), the interrupt goes out, and
 * a queue-depth-32 guest is held to one request per doorbell and per
 * interrupt.  Not preempted, the vCPU goes on queueing (the doorbells
 * after the first are skipped: that one raised the threshold,
 * vps_kick_wakeup()) until it waits, and the worker takes and completes
 * the batch in one round.
 *
 * At queue depth 1 that costs the guest's way from its doorbell to its
 * halt (0.4 ms under nested TCG: Documentation/bench/batch-workers.md):
 * so only while the requests come in batches.  A round that took two or
 * more makes the worker SCHED_BATCH; VPS_BATCH_SINGLES rounds in a row
 * that took one each make it SCHED_NORMAL.  A guest held to one request
 * per round by the preemption itself looks the same, so every
 * VPS_BATCH_TRY single rounds the worker tries SCHED_BATCH for one round:
 * a batch keeps it, a single request ends the try.  Other CPUs are
 * unaffected: an idle one takes the woken worker at once, whatever its
 * policy.  The nice value stays as it was.
 */
static void vps_worker_policy(struct vps_queue *q)
{
	u32 mode = READ_ONCE(vps_batch_workers), took = q->took;
	bool batch = q->batch;
	struct sched_attr attr = {
		.size = sizeof(attr),
		.sched_nice = task_nice(current),
	};

	q->took = 0;
	if (mode != 1) {
		batch = mode > 1;
	} else if (took > 1) {
		batch = true;
		q->batch_try = false;
		q->singles = 0;
	} else if (took == 1 && batch) {
		if (q->batch_try || ++q->singles >= VPS_BATCH_SINGLES) {
			batch = false;
			q->batch_try = false;
			q->singles = 0;
		}
	} else if (took == 1 && ++q->singles >= VPS_BATCH_TRY) {
		batch = true;
		q->batch_try = true;
		q->singles = 0;
	}
	if (batch == q->batch)
		return;
	/* a policy someone else gave it (chrt -f, a real-time setup) stays */
	if (current->policy != SCHED_NORMAL && current->policy != SCHED_BATCH)
		return;
	attr.sched_policy = batch ? SCHED_BATCH : SCHED_NORMAL;
	/* a failure leaves it as it was, and the next round tries again */
	if (vps_fail_now(VPS_FAIL_SETATTR) ||
	    sched_setattr_nocheck(current, &attr)) {
		vps_count(q->dev, policy_failed);
		return;
	}
	q->batch = batch;
	if (batch)
		vps_count(q->dev, batch_on);
	else
		vps_count(q->dev, batch_off);
}

#ifdef VPS_HAVE_VHOST_TASK
/*
 * vhost_task: the workers are threads of the owner process, so they share
 * the owner's mm, are accounted to it (cgroups, limits, ps) and die with
 * it.
 */
static bool vps_worker_step(void *data)
{
	struct vps_queue *q = data;

	/* a vhost_task is opaque to its creator: it names itself, once */
	if (unlikely(!READ_ONCE(q->worker_tid)))
		WRITE_ONCE(q->worker_tid, current->pid);
	if (!vps_worker_has_work(q)) {
		long t = vps_worker_timeout(q);

		if (t == MAX_SCHEDULE_TIMEOUT)
			return false;	/* vhost_task sleeps until woken */
		schedule_timeout(t);
	}
	__set_current_state(TASK_RUNNING);
	vps_round(q);
	/* for the next wake-up: what this round took */
	vps_worker_policy(q);
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
 * task that is gone.  The first of the adapter's workers to get here
 * does it, before any of them exits; release() frees the rest.
 */
static void vps_worker_killed(void *data)
{
	struct vps_queue *q = data;

	vps_dev_lock(q->dev);
	vps_owner_gone(q->dev);
	vps_dev_unlock(q->dev);
}

static int vps_worker_create(struct vps_queue *q, const char *name)
{
	struct vhost_task *vtsk;

	vtsk = vhost_task_create(vps_worker_step, vps_worker_killed, q, name);
	if (IS_ERR(vtsk))
		return PTR_ERR(vtsk);
	WRITE_ONCE(q->worker.t, vtsk);
	vhost_task_start(vtsk);
	return 0;
}

#else
/*
 * A kthread that adopts the owner's mm to reach guest memory, a round at
 * a time: between rounds it holds no user of the mm, so the address space
 * goes when the owner's process exits.
 */
static void vps_kthread_round(struct vps_queue *q)
{
	struct vps_dev *dev = q->dev;

	if (!mmget_not_zero(dev->mm)) {
		/* the owner exited: what it left is let go of here */
		vps_dev_lock(dev);
		vps_owner_gone(dev);
		vps_dev_unlock(dev);
		return;
	}
	kthread_use_mm(dev->mm);
	vps_round(q);
	kthread_unuse_mm(dev->mm);
	/* the owner may have exited meanwhile: the address space goes here */
	mmput(dev->mm);
}

static int vps_worker_fn(void *data)
{
	struct vps_queue *q = data;

	for (;;) {
		set_current_state(TASK_INTERRUPTIBLE);
		if (kthread_should_stop())
			break;
		if (!vps_worker_has_work(q)) {
			long t = vps_worker_timeout(q);

			schedule_timeout(t);
			if (t == MAX_SCHEDULE_TIMEOUT)
				continue;
		}
		__set_current_state(TASK_RUNNING);
		vps_kthread_round(q);
		vps_worker_policy(q);
		cond_resched();
	}
	__set_current_state(TASK_RUNNING);
	return 0;
}

static int vps_worker_create(struct vps_queue *q, const char *name)
{
	struct task_struct *task;
	int ret;

	task = kthread_create(vps_worker_fn, q, "%s", name);
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
	WRITE_ONCE(q->worker.t, task);
	WRITE_ONCE(q->worker_tid, task_pid_nr(task));
	wake_up_process(task);
	return 0;
}

#endif

static void vps_worker_destroy(struct vps_queue *q)
{
	if (q->worker.t)
		vps_worker_t_stop(q->worker.t);
	WRITE_ONCE(q->worker.t, NULL);
	/* stopped: no step of it runs any more to write it again */
	WRITE_ONCE(q->worker_tid, 0);
}

static bool vps_worker_exists(struct vps_queue *q)
{
	return q->worker.t;
}

/*
 * @q's worker, and its emulation buffer, unless it has them: queue 0's
 * with the owner, the others' when the VMM first sets them up or gives
 * them a doorbell.  Caller: the owner, under vps_dev_lock().
 */
int vps_worker_start(struct vps_queue *q)
{
	/* longer than a comm: the kernel cuts it, as it did before queues */
	char name[40];

	if (vps_worker_exists(q))
		return 0;
	if (!q->scratch) {
		q->scratch = kmalloc(VPS_SCRATCH_SIZE, GFP_KERNEL_ACCOUNT);
		if (!q->scratch)
			return -ENOMEM;
	}
	/* a new task starts SCHED_NORMAL (vps_worker_policy) */
	q->batch = false;
	q->batch_try = false;
	q->singles = 0;
	q->took = 0;
	/* a creation that fails, for the callers' unwinding (tests) */
	if (vps_fail_now(VPS_FAIL_WORKER))
		return -ENOMEM;
	/* queue 0's keeps the name it had before there were queues */
	if (q->index)
		snprintf(name, sizeof(name), "vhost-pvscsi-%d.%u",
			 task_pid_nr(current), q->index);
	else
		snprintf(name, sizeof(name), "vhost-pvscsi-%d",
			 task_pid_nr(current));
	return vps_worker_create(q, name);
}

/* every queue's worker (without dev->mutex: a killed one takes it) */
void vps_worker_stop(struct vps_dev *dev)
{
	u32 i;

	for (i = 0; i < VPS_MAX_QUEUES; i++)
		vps_worker_destroy(&dev->q[i]);
}

void vps_kick_worker(struct vps_queue *q)
{
	set_bit(VPS_EV_KICK, &q->events);
	vps_queue_wake(q);
}

/* every queue set up gets a look (a reset, VPS_STOP 0) */
void vps_kick_all(struct vps_dev *dev)
{
	u32 i;

	for (i = 0; i < dev->nr_queues; i++)
		vps_kick_worker(&dev->q[i]);
}

/* eventfd wake-up: the guest rang a doorbell (atomic context) */
/*
 * The doorbell raises reqCallThreshold itself, as the worker does when its
 * round starts.  PVSCSI's threshold counts from reqConsIdx: until the
 * woken worker runs and consumes, every request a guest queues is over it
 * and rings again, a VM exit each (vmw_pvscsi at queue depth 32: one per
 * request where the worker shares the vCPU's CPU).  Raised here, in the
 * thread that rang (KVM's ioeventfd: the vCPU's; QEMU's own fallback: one
 * of QEMU's), the guest skips the doorbells that follow, and the worker's
 * round ends with the usual re-arm and second look.  Only from the
 * owner's address space, without faulting (an atomic context: the
 * eventfd's lock is held), and only while a worker's round published
 * the field (vps_dev_lock() withdraws it and waits for us).  A failed
 * write costs only the doorbells it would have saved.  The worker's next
 * round writes the field again (and marks the page dirty for a
 * migration); the bit set after the write makes sure that round comes.
 */
static int vps_kick_wakeup(wait_queue_entry_t *wait, unsigned int mode,
			   int sync, void *key)
{
	struct vps_poll *poll = container_of(wait, struct vps_poll, wait);
	struct vps_queue *q = poll->q;
	__le32 __user *thr;

	if (!(key_to_poll(key) & EPOLLIN))
		return 0;
	vps_count(q->dev, doorbells);
	/* the field, then the size the worker stored before it */
	thr = smp_load_acquire(&q->kick_thr);
	if (thr && current->mm == q->dev->mm) {
		__le32 v = cpu_to_le32(q->kick_thr_entries);

		if (!copy_to_user_nofault(thr, &v, sizeof(v)))
			vps_count(q->dev, kick_raised);
		/* the raise before the bit the worker's round clears */
		smp_mb__before_atomic();
	}
	vps_kick_worker(q);
	return 0;
}

/*
 * No doorbell writes to a rings state page any more (see above), and
 * none that read the field is still running: it runs under the eventfd's
 * wait queue lock.  Under vps_dev_lock(), so no round publishes it again
 * meanwhile.
 */
void vps_kick_thr_off(struct vps_dev *dev)
{
	unsigned long flags;
	u32 i;

	for (i = 0; i < VPS_MAX_QUEUES; i++) {
		struct vps_queue *q = &dev->q[i];

		if (!q->kick_thr)
			continue;
		WRITE_ONCE(q->kick_thr, NULL);
		if (q->kick.wqh) {
			spin_lock_irqsave(&q->kick.wqh->lock, flags);
			spin_unlock_irqrestore(&q->kick.wqh->lock, flags);
		}
	}
}

static void vps_kick_queue(struct file *file, wait_queue_head_t *wqh,
			   poll_table *pt)
{
	struct vps_poll *poll = container_of(pt, struct vps_poll, table);

	poll->wqh = wqh;
	add_wait_queue(wqh, &poll->wait);
}

void vps_kick_stop(struct vps_queue *q)
{
	struct vps_poll *kick = &q->kick;

	if (kick->wqh) {
		remove_wait_queue(kick->wqh, &kick->wait);
		kick->wqh = NULL;
	}
	if (kick->file) {
		fput(kick->file);
		kick->file = NULL;
	}
}

void vps_kick_stop_all(struct vps_dev *dev)
{
	u32 i;

	for (i = 0; i < VPS_MAX_QUEUES; i++)
		vps_kick_stop(&dev->q[i]);
}

int vps_kick_start(struct vps_queue *q, int fd)
{
	struct file *file = eventfd_fget(fd);
	struct vps_poll *kick = &q->kick;
	__poll_t mask;

	if (IS_ERR(file))
		return PTR_ERR(file);
	vps_kick_stop(q);
	kick->file = file;
	kick->q = q;
	init_waitqueue_func_entry(&kick->wait, vps_kick_wakeup);
	init_poll_funcptr(&kick->table, vps_kick_queue);
	mask = vfs_poll(file, &kick->table);
	if (mask & EPOLLIN)
		vps_kick_worker(q);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* resets, aborts, teardown: waiting for the backing I/O                  */
/* ---------------------------------------------------------------------- */

/*
 * Wait until no backing I/O is in flight (vps_io_drain(), which drops
 * vps_dev_lock() meanwhile), then collect the results.
 */
void vps_wait_io(struct vps_dev *dev)
{
	vps_io_drain(dev, false);
	vps_process_done(dev);
}

/*
 * A reset's wait: consume nothing until the backing I/O has drained.
 * -EINTR when the VMM is being killed meanwhile (vps_io_drain()).
 */
int vps_quiesce_wait(struct vps_dev *dev)
{
	int ret;

	dev->quiesce++;
	ret = vps_io_drain(dev, true);
	vps_process_done(dev);
	dev->quiesce--;
	return ret;
}

/* the requests consumed and not yet posted that @s covers get @status */
u32 vps_mark_aborted(struct vps_dev *dev, u16 status,
		     const struct vps_scope *s)
{
	struct vps_req *req;
	u32 i, n = 0;

	/* each queue's consumed and not done, then its backlog */
	for (i = 0; i < 2 * VPS_MAX_QUEUES; i++) {
		struct vps_queue *q = &dev->q[i / 2];
		struct list_head *list = i % 2 ? &q->cmp_backlog : &q->inflight;

		list_for_each_entry(req, list, node) {
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
 * guest skipped): consume the ring now, all of it, completing the
 * cancelled requests unexecuted, answering BUSY to discards (each would
 * run here, synchronously) and starting the rest.  The caller posts the
 * call.  Returns how many were cancelled.  vmw_pvscsi reaps the
 * completion ring right after the command and from then on treats the
 * commands as done (its error handler retries them): one consumed later
 * would complete a retried command a second time.
 */
u32 vps_consume_cancelling(struct vps_dev *dev, u16 status,
			   const struct vps_scope *s)
{
	u32 i;

	if (!dev->rings_ok || dev->broken)
		return 0;
	dev->cancel.on = true;
	dev->cancel.status = status;
	dev->cancel.scope = *s;
	dev->cancel.hits = 0;
	for (i = 0; i < dev->nr_queues && !dev->broken; i++) {
		struct vps_queue *q = &dev->q[i];
		/* a bound: a failed allocation retries the same slot at once */
		u32 rounds = (1u << q->req_entries_log2) / VPS_WORK_WEIGHT + 2;

		while (rounds-- && vps_process_ring(q, false))
			vps_process_done(dev);
	}
	vps_process_done(dev);
	dev->cancel.on = false;
	return dev->cancel.hits;
}

/* queues @from and up go (their requests complete unposted) */
void vps_drop_queues(struct vps_dev *dev, u32 from)
{
	u32 i;

	for (i = from; i < VPS_MAX_QUEUES; i++) {
		struct vps_queue *q = &dev->q[i];

		q->ok = false;
		WRITE_ONCE(q->recheck, false);
		q->cmp_stall = false;
		/*
		 * nothing is owed to rings that are gone; a held interrupt's
		 * timer must not leave coalesce_armed set for the next rings
		 */
		q->need_call = false;
		if (q->coalesce_armed) {
			q->coalesce_armed = false;
			hrtimer_try_to_cancel(&q->coalesce_timer);
		}
		clear_bit(VPS_EV_CALL, &q->events);
		q->stale_armed = false;
		/* what the holds learnt was the old rings' guest's */
		q->hold_fruitful = false;
		WRITE_ONCE(q->hold_skip, 0);
		WRITE_ONCE(q->hold_gap_ns, 0);
		q->hold_blind = 0;
		q->hold_since = 0;
		q->hold_misses = 0;
		WRITE_ONCE(q->hold_ceiling, 0);
		q->req_cons = 0;
		q->cmp_prod = 0;
		memset(q->req_pages, 0, sizeof(q->req_pages));
		memset(q->cmp_pages, 0, sizeof(q->cmp_pages));
		clear_bit(VPS_EV_KICK, &q->events);
	}
	dev->nr_queues = min(dev->nr_queues, from);
}

void vps_drop_rings(struct vps_dev *dev)
{
	dev->rings_ok = false;
	dev->msg_ok = false;
	dev->req_threshold = false;
	dev->features = 0;
	dev->broken = false;
	vps_drop_queues(dev, 0);
	dev->rs = NULL;
	memset(dev->msg_pages, 0, sizeof(dev->msg_pages));
}

/*
 * Let go of what the owner handed us: its LUNs, its eventfds, the table of
 * its memory.  Caller: nothing can use them any more (vps_dev_lock() held
 * with the owner gone, or release after the workers stopped).
 */
void vps_put_owner_refs(struct vps_dev *dev)
{
	u32 t, l;

	for (t = 0; t < VPS_MAX_TARGETS; t++) {
		for (l = 0; l < VPS_MAX_LUNS; l++) {
			vps_lun_put(dev->luns[t][l]);
			dev->luns[t][l] = NULL;
		}
	}
	for (t = 0; t < VPS_MAX_QUEUES; t++) {
		if (dev->q[t].call)
			eventfd_ctx_put(dev->q[t].call);
		dev->q[t].call = NULL;
	}
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
 * as it likes.  The rings and the memory table go; LUNs and eventfds are
 * put.  The backing I/O in flight is not waited for: it pins the guest
 * pages it reads into and points at our requests, which stay until the
 * release of the file collects them; a killed VMM behind a hung LUN
 * exits now instead of hanging in D until the LUN comes back.  Called
 * from a worker under vps_dev_lock(); after it, nothing wakes the
 * workers and no ioctl but the stats gets through.
 */
static void vps_owner_gone(struct vps_dev *dev)
{
	u32 i;

	if (dev->owner_gone)
		return;
	/*
	 * First: no completion may wake a worker, which exits once we
	 * return.  Completions (and the coalescing timers) wake it under
	 * their queue's io_wait.lock (vps_io.c), so after this one has taken
	 * and dropped each queue's none is half way.
	 */
	WRITE_ONCE(dev->owner_gone, true);
	for (i = 0; i < VPS_MAX_QUEUES; i++) {
		spin_lock_irq(&dev->q[i].io_wait.lock);
		spin_unlock_irq(&dev->q[i].io_wait.lock);
	}
	vps_kick_stop_all(dev);
	vps_drop_rings(dev);
	dev->quiesce++;		/* for good: nothing more is submitted */
	vps_coalesce_cancel(dev);	/* nor held */
	vps_process_done(dev);
	/* the rings are gone: this frees what waited for ring room */
	vps_drain_backlog(dev);
	for (i = 0; i < VPS_MAX_QUEUES; i++)
		WRITE_ONCE(dev->q[i].backlog_wait, false);
	vps_put_owner_refs(dev);
	pr_debug("owner of an adapter exited: its memory is let go\n");
}
