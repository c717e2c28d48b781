// SPDX-License-Identifier: GPL-2.0
/*
 * vhost_pvscsi: the SCSI target behind the rings.  READ/WRITE go to the
 * LUN's file as asynchronous O_DIRECT I/O (vps_submit_io); everything else
 * is answered here, in the worker, from what the backing file tells us.
 * Errors are answered as a disk would: CHECK CONDITION with fixed-format
 * sense, truncated by the rings to the guest's senseLen.
 *
 * Layering: called by the rings (vps_ring.c) through vps_scsi.h; calls
 * down only into the I/O interface of vps_io.h (guest memory copies, LUN
 * lookup, backing I/O), never back up: vps_scsi_execute() says whether it
 * answered the command, which the rings then complete, or queued its I/O.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/blkdev.h>
#include <linux/pagemap.h>
#include <linux/falloc.h>
#include <linux/highmem.h>
#include <scsi/scsi_proto.h>

#include "vps.h"
#include "vps_io.h"
#include "vps_scsi.h"

#define VPS_MAX_UNMAP_DESC	256
/*
 * The blocks one UNMAP or WRITE SAME may discard, all descriptors
 * together (VPD B0 says so; Linux splits its discards to fit): a discard
 * runs synchronously in the worker, under the adapter's mutex, so this
 * and VPS_DISCARD_WEIGHT bound how long an abort or a reset waits.
 */
#define VPS_MAX_DISCARD_BYTES	(64ULL << 20)

/* sense keys and additional sense codes used here */
#define SK_NO_SENSE		0x0
#define SK_MEDIUM_ERROR		0x3
#define SK_HARDWARE_ERROR	0x4
#define SK_ILLEGAL_REQUEST	0x5
#define SK_DATA_PROTECT		0x7
#define ASC_WRITE_ERROR		0x0c
#define ASC_READ_ERROR		0x11
#define ASC_PARAM_LIST_LENGTH	0x1a
#define ASC_INVALID_OPCODE	0x20
#define ASC_LBA_OUT_OF_RANGE	0x21
#define ASC_INVALID_FIELD_CDB	0x24
#define ASC_LUN_NOT_SUPPORTED	0x25
#define ASC_INVALID_FIELD_PARAM	0x26
#define ASC_WRITE_PROTECTED	0x27
#define ASC_SAVING_NOT_SUPP	0x39
#define ASC_INTERNAL_FAILURE	0x44

static void vps_set_sense(struct vps_req *req, u8 key, u8 asc, u8 ascq)
{
	memset(req->sense, 0, sizeof(req->sense));
	req->sense[0] = 0x70;		/* current error, fixed format */
	req->sense[2] = key;
	req->sense[7] = sizeof(req->sense) - 8;
	req->sense[12] = asc;
	req->sense[13] = ascq;
	req->host_status = BTSTAT_SUCCESS;
	req->scsi_status = SAM_STAT_CHECK_CONDITION;
	req->xfer = 0;
}

/*
 * The answers of a command run here at once: each sets the request's
 * result; vps_scsi_execute() then returns VPS_EXEC_DONE.
 */
static void vps_check(struct vps_dev *dev, struct vps_req *req, u8 key,
		      u8 asc, u8 ascq)
{
	vps_set_sense(req, key, asc, ascq);
}

static void vps_invalid_field(struct vps_dev *dev, struct vps_req *req)
{
	vps_check(dev, req, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_CDB, 0);
}

static void vps_good(struct vps_dev *dev, struct vps_req *req)
{
	req->host_status = BTSTAT_SUCCESS;
	req->scsi_status = SAM_STAT_GOOD;
}

/* data-in for an emulated command: at most alloc_len and the buffer */
static void vps_data_in(struct vps_dev *dev, struct vps_req *req,
			const void *buf, u32 len, u32 alloc_len)
{
	int n;

	len = min_t(u64, min(len, alloc_len), req->data_len);
	n = vps_copy_to_guest(dev, req, buf, len);
	if (n < 0) {
		req->host_status = BTSTAT_INVPARAM;
		return;
	}
	req->xfer = n;
	vps_good(dev, req);
}

/* ---------------------------------------------------------------------- */
/* LUN geometry                                                           */
/* ---------------------------------------------------------------------- */

static u64 vps_lun_bytes(struct vps_lu *lun)
{
	struct inode *inode = file_inode(lun->file);

	if (lun->is_bdev)
		return bdev_nr_bytes(I_BDEV(lun->file->f_mapping->host));
	return i_size_read(inode);
}

/*
 * Read-only for the guest: attached so, or a block device made read-only
 * on the host since (BLKROSET, blockdev --setro), which the block layer
 * enforces for writes but not for discards we issue ourselves.
 */
static bool vps_lun_ro(struct vps_lu *lun)
{
	return (lun->flags & VPS_LUN_READ_ONLY) ||
	       (lun->is_bdev && bdev_read_only(I_BDEV(lun->file->f_mapping->host)));
}

int vps_lun_probe(struct vps_lu *lun, u32 block_size)
{
	u32 lbs = 512;

	lun->is_bdev = S_ISBLK(file_inode(lun->file)->i_mode);
	if (lun->is_bdev) {
		struct block_device *bdev = I_BDEV(lun->file->f_mapping->host);

		lbs = bdev_logical_block_size(bdev);
		lun->can_discard = bdev_max_discard_sectors(bdev) > 0;
		lun->write_cache = bdev_write_cache(bdev);
	} else {
		lun->can_discard = !!lun->file->f_op->fallocate;
		lun->write_cache = true;
	}
	if (!block_size)
		block_size = max(lbs, 512u);
	/* the guest's block must be a whole number of the backing's */
	if (block_size < lbs)
		return -EINVAL;
	lun->block_shift = ilog2(block_size);
	lun->nblocks = vps_lun_bytes(lun) >> lun->block_shift;
	if (!lun->nblocks)
		return -EINVAL;
	if (!lun->vendor[0])
		memcpy(lun->vendor, "VPSCSI  ", 8);
	if (!lun->product[0])
		memcpy(lun->product, "vhost-pvscsi    ", 16);
	if (!lun->serial[0])
		snprintf(lun->serial, sizeof(lun->serial), "VPS%02x%02x%08lx",
			 lun->target, lun->lun,
			 (unsigned long)(file_inode(lun->file)->i_ino & 0xffffffff));
	return 0;
}

/* ---------------------------------------------------------------------- */
/* READ / WRITE                                                           */
/* ---------------------------------------------------------------------- */

static bool vps_iov_aligned(const struct vps_req *req, u32 mask)
{
	u32 i;

	for (i = 0; i < req->nr_iovs; i++)
		if (((uintptr_t)req->iov[i].iov_base | req->iov[i].iov_len) & mask)
			return false;
	return true;
}

void vps_bounce_free(struct vps_bounce *b)
{
	u32 i;

	if (!b)
		return;
	for (i = 0; i < b->nr; i++)
		__free_page(b->bv[i].bv_page);
	kvfree(b);
}

/* pages for @bytes (a multiple of 512, at most VPS_MAX_DATA_LEN) */
static struct vps_bounce *vps_bounce_alloc(u64 bytes)
{
	u32 n = DIV_ROUND_UP(bytes, PAGE_SIZE);
	struct vps_bounce *b;
	struct page *pg;

	b = kvmalloc(struct_size(b, bv, n), GFP_KERNEL_ACCOUNT);
	if (!b)
		return NULL;
	/* nr counts the pages held, for vps_bounce_free() on the way out */
	for (b->nr = 0; b->nr < n; b->nr++) {
		pg = alloc_page(GFP_KERNEL_ACCOUNT);
		if (!pg) {
			vps_bounce_free(b);
			return NULL;
		}
		bvec_set_page(&b->bv[b->nr], pg,
			      min_t(u64, PAGE_SIZE, bytes - (u64)b->nr * PAGE_SIZE), 0);
	}
	return b;
}

/* guest segments -> bounce pages, or back; false: a guest page faulted */
static bool vps_bounce_copy(struct vps_bounce *b, struct iov_iter *guest,
			    bool to_guest)
{
	u32 i;
	size_t n;

	for (i = 0; i < b->nr; i++) {
		if (to_guest)
			n = copy_page_to_iter(b->bv[i].bv_page, 0, b->bv[i].bv_len, guest);
		else
			n = copy_page_from_iter(b->bv[i].bv_page, 0, b->bv[i].bv_len, guest);
		if (n != b->bv[i].bv_len)
			return false;
	}
	return true;
}

static enum vps_exec vps_rw(struct vps_dev *dev, struct vps_req *req,
			    struct vps_lu *lun, const u8 *cdb)
{
	struct vps_bounce *b = NULL;
	u64 lba, bytes;
	u32 nblk;
	bool fua = false;
	struct iov_iter iter;

	switch (cdb[0]) {
	case READ_6:
	case WRITE_6:
		lba = get_unaligned_be24(&cdb[1]) & 0x1fffff;
		nblk = cdb[4] ?: 256;
		break;
	case READ_10:
	case WRITE_10:
		lba = get_unaligned_be32(&cdb[2]);
		nblk = get_unaligned_be16(&cdb[7]);
		fua = cdb[1] & 0x08;
		break;
	case READ_12:
	case WRITE_12:
		lba = get_unaligned_be32(&cdb[2]);
		nblk = get_unaligned_be32(&cdb[6]);
		fua = cdb[1] & 0x08;
		break;
	default: /* READ_16, WRITE_16 */
		lba = get_unaligned_be64(&cdb[2]);
		nblk = get_unaligned_be32(&cdb[10]);
		fua = cdb[1] & 0x08;
		break;
	}
	req->write = cdb[0] == WRITE_6 || cdb[0] == WRITE_10 ||
		     cdb[0] == WRITE_12 || cdb[0] == WRITE_16;

	if (lba > lun->nblocks || nblk > lun->nblocks - lba) {
		vps_check(dev, req, SK_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE, 0);
		return VPS_EXEC_DONE;
	}
	if (req->write && vps_lun_ro(lun)) {
		vps_check(dev, req, SK_DATA_PROTECT, ASC_WRITE_PROTECTED, 0);
		return VPS_EXEC_DONE;
	}
	if (!nblk) {
		vps_good(dev, req);
		return VPS_EXEC_DONE;
	}
	bytes = (u64)nblk << lun->block_shift;
	if (bytes > VPS_MAX_DATA_LEN) {
		vps_invalid_field(dev, req);
		return VPS_EXEC_DONE;
	}
	if (req->data_len < bytes) {
		/* the guest's buffer cannot hold the transfer */
		req->host_status = BTSTAT_DATARUN;
		return VPS_EXEC_DONE;
	}
	if (atomic_read(&lun->outstanding) >= lun->max_outstanding) {
		req->host_status = BTSTAT_SUCCESS;
		req->scsi_status = SAM_STAT_TASK_SET_FULL;
		return VPS_EXEC_DONE;
	}
	iov_iter_init(&iter, req->write ? ITER_SOURCE : ITER_DEST, req->iov,
		      req->nr_iovs, req->data_len);
	iov_iter_truncate(&iter, bytes);
	/* O_DIRECT needs block-aligned segments: bounce the others */
	if (!vps_iov_aligned(req, (1u << lun->block_shift) - 1) &&
	    !vps_iov_aligned(req, 511)) {
		b = vps_bounce_alloc(bytes);
		if (!b) {
			/* the guest retries, as for a busy LUN */
			req->host_status = BTSTAT_SUCCESS;
			req->scsi_status = SAM_STAT_TASK_SET_FULL;
			return VPS_EXEC_DONE;
		}
		if (req->write && !vps_bounce_copy(b, &iter, false)) {
			vps_bounce_free(b);
			req->host_status = BTSTAT_INVPARAM;
			vps_count(dev, s.errors_guest);
			return VPS_EXEC_DONE;
		}
		req->bounce = b;
		iov_iter_bvec(&iter, req->write ? ITER_SOURCE : ITER_DEST, b->bv,
			      b->nr, bytes);
		vps_count(dev, bounced);
	}
	atomic_inc(&lun->outstanding);
	req->active = true;
	kref_get(&lun->ref);
	req->lun = lun;
	req->xfer = bytes;
	vps_submit_io(dev, req, &iter, lba << lun->block_shift, fua);
	return VPS_EXEC_QUEUED;
}

/* turn the backing's answer into SCSI status (worker, after the I/O) */
void vps_scsi_complete_io(struct vps_dev *dev, struct vps_req *req)
{
	long ret = vps_fail_now(VPS_FAIL_BACKING_NOMEM) ? -ENOMEM : req->ret;
	struct iov_iter iter;

	/*
	 * A bounced READ's data goes to the guest now: only from the
	 * owner's mm (the worker, or the owner's own ioctl); a release in
	 * another context has nobody to deliver it to.
	 */
	if (ret == req->xfer && req->bounce && !req->write) {
		iov_iter_init(&iter, ITER_DEST, req->iov, req->nr_iovs,
			      req->data_len);
		iov_iter_truncate(&iter, req->xfer);
		if (current->mm != dev->mm ||
		    !vps_bounce_copy(req->bounce, &iter, true)) {
			req->host_status = BTSTAT_INVPARAM;
			vps_count(dev, s.errors_guest);
			return;
		}
	}
	if (ret == req->xfer) {
		req->host_status = BTSTAT_SUCCESS;
		req->scsi_status = SAM_STAT_GOOD;
		return;
	}
	/*
	 * The host short of memory (the file system's direct I/O could not
	 * allocate, as iomap's dio): the guest retries, as after a failed
	 * bounce buffer and as LIO answers out of resources.  A medium or
	 * hardware error here failed the guest's I/O for a passing shortage.
	 */
	if (ret == -ENOMEM || ret == -EAGAIN) {
		req->host_status = BTSTAT_SUCCESS;
		req->scsi_status = SAM_STAT_TASK_SET_FULL;
		return;
	}
	vps_count(dev, s.errors_backing);
	pr_debug("backing I/O at target %u lun %u: %ld of %u bytes\n",
		 req->target, req->lun->lun, ret, req->xfer);
	if (ret >= 0 || ret == -EIO || ret == -ENODATA || ret == -EILSEQ ||
	    ret == -ENOLINK || ret == -EREMOTEIO)
		vps_set_sense(req, SK_MEDIUM_ERROR,
			      req->write ? ASC_WRITE_ERROR : ASC_READ_ERROR, 0);
	else if (ret == -ENOSPC || ret == -EDQUOT)
		vps_set_sense(req, SK_DATA_PROTECT, ASC_WRITE_PROTECTED, 0x07);
	else if (ret == -EROFS || ret == -EPERM || ret == -EBADF)
		vps_set_sense(req, SK_DATA_PROTECT, ASC_WRITE_PROTECTED, 0);
	else
		vps_set_sense(req, SK_HARDWARE_ERROR, ASC_INTERNAL_FAILURE, 0);
}

/* ---------------------------------------------------------------------- */
/* emulated commands                                                      */
/* ---------------------------------------------------------------------- */

static void vps_inquiry_std(struct vps_dev *dev, struct vps_req *req,
			    struct vps_lu *lun, u32 alloc)
{
	u8 *b = req->q->scratch;

	memset(b, 0, 96);
	b[0] = lun ? TYPE_DISK : 0x7f;	/* 0x7f: no LU at this LUN */
	b[2] = 0x06;			/* SPC-4 */
	b[3] = 0x12;			/* HiSup, response data format 2 */
	b[4] = 96 - 5;
	b[7] = 0x02;			/* CmdQue */
	if (lun) {
		memcpy(&b[8], lun->vendor, 8);
		memcpy(&b[16], lun->product, 16);
	} else {
		memcpy(&b[8], "VPSCSI  ", 8);
		memcpy(&b[16], "vhost-pvscsi    ", 16);
	}
	memcpy(&b[32], "0001", 4);
	vps_data_in(dev, req, b, 96, alloc);
}

static const u8 vps_vpd_pages[] = { 0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2 };

static void vps_inquiry_vpd(struct vps_dev *dev, struct vps_req *req,
			    struct vps_lu *lun, u8 page, u32 alloc)
{
	u8 *b = req->q->scratch;
	u32 len, slen;

	memset(b, 0, 512);
	b[0] = TYPE_DISK;
	b[1] = page;
	switch (page) {
	case 0x00:
		memcpy(&b[4], vps_vpd_pages, sizeof(vps_vpd_pages));
		len = sizeof(vps_vpd_pages);
		break;
	case 0x80:
		slen = strnlen(lun->serial, sizeof(lun->serial));
		memcpy(&b[4], lun->serial, slen);
		len = slen;
		break;
	case 0x83: {
		u8 *d = &b[4];
		u64 naa;

		/* T10 vendor ID designator: vendor + serial */
		slen = strnlen(lun->serial, sizeof(lun->serial));
		d[0] = 0x02;		/* ASCII */
		d[1] = 0x01;		/* T10 vendor ID, LU */
		d[3] = 8 + slen;
		memcpy(&d[4], lun->vendor, 8);
		memcpy(&d[12], lun->serial, slen);
		d += 4 + 8 + slen;
		/*
		 * NAA: the VMM's (scsi-hd's wwn), or one locally assigned from
		 * the serial: stable per LUN
		 */
		naa = get_unaligned_be64(lun->wwn);
		if (!naa) {
			naa = 0x3ull << 60;
			for (len = 0; len < slen; len++)
				naa = (naa ^ lun->serial[len]) * 0x100000001b3ull;
			naa = (naa & ~(0xfull << 60)) | (0x3ull << 60);
		}
		d[0] = 0x01;		/* binary */
		d[1] = 0x03;		/* NAA, LU */
		d[3] = 8;
		put_unaligned_be64(naa, &d[4]);
		d += 12;
		len = d - &b[4];
		break;
	}
	case 0xb0: {
		u32 max_blocks = VPS_MAX_DATA_LEN >> lun->block_shift;

		len = 0x3c;
		put_unaligned_be16(1, &b[6]);	/* granularity */
		put_unaligned_be32(max_blocks, &b[8]);
		put_unaligned_be32(max_blocks, &b[12]);
		if (lun->can_discard) {
			put_unaligned_be32(VPS_MAX_DISCARD_BYTES >> lun->block_shift,
					   &b[20]);
			put_unaligned_be32(VPS_MAX_UNMAP_DESC, &b[24]);
			put_unaligned_be32(1, &b[28]);
		}
		put_unaligned_be64(lun->can_discard ?
				   VPS_MAX_DISCARD_BYTES >> lun->block_shift : 0,
				   &b[36]);
		break;
	}
	case 0xb1:
		len = 0x3c;
		put_unaligned_be16(1, &b[4]);	/* non-rotating */
		break;
	case 0xb2:
		len = 4;
		if (lun->can_discard) {
			b[5] = 0xc0 | (lun->is_bdev ? 0 : 0x04); /* LBPU LBPWS LBPRZ */
			b[6] = 0x02;			/* thin provisioned */
		}
		break;
	default:
		vps_invalid_field(dev, req);
		return;
	}
	put_unaligned_be16(len, &b[2]);
	vps_data_in(dev, req, b, len + 4, alloc);
}

static void vps_inquiry(struct vps_dev *dev, struct vps_req *req,
			struct vps_lu *lun, const u8 *cdb)
{
	u32 alloc = get_unaligned_be16(&cdb[3]);

	if (cdb[1] & 0x01) {
		if (!lun) {
			vps_check(dev, req, SK_ILLEGAL_REQUEST,
				  ASC_LUN_NOT_SUPPORTED, 0);
			return;
		}
		vps_inquiry_vpd(dev, req, lun, cdb[2], alloc);
	} else if (cdb[2] || (cdb[1] & 0xfe)) {
		vps_invalid_field(dev, req);
	} else {
		vps_inquiry_std(dev, req, lun, alloc);
	}
}

static void vps_read_capacity(struct vps_dev *dev, struct vps_req *req,
			      struct vps_lu *lun, const u8 *cdb)
{
	u8 *b = req->q->scratch;
	u64 last = lun->nblocks - 1;

	memset(b, 0, 32);
	if (cdb[0] == READ_CAPACITY) {
		put_unaligned_be32(min_t(u64, last, 0xffffffff), &b[0]);
		put_unaligned_be32(1u << lun->block_shift, &b[4]);
		vps_data_in(dev, req, b, 8, 8);
		return;
	}
	put_unaligned_be64(last, &b[0]);
	put_unaligned_be32(1u << lun->block_shift, &b[8]);
	if (lun->can_discard)
		b[14] = 0x80 | (lun->is_bdev ? 0 : 0x40);	/* LBPME, LBPRZ */
	vps_data_in(dev, req, b, 32, get_unaligned_be32(&cdb[10]));
}

/* mode pages 0x08 (caching) and 0x0a (control) */
static u32 vps_mode_pages(struct vps_lu *lun, u8 page, u8 pc, u8 *p)
{
	u32 len = 0;

	if (page == 0x08 || page == 0x3f) {
		p[len] = 0x08;
		p[len + 1] = 0x12;
		if (pc != 1 && lun->write_cache)
			p[len + 2] = 0x04;	/* WCE */
		len += 0x14;
	}
	if (page == 0x0a || page == 0x3f) {
		p[len] = 0x0a;
		p[len + 1] = 0x0a;
		if (pc != 1)
			p[len + 3] = 0x10;	/* unrestricted reordering */
		len += 0x0c;
	}
	return len;
}

static void vps_mode_sense(struct vps_dev *dev, struct vps_req *req,
			   struct vps_lu *lun, const u8 *cdb)
{
	bool ten = cdb[0] == MODE_SENSE_10;
	u8 page = cdb[2] & 0x3f, pc = cdb[2] >> 6, *b = req->q->scratch;
	bool dbd = cdb[1] & 0x08;
	u32 hdr = ten ? 8 : 4, bd = dbd ? 0 : 8, len, alloc;

	if (pc == 3) {
		vps_check(dev, req, SK_ILLEGAL_REQUEST, ASC_SAVING_NOT_SUPP, 0);
		return;
	}
	if ((page != 0x08 && page != 0x0a && page != 0x3f) || cdb[3]) {
		vps_invalid_field(dev, req);
		return;
	}
	memset(b, 0, 256);
	if (bd) {
		u8 *d = &b[hdr];

		put_unaligned_be32(min_t(u64, lun->nblocks, 0xffffffff), &d[0]);
		put_unaligned_be24(1u << lun->block_shift, &d[5]);
	}
	len = hdr + bd + vps_mode_pages(lun, page, pc, &b[hdr + bd]);
	if (ten) {
		put_unaligned_be16(len - 2, &b[0]);
		b[3] = vps_lun_ro(lun) ? 0x80 : 0;
		put_unaligned_be16(bd, &b[6]);
		alloc = get_unaligned_be16(&cdb[7]);
	} else {
		b[0] = len - 1;
		b[2] = vps_lun_ro(lun) ? 0x80 : 0;
		b[3] = bd;
		alloc = cdb[4];
	}
	vps_data_in(dev, req, b, len, alloc);
}

static void vps_report_luns(struct vps_dev *dev, struct vps_req *req,
			    const u8 *cdb)
{
	u8 *b = req->q->scratch;
	u32 l, n = 0;

	if (cdb[2] > 2) {	/* SELECT REPORT: 0, 1, 2 all mean these */
		vps_invalid_field(dev, req);
		return;
	}
	memset(b, 0, 8 + 8 * VPS_MAX_LUNS);
	for (l = 0; l < VPS_MAX_LUNS; l++) {
		if (!dev->luns[req->target][l])
			continue;
		b[8 + 8 * n + 1] = l;	/* peripheral addressing, bus 0 */
		n++;
	}
	put_unaligned_be32(8 * n, &b[0]);
	vps_data_in(dev, req, b, 8 + 8 * n, get_unaligned_be32(&cdb[6]));
}

static void vps_sync_cache(struct vps_dev *dev, struct vps_req *req,
			   struct vps_lu *lun, const u8 *cdb)
{
	u64 lba, nblk;
	loff_t start, end;
	int ret;

	if (cdb[0] == SYNCHRONIZE_CACHE) {
		lba = get_unaligned_be32(&cdb[2]);
		nblk = get_unaligned_be16(&cdb[7]);
	} else {
		lba = get_unaligned_be64(&cdb[2]);
		nblk = get_unaligned_be32(&cdb[10]);
	}
	if (lba > lun->nblocks || nblk > lun->nblocks - lba) {
		vps_check(dev, req, SK_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE, 0);
		return;
	}
	start = lba << lun->block_shift;
	end = nblk ? ((lba + nblk) << lun->block_shift) - 1 : LLONG_MAX;
	ret = vfs_fsync_range(lun->file, start, end, 1);
	if (ret) {
		vps_count(dev, s.errors_backing);
		vps_check(dev, req, SK_MEDIUM_ERROR, ASC_WRITE_ERROR, 0);
		return;
	}
	vps_good(dev, req);
}

/*
 * What BLKDISCARD does for a block device: refused once the device is
 * read-only (blockdev --setro after the attach: our own flag is only the
 * VMM's view), and the host's page cache of the range dropped under the
 * invalidate lock, so nothing on the host reads the old data afterwards
 * and no reader fills it back in while the discard runs.  Clean pages
 * only: a filesystem's dirty buffers (a LUN that is also mounted, a
 * misconfiguration) are left alone, unlike truncate_bdev_range(), which
 * needs an exclusive claim we cannot take portably.
 */
static int vps_discard(struct vps_lu *lun, u64 lba, u64 nblk)
{
	struct address_space *mapping = lun->file->f_mapping;
	loff_t start = lba << lun->block_shift;
	loff_t end = start + (nblk << lun->block_shift) - 1;
	int ret;

	if (!lun->is_bdev)
		return vfs_fallocate(lun->file,
				     FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				     start, end - start + 1);
	if (vps_lun_ro(lun))
		return -EROFS;
	filemap_invalidate_lock(mapping);
	invalidate_inode_pages2_range(mapping, start >> PAGE_SHIFT,
				      end >> PAGE_SHIFT);
	ret = blkdev_issue_discard(I_BDEV(mapping->host),
				   lba << (lun->block_shift - 9),
				   nblk << (lun->block_shift - 9), GFP_KERNEL);
	filemap_invalidate_unlock(mapping);
	return ret;
}

/* a failed discard: a device gone read-only meanwhile, or an I/O error */
static void vps_discard_failed(struct vps_dev *dev, struct vps_req *req,
			       int err)
{
	if (err == -EROFS || err == -EPERM) {
		vps_check(dev, req, SK_DATA_PROTECT, ASC_WRITE_PROTECTED, 0);
		return;
	}
	vps_count(dev, s.errors_backing);
	vps_check(dev, req, SK_MEDIUM_ERROR, ASC_WRITE_ERROR, 0);
}

/*
 * What a command weighs in the worker's pass beyond the one every command
 * counts.  A discard runs synchronously under the adapter's mutex, up to
 * VPS_MAX_DISCARD_BYTES of it: a whole pass, so that an abort or a reset
 * waits behind one discard at most.
 */
u32 vps_scsi_extra_weight(const u8 *cdb)
{
	return cdb[0] == UNMAP || cdb[0] == WRITE_SAME_16 ? VPS_DISCARD_WEIGHT : 0;
}

/* checks common to UNMAP and WRITE SAME; true when the caller goes on */
static bool vps_discard_ok(struct vps_dev *dev, struct vps_req *req,
			   struct vps_lu *lun)
{
	if (vps_lun_ro(lun)) {
		vps_check(dev, req, SK_DATA_PROTECT, ASC_WRITE_PROTECTED, 0);
		return false;
	}
	if (!lun->can_discard) {
		vps_check(dev, req, SK_ILLEGAL_REQUEST, ASC_INVALID_OPCODE, 0);
		return false;
	}
	return true;
}

static void vps_unmap(struct vps_dev *dev, struct vps_req *req,
		      struct vps_lu *lun, const u8 *cdb)
{
	u32 plen = get_unaligned_be16(&cdb[7]), ndesc, i;
	u8 *b = req->q->scratch;
	u64 total;
	int n;

	if (!vps_discard_ok(dev, req, lun))
		return;
	if (cdb[1] & 0x01) {		/* ANCHOR */
		vps_invalid_field(dev, req);
		return;
	}
	if (!plen) {
		vps_good(dev, req);
		return;
	}
	if (plen < 8 || plen > 8 + 16 * VPS_MAX_UNMAP_DESC ||
	    plen > req->data_len) {
		vps_check(dev, req, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH, 0);
		return;
	}
	n = vps_copy_from_guest(dev, req, b, plen);
	if (n != plen) {
		req->host_status = BTSTAT_INVPARAM;
		return;
	}
	ndesc = min_t(u32, get_unaligned_be16(&b[2]), plen - 8) / 16;
	/* validate every descriptor before discarding anything */
	for (i = 0, total = 0; i < ndesc; i++) {
		u64 lba = get_unaligned_be64(&b[8 + 16 * i]);
		u32 nblk = get_unaligned_be32(&b[8 + 16 * i + 8]);

		if (lba > lun->nblocks || nblk > lun->nblocks - lba) {
			vps_check(dev, req, SK_ILLEGAL_REQUEST,
				  ASC_LBA_OUT_OF_RANGE, 0);
			return;
		}
		total += nblk;
	}
	/* beyond the MAXIMUM UNMAP LBA COUNT of VPD B0 */
	if (total > VPS_MAX_DISCARD_BYTES >> lun->block_shift) {
		vps_check(dev, req, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_PARAM, 0);
		return;
	}
	for (i = 0; i < ndesc; i++) {
		u64 lba = get_unaligned_be64(&b[8 + 16 * i]);
		u32 nblk = get_unaligned_be32(&b[8 + 16 * i + 8]);
		int err = nblk ? vps_discard(lun, lba, nblk) : 0;

		if (err) {
			vps_discard_failed(dev, req, err);
			return;
		}
	}
	vps_good(dev, req);
}

static void vps_write_same(struct vps_dev *dev, struct vps_req *req,
			   struct vps_lu *lun, const u8 *cdb)
{
	u64 lba = get_unaligned_be64(&cdb[2]);
	u32 nblk = get_unaligned_be32(&cdb[10]);
	int err;

	/* only the UNMAP form: we advertise nothing else (VPD 0xb2) */
	if (!(cdb[1] & 0x08) || (cdb[1] & 0x01)) {
		vps_invalid_field(dev, req);
		return;
	}
	if (!vps_discard_ok(dev, req, lun))
		return;
	if (lba > lun->nblocks || nblk > lun->nblocks - lba) {
		vps_check(dev, req, SK_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE, 0);
		return;
	}
	/* zero means "to the end", which we do not offer; nor beyond VPD B0 */
	if (!nblk || nblk > VPS_MAX_DISCARD_BYTES >> lun->block_shift) {
		vps_invalid_field(dev, req);
		return;
	}
	err = vps_discard(lun, lba, nblk);
	if (err) {
		vps_discard_failed(dev, req, err);
		return;
	}
	vps_good(dev, req);
}

/* VERIFY with BYTCHK 0: the medium is readable if the range exists */
static void vps_verify(struct vps_dev *dev, struct vps_req *req,
		       struct vps_lu *lun, const u8 *cdb)
{
	u64 lba;
	u32 nblk;

	if (cdb[0] == VERIFY) {
		lba = get_unaligned_be32(&cdb[2]);
		nblk = get_unaligned_be16(&cdb[7]);
	} else {
		lba = get_unaligned_be64(&cdb[2]);
		nblk = get_unaligned_be32(&cdb[10]);
	}
	if (cdb[1] & 0x06) {	/* BYTCHK: compare data, not offered */
		vps_invalid_field(dev, req);
		return;
	}
	if (lba > lun->nblocks || nblk > lun->nblocks - lba) {
		vps_check(dev, req, SK_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE, 0);
		return;
	}
	vps_good(dev, req);
}

static void vps_request_sense(struct vps_dev *dev, struct vps_req *req,
			      struct vps_lu *lun, const u8 *cdb)
{
	u8 *b = req->q->scratch;

	/* sense is delivered with each command (autosense): nothing pends */
	memset(b, 0, VPS_SENSE_LEN);
	b[0] = 0x70;
	b[2] = SK_NO_SENSE;
	b[7] = VPS_SENSE_LEN - 8;
	if (!lun) {
		b[2] = SK_ILLEGAL_REQUEST;
		b[12] = ASC_LUN_NOT_SUPPORTED;
	}
	if (cdb[1] & 0x01) {	/* descriptor format not offered */
		vps_invalid_field(dev, req);
		return;
	}
	vps_data_in(dev, req, b, VPS_SENSE_LEN, cdb[4]);
}

/* CDB length each opcode group needs; 0: whatever the guest says */
static u32 vps_cdb_len(u8 op)
{
	static const u8 len[8] = { 6, 10, 10, 0, 16, 12, 0, 0 };

	return len[op >> 5];
}

/* run one command whose descriptor the rings validated; see enum vps_exec */
enum vps_exec vps_scsi_execute(struct vps_dev *dev, struct vps_req *req,
			       const struct pvscsi_req_desc *d)
{
	const u8 *cdb = d->cdb;
	struct vps_lu *lun = NULL;
	u32 lunid = req->lun_id;	/* decoded by vps_handle_desc */

	if (d->bus || req->target >= VPS_MAX_TARGETS ||
	    !vps_target_present(dev, req->target)) {
		req->host_status = BTSTAT_SELTIMEO;
		return VPS_EXEC_DONE;
	}
	if (lunid != U32_MAX)
		lun = dev->luns[req->target][lunid];

	if (d->cdb_len < vps_cdb_len(cdb[0])) {
		vps_invalid_field(dev, req);
		return VPS_EXEC_DONE;
	}

	switch (cdb[0]) {
	case INQUIRY:
		vps_inquiry(dev, req, lun, cdb);
		return VPS_EXEC_DONE;
	case REPORT_LUNS:
		vps_report_luns(dev, req, cdb);
		return VPS_EXEC_DONE;
	case REQUEST_SENSE:
		vps_request_sense(dev, req, lun, cdb);
		return VPS_EXEC_DONE;
	}
	if (!lun) {
		vps_check(dev, req, SK_ILLEGAL_REQUEST, ASC_LUN_NOT_SUPPORTED, 0);
		return VPS_EXEC_DONE;
	}
	switch (cdb[0]) {
	case READ_6:
	case READ_10:
	case READ_12:
	case READ_16:
	case WRITE_6:
	case WRITE_10:
	case WRITE_12:
	case WRITE_16:
		return vps_rw(dev, req, lun, cdb);
	case TEST_UNIT_READY:
		vps_good(dev, req);
		return VPS_EXEC_DONE;
	case READ_CAPACITY:
		vps_read_capacity(dev, req, lun, cdb);
		return VPS_EXEC_DONE;
	case SERVICE_ACTION_IN_16:
		if ((cdb[1] & 0x1f) == SAI_READ_CAPACITY_16)
			vps_read_capacity(dev, req, lun, cdb);
		else
			vps_invalid_field(dev, req);
		return VPS_EXEC_DONE;
	case MODE_SENSE:
	case MODE_SENSE_10:
		vps_mode_sense(dev, req, lun, cdb);
		return VPS_EXEC_DONE;
	case SYNCHRONIZE_CACHE:
	case SYNCHRONIZE_CACHE_16:
		vps_sync_cache(dev, req, lun, cdb);
		return VPS_EXEC_DONE;
	case UNMAP:
		vps_unmap(dev, req, lun, cdb);
		return VPS_EXEC_DONE;
	case WRITE_SAME_16:
		vps_write_same(dev, req, lun, cdb);
		return VPS_EXEC_DONE;
	case VERIFY:
	case VERIFY_16:
		vps_verify(dev, req, lun, cdb);
		return VPS_EXEC_DONE;
	default:
		vps_check(dev, req, SK_ILLEGAL_REQUEST, ASC_INVALID_OPCODE, 0);
		return VPS_EXEC_DONE;
	}
}
