/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The SCSI target (vps_scsi.c): called by the rings (vps_ring.c) and by
 * LUN attach (vps_main.c); calls down only into the I/O interface
 * (vps_io.h), never back into the rings.
 */
#ifndef _VPS_SCSI_H
#define _VPS_SCSI_H

#include "vps.h"

/* what vps_scsi_execute() did with a request */
enum vps_exec {
	/* answered: the result is in the request, the caller completes it */
	VPS_EXEC_DONE,
	/*
	 * submitted to the backing I/O: it comes back on dev->done, for
	 * vps_scsi_complete_io() and then the completion ring
	 */
	VPS_EXEC_QUEUED,
};

enum vps_exec vps_scsi_execute(struct vps_dev *dev, struct vps_req *req,
			       const struct pvscsi_req_desc *d);
void vps_scsi_complete_io(struct vps_dev *dev, struct vps_req *req);
void vps_bounce_free(struct vps_bounce *b);
u32 vps_scsi_extra_weight(const u8 *cdb);
int vps_lun_probe(struct vps_lu *lun, u32 block_size);

#endif /* _VPS_SCSI_H */
