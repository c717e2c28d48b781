/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Rings, completions and the workers (vps_ring.c): called by the control
 * plane (vps_main.c) under vps_dev_lock() (release: once the workers
 * stopped);
 * calls down into the SCSI target (vps_scsi.h) and the I/O interface
 * (vps_io.h).
 */
#ifndef _VPS_RING_H
#define _VPS_RING_H

#include "vps.h"

extern struct kmem_cache *vps_req_cache;	/* vps_init() sets it up */
extern atomic_long_t vps_inflight_reqs;

/* ring setup: the pages the guest gave, through dev->mem */
bool vps_pages_ok(u32 n, u32 max);
int vps_map_rings(struct vps_dev *dev);
int vps_map_queue(struct vps_dev *dev, struct vps_queue *q);
int vps_map_msg_ring(struct vps_dev *dev);
void vps_drop_rings(struct vps_dev *dev);
void vps_drop_queues(struct vps_dev *dev, u32 from);
int vps_rs_get(struct vps_dev *dev, __le32 __user *field, u32 *val);
int vps_rs_put(struct vps_dev *dev, __le32 __user *field, u32 val);

/* completion */
void vps_req_free(struct vps_dev *dev, struct vps_req *req);
void vps_call(struct vps_queue *q);
void vps_call_all(struct vps_dev *dev);
void vps_queues_init(struct vps_dev *dev);
void vps_coalesce_cancel(struct vps_dev *dev);
void vps_drain_backlog(struct vps_dev *dev);
bool vps_backlog_any(struct vps_dev *dev);
void vps_process_done(struct vps_dev *dev);

/* message ring */
void vps_post_msg(struct vps_dev *dev, u32 type, u32 target, u32 lun);

/* a worker per queue (stopped without dev->mutex: it takes it), kicks */
int vps_worker_start(struct vps_queue *q);
void vps_worker_stop(struct vps_dev *dev);
void vps_kick_worker(struct vps_queue *q);
void vps_kick_all(struct vps_dev *dev);
int vps_kick_start(struct vps_queue *q, int fd);
void vps_kick_stop(struct vps_queue *q);
void vps_kick_stop_all(struct vps_dev *dev);

/* resets, aborts and teardown: waiting for the backing I/O */
void vps_wait_io(struct vps_dev *dev);
int vps_quiesce_wait(struct vps_dev *dev);
u32 vps_mark_aborted(struct vps_dev *dev, u16 status,
		     const struct vps_scope *s);
u32 vps_consume_cancelling(struct vps_dev *dev, u16 status,
			   const struct vps_scope *s);
void vps_put_owner_refs(struct vps_dev *dev);

#endif /* _VPS_RING_H */
