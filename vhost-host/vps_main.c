// SPDX-License-Identifier: GPL-2.0
/*
 * vhost_pvscsi: the host-kernel data path of a PVSCSI adapter.
 *
 * A VMM opens /dev/vhost-pvscsi per adapter, becomes its owner, hands over
 * the guest memory table, the ring pages the guest gave to SETUP_RINGS, a
 * kick eventfd (the doorbell registers) and call eventfds (interrupts),
 * and attaches LUNs by file descriptor.  A worker thread that adopts the
 * owner's mm then consumes request descriptors, answers them from the SCSI
 * target or submits asynchronous O_DIRECT I/O to the LUN's file, and posts
 * completions.
 *
 * Everything in guest memory is hostile: descriptors are copied once and
 * validated, indices are bounded by the ring size, guest addresses are
 * translated only through the memory table, and the work per round is
 * capped.  A ring that makes no sense puts the adapter in an error state
 * until the VMM resets it; a malformed request fails only that request.
 *
 * This file is the control plane, the top of the layers that vps.h lists:
 * the module, the character device and its ioctls.  It calls down into
 * the rings and the worker (vps_ring.h), the SCSI target for LUN attach
 * (vps_scsi.h) and the I/O interface (vps_io.h); nothing calls it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/miscdevice.h>
#include <linux/eventfd.h>
#include <linux/file.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/sort.h>
#include <linux/debugfs.h>
#include <linux/vhost.h>
#include <linux/log2.h>

#include "vps.h"
#include "vps_io.h"
#include "vps_scsi.h"
#include "vps_ring.h"

static unsigned int max_outstanding = 128;
module_param(max_outstanding, uint, 0644);
MODULE_PARM_DESC(max_outstanding,
		 "READ/WRITE commands in flight per LUN before TASK SET FULL (default 128; a LUN may override)");

/*
 * module-wide gauges, for the leak checks of the tests (debugfs); the
 * requests' and the LUNs' live in vps_ring.c and vps_io.c
 */
static atomic_long_t vps_open_devs;
static struct dentry *vps_debugfs;
u32 vps_recheck_ms = VPS_RECHECK_MS;

unsigned int vps_poll_us;
module_param_named(poll_us, vps_poll_us, uint, 0644);
MODULE_PARM_DESC(poll_us,
		 "Busy-poll the request ring this many microseconds before sleeping (0: off, the default; at most 20000): a queue-depth-1 guest's next request then needs no doorbell");
unsigned int vps_coalesce_us;
module_param_named(coalesce_us, vps_coalesce_us, uint, 0644);
MODULE_PARM_DESC(coalesce_us,
		 "Hold a completion's interrupt up to this many microseconds while other requests are in flight, for up to 16 completions (0: off, the default; at most 1000): fewer guest interrupts per I/O where the backing keeps requests in flight, none held at queue depth 1");
unsigned int vps_hold_us = 2000;
module_param_named(hold_us, vps_hold_us, uint, 0644);
MODULE_PARM_DESC(hold_us,
		 "While the guest is still posting requests, hold the interrupt for what completed until it has as many out as in its last batch, or a window (hold_gaps) passes without a new one; the window at most this many microseconds (2000, the default; at most 5000; 0: off): one interrupt and one doorbell for a batch, where the worker has a CPU of its own");
unsigned int vps_hold_gaps = 16;
module_param_named(hold_gaps, vps_hold_gaps, uint, 0644);
MODULE_PARM_DESC(hold_gaps,
		 "A hold's quiet window in the guest's mean gaps between requests seen while holding, within hold_us (16, the default; at most 64; 0: hold_us itself): a few microseconds where the guest runs at full speed, milliseconds under nested emulation");
unsigned int vps_batch_workers = 1;
module_param_named(batch_workers, vps_batch_workers, uint, 0644);
MODULE_PARM_DESC(batch_workers,
		 "A queue's worker as SCHED_BATCH, whose wake-up does not preempt the vCPU that rang the doorbell: 0 never (SCHED_NORMAL, as vhost's workers), 1 while its requests come in batches (the default), 2 always");
atomic_t vps_stale_left = ATOMIC_INIT(0);

/* ---------------------------------------------------------------------- */
/* ioctls                                                                 */
/* ---------------------------------------------------------------------- */

/* the per-CPU counters, summed (a snapshot: read without a lock) */
static void vps_stats_sum(struct vps_dev *dev, struct vps_pcpu_stats *sum)
{
	u64 *t = (u64 *)sum;
	int cpu;
	u32 i;

	static_assert(sizeof(*sum) % sizeof(u64) == 0);
	memset(sum, 0, sizeof(*sum));
	for_each_possible_cpu(cpu) {
		const u64 *p = (const u64 *)per_cpu_ptr(dev->pstats, cpu);

		for (i = 0; i < sizeof(*sum) / sizeof(u64); i++)
			t[i] += READ_ONCE(p[i]);
	}
}

/*
 * Without a lock, as VPS_GET_STATS: a snapshot whose lines may be a round
 * apart, but a reader never waits for a worker (one held by a frozen
 * file system held this file up when it took every queue's lock).  The
 * owner is set before the file exists and the task is held until release,
 * which removes the file first (debugfs waits for its readers).
 */
static int vps_dev_show(struct seq_file *m, void *v)
{
	struct vps_dev *dev = m->private;
	struct vps_pcpu_stats sum;
	const struct vps_stats *st = &sum.s;
	u32 i, n = min_t(u32, READ_ONCE(dev->nr_queues), VPS_MAX_QUEUES);

	vps_stats_sum(dev, &sum);
	seq_printf(m, "owner %d\nrings %d broken %d threshold %d msg %d\n",
		   task_pid_nr(dev->owner), READ_ONCE(dev->rings_ok),
		   READ_ONCE(dev->broken), READ_ONCE(dev->req_threshold),
		   READ_ONCE(dev->msg_ok));
	seq_printf(m, "req_cons %u cmp_prod %u msg_prod %u in_flight %u io_pending %d\n",
		   READ_ONCE(dev->q[0].req_cons), READ_ONCE(dev->q[0].cmp_prod),
		   READ_ONCE(dev->msg_prod), vps_nr_inflight(dev),
		   vps_io_pending(dev));
	seq_printf(m, "kicks %llu requests %llu completions %llu calls %llu\n",
		   st->kicks, st->requests, st->completions, st->calls);
	seq_printf(m, "rw_ios %llu emulated %llu errors_guest %llu errors_backing %llu\n",
		   st->rw_ios, st->emulated, st->errors_guest, st->errors_backing);
	seq_printf(m, "aborts %llu resets %llu msgs %llu unkicked %llu polled %llu poll_idle %llu poll_yield %llu coalesced %llu\n",
		   st->aborts, st->resets, st->msgs, sum.unkicked, sum.polled,
		   sum.poll_idle, sum.poll_yield, sum.coalesced);
	seq_printf(m, "bounced %llu stale_posted %llu calls_suppressed %llu features %#x cancel_busy %llu\n",
		   sum.bounced, sum.stale_posted, st->calls_suppressed,
		   READ_ONCE(dev->features), sum.cancel_busy);
	/* new fields go last: scripts that read by position are not all gone */
	seq_printf(m, "batch_on %llu batch_off %llu doorbells_rung %llu kick_raised %llu req_nomem %llu policy_failed %llu held %llu held_got %llu hold_wasted %llu held_full %llu passes_took %llu unheld_waiting %llu unheld_one %llu calls_done %llu\n",
		   sum.batch_on, sum.batch_off, sum.doorbells, sum.kick_raised,
		   sum.req_nomem, sum.policy_failed, sum.held, sum.held_got,
		   sum.hold_wasted, sum.held_full, sum.passes_took,
		   sum.unheld_waiting, sum.unheld_one, sum.calls_done);
	seq_printf(m, "queues %u\n", n);
	for (i = 0; i < n; i++) {
		const struct vps_queue *q = &dev->q[i];

		/* keys of their own: scripts look keys up across the file */
		seq_printf(m, "queue %u cons %u prod %u inflight %u doorbells %llu reqs %llu irqs %llu worker %d hold_ceiling %u hold_skip %u hold_gap_us %llu\n",
			   i, READ_ONCE(q->req_cons), READ_ONCE(q->cmp_prod),
			   READ_ONCE(q->nr_inflight), READ_ONCE(q->kicks),
			   READ_ONCE(q->requests), READ_ONCE(q->calls),
			   READ_ONCE(q->worker_tid), READ_ONCE(q->hold_ceiling),
			   READ_ONCE(q->hold_skip),
			   READ_ONCE(q->hold_gap_ns) / NSEC_PER_USEC);
	}
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
	ret = vps_worker_start(&dev->q[0]);
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

	/* a page the log cannot mark would be missed by a migration */
	ret = -EINVAL;
	if (dev->log.on && !vps_log_covers(mem, dev->log.size))
		goto err;

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
		vps_count(dev, s.errors_guest);
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

/*
 * A test hook (debugfs, root only): "detach", "reset_device",
 * "setup_rings" or "set_owner" written to fail_once makes the next such
 * ioctl of any adapter fail with -EIO, once; "worker" makes the next
 * worker an adapter would create fail as a failed task creation does
 * (-ENOMEM); "backing_nomem" makes the next READ or WRITE a backing
 * finished end as if the backing had answered -ENOMEM (the stock kernels
 * have no fault injection; tests/debug/test_failio_01 fails it for real
 * on the debug kernel); "req_nomem" makes every request allocation of the
 * next VPS_REQ_NOMEM_MS fail, a lasting shortage rather than one;
 * "setattr" makes a worker's next change of its scheduling policy fail.
 * Nothing else makes them fail from outside, and the VMM's and the
 * guest's answers to a failure (the device stays; the guest is told; a
 * host reset fails; a realize that fails after opening us closes what it
 * opened), and the module's own unwinding, need a test.
 */
static unsigned long vps_fail_once;
/* jiffies: when "req_nomem" ends; written before its bit is set */
static unsigned long vps_req_nomem_end;

bool vps_fail_now(int what)
{
	if (!READ_ONCE(vps_fail_once))
		return false;
	return test_and_clear_bit(what, &vps_fail_once);
}

/* "req_nomem" lasts until its end, where the other hooks fail once */
bool vps_fail_req_nomem(void)
{
	if (likely(!test_bit(VPS_FAIL_REQ_NOMEM, &vps_fail_once)))
		return false;
	/* pairs with vps_fail_write()'s barrier: the end is the new one */
	smp_rmb();
	if (time_before(jiffies, READ_ONCE(vps_req_nomem_end)))
		return true;
	clear_bit(VPS_FAIL_REQ_NOMEM, &vps_fail_once);
	return false;
}

/* the names written to fail_once, by their bit in vps_fail_once */
static const char * const vps_fail_names[] = {
	[VPS_FAIL_DETACH]	= "detach",
	[VPS_FAIL_RESET_DEVICE]	= "reset_device",
	[VPS_FAIL_SETUP_RINGS]	= "setup_rings",
	[VPS_FAIL_SET_OWNER]	= "set_owner",
	[VPS_FAIL_WORKER]	= "worker",
	[VPS_FAIL_BACKING_NOMEM] = "backing_nomem",
	[VPS_FAIL_REQ_NOMEM]	= "req_nomem",
	[VPS_FAIL_SETATTR]	= "setattr",
};

static ssize_t vps_fail_write(struct file *f, const char __user *buf,
			      size_t len, loff_t *pos)
{
	char k[16] = "";
	int i;

	if (copy_from_user(k, buf, min(len, sizeof(k) - 1)))
		return -EFAULT;
	i = sysfs_match_string(vps_fail_names, k);
	if (i < 0)
		return i;
	if (i == VPS_FAIL_REQ_NOMEM) {
		WRITE_ONCE(vps_req_nomem_end,
			   jiffies + msecs_to_jiffies(VPS_REQ_NOMEM_MS));
		/* the end before the bit: vps_fail_req_nomem()'s smp_rmb() */
		smp_wmb();
	}
	set_bit(i, &vps_fail_once);
	return len;
}

static const struct file_operations vps_fail_fops = {
	.owner	= THIS_MODULE,
	.write	= vps_fail_write,
	.llseek	= noop_llseek,
};

/*
 * A queue whose pages are mapped starts: its indices from zero, or
 * (@resume) the ones the rings state page holds, written by the source's
 * module; the sizes and indices go to the guest.
 */
static int vps_queue_start(struct vps_dev *dev, struct vps_queue *q,
			   bool resume)
{
	u32 cons = 0, prod = 0;

	q->req_entries_log2 = ilog2(q->nreq_pages * PVSCSI_REQ_DESCS_PER_PAGE);
	q->cmp_entries_log2 = ilog2(q->ncmp_pages * PVSCSI_CMP_DESCS_PER_PAGE);
	if (resume && (vps_rs_get(dev, q->req_cons_idx, &cons) ||
		       vps_rs_get(dev, q->cmp_prod_idx, &prod)))
		return -EFAULT;
	/* what the guest wrote there is checked as it is used, each round */
	q->req_cons = cons;
	q->cmp_prod = prod;
	q->event_old = prod;
	q->call_cmp = prod;
	q->need_call = false;
	if (vps_rs_put(dev, q->req_cons_idx, q->req_cons) ||
	    vps_rs_put(dev, q->req_num_log2, q->req_entries_log2) ||
	    vps_rs_put(dev, q->cmp_prod_idx, q->cmp_prod) ||
	    vps_rs_put(dev, q->cmp_num_log2, q->cmp_entries_log2))
		return -EFAULT;
	/* the extension's queues start with a doorbell per request */
	if (q->index && vps_rs_put(dev, q->req_call_threshold, 1))
		return -EFAULT;
	q->ok = true;
	return 0;
}

/*
 * SETUP_RINGS, and VPS_RESUME_RINGS (@resume) on a migration's
 * destination: the same set-up, but the indices are the ones the rings
 * state page holds, written by the source's module.
 */
static int vps_setup_rings(struct vps_dev *dev, void __user *argp, bool resume)
{
	struct pvscsi_cmd_setup_rings c;
	struct vps_queue *q = &dev->q[0];
	u32 nreq, ncmp;
	int ret;

	if (copy_from_user(&c, argp, sizeof(c)))
		return -EFAULT;
	if (!dev->mem)
		return -EINVAL;
	if (vps_nr_inflight(dev))
		return -EBUSY;	/* ADAPTER_RESET first */
	nreq = le32_to_cpu(c.req_ring_num_pages);
	ncmp = le32_to_cpu(c.cmp_ring_num_pages);
	if (!vps_pages_ok(nreq, PVSCSI_SETUP_RINGS_MAX_PAGES) ||
	    !vps_pages_ok(ncmp, PVSCSI_SETUP_RINGS_MAX_PAGES))
		return -EINVAL;
	if (vps_fail_now(VPS_FAIL_SETUP_RINGS))
		return -EIO;
	/* the old rings go, the extension's queues with them */
	vps_drop_queues(dev, 0);
	dev->rings_ok = false;
	dev->broken = false;
	dev->req_threshold = false;
	dev->features = 0;
	dev->rs_ppn = le64_to_cpu(c.rings_state_ppn);
	q->nreq_pages = nreq;
	q->ncmp_pages = ncmp;
	memcpy(q->req_ppns, c.req_ring_ppns, sizeof(q->req_ppns));
	memcpy(q->cmp_ppns, c.cmp_ring_ppns, sizeof(q->cmp_ppns));
	dev->nr_queues = 1;
	ret = vps_map_rings(dev);
	if (!ret)
		ret = vps_queue_start(dev, q, resume);
	if (ret) {
		vps_drop_rings(dev);
		return ret;
	}
	dev->rings_ok = true;
	vps_kick_worker(q);
	return 0;
}

/*
 * PVSCSI_CMD_EXT_SETUP_QUEUES (VPS_SETUP_QUEUE), and VPS_RESUME_QUEUE on
 * a migration's destination: the next queue's rings.
 */
static int vps_setup_queue(struct vps_dev *dev, void __user *argp, bool resume)
{
	struct pvscsi_cmd_ext_setup_queue c;
	struct vps_queue *q;
	u32 index;
	int ret;

	if (copy_from_user(&c, argp, sizeof(c)))
		return -EFAULT;
	index = le32_to_cpu(c.queue);
	if (le32_to_cpu(c.magic) != PVSCSI_EXT_QUERY_MAGIC || !dev->rings_ok ||
	    !index || index != dev->nr_queues || index >= VPS_MAX_QUEUES)
		return -EINVAL;
	q = &dev->q[index];
	if (q->nr_inflight)
		return -EBUSY;	/* requests of a queue dropped, still running */
	/* its own worker: the queues share no thread and no lock */
	ret = vps_worker_start(q);
	if (ret)
		return ret;
	q->nreq_pages = le32_to_cpu(c.req_ring_num_pages);
	q->ncmp_pages = le32_to_cpu(c.cmp_ring_num_pages);
	memcpy(q->req_ppns, c.req_ring_ppns, sizeof(q->req_ppns));
	memcpy(q->cmp_ppns, c.cmp_ring_ppns, sizeof(q->cmp_ppns));
	ret = vps_map_queue(dev, q);
	if (!ret)
		ret = vps_queue_start(dev, q, resume);
	if (ret) {
		vps_drop_queues(dev, index);
		return ret;
	}
	dev->nr_queues = index + 1;
	vps_kick_worker(q);
	return 0;
}

static int vps_setup_msg_ring(struct vps_dev *dev, void __user *argp,
			      bool resume)
{
	struct pvscsi_cmd_setup_msg_ring c;
	u32 n, prod = 0;

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
	if (resume && vps_rs_get(dev, &dev->rs->msg_prod_idx, &prod))
		return -EFAULT;
	dev->msg_prod = prod;
	if (vps_rs_put(dev, &dev->rs->msg_prod_idx, dev->msg_prod) ||
	    vps_rs_put(dev, &dev->rs->msg_num_entries_log2, dev->msg_entries_log2))
		return -EFAULT;
	dev->msg_ok = true;
	return 0;
}

static int vps_set_call(struct vps_dev *dev, void __user *argp)
{
	struct eventfd_ctx *ctx = NULL, **slot = NULL;
	struct vps_eventfd e;
	u32 q;

	if (copy_from_user(&e, argp, sizeof(e)))
		return -EFAULT;
	if (e.index == VPS_EVENT_MSG)
		slot = &dev->call_msg;
	/* whatever VPS_EVENT_CMPL_Q() maps a queue to */
	for (q = 0; !slot && q < VPS_MAX_QUEUES; q++)
		if (e.index == VPS_EVENT_CMPL_Q(q))
			slot = &dev->q[q].call;
	if (!slot)
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
	int ret;

	if (copy_from_user(&e, argp, sizeof(e)))
		return -EFAULT;
	if (e.index >= VPS_MAX_QUEUES)
		return -EINVAL;
	if (e.fd == -1) {
		vps_kick_stop(&dev->q[e.index]);
		return 0;
	}
	/* the doorbell wakes the queue's worker: it exists from here on */
	ret = vps_worker_start(&dev->q[e.index]);
	if (ret)
		return ret;
	return vps_kick_start(&dev->q[e.index], e.fd);
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
	memcpy(lun->wwn, u.wwn, sizeof(lun->wwn));
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

/*
 * VPS_SET_LOG: start or stop the dirty log (uapi: struct vps_log).  The
 * bitmap is checked against the memory table now and at every later
 * VHOST_SET_MEM_TABLE while the log is on; what the module writes from
 * here on is logged, by the ioctls and the worker alike, both under
 * dev->mutex.
 */
static int vps_set_log(struct vps_dev *dev, void __user *argp)
{
	struct vps_log l;

	if (copy_from_user(&l, argp, sizeof(l)))
		return -EFAULT;
	if (l.reserved || (l.flags & ~VPS_LOG_FLAGS_ALL))
		return -EINVAL;
	if (!(l.flags & VPS_LOG_ENABLE)) {
		dev->log.on = false;
		return 0;
	}
	if (!l.size || (l.base & 7) ||
	    !access_ok((void __user *)(uintptr_t)l.base, l.size) ||
	    !vps_log_covers(dev->mem, l.size))
		return -EINVAL;
	dev->log.base = l.base;
	dev->log.size = l.size;
	dev->log.on = true;
	return 0;
}

/*
 * VPS_STOP, a migration's stop on the source: consume nothing more and let
 * what is in flight complete and post, so that the guest's memory holds
 * the adapter's whole state (uapi: VPS_STOP).  The kick bit stays set
 * while stopped: a doorbell then is served on the way back.
 */
static int vps_stop(struct vps_dev *dev, void __user *argp)
{
	u32 stop;
	int ret;

	if (get_user(stop, (u32 __user *)argp))
		return -EFAULT;
	if (stop > 1)
		return -EINVAL;
	if (!stop) {
		WRITE_ONCE(dev->stopped, false);
		vps_kick_all(dev);
		return 0;
	}
	WRITE_ONCE(dev->stopped, true);
	ret = vps_quiesce_wait(dev);
	if (ret)
		return ret;
	vps_drain_backlog(dev);
	vps_call_all(dev);
	return vps_backlog_any(dev) ? -EBUSY : 0;
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
	if (vps_fail_now(VPS_FAIL_DETACH))
		return -EIO;
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
	int ret;

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
		if (vps_fail_now(VPS_FAIL_RESET_DEVICE))
			return -EIO;
		break;
	default:
		return -EINVAL;
	}
	/* what an adapter reset leaves in the ring the guest fails back */
	if (r.kind != VPS_RESET_ADAPTER)
		vps_consume_cancelling(dev, BTSTAT_BUSRESET, &s);
	vps_mark_aborted(dev, BTSTAT_BUSRESET, &s);
	vps_count(dev, s.resets);
	/*
	 * Behind a hung LUN this waits as long as the LUN hangs, in the
	 * VMM's vCPU thread: the guest reuses what a reset covers at once,
	 * so it cannot return earlier.  A fatal signal ends it (the VMM is
	 * going; the release collects the requests when the LUN comes back).
	 */
	ret = vps_quiesce_wait(dev);
	if (ret)
		return ret;
	if (r.kind == VPS_RESET_ADAPTER) {
		/* the rings are gone: nothing more is written to the guest */
		vps_drop_rings(dev);
		vps_drain_backlog(dev);
	} else {
		vps_drain_backlog(dev);
		/* the guest reaps the reset's completions right after */
		vps_call_all(dev);
		vps_kick_all(dev);
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
	/*
	 * Without rings (a remap dropped them) nothing completes to the
	 * guest: what is still in flight completes unposted, so there is
	 * nothing the guest could see aborted.
	 */
	if (!dev->rings_ok)
		return -ENOENT;
	s.target = a.target;
	s.context = a.context;
	/* still in the ring: it completes aborted before we return */
	found = vps_consume_cancelling(dev, BTSTAT_ABORTQUEUE, &s);
	vps_call_all(dev);
	found += vps_mark_aborted(dev, BTSTAT_ABORTQUEUE, &s);
	if (!found)
		return -ENOENT;
	/* the backing I/O cannot be cancelled: it completes as aborted */
	vps_count(dev, s.aborts);
	return 0;
}

static int vps_set_threshold(struct vps_dev *dev, void __user *argp)
{
	u32 enable, i;

	if (get_user(enable, (u32 __user *)argp))
		return -EFAULT;
	if (enable > 1 || !dev->rings_ok)
		return -EINVAL;
	dev->req_threshold = enable;
	for (i = 0; i < dev->nr_queues; i++)
		if (vps_rs_put(dev, dev->q[i].req_call_threshold, 1))
			return -EFAULT;
	return 0;
}

static int vps_set_features(struct vps_dev *dev, void __user *argp)
{
	u32 f, i;

	if (get_user(f, (u32 __user *)argp))
		return -EFAULT;
	if ((f & ~VPS_FEATURES_ALL) || !dev->rings_ok)
		return -EINVAL;
	/* from here each completion is decided on once, from the next on */
	if ((f & VPS_FEAT_CMP_EVENT_IDX) && !(dev->features & VPS_FEAT_CMP_EVENT_IDX))
		for (i = 0; i < VPS_MAX_QUEUES; i++)
			dev->q[i].event_old = dev->q[i].cmp_prod;
	dev->features = f;
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
	case VPS_GET_FEATURES:
		return put_user((u32)(VPS_FEATURES_ALL | VPS_FEAT_MULTIQUEUE),
				(u32 __user *)argp);
	case VPS_GET_STATS: {
		struct vps_pcpu_stats sum;

		/* a snapshot, without stopping the workers */
		vps_stats_sum(dev, &sum);
		sum.s.in_flight = vps_nr_inflight(dev);
		sum.s.pinned_pages = vps_io_pending(dev);
		return copy_to_user(argp, &sum.s, sizeof(sum.s)) ? -EFAULT : 0;
	}
	}

	vps_dev_lock(dev);
	if (cmd == VHOST_SET_OWNER) {
		ret = vps_fail_now(VPS_FAIL_SET_OWNER) ? -EIO : vps_set_owner(dev);
		goto out;
	}
	/*
	 * Everything else belongs to the owner, as in vhost; once its
	 * process is gone, to nobody (a process sharing its mm included).
	 */
	ret = -EPERM;
	/*
	 * The owner's threads only, not another process sharing its mm
	 * (CLONE_VM without CLONE_THREAD): a queue's worker starts in the
	 * caller's process and dies with it, which would take the adapter
	 * down with a process that is not the owner.
	 */
	if (!dev->owner || dev->owner_gone || dev->mm != current->mm ||
	    !same_thread_group(current, dev->owner))
		goto out;

	switch (cmd) {
	case VHOST_SET_MEM_TABLE:
		ret = vps_set_mem_table(dev, argp);
		break;
	case VPS_SETUP_RINGS:
		ret = vps_setup_rings(dev, argp, false);
		break;
	case VPS_SETUP_MSG_RING:
		ret = vps_setup_msg_ring(dev, argp, false);
		break;
	case VPS_RESUME_RINGS:
		ret = vps_setup_rings(dev, argp, true);
		break;
	case VPS_RESUME_MSG_RING:
		ret = vps_setup_msg_ring(dev, argp, true);
		break;
	case VPS_SETUP_QUEUE:
		ret = vps_setup_queue(dev, argp, false);
		break;
	case VPS_RESUME_QUEUE:
		ret = vps_setup_queue(dev, argp, true);
		break;
	case VPS_STOP:
		ret = vps_stop(dev, argp);
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
	case VPS_SET_FEATURES:
		ret = vps_set_features(dev, argp);
		break;
	case VPS_ATTACH_LUN:
		ret = vps_attach_lun(dev, argp);
		break;
	case VPS_SET_LOG:
		ret = vps_set_log(dev, argp);
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
	vps_dev_unlock(dev);
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
	dev->pstats = alloc_percpu_gfp(struct vps_pcpu_stats, GFP_KERNEL_ACCOUNT);
	if (!dev->pstats) {
		kvfree(dev);
		return -ENOMEM;
	}
	mutex_init(&dev->mutex);
	atomic_set(&dev->ctl_waiting, 0);
	init_waitqueue_head(&dev->ctl_wq);
	vps_queues_init(dev);
	f->private_data = dev;
	atomic_long_inc(&vps_open_devs);
	return 0;
}

/*
 * Releases that wait for a hung LUN run here, not in close(): QEMU
 * closes us from device_del and at exit with its global lock held.
 */
static struct workqueue_struct *vps_release_wq;

/*
 * The rest of a release: wait for the backing I/O (on a hung LUN, in
 * vps_release_wq), then free everything.
 */
static void vps_release_finish(struct vps_dev *dev)
{
	struct vps_req *req, *tmp;
	u32 i;

	vps_dev_lock(dev);
	vps_wait_io(dev);
	/* for good: no interrupt is held from here on (vps_coalesce_hold) */
	dev->quiesce++;
	vps_dev_unlock(dev);
	/* the timers wake the workers: they go before the workers do */
	vps_coalesce_cancel(dev);
	vps_worker_stop(dev);
	/* the workers are gone; nothing else can touch dev now */
	vps_process_done(dev);
	for (i = 0; i < VPS_MAX_QUEUES; i++) {
		struct vps_queue *q = &dev->q[i];

		list_for_each_entry_safe(req, tmp, &q->cmp_backlog, node)
			vps_req_free(dev, req);
		list_for_each_entry_safe(req, tmp, &q->inflight, node)
			vps_req_free(dev, req);
		kfree(q->scratch);
	}
	vps_put_owner_refs(dev);
	/*
	 * LUNs whose last reference went in the worker are freed by a
	 * kworker (vps_lun_put): when close returns, their files are closed
	 * too, as a VMM that removes the device next expects.
	 */
	flush_workqueue(vps_free_wq);
	if (dev->mm)
		mmdrop(dev->mm);
	if (dev->owner)
		put_task_struct(dev->owner);
	free_percpu(dev->pstats);
	kvfree(dev);
	atomic_long_dec(&vps_open_devs);
}

static void vps_release_work(struct work_struct *work)
{
	struct vps_dev *dev = container_of(work, struct vps_dev, release_work);

	vps_release_finish(dev);
	/* vps_exit() destroys the workqueue, which waits for us to return */
	module_put(THIS_MODULE);
}

static int vps_release(struct inode *inode, struct file *f)
{
	struct vps_dev *dev = f->private_data;

	debugfs_remove(dev->debugfs);
	vps_dev_lock(dev);
	vps_kick_stop_all(dev);
	/*
	 * Nothing more goes to guest memory: on owner exit we may run
	 * after the owner's mm is gone.  I/O in flight pins guest pages
	 * and points at our requests, so the rest waits for it.
	 */
	vps_drop_rings(dev);
	dev->quiesce++;		/* for good: dev goes */
	vps_dev_unlock(dev);
	if (vps_io_pending(dev)) {
		/*
		 * A LUN that does not answer (a suspended dm device, a dead
		 * NFS server) must not hang the VMM's close: finish when it
		 * answers.  dev stays counted in the gauges until then.
		 */
		__module_get(THIS_MODULE);
		INIT_WORK(&dev->release_work, vps_release_work);
		queue_work(vps_release_wq, &dev->release_work);
		return 0;
	}
	vps_release_finish(dev);
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
	vps_release_wq = alloc_workqueue("vhost_pvscsi_release", WQ_UNBOUND, 0);
	if (!vps_free_wq || !vps_release_wq) {
		ret = -ENOMEM;
		goto err;
	}
	ret = misc_register(&vps_misc);
	if (ret)
		goto err;
	vps_debugfs = debugfs_create_dir(KBUILD_MODNAME, NULL);
	debugfs_create_file("gauges", 0444, vps_debugfs, NULL, &vps_gauges_fops);
	debugfs_create_file("fail_once", 0200, vps_debugfs, NULL, &vps_fail_fops);
	debugfs_create_u32("recheck_ms", 0600, vps_debugfs, &vps_recheck_ms);
	debugfs_create_atomic_t("stale_completions", 0600, vps_debugfs, &vps_stale_left);
	return 0;
err:
	if (vps_release_wq)
		destroy_workqueue(vps_release_wq);
	if (vps_free_wq)
		destroy_workqueue(vps_free_wq);
	kmem_cache_destroy(vps_req_cache);
	return ret;
}

static void __exit vps_exit(void)
{
	debugfs_remove_recursive(vps_debugfs);
	misc_deregister(&vps_misc);
	/* releases still waiting for a hung LUN hold a module reference */
	destroy_workqueue(vps_release_wq);
	/* the last LUNs a worker let go of */
	destroy_workqueue(vps_free_wq);
	kmem_cache_destroy(vps_req_cache);
}

module_init(vps_init);
module_exit(vps_exit);
MODULE_DESCRIPTION("vhost-pvscsi: PVSCSI adapter data path in the host kernel");
MODULE_LICENSE("GPL");
MODULE_ALIAS("devname:vhost-pvscsi");
