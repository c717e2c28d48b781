/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The I/O interface, the bottom layer: guest memory (vps_mem.c), LUNs and
 * backing I/O (vps_io.c).  The SCSI target calls down into this and
 * nothing else; the rings and the ioctls use it too.  It calls nothing
 * above it (a completion only wakes the worker).
 */
#ifndef _VPS_IO_H
#define _VPS_IO_H

#include "vps.h"

/* vps_mem.c: guest physical addresses, through dev->mem only */
void __user *vps_gpa_to_user(const struct vps_mem *mem, u64 gpa, u64 len);
int vps_map_range(const struct vps_mem *mem, struct vps_req *req,
		  u64 gpa, u64 len);
int vps_map_sg(const struct vps_mem *mem, struct vps_req *req, u64 sg_gpa);
int vps_copy_to_guest(struct vps_dev *dev, struct vps_req *req,
		      const void *buf, u32 len);
int vps_copy_from_guest(struct vps_dev *dev, struct vps_req *req,
			void *buf, u32 len);
void vps_log_write(struct vps_dev *dev, const void __user *p, u64 len);
bool vps_log_covers(const struct vps_mem *mem, u64 size);

/* vps_io.c: LUN lifetime and lookup */
extern struct workqueue_struct *vps_free_wq;	/* vps_init() sets it up */
extern atomic_long_t vps_luns;
void vps_lun_put(struct vps_lu *lun);
bool vps_target_present(struct vps_dev *dev, u32 target);

/* vps_io.c: backing I/O; a completion goes on dev->done, for the worker */
void vps_submit_io(struct vps_dev *dev, struct vps_req *req,
		   struct iov_iter *iter, loff_t pos, bool fua);
int vps_io_drain(struct vps_dev *dev, bool killable);

#endif /* _VPS_IO_H */
