// SPDX-License-Identifier: GPL-2.0
/*
 * vhost_pvscsi: guest memory.  Guest physical addresses become addresses
 * in the owner's process only through the memory table that
 * VHOST_SET_MEM_TABLE handed over (vps_main.c checks and installs it): a
 * request's data buffer or SG list becomes its iovecs here, and the SCSI
 * target's emulated data is copied to and from them.  The dirty log maps
 * the other way, from the owner's addresses back to guest pages.
 *
 * Layering: the bottom, part of the I/O interface of vps_io.h; called by
 * the rings (vps_ring.c) and the SCSI target (vps_scsi.c), calls nothing.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/highmem.h>
#include <linux/mm.h>
#include <linux/uaccess.h>

#include "vps.h"
#include "vps_io.h"

static const struct vps_region *vps_find_region(const struct vps_mem *mem,
						u64 gpa)
{
	u32 i;

	if (!mem)
		return NULL;
	for (i = 0; i < mem->nregions; i++) {
		const struct vps_region *r = &mem->r[i];

		if (gpa >= r->gpa && gpa - r->gpa < r->size)
			return r;
	}
	return NULL;
}

/* a guest range that must lie in one region (ring pages, SG chunks) */
void __user *vps_gpa_to_user(const struct vps_mem *mem, u64 gpa, u64 len)
{
	const struct vps_region *r = vps_find_region(mem, gpa);
	u64 off;

	if (!r)
		return NULL;
	off = gpa - r->gpa;
	if (len > r->size - off)
		return NULL;
	return (void __user *)(uintptr_t)(r->uaddr + off);
}

/* append the user-space iovecs behind [gpa, gpa + len) to the request */
int vps_map_range(const struct vps_mem *mem, struct vps_req *req,
		  u64 gpa, u64 len)
{
	while (len) {
		const struct vps_region *r = vps_find_region(mem, gpa);
		u64 off, chunk;

		if (!r)
			return -EFAULT;
		off = gpa - r->gpa;
		chunk = min(len, r->size - off);
		if (req->nr_iovs && req->iov[req->nr_iovs - 1].iov_base +
		    req->iov[req->nr_iovs - 1].iov_len ==
		    (void __user *)(uintptr_t)(r->uaddr + off)) {
			req->iov[req->nr_iovs - 1].iov_len += chunk;
		} else {
			if (req->nr_iovs == VPS_MAX_IOVS)
				return -E2BIG;
			req->iov[req->nr_iovs].iov_base =
				(void __user *)(uintptr_t)(r->uaddr + off);
			req->iov[req->nr_iovs].iov_len = chunk;
			req->nr_iovs++;
		}
		gpa += chunk;
		len -= chunk;
	}
	return 0;
}

/* SG page: walk elements until data_len is covered, at most one page's */
int vps_map_sg(const struct vps_mem *mem, struct vps_req *req, u64 sg_gpa)
{
	struct pvscsi_sg_element sg[16];
	u64 left = req->data_len;
	u32 i = 0, n, j;
	int ret;

	while (left) {
		void __user *p;

		if (i >= PVSCSI_MAX_SG_ENTRIES_PER_SEGMENT)
			return -E2BIG;	/* SG total short of data_len */
		n = min_t(u32, ARRAY_SIZE(sg),
			  PVSCSI_MAX_SG_ENTRIES_PER_SEGMENT - i);
		p = vps_gpa_to_user(mem, sg_gpa + (u64)i * sizeof(sg[0]),
				    n * sizeof(sg[0]));
		if (!p || copy_from_user(sg, p, n * sizeof(sg[0])))
			return -EFAULT;
		for (j = 0; j < n && left; j++, i++) {
			u64 addr = le64_to_cpu(sg[j].addr);
			u64 elen = le32_to_cpu(sg[j].length);

			if (sg[j].flags)
				return -EINVAL;	/* no chaining in this ABI */
			elen = min(elen, left);
			if (!elen)
				continue;
			ret = vps_map_range(mem, req, addr, elen);
			if (ret)
				return ret;
			left -= elen;
		}
	}
	return 0;
}

static int vps_xfer_guest(struct vps_req *req, void *buf, u32 len, bool out)
{
	u32 i, done = 0;

	for (i = 0; i < req->nr_iovs && done < len; i++) {
		u32 n = min_t(u64, req->iov[i].iov_len, len - done);
		unsigned long left;

		if (out)
			left = copy_to_user(req->iov[i].iov_base, buf + done, n);
		else
			left = copy_from_user(buf + done, req->iov[i].iov_base, n);
		if (left)
			return -EFAULT;
		done += n;
	}
	return done;
}

/* copy an emulated response to the request's data buffer; bytes or -err */
int vps_copy_to_guest(struct vps_dev *dev, struct vps_req *req,
		      const void *buf, u32 len)
{
	return vps_xfer_guest(req, (void *)buf, len, true);
}

int vps_copy_from_guest(struct vps_dev *dev, struct vps_req *req,
			void *buf, u32 len)
{
	return vps_xfer_guest(req, buf, len, false);
}

/* whether a dirty log of @size bytes covers every page of @mem */
bool vps_log_covers(const struct vps_mem *mem, u64 size)
{
	u32 i;

	for (i = 0; mem && i < mem->nregions; i++) {
		u64 last = (mem->r[i].gpa + mem->r[i].size - 1) / VPS_LOG_PAGE;

		if (last / 8 >= size)
			return false;
	}
	return true;
}

/*
 * Set the log bits of guest pages @first..@last, pinning each page of the
 * bitmap once for the bits in it (a bitmap page covers 128 MiB of guest).
 * The bitmap is the owner's memory: the caller runs in its mm (an ioctl,
 * or the worker).
 */
static void vps_log_pages(struct vps_dev *dev, u64 first, u64 last)
{
	u64 nbits = dev->log.size * 8;

	while (first <= last) {
		u64 addr = dev->log.base + first / 8;
		u64 bit = (addr & ~PAGE_MASK) * 8 + first % 8;
		u64 n = min(last - first + 1, PAGE_SIZE * 8 - bit), i;
		struct page *pg;
		void *map;

		/* the memory table was checked against the size: no overrun */
		if (first >= nbits ||
		    pin_user_pages_fast(addr, 1, FOLL_WRITE, &pg) != 1) {
			vps_count_add(dev, s.log_errors, last - first + 1);
			return;
		}
		n = min(n, nbits - first);
		map = kmap_local_page(pg);
		for (i = 0; i < n; i++)
			set_bit(bit + i, map);
		kunmap_local(map);
		unpin_user_pages_dirty_lock(&pg, 1, true);
		vps_count_add(dev, s.log_pages, n);
		first += n;
	}
}

/*
 * Log the guest pages behind [@p, @p + @len) of the owner's memory, which
 * we have just written: every region that maps the range (a page may be
 * mapped at two guest addresses).  Nothing while the log is off.
 */
void vps_log_write(struct vps_dev *dev, const void __user *p, u64 len)
{
	u64 start = (u64)(uintptr_t)p, end = start + len;
	const struct vps_mem *mem = dev->mem;
	u32 i;

	/*
	 * The bitmap is in the owner's memory: only the owner's mm may set
	 * bits in it.  I/O that completes after close finishes in a kworker
	 * (no mm) or in whichever process closed the last reference; until
	 * 2026-12-03 a READ finishing there with the log on pinned the
	 * bitmap's address in a kworker with no mm, and oopsed.
	 */
	if (!dev->log.on || !len || !mem || current->mm != dev->mm)
		return;
	for (i = 0; i < mem->nregions; i++) {
		const struct vps_region *r = &mem->r[i];
		u64 s = max(start, r->uaddr), e = min(end, r->uaddr + r->size);

		if (s < e)
			vps_log_pages(dev, (r->gpa + s - r->uaddr) / VPS_LOG_PAGE,
				      (r->gpa + e - 1 - r->uaddr) / VPS_LOG_PAGE);
	}
}
