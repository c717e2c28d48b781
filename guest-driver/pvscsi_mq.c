// SPDX-License-Identifier: GPL-2.0
/*
 * pvscsi_mq: Linux guest driver for the VMware PVSCSI HBA (PCI 15ad:07c0).
 *
 * Works against any PVSCSI device (QEMU's stock pvscsi, our vhost-pvscsi,
 * ESXi).  The device ABI lives in include/uapi/vhost_pvscsi.h; the design
 * and the user-visible knobs are in Documentation/guest-driver.md.
 *
 * Data path: one request ring and one completion ring per queue (one
 * queue, or more with the vhost-pvscsi extension's MULTIQUEUE: a blk-mq
 * hardware queue each, with its own locks, doorbell and MSI-X vector).
 * Tags are shared by the queues (host_tagset).  A request's context is
 * its blk-mq tag + 1, so a completion finds its command in O(1) through
 * scsi_host_find_tag(); every piece of per-request memory the
 * device sees (SG page, sense buffer) is preallocated per tag at probe, so
 * the I/O path never allocates.  Everything the device writes (ring
 * indices, completion and message descriptors) is read once and bounded
 * before it is used: a broken or hostile device can fail commands, never
 * make the guest touch memory it does not own.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/blk-mq-pci.h>
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/interrupt.h>
#include <linux/jiffies.h>
#include <linux/log2.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/workqueue.h>
#include <scsi/scsi.h>
#include <scsi/scsi_cmnd.h>
#include <scsi/scsi_device.h>
#include <scsi/scsi_host.h>
#include <scsi/scsi_tcq.h>

#include "vhost_pvscsi.h"

/* --- compat: feature probes, not version checks ----------------------- */

/* PCI_IRQ_LEGACY was renamed PCI_IRQ_INTX in 6.8 */
#ifndef PCI_IRQ_INTX
#define PCI_IRQ_INTX PCI_IRQ_LEGACY
#endif

/* --- module parameters ------------------------------------------------ */

static unsigned int ring_pages = 8;
module_param(ring_pages, uint, 0444);
MODULE_PARM_DESC(ring_pages,
		 "Request ring pages, a power of two 1..32; 32 requests per page (default 8)");

static unsigned int msg_ring_pages = 1;
module_param(msg_ring_pages, uint, 0444);
MODULE_PARM_DESC(msg_ring_pages,
		 "Message ring pages for hot plug, a power of two 1..16, 0 = no message ring (default 1)");

/* vmw_pvscsi's default: a guest moved over keeps its queue depth */
static unsigned int cmd_per_lun = 254;
module_param(cmd_per_lun, uint, 0444);
MODULE_PARM_DESC(cmd_per_lun, "Default queue depth per LUN, capped by the ring size (default 254)");

static bool use_req_threshold = true;
module_param(use_req_threshold, bool, 0444);
MODULE_PARM_DESC(use_req_threshold,
		 "Skip R/W doorbells while the device is busy, if the device accepts SETUP_REQCALLTHRESHOLD (default 1)");

static bool ext = true;
module_param(ext, bool, 0444);
MODULE_PARM_DESC(ext, "Query the device for the vhost-pvscsi extension; 0 = plain PVSCSI ABI only (default 1)");

static bool event_idx = true;
module_param(event_idx, bool, 0444);
MODULE_PARM_DESC(event_idx,
		 "Ask for completion interrupts by event index (the extension's INTR_MODERATION: none while the driver reaps), if the device offers it (default 1)");

static unsigned int queues;
module_param(queues, uint, 0444);
MODULE_PARM_DESC(queues,
		 "Request queues when the device offers the extension's MULTIQUEUE, at most as many as it offers: 0 = one per online CPU (the default); N = N");

static unsigned int poll_queues;
module_param(poll_queues, uint, 0444);
MODULE_PARM_DESC(poll_queues,
		 "Queues without an interrupt, for polled I/O (io_uring IOPOLL), beside the others; needs MULTIQUEUE and the event index; from what the device offers beyond the queues with a vector (default 0)");

static unsigned int irq_mode;
module_param(irq_mode, uint, 0444);
MODULE_PARM_DESC(irq_mode, "Interrupt type: 0 = MSI-X, then MSI, then INTx; 1 = MSI-X only; 2 = MSI only; 3 = INTx only (default 0)");

static unsigned int cmp_budget = 64;
module_param(cmp_budget, uint, 0444);
MODULE_PARM_DESC(cmp_budget,
		 "Completions handled in hard interrupt context before the rest moves to the IRQ thread, 1..4096 (default 64)");

static unsigned int fail_probe;
module_param(fail_probe, uint, 0644);
MODULE_PARM_DESC(fail_probe,
		 "Fault injection for tests: fail probe at step N (1 iomap, 2 host alloc, 3 rings, 4 SG pages, 5 ring setup, 6 IRQ vectors, 7 request_irq, 8 add host); 0 = off");

enum pvscsi_probe_step {
	PVSCSI_FAIL_IOMAP = 1,
	PVSCSI_FAIL_HOST_ALLOC,
	PVSCSI_FAIL_RINGS,
	PVSCSI_FAIL_SG,
	PVSCSI_FAIL_SETUP,
	PVSCSI_FAIL_VECTORS,
	PVSCSI_FAIL_REQUEST_IRQ,
	PVSCSI_FAIL_ADD_HOST,
};

/* --- constants --------------------------------------------------------- */

#define PVSCSI_DEFAULT_TARGETS	16	/* when the device refuses CONFIG */
#define PVSCSI_MAX_TARGETS	256	/* the descriptor's target is a u8 */
#define PVSCSI_MAX_LUN		256	/* single-level LUNs: lun[1] */
#define PVSCSI_SG_PER_CHUNK	16	/* SG pages per coherent chunk (64 KiB) */
#define PVSCSI_EH_TIMEOUT_MS	10000
#define PVSCSI_MSG_BATCH	16

enum pvscsi_kick {
	PVSCSI_KICK_RW		= 1u << 0,
	PVSCSI_KICK_NON_RW	= 1u << 1,
};

enum pvscsi_irq_kind {
	PVSCSI_IRQ_MSIX,
	PVSCSI_IRQ_MSI,
	PVSCSI_IRQ_INTX,
};

static const char * const pvscsi_irq_names[] = {
	[PVSCSI_IRQ_MSIX] = "msix",
	[PVSCSI_IRQ_MSI] = "msi",
	[PVSCSI_IRQ_INTX] = "intx",
};

/* coherent allocations alive in the whole module; debugfs shows it */
static atomic_t pvscsi_live_dma;
static struct dentry *pvscsi_debugfs;

/* --- per-command and per-adapter state --------------------------------- */

struct pvscsi_cmd_priv {
	/*
	 * The context while the command is in flight, 0 when not: set when
	 * the descriptor is published, taken back to 0 by whoever completes
	 * the command (the completion ring, or a host reset failing it),
	 * under its queue's cmp_lock.  One compare-and-exchange against the
	 * completion's context both matches and claims it: a check of the
	 * context followed by a separate claim could take a stale completion
	 * for the tag's next command, submitted on another CPU in between.
	 */
	atomic64_t inflight;
	/*
	 * The descriptor's context: tag + 1 in the low half, the queue's
	 * submission number and the queue (4 bits) in the high half, so a
	 * late completion of an earlier use of the tag is told apart from the
	 * current one.  Written before inflight; the error handler reads the
	 * queue in it without a lock (pvscsi_pending_on() looks again under
	 * that queue's lock).
	 */
	u64 context;
};

/* a descriptor's context: see pvscsi_cmd_priv.context */
static u64 pvscsi_make_context(u32 seq, u32 queue, u32 tag)
{
	return ((u64)((seq << 4) | queue) << 32) | (tag + 1);
}

/* the queue a context names (pvscsi_make_context() puts it there) */
static u32 pvscsi_context_queue(u64 context)
{
	return (context >> 32) & (PVSCSI_EXT_MAX_QUEUES - 1);
}

/* the queue a command last went on; without a lock, so look again under it */
static u32 pvscsi_cmd_queue(struct scsi_cmnd *cmd)
{
	struct pvscsi_cmd_priv *p = scsi_cmd_priv(cmd);

	return pvscsi_context_queue(READ_ONCE(p->context));
}

struct pvscsi_sg_chunk {
	struct pvscsi_sg_element *va;
	dma_addr_t dma;
};

/* per queue: each block of counters under that queue's lock */
struct pvscsi_qstats {
	/* submit_lock */
	u64 requests;
	u64 doorbells;
	u64 kicks_rw;
	u64 kicks_non_rw;
	u64 kicks_skipped;
	u64 busy;
	/* cmp_lock */
	u64 interrupts;
	u64 completions;
	u64 cmpl_per_irq_max;
	u64 bogus_completions;
	u64 polled;		/* completions mq_poll reaped */
};

struct pvscsi_adapter;

/*
 * One request/completion ring pair: a blk-mq hardware queue.  Queue 0 is
 * the one SETUP_RINGS sets up, its indices the rings state page's own
 * fields; queues 1.. are the extension's (EXT_SETUP_QUEUES), their
 * indices in struct pvscsi_ext_queue_state, a cache line each.
 */
struct pvscsi_queue {
	struct pvscsi_adapter *a;
	u32 index;
	int irq;		/* its vector's; queue 0's also carries msgs */
	/*
	 * A poll queue (HCTX_TYPE_POLL): no vector; the event index stays
	 * half the index space away, so the device never interrupts for it,
	 * and mq_poll reaps it.
	 */
	bool poll;

	/* shared with the device */
	struct pvscsi_req_desc *req_ring;
	dma_addr_t req_ring_dma;
	struct pvscsi_cmp_desc *cmp_ring;
	dma_addr_t cmp_ring_dma;
	__le32 *req_prod_idx;
	__le32 *req_cons_idx;
	__le32 *req_call_threshold;
	__le32 *cmp_prod_idx;
	__le32 *cmp_cons_idx;
	__le32 *cmp_event_idx;
	u32 kick_reg;		/* its doorbell register */

	/*
	 * submit_lock guards req_prod, submit_seq, kick_pending, the request
	 * ring slots, *req_prod_idx and the adapter's resetting and
	 * no_rings (written under every queue's submit_lock).
	 */
	spinlock_t submit_lock;
	u32 req_prod;
	u32 submit_seq;		/* high half of the next context */
	u32 kick_pending;	/* PVSCSI_KICK_* not yet rung */

	/* cmp_lock guards cmp_cons and *cmp_cons_idx, *cmp_event_idx */
	spinlock_t cmp_lock;
	u32 cmp_cons;

	struct pvscsi_qstats stats;
};

/* a context's high half carries the queue in 4 bits */
static_assert(PVSCSI_EXT_MAX_QUEUES <= 16, "queue in the context");

struct pvscsi_stats {
	/* msg_lock */
	u64 msgs;
	u64 bogus_msgs;
	/* atomics: the error handler may run several of these at once */
	atomic64_t aborts;
	atomic64_t aborts_failed;
	atomic64_t device_resets;
	atomic64_t bus_resets;
	atomic64_t host_resets;
};

struct pvscsi_adapter {
	struct pci_dev *pdev;
	struct Scsi_Host *shost;
	void __iomem *mmio;

	/* ring geometry, fixed at probe */
	u32 req_pages;
	u32 req_entries;
	u32 cmp_pages;
	u32 cmp_entries;
	u32 msg_pages;
	u32 msg_entries;
	u32 max_targets;
	u32 ext_status;		/* EXT_QUERY answer, 0 when not asked */
	enum pvscsi_irq_kind irq_kind;
	bool use_msg;		/* device accepted SETUP_MSG_RING */
	bool use_threshold;	/* device accepted SETUP_REQCALLTHRESHOLD */
	/*
	 * The device accepted EXT_SET_FEATURES INTR_MODERATION: it interrupts
	 * for the completion the event index names.  Set with the rings
	 * (probe, host reset), read under cmp_lock.
	 */
	bool use_event_idx;
	u32 nr_queues;		/* fixed at probe: 1, or what MULTIQUEUE gave */
	u32 nr_poll;		/* the last nr_poll of them are poll queues */
	u32 nr_vectors;		/* allocated: a vector per queue not polled */
	struct pvscsi_queue q[PVSCSI_EXT_MAX_QUEUES];

	/* shared with the device */
	struct pvscsi_rings_state *rings_state;
	dma_addr_t rings_state_dma;
	struct pvscsi_msg_desc *msg_ring;
	dma_addr_t msg_ring_dma;
	u8 *sense;		/* SCSI_SENSE_BUFFERSIZE per tag */
	dma_addr_t sense_dma;
	struct pvscsi_sg_chunk *sg_chunks;
	u32 nr_sg_chunks;
	struct pvscsi_cmd_setup_rings setup_cmd;

	/*
	 * Serialises a command register sequence (COMMAND, its COMMAND_DATA
	 * dwords, COMMAND_STATUS): two interleaved sequences would hand the
	 * device a mixed descriptor.
	 */
	spinlock_t cmd_lock;

	/*
	 * written under every queue's submit_lock in turn (WRITE_ONCE), read
	 * under any one (READ_ONCE)
	 */
	bool resetting;		/* host reset owns the rings */
	bool no_rings;		/* the device refused SETUP_RINGS at reset */

	/*
	 * msg_lock guards msg_cons, rings_state->msg_cons_idx and
	 * msg_stopped; it is never held across a SCSI scan, so the host
	 * reset can take it while the message work waits for the scan.
	 */
	struct mutex msg_lock;
	u32 msg_cons;		/* the ISR peeks at it with READ_ONCE */
	bool msg_stopped;
	struct work_struct msg_work;

	struct pvscsi_stats stats;
};

static bool pvscsi_inject(struct pvscsi_adapter *a, enum pvscsi_probe_step s)
{
	if (READ_ONCE(fail_probe) != s)
		return false;
	dev_info(&a->pdev->dev, "fault injection: failing probe step %u\n", s);
	return true;
}

static void *pvscsi_dma_alloc(struct pvscsi_adapter *a, size_t size,
			      dma_addr_t *dma)
{
	void *va = dma_alloc_coherent(&a->pdev->dev, size, dma, GFP_KERNEL);

	if (va)
		atomic_inc(&pvscsi_live_dma);
	return va;
}

static void pvscsi_dma_free(struct pvscsi_adapter *a, size_t size, void *va,
			    dma_addr_t dma)
{
	if (!va)
		return;
	dma_free_coherent(&a->pdev->dev, size, va, dma);
	atomic_dec(&pvscsi_live_dma);
}

/* --- registers and commands -------------------------------------------- */

static u32 pvscsi_read(struct pvscsi_adapter *a, u32 reg)
{
	return ioread32(a->mmio + reg);
}

static void pvscsi_write(struct pvscsi_adapter *a, u32 reg, u32 val)
{
	iowrite32(val, a->mmio + reg);
}

/*
 * Issue one command and stream its little-endian descriptor; returns
 * COMMAND_STATUS (PVSCSI_STATUS_UNSUPPORTED when the device refuses it).
 */
static u32 pvscsi_command(struct pvscsi_adapter *a, u32 cmd, const void *desc,
			  size_t len)
{
	const u8 *p = desc;
	unsigned long flags;
	__le32 w;
	size_t i;
	u32 status;

	spin_lock_irqsave(&a->cmd_lock, flags);
	pvscsi_write(a, PVSCSI_REG_COMMAND, cmd);
	for (i = 0; i + sizeof(w) <= len; i += sizeof(w)) {
		memcpy(&w, p + i, sizeof(w));
		pvscsi_write(a, PVSCSI_REG_COMMAND_DATA, le32_to_cpu(w));
	}
	status = pvscsi_read(a, PVSCSI_REG_COMMAND_STATUS);
	spin_unlock_irqrestore(&a->cmd_lock, flags);
	return status;
}

static void pvscsi_mask_intr(struct pvscsi_adapter *a)
{
	pvscsi_write(a, PVSCSI_REG_INTR_MASK, 0);
}

static void pvscsi_unmask_intr(struct pvscsi_adapter *a)
{
	u32 mask = PVSCSI_INTR_CMPL_MASK;

	if (a->use_msg)
		mask |= PVSCSI_INTR_MSG_MASK;
	pvscsi_write(a, PVSCSI_REG_INTR_MASK, mask);
}

static void pvscsi_adapter_reset(struct pvscsi_adapter *a)
{
	pvscsi_command(a, PVSCSI_CMD_ADAPTER_RESET, NULL, 0);
}

/* --- I/O submission ------------------------------------------------------ */

static bool pvscsi_is_rw(u8 op)
{
	switch (op) {
	case READ_6:
	case WRITE_6:
	case READ_10:
	case WRITE_10:
	case READ_12:
	case WRITE_12:
	case READ_16:
	case WRITE_16:
		return true;
	default:
		return false;
	}
}

static u32 pvscsi_tag(struct scsi_cmnd *cmd)
{
	return scsi_cmd_to_rq(cmd)->tag;
}

static struct pvscsi_sg_element *pvscsi_sg_page(struct pvscsi_adapter *a,
						u32 tag, dma_addr_t *dma)
{
	struct pvscsi_sg_chunk *c = &a->sg_chunks[tag / PVSCSI_SG_PER_CHUNK];
	u32 off = (tag % PVSCSI_SG_PER_CHUNK) * PVSCSI_PAGE_SIZE;

	*dma = c->dma + off;
	return (void *)c->va + off;
}

static void pvscsi_fill_data(struct pvscsi_adapter *a, struct scsi_cmnd *cmd,
			     struct pvscsi_req_desc *d, int nseg, u32 tag)
{
	struct pvscsi_sg_element *sge;
	struct scatterlist *sg;
	dma_addr_t sg_dma;
	int i;

	d->data_len = cpu_to_le64(scsi_bufflen(cmd));
	if (nseg == 0)
		return;
	if (nseg == 1) {
		/* one segment: no SG page, the device reads one DMA less */
		d->data_addr = cpu_to_le64(sg_dma_address(scsi_sglist(cmd)));
		return;
	}
	sge = pvscsi_sg_page(a, tag, &sg_dma);
	scsi_for_each_sg(cmd, sg, nseg, i) {
		sge[i].addr = cpu_to_le64(sg_dma_address(sg));
		sge[i].length = cpu_to_le32(sg_dma_len(sg));
		sge[i].flags = 0;
	}
	d->flags |= cpu_to_le32(PVSCSI_FLAG_CMD_WITH_SG_LIST);
	d->data_addr = cpu_to_le64(sg_dma);
}

/*
 * q->submit_lock held: ring the queue's doorbell for what was queued
 * since the last one.  iowrite32() orders the index store before the MMIO
 * write.
 */
static void pvscsi_kick_locked(struct pvscsi_queue *q)
{
	struct pvscsi_adapter *a = q->a;
	u32 pending = q->kick_pending;
	u32 cons, threshold;

	if (!pending || READ_ONCE(a->resetting))
		return;
	q->kick_pending = 0;
	if (pending & PVSCSI_KICK_NON_RW) {
		/*
		 * the device processes the whole ring on either doorbell
		 * (the extension's queues have one doorbell for both)
		 */
		pvscsi_write(a, q->index ? q->kick_reg : PVSCSI_REG_KICK_NON_RW_IO, 0);
		q->stats.kicks_non_rw++;
		q->stats.doorbells++;
		return;
	}
	if (a->use_threshold) {
		/*
		 * The device publishes how many unconsumed requests it
		 * tolerates before it wants a doorbell; below that it is
		 * still polling the ring.  The device re-arms the threshold
		 * and then re-reads req_prod_idx; we store req_prod_idx and
		 * then read the threshold.  Without a full barrier the load
		 * may pass the store (x86 too), both sides see the old
		 * value, and a request sits in the ring with no doorbell.
		 * virt_mb, not smp_mb: the other side is the host, even in a
		 * guest built without SMP.
		 */
		virt_mb();
		cons = le32_to_cpu(READ_ONCE(*q->req_cons_idx));
		threshold = le32_to_cpu(READ_ONCE(*q->req_call_threshold));
		if (q->req_prod - cons < threshold) {
			q->stats.kicks_skipped++;
			return;
		}
	}
	pvscsi_write(a, q->kick_reg, 0);
	q->stats.kicks_rw++;
	q->stats.doorbells++;
}

static int pvscsi_queuecommand(struct Scsi_Host *shost, struct scsi_cmnd *cmd)
{
	struct pvscsi_adapter *a = shost_priv(shost);
	struct pvscsi_cmd_priv *p = scsi_cmd_priv(cmd);
	struct scsi_device *sdev = cmd->device;
	struct request *rq = scsi_cmd_to_rq(cmd);
	/* blk-mq's hardware queue is ours: below nr_hw_queues = nr_queues */
	struct pvscsi_queue *q = &a->q[rq->mq_hctx->queue_num];
	u32 tag = pvscsi_tag(cmd);
	struct pvscsi_req_desc *d;
	unsigned long flags;
	bool rw, last;
	u32 prod, cons, dir;
	int nseg;

	nseg = scsi_dma_map(cmd);
	if (unlikely(nseg < 0))
		return SCSI_MLQUEUE_HOST_BUSY;

	switch (cmd->sc_data_direction) {
	case DMA_FROM_DEVICE:
		dir = PVSCSI_FLAG_CMD_DIR_TOHOST;
		break;
	case DMA_TO_DEVICE:
		dir = PVSCSI_FLAG_CMD_DIR_TODEVICE;
		break;
	default:
		dir = PVSCSI_FLAG_CMD_DIR_NONE;
		break;
	}
	rw = pvscsi_is_rw(cmd->cmnd[0]);
	/*
	 * SCMD_LAST marks the end of a blk-mq batch; until then the doorbell
	 * waits (commit_rqs rings it if the batch is cut short).  Non-R/W
	 * commands (scan, EH, ioctls) never wait.
	 */
	last = !rw || (cmd->flags & SCMD_LAST);

	spin_lock_irqsave(&q->submit_lock, flags);
	if (unlikely(READ_ONCE(a->no_rings))) {
		/* nothing would ever complete it: fail it now */
		spin_unlock_irqrestore(&q->submit_lock, flags);
		scsi_dma_unmap(cmd);
		cmd->result = DID_NO_CONNECT << 16;
		scsi_done(cmd);
		return 0;
	}
	prod = q->req_prod;
	cons = le32_to_cpu(READ_ONCE(*q->req_cons_idx));
	/* a consumer index ahead of us reads as a full ring: wait */
	if (unlikely(READ_ONCE(a->resetting) || prod - cons >= a->req_entries)) {
		q->stats.busy++;
		pvscsi_kick_locked(q);
		spin_unlock_irqrestore(&q->submit_lock, flags);
		scsi_dma_unmap(cmd);
		return SCSI_MLQUEUE_HOST_BUSY;
	}

	d = &q->req_ring[prod & (a->req_entries - 1)];
	memset(d, 0, sizeof(*d));
	/*
	 * the high half: this queue's submission number and the queue, so
	 * that the same tag's earlier use on another queue never matches
	 */
	WRITE_ONCE(p->context, pvscsi_make_context(q->submit_seq++, q->index, tag));
	d->context = cpu_to_le64(p->context);
	d->flags = cpu_to_le32(dir);
	d->sense_addr = cpu_to_le64(a->sense_dma + (u64)tag * SCSI_SENSE_BUFFERSIZE);
	d->sense_len = cpu_to_le32(SCSI_SENSE_BUFFERSIZE);
	memcpy(d->cdb, cmd->cmnd, min_t(u32, cmd->cmd_len, PVSCSI_MAX_CDB_LEN));
	d->cdb_len = min_t(u32, cmd->cmd_len, PVSCSI_MAX_CDB_LEN);
	int_to_scsilun(sdev->lun, (struct scsi_lun *)d->lun);
	d->tag = SIMPLE_QUEUE_TAG;
	d->bus = sdev->channel;
	d->target = sdev->id;
	d->vcpu_hint = cpu_to_le16(raw_smp_processor_id());
	pvscsi_fill_data(a, cmd, d, nseg, tag);

	atomic64_set(&p->inflight, p->context);
	/* descriptor and SG page before the index that publishes them */
	dma_wmb();
	q->req_prod = prod + 1;
	WRITE_ONCE(*q->req_prod_idx, cpu_to_le32(prod + 1));
	/* from here on cmd may already be complete: do not touch it */
	q->stats.requests++;
	q->kick_pending |= rw ? PVSCSI_KICK_RW : PVSCSI_KICK_NON_RW;
	if (last)
		pvscsi_kick_locked(q);
	spin_unlock_irqrestore(&q->submit_lock, flags);
	return 0;
}

static void pvscsi_commit_rqs(struct Scsi_Host *shost, u16 hwq)
{
	struct pvscsi_adapter *a = shost_priv(shost);
	struct pvscsi_queue *q = &a->q[hwq];
	unsigned long flags;

	spin_lock_irqsave(&q->submit_lock, flags);
	pvscsi_kick_locked(q);
	spin_unlock_irqrestore(&q->submit_lock, flags);
}

/*
 * blk-mq's CPU to hardware queue maps: the default one by the vectors'
 * affinity; the poll queues (the last nr_poll, no vector) spread by
 * blk-mq.  No separate read queues.
 */
static void pvscsi_map_queues(struct Scsi_Host *shost)
{
	struct pvscsi_adapter *a = shost_priv(shost);
	struct blk_mq_queue_map *map = &shost->tag_set.map[HCTX_TYPE_DEFAULT];

	/* with one map blk-mq has set it (capped at the CPUs) */
	if (a->nr_poll)
		map->nr_queues = a->nr_queues - a->nr_poll;
	if (a->nr_vectors > 1)
		blk_mq_pci_map_queues(map, a->pdev, 0);
	else
		blk_mq_map_queues(map);
	if (!a->nr_poll)
		return;
	shost->tag_set.map[HCTX_TYPE_READ].nr_queues = 0;
	map = &shost->tag_set.map[HCTX_TYPE_POLL];
	map->nr_queues = a->nr_poll;
	map->queue_offset = a->nr_queues - a->nr_poll;
	blk_mq_map_queues(map);
}

/* --- completion ---------------------------------------------------------- */

static void pvscsi_set_result(struct scsi_cmnd *cmd, u16 btstat, u16 sdstat,
			      u64 data_len)
{
	u32 len = scsi_bufflen(cmd);

	if (sdstat != SAM_STAT_GOOD &&
	    (btstat == BTSTAT_SUCCESS ||
	     btstat == BTSTAT_LINKED_COMMAND_COMPLETED ||
	     btstat == BTSTAT_LINKED_COMMAND_COMPLETED_WITH_FLAG)) {
		if (sdstat == SAM_STAT_COMMAND_TERMINATED)
			cmd->result = DID_RESET << 16;
		else
			cmd->result = (DID_OK << 16) | (sdstat & 0xff);
		return;
	}
	switch (btstat) {
	case BTSTAT_SUCCESS:
	case BTSTAT_LINKED_COMMAND_COMPLETED:
	case BTSTAT_LINKED_COMMAND_COMPLETED_WITH_FLAG:
		/* some devices report 0 bytes for a full transfer */
		if (data_len && data_len < len)
			scsi_set_resid(cmd, len - data_len);
		cmd->result = DID_OK << 16;
		break;
	case BTSTAT_DATARUN:
	case BTSTAT_DATA_UNDERRUN:
		if (data_len < len)
			scsi_set_resid(cmd, len - data_len);
		cmd->result = DID_ERROR << 16;
		break;
	case BTSTAT_SELTIMEO:
	case BTSTAT_LUNMISMATCH:
		cmd->result = DID_BAD_TARGET << 16;
		break;
	case BTSTAT_SENTRST:
	case BTSTAT_RECVRST:
	case BTSTAT_BUSRESET:
		cmd->result = DID_RESET << 16;
		break;
	case BTSTAT_ABORTQUEUE:
		cmd->result = DID_BUS_BUSY << 16;
		break;
	case BTSTAT_SCSIPARITY:
		cmd->result = DID_PARITY << 16;
		break;
	default:
		cmd->result = DID_ERROR << 16;
		break;
	}
}

/*
 * Find the in-flight command behind a device-supplied context, or NULL;
 * q->cmp_lock held, and only a command submitted on @q is claimed (its
 * in-flight context is taken under its own queue's lock).
 */
static struct scsi_cmnd *pvscsi_claim(struct pvscsi_queue *q, u64 context)
{
	struct pvscsi_adapter *a = q->a;
	u32 tag1 = lower_32_bits(context);
	struct pvscsi_cmd_priv *p;
	struct scsi_cmnd *cmd;

	if (tag1 == 0 || tag1 > a->req_entries)
		return NULL;
	cmd = scsi_host_find_tag(a->shost, (int)(tag1 - 1));
	if (!cmd)
		return NULL;
	p = scsi_cmd_priv(cmd);
	/*
	 * A completion of an earlier use of this tag (a device that posts
	 * one twice, or late) must not finish the command using it now: only
	 * the context in flight, on this queue, is taken (once).
	 */
	if (pvscsi_context_queue(context) != q->index ||
	    atomic64_cmpxchg(&p->inflight, context, 0) != (s64)context)
		return NULL;
	return cmd;
}

static void pvscsi_finish(struct pvscsi_adapter *a, struct scsi_cmnd *cmd)
{
	scsi_dma_unmap(cmd);
	scsi_done(cmd);
}

/* q->cmp_lock held */
static void pvscsi_complete_one(struct pvscsi_queue *q,
				const struct pvscsi_cmp_desc *e)
{
	struct pvscsi_adapter *a = q->a;
	u64 context = le64_to_cpu(e->context);
	u16 sdstat = le16_to_cpu(e->scsi_status);
	u32 sense_len = le32_to_cpu(e->sense_len);
	struct scsi_cmnd *cmd;
	u32 tag;

	cmd = pvscsi_claim(q, context);
	if (!cmd) {
		q->stats.bogus_completions++;
		dev_warn_ratelimited(&a->pdev->dev,
				     "completion with unknown context %#llx ignored\n",
				     context);
		return;
	}
	tag = lower_32_bits(context) - 1;
	pvscsi_set_result(cmd, le16_to_cpu(e->host_status), sdstat,
			  le64_to_cpu(e->data_len));
	if (sdstat == SAM_STAT_CHECK_CONDITION && sense_len)
		memcpy(cmd->sense_buffer, a->sense + tag * SCSI_SENSE_BUFFERSIZE,
		       min_t(u32, sense_len, SCSI_SENSE_BUFFERSIZE));
	pvscsi_finish(a, cmd);
}

/*
 * A poll queue's completion event index: half the index space from its
 * consumer, where the device's producer (at most a ring ahead) never gets
 * to, so the device never interrupts for it.
 */
static u32 pvscsi_poll_event(u32 cons)
{
	return cons + (1u << 31);
}

/*
 * Reap at most @budget completions; returns the number reaped and sets
 * *more when the device has published others.  cmp_lock held.
 *
 * The producer index is read again after each batch, as vmw_pvscsi does:
 * completions the device posts while we are completing commands are
 * taken in the same pass instead of waiting for the next interrupt.  The
 * consumer index goes back to the device after each batch, so a device
 * that waits for free completion slots (ours does) can go on at once.
 */
static u32 pvscsi_reap_locked(struct pvscsi_queue *q, u32 budget, bool *more)
{
	struct pvscsi_adapter *a = q->a;
	u32 cons = q->cmp_cons, prod, n = 0;
	struct pvscsi_cmp_desc e;
	bool armed = false;

	for (;;) {
		prod = le32_to_cpu(READ_ONCE(*q->cmp_prod_idx));
		if (unlikely(prod - cons > a->cmp_entries)) {
			/* more completions than slots: the index is garbage */
			q->stats.bogus_completions++;
			dev_warn_ratelimited(&a->pdev->dev,
					     "completion producer %u vs consumer %u ignored\n",
					     prod, cons);
			prod = cons;
			break;
		}
		if (cons == prod && a->use_event_idx && !armed && !q->poll) {
			/*
			 * Reaped up to here: ask for an interrupt for the next
			 * completion, then look once more (the device
			 * publishes, then reads the index): what came
			 * meanwhile may have no interrupt, so it is reaped now.
			 */
			WRITE_ONCE(*q->cmp_event_idx, cpu_to_le32(cons));
			/* the index stored before cmpProdIdx is loaded again */
			virt_mb();
			armed = true;
			continue;
		}
		if (cons == prod || n >= budget)
			break;
		/* the descriptors are valid only once the index is seen */
		dma_rmb();
		while (cons != prod && n < budget) {
			/* one copy: the device cannot change what we validated */
			memcpy(&e, &q->cmp_ring[cons & (a->cmp_entries - 1)], sizeof(e));
			pvscsi_complete_one(q, &e);
			cons++;
			n++;
		}
		/* finish reading the slots before handing them back */
		mb();
		q->cmp_cons = cons;
		WRITE_ONCE(*q->cmp_cons_idx, cpu_to_le32(cons));
		armed = false;
	}
	/* a poll queue's event index moves away as its consumer moves */
	if (n && q->poll && a->use_event_idx)
		WRITE_ONCE(*q->cmp_event_idx, cpu_to_le32(pvscsi_poll_event(cons)));
	q->stats.completions += n;
	*more = cons != prod;
	return n;
}

/*
 * blk-mq's poll of a poll queue (io_uring IOPOLL): what the device posted
 * on it, without an interrupt.  The error handlers reap it too.
 */
static int pvscsi_mq_poll(struct Scsi_Host *shost, unsigned int hwq)
{
	struct pvscsi_adapter *a = shost_priv(shost);
	struct pvscsi_queue *q;
	unsigned long flags;
	bool more;
	u32 n;

	if (WARN_ON_ONCE(hwq >= a->nr_queues))
		return 0;
	q = &a->q[hwq];
	spin_lock_irqsave(&q->cmp_lock, flags);
	n = pvscsi_reap_locked(q, cmp_budget, &more);
	q->stats.polled += n;
	spin_unlock_irqrestore(&q->cmp_lock, flags);
	return n;
}

static bool pvscsi_reap(struct pvscsi_queue *q, u32 budget, bool from_irq)
{
	unsigned long flags;
	bool more;
	u32 n;

	spin_lock_irqsave(&q->cmp_lock, flags);
	n = pvscsi_reap_locked(q, budget, &more);
	if (from_irq) {
		q->stats.interrupts++;
		if (n > q->stats.cmpl_per_irq_max)
			q->stats.cmpl_per_irq_max = n;
	}
	spin_unlock_irqrestore(&q->cmp_lock, flags);
	return more;
}

/* every queue until none has more (the error handlers) */
static void pvscsi_reap_all(struct pvscsi_adapter *a)
{
	u32 i;

	for (i = 0; i < a->nr_queues; i++)
		while (pvscsi_reap(&a->q[i], UINT_MAX, false))
			;
}

static bool pvscsi_msg_pending(struct pvscsi_adapter *a)
{
	u32 prod = le32_to_cpu(READ_ONCE(a->rings_state->msg_prod_idx));

	return prod != READ_ONCE(a->msg_cons);
}

/*
 * A queue's vector (every queue has one: pvscsi_alloc_vectors()); queue
 * 0's also stands for the message ring.
 */
static irqreturn_t pvscsi_isr(int irq, void *data)
{
	struct pvscsi_queue *q = data;
	struct pvscsi_adapter *a = q->a;
	u32 status;

	if (a->irq_kind == PVSCSI_IRQ_INTX) {
		status = pvscsi_read(a, PVSCSI_REG_INTR_STATUS);
		/* shared line, or the device went away */
		if (!status || status == ~0u)
			return IRQ_NONE;
		pvscsi_write(a, PVSCSI_REG_INTR_STATUS, status);
	}
	if (!q->index && a->use_msg && pvscsi_msg_pending(a))
		queue_work(system_long_wq, &a->msg_work);
	if (pvscsi_reap(q, cmp_budget, true))
		return IRQ_WAKE_THREAD;
	return IRQ_HANDLED;
}

/* what did not fit in the hard interrupt's budget */
static irqreturn_t pvscsi_isr_thread(int irq, void *data)
{
	struct pvscsi_queue *q = data;

	while (pvscsi_reap(q, cmp_budget, false))
		cond_resched();
	return IRQ_HANDLED;
}

/* --- message ring: hot plug ----------------------------------------------- */

struct pvscsi_msg_event {
	u32 type;
	u32 bus;
	u32 target;
	u64 lun;
};

/* copy out up to @max events; msg_lock held */
static int pvscsi_msg_fetch(struct pvscsi_adapter *a,
			    struct pvscsi_msg_event *ev, int max)
{
	struct pvscsi_rings_state *s = a->rings_state;
	struct pvscsi_msg_dev_status m;
	u32 prod, cons = a->msg_cons;
	int n = 0;

	if (a->msg_stopped || !a->use_msg)
		return 0;
	prod = le32_to_cpu(READ_ONCE(s->msg_prod_idx));
	if (prod - cons > a->msg_entries) {
		a->stats.bogus_msgs++;
		dev_warn_ratelimited(&a->pdev->dev,
				     "message producer %u vs consumer %u: dropped\n",
				     prod, cons);
		cons = prod;
		goto out;
	}
	dma_rmb();
	while (cons != prod && n < max) {
		memcpy(&m, &a->msg_ring[cons & (a->msg_entries - 1)], sizeof(m));
		cons++;
		a->stats.msgs++;
		ev[n].type = le32_to_cpu(m.type);
		ev[n].bus = le32_to_cpu(m.bus);
		ev[n].target = le32_to_cpu(m.target);
		ev[n].lun = scsilun_to_int((struct scsi_lun *)m.lun);
		if ((ev[n].type != PVSCSI_MSG_DEV_ADDED &&
		     ev[n].type != PVSCSI_MSG_DEV_REMOVED) ||
		    ev[n].bus != 0 || ev[n].target >= a->max_targets ||
		    ev[n].lun >= PVSCSI_MAX_LUN) {
			a->stats.bogus_msgs++;
			dev_warn_ratelimited(&a->pdev->dev,
					     "message type %u %u:%u:%llu ignored\n",
					     ev[n].type, ev[n].bus, ev[n].target,
					     ev[n].lun);
			continue;
		}
		n++;
	}
out:
	/* done reading the slots before the device may reuse them */
	mb();
	WRITE_ONCE(a->msg_cons, cons);
	WRITE_ONCE(s->msg_cons_idx, cpu_to_le32(cons));
	return n;
}

static void pvscsi_msg_work(struct work_struct *work)
{
	struct pvscsi_adapter *a = container_of(work, struct pvscsi_adapter,
						msg_work);
	struct pvscsi_msg_event ev[PVSCSI_MSG_BATCH];
	struct scsi_device *sdev;
	int i, n;

	for (;;) {
		mutex_lock(&a->msg_lock);
		n = pvscsi_msg_fetch(a, ev, ARRAY_SIZE(ev));
		mutex_unlock(&a->msg_lock);
		if (!n)
			return;
		for (i = 0; i < n; i++) {
			sdev = scsi_device_lookup(a->shost, ev[i].bus,
						  ev[i].target, ev[i].lun);
			if (ev[i].type == PVSCSI_MSG_DEV_ADDED) {
				dev_info(&a->pdev->dev, "device added: %u:%u:%llu\n",
					 ev[i].bus, ev[i].target, ev[i].lun);
				if (sdev)
					scsi_device_put(sdev);
				else
					scsi_add_device(a->shost, ev[i].bus,
							ev[i].target, ev[i].lun);
			} else {
				dev_info(&a->pdev->dev, "device removed: %u:%u:%llu\n",
					 ev[i].bus, ev[i].target, ev[i].lun);
				if (sdev) {
					scsi_remove_device(sdev);
					scsi_device_put(sdev);
				}
			}
		}
	}
}

/* --- ring setup ---------------------------------------------------------- */

/* built once at probe: the ring addresses never change afterwards */
static void pvscsi_build_setup_cmd(struct pvscsi_adapter *a)
{
	struct pvscsi_cmd_setup_rings *cmd = &a->setup_cmd;
	struct pvscsi_queue *q = &a->q[0];
	u32 i;

	memset(cmd, 0, sizeof(*cmd));
	cmd->req_ring_num_pages = cpu_to_le32(a->req_pages);
	cmd->cmp_ring_num_pages = cpu_to_le32(a->cmp_pages);
	cmd->rings_state_ppn = cpu_to_le64(a->rings_state_dma >> PVSCSI_PAGE_SHIFT);
	for (i = 0; i < a->req_pages; i++)
		cmd->req_ring_ppns[i] = cpu_to_le64((q->req_ring_dma >> PVSCSI_PAGE_SHIFT) + i);
	for (i = 0; i < a->cmp_pages; i++)
		cmd->cmp_ring_ppns[i] = cpu_to_le64((q->cmp_ring_dma >> PVSCSI_PAGE_SHIFT) + i);
}

/*
 * EXT_SETUP_QUEUES for queues 1..nr_queues-1, in order, after SETUP_RINGS.
 * A refusal leaves the adapter unusable as set up (blk-mq has that many
 * hardware queues): the caller treats it as a refused SETUP_RINGS.
 */
static int pvscsi_setup_queues(struct pvscsi_adapter *a)
{
	struct pvscsi_cmd_ext_setup_queue c;
	u32 i, j, status;

	for (i = 1; i < a->nr_queues; i++) {
		struct pvscsi_queue *q = &a->q[i];

		memset(&c, 0, sizeof(c));
		c.magic = cpu_to_le32(PVSCSI_EXT_QUERY_MAGIC);
		c.queue = cpu_to_le32(i);
		c.req_ring_num_pages = cpu_to_le32(a->req_pages);
		c.cmp_ring_num_pages = cpu_to_le32(a->cmp_pages);
		for (j = 0; j < a->req_pages; j++)
			c.req_ring_ppns[j] =
				cpu_to_le64((q->req_ring_dma >> PVSCSI_PAGE_SHIFT) + j);
		for (j = 0; j < a->cmp_pages; j++)
			c.cmp_ring_ppns[j] =
				cpu_to_le64((q->cmp_ring_dma >> PVSCSI_PAGE_SHIFT) + j);
		status = pvscsi_command(a, PVSCSI_CMD_EXT_SETUP_QUEUES, &c, sizeof(c));
		if (status) {
			dev_err(&a->pdev->dev, "the device refused queue %u (status %#x)\n",
				i, status);
			return -EIO;
		}
	}
	return 0;
}

/*
 * Hand the rings to the device.  The caller owns every index (probe, or
 * the host reset with submission stopped and interrupts masked) and has
 * zeroed them; nothing here allocates, so the host reset cannot fail on
 * memory.
 */
static int pvscsi_setup_rings(struct pvscsi_adapter *a)
{
	struct pvscsi_cmd_setup_msg_ring msg = {};
	struct pvscsi_cmd_setup_req_call thr = {};
	u32 i, status;

	status = pvscsi_command(a, PVSCSI_CMD_SETUP_RINGS, &a->setup_cmd,
				sizeof(a->setup_cmd));
	if (status == PVSCSI_STATUS_UNSUPPORTED || pvscsi_setup_queues(a))
		return -EIO;

	a->use_threshold = false;
	if (use_req_threshold) {
		thr.enable = cpu_to_le32(1);
		status = pvscsi_command(a, PVSCSI_CMD_SETUP_REQCALLTHRESHOLD,
					&thr, sizeof(thr));
		a->use_threshold = status != PVSCSI_STATUS_UNSUPPORTED;
	}

	/* SETUP_RINGS turned the device's features off; the index is 0 */
	a->use_event_idx = false;
	if (event_idx && PVSCSI_EXT_STATUS_VALID(a->ext_status) &&
	    (PVSCSI_EXT_STATUS_FEATURES(a->ext_status) & PVSCSI_EXT_FEAT_INTR_MODERATION)) {
		struct pvscsi_cmd_ext_set_features f = {
			.magic = cpu_to_le32(PVSCSI_EXT_QUERY_MAGIC),
			.features = cpu_to_le32(PVSCSI_EXT_FEAT_INTR_MODERATION),
		};

		for (i = 0; i < a->nr_queues; i++) {
			struct pvscsi_queue *q = &a->q[i];
			u32 ev = q->poll ? pvscsi_poll_event(q->cmp_cons) : q->cmp_cons;

			WRITE_ONCE(*q->cmp_event_idx, cpu_to_le32(ev));
		}
		status = pvscsi_command(a, PVSCSI_CMD_EXT_SET_FEATURES, &f, sizeof(f));
		a->use_event_idx = status == 0;
		if (!a->use_event_idx)
			dev_warn(&a->pdev->dev,
				 "device offered but refused the event index (status %#x)\n",
				 status);
	}

	a->use_msg = false;
	if (a->msg_ring) {
		msg.num_pages = cpu_to_le32(a->msg_pages);
		for (i = 0; i < a->msg_pages; i++)
			msg.ring_ppns[i] = cpu_to_le64((a->msg_ring_dma >> PVSCSI_PAGE_SHIFT) + i);
		status = pvscsi_command(a, PVSCSI_CMD_SETUP_MSG_RING, &msg, sizeof(msg));
		a->use_msg = status != PVSCSI_STATUS_UNSUPPORTED;
	}
	return 0;
}

static u32 pvscsi_query_targets(struct pvscsi_adapter *a)
{
	struct pvscsi_config_page_controller *page;
	struct pvscsi_cmd_config cmd = {};
	u32 status, n = PVSCSI_DEFAULT_TARGETS;
	dma_addr_t dma;

	page = pvscsi_dma_alloc(a, PVSCSI_PAGE_SIZE, &dma);
	if (!page)
		return n;
	cmd.cmp_addr = cpu_to_le64(dma);
	cmd.config_page_address =
		cpu_to_le64((u64)PVSCSI_CONFIG_CONTROLLER_ADDRESS << 32);
	cmd.config_page_num = cpu_to_le32(PVSCSI_CONFIG_PAGE_CONTROLLER);
	status = pvscsi_command(a, PVSCSI_CMD_CONFIG, &cmd, sizeof(cmd));
	if (status != PVSCSI_STATUS_UNSUPPORTED) {
		/* read once: the device owns the page */
		u16 hs = le16_to_cpu(READ_ONCE(page->header.host_status));
		u16 ss = le16_to_cpu(READ_ONCE(page->header.scsi_status));
		u32 phys = le32_to_cpu(READ_ONCE(page->num_phys));

		if (hs == BTSTAT_SUCCESS && ss == SAM_STAT_GOOD && phys &&
		    phys <= PVSCSI_MAX_TARGETS)
			n = phys;
	}
	pvscsi_dma_free(a, PVSCSI_PAGE_SIZE, page, dma);
	return n;
}

static void pvscsi_query_ext(struct pvscsi_adapter *a)
{
	struct pvscsi_cmd_ext_query q = {
		.magic = cpu_to_le32(PVSCSI_EXT_QUERY_MAGIC),
		.driver_version = cpu_to_le32(PVSCSI_EXT_VERSION),
	};
	u32 status;

	a->ext_status = 0;
	if (!ext) {
		dev_info(&a->pdev->dev, "extension disabled (ext=0): plain PVSCSI ABI\n");
		return;
	}
	status = pvscsi_command(a, PVSCSI_CMD_EXT_QUERY, &q, sizeof(q));
	a->ext_status = status;
	if (!PVSCSI_EXT_STATUS_VALID(status)) {
		dev_info(&a->pdev->dev,
			 "device has no vhost-pvscsi extension (status %#x): plain PVSCSI ABI\n",
			 status);
		return;
	}
	dev_info(&a->pdev->dev, "vhost-pvscsi extension v%u, %u queues, features %#x\n",
		 PVSCSI_EXT_STATUS_VERSION(status), PVSCSI_EXT_STATUS_QUEUES(status),
		 PVSCSI_EXT_STATUS_FEATURES(status));
}

/*
 * How many queues: one, unless the device offers MULTIQUEUE; then one per
 * online CPU or the queues parameter, at most what it offers (a bogus
 * count is bounded by the ABI's maximum).
 */
static u32 pvscsi_want_queues(struct pvscsi_adapter *a)
{
	u32 st = a->ext_status, n, offered, feat;

	a->nr_poll = 0;
	if (!PVSCSI_EXT_STATUS_VALID(st) ||
	    !(PVSCSI_EXT_STATUS_FEATURES(st) & PVSCSI_EXT_FEAT_MULTIQUEUE)) {
		if (poll_queues)
			dev_info(&a->pdev->dev, "poll_queues=%u: the device offers no MULTIQUEUE, no poll queue\n",
				 poll_queues);
		return 1;
	}
	offered = max(min(PVSCSI_EXT_STATUS_QUEUES(st), (u32)PVSCSI_EXT_MAX_QUEUES), 1u);
	feat = PVSCSI_EXT_STATUS_FEATURES(st);
	/*
	 * A poll queue needs the event index: without it the device would
	 * interrupt on a vector nobody took.  Queue 0 is never one.
	 */
	n = queues ?: num_online_cpus();
	n = max(min(n, offered), 1u);
	/* the queues with a vector first; poll queues from what is left */
	if (poll_queues && (!event_idx || !(feat & PVSCSI_EXT_FEAT_INTR_MODERATION)))
		dev_info(&a->pdev->dev, "poll_queues=%u: no event index, no poll queue\n",
			 poll_queues);
	else
		a->nr_poll = min(poll_queues, offered - n);
	return n + a->nr_poll;
}

/* --- error handling -------------------------------------------------------- */

struct pvscsi_match {
	struct scsi_cmnd *cmd;		/* this command, or */
	struct scsi_device *sdev;	/* any on this device, or */
	bool any;			/* any at all */
};

static bool pvscsi_inflight(struct scsi_cmnd *cmd)
{
	struct pvscsi_cmd_priv *p = scsi_cmd_priv(cmd);

	return atomic64_read(&p->inflight) != 0;
}

/*
 * Under the command's queue's cmp_lock: a completion takes the in-flight
 * context before it calls scsi_done(), both under that lock.  Seen
 * without it, a taken context could belong to a completion still
 * running, and the EH would hand the command back while scsi_done() is
 * yet to come.  A command's queue is written before its in-flight
 * context; one not in flight under a lock that is not its queue's is
 * looked at again under the right one.
 */
static bool pvscsi_pending_on(struct pvscsi_queue *q, const struct pvscsi_match *m)
{
	struct pvscsi_adapter *a = q->a;
	struct scsi_cmnd *cmd;
	unsigned long flags;
	bool found = false;
	int tag;

	spin_lock_irqsave(&q->cmp_lock, flags);
	/* EH only: a walk over the tags is fine here, never in the I/O path */
	for (tag = 0; tag < a->req_entries; tag++) {
		cmd = m->cmd ?: scsi_host_find_tag(a->shost, tag);
		if (cmd && pvscsi_cmd_queue(cmd) == q->index && pvscsi_inflight(cmd) &&
		    (m->cmd || m->any || cmd->device == m->sdev)) {
			found = true;
			break;
		}
		if (m->cmd)
			break;
	}
	spin_unlock_irqrestore(&q->cmp_lock, flags);
	return found;
}

static bool pvscsi_pending(struct pvscsi_adapter *a, const struct pvscsi_match *m)
{
	u32 i;

	for (i = 0; i < a->nr_queues; i++)
		if (pvscsi_pending_on(&a->q[i], m))
			return true;
	return false;
}

/*
 * The device returns aborted or reset commands through the completion
 * ring, maybe later: an EH handler may only report success once they are
 * back, or a late completion would hit the tag's next user.
 */
static int pvscsi_wait_returned(struct pvscsi_adapter *a,
				const struct pvscsi_match *m)
{
	unsigned long end = jiffies + msecs_to_jiffies(PVSCSI_EH_TIMEOUT_MS);

	for (;;) {
		pvscsi_reap_all(a);
		if (!pvscsi_pending(a, m))
			return SUCCESS;
		if (time_after(jiffies, end))
			return FAILED;
		msleep(20);
	}
}

static int pvscsi_eh_abort(struct scsi_cmnd *cmd)
{
	struct pvscsi_adapter *a = shost_priv(cmd->device->host);
	struct pvscsi_cmd_priv *p = scsi_cmd_priv(cmd);
	struct pvscsi_match m = { .cmd = cmd };
	struct pvscsi_cmd_abort ab = {};
	int ret;

	atomic64_inc(&a->stats.aborts);
	scmd_printk(KERN_WARNING, cmd, "abort tag %u op %#x\n", pvscsi_tag(cmd),
		    cmd->cmnd[0]);
	pvscsi_reap_all(a);
	if (!pvscsi_pending(a, &m))
		return SUCCESS;
	ab.context = cpu_to_le64(p->context);
	ab.target = cpu_to_le32(cmd->device->id);
	pvscsi_command(a, PVSCSI_CMD_ABORT_CMD, &ab, sizeof(ab));
	ret = pvscsi_wait_returned(a, &m);
	if (ret != SUCCESS) {
		atomic64_inc(&a->stats.aborts_failed);
		scmd_printk(KERN_WARNING, cmd, "abort failed: the device kept the command\n");
	}
	return ret;
}

static int pvscsi_eh_device_reset(struct scsi_cmnd *cmd)
{
	struct scsi_device *sdev = cmd->device;
	struct pvscsi_adapter *a = shost_priv(sdev->host);
	struct pvscsi_match m = { .sdev = sdev };
	struct pvscsi_cmd_reset_device rd = {};
	u32 status;

	atomic64_inc(&a->stats.device_resets);
	sdev_printk(KERN_INFO, sdev, "device reset\n");
	rd.target = cpu_to_le32(sdev->id);
	int_to_scsilun(sdev->lun, (struct scsi_lun *)rd.lun);
	status = pvscsi_command(a, PVSCSI_CMD_RESET_DEVICE, &rd, sizeof(rd));
	if (status == PVSCSI_STATUS_UNSUPPORTED)
		return FAILED;
	return pvscsi_wait_returned(a, &m);
}

static int pvscsi_eh_bus_reset(struct scsi_cmnd *cmd)
{
	struct pvscsi_adapter *a = shost_priv(cmd->device->host);
	struct pvscsi_match m = { .any = true };
	u32 status;

	atomic64_inc(&a->stats.bus_resets);
	shost_printk(KERN_INFO, a->shost, "bus reset\n");
	status = pvscsi_command(a, PVSCSI_CMD_RESET_BUS, NULL, 0);
	if (status == PVSCSI_STATUS_UNSUPPORTED)
		return FAILED;
	return pvscsi_wait_returned(a, &m);
}

/* resetting and no_rings change under every queue's submit_lock */
static void pvscsi_set_submit(struct pvscsi_adapter *a, bool resetting,
			      bool no_rings)
{
	unsigned long flags;
	u32 i;

	for (i = 0; i < a->nr_queues; i++) {
		struct pvscsi_queue *q = &a->q[i];

		spin_lock_irqsave(&q->submit_lock, flags);
		/* read under another queue's lock meanwhile: one store each */
		WRITE_ONCE(a->resetting, resetting);
		WRITE_ONCE(a->no_rings, no_rings);
		if (resetting) {
			q->kick_pending = 0;
			q->req_prod = 0;
		}
		spin_unlock_irqrestore(&q->submit_lock, flags);
	}
}

static void pvscsi_sync_irqs(struct pvscsi_adapter *a)
{
	u32 i;

	for (i = 0; i < a->nr_vectors; i++)
		synchronize_irq(a->q[i].irq);
}

/*
 * After ADAPTER_RESET: reap what the device posted before it, then fail
 * back what it did not return (it has forgotten it).  Under each queue's
 * cmp_lock for its own commands.
 */
static int pvscsi_fail_back(struct pvscsi_queue *q)
{
	struct pvscsi_adapter *a = q->a;
	struct pvscsi_cmd_priv *p;
	struct scsi_cmnd *c;
	unsigned long flags;
	int tag, failed = 0;
	s64 v;
	bool more;

	spin_lock_irqsave(&q->cmp_lock, flags);
	pvscsi_reap_locked(q, UINT_MAX, &more);
	for (tag = 0; tag < a->req_entries; tag++) {
		c = scsi_host_find_tag(a->shost, tag);
		if (!c)
			continue;
		p = scsi_cmd_priv(c);
		v = atomic64_read(&p->inflight);
		/* another queue's, or taken meanwhile (only under its lock) */
		if (!v || pvscsi_context_queue(v) != q->index ||
		    atomic64_cmpxchg(&p->inflight, v, 0) != v)
			continue;
		c->result = DID_RESET << 16;
		pvscsi_finish(a, c);
		failed++;
	}
	/*
	 * The indices go to zero under the lock: a late interrupt (an MSI-X
	 * vector on irqfd ignores INTR_MASK) then finds nothing to reap,
	 * rather than the old producer index against a zero consumer
	 */
	WRITE_ONCE(*q->cmp_prod_idx, 0);
	WRITE_ONCE(*q->cmp_cons_idx, 0);
	WRITE_ONCE(*q->cmp_event_idx, 0);
	q->cmp_cons = 0;
	spin_unlock_irqrestore(&q->cmp_lock, flags);
	return failed;
}

static int pvscsi_eh_host_reset(struct scsi_cmnd *cmd)
{
	struct pvscsi_adapter *a = shost_priv(cmd->device->host);
	int failed = 0;
	bool no_rings;
	u32 i;

	atomic64_inc(&a->stats.host_resets);
	shost_printk(KERN_INFO, a->shost, "host reset\n");

	/* no new descriptors while the rings are torn down */
	pvscsi_set_submit(a, true, a->no_rings);
	pvscsi_mask_intr(a);
	pvscsi_sync_irqs(a);
	mutex_lock(&a->msg_lock);

	/*
	 * Reset first, then reap: a device stops touching the rings at
	 * ADAPTER_RESET, and may post the completions of the commands it
	 * cancels just before.  Reaping before the reset would race with
	 * completions posted in between; after it the ring is stable.
	 */
	pvscsi_adapter_reset(a);
	/* what the reset's own completions raised has run by now */
	pvscsi_sync_irqs(a);
	for (i = 0; i < a->nr_queues; i++)
		failed += pvscsi_fail_back(&a->q[i]);
	memset(a->rings_state, 0, PVSCSI_PAGE_SIZE);
	WRITE_ONCE(a->msg_cons, 0);

	/*
	 * Without rings nothing submitted could ever complete: until a later
	 * reset sets them up, commands fail at once and the reset reports
	 * failure, so the midlayer does not retry into a dead adapter.
	 */
	no_rings = pvscsi_setup_rings(a) != 0;
	pvscsi_set_submit(a, false, no_rings);
	mutex_unlock(&a->msg_lock);
	pvscsi_unmask_intr(a);
	if (no_rings) {
		shost_printk(KERN_ERR, a->shost,
			     "host reset failed: the device refused SETUP_RINGS, %d commands failed back\n",
			     failed);
		return FAILED;
	}
	shost_printk(KERN_INFO, a->shost, "host reset done, %d commands failed back\n",
		     failed);
	return SUCCESS;
}

/* --- sysfs ------------------------------------------------------------------ */

enum pvscsi_attr_id {
	PVSCSI_A_REQUESTS,
	PVSCSI_A_DOORBELLS,
	PVSCSI_A_KICKS_RW,
	PVSCSI_A_KICKS_NON_RW,
	PVSCSI_A_KICKS_SKIPPED,
	PVSCSI_A_BUSY,
	PVSCSI_A_INTERRUPTS,
	PVSCSI_A_COMPLETIONS,
	PVSCSI_A_CMPL_PER_IRQ_MAX,
	PVSCSI_A_BOGUS_COMPLETIONS,
	PVSCSI_A_MSGS,
	PVSCSI_A_BOGUS_MSGS,
	PVSCSI_A_ABORTS,
	PVSCSI_A_ABORTS_FAILED,
	PVSCSI_A_DEVICE_RESETS,
	PVSCSI_A_BUS_RESETS,
	PVSCSI_A_HOST_RESETS,
	PVSCSI_A_MSG_RING,
	PVSCSI_A_REQ_CALL_THRESHOLD,
	PVSCSI_A_MAX_TARGETS,
	PVSCSI_A_REQ_RING_ENTRIES,
	PVSCSI_A_CMP_RING_ENTRIES,
	PVSCSI_A_IRQ_MODE,
	PVSCSI_A_EXT_STATUS,
	PVSCSI_A_EXT,
	PVSCSI_A_EVENT_IDX,
	PVSCSI_A_QUEUES,
	PVSCSI_A_POLL_QUEUES,
	PVSCSI_A_POLLED,
};

struct pvscsi_attr {
	struct device_attribute dattr;
	enum pvscsi_attr_id id;
};

/* a queue counter, summed over the queues (the maximum for *_max) */
static u64 pvscsi_qsum(struct pvscsi_adapter *a, size_t off, bool max)
{
	u64 v = 0, x;
	u32 i;

	for (i = 0; i < a->nr_queues; i++) {
		x = READ_ONCE(*(u64 *)((u8 *)&a->q[i].stats + off));
		v = max ? max(v, x) : v + x;
	}
	return v;
}

#define PVSCSI_QSUM(a, f) pvscsi_qsum(a, offsetof(struct pvscsi_qstats, f), false)

/*
 * Counters are read without their lock (see struct pvscsi_stats): a
 * snapshot, each value itself never torn on a 64-bit guest.
 */
static u64 pvscsi_attr_value(struct pvscsi_adapter *a, enum pvscsi_attr_id id)
{
	struct pvscsi_stats *st = &a->stats;

	switch (id) {
	case PVSCSI_A_REQUESTS: return PVSCSI_QSUM(a, requests);
	case PVSCSI_A_DOORBELLS: return PVSCSI_QSUM(a, doorbells);
	case PVSCSI_A_KICKS_RW: return PVSCSI_QSUM(a, kicks_rw);
	case PVSCSI_A_KICKS_NON_RW: return PVSCSI_QSUM(a, kicks_non_rw);
	case PVSCSI_A_KICKS_SKIPPED: return PVSCSI_QSUM(a, kicks_skipped);
	case PVSCSI_A_BUSY: return PVSCSI_QSUM(a, busy);
	case PVSCSI_A_INTERRUPTS: return PVSCSI_QSUM(a, interrupts);
	case PVSCSI_A_COMPLETIONS: return PVSCSI_QSUM(a, completions);
	case PVSCSI_A_CMPL_PER_IRQ_MAX:
		return pvscsi_qsum(a, offsetof(struct pvscsi_qstats, cmpl_per_irq_max), true);
	case PVSCSI_A_BOGUS_COMPLETIONS: return PVSCSI_QSUM(a, bogus_completions);
	case PVSCSI_A_QUEUES: return a->nr_queues;
	case PVSCSI_A_POLL_QUEUES: return a->nr_poll;
	case PVSCSI_A_POLLED: return PVSCSI_QSUM(a, polled);
	case PVSCSI_A_MSGS: return READ_ONCE(st->msgs);
	case PVSCSI_A_BOGUS_MSGS: return READ_ONCE(st->bogus_msgs);
	case PVSCSI_A_ABORTS: return atomic64_read(&st->aborts);
	case PVSCSI_A_ABORTS_FAILED: return atomic64_read(&st->aborts_failed);
	case PVSCSI_A_DEVICE_RESETS: return atomic64_read(&st->device_resets);
	case PVSCSI_A_BUS_RESETS: return atomic64_read(&st->bus_resets);
	case PVSCSI_A_HOST_RESETS: return atomic64_read(&st->host_resets);
	case PVSCSI_A_MSG_RING: return a->use_msg;
	case PVSCSI_A_REQ_CALL_THRESHOLD: return a->use_threshold;
	case PVSCSI_A_EVENT_IDX: return a->use_event_idx;
	case PVSCSI_A_MAX_TARGETS: return a->max_targets;
	case PVSCSI_A_REQ_RING_ENTRIES: return a->req_entries;
	case PVSCSI_A_CMP_RING_ENTRIES: return a->cmp_entries;
	default: return 0;
	}
}

static ssize_t pvscsi_attr_show(struct device *dev, struct device_attribute *attr,
				char *buf)
{
	struct pvscsi_attr *pa = container_of(attr, struct pvscsi_attr, dattr);
	struct pvscsi_adapter *a = shost_priv(class_to_shost(dev));
	u32 st = a->ext_status;

	switch (pa->id) {
	case PVSCSI_A_IRQ_MODE:
		return sysfs_emit(buf, "%s\n", pvscsi_irq_names[a->irq_kind]);
	case PVSCSI_A_EXT_STATUS:
		return sysfs_emit(buf, "0x%08x\n", st);
	case PVSCSI_A_EXT:
		if (!ext)
			return sysfs_emit(buf, "disabled\n");
		if (!PVSCSI_EXT_STATUS_VALID(st))
			return sysfs_emit(buf, "absent\n");
		return sysfs_emit(buf, "v%u queues=%u features=%#x\n",
				  PVSCSI_EXT_STATUS_VERSION(st),
				  PVSCSI_EXT_STATUS_QUEUES(st),
				  PVSCSI_EXT_STATUS_FEATURES(st));
	default:
		return sysfs_emit(buf, "%llu\n", pvscsi_attr_value(a, pa->id));
	}
}

#define PVSCSI_ATTR(n, i) \
	{ .dattr = __ATTR(n, 0444, pvscsi_attr_show, NULL), .id = (i) }

static struct pvscsi_attr pvscsi_attr_table[] = {
	PVSCSI_ATTR(requests, PVSCSI_A_REQUESTS),
	PVSCSI_ATTR(doorbells, PVSCSI_A_DOORBELLS),
	PVSCSI_ATTR(kicks_rw, PVSCSI_A_KICKS_RW),
	PVSCSI_ATTR(kicks_non_rw, PVSCSI_A_KICKS_NON_RW),
	PVSCSI_ATTR(kicks_skipped, PVSCSI_A_KICKS_SKIPPED),
	PVSCSI_ATTR(busy, PVSCSI_A_BUSY),
	PVSCSI_ATTR(interrupts, PVSCSI_A_INTERRUPTS),
	PVSCSI_ATTR(completions, PVSCSI_A_COMPLETIONS),
	PVSCSI_ATTR(cmpl_per_irq_max, PVSCSI_A_CMPL_PER_IRQ_MAX),
	PVSCSI_ATTR(bogus_completions, PVSCSI_A_BOGUS_COMPLETIONS),
	PVSCSI_ATTR(msgs, PVSCSI_A_MSGS),
	PVSCSI_ATTR(bogus_msgs, PVSCSI_A_BOGUS_MSGS),
	PVSCSI_ATTR(aborts, PVSCSI_A_ABORTS),
	PVSCSI_ATTR(aborts_failed, PVSCSI_A_ABORTS_FAILED),
	PVSCSI_ATTR(device_resets, PVSCSI_A_DEVICE_RESETS),
	PVSCSI_ATTR(bus_resets, PVSCSI_A_BUS_RESETS),
	PVSCSI_ATTR(host_resets, PVSCSI_A_HOST_RESETS),
	PVSCSI_ATTR(msg_ring, PVSCSI_A_MSG_RING),
	PVSCSI_ATTR(req_call_threshold, PVSCSI_A_REQ_CALL_THRESHOLD),
	PVSCSI_ATTR(max_targets, PVSCSI_A_MAX_TARGETS),
	PVSCSI_ATTR(req_ring_entries, PVSCSI_A_REQ_RING_ENTRIES),
	PVSCSI_ATTR(cmp_ring_entries, PVSCSI_A_CMP_RING_ENTRIES),
	PVSCSI_ATTR(queues, PVSCSI_A_QUEUES),
	PVSCSI_ATTR(poll_queues, PVSCSI_A_POLL_QUEUES),
	PVSCSI_ATTR(polled, PVSCSI_A_POLLED),
	PVSCSI_ATTR(irq_mode, PVSCSI_A_IRQ_MODE),
	PVSCSI_ATTR(ext_status, PVSCSI_A_EXT_STATUS),
	PVSCSI_ATTR(ext, PVSCSI_A_EXT),
	PVSCSI_ATTR(event_idx, PVSCSI_A_EVENT_IDX),
};

/* filled from the table at module init */
static struct attribute *pvscsi_attrs[ARRAY_SIZE(pvscsi_attr_table) + 1];

static const struct attribute_group pvscsi_attr_group = {
	.name = "pvscsi",
	.attrs = pvscsi_attrs,
};

static const struct attribute_group *pvscsi_shost_groups[] = {
	&pvscsi_attr_group,
	NULL,
};

/* not const: 6.1's scsi_host_alloc() takes a mutable template */
static struct scsi_host_template pvscsi_template = {
	.module			= THIS_MODULE,
	.name			= "pvscsi_mq PVSCSI HBA",
	.proc_name		= KBUILD_MODNAME,
	.queuecommand		= pvscsi_queuecommand,
	.commit_rqs		= pvscsi_commit_rqs,
	.map_queues		= pvscsi_map_queues,
	.mq_poll		= pvscsi_mq_poll,
	.change_queue_depth	= scsi_change_queue_depth,
	.eh_abort_handler	= pvscsi_eh_abort,
	.eh_device_reset_handler = pvscsi_eh_device_reset,
	.eh_bus_reset_handler	= pvscsi_eh_bus_reset,
	.eh_host_reset_handler	= pvscsi_eh_host_reset,
	.this_id		= -1,
	/* placeholders; probe sets the real values from the ring size */
	.can_queue		= PVSCSI_REQ_DESCS_PER_PAGE,
	.cmd_per_lun		= 1,
	.sg_tablesize		= PVSCSI_MAX_SG_ENTRIES_PER_SEGMENT,
	.max_sectors		= 1024,
	.cmd_size		= sizeof(struct pvscsi_cmd_priv),
	.shost_groups		= pvscsi_shost_groups,
};

/* --- probe / remove -------------------------------------------------------- */

static void pvscsi_free_sg(struct pvscsi_adapter *a)
{
	u32 i;

	if (!a->sg_chunks)
		return;
	for (i = 0; i < a->nr_sg_chunks; i++)
		pvscsi_dma_free(a, PVSCSI_SG_PER_CHUNK * PVSCSI_PAGE_SIZE,
				a->sg_chunks[i].va, a->sg_chunks[i].dma);
	kfree(a->sg_chunks);
	a->sg_chunks = NULL;
}

static int pvscsi_alloc_sg(struct pvscsi_adapter *a)
{
	u32 i;

	a->nr_sg_chunks = DIV_ROUND_UP(a->req_entries, PVSCSI_SG_PER_CHUNK);
	a->sg_chunks = kcalloc(a->nr_sg_chunks, sizeof(*a->sg_chunks), GFP_KERNEL);
	if (!a->sg_chunks)
		return -ENOMEM;
	for (i = 0; i < a->nr_sg_chunks; i++) {
		/* the injected failure leaves a half-built array to unwind */
		if (i == a->nr_sg_chunks / 2 && pvscsi_inject(a, PVSCSI_FAIL_SG))
			return -ENOMEM;
		a->sg_chunks[i].va =
			pvscsi_dma_alloc(a, PVSCSI_SG_PER_CHUNK * PVSCSI_PAGE_SIZE,
					 &a->sg_chunks[i].dma);
		if (!a->sg_chunks[i].va)
			return -ENOMEM;
	}
	return 0;
}

static void pvscsi_free_rings(struct pvscsi_adapter *a)
{
	u32 i;

	pvscsi_dma_free(a, a->msg_pages * PVSCSI_PAGE_SIZE, a->msg_ring,
			a->msg_ring_dma);
	for (i = 0; i < PVSCSI_EXT_MAX_QUEUES; i++) {
		struct pvscsi_queue *q = &a->q[i];

		pvscsi_dma_free(a, a->cmp_pages * PVSCSI_PAGE_SIZE, q->cmp_ring,
				q->cmp_ring_dma);
		pvscsi_dma_free(a, a->req_pages * PVSCSI_PAGE_SIZE, q->req_ring,
				q->req_ring_dma);
		q->cmp_ring = NULL;
		q->req_ring = NULL;
	}
	pvscsi_dma_free(a, PVSCSI_PAGE_SIZE, a->rings_state, a->rings_state_dma);
	pvscsi_dma_free(a, (size_t)a->req_entries * SCSI_SENSE_BUFFERSIZE,
			a->sense, a->sense_dma);
	a->msg_ring = NULL;
	a->rings_state = NULL;
	a->sense = NULL;
}

/* where queue @q's indices and doorbell are (the rings state page is there) */
static void pvscsi_queue_indices(struct pvscsi_adapter *a, struct pvscsi_queue *q)
{
	struct pvscsi_rings_state *rs = a->rings_state;
	struct pvscsi_ext_queue_state *qs;

	if (!q->index) {
		q->req_prod_idx = &rs->req_prod_idx;
		q->req_cons_idx = &rs->req_cons_idx;
		q->req_call_threshold = &rs->req_call_threshold;
		q->cmp_prod_idx = &rs->cmp_prod_idx;
		q->cmp_cons_idx = &rs->cmp_cons_idx;
		q->cmp_event_idx = (__le32 *)((u8 *)rs + PVSCSI_EXT_CMP_EVENT_OFFSET);
		q->kick_reg = PVSCSI_REG_KICK_RW_IO;
		return;
	}
	qs = (void *)((u8 *)rs + PVSCSI_EXT_QUEUE_STATE_OFFSET(q->index));
	q->req_prod_idx = &qs->req_prod_idx;
	q->req_cons_idx = &qs->req_cons_idx;
	q->req_call_threshold = &qs->req_call_threshold;
	q->cmp_prod_idx = &qs->cmp_prod_idx;
	q->cmp_cons_idx = &qs->cmp_cons_idx;
	q->cmp_event_idx = &qs->cmp_event_idx;
	q->kick_reg = PVSCSI_EXT_REG_KICK(q->index);
}

static int pvscsi_alloc_rings(struct pvscsi_adapter *a)
{
	u32 i;

	if (pvscsi_inject(a, PVSCSI_FAIL_RINGS))
		return -ENOMEM;
	a->rings_state = pvscsi_dma_alloc(a, PVSCSI_PAGE_SIZE, &a->rings_state_dma);
	a->sense = pvscsi_dma_alloc(a, (size_t)a->req_entries * SCSI_SENSE_BUFFERSIZE,
				    &a->sense_dma);
	if (!a->rings_state || !a->sense)
		return -ENOMEM;
	for (i = 0; i < a->nr_queues; i++) {
		struct pvscsi_queue *q = &a->q[i];

		q->req_ring = pvscsi_dma_alloc(a, a->req_pages * PVSCSI_PAGE_SIZE,
					       &q->req_ring_dma);
		q->cmp_ring = pvscsi_dma_alloc(a, a->cmp_pages * PVSCSI_PAGE_SIZE,
					       &q->cmp_ring_dma);
		if (!q->req_ring || !q->cmp_ring)
			return -ENOMEM;
		pvscsi_queue_indices(a, q);
	}
	if (a->msg_pages) {
		a->msg_ring = pvscsi_dma_alloc(a, a->msg_pages * PVSCSI_PAGE_SIZE,
					       &a->msg_ring_dma);
		if (!a->msg_ring)
			return -ENOMEM;
	}
	return 0;
}

/*
 * Interrupt vectors, before the rings: a vector per queue needs MSI-X
 * (PCI_IRQ_AFFINITY spreads them over the CPUs, and blk-mq maps each
 * CPU's requests to the queue whose vector is its own); without as many
 * as the queues, one queue.
 */
static int pvscsi_alloc_vectors(struct pvscsi_adapter *a)
{
	static const unsigned int types[] = {
		PCI_IRQ_MSIX | PCI_IRQ_MSI | PCI_IRQ_INTX,
		PCI_IRQ_MSIX, PCI_IRQ_MSI, PCI_IRQ_INTX,
	};
	struct irq_affinity desc = {};
	struct pci_dev *pdev = a->pdev;
	u32 nr_irq = a->nr_queues - a->nr_poll, i;
	int ret = -ENOSPC;

	if (pvscsi_inject(a, PVSCSI_FAIL_VECTORS))
		return -ENOSPC;
	/* with poll queues, MSI-X even for one vector */
	if (a->nr_queues > 1 && irq_mode <= 1)
		ret = pci_alloc_irq_vectors_affinity(pdev, nr_irq, nr_irq,
						     PCI_IRQ_MSIX | PCI_IRQ_AFFINITY,
						     &desc);
	if (ret < 0) {
		if (a->nr_queues > 1)
			dev_info(&pdev->dev, "no MSI-X vector for each of %u queues: one queue\n",
				 nr_irq);
		a->nr_queues = 1;
		a->nr_poll = 0;
		ret = pci_alloc_irq_vectors(pdev, 1, 1, types[irq_mode]);
		if (ret < 0)
			return ret;
	}
	a->nr_vectors = ret;
	for (i = 0; i < a->nr_queues; i++)
		a->q[i].poll = i >= a->nr_queues - a->nr_poll;
	if (pdev->msix_enabled)
		a->irq_kind = PVSCSI_IRQ_MSIX;
	else if (pdev->msi_enabled)
		a->irq_kind = PVSCSI_IRQ_MSI;
	else
		a->irq_kind = PVSCSI_IRQ_INTX;
	return 0;
}

static void pvscsi_free_irqs(struct pvscsi_adapter *a, u32 n)
{
	while (n--)
		free_irq(a->q[n].irq, &a->q[n]);
}

/* a handler per vector, queue q's on vector q; after the rings */
static int pvscsi_request_irqs(struct pvscsi_adapter *a)
{
	unsigned long flags = a->irq_kind == PVSCSI_IRQ_INTX ? IRQF_SHARED : 0;
	int ret = 0;
	u32 i;

	for (i = 0; i < a->nr_vectors; i++) {
		struct pvscsi_queue *q = &a->q[i];

		q->irq = pci_irq_vector(a->pdev, i);
		if (pvscsi_inject(a, PVSCSI_FAIL_REQUEST_IRQ))
			ret = -EBUSY;
		else
			ret = request_threaded_irq(q->irq, pvscsi_isr, pvscsi_isr_thread,
						   flags, KBUILD_MODNAME, q);
		if (ret) {
			pvscsi_free_irqs(a, i);
			return ret;
		}
	}
	return 0;
}

static void pvscsi_free_irq(struct pvscsi_adapter *a)
{
	pvscsi_free_irqs(a, a->nr_vectors);
	pci_free_irq_vectors(a->pdev);
}

static int pvscsi_check_params(void)
{
	if (!is_power_of_2(ring_pages) || ring_pages > PVSCSI_SETUP_RINGS_MAX_PAGES) {
		pr_err("ring_pages=%u: want a power of two 1..%u\n", ring_pages,
		       PVSCSI_SETUP_RINGS_MAX_PAGES);
		return -EINVAL;
	}
	if (msg_ring_pages && (!is_power_of_2(msg_ring_pages) ||
			       msg_ring_pages > PVSCSI_SETUP_MSG_RING_MAX_PAGES)) {
		pr_err("msg_ring_pages=%u: want 0 or a power of two 1..%u\n",
		       msg_ring_pages, PVSCSI_SETUP_MSG_RING_MAX_PAGES);
		return -EINVAL;
	}
	if (irq_mode > 3) {
		pr_err("irq_mode=%u: want 0..3\n", irq_mode);
		return -EINVAL;
	}
	if (!cmp_budget || cmp_budget > 4096) {
		pr_err("cmp_budget=%u: want 1..4096\n", cmp_budget);
		return -EINVAL;
	}
	return 0;
}

static void pvscsi_stop_msgs(struct pvscsi_adapter *a)
{
	mutex_lock(&a->msg_lock);
	a->msg_stopped = true;
	mutex_unlock(&a->msg_lock);
	cancel_work_sync(&a->msg_work);
}

/*
 * The register window is the first memory BAR large enough for it, not
 * "BAR 0": a device may place an I/O BAR before it; vmw_pvscsi looks
 * for the window the same way.
 */
static int pvscsi_find_bar(struct pci_dev *pdev)
{
	int i;

	for (i = 0; i < PCI_STD_NUM_BARS; i++) {
		if (!(pci_resource_flags(pdev, i) & IORESOURCE_MEM))
			continue;
		if (pci_resource_len(pdev, i) >= PVSCSI_BAR0_SIZE)
			return i;
	}
	return -1;
}

static int pvscsi_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct pvscsi_adapter *a;
	struct Scsi_Host *shost;
	int ret, bar;
	u32 i;

	ret = pci_enable_device(pdev);
	if (ret)
		return ret;
	ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (ret)
		ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(32));
	if (ret)
		goto out_disable;
	bar = pvscsi_find_bar(pdev);
	if (bar < 0) {
		dev_err(&pdev->dev, "no MMIO BAR of at least %u bytes\n",
			PVSCSI_BAR0_SIZE);
		ret = -ENODEV;
		goto out_disable;
	}
	ret = pci_request_regions(pdev, KBUILD_MODNAME);
	if (ret)
		goto out_disable;
	pci_set_master(pdev);

	ret = -ENOMEM;
	if (fail_probe == PVSCSI_FAIL_HOST_ALLOC) {
		dev_info(&pdev->dev, "fault injection: failing probe step %u\n",
			 fail_probe);
		goto out_regions;
	}
	shost = scsi_host_alloc(&pvscsi_template, sizeof(*a));
	if (!shost)
		goto out_regions;
	a = shost_priv(shost);
	a->pdev = pdev;
	a->shost = shost;
	spin_lock_init(&a->cmd_lock);
	for (i = 0; i < PVSCSI_EXT_MAX_QUEUES; i++) {
		a->q[i].a = a;
		a->q[i].index = i;
		spin_lock_init(&a->q[i].submit_lock);
		spin_lock_init(&a->q[i].cmp_lock);
	}
	mutex_init(&a->msg_lock);
	INIT_WORK(&a->msg_work, pvscsi_msg_work);

	if (!pvscsi_inject(a, PVSCSI_FAIL_IOMAP))
		a->mmio = pci_iomap(pdev, bar, PVSCSI_BAR0_SIZE);
	if (!a->mmio)
		goto out_host;
	pvscsi_adapter_reset(a);
	pvscsi_mask_intr(a);
	pvscsi_query_ext(a);
	a->max_targets = pvscsi_query_targets(a);
	a->nr_queues = pvscsi_want_queues(a);

	a->req_pages = ring_pages;
	a->req_entries = a->req_pages * PVSCSI_REQ_DESCS_PER_PAGE;
	/* every request in flight needs a completion slot */
	a->cmp_pages = max_t(u32, 1, a->req_entries / PVSCSI_CMP_DESCS_PER_PAGE);
	a->cmp_entries = a->cmp_pages * PVSCSI_CMP_DESCS_PER_PAGE;
	a->msg_pages = msg_ring_pages;
	a->msg_entries = a->msg_pages * PVSCSI_MSG_DESCS_PER_PAGE;

	shost->can_queue = a->req_entries;
	shost->cmd_per_lun = min_t(u32, max_t(u32, cmd_per_lun, 1), a->req_entries);
	shost->max_id = a->max_targets;
	shost->max_lun = PVSCSI_MAX_LUN;
	shost->max_channel = 0;
	shost->max_cmd_len = PVSCSI_MAX_CDB_LEN;
	shost->unique_id = (pci_domain_nr(pdev->bus) << 16) | pci_dev_id(pdev);

	ret = pvscsi_alloc_vectors(a);
	if (ret) {
		dev_err(&pdev->dev, "no interrupt (irq_mode=%u): %d\n", irq_mode, ret);
		goto out_iomap;
	}
	/* the queues share the tags: a tag's SG page and sense are the same */
	shost->nr_hw_queues = a->nr_queues;
	shost->nr_maps = a->nr_poll ? HCTX_TYPE_POLL + 1 : 1;
	shost->host_tagset = 1;
	ret = pvscsi_alloc_rings(a);
	if (ret)
		goto out_rings;
	ret = pvscsi_alloc_sg(a);
	if (ret)
		goto out_sg;
	pvscsi_build_setup_cmd(a);
	if (pvscsi_inject(a, PVSCSI_FAIL_SETUP))
		ret = -EIO;
	else
		ret = pvscsi_setup_rings(a);
	if (ret) {
		dev_err(&pdev->dev, "the device refused SETUP_RINGS\n");
		goto out_reset;
	}
	ret = pvscsi_request_irqs(a);
	if (ret) {
		dev_err(&pdev->dev, "no interrupt (irq_mode=%u): %d\n", irq_mode, ret);
		goto out_reset;
	}
	pvscsi_unmask_intr(a);

	if (pvscsi_inject(a, PVSCSI_FAIL_ADD_HOST))
		ret = -ENODEV;
	else
		ret = scsi_add_host(shost, &pdev->dev);
	if (ret)
		goto out_irq;
	pci_set_drvdata(pdev, shost);

	dev_info(&pdev->dev,
		 "%u targets, %u requests, %u queues (%u polled), %s, msg ring %s, reqCallThreshold %s, ext %s\n",
		 a->max_targets, a->req_entries, a->nr_queues, a->nr_poll,
		 pvscsi_irq_names[a->irq_kind], a->use_msg ? "on" : "off",
		 a->use_threshold ? "on" : "off",
		 PVSCSI_EXT_STATUS_VALID(a->ext_status) ? "present" : "absent");
	scsi_scan_host(shost);
	return 0;

out_irq:
	pvscsi_mask_intr(a);
	pvscsi_stop_msgs(a);
	pvscsi_free_irqs(a, a->nr_vectors);
	cancel_work_sync(&a->msg_work);
out_reset:
	/* the device must forget the rings before their memory goes */
	pvscsi_adapter_reset(a);
out_sg:
	pvscsi_free_sg(a);
out_rings:
	pvscsi_free_rings(a);
	pci_free_irq_vectors(pdev);
out_iomap:
	pci_iounmap(pdev, a->mmio);
out_host:
	scsi_host_put(shost);
out_regions:
	pci_release_regions(pdev);
out_disable:
	pci_disable_device(pdev);
	dev_err(&pdev->dev, "probe failed: %d\n", ret);
	return ret;
}

static void pvscsi_remove(struct pci_dev *pdev)
{
	struct Scsi_Host *shost = pci_get_drvdata(pdev);
	struct pvscsi_adapter *a = shost_priv(shost);

	pvscsi_stop_msgs(a);
	scsi_remove_host(shost);
	pvscsi_mask_intr(a);
	pvscsi_free_irq(a);
	/* an interrupt may have queued it again before free_irq */
	cancel_work_sync(&a->msg_work);
	pvscsi_adapter_reset(a);
	pvscsi_free_sg(a);
	pvscsi_free_rings(a);
	pci_iounmap(pdev, a->mmio);
	scsi_host_put(shost);
	pci_release_regions(pdev);
	pci_disable_device(pdev);
}

static void pvscsi_shutdown(struct pci_dev *pdev)
{
	struct Scsi_Host *shost = pci_get_drvdata(pdev);
	struct pvscsi_adapter *a;

	if (!shost)
		return;
	a = shost_priv(shost);
	/* no DMA into memory the next kernel (kexec) may reuse */
	pvscsi_mask_intr(a);
	pvscsi_adapter_reset(a);
}

static const struct pci_device_id pvscsi_pci_ids[] = {
	{ PCI_DEVICE(PVSCSI_PCI_VENDOR_ID, PVSCSI_PCI_DEVICE_ID) },
	{ }
};
MODULE_DEVICE_TABLE(pci, pvscsi_pci_ids);

static struct pci_driver pvscsi_pci_driver = {
	.name		= KBUILD_MODNAME,
	.id_table	= pvscsi_pci_ids,
	.probe		= pvscsi_probe,
	.remove		= pvscsi_remove,
	.shutdown	= pvscsi_shutdown,
};

static int __init pvscsi_init(void)
{
	size_t i;
	int ret;

	ret = pvscsi_check_params();
	if (ret)
		return ret;
	for (i = 0; i < ARRAY_SIZE(pvscsi_attr_table); i++)
		pvscsi_attrs[i] = &pvscsi_attr_table[i].dattr.attr;
	pvscsi_debugfs = debugfs_create_dir(KBUILD_MODNAME, NULL);
	debugfs_create_atomic_t("live_dma_allocs", 0444, pvscsi_debugfs,
				&pvscsi_live_dma);
	ret = pci_register_driver(&pvscsi_pci_driver);
	if (ret)
		debugfs_remove_recursive(pvscsi_debugfs);
	return ret;
}

static void __exit pvscsi_exit(void)
{
	pci_unregister_driver(&pvscsi_pci_driver);
	if (atomic_read(&pvscsi_live_dma))
		pr_err("%d coherent DMA allocations leaked\n",
		       atomic_read(&pvscsi_live_dma));
	debugfs_remove_recursive(pvscsi_debugfs);
}

module_init(pvscsi_init);
module_exit(pvscsi_exit);

MODULE_DESCRIPTION("VMware PVSCSI compatible HBA driver (blk-mq, vhost-pvscsi aware)");
MODULE_AUTHOR("vhost-pvscsi project");
MODULE_LICENSE("GPL");
