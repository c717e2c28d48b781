/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vhost_pvscsi internals: the data structures every layer shares, and the
 * worker's wake-up.  The layers, and the headers they export, from the top
 * down; calls go down only:
 *   vps_main.c  control: module, char device, ioctls  (no header)
 *   vps_ring.c  rings, completions, the worker       vps_ring.h
 *   vps_scsi.c  the SCSI target                      vps_scsi.h
 *   vps_io.c    LUNs and the backing I/O             vps_io.h
 *   vps_mem.c   guest memory translation and copies  vps_io.h
 * The one way back up is a backing I/O's completion: it goes on its
 * queue's done list and wakes that queue's worker (vps_queue_wake()),
 * which posts it.
 *
 * Threads and locks.  Each queue (ring pair) has a worker of its own and
 * a mutex of its own, vps_queue.lock, held for each of the worker's
 * rounds: the queues of an adapter share no lock on the data path.  The
 * control path (the ioctls, the owner's exit, release) takes
 * dev->mutex and then every queue's lock (vps_dev_lock()), and while it
 * waits for them no worker starts a round (vps_dev.ctl_waiting).  So:
 *   [Q]  a queue's own: under its lock;
 *   [M]  the adapter's: written under dev->mutex and every queue's lock,
 *        so read under either;
 * and what the workers write to the adapter is either a latch set
 * with WRITE_ONCE (broken) or a per-CPU counter (dev->pstats).  The
 * debugfs file and VPS_GET_STATS read a snapshot with no lock (READ_ONCE),
 * so that reading them never waits for a worker.
 */
#ifndef _VPS_H
#define _VPS_H

#include <linux/types.h>
#include <linux/bits.h>
#include <linux/mutex.h>
#include <linux/llist.h>
#include <linux/kref.h>
#include <linux/wait.h>
#include <linux/hrtimer.h>
#include <linux/workqueue.h>
#include <linux/poll.h>
#include <linux/uio.h>
#include <linux/bvec.h>
#include <linux/fs.h>
#include <linux/sched.h>
#include <linux/percpu.h>
#include <vhost_pvscsi.h>

#include "vps_compat.h"

#define VPS_MAX_MEM_REGIONS	64
/* data transfer cap per request; READ/WRITE beyond it get INVALID FIELD */
#define VPS_MAX_DATA_LEN	(8u << 20)
/* one SG element can span guest memory regions; a little slack for that */
#define VPS_MAX_IOVS		(PVSCSI_MAX_SG_ENTRIES_PER_SEGMENT + 16)
/* descriptors handled per worker round before completions get a turn */
#define VPS_WORK_WEIGHT		256
/* what a discard weighs in it (vps_scsi_extra_weight()): a whole pass */
#define VPS_DISCARD_WEIGHT	VPS_WORK_WEIGHT
/*
 * After re-arming REQCALLTHRESHOLD, look at the request ring once more
 * this much later (a guest without a full barrier can miss the re-arm).
 */
#define VPS_RECHECK_MS		5
/* test knob (debugfs recheck_ms): the stack suite's lost-doorbell stress */
extern u32 vps_recheck_ms;
/* test hook (debugfs stale_completions): completions to post twice */
extern atomic_t vps_stale_left;
/*
 * Busy-polling (module parameter poll_us, 0: off): how long an idle
 * worker watches the request ring before it re-arms the doorbell, as
 * vhost-net's busyloop_timeout.  Capped at 20 ms: where the guest's vCPU
 * shares a host CPU (an overcommitted or nested host) it may be off that
 * CPU for a scheduler slice of milliseconds, and a poll shorter than that
 * rarely sees its next request.
 */
extern unsigned int vps_poll_us;
#define VPS_POLL_US_MAX		20000
/*
 * Interrupt coalescing (module parameter coalesce_us, 0: off): how long
 * a completion's interrupt may wait while other requests are in flight,
 * capped here; and how many completions it may wait for.
 */
extern unsigned int vps_coalesce_us;
/*
 * The workers' scheduling policy (module parameter batch_workers): 0
 * SCHED_NORMAL always, 1 SCHED_BATCH while a queue's requests come in
 * batches (the default), 2 SCHED_BATCH always (vps_worker_policy()).
 * SCHED_BATCH: a wake-up does not preempt the running task, so that a
 * doorbell does not stop the vCPU that rang it.  1: a round that takes
 * two requests or more makes it SCHED_BATCH; VPS_BATCH_SINGLES rounds in
 * a row that take one each make it SCHED_NORMAL again, and after
 * VPS_BATCH_TRY such rounds it tries SCHED_BATCH for one.
 */
extern unsigned int vps_batch_workers;
#define VPS_BATCH_SINGLES	8
#define VPS_BATCH_TRY		64
#define VPS_COALESCE_US_MAX	1000
/*
 * Holding the interrupt while the guest posts (module parameter hold_us,
 * 0: off): the most quiet time that ends a hold, capped here; the window
 * in the guest's mean gaps between requests (hold_gaps, 0: hold_us
 * itself), the least window, the most halvings of hold_us while no gap
 * is known, and the windows within which a gap a hold just missed
 * counts; a hold's longest span, in windows; the completions it lets
 * wait; the most passes that do not try one after holds that saw no
 * request come.
 */
extern unsigned int vps_hold_us;
extern unsigned int vps_hold_gaps;
#define VPS_HOLD_US_MAX		5000
#define VPS_HOLD_GAPS_MAX	64
#define VPS_HOLD_FLOOR_NS	(20 * NSEC_PER_USEC)
#define VPS_HOLD_BLIND_MAX	3
#define VPS_HOLD_MISSED		4
#define VPS_HOLD_SPAN		8
#define VPS_HOLD_MAX		32
#define VPS_HOLD_RETRY		64
#define VPS_COALESCE_MAX	16
#define VPS_SENSE_LEN		18
#define VPS_SCRATCH_SIZE	8192

struct vps_region {
	u64 gpa;
	u64 size;
	u64 uaddr;
};

struct vps_mem {
	u32 nregions;
	struct vps_region r[];
};

/* an attached logical unit; uapi struct vps_lun is its attach request */
struct vps_lu {
	struct kref ref;
	struct file *file;
	u32 target;
	u32 lun;
	u32 flags;		/* VPS_LUN_* */
	u32 block_shift;	/* 9 or 12 */
	u32 max_outstanding;
	atomic_t outstanding;	/* READ/WRITE in flight */
	u64 nblocks;
	bool is_bdev;
	bool can_discard;
	bool write_cache;
	u8 vendor[8];
	u8 product[16];
	u8 serial[20];
	u8 wwn[8];		/* NAA, big endian; zero: derived */
	struct work_struct free_work;	/* the last put in a worker */
};

struct vps_dev;
struct vps_queue;

/* one guest request from descriptor copy to completion */
struct vps_req {
	struct vps_dev *dev;
	struct vps_queue *q;		/* the queue it came on, completes on */
	struct vps_lu *lun;		/* holds a reference while in flight */
	struct llist_node done_node;
	struct list_head node;		/* q->inflight or q->cmp_backlog */
	struct kiocb iocb;
	u64 context;
	u64 data_len;			/* from the descriptor, bounded */
	u64 sense_addr;
	u32 sense_len;
	u32 target;
	u32 lun_id;			/* single-level LUN; U32_MAX: other */
	u32 xfer;			/* bytes moved to/from the guest */
	u16 host_status;		/* BTSTAT_*, set once the result is known */
	u16 scsi_status;
	u16 abort_status;		/* non-zero: report this instead */
	bool write;
	bool active;			/* counted in lun->outstanding */
	long ret;			/* backing result */
	struct vps_bounce *bounce;	/* an unaligned READ/WRITE's pages */
	u8 sense[VPS_SENSE_LEN];
	u32 nr_iovs;
	struct iovec iov[VPS_MAX_IOVS];
};

/*
 * O_DIRECT wants every segment aligned to the logical block; a guest's
 * need not be (OVMF's PvScsiDxe puts its buffer 255 bytes into a page).
 * Such a READ/WRITE goes through pages of our own, copied from the guest
 * before a WRITE and to it after a READ, in the worker.
 */
struct vps_bounce {
	u32 nr;
	struct bio_vec bv[];
};

/* the requests a reset or an abort covers */
struct vps_scope {
	bool all;			/* adapter or bus reset */
	bool by_context;		/* abort: target + context */
	u32 target;
	u32 lun;			/* device reset */
	u64 context;
};

struct vps_poll {
	wait_queue_entry_t wait;
	poll_table table;
	wait_queue_head_t *wqh;
	struct file *file;
	struct vps_queue *q;
};

/*
 * One request/completion ring pair: queue 0 is the one SETUP_RINGS sets
 * up, queues 1.. those of the multi-queue extension (VPS_SETUP_QUEUE).
 * Everything here is [Q] (@lock) unless said otherwise.
 */
struct vps_queue {
	struct vps_dev *dev;
	u32 index;
	/* its worker's rounds; the control path holds it too (vps_dev_lock) */
	struct mutex lock;
	/*
	 * [M] started with the queue (queue 0: with the owner), stopped at
	 * release; read by vps_queue_wake() from any context
	 */
	struct vps_worker worker;
	/*
	 * the worker's thread id, for whoever pins it (debugfs shows it: its
	 * comm is cut short of the queue's number); 0 while it has none.
	 * Written by vps_worker_create() (kthread) or by the worker's first
	 * step (vhost_task), cleared by vps_worker_destroy(); read unlocked
	 */
	pid_t worker_tid;
	void *scratch;				/* [M] emulation buffer */
	/*
	 * its worker's own (vps_worker_policy(), between rounds): SCHED_BATCH
	 * is set, or tried; requests the last round took; rounds in a row
	 * that took one
	 */
	bool batch;
	bool batch_try;
	u32 took;
	u32 singles;
	/*
	 * [Q] holds (vps_hold_wanted()): the last one saw requests come;
	 * doorbell passes before the next try (read unlocked by debugfs).
	 * Both, and hold_ceiling, start again with new rings.
	 */
	bool hold_fruitful;
	u32 hold_skip;
	u32 hold_misses;		/* [Q] holds in a row that saw none */
	/*
	 * [Q] the running mean of the guest's gaps between requests, seen
	 * while holding or just missed (vps_hold_gap()), in ns (0: none seen
	 * yet; read unlocked by debugfs); until one is, the window is
	 * hold_us halved hold_blind times, once per hold that saw nothing
	 */
	u64 hold_gap_ns;
	u32 hold_blind;
	/*
	 * [Q] local_clock() of the last request a hold saw (or its start)
	 * when it ended with nothing held back: the guest was not waiting
	 * for us, so the time to its next request is one of its gaps, one a
	 * hold's window missed (0: none to measure)
	 */
	u64 hold_since;
	/*
	 * [Q] the most requests the guest had out in the last hold that saw
	 * requests come (0: none yet); read unlocked by debugfs
	 */
	u32 hold_ceiling;
	/* the worker's wake-up reasons; lock-free producers */
	unsigned long events;
#define VPS_EV_KICK	0			/* the doorbell */
#define VPS_EV_CALL	1			/* a held interrupt is due */
	struct llist_head done;			/* backing I/O completed */
	atomic_t io_pending;			/* submitted, not yet done */
	wait_queue_head_t io_wait;		/* io_pending reaching 0 */
	/* consumed and not yet completed (one on cmp_backlog is there) */
	struct list_head inflight;
	/*
	 * [Q] completions wait for ring room: look again soon.  Set when one
	 * joins the backlog (vps_finish()), recomputed at each round's end;
	 * read unlocked.
	 */
	bool backlog_wait;
	/* test hook (debugfs stale_completions): a context to post again */
	bool stale_armed;
	u64 stale_ctx;
	bool ok;				/* rings mapped */
	u32 req_entries_log2;
	u32 cmp_entries_log2;
	u32 req_cons;				/* our shadow of reqConsIdx */
	u32 cmp_prod;				/* our shadow of cmpProdIdx */
	/* the indices shared with the guest, in the rings state page */
	__le32 __user *req_prod_idx;
	__le32 __user *req_cons_idx;
	__le32 __user *req_num_log2;
	__le32 __user *req_call_threshold;
	__le32 __user *cmp_prod_idx;
	__le32 __user *cmp_cons_idx;
	__le32 __user *cmp_num_log2;
	__le32 __user *cmp_event_idx;
	u32 nreq_pages;				/* as the guest gave them */
	u32 ncmp_pages;
	__le64 req_ppns[PVSCSI_SETUP_RINGS_MAX_PAGES];	/* to retranslate */
	__le64 cmp_ppns[PVSCSI_SETUP_RINGS_MAX_PAGES];
	void __user *req_pages[PVSCSI_SETUP_RINGS_MAX_PAGES];
	void __user *cmp_pages[PVSCSI_SETUP_RINGS_MAX_PAGES];
	/* re-armed: look once more at recheck_ns; read unlocked when idle */
	bool recheck;
	u64 recheck_ns;
	bool need_call;				/* posted since the last call */
	bool cmp_stall;				/* stopped: no completion room */
	/*
	 * coalescing: the interrupt is held (coalesce_timer sets this
	 * queue's VPS_EV_CALL bit when it is due); call_cmp is cmp_prod at
	 * the last one
	 */
	bool coalesce_armed;
	u32 call_cmp;
	struct hrtimer coalesce_timer;
	/* cmp_prod when the last interrupt was decided on (the event index) */
	u32 event_old;
	u32 nr_inflight;			/* inflight and cmp_backlog */
	struct list_head cmp_backlog;		/* waiting for ring room */
	struct vps_poll kick;
	/*
	 * The doorbell's own threshold raise (vps_kick_wakeup()): the ring's
	 * reqCallThreshold field and size, published by the worker
	 * (smp_store_release) while it runs the ring with the threshold on;
	 * cleared by vps_dev_lock(), which waits for a wake-up that read it,
	 * so nothing is written there once the control path may move or drop
	 * the rings.
	 */
	__le32 __user *kick_thr;
	u32 kick_thr_entries;
	struct eventfd_ctx *call;
	u64 kicks;				/* per queue, for debugfs */
	u64 requests;
	u64 calls;
};

/*
 * Counters the workers of several queues bump: per CPU, summed when read
 * (VPS_GET_STATS, debugfs).  Only u64s.
 */
struct vps_pcpu_stats {
	struct vps_stats s;		/* in_flight, pinned_pages: unused */
	u64 unkicked;			/* requests only a recheck found */
	u64 polled;			/* requests a busy-poll found */
	u64 poll_idle;			/* busy-polls that timed out */
	u64 poll_yield;			/* ... that gave the CPU up */
	u64 bounced;			/* READ/WRITE through bounce pages */
	u64 batch_on;			/* workers made SCHED_BATCH */
	u64 batch_off;			/* ... SCHED_NORMAL again */
	u64 policy_failed;		/* ... changes that failed */
	u64 doorbells;			/* doorbell eventfd signals */
	u64 kick_raised;		/* ... that raised the threshold */
	u64 coalesced;			/* interrupts held back */
	u64 stale_posted;		/* the stale_completions hook's */
	u64 cancel_busy;		/* discards an abort/reset answered BUSY */
	u64 req_nomem;			/* descriptors left for want of memory */
	u64 held;			/* interrupts held while the guest posts */
	u64 held_got;			/* ... requests that came meanwhile */
	u64 hold_wasted;		/* ... holds that saw none come */
	u64 held_full;			/* ... signalled at the guest's ceiling */
	u64 passes_took;		/* doorbell passes that took requests */
	u64 unheld_waiting;		/* ... held not: after holds that saw none */
	u64 unheld_one;			/* ... held not: took one request */
	u64 calls_done;			/* interrupts of rounds with no pass */
};

static inline void vps_count_off(struct vps_dev *dev, size_t off, u64 n);

/* vps_count(dev, s.requests): one more, on this CPU */
#define vps_count_add(dev, f, n) \
	vps_count_off(dev, offsetof(struct vps_pcpu_stats, f), n)
#define vps_count(dev, f)	vps_count_add(dev, f, 1)

struct vps_dev {
	/* the control path: with every queue's lock, see the top */
	struct mutex mutex;
	/*
	 * Control-path threads in vps_dev_lock() or holding it, atomic: a
	 * worker starts no round and ends its busy-poll while it is not 0,
	 * so an ioctl waits for the round in progress, not for a whole
	 * poll_us or several rounds (a mutex is not fair: the worker that
	 * let go of its queue's lock took it again before the woken ioctl
	 * ran; 40 ms with poll_us 20000).  ctl_wq: the workers, woken at 0.
	 */
	atomic_t ctl_waiting;
	wait_queue_head_t ctl_wq;
	/*
	 * [M] The owner's mm, mmgrab only: its address space (the guest's
	 * RAM) goes when the owner's process does, not at our last close,
	 * which another process holding the fd may put off indefinitely.
	 */
	struct mm_struct *mm;
	struct task_struct *owner;		/* [M] */
	/*
	 * The owner's process has exited: everything that reached into its
	 * memory is gone and every ioctl but the stats is refused.  Written
	 * once, under [M] and then each queue's io_wait.lock in turn; read
	 * by vps_queue_wake(), under io_wait.lock from a backing I/O's
	 * completion.
	 */
	bool owner_gone;
	struct vps_mem *mem;			/* [M] */

	/* ring state, all [M] */
	bool rings_ok;				/* queue 0 set up */
	/*
	 * guest error: stop until reset.  Cleared under [M]; set by any
	 * queue's worker too (WRITE_ONCE), read with READ_ONCE there.
	 */
	bool broken;
	/*
	 * The resets (and the teardowns) waiting for the backing I/O, which
	 * drop @mutex meanwhile: while any does, consume nothing.  A count,
	 * so that the first to finish does not lift another one's.
	 */
	unsigned int quiesce;
	/* VPS_STOP: consume nothing; [M], read unlocked by the idle worker */
	bool stopped;
	bool req_threshold;			/* REQCALLTHRESHOLD enabled */
	/* [M] VPS_FEAT_* the VMM turned on for these rings */
	u32 features;
	struct pvscsi_rings_state __user *rs;
	u64 rs_ppn;				/* SETUP_RINGS's, to retranslate */
	/* [M] queues 0 .. nr_queues - 1 are set up (0: no rings) */
	u32 nr_queues;
	struct vps_queue q[VPS_MAX_QUEUES];
	bool msg_ok;
	u32 msg_entries_log2;
	u32 msg_prod;
	void __user *msg_pages[PVSCSI_SETUP_MSG_RING_MAX_PAGES];
	struct pvscsi_cmd_setup_msg_ring msg_cfg;

	/*
	 * [M] While a reset or an abort consumes the request ring itself:
	 * the descriptors it cancels (completed at once, never executed).
	 */
	struct {
		bool on;
		u16 status;			/* BTSTAT_BUSRESET / _ABORTQUEUE */
		u32 hits;
		struct vps_scope scope;
	} cancel;

	struct eventfd_ctx *call_msg;		/* [M] */

	struct vps_lu *luns[VPS_MAX_TARGETS][VPS_MAX_LUNS];	/* [M] */

	/* [M] the dirty log (VPS_SET_LOG): off unless @on */
	struct {
		bool on;
		u64 base;			/* in the owner's mm */
		u64 size;			/* bytes */
	} log;

	struct dentry *debugfs;
	struct work_struct release_work;	/* a release behind a hung LUN */
	struct vps_pcpu_stats __percpu *pstats;
};

/*
 * Wake @q's worker: from its kick eventfd (atomic context), a backing
 * I/O's completion (any context), its coalescing timer and the ioctls
 * that leave it work.
 */
static inline void vps_queue_wake(struct vps_queue *q)
{
	typeof(q->worker.t) t = READ_ONCE(q->worker.t);

	/*
	 * A killed vhost_task exits: vps_owner_gone() stops every source of
	 * wake-ups (kick, I/O completions, timers, ioctls) before it returns
	 * to let it go; completions and timers call this under the queue's
	 * io_wait.lock for that.  A 6.1 kthread has nothing to do once the
	 * owner is gone either, until release stops it.
	 */
	if (t && !READ_ONCE(q->dev->owner_gone))
		vps_worker_t_wake(t);
}

static inline void vps_count_off(struct vps_dev *dev, size_t off, u64 n)
{
	this_cpu_add(*(u64 __percpu *)((u8 __percpu *)dev->pstats + off), n);
}

void vps_kick_thr_off(struct vps_dev *dev);

/* the fail_once test hook (vps_main.c): true once after "what" was written */
#define VPS_FAIL_DETACH		0
#define VPS_FAIL_RESET_DEVICE	1
#define VPS_FAIL_SETUP_RINGS	2
#define VPS_FAIL_SET_OWNER	3
#define VPS_FAIL_WORKER		4
#define VPS_FAIL_BACKING_NOMEM	5
#define VPS_FAIL_REQ_NOMEM	6	/* for VPS_REQ_NOMEM_MS, not once */
#define VPS_FAIL_SETATTR	7
/* how long the hook "req_nomem" fails vps_req_alloc() */
#define VPS_REQ_NOMEM_MS	100
bool vps_fail_now(int what);
bool vps_fail_req_nomem(void);

/*
 * the control path's lock: dev->mutex, then every queue's; and the
 * doorbells stop writing to the rings state page until a worker's next
 * round
 */
static inline void vps_dev_lock(struct vps_dev *dev)
{
	u32 i;

	atomic_inc(&dev->ctl_waiting);
	mutex_lock(&dev->mutex);
	for (i = 0; i < VPS_MAX_QUEUES; i++)
		mutex_lock_nest_lock(&dev->q[i].lock, &dev->mutex);
	vps_kick_thr_off(dev);
}

static inline void vps_dev_unlock(struct vps_dev *dev)
{
	u32 i = VPS_MAX_QUEUES;

	while (i--)
		mutex_unlock(&dev->q[i].lock);
	/* before dev->mutex goes: the next holder may be a release */
	if (atomic_dec_and_test(&dev->ctl_waiting))
		wake_up_all(&dev->ctl_wq);
	mutex_unlock(&dev->mutex);
}

/* a worker's round waits while the control path wants the adapter */
static inline void vps_ctl_wait(struct vps_dev *dev)
{
	wait_event(dev->ctl_wq, !atomic_read(&dev->ctl_waiting));
}

static inline bool vps_ctl_wants(struct vps_dev *dev)
{
	return atomic_read(&dev->ctl_waiting);
}

/* requests of every queue consumed and not yet completed ([M]) */
static inline u32 vps_nr_inflight(struct vps_dev *dev)
{
	u32 i, n = 0;

	for (i = 0; i < VPS_MAX_QUEUES; i++)
		n += READ_ONCE(dev->q[i].nr_inflight);
	return n;
}

static inline int vps_io_pending(struct vps_dev *dev)
{
	int i, n = 0;

	for (i = 0; i < VPS_MAX_QUEUES; i++)
		n += atomic_read(&dev->q[i].io_pending);
	return n;
}

#endif /* _VPS_H */
