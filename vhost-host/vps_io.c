// SPDX-License-Identifier: GPL-2.0
/*
 * vhost_pvscsi: the backing side.  A LUN is a file or block device that
 * the VMM opened and handed over: its lifetime (the last reference may go
 * in the worker) and its lookup; and the asynchronous O_DIRECT I/O on it
 * (kiocb + read_iter/write_iter), whose completion puts the request on
 * its queue's done list and wakes that queue's worker, and the wait for
 * that I/O to drain.
 *
 * Layering: the bottom, the I/O interface of vps_io.h; called by the SCSI
 * target (submission, lookup), the rings (references, the drain) and the
 * ioctls; calls nothing above it: a completion only wakes the worker.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/file.h>
#include <linux/slab.h>

#include "vps.h"
#include "vps_io.h"

/* the LUNs whose last reference went in a worker (vps_lun_put_release) */
struct workqueue_struct *vps_free_wq;
/* attached LUNs: a module-wide gauge for the leak checks (debugfs) */
atomic_long_t vps_luns;

/* ---------------------------------------------------------------------- */
/* LUNs                                                                   */
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

/* a target answers selection when it has any LUN (caller: dev->mutex) */
bool vps_target_present(struct vps_dev *dev, u32 target)
{
	u32 l;

	for (l = 0; l < VPS_MAX_LUNS; l++)
		if (dev->luns[target][l])
			return true;
	return false;
}

/* ---------------------------------------------------------------------- */
/* backing I/O                                                            */
/* ---------------------------------------------------------------------- */

static void vps_iocb_done(struct kiocb *iocb, long ret)
{
	struct vps_req *req = container_of(iocb, struct vps_req, iocb);
	struct vps_queue *q = req->q;
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
	llist_add(&req->done_node, &q->done);
	/*
	 * Last touch of dev: a waiter for io_pending == 0 checks it under the
	 * same lock, so it cannot free dev before we drop the lock.  The
	 * wake-up is under it too: vps_owner_gone() marks the workers gone
	 * and takes this lock before it lets them exit without waiting for
	 * the backing I/O, so no completion may be half way into waking one.
	 * The queue's own lock: completions of two queues share none.
	 */
	spin_lock_irqsave(&q->io_wait.lock, flags);
	vps_queue_wake(q);
	if (atomic_dec_and_test(&q->io_pending))
		wake_up_locked(&q->io_wait);
	spin_unlock_irqrestore(&q->io_wait.lock, flags);
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
	atomic_inc(&req->q->io_pending);
	vps_count(dev, s.rw_ios);
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

/*
 * Wait until no backing I/O is in flight, on any queue.  The caller holds
 * vps_dev_lock() and has raised dev->quiesce so that no worker submits
 * anything new; the locks are dropped while waiting so completions can
 * run (and another reset can come in and wait too).
 *
 * A hung LUN (a suspended dm device, a dead NFS server) makes this wait
 * last.  @killable: the caller is the VMM's own thread (a reset), and a
 * fatal signal ends the wait with -EINTR, so that a VMM stuck behind such
 * a LUN can still be killed; the requests stay marked and the release of
 * the file waits for them.  Other signals do not end it: QEMU's vCPU
 * threads take signals all the time, and a reset cannot be half done.
 */
int vps_io_drain(struct vps_dev *dev, bool killable)
{
	int ret = 0;
	u32 i;

	vps_dev_unlock(dev);
	/*
	 * Queue by queue, then once more until one pass finds them all
	 * idle: while the locks are dropped another ioctl (an abort
	 * consuming a ring) may start I/O on a queue already passed.
	 */
	do {
		for (i = 0; i < VPS_MAX_QUEUES && !ret; i++) {
			struct vps_queue *q = &dev->q[i];

			/* -ERESTARTSYS: the VMM dies, never sees it; say EINTR */
			if (killable &&
			    wait_event_killable(q->io_wait, !atomic_read(&q->io_pending)))
				ret = -EINTR;
			else if (!killable)
				wait_event(q->io_wait, !atomic_read(&q->io_pending));
			/*
			 * The completion that brought io_pending to 0 wakes us
			 * under io_wait.lock: taking it here waits until that
			 * completion is done with dev (a release may free dev
			 * next).
			 */
			spin_lock_irq(&q->io_wait.lock);
			spin_unlock_irq(&q->io_wait.lock);
		}
	} while (!ret && vps_io_pending(dev));
	vps_dev_lock(dev);
	return ret;
}
