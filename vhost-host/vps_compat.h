/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The few kernel API differences between Debian's 6.1 and 6.12 that the
 * host module meets, each keyed by a feature probe in Kbuild rather than by
 * a version number.
 */
#ifndef _VPS_COMPAT_H
#define _VPS_COMPAT_H

#include <linux/eventfd.h>
#include <linux/sched.h>

/* 6.12 moved asm/unaligned.h to linux/unaligned.h */
#ifdef VPS_HAVE_LINUX_UNALIGNED_H
#include <linux/unaligned.h>
#else
#include <asm/unaligned.h>
#endif

/* 6.8 dropped eventfd_signal()'s count argument */
static inline void vps_eventfd_signal(struct eventfd_ctx *ctx)
{
#ifdef VPS_HAVE_EVENTFD_SIGNAL_NOARG
	eventfd_signal(ctx);
#else
	eventfd_signal(ctx, 1);
#endif
}

/*
 * The worker: a vhost_task (a thread of the owner process) where the
 * kernel exports it (6.4+), a kthread that adopts the owner's mm otherwise.
 */
#ifdef VPS_HAVE_VHOST_TASK
#include <linux/sched/vhost_task.h>
struct vps_worker {
	struct vhost_task *t;
};

static inline void vps_worker_t_wake(struct vhost_task *t)
{
	vhost_task_wake(t);
}

static inline void vps_worker_t_stop(struct vhost_task *t)
{
	vhost_task_stop(t);
}
#else
#include <linux/kthread.h>
struct vps_worker {
	struct task_struct *t;
};

static inline void vps_worker_t_wake(struct task_struct *t)
{
	wake_up_process(t);
}

static inline void vps_worker_t_stop(struct task_struct *t)
{
	kthread_stop(t);
}
#endif

#endif /* _VPS_COMPAT_H */
