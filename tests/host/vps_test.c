// SPDX-License-Identifier: GPL-2.0
/*
 * vps_test: plays both VMM and guest against /dev/vhost-pvscsi, in the
 * pattern of the kernel's tools/virtio/virtio_test.  "Guest RAM" is an
 * anonymous mapping registered at a non-zero guest-physical base; the
 * program lays out PVSCSI rings in it, writes request descriptors, kicks
 * an eventfd and reads completions when the call eventfd fires.
 *
 *   vps_test check DISK RO_DISK    every command, integrity, hostile input,
 *                                  resets, memory table changes, a killed
 *                                  owner (TAP; DISK is overwritten)
 *   vps_test close-inflight DISK   close the fd with I/O in flight
 *   vps_test hung-lun DISK DM      DISK (dm device DM) suspended with
 *                                  writes held: a VMM killed in a reset
 *                                  and one closing the adapter exit at
 *                                  once, the module lets go on resume
 *   vps_test faults DISK LBA read|write ON OFF
 *                                  backing errors: LBA fails (reads or
 *                                  writes) between shell commands ON and
 *                                  OFF; MEDIUM ERROR then clean data (TAP)
 *   vps_test cap DISK CAP GOOD     a burst of 16 READs against a LUN
 *                                  capped at CAP in flight (0: module
 *                                  parameter): GOOD of them pass, the
 *                                  rest get TASK SET FULL
 *   vps_test detach-inflight DISK  detach a LUN with I/O in flight: each
 *                                  command completes exactly once (TAP)
 *   vps_test bench DISK QD SECONDS [spin]
 *                                  4k random reads; prints IOPS (spin:
 *                                  watch the completion ring, as a
 *                                  polling guest driver, not the eventfd)
 *   vps_test poll DISK             busy-polling (poll_us) at queue depth 1
 *   vps_test hold DISK             the interrupt held while the guest posts
 *                                  (hold_us)
 *   vps_test event DISK            the completion event index (VPS_SET_FEATURES)
 *   vps_test mq DISK               the multi-queue extension (VPS_SETUP_QUEUE)
 *   vps_test coalesce SLOW_DISK    interrupt coalescing (coalesce_us)
 *   vps_test batch DISK            the worker's scheduling policy
 *                                  (batch_workers)
 *                                  (TAP; wants two CPUs)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <linux/vhost.h>

#include "vhost_pvscsi.h"
#include "vps_sim.h"

#define SCSI_BUSY	0x08		/* SAM status BUSY */
#define GPA_BASE	0x100000000ull	/* guest RAM starts at 4 GiB */
#define RAM_SIZE	(64u << 20)
#define PG		4096u
#define REQ_PAGES	8
#define CMP_PAGES	8
#define MSG_PAGES	1
#define REQ_ENTRIES	(REQ_PAGES * PG / sizeof(struct pvscsi_req_desc))
#define CMP_ENTRIES	(CMP_PAGES * PG / sizeof(struct pvscsi_cmp_desc))
/* page numbers inside guest RAM */
#define P_RS		0
#define P_REQ		1
#define P_CMP		(P_REQ + REQ_PAGES)
#define P_MSG		(P_CMP + CMP_PAGES)
#define P_SG		32		/* one SG page per slot: 256 pages */
#define P_SENSE		300
#define P_DATA		512		/* data area: the rest */

static int vfd, kick_fd, call_fd, msg_fd;
static uint8_t *ram;
static struct pvscsi_rings_state *rs;
static uint32_t req_prod, cmp_cons, msg_cons;
static uint32_t cmp_entries = CMP_ENTRIES;	/* of the current setup */
static int tests, failures;

static uint64_t gpa(const void *p)
{
	return GPA_BASE + ((const uint8_t *)p - ram);
}

static void *page(unsigned int n)
{
	return ram + (size_t)n * PG;
}

static void tap(int ok, const char *name, const char *fmt, ...)
{
	va_list ap;

	tests++;
	if (ok) {
		printf("ok %d - %s\n", tests, name);
	} else {
		failures++;
		printf("not ok %d - %s # ", tests, name);
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
		printf("\n");
	}
	fflush(stdout);
}

static void die(const char *what)
{
	perror(what);
	exit(2);
}

/* ---- VMM side ---------------------------------------------------------- */

static int set_mem(uint64_t base, uint64_t size, void *uaddr)
{
	struct {
		struct vhost_memory m;
		struct vhost_memory_region r[1];
	} t = {};

	t.m.nregions = 1;
	t.r[0].guest_phys_addr = base;
	t.r[0].memory_size = size;
	t.r[0].userspace_addr = (uintptr_t)uaddr;
	return ioctl(vfd, VHOST_SET_MEM_TABLE, &t);
}

static struct pvscsi_cmd_setup_rings rings_cfg(uint32_t nreq, uint32_t ncmp,
					       uint64_t rs_gpa)
{
	struct pvscsi_cmd_setup_rings c = {};
	uint32_t i;

	c.req_ring_num_pages = nreq;
	c.cmp_ring_num_pages = ncmp;
	c.rings_state_ppn = rs_gpa / PG;
	for (i = 0; i < PVSCSI_SETUP_RINGS_MAX_PAGES; i++) {
		c.req_ring_ppns[i] = gpa(page(P_REQ + i % REQ_PAGES)) / PG;
		c.cmp_ring_ppns[i] = gpa(page(P_CMP + i % CMP_PAGES)) / PG;
	}
	return c;
}

static int setup_rings(uint32_t nreq, uint32_t ncmp, uint64_t rs_gpa)
{
	struct pvscsi_cmd_setup_rings c = rings_cfg(nreq, ncmp, rs_gpa);

	return ioctl(vfd, VPS_SETUP_RINGS, &c);
}

static struct pvscsi_cmd_setup_msg_ring msg_cfg(void)
{
	struct pvscsi_cmd_setup_msg_ring c = {};

	c.num_pages = MSG_PAGES;
	c.ring_ppns[0] = gpa(page(P_MSG)) / PG;
	return c;
}

static int setup_msg(void)
{
	struct pvscsi_cmd_setup_msg_ring c = msg_cfg();

	return ioctl(vfd, VPS_SETUP_MSG_RING, &c);
}

static uint32_t attach_cap;	/* max_outstanding for the next attaches */

static int attach(uint32_t target, uint32_t lun, const char *path,
		  uint32_t flags, uint32_t bs)
{
	struct vps_lun l = { .max_outstanding = attach_cap };
	int fd, ret;

	fd = open(path, ((flags & VPS_LUN_READ_ONLY) ? O_RDONLY : O_RDWR) | O_DIRECT);
	if (fd < 0)
		die(path);
	l.target = target;
	l.lun = lun;
	l.fd = fd;
	l.flags = flags;
	l.block_size = bs;
	ret = ioctl(vfd, VPS_ATTACH_LUN, &l);
	close(fd);	/* the module holds its own reference */
	return ret;
}

static int detach(uint32_t target, uint32_t lun)
{
	struct vps_lun_addr a = { target, lun };

	return ioctl(vfd, VPS_DETACH_LUN, &a);
}

static int reset(uint32_t kind, uint32_t target, uint32_t lun)
{
	struct vps_reset r = { kind, target, lun, 0 };

	return ioctl(vfd, VPS_RESET, &r);
}

/*
 * An adapter reset and rings as a guest sets them up after one, with
 * @cmp_pages of completion ring; 0 when both setups took
 */
static int new_rings(uint32_t cmp_pages)
{
	reset(VPS_RESET_ADAPTER, 0, 0);
	memset(page(P_RS), 0, PG);
	req_prod = 0;
	cmp_cons = 0;
	msg_cons = 0;
	cmp_entries = cmp_pages * PVSCSI_CMP_DESCS_PER_PAGE;
	return setup_rings(REQ_PAGES, cmp_pages, gpa(page(P_RS))) || setup_msg();
}

/* become the owner of vfd and set it up over ram */
static void setup_adapter(void)
{
	if (ioctl(vfd, VHOST_SET_OWNER))
		die("SET_OWNER");
	if (set_mem(GPA_BASE, RAM_SIZE, ram))
		die("SET_MEM_TABLE");
	memset(ram, 0, P_DATA * PG);
	req_prod = 0;
	cmp_cons = 0;
	msg_cons = 0;
	if (setup_rings(REQ_PAGES, CMP_PAGES, gpa(page(P_RS))))
		die("SETUP_RINGS");
	if (setup_msg())
		die("SETUP_MSG_RING");
	vps_sim_eventfds(vfd, &kick_fd, &call_fd, &msg_fd);
}

static void open_adapter(void)
{
	vfd = open("/dev/vhost-pvscsi", O_RDWR);
	if (vfd < 0)
		die("/dev/vhost-pvscsi");
	setup_adapter();
}

static void close_adapter(void)
{
	close(vfd);
	close(kick_fd);
	close(call_fd);
	close(msg_fd);
}

static struct vps_stats stats(void)
{
	struct vps_stats s = {};

	ioctl(vfd, VPS_GET_STATS, &s);
	return s;
}

/* ---- guest side -------------------------------------------------------- */

struct cmd {
	uint8_t cdb[16];
	uint8_t cdb_len;
	uint32_t target, lun;
	uint32_t flags;		/* direction and SG flags */
	uint64_t data_gpa;
	uint64_t data_len;
	uint64_t context;	/* 0: pick one */
	int raw;		/* use the fields as given, even bad ones */
};

struct result {
	uint64_t context;
	uint64_t data_len;
	uint32_t sense_len;
	uint16_t host, scsi;
	uint8_t sense[32];
};

static uint64_t next_ctx = 1;
static uint64_t calls_seen;	/* call eventfd signals read so far */

/* after a completion: its interrupt (call eventfd) must come too */
static int wait_call(uint64_t before)
{
	struct pollfd p = { call_fd, POLLIN, 0 };
	uint64_t v;
	int i;

	for (i = 0; i < 100 && calls_seen == before; i++) {
		poll(&p, 1, 10);
		if (read(call_fd, &v, sizeof(v)) == sizeof(v))
			calls_seen += v;
	}
	return calls_seen != before;
}

static void kick(void)
{
	uint64_t one = 1;

	if (write(kick_fd, &one, sizeof(one)) != sizeof(one))
		die("kick");
}

/* a request descriptor for @c, in any queue's ring */
static void fill_desc(struct pvscsi_req_desc *d, const struct cmd *c, uint64_t ctx,
		      uint64_t sense_addr, uint32_t sense_len)
{
	memset(d, 0, sizeof(*d));
	d->context = ctx;
	d->sense_addr = sense_addr;
	d->sense_len = sense_len;
	d->data_addr = c->data_gpa;
	d->data_len = c->data_len;
	d->flags = c->flags;
	memcpy(d->cdb, c->cdb, 16);
	d->cdb_len = c->cdb_len ? c->cdb_len : 16;
	d->lun[1] = c->lun;
	d->target = c->target;
	/* the descriptor before the index that publishes it */
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

static void put_req(const struct cmd *c, uint64_t ctx, uint32_t slot_sense)
{
	struct pvscsi_req_desc *d;
	uint32_t slot = req_prod % REQ_ENTRIES;

	d = (void *)((uint8_t *)page(P_REQ) + slot * sizeof(*d));
	fill_desc(d, c, ctx, gpa(page(P_SENSE)) + slot_sense * 64, 32);
	req_prod++;
	__atomic_store_n(&rs->req_prod_idx, req_prod, __ATOMIC_RELEASE);
}

/*
 * Wait for n completions (timeout in ms); returns how many came.  @spin:
 * watch the completion ring instead of sleeping on the call eventfd, as a
 * polling guest driver does (a wake-up through the eventfd costs this vCPU
 * a halt and an interrupt: under TCG often more than a host poll window).
 */
static int get_cmps_how(struct result *out, int n, int timeout_ms, bool spin)
{
	int got = 0;
	struct timespec t0, t;

	unsigned int spins = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (got < n) {
		uint32_t prod = __atomic_load_n(&rs->cmp_prod_idx, __ATOMIC_ACQUIRE);

		while (cmp_cons != prod && got < n) {
			struct pvscsi_cmp_desc *c = (void *)((uint8_t *)page(P_CMP) +
				(cmp_cons % cmp_entries) * sizeof(*c));
			struct result *r = &out[got++];

			r->context = c->context;
			r->data_len = c->data_len;
			r->sense_len = c->sense_len;
			r->host = c->host_status;
			r->scsi = c->scsi_status;
			cmp_cons++;
			__atomic_store_n(&rs->cmp_cons_idx, cmp_cons, __ATOMIC_RELEASE);
		}
		if (got < n) {
			struct pollfd p = { call_fd, POLLIN, 0 };
			uint64_t v;
			int ms;

			/*
			 * a clock read may be a system call and a device read
			 * (HPET) here: spinning, look at the clock seldom
			 */
			if (spin && ++spins % 4096) {
				__builtin_ia32_pause();
				continue;
			}
			clock_gettime(CLOCK_MONOTONIC, &t);
			ms = timeout_ms - ((t.tv_sec - t0.tv_sec) * 1000 +
					   (t.tv_nsec - t0.tv_nsec) / 1000000);
			if (ms <= 0)
				break;
			if (spin) {
				__builtin_ia32_pause();
				continue;
			}
			poll(&p, 1, ms > 50 ? 50 : ms);
			if (read(call_fd, &v, sizeof(v)) == sizeof(v))
				calls_seen += v;
			else if (errno != EAGAIN)
				die("call read");
		}
	}
	if (spin) {
		uint64_t v;

		/* the calls that came meanwhile, so that later waits start clean */
		if (read(call_fd, &v, sizeof(v)) == sizeof(v))
			calls_seen += v;
		else if (errno != EAGAIN)
			die("call read");
	}
	return got;
}

static int get_cmps(struct result *out, int n, int timeout_ms)
{
	return get_cmps_how(out, n, timeout_ms, false);
}

/* completions until @n came or none for @idle_ms; @out has room for @n */
static uint32_t collect(struct result *out, uint32_t n, int idle_ms)
{
	uint32_t got = 0;
	int k;

	while (got < n && (k = get_cmps(out + got, n - got, idle_ms)) > 0)
		got += k;
	return got;
}

/*
 * Of @got completions of the @n commands whose contexts start at @base:
 * how many carry a context outside them or one already seen (a command
 * completed twice)
 */
static uint32_t count_dups(const struct result *res, uint32_t got, uint64_t base,
			   uint32_t n)
{
	uint8_t *seen = calloc(n, 1);
	uint32_t i, dup = 0;

	if (!seen)
		die("calloc");
	for (i = 0; i < got; i++) {
		uint64_t k = res[i].context - base;

		if (k >= n || seen[k]++)
			dup++;
	}
	free(seen);
	return dup;
}

/* run one command synchronously; sense is copied into the result */
static int run(const struct cmd *c, struct result *r)
{
	uint64_t ctx = c->raw ? c->context : next_ctx++;
	uint32_t slot = req_prod % REQ_ENTRIES;

	uint64_t calls = calls_seen;

	memset(r, 0, sizeof(*r));
	memset((uint8_t *)page(P_SENSE) + slot * 64, 0, 64);
	put_req(c, ctx, slot);
	kick();
	if (get_cmps(r, 1, 5000) != 1)
		return -1;
	memcpy(r->sense, (uint8_t *)page(P_SENSE) + slot * 64, sizeof(r->sense));
	if (r->context != ctx)
		return -2;
	if (!wait_call(calls))
		return -3;	/* posted without an interrupt */
	return 0;
}

static uint8_t *data(void)
{
	return page(P_DATA);
}

static struct cmd cmd_in(const uint8_t *cdb, int len, uint32_t alloc)
{
	struct cmd c = {};

	memcpy(c.cdb, cdb, len);
	c.cdb_len = len;
	c.flags = PVSCSI_FLAG_CMD_DIR_TOHOST;
	c.data_gpa = gpa(data());
	c.data_len = alloc;
	return c;
}

/* status checks ----------------------------------------------------------- */

static int good(const struct result *r)
{
	return r->host == BTSTAT_SUCCESS && r->scsi == 0;
}

static int sense_is(const struct result *r, int key, int asc, int ascq)
{
	return r->host == BTSTAT_SUCCESS && r->scsi == 2 && r->sense_len >= 14 &&
	       r->sense[0] == 0x70 && (r->sense[2] & 0xf) == key &&
	       r->sense[12] == asc && (ascq < 0 || r->sense[13] == ascq);
}

#define CHECK_GOOD(name, c) do { struct result _r; int _e = run(&(c), &_r); \
	tap(!_e && good(&_r), name, "run %d host 0x%x scsi 0x%x key 0x%x asc 0x%x", \
	    _e, _r.host, _r.scsi, _r.sense[2], _r.sense[12]); } while (0)
#define CHECK_SENSE(name, c, k, a, q) do { struct result _r; int _e = run(&(c), &_r); \
	tap(!_e && sense_is(&_r, k, a, q), name, \
	    "run %d host 0x%x scsi 0x%x sense_len %u key 0x%x asc 0x%x/0x%x", \
	    _e, _r.host, _r.scsi, _r.sense_len, _r.sense[2], _r.sense[12], \
	    _r.sense[13]); } while (0)
#define CHECK_HOST(name, c, h) do { struct result _r; int _e = run(&(c), &_r); \
	unsigned int _h = (h); \
	tap(!_e && _r.host == _h, name, "run %d host 0x%x want 0x%x", _e, _r.host, _h); \
	} while (0)

static void be32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}

static void be64(uint8_t *p, uint64_t v)
{
	be32(p, v >> 32);
	be32(p + 4, (uint32_t)v);
}

static uint64_t get_be64(const uint8_t *p)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3];
}

static struct cmd rw16(int write, uint64_t lba, uint32_t nblk, void *buf,
		       uint32_t bs)
{
	struct cmd c = {};

	c.cdb[0] = write ? 0x8a : 0x88;
	be64(&c.cdb[2], lba);
	be32(&c.cdb[10], nblk);
	c.cdb_len = 16;
	c.flags = write ? PVSCSI_FLAG_CMD_DIR_TODEVICE : PVSCSI_FLAG_CMD_DIR_TOHOST;
	c.data_gpa = gpa(buf);
	c.data_len = (uint64_t)nblk * bs;
	return c;
}

static void pattern(uint8_t *buf, uint64_t lba, uint32_t nblk, uint32_t seed)
{
	uint32_t i, j;

	for (i = 0; i < nblk; i++)
		for (j = 0; j < 512; j += 8) {
			uint64_t v = ((lba + i) << 20) ^ j ^ ((uint64_t)seed << 44);

			memcpy(buf + (size_t)i * 512 + j, &v, 8);
		}
}

/*
 * One SG round trip at LBA 1000: write a pattern from the @n buffers of
 * @lens bytes through an SG list, read it back flat into @rd, then clear
 * the buffers and read it back through the same list.  The caller judges.
 */
struct sg_trip {
	int write_e, flat_e, sg_e;	/* run() results */
	struct result write, flat, sg;
	int flat_same;			/* the flat read-back is the pattern */
	uint32_t sg_bad;		/* buffers the SG read got wrong */
};

static struct sg_trip sg_round_trip(uint8_t *const *bufs, const uint32_t *lens,
				    uint32_t n, uint8_t *src, uint8_t *rd,
				    uint32_t seed)
{
	struct pvscsi_sg_element *sg = page(P_SG);
	struct sg_trip t = {};
	uint32_t k, i, total = 0;
	struct cmd c;

	for (k = 0; k < n; k++) {
		sg[k].addr = gpa(bufs[k]);
		sg[k].length = lens[k];
		sg[k].flags = 0;
		total += lens[k];
	}
	pattern(src, 1000, total / 512, seed);
	for (k = 0, i = 0; k < n; i += lens[k], k++)
		memcpy(bufs[k], src + i, lens[k]);
	c = rw16(1, 1000, total / 512, NULL, 512);
	c.data_gpa = gpa(sg);
	c.flags |= PVSCSI_FLAG_CMD_WITH_SG_LIST;
	t.write_e = run(&c, &t.write);
	memset(rd, 0, total);
	c = rw16(0, 1000, total / 512, rd, 512);
	t.flat_e = run(&c, &t.flat);
	t.flat_same = !memcmp(rd, src, total);
	for (k = 0; k < n; k++)
		memset(bufs[k], 0, lens[k]);
	c = rw16(0, 1000, total / 512, NULL, 512);
	c.data_gpa = gpa(sg);
	c.flags |= PVSCSI_FLAG_CMD_WITH_SG_LIST;
	t.sg_e = run(&c, &t.sg);
	for (k = 0, i = 0; k < n; i += lens[k], k++)
		t.sg_bad += !!memcmp(bufs[k], src + i, lens[k]);
	return t;
}

/* the checks ---------------------------------------------------------------- */

static uint64_t disk_blocks;

/* 1 when the block device @path discards, 0 when not, -1 unknown */
static int bdev_discards(const char *path)
{
	char sys[96];
	unsigned long long max;
	struct stat st;
	FILE *f;
	int n;

	if (stat(path, &st) || !S_ISBLK(st.st_mode))
		return -1;
	snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u/queue/discard_max_bytes",
		 major(st.st_rdev), minor(st.st_rdev));
	f = fopen(sys, "r");
	if (!f)
		return -1;
	n = fscanf(f, "%llu", &max);
	fclose(f);
	return n == 1 ? max > 0 : -1;
}

static void check_commands(const char *disk)
{
	uint8_t cdb[16] = {};
	struct result r;
	struct cmd c;
	int e;

	/* INQUIRY standard */
	memset(data(), 0xee, 256);
	c = cmd_in((uint8_t[]){ 0x12, 0, 0, 0, 96, 0 }, 6, 96);
	e = run(&c, &r);
	tap(!e && good(&r) && data()[0] == 0 && !memcmp(data() + 8, "VPSCSI  ", 8) &&
	    r.data_len == 96, "inquiry-standard", "e %d host %x data_len %lu type %x",
	    e, r.host, (unsigned long)r.data_len, data()[0]);
	/* allocation length truncates */
	c = cmd_in((uint8_t[]){ 0x12, 0, 0, 0, 5, 0 }, 6, 96);
	e = run(&c, &r);
	tap(!e && good(&r) && r.data_len == 5, "inquiry-alloc-len",
	    "data_len %lu", (unsigned long)r.data_len);
	/* VPD pages */
	{
		static const uint8_t pages[] = { 0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2 };
		unsigned int i;

		for (i = 0; i < sizeof(pages); i++) {
			char name[32];

			memset(data(), 0xee, 256);
			c = cmd_in((uint8_t[]){ 0x12, 1, pages[i], 1, 0, 0 }, 6, 256);
			e = run(&c, &r);
			snprintf(name, sizeof(name), "inquiry-vpd-%02x", pages[i]);
			tap(!e && good(&r) && data()[1] == pages[i] &&
			    (data()[2] << 8 | data()[3]) + 4 == (int)r.data_len,
			    name, "e %d host %x page %x len %u data_len %lu", e, r.host,
			    data()[1], data()[2] << 8 | data()[3], (unsigned long)r.data_len);
		}
		memset(data(), 0xee, 256);
		c = cmd_in((uint8_t[]){ 0x12, 1, 0, 1, 0, 0 }, 6, 256);
		e = run(&c, &r);
		tap(!e && good(&r) && data()[1] == 0 && data()[3] == 6 &&
		    !memcmp(data() + 4, pages, 6), "inquiry-vpd-list",
		    "e %d host %x n %u", e, r.host, data()[3]);
	}
	c = cmd_in((uint8_t[]){ 0x12, 1, 0x99, 1, 0, 0 }, 6, 256);
	CHECK_SENSE("inquiry-vpd-unknown", c, 5, 0x24, 0);
	c = cmd_in((uint8_t[]){ 0x12, 0, 0x80, 1, 0, 0 }, 6, 256);
	CHECK_SENSE("inquiry-page-without-evpd", c, 5, 0x24, 0);

	/* READ CAPACITY 10 / 16 */
	c = cmd_in((uint8_t[]){ 0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0 }, 10, 8);
	e = run(&c, &r);
	tap(!e && good(&r) && get_be32(data()) == disk_blocks - 1 &&
	    get_be32(data() + 4) == 512, "read-capacity-10", "last %u bs %u",
	    get_be32(data()), get_be32(data() + 4));
	memset(cdb, 0, 16);
	cdb[0] = 0x9e; cdb[1] = 0x10; be32(&cdb[10], 32);
	c = cmd_in(cdb, 16, 32);
	e = run(&c, &r);
	{
		uint8_t lbpme = data()[14] & 0x80, lbpu;
		int ok = !e && good(&r), want = bdev_discards(disk);

		/*
		 * LBPME exactly when VPD 0xb2 offers UNMAP, and that exactly
		 * when the backing discards (null_blk discard=1 does)
		 */
		memset(data(), 0xee, 64);
		c = cmd_in((uint8_t[]){ 0x12, 1, 0xb2, 0, 64, 0 }, 6, 64);
		e = run(&c, &r);
		ok = ok && !e && good(&r) && data()[1] == 0xb2;
		lbpu = data()[5] & 0x80;
		c = cmd_in(cdb, 16, 32);
		e = run(&c, &r);
		tap(ok && !e && good(&r) && get_be64(data()) == disk_blocks - 1 &&
		    !!lbpme == !!lbpu && want >= 0 && !!lbpu == want, "read-capacity-16-lbpme",
		    "last %lu lbpme %x lbpu %x, the backing discards: %d",
		    (unsigned long)get_be64(data()), lbpme, lbpu, want);
	}

	/* MODE SENSE */
	c = cmd_in((uint8_t[]){ 0x1a, 0, 0x3f, 0, 255, 0 }, 6, 255);
	e = run(&c, &r);
	tap(!e && good(&r) && data()[0] + 1 == (int)r.data_len && data()[3] == 8 &&
	    data()[12] == 0x08 && data()[32] == 0x0a, "mode-sense-6-all",
	    "len %u bd %u p0 %x", data()[0], data()[3], data()[12]);
	/* a file has a volatile cache (the page cache): WCE set */
	c = cmd_in((uint8_t[]){ 0x5a, 0x08, 0x08, 0, 0, 0, 0, 0, 255, 0 }, 10, 255);
	c.target = 1;
	e = run(&c, &r);
	tap(!e && good(&r) && data()[8] == 0x08 && (data()[10] & 0x04),
	    "mode-sense-10-caching-wce", "p %x wce %x", data()[8], data()[10]);
	c = cmd_in((uint8_t[]){ 0x1a, 0, 0xc8, 0, 255, 0 }, 6, 255);
	CHECK_SENSE("mode-sense-saved-values", c, 5, 0x39, 0);
	c = cmd_in((uint8_t[]){ 0x1a, 0, 0x19, 0, 255, 0 }, 6, 255);
	CHECK_SENSE("mode-sense-unknown-page", c, 5, 0x24, 0);

	/* REPORT LUNS: LUN 0 and 1 on target 0 */
	memset(cdb, 0, 16);
	cdb[0] = 0xa0; be32(&cdb[6], 256);
	c = cmd_in(cdb, 12, 256);
	e = run(&c, &r);
	tap(!e && good(&r) && get_be32(data()) == 16 && data()[9] == 0 &&
	    data()[17] == 1, "report-luns", "len %u", get_be32(data()));

	/* TEST UNIT READY, REQUEST SENSE */
	c = (struct cmd){ .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	CHECK_GOOD("test-unit-ready", c);
	c = cmd_in((uint8_t[]){ 0x03, 0, 0, 0, 18, 0 }, 6, 18);
	e = run(&c, &r);
	tap(!e && good(&r) && data()[0] == 0x70 && data()[2] == 0, "request-sense",
	    "%x %x", data()[0], data()[2]);

	/* SYNCHRONIZE CACHE 10/16 */
	c = (struct cmd){ .cdb = { 0x35 }, .cdb_len = 10, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	CHECK_GOOD("synchronize-cache-10", c);
	c = (struct cmd){ .cdb = { 0x91 }, .cdb_len = 16, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	CHECK_GOOD("synchronize-cache-16", c);

	/* VERIFY 10/16 */
	c = (struct cmd){ .cdb = { 0x2f, 0, 0, 0, 0, 0, 0, 0, 8 }, .cdb_len = 10,
			  .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	CHECK_GOOD("verify-10", c);
	c = (struct cmd){ .cdb = { 0x8f }, .cdb_len = 16, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	be32(&c.cdb[10], 8);
	CHECK_GOOD("verify-16", c);
	c.cdb[1] = 0x02;
	CHECK_SENSE("verify-bytchk-refused", c, 5, 0x24, 0);
	c.cdb[1] = 0;
	be64(&c.cdb[2], disk_blocks);
	CHECK_SENSE("verify-out-of-range", c, 5, 0x21, 0);

	/* errors */
	c = (struct cmd){ .cdb = { 0xc7 }, .cdb_len = 10, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	CHECK_SENSE("unknown-opcode", c, 5, 0x20, 0);
	c = rw16(0, disk_blocks - 1, 2, data(), 512);
	CHECK_SENSE("read-lba-out-of-range", c, 5, 0x21, 0);
	c = rw16(0, ~0ull - 1, 4, data(), 512);
	CHECK_SENSE("read-lba-overflow", c, 5, 0x21, 0);
	c = rw16(0, 0, 8, data(), 512);
	c.data_len = 512;
	CHECK_HOST("read-buffer-too-small", c, BTSTAT_DATARUN);
	c = (struct cmd){ .cdb = { 0 }, .cdb_len = 6, .target = 5,
			  .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	CHECK_HOST("target-absent-seltimeo", c, BTSTAT_SELTIMEO);
	c = (struct cmd){ .cdb = { 0 }, .cdb_len = 6, .target = 200,
			  .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	CHECK_HOST("target-out-of-range", c, BTSTAT_SELTIMEO);
	c = (struct cmd){ .cdb = { 0 }, .cdb_len = 6, .lun = 7,
			  .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	CHECK_SENSE("lun-absent", c, 5, 0x25, 0);
	c = cmd_in((uint8_t[]){ 0x12, 0, 0, 0, 96, 0 }, 6, 96);
	c.lun = 7;
	e = run(&c, &r);
	tap(!e && good(&r) && data()[0] == 0x7f, "inquiry-lun-absent-pq3",
	    "type %x", data()[0]);
	c = cmd_in((uint8_t[]){ 0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0 }, 6, 512);
	CHECK_SENSE("cdb-shorter-than-opcode", c, 5, 0x24, 0);
}

static void check_integrity(void)
{
	uint8_t *w = data(), *rd = data() + (4u << 20);
	uint32_t seed = (uint32_t)time(NULL), i, bad = 0;
	struct result r;
	struct cmd c;
	int e;

	/* per-block patterns at scattered LBAs, READ/WRITE 6/10/12/16 */
	for (i = 0; i < 64; i++) {
		uint64_t lba = (i * 7919ull) % (disk_blocks - 64);
		uint32_t n = 1 + i % 16;

		pattern(w, lba, n, seed);
		c = rw16(1, lba, n, w, 512);
		if (i % 4 == 1) {	/* WRITE(10) */
			memset(c.cdb, 0, 16);
			c.cdb[0] = 0x2a; be32(&c.cdb[2], lba);
			c.cdb[7] = 0; c.cdb[8] = n; c.cdb_len = 10;
		} else if (i % 4 == 2) {	/* WRITE(12) */
			memset(c.cdb, 0, 16);
			c.cdb[0] = 0xaa; be32(&c.cdb[2], lba); be32(&c.cdb[6], n);
			c.cdb_len = 12;
		} else if (i % 4 == 3 && lba < (1 << 21)) {	/* WRITE(6) */
			memset(c.cdb, 0, 16);
			c.cdb[0] = 0x0a; c.cdb[1] = lba >> 16; c.cdb[2] = lba >> 8;
			c.cdb[3] = lba; c.cdb[4] = n; c.cdb_len = 6;
		}
		e = run(&c, &r);
		if (e || !good(&r) || r.data_len != n * 512u)
			bad++;
		memset(rd, 0, n * 512);
		c = rw16(0, lba, n, rd, 512);
		if (i % 2) {	/* READ(10) */
			memset(c.cdb, 0, 16);
			c.cdb[0] = 0x28; be32(&c.cdb[2], lba); c.cdb[8] = n;
			c.cdb_len = 10;
		}
		e = run(&c, &r);
		if (e || !good(&r) || memcmp(w, rd, n * 512))
			bad++;
	}
	tap(!bad, "integrity-rw-6-10-12-16", "%u mismatches", bad);

	/* SG lists whose elements split blocks across scattered pages */
	{
		static const uint32_t lens[] = { 1536, 2560, 512, 3584, 4096, 1024, 3072 };
		uint8_t *bufs[7];
		struct sg_trip t;
		uint32_t k;

		for (k = 0; k < 7; k++)
			bufs[k] = data() + (12u << 20) + k * 3 * PG + (k % 4) * 512;
		t = sg_round_trip(bufs, lens, 7, data() + (8u << 20), rd, seed + 1);
		tap(!t.write_e && good(&t.write) && !t.flat_e && good(&t.flat) && t.flat_same,
		    "integrity-sg-write", "e %d host %x", t.write_e, t.write.host);
		/* and read back through the same SG list */
		tap(!t.sg_e && good(&t.sg) && !t.sg_bad, "integrity-sg-read", "e %d bad %u",
		    t.sg_e, t.sg_bad);
	}

	/* FUA write */
	pattern(w, 77, 8, seed + 2);
	c = rw16(1, 77, 8, w, 512);
	c.cdb[1] = 0x08;
	CHECK_GOOD("write-fua", c);
}

static uint64_t file_blocks(const char *path)
{
	struct stat st;

	if (stat(path, &st))
		return 0;
	return st.st_blocks;
}

/* UNMAP of one descriptor, its parameter list in @w */
static struct cmd unmap_cmd(uint8_t *w, uint64_t lba, uint32_t nblk)
{
	memset(w, 0, 24);
	w[1] = 22;
	w[3] = 16;
	be64(w + 8, lba);
	be32(w + 16, nblk);
	return (struct cmd){ .cdb = { 0x42, 0, 0, 0, 0, 0, 0, 0, 24 }, .cdb_len = 10,
			     .flags = PVSCSI_FLAG_CMD_DIR_TODEVICE,
			     .data_gpa = gpa(w), .data_len = 24 };
}

static void check_unmap(const char *file)
{
	uint8_t *w = data();
	struct result r;
	struct cmd c;
	uint64_t before, after;
	int e;

	/* fill 1 MiB at LBA 4096 of the file LUN (target 1), then UNMAP it */
	pattern(w, 4096, 2048, 9);
	c = rw16(1, 4096, 2048, w, 512);
	c.target = 1;
	CHECK_GOOD("file-write-1m", c);
	before = file_blocks(file);
	c = unmap_cmd(w, 4096, 1024);
	c.target = 1;
	e = run(&c, &r);
	after = file_blocks(file);
	tap(!e && good(&r) && after + 1024 <= before, "unmap-punches-hole",
	    "host %x scsi %x blocks %lu -> %lu", r.host, r.scsi,
	    (unsigned long)before, (unsigned long)after);
	/* WRITE SAME(16) with UNMAP */
	c = (struct cmd){ .cdb = { 0x93, 0x08 }, .cdb_len = 16, .target = 1,
			  .flags = PVSCSI_FLAG_CMD_DIR_TODEVICE, .data_gpa = gpa(w),
			  .data_len = 512 };
	be64(&c.cdb[2], 5120);
	be32(&c.cdb[10], 1024);
	before = after;
	e = run(&c, &r);
	after = file_blocks(file);
	tap(!e && good(&r) && after + 1024 <= before, "write-same-16-unmap",
	    "host %x scsi %x blocks %lu -> %lu", r.host, r.scsi,
	    (unsigned long)before, (unsigned long)after);
	/* holes read back as zeroes */
	memset(w, 0xaa, 4096);
	c = rw16(0, 4096, 8, w, 512);
	c.target = 1;
	e = run(&c, &r);
	tap(!e && good(&r) && !w[0] && !memcmp(w, w + 1, 4095), "unmapped-reads-zero",
	    "w0 %x", w[0]);
	c = (struct cmd){ .cdb = { 0x93, 0x00 }, .cdb_len = 16, .target = 1,
			  .flags = PVSCSI_FLAG_CMD_DIR_TODEVICE, .data_gpa = gpa(w),
			  .data_len = 512 };
	be32(&c.cdb[10], 8);
	CHECK_SENSE("write-same-without-unmap-refused", c, 5, 0x24, 0);
	/* UNMAP with a descriptor beyond the end changes nothing */
	c = unmap_cmd(w, ~0ull - 10, 100);
	c.target = 1;
	CHECK_SENSE("unmap-out-of-range", c, 5, 0x21, 0);
}

static void check_readonly(void)
{
	struct cmd c = rw16(1, 0, 1, data(), 512);
	struct result r;
	int e;

	c.target = 2;
	CHECK_SENSE("write-read-only-lun", c, 7, 0x27, 0);
	c = rw16(0, 0, 1, data(), 512);
	c.target = 2;
	CHECK_GOOD("read-read-only-lun", c);
	c = cmd_in((uint8_t[]){ 0x1a, 0, 0x3f, 0, 255, 0 }, 6, 255);
	c.target = 2;
	e = run(&c, &r);
	tap(!e && good(&r) && (data()[2] & 0x80), "mode-sense-wp-bit", "%x", data()[2]);
	c = (struct cmd){ .cdb = { 0x42, 0, 0, 0, 0, 0, 0, 0, 24 }, .cdb_len = 10,
			  .target = 2, .flags = PVSCSI_FLAG_CMD_DIR_TODEVICE,
			  .data_gpa = gpa(data()), .data_len = 24 };
	CHECK_SENSE("unmap-read-only-lun", c, 7, 0x27, 0);
}

static void check_hostile(void)
{
	struct pvscsi_sg_element *sg = page(P_SG);
	struct vps_stats s0, s1;
	struct result r;
	struct cmd c;
	int e, i;

	c = (struct cmd){ .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_NONE, .raw = 1,
			  .context = 0 };
	e = run(&c, &r);
	/* zero is a legal cookie (SeaBIOS uses it): echoed, command runs */
	tap(!e && good(&r) && r.context == 0, "context-zero-echoed",
	    "e %d host %x", e, r.host);
	c = (struct cmd){ .cdb_len = 17, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	CHECK_HOST("cdb-len-17", c, BTSTAT_INVPARAM);
	c = (struct cmd){ .cdb_len = 255, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	CHECK_HOST("cdb-len-255", c, BTSTAT_INVPARAM);
	c = (struct cmd){ .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_OUT_OF_BAND_CDB };
	CHECK_HOST("out-of-band-cdb", c, BTSTAT_INVPARAM);
	c = (struct cmd){ .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_TOHOST |
			  PVSCSI_FLAG_CMD_DIR_TODEVICE };
	CHECK_HOST("two-directions", c, BTSTAT_INVPARAM);
	c = (struct cmd){ .cdb_len = 6, .flags = 1u << 20 };
	CHECK_HOST("unknown-flag", c, BTSTAT_INVPARAM);
	/* data outside the memory table */
	c = rw16(0, 0, 8, data(), 512);
	c.data_gpa = GPA_BASE + RAM_SIZE - 1024;
	CHECK_HOST("data-crosses-table-end", c, BTSTAT_INVPARAM);
	c.data_gpa = 0x1000;
	CHECK_HOST("data-below-table", c, BTSTAT_INVPARAM);
	c.data_gpa = ~0ull - 100;
	CHECK_HOST("data-addr-wraps", c, BTSTAT_INVPARAM);
	c = rw16(0, 0, 8, data(), 512);
	c.data_len = 1ull << 40;
	CHECK_HOST("data-len-huge", c, BTSTAT_INVPARAM);
	/* SG problems */
	for (i = 0; i < 129; i++) {
		sg[i].addr = gpa(data()) + i * 512;
		sg[i].length = 512;
		sg[i].flags = 0;
	}
	c = rw16(0, 0, 129, NULL, 512);
	c.data_gpa = gpa(sg);
	c.flags |= PVSCSI_FLAG_CMD_WITH_SG_LIST;
	CHECK_HOST("sg-count-over-limit", c, BTSTAT_INVPARAM);
	c = rw16(0, 0, 128, NULL, 512);
	c.data_gpa = gpa(sg);
	c.flags |= PVSCSI_FLAG_CMD_WITH_SG_LIST;
	CHECK_GOOD("sg-count-at-limit", c);
	sg[3].addr = GPA_BASE + RAM_SIZE + PG;
	c = rw16(0, 0, 8, NULL, 512);
	c.data_gpa = gpa(sg);
	c.flags |= PVSCSI_FLAG_CMD_WITH_SG_LIST;
	CHECK_HOST("sg-addr-outside-table", c, BTSTAT_INVPARAM);
	sg[3].addr = gpa(data());
	sg[2].flags = 1;
	CHECK_HOST("sg-chain-flag", c, BTSTAT_INVPARAM);
	sg[2].flags = 0;
	for (i = 0; i < PVSCSI_MAX_SG_ENTRIES_PER_SEGMENT; i++)
		sg[i].length = i < 4 ? 512 : 0;
	CHECK_HOST("sg-total-short-of-data-len", c, BTSTAT_INVPARAM);
	for (i = 0; i < 8; i++)
		sg[i].length = 512;
	c.data_gpa = GPA_BASE + RAM_SIZE - 64;
	CHECK_HOST("sg-page-outside-table", c, BTSTAT_INVPARAM);
	/*
	 * Segments off the 512-byte grid (OVMF's PvScsiDxe uses a buffer 255
	 * bytes into a page) go through the module's bounce pages: a WRITE
	 * from such a list reads back aligned, and a READ into it lands at
	 * the guest's bytes.  The LBAs are the integrity test's.
	 */
	{
		static const uint32_t ul[4] = { 100, 924, 3000, 4168 };
		uint8_t *bufs[4], *src = data() + (20u << 20);
		struct sg_trip t;
		struct result r;
		uint32_t k;
		int e;

		for (k = 0; k < 4; k++)
			bufs[k] = data() + (16u << 20) + k * 3 * PG + 36 + k * 7;
		t = sg_round_trip(bufs, ul, 4, src, data() + (24u << 20), 77);
		tap(!t.write_e && good(&t.write), "sg-misaligned-write",
		    "run %d host 0x%x scsi 0x%x", t.write_e, t.write.host, t.write.scsi);
		tap(!t.flat_e && good(&t.flat) && t.flat_same, "sg-misaligned-write-data",
		    "e %d host 0x%x", t.flat_e, t.flat.host);
		tap(!t.sg_e && good(&t.sg) && !t.sg_bad, "sg-misaligned-read-data",
		    "e %d bad %u", t.sg_e, t.sg_bad);
		/* one flat buffer 255 bytes into a page, as PvScsiDxe's */
		c = rw16(0, 1000, 8, data() + (28u << 20) + 255, 512);
		e = run(&c, &r);
		tap(!e && good(&r) && !memcmp(data() + (28u << 20) + 255, src, 4096),
		    "flat-misaligned-read-data", "e %d host 0x%x", e, r.host);
		for (k = 0; k < 8; k++) {
			sg[k].addr = gpa(data()) + k * 512;
			sg[k].length = 512;
		}
	}

	/* a producer more than a ring ahead stops the adapter until reset */
	s0 = stats();
	rs->req_prod_idx = req_prod + REQ_ENTRIES + 5;
	kick();
	usleep(200000);
	s1 = stats();
	tap(s1.errors_guest > s0.errors_guest && rs->cmp_prod_idx == cmp_cons,
	    "producer-ahead-breaks-adapter", "errors %llu -> %llu",
	    (unsigned long long)s0.errors_guest, (unsigned long long)s1.errors_guest);
	rs->req_prod_idx = req_prod;
	c = (struct cmd){ .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	put_req(&c, next_ctx++, 0);
	kick();
	tap(get_cmps(&r, 1, 300) == 0, "broken-adapter-stays-quiet", "got a completion");
	req_prod--;
	tap(!reset(VPS_RESET_ADAPTER, 0, 0), "adapter-reset", "%s", strerror(errno));
	memset(page(P_RS), 0, PG);
	req_prod = 0;
	cmp_cons = 0;
	msg_cons = 0;
	tap(!setup_rings(REQ_PAGES, CMP_PAGES, gpa(page(P_RS))) && !setup_msg(),
	    "setup-after-reset", "%s", strerror(errno));
	c = (struct cmd){ .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	CHECK_GOOD("io-after-reset", c);

	/* a guest that moves the completion consumer ahead of the producer */
	rs->cmp_cons_idx = cmp_cons + 5000;
	c = (struct cmd){ .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	put_req(&c, next_ctx++, 0);
	kick();
	tap(get_cmps(&r, 1, 300) == 0, "cmp-consumer-ahead-no-completion", "posted");
	new_rings(CMP_PAGES);
}

static void check_ioctls(const char *disk)
{
	struct vps_lun l = {};
	uint32_t v = 0;
	int fd2, e;

	tap(!ioctl(vfd, VPS_GET_ABI_VERSION, &v) && v == VPS_ABI_VERSION,
	    "abi-version", "v %u", v);
	fd2 = open("/dev/vhost-pvscsi", O_RDWR);
	{
		int saved = vfd;

		vfd = fd2;
		e = set_mem(GPA_BASE, RAM_SIZE, ram);
		tap(e && errno == EPERM, "not-owner-eperm", "e %d errno %d", e, errno);
		e = ioctl(vfd, VHOST_SET_OWNER);
		tap(!e, "set-owner", "%s", strerror(errno));
		e = ioctl(vfd, VHOST_SET_OWNER);
		tap(e && errno == EBUSY, "set-owner-twice-ebusy", "errno %d", errno);
		e = setup_rings(REQ_PAGES, CMP_PAGES, gpa(page(P_RS)));
		tap(e && errno == EINVAL, "rings-before-mem-table", "errno %d", errno);
		{
			uint64_t one = 1;
			struct vps_eventfd k = { 0, eventfd(0, 0) };

			tap(!ioctl(vfd, VPS_SET_KICK_FD, &k) &&
			    write(k.fd, &one, 8) == 8, "kick-before-setup", "%s",
			    strerror(errno));
			usleep(50000);
			close(k.fd);
		}
		set_mem(GPA_BASE, RAM_SIZE, ram);
		e = setup_rings(3, CMP_PAGES, gpa(page(P_RS)));
		tap(e && errno == EINVAL, "ring-pages-not-power-of-two", "errno %d", errno);
		e = setup_rings(0, CMP_PAGES, gpa(page(P_RS)));
		tap(e && errno == EINVAL, "ring-pages-zero", "errno %d", errno);
		e = setup_rings(64, CMP_PAGES, gpa(page(P_RS)));
		tap(e && errno == EINVAL, "ring-pages-over-32", "errno %d", errno);
		e = setup_rings(REQ_PAGES, CMP_PAGES, GPA_BASE + RAM_SIZE);
		tap(e && errno == EFAULT, "rings-state-outside-memory", "errno %d", errno);
		{
			struct pvscsi_cmd_setup_rings c = {};

			c.req_ring_num_pages = 1;
			c.cmp_ring_num_pages = 1;
			c.rings_state_ppn = gpa(page(P_RS)) / PG;
			c.req_ring_ppns[0] = 5;	/* below the table */
			c.cmp_ring_ppns[0] = gpa(page(P_CMP)) / PG;
			e = ioctl(vfd, VPS_SETUP_RINGS, &c);
			tap(e && errno == EFAULT, "ring-ppn-outside-memory", "errno %d", errno);
			c.req_ring_ppns[0] = ~0ull;
			e = ioctl(vfd, VPS_SETUP_RINGS, &c);
			tap(e && errno == EFAULT, "ring-ppn-overflow", "errno %d", errno);
		}
		{
			struct {
				struct vhost_memory m;
				struct vhost_memory_region r[2];
			} t = {};

			t.m.nregions = 2;
			t.r[0].guest_phys_addr = 0;
			t.r[0].memory_size = 2 * PG;
			t.r[0].userspace_addr = (uintptr_t)ram;
			t.r[1].guest_phys_addr = PG;
			t.r[1].memory_size = PG;
			t.r[1].userspace_addr = (uintptr_t)ram;
			e = ioctl(vfd, VHOST_SET_MEM_TABLE, &t);
			tap(e && errno == EINVAL, "mem-table-overlap", "errno %d", errno);
			t.m.nregions = 1000;
			e = ioctl(vfd, VHOST_SET_MEM_TABLE, &t);
			tap(e && errno == E2BIG, "mem-table-too-many", "errno %d", errno);
		}
		vfd = saved;
		close(fd2);
	}
	e = ioctl(vfd, _IO(VPS_IOC_TYPE, 0xee));
	tap(e && errno == ENOTTY, "unknown-ioctl", "errno %d", errno);
	e = attach(0, 0, disk, 0, 0);
	tap(e && errno == EEXIST, "attach-duplicate", "errno %d", errno);
	e = attach(9, 0, disk, 0, 1024);
	tap(e && errno == EINVAL, "attach-bad-block-size", "errno %d", errno);
	e = attach(VPS_MAX_TARGETS, 0, disk, 0, 0);
	tap(e && errno == EINVAL, "attach-target-range", "errno %d", errno);
	e = attach(9, 0, disk, 0x80, 0);
	tap(e && errno == EINVAL, "attach-unknown-flag", "errno %d", errno);
	l.target = 9;
	l.fd = 12345;
	e = ioctl(vfd, VPS_ATTACH_LUN, &l);
	tap(e && errno == EBADF, "attach-bad-fd", "errno %d", errno);
	l.fd = kick_fd;
	e = ioctl(vfd, VPS_ATTACH_LUN, &l);
	tap(e && errno == EINVAL, "attach-eventfd-refused", "errno %d", errno);
	l.fd = open(disk, O_RDONLY);
	e = ioctl(vfd, VPS_ATTACH_LUN, &l);
	tap(e && errno == EACCES, "attach-rw-on-readonly-fd", "errno %d", errno);
	close(l.fd);
	l = (struct vps_lun){ .target = 9, .fd = -1 };
	l.reserved[3] = 1;
	e = ioctl(vfd, VPS_ATTACH_LUN, &l);
	tap(e && errno == EINVAL, "attach-reserved-nonzero", "errno %d", errno);
	e = detach(9, 3);
	tap(e && errno == ENOENT, "detach-absent", "errno %d", errno);
	{
		/* the VMM's identity (scsi-hd's) is what INQUIRY answers */
		static const uint8_t wwn[8] = { 0x50, 0x00, 0xc5, 0x00, 0x15, 0xea, 0x71, 0xad };
		struct cmd c;
		struct result r;
		const uint8_t *d;

		l = (struct vps_lun){ .target = 9, .fd = open(disk, O_RDWR | O_DIRECT) };
		memcpy(l.vendor, "ACME    ", 8);
		memcpy(l.product, "HOTLUN          ", 16);
		memcpy(l.serial, "VPS-ID-0001", 11);
		memcpy(l.wwn, wwn, 8);
		e = ioctl(vfd, VPS_ATTACH_LUN, &l);
		close(l.fd);
		tap(!e, "attach-identity", "%s", strerror(errno));
		c = cmd_in((uint8_t[]){ 0x12, 0, 0, 0, 96, 0 }, 6, 96);
		c.target = 9;
		e = run(&c, &r);
		tap(!e && good(&r) && !memcmp(data() + 8, "ACME    HOTLUN          ", 24),
		    "identity-inquiry", "%.24s", (char *)data() + 8);
		c = cmd_in((uint8_t[]){ 0x12, 1, 0x80, 1, 0, 0 }, 6, 256);
		c.target = 9;
		e = run(&c, &r);
		tap(!e && good(&r) && data()[3] == 11 && !memcmp(data() + 4, "VPS-ID-0001", 11),
		    "identity-serial", "len %u %.20s", data()[3], (char *)data() + 4);
		/* the NAA designator (binary, LU) carries the wwn */
		c = cmd_in((uint8_t[]){ 0x12, 1, 0x83, 1, 0, 0 }, 6, 256);
		c.target = 9;
		e = run(&c, &r);
		for (d = data() + 4; d < data() + 4 + (data()[2] << 8 | data()[3]); d += 4 + d[3])
			if ((d[1] & 0xf) == 3)
				break;
		tap(!e && good(&r) && d < data() + 256 && (d[1] & 0xf) == 3 && d[3] == 8 &&
		    !memcmp(d + 4, wwn, 8), "identity-wwn-naa", "e %d", e);
		tap(!detach(9, 0), "detach-identity", "%s", strerror(errno));
		/* its DEV_ADDED and DEV_REMOVED are not check_messages()'s */
		msg_cons = rs->msg_prod_idx;
		rs->msg_cons_idx = msg_cons;
	}
	{
		struct vps_abort a = { 123456789, 0, 0 };

		e = ioctl(vfd, VPS_ABORT, &a);
		tap(e && errno == ENOENT, "abort-unknown-context", "errno %d", errno);
	}
	{
		struct vps_reset r = { 7, 0, 0, 0 };

		e = ioctl(vfd, VPS_RESET, &r);
		tap(e && errno == EINVAL, "reset-unknown-kind", "errno %d", errno);
	}
}

static void check_messages(const char *disk)
{
	struct pvscsi_msg_dev_status *m = page(P_MSG);
	int e;

	e = attach(3, 2, disk, VPS_LUN_READ_ONLY, 0);
	tap(!e && rs->msg_prod_idx == msg_cons + 1 && m[msg_cons].type == PVSCSI_MSG_DEV_ADDED &&
	    m[msg_cons].target == 3 && m[msg_cons].lun[1] == 2, "msg-dev-added",
	    "e %d prod %u type %u", e, rs->msg_prod_idx, m[msg_cons].type);
	msg_cons++;
	rs->msg_cons_idx = msg_cons;
	e = detach(3, 2);
	tap(!e && rs->msg_prod_idx == msg_cons + 1 &&
	    m[msg_cons].type == PVSCSI_MSG_DEV_REMOVED, "msg-dev-removed",
	    "e %d type %u", e, m[msg_cons].type);
	msg_cons++;
	rs->msg_cons_idx = msg_cons;
}

/*
 * The dirty log (VPS_SET_LOG), for live migration: while it is on, every
 * guest page the module writes has its bit set, and no other: the data of
 * READs and emulated data-in commands (not of WRITEs), sense data, the
 * completion ring page of the slot, the rings state page, message ring
 * entries.  Off: nothing is set.  Bad arguments are refused, and so is a
 * memory table the bitmap would not cover while the log is on.  A bitmap
 * that goes away counts log_errors, and commands still complete.
 */
static uint8_t *logmap;
#define LOG_BYTES	((GPA_BASE + RAM_SIZE) / PG / 8)

static int set_log(uint64_t base, uint64_t size, uint32_t flags, uint32_t rsv)
{
	struct vps_log l = { .base = base, .size = size, .flags = flags,
			     .reserved = rsv };

	return ioctl(vfd, VPS_SET_LOG, &l);
}

static int logged(const void *p)
{
	uint64_t n = gpa(p) / PG;

	return logmap[n / 8] >> (n % 8) & 1;
}

/* how many guest pages have their bit set */
static unsigned int nlogged(void)
{
	unsigned int i, n = 0;

	for (i = 0; i < LOG_BYTES; i++)
		n += __builtin_popcount(logmap[i]);
	return n;
}

static void check_dirty_log(const char *disk)
{
	uint8_t *rd = page(P_DATA + 10), *wr = page(P_DATA + 20), *sense;
	static const uint8_t inq[6] = { 0x12, 0, 0, 0, 96, 0 };
	uint32_t slot;
	struct vps_stats s0, s1;
	struct result r;
	struct cmd c;
	int e;

	logmap = mmap(NULL, LOG_BYTES, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (logmap == MAP_FAILED)
		die("mmap log");
	tap(set_log((uintptr_t)logmap, LOG_BYTES, VPS_LOG_ENABLE, 1) < 0 && errno == EINVAL,
	    "log-reserved-refused", "%s", strerror(errno));
	tap(set_log((uintptr_t)logmap, LOG_BYTES, 2, 0) < 0 && errno == EINVAL,
	    "log-flags-refused", "%s", strerror(errno));
	tap(set_log((uintptr_t)logmap + 1, LOG_BYTES - 8, VPS_LOG_ENABLE, 0) < 0 &&
	    errno == EINVAL, "log-unaligned-refused", "%s", strerror(errno));
	tap(set_log((uintptr_t)logmap, LOG_BYTES - 1, VPS_LOG_ENABLE, 0) < 0 &&
	    errno == EINVAL, "log-too-small-refused", "%s", strerror(errno));
	s0 = stats();
	tap(!set_log((uintptr_t)logmap, LOG_BYTES, VPS_LOG_ENABLE, 0), "log-on",
	    "%s", strerror(errno));

	/* a READ of 4 pages: those, the completion's page, the state page */
	slot = cmp_cons % cmp_entries;
	c = rw16(0, 64, 4 * PG / 512, rd, 512);
	e = run(&c, &r);
	tap(!e && good(&r) && logged(rd) && logged(rd + 3 * PG) && !logged(rd + 4 * PG) &&
	    !logged(rd - 1) && logged(page(P_RS)) &&
	    logged(page(P_CMP + slot / PVSCSI_CMP_DESCS_PER_PAGE)) && nlogged() == 6,
	    "log-read", "run %d data %d %d past %d %d rs %d cmp %d: %u pages", e,
	    logged(rd), logged(rd + 3 * PG), logged(rd + 4 * PG), logged(rd - 1),
	    logged(page(P_RS)), logged(page(P_CMP + slot / PVSCSI_CMP_DESCS_PER_PAGE)),
	    nlogged());

	/* a WRITE's data is the guest's own: not logged */
	memset(logmap, 0, LOG_BYTES);
	c = rw16(1, 64, 2 * PG / 512, wr, 512);
	e = run(&c, &r);
	tap(!e && good(&r) && !logged(wr) && !logged(wr + PG) && logged(page(P_RS)) &&
	    nlogged() == 2, "log-write-data-not-logged", "run %d data %d %d: %u pages",
	    e, logged(wr), logged(wr + PG), nlogged());

	/* emulated data-in */
	memset(logmap, 0, LOG_BYTES);
	c = cmd_in(inq, 6, 96);
	e = run(&c, &r);
	tap(!e && good(&r) && logged(data()), "log-emulated-data-in", "run %d data %d",
	    e, logged(data()));

	/* sense data: an unsupported opcode; run() puts it at slot * 64 */
	memset(logmap, 0, LOG_BYTES);
	memset(&c, 0, sizeof(c));
	c.cdb[0] = 0xff;
	c.cdb_len = 6;
	sense = (uint8_t *)page(P_SENSE) + (req_prod % REQ_ENTRIES) * 64;
	e = run(&c, &r);
	tap(!e && r.scsi == 2 && logged(sense), "log-sense",
	    "run %d scsi 0x%x sense %d", e, r.scsi, logged(sense));

	/* a message ring entry: a LUN attached */
	memset(logmap, 0, LOG_BYTES);
	e = attach(3, 3, disk, VPS_LUN_READ_ONLY, 0);
	tap(logged(page(P_MSG)) && logged(page(P_RS)), "log-message",
	    "attach %d msg %d rs %d", e, logged(page(P_MSG)), logged(page(P_RS)));
	if (!e) {
		msg_cons = rs->msg_prod_idx;
		rs->msg_cons_idx = msg_cons;
		detach(3, 3);
	}
	msg_cons = rs->msg_prod_idx;
	rs->msg_cons_idx = msg_cons;

	/* a memory table beyond the bitmap is refused while the log is on */
	e = set_mem(GPA_BASE + PG, RAM_SIZE, ram);
	tap(e < 0 && errno == EINVAL, "log-mem-table-uncovered-refused", "%d %s", e,
	    strerror(errno));
	s1 = stats();
	tap(s1.log_pages > s0.log_pages && s1.log_errors == s0.log_errors, "log-stats",
	    "pages %llu errors %llu", (unsigned long long)(s1.log_pages - s0.log_pages),
	    (unsigned long long)(s1.log_errors - s0.log_errors));

	/* off: nothing set */
	tap(!set_log(0, 0, 0, 0), "log-off", "%s", strerror(errno));
	memset(logmap, 0, LOG_BYTES);
	c = rw16(0, 64, 4 * PG / 512, rd, 512);
	e = run(&c, &r);
	tap(!e && good(&r) && nlogged() == 0, "log-off-nothing-set", "run %d: %u pages",
	    e, nlogged());

	/* the bitmap unmapped under the module: counted, commands complete */
	tap(!set_log((uintptr_t)logmap, LOG_BYTES, VPS_LOG_ENABLE, 0), "log-on-again",
	    "%s", strerror(errno));
	munmap(logmap, LOG_BYTES);
	s0 = stats();
	c = rw16(0, 64, 4 * PG / 512, rd, 512);
	e = run(&c, &r);
	s1 = stats();
	tap(!e && good(&r) && s1.log_errors > s0.log_errors, "log-unmapped-counted",
	    "run %d errors %llu", e, (unsigned long long)(s1.log_errors - s0.log_errors));
	set_log(0, 0, 0, 0);
}

/*
 * A live migration's adapter hand-over, both ends in this process over the
 * same guest memory (as the source's and the destination's QEMU each map
 * the guest's RAM): VPS_STOP on the source waits for the I/O in flight and
 * posts it all before it returns, then consumes nothing (a request posted
 * meanwhile stays in the ring); a second adapter attaches the same LUN and
 * takes the rings over with VPS_RESUME_RINGS / VPS_RESUME_MSG_RING, which
 * keep the indices in the rings state page; the request posted while the
 * source was stopped completes on the destination, once; data written
 * through the source reads back through the destination; its message ring
 * goes on where the source's stopped.  Also: VPS_STOP 0 runs a stopped
 * adapter again, and bad arguments are refused.
 */
static uint32_t burst(int write, uint64_t lba, uint32_t nblk, uint32_t n,
		      struct result *res, uint32_t *dup);

static int stop(uint32_t on)
{
	return ioctl(vfd, VPS_STOP, &on);
}

/*
 * The adapters' workers: threads of this process (vhost_task) or kthreads,
 * named vhost-pvscsi-<pid> (cut to 15 characters).  Fills @dirs with their
 * /proc directories, this process's threads first; returns how many.
 */
#define MAX_WORKERS 8
static int find_workers(char dirs[MAX_WORKERS][64])
{
	static const char *const top[] = { "/proc/self/task", "/proc" };
	unsigned int i;
	int n = 0;

	for (i = 0; i < 2; i++) {
		DIR *d = opendir(top[i]);
		struct dirent *e;

		if (!d)
			continue;
		while (n < MAX_WORKERS && (e = readdir(d))) {
			char path[300], comm[32] = "";
			FILE *f;

			if (e->d_name[0] < '0' || e->d_name[0] > '9')
				continue;
			snprintf(path, sizeof(path), "%s/%s/comm", top[i], e->d_name);
			f = fopen(path, "r");
			if (!f)
				continue;
			if (fgets(comm, sizeof(comm), f) && !strncmp(comm, "vhost-pvscsi-", 13))
				snprintf(dirs[n++], 64, "%s/%.20s", top[i], e->d_name);
			fclose(f);
		}
		closedir(d);
	}
	return n;
}

/*
 * CPU ticks (user + system) the adapters' workers used so far; -1 when
 * no worker was found or one's stat could not be read (0 ticks of no
 * thread would pass for a worker asleep)
 */
static int64_t worker_ticks(void)
{
	char dirs[MAX_WORKERS][64], path[80], buf[1024], *p;
	unsigned long long ut, stt;
	int64_t sum = 0;
	int i, n = find_workers(dirs);

	if (n <= 0)
		return -1;
	for (i = 0; i < n; i++) {
		FILE *f;

		snprintf(path, sizeof(path), "%.64s/stat", dirs[i]);
		f = fopen(path, "r");
		if (!f)
			return -1;
		p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
		fclose(f);
		/* after "(comm)": state is field 3, utime 14, stime 15 */
		static const char *const fmt =
			"%*c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu %llu";

		if (!p || sscanf(p + 2, fmt, &ut, &stt) != 2)
			return -1;
		sum += ut + stt;
	}
	return sum;
}

static void check_migration(const char *disk)
{
	struct pvscsi_cmd_setup_rings rc = rings_cfg(REQ_PAGES, cmp_entries /
						     PVSCSI_CMP_DESCS_PER_PAGE,
						     gpa(page(P_RS)));
	struct pvscsi_cmd_setup_msg_ring mc = msg_cfg();
	struct pvscsi_msg_dev_status *m = page(P_MSG);
	uint8_t *w = data(), *rd = data() + (4u << 20);
	uint32_t i, seed = (uint32_t)time(NULL) ^ 0x5a5a, cons, prod, dup = 0;
	struct result res[32], r = {};
	uint64_t parked;
	int64_t t0, t1;
	struct cmd c;
	int e, dst;

	tap(stop(2) < 0 && errno == EINVAL, "stop-bad-value-refused", "%s",
	    strerror(errno));
	pattern(w, 2000, 64, seed);
	c = rw16(1, 2000, 64, w, 512);
	CHECK_GOOD("migrate-write-on-source", c);

	/* stop with 32 READs in flight: all posted when it returns */
	for (i = 0; i < 32; i++) {
		c = rw16(0, 2000, 8, rd + (size_t)i * 8 * 512, 512);
		put_req(&c, next_ctx + i, i % 64);
	}
	parked = next_ctx;
	next_ctx += 32;
	kick();
	/* consumed: in flight, or done (nullb is quick) but maybe unposted */
	for (i = 0; i < 1000 && __atomic_load_n(&rs->req_cons_idx, __ATOMIC_ACQUIRE) !=
	     req_prod; i++)
		usleep(1000);
	e = stop(1);
	prod = __atomic_load_n(&rs->cmp_prod_idx, __ATOMIC_ACQUIRE);
	tap(!e && stats().in_flight == 0, "stop-drains-in-flight", "stop %d %s in_flight %llu",
	    e, strerror(errno), (unsigned long long)stats().in_flight);
	tap(prod - cmp_cons == 32 && get_cmps(res, 32, 100) == 32 &&
	    count_dups(res, 32, parked, 32) == 0, "stop-posts-all",
	    "posted %u of 32", prod - cmp_cons);

	/* stopped: a new request stays in the ring */
	c = rw16(0, 2000, 64, rd, 512);
	parked = next_ctx++;
	memset(rd, 0, 64 * 512);
	put_req(&c, parked, 0);
	kick();
	usleep(200000);
	cons = __atomic_load_n(&rs->req_cons_idx, __ATOMIC_ACQUIRE);
	tap(cons == req_prod - 1, "stopped-consumes-nothing", "req_cons %u req_prod %u",
	    cons, req_prod);
	/*
	 * and the doorbell kept for the way back is no work meanwhile: the
	 * worker sleeps (until 2026-12-03 it spun for as long as the VM
	 * stayed stopped)
	 */
	t0 = worker_ticks();
	usleep(500000);
	t1 = worker_ticks();
	tap(t0 >= 0 && t1 >= t0 && t1 - t0 <= 5, "stopped-worker-sleeps",
	    "%lld ticks of CPU in 0.5 s (%lld, %lld: -1 is no worker found)",
	    (long long)(t1 - t0), (long long)t0, (long long)t1);

	/* the destination: a second adapter over the same memory and LUN */
	dst = open("/dev/vhost-pvscsi", O_RDWR);
	if (dst < 0 || ioctl(dst, VHOST_SET_OWNER))
		die("destination");
	e = ioctl(dst, VPS_RESUME_RINGS, &rc);
	tap(e < 0 && errno == EINVAL, "resume-without-memory-refused", "%d %s", e,
	    strerror(errno));
	close(vfd);
	close(kick_fd);
	close(call_fd);
	close(msg_fd);
	vfd = dst;
	calls_seen = 0;
	if (set_mem(GPA_BASE, RAM_SIZE, ram) || attach(0, 0, disk, 0, 0))
		die("destination set-up");
	vps_sim_eventfds(vfd, &kick_fd, &call_fd, &msg_fd);
	prod = rs->cmp_prod_idx;
	e = ioctl(vfd, VPS_RESUME_RINGS, &rc);
	tap(!e && !ioctl(vfd, VPS_RESUME_MSG_RING, &mc), "resume-rings", "%d %s", e,
	    strerror(errno));
	tap(get_cmps(&r, 1, 5000) == 1 && r.context == parked && good(&r) &&
	    rs->cmp_prod_idx == prod + 1, "parked-request-completes-on-destination",
	    "ctx %llu want %llu host 0x%x cmp_prod %u -> %u",
	    (unsigned long long)r.context, (unsigned long long)parked, r.host, prod,
	    rs->cmp_prod_idx);
	tap(!memcmp(w, rd, 64 * 512), "destination-read-data", "data differs");
	tap(get_cmps(&r, 1, 200) == 0, "parked-request-once", "a second completion");
	memset(rd, 0, 64 * 512);
	c = rw16(0, 2000, 64, rd, 512);
	CHECK_GOOD("destination-read", c);
	tap(!memcmp(w, rd, 64 * 512), "destination-read-data-again", "data differs");
	tap(burst(0, 0, 8, 32, res, &dup) == 32 && !dup, "destination-burst",
	    "dups %u", dup);

	/* its message ring goes on where the source's stopped */
	e = attach(3, 4, disk, VPS_LUN_READ_ONLY, 0);
	tap(!e && rs->msg_prod_idx == msg_cons + 1 &&
	    m[msg_cons % (MSG_PAGES * PG / sizeof(*m))].type == PVSCSI_MSG_DEV_ADDED,
	    "destination-message-ring", "e %d prod %u cons %u", e, rs->msg_prod_idx,
	    msg_cons);
	msg_cons = rs->msg_prod_idx;
	rs->msg_cons_idx = msg_cons;

	/* stopped and run again: the doorbell rung meanwhile is served */
	tap(!stop(1), "stop-again", "%s", strerror(errno));
	c = rw16(0, 2000, 8, rd, 512);
	parked = next_ctx++;
	put_req(&c, parked, 0);
	kick();
	tap(get_cmps(&r, 1, 200) == 0, "stopped-again-consumes-nothing", "completed");
	tap(!stop(0) && get_cmps(&r, 1, 5000) == 1 && r.context == parked && good(&r),
	    "run-again-serves-doorbell", "ctx %llu host 0x%x", (unsigned long long)r.context,
	    r.host);
}

/* write VALUE to the module parameter NAME; 0 on success */
static int set_param(const char *name, const char *value)
{
	char path[128];
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "/sys/module/vhost_pvscsi/parameters/%s", name);
	f = fopen(path, "w");
	if (!f)
		return -1;
	ok = fputs(value, f) >= 0;
	return fclose(f) == 0 && ok ? 0 : -1;
}

/*
 * hold_us as the module had it when this test began: the tests of other
 * features set it to 0 for their run (their checks count interrupts per
 * pass, and a worker that holds folds them: what holding does, the hold
 * test checks) and put it back on the way out, as the hold test does
 */
static char hold_us_was[16];

static void hold_us_back(void)
{
	if (hold_us_was[0])
		set_param("hold_us", hold_us_was);
}

static void hold_us_off(void)
{
	FILE *f = fopen("/sys/module/vhost_pvscsi/parameters/hold_us", "r");

	if (!f)
		return;
	if (fgets(hold_us_was, sizeof(hold_us_was), f))
		hold_us_was[strcspn(hold_us_was, "\n")] = 0;
	fclose(f);
	if (hold_us_was[0] && !set_param("hold_us", "0"))
		atexit(hold_us_back);
}

/* this process's (last) adapter's debugfs file, open for reading */
static FILE *adapter_file(void)
{
	char pat[96];
	glob_t g;
	FILE *f;

	snprintf(pat, sizeof(pat), "/sys/kernel/debug/vhost_pvscsi/adapter-%d-*", getpid());
	if (glob(pat, 0, NULL, &g) || !g.gl_pathc)
		return NULL;
	f = fopen(g.gl_pathv[g.gl_pathc - 1], "r");
	globfree(&g);
	return f;
}

/* KEY's value in this process's (last) adapter's debugfs file; 0: none */
static unsigned long long adapter_field(const char *key)
{
	unsigned long long v = 0, x;
	char word[64];
	FILE *f = adapter_file();

	if (!f)
		return 0;
	while (fscanf(f, "%63s", word) == 1)
		if (!strcmp(word, key) && fscanf(f, "%llu", &x) == 1)
			v = x;
	fclose(f);
	return v;
}

/* many I/Os in flight, then resets and aborts: each completes once */
static void check_inflight(void)
{
	static struct result res[256];
	uint32_t i, n = 96, dup, got;
	uint64_t base = next_ctx;
	struct vps_abort a;
	int e;

	for (int round = 0; round < 3; round++) {
		base = next_ctx;
		for (i = 0; i < n; i++) {
			struct cmd c = rw16(i & 1, (i * 64) % (disk_blocks - 64), 64,
					    data() + (size_t)(i % 32) * 32768, 512);

			put_req(&c, next_ctx++, i % 64);
		}
		kick();
		if (round == 0) {
			a = (struct vps_abort){ base + n - 1, 0, 0 };
			e = ioctl(vfd, VPS_ABORT, &a);
			(void)e;
			e = reset(VPS_RESET_DEVICE, 0, 0);
		} else if (round == 1) {
			e = reset(VPS_RESET_BUS, 0, 0);
		} else {
			e = 0;
		}
		got = get_cmps(res, n, 10000);
		dup = count_dups(res, got, base, n);
		tap(!e && got == n && !dup, round == 0 ? "device-reset-inflight-once" :
		    round == 1 ? "bus-reset-inflight-once" : "inflight-complete-once",
		    "e %d got %u/%u dup %u", e, got, n, dup);
		dup = 0;
		tap(get_cmps(res, 1, 100) == 0, round == 0 ? "no-extra-after-device-reset" :
		    round == 1 ? "no-extra-after-bus-reset" : "no-extra-completions",
		    "an extra completion");
	}
	/* adapter reset with I/O in flight: the rings go away, nothing posts */
	for (i = 0; i < n; i++) {
		struct cmd c = rw16(0, (i * 64) % (disk_blocks - 64), 64,
				    data() + (size_t)(i % 32) * 32768, 512);

		put_req(&c, next_ctx++, i % 64);
	}
	kick();
	e = reset(VPS_RESET_ADAPTER, 0, 0);
	tap(!e && stats().in_flight == 0, "adapter-reset-inflight-drained",
	    "e %d in flight %llu", e, (unsigned long long)stats().in_flight);
	memset(page(P_RS), 0, PG);
	req_prod = 0;
	cmp_cons = 0;
	msg_cons = 0;
	setup_rings(REQ_PAGES, CMP_PAGES, gpa(page(P_RS)));
	setup_msg();
	{
		struct cmd c = { .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_NONE };

		CHECK_GOOD("io-after-inflight-reset", c);
	}
}

/*
 * A completion ring smaller than the work the guest queued: the device
 * stops consuming while every completion slot is spoken for, and must go
 * on by itself once the guest frees slots (regression: it waited for a
 * doorbell that a guest which already rang never rings again; found by
 * vps_fuzz seed 2428566230).
 */
static void check_small_cmp_ring(void)
{
	static struct result res[512];
	uint32_t i, n = 256 + 50, got, dup;
	uint64_t base;
	int e;

	tap(!new_rings(1), "small-cmp-ring-setup", "%s", strerror(errno));
	base = next_ctx;
	/*
	 * 256: 128 fill the completion ring, 128 wait behind it; then 50
	 * more, one doorbell: the device may not take them yet
	 */
	for (i = 0; i < n; i++) {
		struct cmd c = { .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_NONE };

		if (i == 256 || i == 0) {
			if (i) {
				usleep(300000);
				/*
				 * 128 completions wait for room the guest
				 * does not make: a migration's stop cannot
				 * bring them into guest memory, and says so
				 * (the VMM then fails the migration); run
				 * again, nothing is lost
				 */
				e = stop(1);
				tap(e < 0 && errno == EBUSY, "stop-backlog-ebusy",
				    "stop %d %s", e, strerror(errno));
				tap(!stop(0), "stop-backlog-run-again", "%s",
				    strerror(errno));
			}
			while (req_prod - rs->req_cons_idx + (i ? 50 : 256) > REQ_ENTRIES)
				usleep(1000);
		}
		put_req(&c, next_ctx++, i % 64);
		if (i == 255 || i == n - 1)
			kick();
	}
	usleep(300000);
	/* get_cmps() consumes, which frees slots; no further kick */
	got = collect(res, n, 3000);
	dup = count_dups(res, got, base, n);
	tap(got == n && !dup, "small-cmp-ring-no-stall", "got %u/%u dup %u, req cons %u",
	    got, n, dup, rs->req_cons_idx);
	new_rings(CMP_PAGES);
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void check_threshold(void)
{
	struct vps_stats s0, s1;
	uint32_t on = 1;
	struct result r;
	struct cmd c = { .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	int e;

	e = ioctl(vfd, VPS_SET_REQ_CALL_THRESHOLD, &on);
	tap(!e && rs->req_call_threshold == 1, "req-call-threshold-enable",
	    "e %d threshold %u", e, rs->req_call_threshold);
	on = 2;
	e = ioctl(vfd, VPS_SET_REQ_CALL_THRESHOLD, &on);
	tap(e && errno == EINVAL, "req-call-threshold-bad-value", "errno %d", errno);
	s0 = stats();
	CHECK_GOOD("io-with-threshold", c);
	s1 = stats();
	tap(s1.completions == s0.completions + 1 && rs->req_call_threshold == 1,
	    "threshold-rearmed-when-idle", "threshold %u", rs->req_call_threshold);

	/*
	 * The doorbell raises the threshold itself, in the thread that rang
	 * (vps_kick_wakeup()), once a round ran with the threshold on: the
	 * requests queued before the worker runs do not ring again.  Not from
	 * another address space (a child's doorbell), and the worker's round
	 * re-arms it as always.
	 */
	{
		unsigned long long r0 = adapter_field("kick_raised"), d0;
		double t0;
		pid_t child;

		d0 = adapter_field("doorbells_rung");
		CHECK_GOOD("io-doorbell-raises", c);
		t0 = now();
		while (__atomic_load_n(&rs->req_call_threshold, __ATOMIC_ACQUIRE) != 1 &&
		       now() - t0 < 1)
			usleep(100);
		tap(adapter_field("kick_raised") == r0 + 1 &&
		    adapter_field("doorbells_rung") == d0 + 1 && rs->req_call_threshold == 1,
		    "doorbell-raises-threshold", "raised +%llu, rung +%llu, threshold %u",
		    adapter_field("kick_raised") - r0, adapter_field("doorbells_rung") - d0,
		    rs->req_call_threshold);
		r0 = adapter_field("kick_raised");
		d0 = adapter_field("doorbells_rung");
		put_req(&c, next_ctx++, 0);
		child = fork();
		if (!child) {
			kick();
			_exit(0);
		}
		waitpid(child, NULL, 0);
		tap(get_cmps(&r, 1, 5000) == 1 && good(&r) &&
		    adapter_field("kick_raised") == r0 &&
		    adapter_field("doorbells_rung") == d0 + 1,
		    "doorbell-other-mm-no-raise", "raised +%llu, rung +%llu",
		    adapter_field("kick_raised") - r0, adapter_field("doorbells_rung") - d0);

		/*
		 * The raise cannot fault (it runs in the eventfd's wake-up,
		 * under a spinlock): when the page is not writable as
		 * mapped, the raise is skipped and the doorbell still wakes
		 * the worker.  fork() makes our private "guest RAM"
		 * copy-on-write: the rings state page is read-only in our
		 * page table until someone writes it, and the worker's
		 * round (a faulting write) does.  The request is queued
		 * before the fork and well after the worker's re-arm and
		 * its second look (VPS_RECHECK_MS), so only the doorbell
		 * can start it.
		 */
		usleep(50000);
		r0 = adapter_field("kick_raised");
		d0 = adapter_field("doorbells_rung");
		put_req(&c, next_ctx++, 0);
		child = fork();
		if (child < 0)
			die("fork");	/* and never kill(-1) below */
		if (!child) {
			pause();
			_exit(0);
		}
		kick();
		e = get_cmps(&r, 1, 5000) == 1 && good(&r);
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		tap(e && adapter_field("kick_raised") == r0 &&
		    adapter_field("doorbells_rung") == d0 + 1,
		    "doorbell-raise-fault-skipped", "served %d, raised +%llu, rung +%llu",
		    e, adapter_field("kick_raised") - r0, adapter_field("doorbells_rung") - d0);
	}
}

/*
 * Regression (the hang after resets under load, vmw_pvscsi guests): a
 * guest stores req_prod_idx, then loads reqCallThreshold without a full
 * barrier in between.  Its load can pass its store: it reads the
 * threshold the device raised while polling and skips the doorbell, while
 * the device, having re-armed, re-reads the old index and goes idle.  We
 * play that guest: after the device re-armed and took its last look, a
 * request is published without a doorbell.  The device must still serve
 * it (it looks again VPS_RECHECK_MS = 5 ms after re-arming, by the clock
 * that CLOCK_MONOTONIC reads).  A round is conclusive when the request was
 * published less than 4 ms after the doorbell that preceded the re-arm
 * (so before the second look was due).
 */
static void check_lost_doorbell(void)
{
	struct cmd c = { .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	int i, conclusive = 0, lost = 0, bad = 0;

	for (i = 0; i < 400 && conclusive < 20 && !bad; i++) {
		uint64_t a = next_ctx++, b = next_ctx++;
		struct result r;
		double t0, tb;

		t0 = now();
		put_req(&c, a, 0);
		kick();
		if (get_cmps(&r, 1, 5000) != 1 || r.context != a) {
			bad = 1;
			break;
		}
		/* the device re-arms right after posting; then its last look */
		while (__atomic_load_n(&rs->req_call_threshold, __ATOMIC_ACQUIRE) != 1 &&
		       now() - t0 < 1)
			;
		usleep(300);
		put_req(&c, b, 1);	/* and no doorbell */
		tb = now() - t0;
		if (get_cmps(&r, 1, 500) == 1) {
			bad = r.context != b;
			conclusive += tb < 0.004;
			continue;
		}
		if (tb < 0.004) {
			lost++;
			conclusive++;
		}
		/* a guest that read the re-armed threshold would ring */
		kick();
		if (get_cmps(&r, 1, 5000) != 1 || r.context != b)
			bad = 1;
	}
	tap(!bad && !lost && conclusive >= 20, "threshold-missed-doorbell-served",
	    "%d of %d conclusive rounds lost the request (%d rounds, bad %d)",
	    lost, conclusive, i, bad);
}

/*
 * Regression (a vmw_pvscsi guest's crash after device resets): requests
 * the guest posted that the device had not consumed when RESET_DEVICE,
 * RESET_BUS or ABORT_CMD came (the doorbell swallowed by the reset's
 * quiesce, or skipped).  vmw_pvscsi reaps the completion ring right after
 * the command, fails back what it did not find and reuses the contexts:
 * each cancelled request must already have its completion there, the
 * others run as usual, and nothing may complete later.  No doorbell is
 * rung here at all.  A device reset covers its LUN only: not another
 * target, nor LUN 1 of the same target.
 */
static void check_cancel_unconsumed(void)
{
	static const char *const names[3] = {
		"device-reset-cancels-unconsumed", "bus-reset-cancels-unconsumed",
		"abort-cancels-unconsumed" };
	struct cmd c = { .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	struct cmd t1 = c, l1 = c;
	struct result res[8];

	t1.target = 1;		/* another target: not in a device reset */
	l1.lun = 1;		/* another LUN of target 0: neither */
	for (int round = 0; round < 3; round++) {
		/* target:lun of each request, and what it must complete with */
		const struct cmd *cmds[5] = { &c, &c, &t1, &c, &l1 };
		uint16_t want[5];
		uint64_t base = next_ctx, calls = calls_seen;
		int e, got, i, bad = 0;
		uint8_t seen[5] = {};

		for (i = 0; i < 5; i++) {
			put_req(cmds[i], next_ctx++, i);
			want[i] = round == 1 || (round == 0 && cmds[i] == &c) ?
				  BTSTAT_BUSRESET : BTSTAT_SUCCESS;
		}
		if (round == 2) {
			struct vps_abort a = { base + 1, 0, 0 };

			want[1] = BTSTAT_ABORTQUEUE;
			e = ioctl(vfd, VPS_ABORT, &a);
		} else {
			e = reset(round == 0 ? VPS_RESET_DEVICE : VPS_RESET_BUS, 0, 0);
		}
		/* what is in the completion ring now, without waiting */
		got = get_cmps(res, 5, 0);
		for (i = 0; i < got; i++) {
			uint64_t k = res[i].context - base;

			if (k >= 5 || seen[k]++ || res[i].host != want[k])
				bad++;
		}
		tap(!e && got == 5 && !bad && wait_call(calls), names[round],
		    "e %d errno %d: %d of 5 completed at once, %d wrong", e,
		    e ? errno : 0, got, bad);
		kick();
		tap(get_cmps(res, 1, 100) == 0, round == 0 ? "no-late-after-device-reset" :
		    round == 1 ? "no-late-after-bus-reset" : "no-late-after-abort",
		    "a cancelled request completed again");
	}
}

/*
 * A device reset covers one LUN, also among the completions that wait for
 * room in the completion ring: with the ring full (the guest reaps
 * nothing), completions of LUN 0 and LUN 1 of target 0 wait behind it
 * when LUN 0 is reset.  LUN 0's come back BUSRESET, LUN 1's GOOD as they
 * were, each once.
 */
static void check_lun_reset_backlog(void)
{
	static struct result res[256];
	struct cmd l0 = { .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	struct cmd l1 = l0;
	uint32_t i, n = 256, full = PVSCSI_CMP_DESCS_PER_PAGE;
	uint32_t got, dup, bad = 0;
	uint64_t base;
	int e, k;

	l1.lun = 1;
	tap(!new_rings(1), "lun-reset-backlog-setup", "%s", strerror(errno));
	base = next_ctx;
	/* the first ring-full LUN 1, then LUN 1 and LUN 0 in turn */
	for (i = 0; i < n; i++)
		put_req(i < full || !(i % 2) ? &l1 : &l0, next_ctx++, i % 64);
	kick();
	for (k = 0; k < 300; k++) {
		if (rs->req_cons_idx == n && stats().in_flight == n - full)
			break;
		usleep(10000);
	}
	e = reset(VPS_RESET_DEVICE, 0, 0);
	got = collect(res, n, 3000);
	dup = count_dups(res, got, base, n);
	for (i = 0; i < got; i++) {
		uint64_t x = res[i].context - base;

		if (x < n && ((x >= full && x % 2) ? res[i].host != BTSTAT_BUSRESET :
			      !good(&res[i])))
			bad++;
	}
	tap(!e && k < 300 && got == n && !dup && !bad,
	    "device-reset-spares-other-lun-backlog",
	    "e %d backlog %s: got %u/%u dup %u wrong status %u", e,
	    k < 300 ? "built" : "not built", got, n, dup, bad);
	new_rings(CMP_PAGES);
}

/*
 * Regression: an abort or a device reset consumes the whole request ring
 * even when what it consumes cannot complete into the completion ring yet.
 * The guest fills its 128-entry completion ring and reaps nothing, then
 * posts 200 TESTs UNIT READY (no doorbell) and aborts the last one, or
 * resets the LUN.  Until 2026-12-06 the consume stopped where the worker
 * does, at a completion ring's worth waiting for room: it left 72, the
 * aborted one among them, for later; the abort answered ENOENT and the
 * reset's cancelled requests completed GOOD after it.  And what an abort
 * left waiting for room never came: only the worker's own rounds made it
 * look again (a reset kicks the workers, an abort did not).  Every
 * request must complete once, with the status the cancel gave it.
 */
static void check_cancel_full_cmp_ring(void)
{
	static struct result res[328];
	struct cmd c = { .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	uint32_t i, full = PVSCSI_CMP_DESCS_PER_PAGE, n = 200;

	for (int round = 0; round < 2; round++) {
		uint32_t got, dup, cons, bad = 0, cancelled = 0;
		struct vps_abort a = { 0, 0, 0 };
		uint64_t base, x;
		int e, err, k;

		tap(!new_rings(1), round ? "reset-full-cmp-ring-setup" :
		    "abort-full-cmp-ring-setup", "%s", strerror(errno));
		base = next_ctx;
		for (i = 0; i < full; i++)
			put_req(&c, next_ctx++, i % 64);
		kick();
		for (k = 0; k < 300 && rs->cmp_prod_idx != full; k++)
			usleep(10000);
		for (i = 0; i < n; i++)
			put_req(&c, next_ctx++, i % 64);
		a.context = next_ctx - 1;
		e = round ? reset(VPS_RESET_DEVICE, 0, 0) : ioctl(vfd, VPS_ABORT, &a);
		err = e ? errno : 0;
		cons = __atomic_load_n(&rs->req_cons_idx, __ATOMIC_ACQUIRE);
		tap(!e && k < 300 && cons == req_prod,
		    round ? "reset-consumes-past-full-cmp-ring" :
		    "abort-consumes-past-full-cmp-ring",
		    "%s; %u of %u consumed, completion ring %s",
		    err ? strerror(err) : "answered 0",
		    cons - full, n, k < 300 ? "full" : "never filled");
		got = collect(res, full + n, 3000);
		dup = count_dups(res, got, base, full + n);
		for (i = 0; i < got; i++) {
			x = res[i].context - base;
			if (x >= full && (round || x == full + n - 1))
				cancelled += res[i].host == (round ? BTSTAT_BUSRESET :
							     BTSTAT_ABORTQUEUE);
			else if (!good(&res[i]))
				bad++;
		}
		kick();
		tap(got == full + n && !dup && !bad &&
		    cancelled == (round ? n : 1) && get_cmps(res, 1, 100) == 0,
		    round ? "reset-full-cmp-ring-completes-once" :
		    "abort-full-cmp-ring-completes-once",
		    "got %u/%u dup %u wrong status %u cancelled %u", got,
		    full + n, dup, bad, cancelled);
	}
	new_rings(CMP_PAGES);
}

struct resetter {
	pthread_t thread;
	uint32_t lun;		/* the LUN of target 0 its device resets hit */
	int done, failed;
};

static int resetters_stop;

static void *resetter_fn(void *arg)
{
	struct resetter *t = arg;

	while (!__atomic_load_n(&resetters_stop, __ATOMIC_ACQUIRE)) {
		if (reset(t->done % 3 ? VPS_RESET_DEVICE : VPS_RESET_BUS, 0, t->lun))
			t->failed++;
		t->done++;
		usleep(100 + (t->done * 37) % 700);
	}
	return NULL;
}

/*
 * Resets from two threads at once with READs in flight on both LUNs of
 * target 0.  A reset waits for the backing I/O with the adapter's lock
 * dropped, so the two overlap: the first to finish must not lift the
 * other's quiesce, and neither may leave it raised.  Every command
 * completes once, GOOD or BUSRESET, and the adapter works afterwards.
 */
static void check_concurrent_resets(void)
{
	static struct result res[64];
	static uint8_t seen[2048];
	struct resetter t[2] = { { .lun = 0 }, { .lun = 1 } };
	uint32_t total = 2048, posted = 0, got = 0, dup = 0, bad = 0, i;
	struct cmd c = { .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	uint64_t base = next_ctx;
	struct vps_stats s;
	double t0 = now();

	memset(seen, 0, sizeof(seen));
	__atomic_store_n(&resetters_stop, 0, __ATOMIC_RELEASE);
	for (i = 0; i < 2; i++)
		if (pthread_create(&t[i].thread, NULL, resetter_fn, &t[i]))
			die("pthread_create");
	while (got < total && now() - t0 < 30) {
		int k, j;

		while (posted < total && posted - got < 64) {
			struct cmd w = rw16(0, (posted * 64) % (disk_blocks - 64), 64,
					    data() + (size_t)(posted % 64) * 32768, 512);

			w.lun = posted % 2;
			put_req(&w, next_ctx++, posted % 64);
			posted++;
		}
		kick();
		k = get_cmps(res, posted - got, 20);
		for (j = 0; j < k; j++) {
			uint64_t x = res[j].context - base;

			if (x >= total || seen[x]++)
				dup++;
			else if (!good(&res[j]) && res[j].host != BTSTAT_BUSRESET)
				bad++;
		}
		got += k;
	}
	__atomic_store_n(&resetters_stop, 1, __ATOMIC_RELEASE);
	for (i = 0; i < 2; i++)
		pthread_join(t[i].thread, NULL);
	tap(got == total && !dup && !bad && !t[0].failed && !t[1].failed &&
	    t[0].done && t[1].done, "concurrent-resets-complete-once",
	    "got %u/%u dup %u wrong status %u; resets %d+%d, %d+%d failed",
	    got, total, dup, bad, t[0].done, t[1].done, t[0].failed, t[1].failed);
	tap(get_cmps(res, 1, 100) == 0, "no-extra-after-concurrent-resets",
	    "an extra completion");
	CHECK_GOOD("io-after-concurrent-resets", c);
	s = stats();
	tap(s.in_flight == 0 && s.pinned_pages == 0, "nothing-in-flight-after-concurrent-resets",
	    "in flight %llu, I/O %llu", (unsigned long long)s.in_flight,
	    (unsigned long long)s.pinned_pages);
}

/*
 * Rings the memory table stops covering are dropped, as an adapter reset
 * drops them: the adapter consumes and posts nothing, refuses what needs
 * rings (EINVAL), and the guest's next SETUP_RINGS works.  Regression:
 * the rings stayed set up, translated half through the new table, or
 * with no rings state page at all.  Round 0: the new table covers the
 * rings state and the first request pages (the lookup fails part-way);
 * round 1: none of it; round 2: a SETUP_RINGS over working rings fails.
 */
static void check_remap_failure(void)
{
	static const char *const names[3][3] = {
		{ "remap-part-way-drops-rings", "remap-part-way-quiet",
		  "io-after-remap-part-way" },
		{ "remap-away-drops-rings", "remap-away-quiet", "io-after-remap-away" },
		{ "failed-setup-rings-drops-rings", "failed-setup-rings-quiet",
		  "io-after-failed-setup-rings" } };
	struct cmd c = { .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	uint32_t on = 1, cons;
	int round, e, em, ret;
	struct result r;

	for (round = 0; round < 3; round++) {
		cons = rs->req_cons_idx;
		rs->req_call_threshold = 0;
		if (round == 0)
			ret = set_mem(GPA_BASE, 4 * PG, ram);
		else if (round == 1)
			ret = set_mem(GPA_BASE + (uint64_t)P_DATA * PG,
				      RAM_SIZE - P_DATA * PG, page(P_DATA));
		else
			ret = !setup_rings(REQ_PAGES, CMP_PAGES, GPA_BASE + RAM_SIZE);
		e = ioctl(vfd, VPS_SET_REQ_CALL_THRESHOLD, &on) ? errno : 0;
		em = setup_msg() ? errno : 0;
		tap(!ret && e == EINVAL && em == EINVAL, names[round][0],
		    "ret %d, threshold errno %d, message ring errno %d", ret, e, em);
		put_req(&c, next_ctx++, 0);
		kick();
		tap(get_cmps(&r, 1, 300) == 0 && rs->req_cons_idx == cons &&
		    !rs->req_call_threshold, names[round][1],
		    "consumed %u, threshold %u", rs->req_cons_idx - cons,
		    rs->req_call_threshold);
		if (round < 2)
			set_mem(GPA_BASE, RAM_SIZE, ram);
		memset(page(P_RS), 0, PG);
		req_prod = 0;
		cmp_cons = 0;
		msg_cons = 0;
		if (setup_rings(REQ_PAGES, CMP_PAGES, gpa(page(P_RS))) || setup_msg())
			tap(0, names[round][2], "setup: %s", strerror(errno));
		else
			CHECK_GOOD(names[round][2], c);
	}
}

/*
 * The owner's side, in a child: become the owner of fd over "guest RAM"
 * mapped from the file at path, run a command, put READs in flight, tell
 * the parent (one byte: 0 all well) and wait to be killed.  No TAP here:
 * the parent numbers the tests.
 */
static int owner_child(int fd, const char *path, const char *disk, int to_parent)
{
	uint8_t status = 1;
	struct result r;
	struct cmd c = { .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	uint32_t i;
	int rfd = open(path, O_RDWR);

	if (rfd < 0)
		return 2;
	ram = mmap(NULL, RAM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, rfd, 0);
	/* from here the mapping holds the file's last reference */
	close(rfd);
	if (ram == MAP_FAILED)
		return 2;
	rs = page(P_RS);
	vfd = fd;
	setup_adapter();
	if (!attach(0, 0, disk, 0, 0) && !run(&c, &r) && good(&r))
		status = 0;
	for (i = 0; i < 32; i++) {
		struct cmd w = rw16(0, (i * 64) % (disk_blocks - 64), 64,
				    data() + (size_t)i * 32768, 512);

		put_req(&w, next_ctx++, i);
	}
	kick();
	if (write(to_parent, &status, 1) != 1)
		return 2;
	for (;;)
		pause();
}

/*
 * A VMM killed while another process holds its adapter's fd (the parent
 * here, by inheritance) must not keep the guest's RAM until that process
 * closes it: the module lets go of the owner's memory when the owner's
 * process goes.  The child's guest RAM is a shared mapping of a file the
 * child opened and closed again; inotify reports the file's close when
 * the mapping goes with the child's address space.  Then the fd refuses
 * the owner's ioctls and closes cleanly.
 */
static void check_owner_killed(const char *disk)
{
	static const char *const dirs[] = { "/dev/shm", "/tmp" };
	char path[64], ev[4096];
	struct pollfd p;
	struct vps_stats s;
	uint8_t status = 2;
	int afd, in, pfd[2], fd = -1, e, waited, released = 0;
	unsigned int d;
	pid_t pid;

	for (d = 0; d < 2 && fd < 0; d++) {
		snprintf(path, sizeof(path), "%s/vps_test_ram.XXXXXX", dirs[d]);
		fd = mkstemp(path);
	}
	if (fd < 0 || ftruncate(fd, RAM_SIZE))
		die("guest RAM file");
	close(fd);
	in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (in < 0 || inotify_add_watch(in, path, IN_CLOSE_WRITE | IN_CLOSE_NOWRITE) < 0)
		die("inotify");
	afd = open("/dev/vhost-pvscsi", O_RDWR);
	if (afd < 0 || pipe(pfd))
		die("/dev/vhost-pvscsi");
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		die("fork");
	if (!pid) {
		close(pfd[0]);
		_exit(owner_child(afd, path, disk, pfd[1]));
	}
	close(pfd[1]);
	p = (struct pollfd){ pfd[0], POLLIN, 0 };
	if (poll(&p, 1, 10000) == 1 && read(pfd[0], &status, 1) != 1)
		status = 2;
	tap(!status, "owner-child-runs-io", "child status %u", status);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	p = (struct pollfd){ in, POLLIN, 0 };
	for (waited = 0; waited < 3000 && !released; waited += 10) {
		poll(&p, 1, 10);
		released = read(in, ev, sizeof(ev)) > 0;
	}
	tap(released, "owner-killed-ram-released",
	    "the killed owner's guest RAM still mapped %d ms after its death", waited);
	for (waited = 0; waited < 3000; waited += 10) {
		memset(&s, 0xff, sizeof(s));
		ioctl(afd, VPS_GET_STATS, &s);
		if (!s.in_flight && !s.pinned_pages)
			break;
		usleep(10000);
	}
	tap(!s.in_flight && !s.pinned_pages, "owner-killed-io-let-go",
	    "in flight %llu, I/O %llu", (unsigned long long)s.in_flight,
	    (unsigned long long)s.pinned_pages);
	{
		struct vps_reset rr = { VPS_RESET_ADAPTER, 0, 0, 0 };
		struct vhost_memory m = {};
		int eo, er, em;

		eo = ioctl(afd, VHOST_SET_OWNER) ? errno : 0;
		er = ioctl(afd, VPS_RESET, &rr) ? errno : 0;
		em = ioctl(afd, VHOST_SET_MEM_TABLE, &m) ? errno : 0;
		tap(eo == EBUSY && er == EPERM && em == EPERM, "owner-killed-ioctls-refused",
		    "SET_OWNER errno %d, RESET errno %d, SET_MEM_TABLE errno %d",
		    eo, er, em);
	}
	e = close(afd);
	tap(!e, "owner-killed-close", "%s", strerror(errno));
	close(pfd[0]);
	close(in);
	unlink(path);
}

static int open_ram(void)
{
	ram = mmap(NULL, RAM_SIZE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (ram == MAP_FAILED)
		die("mmap");
	rs = page(P_RS);
	return 0;
}

/* a subcommand's start: guest RAM, an adapter over it, DISK's size */
static void start_on(const char *disk)
{
	open_ram();
	open_adapter();
	disk_blocks = vps_sim_blocks(disk);
}

static int do_check(const char *disk, const char *file, const char *ro)
{
	start_on(disk);
	tap(!attach(0, 0, disk, 0, 0) && !attach(0, 1, disk, 0, 0) &&
	    !attach(1, 0, file, 0, 0) && !attach(2, 0, ro, VPS_LUN_READ_ONLY, 0),
	    "attach-luns", "%s", strerror(errno));
	{
		/* O_APPEND would send every WRITE to the end of the file */
		struct vps_lun l = { .target = 3, .fd = open(file, O_RDWR | O_DIRECT | O_APPEND) };
		int ret = ioctl(vfd, VPS_ATTACH_LUN, &l);

		tap(l.fd >= 0 && ret < 0 && errno == EINVAL, "attach-o-append-refused",
		    "ret %d %s", ret, strerror(errno));
		close(l.fd);
	}
	/* the DEV_ADDED messages of the attaches */
	msg_cons = rs->msg_prod_idx;
	rs->msg_cons_idx = msg_cons;
	check_ioctls(disk);
	check_commands(disk);
	check_integrity();
	check_unmap(file);
	check_readonly();
	check_messages(disk);
	check_dirty_log(disk);
	check_threshold();
	check_lost_doorbell();
	check_cancel_unconsumed();
	check_inflight();
	check_concurrent_resets();
	check_lun_reset_backlog();
	check_cancel_full_cmp_ring();
	check_small_cmp_ring();
	check_hostile();
	check_remap_failure();
	check_owner_killed(disk);
	check_migration(disk);
	{
		struct vps_stats s = stats();

		tap(s.in_flight == 0 && s.pinned_pages == 0, "nothing-in-flight-at-end",
		    "%llu %llu", (unsigned long long)s.in_flight,
		    (unsigned long long)s.pinned_pages);
	}
	close_adapter();
	printf("1..%d\n", tests);
	return failures ? 1 : 0;
}

/* close the fd (and exit) while I/O is in flight */
static int do_close_inflight(const char *disk)
{
	uint32_t i;

	start_on(disk);
	if (attach(0, 0, disk, 0, 0))
		die("attach");
	for (i = 0; i < 200; i++) {
		struct cmd c = rw16(i & 1, (i * 128) % (disk_blocks - 128), 128,
				    data() + (size_t)(i % 64) * 65536, 512);

		put_req(&c, next_ctx++, i % 64);
	}
	kick();
	usleep(1000);
	close_adapter();
	printf("ok 1 - close-with-io-in-flight\n1..1\n");
	return 0;
}

/* ---- a LUN that stops answering ----------------------------------------- */

#define HUNG_IOS	16

static int shell(const char *cmd);

static long ms_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/*
 * The VMM of the hung-lun case: an adapter whose LUN (DISK, the dm
 * device DM) is suspended with HUNG_IOS writes held in it; says 'r' on
 * @wfd, then either sits in a bus reset (@mode 0: it waits as long as
 * the LUN hangs) or closes the adapter and writes how long close() took.
 * @mode 2 closes too, with the dirty log on and READs held, as a
 * migrating QEMU may when it quits, and lives on until told to exit on
 * @rfd: the READs then finish in the module's release kworker while the
 * owner still has its memory, and that kworker must not touch the bitmap
 * (until 2026-12-03 it did, and oopsed: a kworker has no mm).
 */
static int hung_vmm(const char *disk, const char *dm, int wfd, int rfd, int mode)
{
	char cmd[256];
	long t0, dt;
	uint32_t i;
	int e;

	start_on(disk);
	if (attach(0, 0, disk, 0, 0))
		die("attach");
	snprintf(cmd, sizeof(cmd), "dmsetup suspend --noudevsync %s", dm);
	if (shell(cmd))
		return 3;
	if (mode == 2) {
		logmap = mmap(NULL, LOG_BYTES, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (logmap == MAP_FAILED ||
		    set_log((uintptr_t)logmap, LOG_BYTES, VPS_LOG_ENABLE, 0))
			return 8;
	}
	for (i = 0; i < HUNG_IOS; i++) {
		struct cmd c = rw16(mode == 2 ? 0 : 1, i * 64, 64,
				    data() + (size_t)i * 32768, 512);

		put_req(&c, next_ctx++, i);
	}
	kick();
	for (i = 0; i < 200 && stats().pinned_pages < HUNG_IOS; i++)
		usleep(10000);
	if (stats().pinned_pages < HUNG_IOS)
		return 4;
	if (write(wfd, "r", 1) != 1)
		return 5;
	if (mode == 0) {
		e = reset(VPS_RESET_BUS, 0, 0);
		printf("# the reset returned %d (%s)\n", e, e ? strerror(errno) : "ok");
		return 6;
	}
	t0 = ms_now();
	close_adapter();
	dt = ms_now() - t0;
	if (write(wfd, &dt, sizeof(dt)) != sizeof(dt))
		return 7;
	/* mode 2: alive, memory and all, until the held READs are done */
	if (mode == 2 && read(rfd, &dt, 1) != 1)
		return 9;
	return 0;
}

/*
 * Resume the hung LUN (@resume, a dmsetup command), then wait up to 5 s
 * for the module to let everything go; the gauges last read in @g
 */
static int resume_let_go(const char *resume, char *g, size_t len)
{
	if (shell(resume))
		tap(0, "resume", "dmsetup resume failed");
	return vps_sim_gauges_zero_within(g, len, 5000);
}

/*
 * A LUN that stops answering with I/O in flight (DM suspended).  A VMM
 * killed while it waits in a reset behind it exits at once, and a VMM
 * closing the adapter (QEMU: device_del, or quitting, with its global
 * lock held) does not wait for it either; the module keeps the adapter
 * and the writes (the gauges) until the LUN answers again, then lets
 * everything go.
 */
static int do_hung_lun(const char *disk, const char *dm)
{
	static const char *const name[] = { "killed-in-reset", "closed", "closed-logging" };
	char g[256], cmd[256], stat_path[64], st[512];
	int mode, p[2], q[2], status, i, reaped;
	long dt = -1;
	pid_t pid;
	char c;

	snprintf(cmd, sizeof(cmd), "dmsetup resume --noudevsync %s", dm);
	for (mode = 0; mode < 3; mode++) {
		if (pipe(p) || pipe(q))
			die("pipe");
		fflush(stdout);
		pid = fork();
		if (pid < 0)
			die("fork");
		if (!pid) {
			close(p[0]);
			close(q[1]);
			_exit(hung_vmm(disk, dm, p[1], q[0], mode));
		}
		close(p[1]);
		close(q[0]);
		if (read(p[0], &c, 1) != 1) {
			waitpid(pid, &status, 0);
			tap(0, name[mode], "the VMM did not get I/O held (exit %d)",
			    WEXITSTATUS(status));
			shell(cmd);
			close(p[0]);
			close(q[1]);
			continue;
		}
		if (mode == 0) {
			/* in the reset's wait, in the kernel */
			usleep(500000);
			snprintf(stat_path, sizeof(stat_path), "/proc/%d/stat", pid);
			{
				FILE *f = fopen(stat_path, "r");
				size_t n = f ? fread(st, 1, sizeof(st) - 1, f) : 0;

				st[n] = 0;
				if (f)
					fclose(f);
			}
			/* D: killable, as now; S: interruptible, as before */
			tap(waitpid(pid, &status, WNOHANG) == 0 &&
			    (strstr(st, ") D ") || strstr(st, ") S ")),
			    "reset-waits-behind-hung-lun", "VMM state: %.40s", st);
			kill(pid, SIGKILL);
		} else {
			struct pollfd pf = { p[0], POLLIN, 0 };

			/* bounded: a close that waits for the LUN waits for us */
			if (poll(&pf, 1, 3000) == 1 &&
			    read(p[0], &dt, sizeof(dt)) == sizeof(dt))
				tap(dt < 1000, mode == 2 ? "closed-logging-close-returns" :
				    "close-returns", "close() took %ld ms", dt);
			else
				tap(0, mode == 2 ? "closed-logging-close-returns" :
				    "close-returns", "close() still blocked after 3 s");
		}
		close(p[0]);
		if (mode == 2) {
			/* the READs finish in the release kworker, the owner alive */
			tap(resume_let_go(cmd, g, sizeof(g)), "closed-logging-let-go-after-resume",
			    "gauges 5 s after the resume: %s", g);
			if (write(q[1], "x", 1) != 1)
				die("pipe write");
			close(q[1]);
			tap(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
			    !WEXITSTATUS(status), "closed-logging-vmm-exits",
			    "status 0x%x", status);
			continue;
		}
		close(q[1]);
		/* it exits, and is reaped, with the LUN still hung */
		for (i = 0, reaped = 0; i < 50 && !reaped; i++) {
			reaped = waitpid(pid, &status, WNOHANG) == pid;
			if (!reaped)
				usleep(100000);
		}
		tap(reaped, mode ? "closed-vmm-exits" : "killed-vmm-exits",
		    "the VMM still not reaped 5 s later");
		vps_sim_gauges(g, sizeof(g));
		tap(strstr(g, "open_devices 1 ") && !strstr(g, "requests_in_flight 0 "),
		    mode ? "closed-adapter-held" : "killed-adapter-held", "%s", g);
		tap(resume_let_go(cmd, g, sizeof(g)),
		    mode ? "closed-let-go-after-resume" : "killed-let-go-after-resume",
		    "gauges 5 s after the resume: %s", g);
		if (!reaped)
			waitpid(pid, &status, 0);
	}
	printf("1..%d\n", tests);
	return failures ? 1 : 0;
}

/* ---- injected backing faults ------------------------------------------- */

#define FAULT_SPAN	2048		/* blocks written and checked */
#define FAULT_CHUNK	64

static int shell(const char *cmd)
{
	int rc = system(cmd);

	printf("# %s: %d\n", cmd, rc);
	return rc;
}

/* n commands of nblk blocks at lba (each its own buffer), kicked at once */
static uint32_t burst(int write, uint64_t lba, uint32_t nblk, uint32_t n,
		      struct result *res, uint32_t *dup)
{
	uint64_t base = next_ctx;
	uint32_t i, got;

	for (i = 0; i < n; i++) {
		struct cmd c = rw16(write, lba, nblk, data() + (16u << 20) +
				    (size_t)i * nblk * 512, 512);

		put_req(&c, next_ctx++, i % 64);
	}
	kick();
	got = get_cmps(res, n, 20000);
	*dup = count_dups(res, got, base, n);
	return got;
}

static int verify_span(uint32_t seed)
{
	uint8_t *w = data(), *rd = data() + (4u << 20);
	uint32_t bad = 0;
	struct result r;
	uint64_t lba;

	for (lba = 0; lba < FAULT_SPAN; lba += FAULT_CHUNK) {
		struct cmd c = rw16(0, lba, FAULT_CHUNK, rd, 512);

		pattern(w, lba, FAULT_CHUNK, seed);
		if (run(&c, &r) || !good(&r) || memcmp(w, rd, FAULT_CHUNK * 512))
			bad++;
	}
	return bad;
}

static int write_span(uint32_t seed)
{
	uint8_t *w = data();
	uint32_t bad = 0;
	struct result r;
	uint64_t lba;

	for (lba = 0; lba < FAULT_SPAN; lba += FAULT_CHUNK) {
		struct cmd c = rw16(1, lba, FAULT_CHUNK, w, 512);

		pattern(w, lba, FAULT_CHUNK, seed);
		if (run(&c, &r) || !good(&r))
			bad++;
	}
	return bad;
}

static int do_faults(const char *disk, uint64_t bad_lba, int wr,
		     const char *on, const char *off)
{
	static struct result res[64];
	uint64_t chunk = bad_lba / FAULT_CHUNK * FAULT_CHUNK;
	uint64_t clean = (chunk + FAULT_SPAN / 2) % FAULT_SPAN;
	uint32_t i, got, dup, nok;
	struct vps_stats s0, s1;
	struct result r;
	uint8_t *w, *rd;
	struct cmd c;
	int e;

	open_ram();
	w = data();
	rd = data() + (4u << 20);
	open_adapter();
	disk_blocks = vps_sim_blocks(disk);
	tap(!attach(0, 0, disk, 0, 0), "attach", "%s", strerror(errno));
	tap(!write_span(1) && !verify_span(1), "clean-write-verify", "errors");
	tap(!shell(on), "fault-on", "%s", on);
	s0 = stats();
	c = rw16(wr, chunk, FAULT_CHUNK, wr ? w : rd, 512);
	e = run(&c, &r);
	tap(!e && sense_is(&r, 3, wr ? 0x0c : 0x11, 0) && r.data_len == 0,
	    wr ? "write-medium-error" : "read-medium-error",
	    "e %d host 0x%x scsi 0x%x key 0x%x asc 0x%x", e, r.host, r.scsi,
	    r.sense[2], r.sense[12]);
	/* the rest of the LUN is unaffected */
	pattern(w, clean, FAULT_CHUNK, 1);
	c = rw16(0, clean, FAULT_CHUNK, rd, 512);
	e = run(&c, &r);
	tap(!e && good(&r) && !memcmp(w, rd, FAULT_CHUNK * 512), "clean-lba-unaffected",
	    "e %d host 0x%x scsi 0x%x", e, r.host, r.scsi);
	/* many at once: each completes once, each with the error */
	got = burst(wr, chunk, FAULT_CHUNK, 32, res, &dup);
	for (i = 0, nok = 0; i < got; i++)
		if (!(res[i].host == BTSTAT_SUCCESS && res[i].scsi == 2 &&
		      res[i].sense_len >= 14))
			nok++;
	tap(got == 32 && !dup && !nok, "burst-errors-once",
	    "got %u/32 dup %u not-medium-error %u", got, dup, nok);
	s1 = stats();
	tap(s1.errors_backing >= s0.errors_backing + 33, "errors-backing-counted",
	    "%llu -> %llu", (unsigned long long)s0.errors_backing,
	    (unsigned long long)s1.errors_backing);
	tap(!shell(off), "fault-off", "%s", off);
	/* the fault cleared: the old data (failed writes changed nothing) */
	tap(!verify_span(1), "data-intact-after-fault", "mismatches");
	tap(!write_span(2) && !verify_span(2), "write-verify-after-fault", "errors");
	tap(stats().in_flight == 0, "nothing-in-flight", "in flight");
	close_adapter();
	printf("1..%d\n", tests);
	return failures ? 1 : 0;
}

/* detach the LUN while its I/O is in flight (a slow backing helps) */
/*
 * CMD (optional) runs once both LUNs are detached, the adapter still
 * open: the device must be free by then (dmsetup remove), also when the
 * last reference to a LUN went with a completion in the worker.
 */
/*
 * A memory table that drops the rings (they are outside it) while READs
 * are in flight on a slow DISK: those complete unposted, so an abort of
 * one finds nothing (found by the fuzzer: it succeeded), and once the
 * guest has new rings none of them turns up there.
 */
static int do_remap_inflight(const char *disk)
{
	static struct result res[16];
	struct vps_abort a = { 0, 0, 0 };
	struct vps_stats s;
	uint32_t i;
	int e;

	start_on(disk);
	tap(!attach(0, 0, disk, 0, 0), "attach", "%s", strerror(errno));
	for (i = 0; i < 16; i++) {
		struct cmd w = rw16(0, i * 64, 64, data() + (size_t)i * 32768, 512);

		put_req(&w, next_ctx++, i);
	}
	kick();
	usleep(20000);
	s = stats();
	tap(s.in_flight > 0, "reads-in-flight", "in flight %llu",
	    (unsigned long long)s.in_flight);
	e = set_mem(GPA_BASE, 4 * PG, ram);
	tap(!e, "remap-drops-rings", "%s", strerror(errno));
	a.context = next_ctx - 1;
	e = ioctl(vfd, VPS_ABORT, &a);
	tap(e && errno == ENOENT, "abort-without-rings-enoent", "e %d errno %d", e, errno);
	for (i = 0; i < 100 && stats().in_flight; i++)
		usleep(50000);
	tap(!stats().in_flight, "inflight-drained-unposted", "in flight %llu",
	    (unsigned long long)stats().in_flight);
	set_mem(GPA_BASE, RAM_SIZE, ram);
	tap(!new_rings(CMP_PAGES), "new-rings", "%s", strerror(errno));
	{
		struct cmd c = cmd_in((uint8_t[]){ 0x00, 0, 0, 0, 0, 0 }, 6, 0);

		c.flags = PVSCSI_FLAG_CMD_DIR_NONE;
		CHECK_GOOD("io-on-new-rings", c);
	}
	tap(get_cmps(res, 16, 300) == 0, "no-stale-completions",
	    "a READ of the old rings completed");
	tap(!detach(0, 0), "detach", "%s", strerror(errno));
	close_adapter();
	printf("1..%d\n", tests);
	return failures ? 1 : 0;
}

static int do_detach_inflight(const char *disk, const char *cmd)
{
	static struct result res[64];
	struct vps_stats s;
	uint32_t got, dup, i, nok = 0;
	struct result r;
	struct cmd c;
	int e;

	start_on(disk);
	tap(!attach(0, 0, disk, 0, 0) && !attach(0, 1, disk, 0, 0), "attach",
	    "%s", strerror(errno));
	for (i = 0; i < 48; i++) {
		struct cmd w = rw16(i & 1, (i * 64) % (disk_blocks - 64), 64,
				    data() + (size_t)i * 32768, 512);

		put_req(&w, next_ctx++, i % 64);
	}
	kick();
	usleep(20000);
	s = stats();
	e = detach(0, 0);
	tap(!e, "detach-with-io-in-flight", "%s (in flight %llu)", strerror(errno),
	    (unsigned long long)s.in_flight);
	printf("# in flight at detach: %llu\n", (unsigned long long)s.in_flight);
	got = get_cmps(res, 48, 20000);
	dup = count_dups(res, got, next_ctx - 48, 48);
	for (i = 0; i < got; i++)
		if (!good(&res[i]))
			nok++;
	tap(got == 48 && !dup && !nok, "inflight-complete-once-after-detach",
	    "got %u/48 dup %u not good %u", got, dup, nok);
	tap(get_cmps(res, 1, 200) == 0, "no-extra-completions", "an extra completion");
	c = cmd_in((uint8_t[]){ 0x00, 0, 0, 0, 0, 0 }, 6, 0);
	c.flags = PVSCSI_FLAG_CMD_DIR_NONE;
	CHECK_SENSE("detached-lun-not-supported", c, 5, 0x25, 0);
	c.lun = 1;
	CHECK_GOOD("other-lun-still-there", c);
	tap(stats().in_flight == 0, "nothing-in-flight", "in flight");
	if (cmd) {
		tap(!detach(0, 1), "detach-other-lun", "%s", strerror(errno));
		/* the worker's last fput is deferred to a kworker: moments */
		for (i = 0, e = 1; i < 50 && e; i++) {
			e = shell(cmd);
			if (e)
				usleep(100000);
		}
		tap(!e, "device-free-after-detach", "'%s' failed for 5 s", cmd);
	}
	close_adapter();
	(void)r;
	printf("1..%d\n", tests);
	return failures ? 1 : 0;
}

/*
 * The per-LUN cap on READ/WRITE in flight: with the backing slowed down
 * (dm-delay), a burst beyond the cap is answered TASK SET FULL at once and
 * the rest completes GOOD.  CAP 0 takes the module parameter.
 */
static int do_cap(const char *disk, uint32_t cap, uint32_t want)
{
	static struct result res[64];
	uint32_t i, got, good_n = 0, full = 0, other = 0, n = 16;

	start_on(disk);
	attach_cap = cap;
	tap(!attach(0, 0, disk, 0, 0), "attach-with-cap", "%s", strerror(errno));
	for (i = 0; i < n; i++) {
		struct cmd c = rw16(0, i * 8, 8, data() + (size_t)i * 4096, 512);

		put_req(&c, next_ctx++, i);
	}
	kick();
	got = get_cmps(res, n, 20000);
	for (i = 0; i < got; i++) {
		if (good(&res[i]))
			good_n++;
		else if (res[i].host == BTSTAT_SUCCESS && res[i].scsi == 0x28)
			full++;
		else
			other++;
	}
	tap(got == n && !other, "burst-completes", "got %u/%u other %u", got, n, other);
	tap(good_n == want && full == n - want, "cap-enforced",
	    "%u GOOD, %u TASK SET FULL, want %u GOOD", good_n, full, want);
	close_adapter();
	printf("1..%d\n", tests);
	return failures ? 1 : 0;
}

/* 4k random reads at a fixed queue depth; prints "iops N" */
/* the adapter's worker (with one adapter open, the one): its tid, or 0 */
static pid_t worker_tid(void)
{
	char dirs[MAX_WORKERS][64];

	return find_workers(dirs) ? atoi(strrchr(dirs[0], '/') + 1) : 0;
}

/*
 * The worker on CPU 0, ourselves (the guest) on CPU 1.  A poller that
 * shares its CPU with the guest it waits for gives up at once (the guest
 * runnable there is need_resched()), and a woken task often lands on its
 * waker's CPU: without this, whether any request is polled at all is up
 * to the scheduler (0 of 200 on one machine, 191 on another).
 */
static int split_cpus(void)
{
	pid_t w = worker_tid();
	cpu_set_t c0, c1;

	CPU_ZERO(&c0);
	CPU_SET(0, &c0);
	CPU_ZERO(&c1);
	CPU_SET(1, &c1);
	if (!w) {
		errno = ESRCH;
		return -1;
	}
	if (sched_setaffinity(w, sizeof(c0), &c0) || sched_setaffinity(0, sizeof(c1), &c1))
		return -1;
	return 0;
}

/*
 * Busy-polling (poll_us): a guest at queue depth 1 that follows the
 * doorbell rule (ring only when the pending requests reach the
 * threshold, which stays high while the worker polls) and watches its
 * completion ring, as a polled driver does, has its next request taken
 * by the polling worker, without a doorbell.  Every
 * request completes once, polled or not; poll_us 0 again afterwards.
 */
/*
 * The longest poll (the module's cap): here the guest is a vCPU thread of
 * a TCG VM, which a busy host takes off its CPU for milliseconds at a
 * time (with one core of two kept busy, 1 ms polls caught 20-35 % of
 * the requests here; on one CI machine, 12 of 2000)
 */
#define POLL_US "20000"

/* the doorbell only when the requests not taken reach the threshold */
static void kick_by_rule(void)
{
	if ((uint32_t)(req_prod - __atomic_load_n(&rs->req_cons_idx, __ATOMIC_ACQUIRE)) >=
	    __atomic_load_n(&rs->req_call_threshold, __ATOMIC_ACQUIRE))
		kick();
}

/*
 * One request as a guest at queue depth 1 sends it: the doorbell only
 * when the threshold asks for it, then its completion spun for; 1 when it
 * completed good
 */
static int poll_one(const struct cmd *c, int i)
{
	uint64_t ctx = next_ctx++;
	struct result r;

	put_req(c, ctx, i % 64);
	kick_by_rule();
	return get_cmps_how(&r, 1, 5000, true) == 1 && r.context == ctx && good(&r);
}

/*
 * An ioctl does not wait for a poll: right after a completion the worker
 * polls the ring for up to POLL_US with its queue's lock held, and an
 * ABORT then (for a context that is not there: the wait is what counts)
 * waits only until the poll sees it.  Before the worker yielded to the
 * control path it waited for the whole poll, 20 ms each.  The median of
 * POLL_ABORTS, in ms; -1 when a request or an abort went wrong.
 */
#define POLL_ABORTS 9
#define POLL_ABORT_MS 5

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double poll_abort_wait(const struct cmd *c)
{
	double ms[POLL_ABORTS], t0;
	struct vps_abort a = { 0, 0, 0 };
	int i;

	for (i = 0; i < POLL_ABORTS; i++) {
		int e, err;

		if (!poll_one(c, i))
			return -1;
		a.context = next_ctx + 1000;
		t0 = now();
		e = ioctl(vfd, VPS_ABORT, &a);
		err = e ? errno : 0;
		ms[i] = (now() - t0) * 1000;
		if (err != ENOENT)
			return -1;
		printf("# abort %d behind a poll: %.2f ms\n", i, ms[i]);
	}
	qsort(ms, POLL_ABORTS, sizeof(ms[0]), cmp_double);
	return ms[POLL_ABORTS / 2];
}

/*
 * A control path that never lets go: a thread issuing ioctls back to back
 * (a detach of a LUN that is not there: ENOENT, under the adapter's lock
 * all the same), as a VMM's vCPU threads forwarding a guest's command
 * writes may.  The worker starts no round while a call waits for the
 * adapter (vps_dev.ctl_waiting), and calls back to back leave hardly a
 * moment with none: it must still find them, not starve.  STORM_TURS
 * requests one after another, each doorbelled, complete within STORM_S
 * seconds while the storm runs (2026-12-06, 2 vCPUs under TCG: 0.8 to 11
 * times a quiet request's time; making the worker wait for one call at
 * most measured no better, so it was not kept).
 */
#define STORM_TURS 50
#define STORM_S 10

static int storm_stop;
static unsigned long storm_calls;

static void *storm_fn(void *arg)
{
	struct vps_lun_addr a = { VPS_MAX_TARGETS - 1, 0 };

	(void)arg;
	while (!__atomic_load_n(&storm_stop, __ATOMIC_RELAXED)) {
		if (!ioctl(vfd, VPS_DETACH_LUN, &a) || errno != ENOENT)
			break;
		__atomic_fetch_add(&storm_calls, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* @n TESTs UNIT READY, each run() (doorbelled, waited for) until @until */
static int tur_kicked(int n, double until)
{
	struct cmd c = { .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	struct result r;
	int i;

	for (i = 0; i < n && now() < until; i++)
		if (run(&c, &r) || !good(&r))
			break;
	return i;
}

static void check_ctl_storm(void)
{
	double t0, quiet_ms, storm_ms;
	unsigned long calls;
	pthread_t t;
	int quiet, got;

	t0 = now();
	quiet = tur_kicked(STORM_TURS, t0 + STORM_S);
	quiet_ms = (now() - t0) * 1000 / (quiet ? quiet : 1);
	storm_stop = 0;
	storm_calls = 0;
	if (pthread_create(&t, NULL, storm_fn, NULL))
		die("pthread_create");
	usleep(50000);
	t0 = now();
	got = tur_kicked(STORM_TURS, t0 + STORM_S);
	storm_ms = (now() - t0) * 1000 / (got ? got : 1);
	__atomic_store_n(&storm_stop, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	calls = __atomic_load_n(&storm_calls, __ATOMIC_RELAXED);
	printf("# %d requests %.2f ms each, %d under an ioctl storm (%lu calls) %.2f ms each\n",
	       quiet, quiet_ms, got, calls, storm_ms);
	/*
	 * a storm: ten calls or more per request served (the debug kernel's
	 * slower ioctl made 850 and 903 with another VM running beside it,
	 * failing the 1000 this wanted until 2026-12-07)
	 */
	tap(quiet == STORM_TURS && got == STORM_TURS && calls >= 10 * STORM_TURS,
	    "ioctl-storm-does-not-starve-the-worker",
	    "%d of %d requests within %d s under %lu back-to-back ioctls (%d without)",
	    got, STORM_TURS, STORM_S, calls, quiet);
}

static int do_poll(const char *disk)
{
	struct cmd c = { .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	unsigned long long p0, p1 = 0;
	struct vps_stats s0, s1;
	uint32_t on = 1;
	int i, bad = 0;
	double abort_ms;

	start_on(disk);
	if (attach(0, 0, disk, 0, 0) || ioctl(vfd, VPS_SET_REQ_CALL_THRESHOLD, &on))
		die("poll set-up");
	tap(!split_cpus(), "poll-cpus-split", "worker %d: %s", worker_tid(), strerror(errno));
	tap(!set_param("poll_us", POLL_US), "poll-us-set", "%s", strerror(errno));
	p0 = adapter_field("polled");
	s0 = stats();
	/*
	 * How many a poll catches depends on how fast this vCPU wakes (under
	 * TCG, on a loaded host: anywhere from 4 % to 97 % of them, seen
	 * here): go on until POLL_WANT were caught, up to POLL_MAX requests.
	 * A module that never polls catches none.
	 */
#define POLL_WANT 20
#define POLL_MAX 2000
	for (i = 0; i < POLL_MAX && !bad && p1 - p0 < POLL_WANT; i++) {
		bad = !poll_one(&c, i);
		if (i % 50 == 49)
			p1 = adapter_field("polled");
	}
	s1 = stats();
	p1 = adapter_field("polled");
	abort_ms = poll_abort_wait(&c);
	tap(abort_ms >= 0 && abort_ms < POLL_ABORT_MS, "poll-abort-does-not-wait",
	    "median %.2f ms of %d aborts right after a completion (bound %d ms, the poll %s us)",
	    abort_ms, POLL_ABORTS, POLL_ABORT_MS, POLL_US);
	tap(!set_param("poll_us", "0"), "poll-us-off", "%s", strerror(errno));
	usleep(20000);
	tap(!bad && __atomic_load_n(&rs->cmp_prod_idx, __ATOMIC_ACQUIRE) == cmp_cons,
	    "poll-qd1-each-once", "request %d went wrong, or a completion more came", i);
	check_ctl_storm();
	tap(p1 - p0 >= POLL_WANT && s1.kicks - s0.kicks <= (unsigned int)i - POLL_WANT,
	    "poll-no-doorbell",
	    "%llu of %d requests found by polling, %llu doorbells; polls timed out %llu, gave the CPU up %llu",
	    p1 - p0, i, (unsigned long long)(s1.kicks - s0.kicks),
	    adapter_field("poll_idle"), adapter_field("poll_yield"));
	printf("# poll_us " POLL_US ": %llu of %d requests found by polling, %llu doorbells; "
	       "polls timed out %llu, gave the CPU up %llu\n",
	       p1 - p0, i, (unsigned long long)(s1.kicks - s0.kicks),
	       adapter_field("poll_idle"), adapter_field("poll_yield"));
	close_adapter();
	printf("1..%d\n", tests);
	return failures ? 1 : 0;
}

/*
 * Holding the interrupt while the guest posts (hold_us): a guest that
 * posts a batch of HOLD_BATCH requests HOLD_GAP_US apart, following the
 * doorbell rule (its first two together, as blk-mq's commit does, then
 * one at a time), and reaps in its interrupt handler, gets one interrupt
 * for the batch, not one per doorbell pass: the worker holds it while
 * requests keep coming and keeps the doorbell off meanwhile.  How often a
 * batch is held whole depends on this vCPU keeping its CPU for the batch
 * (a TCG vCPU can be off it for milliseconds, and a hold that saw nothing
 * come is not tried for the next 2, 4, ... passes): up to
 * HOLD_TRIES batches until HOLD_WANT took one interrupt each.  A module
 * that does not hold takes no request while holding (held_got), where
 * the batches do not form by themselves (HOLD_WANT / 2 of them without
 * hold_us: a slow kernel, whose worker wakes once the batch is posted);
 * once a hold learnt the batch, the interrupt goes when the guest has
 * all 8 out (held_full), not after HOLD_US of quiet.  A queue-depth-1
 * guest after them is held once at most (the first request finds the
 * hold learned from the batches, sees nothing come, and holding stops).
 * Every request completes once.  HOLD_US is the module's cap.
 */
#define HOLD_US "5000"
#define HOLD_WANT 10
#define HOLD_TRIES 200
#define HOLD_BATCH 8
#define HOLD_GAP_US 100

/*
 * @n completions as vmw_pvscsi takes them: in its interrupt handler, so
 * what the ring holds is looked at only once the call eventfd fired (a
 * guest that watched its ring would reap a held batch without waiting
 * for its interrupt).  How many came within @timeout_ms.
 */
static int reap_on_interrupt(struct result *out, int n, int timeout_ms)
{
	double until = now() + timeout_ms / 1000.0;
	int got = 0;

	while (got < n && now() < until) {
		struct pollfd p = { call_fd, POLLIN, 0 };
		uint64_t v;

		if (poll(&p, 1, 10) != 1 || read(call_fd, &v, sizeof(v)) != sizeof(v))
			continue;
		got += get_cmps_how(out + got, n - got, 0, false);
	}
	return got;
}

/* spin @us: a sleep's wake-up waits for this VM's timer, under TCG late */
static void spin_us(int us)
{
	double until = now() + us / 1e6;

	while (now() < until)
		__builtin_ia32_pause();
}

/*
 * Batches until @want took one interrupt each, up to @tries; how many
 * did, -1 when one went wrong; *@calls: the interrupts they all took,
 * *@n: the batches
 */
static int hold_batches(const struct cmd *c, int want, int tries, long *calls, int *n)
{
	struct result r[HOLD_BATCH];
	int b, i, single = 0;

	*calls = 0;
	for (b = 0; b < tries && single < want; b++) {
		uint64_t first = next_ctx, seen = 0;
		struct vps_stats s0, s1;

		/*
		 * passes the module waits out after holds that saw nothing
		 * (a slow worker, two VMs on two cores, took a whole batch)
		 * are used up first, a request each: counted down mid-batch,
		 * the next hold would start at a batch's end, where nothing
		 * comes, again and again
		 */
		for (i = 0; i < 100 && adapter_field("hold_skip"); i++) {
			put_req(c, next_ctx++, 0);
			kick();
			if (reap_on_interrupt(r, 1, 5000) != 1 || !good(&r[0]))
				return -1;
		}
		first = next_ctx;
		s0 = stats();

		for (i = 0; i < HOLD_BATCH; i++) {
			put_req(c, next_ctx++, i);
			if (!i)
				continue;
			kick_by_rule();
			spin_us(HOLD_GAP_US);
		}
		if (reap_on_interrupt(r, HOLD_BATCH, 5000) != HOLD_BATCH)
			return -1;
		for (i = 0; i < HOLD_BATCH; i++) {
			if (!good(&r[i]) || r[i].context < first ||
			    r[i].context >= first + HOLD_BATCH)
				return -1;
			seen |= 1ull << (r[i].context - first);
		}
		if (seen != (1ull << HOLD_BATCH) - 1)
			return -1;
		s1 = stats();
		*calls += (long)(s1.calls - s0.calls);
		single += s1.calls - s0.calls == 1;
	}
	*n = b;
	return single;
}

/*
 * A burst of 3 that ends below the ceiling (8): its interrupt waits until
 * the hold's window has passed without a request.  (A hold that saw it
 * come learns 3 as the ceiling: a batch of 8 before each.)  The median of
 * 3 bursts' waits, from the last request posted to its completions
 * reaped, in ms; -1 when one went wrong.
 */
static double burst_end_wait(const struct cmd *c)
{
	double w[3];
	struct result r[3];
	int b, i;

	for (b = 0; b < 3; b++) {
		long calls;
		double t;
		int n;

		/* a batch of 8 first: the burst learnt no ceiling of 3 */
		if (hold_batches(c, 1, 1, &calls, &n) < 0)
			return -1;
		for (i = 0; i < 3; i++) {
			put_req(c, next_ctx++, i);
			if (!i)
				continue;
			kick_by_rule();
			if (i < 2)
				spin_us(HOLD_GAP_US);
		}
		t = now();
		/* one interrupt brings all 3: the hold held them together */
		if (reap_on_interrupt(r, 3, 5000) != 3 ||
		    !good(&r[0]) || !good(&r[1]) || !good(&r[2]))
			return -1;
		t = (now() - t) * 1000;
		w[b] = t;
	}
	/* the median: a wait a busy CPU cut short (need_resched) is one */
	for (b = 0; b < 2; b++)
		for (i = 0; i < 2 - b; i++)
			if (w[i] > w[i + 1]) {
				double x = w[i];

				w[i] = w[i + 1];
				w[i + 1] = x;
			}
	printf("# a burst's end waited %.2f, %.2f, %.2f ms\n", w[0], w[1], w[2]);
	return w[1];
}

/*
 * A burst's end (@ms) within a window of the mean gap (@mean_us): the
 * mean plus 2 ms for a TCG vCPU's delays, or plus the mean itself where
 * it is more: gaps of milliseconds between requests posted 100 us apart
 * are the host VM's stalls (three VMs on two cores), which delay the
 * interrupt as much (10.3 ms with a mean of 5.2 ms there).
 */
static bool burst_end_within(double ms, unsigned long long mean_us)
{
	return ms <= mean_us / 1000.0 + (mean_us > 2000 ? mean_us / 1000.0 : 2);
}

/*
 * The window is the guest's mean gap times hold_gaps while one is known:
 * a burst that ends below the ceiling waits about that for its
 * interrupt, not hold_us.  The mean here is this simulator's gaps as the
 * module saw them while holding or just after (100 us within a batch,
 * more between batches: reaping, reading counters), whatever it came to;
 * with hold_gaps 1 the window is that mean: the median burst waits no
 * more than it and 2 ms (a TCG vCPU's delays), or twice the mean.
 */
static void hold_gaps(const struct cmd *c, bool formed)
{
	unsigned long long gap = adapter_field("hold_gap_us"), most = 0;
	double learnt = -1;
	int round;

	tap(!set_param("hold_gaps", "1"), "hold-gaps-one", "%s", strerror(errno));
	/*
	 * Up to three rounds of three bursts, until one round's median is
	 * within the bound below: the host VM's stalls (a cold gate's VMs
	 * on two cores: 8.14 ms with a mean of 3.2 ms, once) come and go,
	 * a window of hold_us (5 ms, where the mean is 0.1-0.5 ms) stays
	 * in every round.
	 */
	for (round = 0; round < 3; round++) {
		learnt = burst_end_wait(c);
		/*
		 * the mean moves with the bursts' own gaps, and the window
		 * with it: a burst's end is bounded by the larger of the
		 * means before and after; the mean the batches learnt stays
		 * the one checked below
		 */
		most = adapter_field("hold_gap_us");
		if (most < gap)
			most = gap;
		printf("# round %d: a burst's end %.2f ms (median), mean gap %llu us, %llu after\n",
		       round + 1, learnt, gap, most);
		if (learnt < 0 || burst_end_within(learnt, most))
			break;
	}
	tap(!set_param("hold_gaps", "16"), "hold-gaps-again", "%s", strerror(errno));
	/*
	 * where the batches formed without holding (the debug kernel's slow
	 * worker takes each whole), no hold saw a gap, and that kernel takes
	 * milliseconds for a burst held or not
	 */
	tap((gap > 0 && gap < (unsigned long long)atoi(HOLD_US)) || formed,
	    "hold-gap-learnt", "%llu us%s", gap, formed ? ", batches formed without holds" : "");
	tap(learnt >= 0 && (burst_end_within(learnt, most) || formed),
	    "hold-burst-end-within-the-window", "%.2f ms, mean gap %llu us, %d rounds%s",
	    learnt, most, round < 3 ? round + 1 : 3,
	    formed ? ", batches formed without holds" : "");
}

/*
 * A hold that saw nothing come holds off the next tries for 2, 4, ...
 * doorbell passes, passes and not looks at the dry ring: with poll_us on,
 * one pass serves a queue-depth-1 guest request after request, looking
 * once per request (it counted each look: 10 requests, a drop of 10 in
 * one pass).
 */
static void hold_skip_a_pass(const struct cmd *c)
{
	unsigned long long s0, s1, k0, k1, p0;
	struct result r[2];
	int i, j, ok = 1;

	/*
	 * wasted holds in a row until 32 passes or more are to go: each
	 * doubles the wait, after the passes left are used up (a request
	 * a pass, doorbell by doorbell: poll_us is 0 here)
	 */
	for (j = 0; j < 8 && ok && adapter_field("hold_skip") < 32; j++) {
		for (i = 0; i < 100 && ok && adapter_field("hold_skip"); i++) {
			put_req(c, next_ctx++, 0);
			kick();
			ok = reap_on_interrupt(r, 1, 5000) == 1 && good(&r[0]);
		}
		put_req(c, next_ctx++, 0);
		put_req(c, next_ctx++, 1);
		kick_by_rule();
		ok = ok && reap_on_interrupt(r, 2, 5000) == 2 && good(&r[0]) && good(&r[1]);
	}
	s0 = adapter_field("hold_skip");
	tap(!set_param("poll_us", POLL_US), "hold-poll-us-set", "%s", strerror(errno));
	k0 = adapter_field("doorbells");
	p0 = adapter_field("polled");
	/*
	 * until a pass served requests by polling (a worker whose CPU is
	 * wanted ends its watch at once: the debug kernel beside two other
	 * VMs polled none of 30), three rounds at most
	 */
	for (j = 0; j < 3 && ok && adapter_field("polled") == p0; j++) {
		for (i = 0; i < 30 && ok; i++)
			ok = poll_one(c, i);
		/* the last pass ends when its watch does */
		usleep(2 * atoi(POLL_US));
	}
	s1 = adapter_field("hold_skip");
	k1 = adapter_field("doorbells");
	printf("# hold_skip %llu -> %llu, %d rounds of 30 requests, %llu doorbells, %llu polled\n",
	       s0, s1, j, k1 - k0, adapter_field("polled") - p0);
	tap(ok && s0 > s1 && s0 - s1 <= k1 - k0 && adapter_field("polled") - p0 >= 1,
	    "hold-skip-a-pass", "%s; %llu -> %llu, %llu doorbells, %llu polled",
	    ok ? "completed" : "a request failed", s0, s1, k1 - k0,
	    adapter_field("polled") - p0);
	tap(!set_param("poll_us", "0"), "hold-poll-us-off", "%s", strerror(errno));
}

static int do_hold(const char *disk)
{
	struct cmd c = { .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	unsigned long long got0, held1, wasted1, skip, ceiling, gap, passes1, unheld1;
	int i, bad = 0, single_off, single_on, n_off, n_on;
	long calls_off, calls_on;
	uint32_t one = 1;

	start_on(disk);
	if (attach(0, 0, disk, 0, 0) || ioctl(vfd, VPS_SET_REQ_CALL_THRESHOLD, &one))
		die("hold set-up");
	tap(!split_cpus(), "hold-cpus-split", "worker %d: %s", worker_tid(), strerror(errno));
	single_off = hold_batches(&c, HOLD_WANT, HOLD_WANT, &calls_off, &n_off);
	tap(!set_param("hold_us", HOLD_US), "hold-us-set", "%s", strerror(errno));
	got0 = adapter_field("held_got");
	single_on = hold_batches(&c, HOLD_WANT, HOLD_TRIES, &calls_on, &n_on);
	printf("# batches of %d: without hold_us %d of %d took one interrupt (%ld in all)\n",
	       HOLD_BATCH, single_off, n_off, calls_off);
	printf("# with it %d of %d (%ld), held %llu, requests come while held %llu, wasted %llu\n",
	       single_on, n_on, calls_on, adapter_field("held"),
	       adapter_field("held_got") - got0, adapter_field("hold_wasted"));
	printf("# at the ceiling %llu, the ceiling %llu; watches cut short %llu, run out %llu\n",
	       adapter_field("held_full"), adapter_field("hold_ceiling"),
	       adapter_field("poll_yield"), adapter_field("poll_idle"));
	tap(single_off >= 0 && single_on >= HOLD_WANT, "hold-one-interrupt-a-batch",
	    "%d of %d batches (want %d)", single_on, n_on, HOLD_WANT);
	/*
	 * where the batches form without a hold (a slow kernel: the worker
	 * wakes once the batch is posted), none is needed
	 */
	tap(adapter_field("held_got") > got0 || single_off >= HOLD_WANT / 2,
	    "hold-requests-came-while-held", "%llu, %d of %d batches whole without",
	    adapter_field("held_got") - got0, single_off, n_off);
	/*
	 * the first hold that saw requests come learnt the batch (8 out):
	 * later batches are signalled once 8 are out, not after 5 ms quiet
	 */
	tap(adapter_field("held_full") > 0 || single_off >= HOLD_WANT / 2,
	    "hold-signalled-at-ceiling", "%llu, the ceiling %llu",
	    adapter_field("held_full"), adapter_field("hold_ceiling"));
	hold_gaps(&c, single_off >= HOLD_WANT / 2);
	held1 = adapter_field("held");
	wasted1 = adapter_field("hold_wasted");
	passes1 = adapter_field("passes_took");
	unheld1 = adapter_field("unheld_waiting") + adapter_field("unheld_one");
	for (i = 0; i < 20 && !bad; i++) {
		uint64_t ctx = next_ctx++;
		struct result r;

		put_req(&c, ctx, i);
		kick_by_rule();
		bad = reap_on_interrupt(&r, 1, 5000) != 1 || r.context != ctx || !good(&r);
	}
	tap(!bad, "hold-qd1-completes", "request %d", i);
	tap(adapter_field("held") - held1 <= 1 &&
	    adapter_field("hold_wasted") - wasted1 == adapter_field("held") - held1,
	    "hold-qd1-not-held", "held %llu, of them with nothing come %llu",
	    adapter_field("held") - held1, adapter_field("hold_wasted") - wasted1);
	/*
	 * each request a pass of its own; every pass that took one either
	 * held or says why not (the debugfs counts bench's raw lines show)
	 */
	passes1 = adapter_field("passes_took") - passes1;
	unheld1 = adapter_field("unheld_waiting") + adapter_field("unheld_one") - unheld1;
	tap(passes1 >= 20 && unheld1 + adapter_field("held") - held1 == passes1,
	    "hold-qd1-passes-counted", "%llu passes took requests, %llu held not, %llu held",
	    passes1, unheld1, adapter_field("held") - held1);
	hold_skip_a_pass(&c);
	tap(!set_param("hold_us", hold_us_was), "hold-us-back", "%s: %s", hold_us_was,
	    strerror(errno));
	usleep(20000);
	tap(__atomic_load_n(&rs->cmp_prod_idx, __ATOMIC_ACQUIRE) == cmp_cons,
	    "hold-each-once", "a completion more came");
	/* new rings, a new guest perhaps: nothing the old rings taught stays */
	skip = adapter_field("hold_skip");
	ceiling = adapter_field("hold_ceiling");
	gap = adapter_field("hold_gap_us");
	i = new_rings(CMP_PAGES);
	tap(!i && (skip || ceiling || gap) && !adapter_field("hold_skip") &&
	    !adapter_field("hold_ceiling") && !adapter_field("hold_gap_us"),
	    "hold-learnt-gone-with-rings",
	    "rings %d; skip %llu, ceiling %llu, gap %llu before; %llu, %llu, %llu after", i,
	    skip, ceiling, gap, adapter_field("hold_skip"), adapter_field("hold_ceiling"),
	    adapter_field("hold_gap_us"));
	close_adapter();
	printf("1..%d\n", tests);
	return failures ? 1 : 0;
}

/* the guest's completion event index (VPS_FEAT_CMP_EVENT_IDX) */
static void set_event(uint32_t idx)
{
	uint32_t *ev = (uint32_t *)((uint8_t *)page(P_RS) + PVSCSI_EXT_CMP_EVENT_OFFSET);

	__atomic_store_n(ev, idx, __ATOMIC_RELAXED);
	/* the driver's side of the rule: write, full barrier, look again */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* @n TEST UNIT READYs one after another, each reaped by watching the ring */
static int tur_each(int n)
{
	struct cmd c = { .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	struct result r;
	int i, bad = 0;

	for (i = 0; i < n; i++) {
		uint64_t a = next_ctx++;

		put_req(&c, a, i % 64);
		kick();
		if (get_cmps_how(&r, 1, 5000, true) != 1 || r.context != a || !good(&r))
			bad++;
	}
	return bad;
}

/* the calls that came within @ms */
static uint64_t calls_within(int ms)
{
	struct pollfd p = { call_fd, POLLIN, 0 };
	uint64_t before = calls_seen, v;

	poll(&p, 1, ms);
	if (read(call_fd, &v, sizeof(v)) == sizeof(v))
		calls_seen += v;
	return calls_seen - before;
}

/*
 * The completion event index (PVSCSI_EXT_FEAT_INTR_MODERATION): with the
 * feature on, the module raises the completion interrupt only when it
 * publishes the entry the guest's event index names, as virtio's
 * used_event; off, and after SETUP_RINGS, every completion has one.
 */
static int do_event(const char *disk)
{
	struct cmd c = { .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	uint32_t f = 0, bad_bit = 1u << 7, on = VPS_FEAT_CMP_EVENT_IDX;
	struct result res[16];
	struct vps_stats s0, s1;
	uint64_t c0, n;
	int i, ret, bad;

	start_on(disk);
	if (attach(0, 0, disk, 0, 0))
		die("event set-up");
	tap(!ioctl(vfd, VPS_GET_FEATURES, &f) &&
	    f == (VPS_FEAT_CMP_EVENT_IDX | VPS_FEAT_MULTIQUEUE),
	    "event-offered", "features %#x: %s", f, strerror(errno));
	ret = ioctl(vfd, VPS_SET_FEATURES, &bad_bit);
	tap(ret < 0 && errno == EINVAL, "event-unknown-bit-refused", "ret %d %s", ret,
	    strerror(errno));
	ret = ioctl(vfd, VPS_SET_FEATURES, NULL);
	tap(ret < 0 && errno == EFAULT, "event-bad-pointer-refused", "ret %d %s", ret,
	    strerror(errno));

	/* off: each completion its interrupt, whatever the index says */
	set_event(cmp_cons + 1000);
	calls_within(50);
	s0 = stats();
	c0 = calls_seen;
	bad = tur_each(4);
	calls_within(50);
	n = calls_seen - c0;
	s1 = stats();
	tap(!bad && n == 4 && s1.calls - s0.calls == 4, "event-off-calls",
	    "%d bad, %llu calls (%llu by the module's count) for 4 completions", bad,
	    (unsigned long long)n, (unsigned long long)(s1.calls - s0.calls));

	tap(!ioctl(vfd, VPS_SET_FEATURES, &on), "event-on", "%s", strerror(errno));
	set_event(cmp_cons);
	c0 = calls_seen;
	bad = tur_each(1);
	tap(!bad && wait_call(c0), "event-wanted-calls",
	    "%d bad, no interrupt for the completion the index named", bad);

	/* the index stays behind: nothing more is wanted */
	calls_within(50);
	s0 = stats();
	c0 = calls_seen;
	bad = tur_each(8);
	calls_within(50);
	n = calls_seen - c0;
	s1 = stats();
	tap(!bad && !n && s1.calls_suppressed - s0.calls_suppressed >= 1 &&
	    s1.calls == s0.calls, "event-behind-no-calls",
	    "%d bad, %llu calls, %llu suppressed", bad, (unsigned long long)n,
	    (unsigned long long)(s1.calls_suppressed - s0.calls_suppressed));

	/* ahead: the fourth completion from here, not before */
	set_event(cmp_cons + 3);
	c0 = calls_seen;
	bad = tur_each(3);
	calls_within(50);
	n = calls_seen - c0;
	bad += tur_each(1);
	tap(!bad && !n && wait_call(c0), "event-ahead-calls-at-index",
	    "%d bad, %llu calls before the named completion", bad, (unsigned long long)n);

	/* a burst: one interrupt however many passes post it */
	calls_within(50);
	set_event(cmp_cons);
	c0 = calls_seen;
	for (i = 0; i < 16; i++)
		put_req(&c, next_ctx++, i);
	kick();
	i = get_cmps_how(res, 16, 5000, true);
	calls_within(50);
	n = calls_seen - c0;
	tap(i == 16 && n == 1, "event-burst-one-call", "%d of 16 completions, %llu calls", i,
	    (unsigned long long)n);

	/* SETUP_RINGS turns it off: the stale index no longer holds calls */
	req_prod = 0;
	cmp_cons = 0;
	rs->req_prod_idx = 0;
	rs->cmp_cons_idx = 0;
	ret = setup_rings(REQ_PAGES, CMP_PAGES, gpa(page(P_RS)));
	set_event(1000);
	c0 = calls_seen;
	bad = tur_each(1);
	tap(!ret && !bad && wait_call(c0), "event-off-after-setup-rings",
	    "ret %d, %d bad, no interrupt", ret, bad);

	/* no rings, no features */
	{
		struct vps_reset r = { .kind = VPS_RESET_ADAPTER };

		ioctl(vfd, VPS_RESET, &r);
	}
	ret = ioctl(vfd, VPS_SET_FEATURES, &on);
	tap(ret < 0 && errno == EINVAL, "event-needs-rings", "ret %d %s", ret, strerror(errno));
	close_adapter();
	printf("1..%d\n", tests);
	return failures ? 1 : 0;
}

/*
 * The multi-queue extension (VPS_SETUP_QUEUE): queues 1..MQ_N-1 beside
 * queue 0, each with its rings, its indices in the rings state page
 * (struct pvscsi_ext_queue_state), its doorbell and its interrupt.
 */
#define MQ_N		4
#define MQ_PAGES	2			/* per ring */
#define P_MQ(q)		(8192 + (q) * 8)	/* req at +0, cmp at +4 */
#define MQ_REQ_ENTRIES	(MQ_PAGES * PG / sizeof(struct pvscsi_req_desc))

struct mq {
	int kick, call;
	uint32_t req_prod, cmp_cons;
	uint64_t calls;
};

static struct mq mq[MQ_N];

static struct pvscsi_ext_queue_state *mq_state(uint32_t q)
{
	return (void *)((uint8_t *)page(P_RS) + PVSCSI_EXT_QUEUE_STATE_OFFSET(q));
}

static struct pvscsi_cmd_ext_setup_queue mq_cfg(uint32_t q, uint32_t pages)
{
	struct pvscsi_cmd_ext_setup_queue c = { .magic = PVSCSI_EXT_QUERY_MAGIC };
	uint32_t i;

	c.queue = q;
	c.req_ring_num_pages = pages;
	c.cmp_ring_num_pages = pages;
	for (i = 0; i < pages; i++) {
		c.req_ring_ppns[i] = gpa(page(P_MQ(q) + i)) / PG;
		c.cmp_ring_ppns[i] = gpa(page(P_MQ(q) + 4 + i)) / PG;
	}
	return c;
}

static int mq_setup(uint32_t q, unsigned long cmd)
{
	struct pvscsi_cmd_ext_setup_queue c = mq_cfg(q, MQ_PAGES);

	return ioctl(vfd, cmd, &c);
}

/* queue q's eventfds: its doorbell and its completion interrupt */
static void mq_eventfds(uint32_t q)
{
	vps_sim_queue_eventfds(vfd, q, &mq[q].kick, &mq[q].call);
}

static void mq_put(uint32_t q, const struct cmd *c, uint64_t ctx)
{
	struct pvscsi_req_desc *d;
	uint32_t slot = mq[q].req_prod % MQ_REQ_ENTRIES;

	d = (void *)((uint8_t *)page(P_MQ(q)) + slot * sizeof(*d));
	fill_desc(d, c, ctx, 0, 0);
	mq[q].req_prod++;
	__atomic_store_n(&mq_state(q)->req_prod_idx, mq[q].req_prod, __ATOMIC_RELEASE);
}

static void mq_kick(uint32_t q)
{
	uint64_t one = 1;

	if (write(mq[q].kick, &one, sizeof(one)) != sizeof(one))
		die("kick q");
}

/* reap what queue q's completion ring has, waiting up to @ms for @n */
static uint32_t mq_reap(uint32_t q, struct result *out, uint32_t n, int ms)
{
	struct pvscsi_ext_queue_state *st = mq_state(q);
	uint32_t got = 0, entries = 1u << st->cmp_num_entries_log2;
	uint64_t v;

	while (got < n && ms > 0) {
		uint32_t prod = __atomic_load_n(&st->cmp_prod_idx, __ATOMIC_ACQUIRE);

		while (mq[q].cmp_cons != prod && got < n) {
			struct pvscsi_cmp_desc *c = (void *)((uint8_t *)page(P_MQ(q) + 4) +
				(mq[q].cmp_cons % entries) * sizeof(*c));

			out[got].context = c->context;
			out[got].host = c->host_status;
			out[got].scsi = c->scsi_status;
			got++;
			mq[q].cmp_cons++;
			__atomic_store_n(&st->cmp_cons_idx, mq[q].cmp_cons, __ATOMIC_RELEASE);
		}
		if (got < n) {
			struct pollfd p = { mq[q].call, POLLIN, 0 };

			poll(&p, 1, 10);
			ms -= 10;
		}
	}
	if (read(mq[q].call, &v, sizeof(v)) == sizeof(v))
		mq[q].calls += v;
	return got;
}

/* the interrupts queue q got that were not counted yet */
static uint64_t mq_calls(uint32_t q)
{
	uint64_t v;

	if (read(mq[q].call, &v, sizeof(v)) == sizeof(v))
		mq[q].calls += v;
	return mq[q].calls;
}

/* every queue's interrupts but @q's, queue 0's included */
static uint64_t mq_calls_but(uint32_t q)
{
	uint64_t n = 0, v;
	uint32_t i;

	if (read(call_fd, &v, sizeof(v)) == sizeof(v))
		calls_seen += v;
	if (q)
		n += calls_seen;
	for (i = 1; i < MQ_N; i++)
		if (i != q)
			n += mq_calls(i);
	return n;
}

/* the end of an mq subcommand: the adapter and every queue's eventfds closed */
static int mq_done(void)
{
	uint32_t q;

	close_adapter();
	/* a queue never given eventfds has 0 there (mq[] starts zeroed): stdin */
	for (q = 1; q < MQ_N; q++) {
		if (mq[q].kick > 0)
			close(mq[q].kick);
		if (mq[q].call > 0)
			close(mq[q].call);
	}
	printf("1..%d\n", tests);
	return failures ? 1 : 0;
}

#define MQ_BURST	24
static int do_mq(const char *disk)
{
	struct cmd tur = { .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	struct pvscsi_cmd_ext_setup_queue c;
	struct result res[MQ_BURST];
	struct vps_eventfd e;
	uint32_t f = 0, q, i, bad, got, cmp0;
	uint64_t calls0, ctx;
	int ret, err;

	start_on(disk);
	if (attach(0, 0, disk, 0, 0))
		die("mq set-up");
	tap(!ioctl(vfd, VPS_GET_FEATURES, &f) && (f & VPS_FEAT_MULTIQUEUE),
	    "mq-offered", "features %#x", f);
	ret = ioctl(vfd, VPS_SET_FEATURES, &(uint32_t){ VPS_FEAT_MULTIQUEUE });
	tap(ret < 0 && errno == EINVAL, "mq-not-a-settable-feature", "ret %d", ret);
	for (q = 1; q < MQ_N; q++)
		mq_eventfds(q);
	e = (struct vps_eventfd){ VPS_MAX_QUEUES, mq[1].kick };
	ret = ioctl(vfd, VPS_SET_KICK_FD, &e);
	err = errno;
	e.index = VPS_EVENT_CMPL_Q(VPS_MAX_QUEUES);
	tap(ret < 0 && err == EINVAL && ioctl(vfd, VPS_SET_CALL_FD, &e) < 0 && errno == EINVAL,
	    "mq-eventfd-index-bounded", "ret %d", ret);

	/* refused: out of order, queue 0, bad magic, bad pages, no memory */
	ret = mq_setup(2, VPS_SETUP_QUEUE);
	tap(ret < 0 && errno == EINVAL, "mq-out-of-order-refused", "ret %d %s", ret,
	    strerror(errno));
	ret = mq_setup(0, VPS_SETUP_QUEUE);
	tap(ret < 0 && errno == EINVAL, "mq-queue-0-refused", "ret %d %s", ret, strerror(errno));
	c = mq_cfg(1, MQ_PAGES);
	c.magic = 0;
	ret = ioctl(vfd, VPS_SETUP_QUEUE, &c);
	tap(ret < 0 && errno == EINVAL, "mq-bad-magic-refused", "ret %d %s", ret, strerror(errno));
	c = mq_cfg(1, 3);
	ret = ioctl(vfd, VPS_SETUP_QUEUE, &c);
	tap(ret < 0 && errno == EINVAL, "mq-bad-pages-refused", "ret %d %s", ret, strerror(errno));
	c = mq_cfg(1, MQ_PAGES);
	c.cmp_ring_ppns[1] = (GPA_BASE + RAM_SIZE) / PG;
	ret = ioctl(vfd, VPS_SETUP_QUEUE, &c);
	err = errno;
	tap(ret < 0 && err == EFAULT && mq_setup(2, VPS_SETUP_QUEUE) < 0,
	    "mq-outside-memory-refused", "ret %d %s", ret, strerror(err));
	ret = ioctl(vfd, VPS_SETUP_QUEUE, NULL);
	tap(ret < 0 && errno == EFAULT, "mq-bad-pointer-refused", "ret %d", ret);

	bad = 0;
	for (q = 1; q < MQ_N; q++)
		bad += !!mq_setup(q, VPS_SETUP_QUEUE);
	tap(!bad, "mq-setup", "%u queues refused: %s", bad, strerror(errno));
	for (q = 1, bad = 0; q < MQ_N; q++)
		bad += mq_state(q)->req_num_entries_log2 != 6 ||
		       mq_state(q)->cmp_num_entries_log2 != 8 ||
		       mq_state(q)->req_call_threshold != 1;
	tap(!bad, "mq-sizes-published", "%u queues wrong: req %u cmp %u thr %u", bad,
	    mq_state(1)->req_num_entries_log2, mq_state(1)->cmp_num_entries_log2,
	    mq_state(1)->req_call_threshold);

	/* one command per queue: it completes on its own ring, with its own interrupt */
	for (q = 1, bad = 0; q < MQ_N; q++) {
		uint64_t others = mq_calls_but(q);

		calls0 = mq_calls(q);
		cmp0 = rs->cmp_prod_idx;
		ctx = next_ctx++;
		mq_put(q, &tur, ctx);
		mq_kick(q);
		got = mq_reap(q, res, 1, 5000);
		usleep(20000);
		if (got != 1 || res[0].context != ctx || res[0].host || res[0].scsi ||
		    mq_calls(q) == calls0 || rs->cmp_prod_idx != cmp0 ||
		    mq_calls_but(q) != others) {
			printf("# q%u: got %u ctx %llu/%llu host %u calls %llu cmp %u/%u, %llu\n",
			       q, got, (unsigned long long)res[0].context,
			       (unsigned long long)ctx, res[0].host,
			       (unsigned long long)(mq[q].calls - calls0), cmp0,
			       rs->cmp_prod_idx,
			       (unsigned long long)(mq_calls_but(q) - others));
			bad++;
		}
	}
	tap(!bad, "mq-own-ring-own-interrupt", "%u queues wrong", bad);

	/* data through queue 2, read back through queue 3 */
	{
		uint8_t *w = data(), *r = data() + 64 * 1024;
		struct cmd wr = rw16(1, 100, 16, w, 512), rd = rw16(0, 100, 16, r, 512);

		pattern(w, 100, 16, 77);
		memset(r, 0, 16 * 512);
		mq_put(2, &wr, next_ctx++);
		mq_kick(2);
		got = mq_reap(2, res, 1, 5000);
		ret = got == 1 && !res[0].host && !res[0].scsi;
		mq_put(3, &rd, next_ctx++);
		mq_kick(3);
		got = mq_reap(3, res, 1, 5000);
		tap(ret && got == 1 && !res[0].host && !res[0].scsi && !memcmp(w, r, 16 * 512),
		    "mq-data-across-queues", "write %d, read %u host %u", ret, got, res[0].host);
	}

	/* every queue at once, queue 0 too: each completion once, on its queue */
	{
		struct result r0[MQ_BURST];
		uint32_t n[MQ_N] = {}, dups = 0;
		uint64_t base = next_ctx;

		for (i = 0; i < MQ_BURST; i++)
			put_req(&tur, base + i, i);
		for (q = 1; q < MQ_N; q++)
			for (i = 0; i < MQ_BURST; i++)
				mq_put(q, &tur, base + q * MQ_BURST + i);
		next_ctx = base + MQ_N * MQ_BURST;
		kick();
		for (q = 1; q < MQ_N; q++)
			mq_kick(q);
		n[0] = collect(r0, MQ_BURST, 2000);
		for (i = 0; i < n[0]; i++)
			dups += r0[i].context - base >= MQ_BURST;
		for (q = 1; q < MQ_N; q++) {
			n[q] = mq_reap(q, res, MQ_BURST, 5000);
			dups += count_dups(res, n[q], base + q * MQ_BURST, MQ_BURST);
		}
		/* nothing more comes: no completion posted twice or astray */
		usleep(50000);
		dups += rs->cmp_prod_idx != cmp_cons;
		for (q = 1; q < MQ_N; q++)
			dups += mq_state(q)->cmp_prod_idx != mq[q].cmp_cons;
		tap(n[0] == MQ_BURST && n[1] == MQ_BURST && n[2] == MQ_BURST &&
		    n[3] == MQ_BURST && !dups, "mq-all-queues-at-once",
		    "completions %u %u %u %u, %u on a wrong queue or twice", n[0], n[1], n[2],
		    n[3], dups);
	}

	/* a bus reset covers what waits, unkicked, in queue 2's ring */
	ctx = next_ctx;
	for (i = 0; i < 4; i++)
		mq_put(2, &tur, next_ctx++);
	ret = reset(VPS_RESET_BUS, 0, 0);
	got = mq_reap(2, res, 4, 2000);
	for (i = 0, bad = 0; i < got; i++)
		bad += res[i].host != BTSTAT_BUSRESET || res[i].context != ctx + i;
	tap(!ret && got == 4 && !bad, "mq-bus-reset-covers-queues",
	    "ret %d, %u of 4 completed, %u not BUSRESET", ret, got, bad);

	/* the completion event index, per queue: behind, no interrupt */
	ret = ioctl(vfd, VPS_SET_FEATURES, &(uint32_t){ VPS_FEAT_CMP_EVENT_IDX });
	mq_state(1)->cmp_event_idx = mq[1].cmp_cons + 1000;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	calls0 = mq_calls(1);
	for (i = 0; i < 4; i++)
		mq_put(1, &tur, next_ctx++);
	mq_kick(1);
	got = mq_reap(1, res, 4, 2000);
	usleep(20000);
	tap(!ret && got == 4 && mq_calls(1) == calls0, "mq-event-index-behind",
	    "ret %d, %u of 4, %llu interrupts", ret, got,
	    (unsigned long long)(mq[1].calls - calls0));
	mq_state(1)->cmp_event_idx = mq[1].cmp_cons;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	mq_put(1, &tur, next_ctx++);
	mq_kick(1);
	got = mq_reap(1, res, 1, 2000);
	usleep(20000);
	tap(got == 1 && mq_calls(1) != calls0, "mq-event-index-wanted",
	    "%u of 1, no interrupt", got);
	f = 0;
	ioctl(vfd, VPS_SET_FEATURES, &f);

	/*
	 * a migration's destination: queue 1 taken over with the indices the
	 * rings state page holds (here: a new SETUP_RINGS drops the queues,
	 * then RESUME_QUEUE brings queue 1 back where it was)
	 */
	req_prod = 0;
	cmp_cons = 0;
	rs->req_prod_idx = 0;
	rs->cmp_cons_idx = 0;
	ret = setup_rings(REQ_PAGES, CMP_PAGES, gpa(page(P_RS)));
	ctx = next_ctx++;
	mq_put(2, &tur, ctx);
	mq_kick(2);
	usleep(50000);
	err = mq_setup(3, VPS_SETUP_QUEUE) < 0 && errno == EINVAL;
	tap(!ret && mq_state(2)->req_cons_idx == mq[2].req_prod - 1 && err,
	    "mq-setup-rings-drops-queues", "ret %d, queue 2 consumed %u of %u, queue 3 %s",
	    ret, mq_state(2)->req_cons_idx, mq[2].req_prod, err ? "refused" : "taken");
	mq_state(2)->req_prod_idx = mq[2].req_prod - 1;
	mq[2].req_prod--;
	i = mq_state(1)->req_cons_idx;	/* all it had, consumed */
	ret = mq_setup(1, VPS_RESUME_QUEUE);
	ctx = next_ctx++;
	mq_put(1, &tur, ctx);
	mq_kick(1);
	got = mq_reap(1, res, 1, 5000);
	tap(!ret && i + 1 == mq[1].req_prod && mq_state(1)->req_cons_idx == mq[1].req_prod &&
	    got == 1 && res[0].context == ctx, "mq-resume-keeps-indices",
	    "ret %d, cons %u of %u, %u completions", ret, mq_state(1)->req_cons_idx,
	    mq[1].req_prod, got);

	/* an adapter reset drops them, and no queue is taken without rings */
	reset(VPS_RESET_ADAPTER, 0, 0);
	ret = mq_setup(1, VPS_SETUP_QUEUE);
	tap(ret < 0 && errno == EINVAL, "mq-needs-rings", "ret %d %s", ret, strerror(errno));
	return mq_done();
}

/* threads named like the module's workers, in every process */
static int count_workers(void)
{
	glob_t g;
	size_t i;
	int n = 0;

	if (glob("/proc/[0-9]*/task/[0-9]*/comm", 0, NULL, &g))
		return -1;
	for (i = 0; i < g.gl_pathc; i++) {
		char comm[32] = "";
		FILE *f = fopen(g.gl_pathv[i], "r");

		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f) && !strncmp(comm, "vhost-pvscsi", 12))
			n++;
		fclose(f);
	}
	globfree(&g);
	return n;
}

/* arm the module's fail_once hook @what ("worker": the next worker created fails) */
static void arm_fail_hook(const char *what)
{
	int fd = open("/sys/kernel/debug/vhost_pvscsi/fail_once", O_WRONLY);

	if (fd < 0 || write(fd, what, strlen(what)) != (ssize_t)strlen(what))
		die("fail_once");
	close(fd);
}

static void fail_next_worker(void)
{
	arm_fail_hook("worker");
}

/* queue q's TEST UNIT READY, kicked on its doorbell: 1 when it completed GOOD */
static int mq_tur(uint32_t q, int ms)
{
	struct cmd tur = { .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	struct result r;
	uint64_t ctx = next_ctx++;

	mq_put(q, &tur, ctx);
	mq_kick(q);
	return mq_reap(q, &r, 1, ms) == 1 && r.context == ctx && !r.host && !r.scsi;
}

/*
 * A worker that cannot be created, as when vhost_task_create() or
 * kthread_create() fails (the fail_once hook "worker"), at each of the
 * three places that create one, and what is left after: VHOST_SET_OWNER
 * fails with ENOMEM and leaves no owner (the next ioctl is refused
 * EPERM) and no thread (an mm it kept would show as kmemleak's on the
 * debug kernel); the retry works and the adapter serves I/O;
 * VPS_SET_KICK_FD of a queue fails and connects no doorbell (the queue,
 * once set up, does not hear it; the retry connects it);
 * VPS_SETUP_QUEUE of a queue with no worker yet fails and takes no queue
 * (the next one is still out of order; the retry takes it and it serves
 * I/O).  The hook fires only where a worker is created: armed while
 * queue 1's doorbell is set again (its worker exists) it waits for queue
 * 3's setup.  These unwindings had never run (the debug kernel's
 * kmemleak sees what they would leak).
 */
static int do_worker_fail(const char *disk)
{
	struct cmd tur = { .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	int ret, err, n0, stale_kick, stale_call, refused;
	struct result r;
	uint64_t ctx;
	uint32_t got;

	open_ram();
	vfd = open("/dev/vhost-pvscsi", O_RDWR);
	if (vfd < 0)
		die("/dev/vhost-pvscsi");
	n0 = count_workers();
	/* a name the hook does not know is refused, not taken as some other */
	ret = open("/sys/kernel/debug/vhost_pvscsi/fail_once", O_WRONLY);
	if (ret < 0)
		die("fail_once");
	err = write(ret, "workers", 7) < 0 ? errno : 0;
	close(ret);
	tap(err == EINVAL, "fail-once-unknown-name-refused", "%s", strerror(err));
	fail_next_worker();
	ret = ioctl(vfd, VHOST_SET_OWNER);
	err = errno;
	tap(ret < 0 && err == ENOMEM, "worker-fail-set-owner", "ret %d %s", ret, strerror(err));
	ret = set_mem(GPA_BASE, RAM_SIZE, ram);
	err = errno;
	tap(ret < 0 && err == EPERM && count_workers() == n0, "worker-fail-no-owner-left",
	    "SET_MEM_TABLE ret %d %s, workers %d -> %d", ret, strerror(err), n0,
	    count_workers());
	setup_adapter();
	disk_blocks = vps_sim_blocks(disk);
	if (attach(0, 0, disk, 0, 0))
		die("attach");
	CHECK_GOOD("worker-fail-set-owner-retried", tur);

	/* queue 1: its doorbell's worker fails */
	stale_kick = eventfd(0, EFD_NONBLOCK);
	stale_call = eventfd(0, EFD_NONBLOCK);
	if (stale_kick < 0 || stale_call < 0)
		die("eventfd");
	fail_next_worker();
	ret = ioctl(vfd, VPS_SET_KICK_FD, &(struct vps_eventfd){ 1, stale_kick });
	err = errno;
	tap(ret < 0 && err == ENOMEM, "worker-fail-kick-fd", "ret %d %s", ret, strerror(err));
	ret = ioctl(vfd, VPS_SET_CALL_FD, &(struct vps_eventfd){ VPS_EVENT_CMPL_Q(1), stale_call });
	mq[1].kick = stale_kick;
	mq[1].call = stale_call;
	/*
	 * The setup kicks the queue's worker for a first look at the ring:
	 * a request put before it, whose completion shows that look is over
	 * (a 6.1 kthread's first round may come after the next request is
	 * put, and take it).  No second look follows: no REQ_CALL_THRESHOLD.
	 */
	ctx = next_ctx++;
	mq_put(1, &tur, ctx);
	ret = ret || mq_setup(1, VPS_SETUP_QUEUE);
	got = mq_reap(1, &r, 1, 5000);
	ret = ret || got != 1 || r.context != ctx;
	ctx = next_ctx++;
	mq_put(1, &tur, ctx);
	mq_kick(1);
	got = mq_reap(1, &r, 1, 300);
	tap(!ret && !got, "worker-fail-kick-fd-not-connected",
	    "ret %d, %u completions: the doorbell that failed was heard", ret, got);
	/* connected now: the request the deaf doorbell left completes */
	ret = ioctl(vfd, VPS_SET_KICK_FD, &(struct vps_eventfd){ 1, stale_kick });
	mq_kick(1);
	got = mq_reap(1, &r, 1, 5000);
	tap(!ret && got == 1 && r.context == ctx && !r.host && !r.scsi,
	    "worker-fail-kick-fd-retried", "ret %d, %u completions, host %u", ret, got, r.host);

	/* queue 2: no doorbell yet, so its setup creates the worker, and fails */
	fail_next_worker();
	ret = mq_setup(2, VPS_SETUP_QUEUE);
	err = errno;
	refused = mq_setup(3, VPS_SETUP_QUEUE) < 0 && errno == EINVAL;
	tap(ret < 0 && err == ENOMEM && refused, "worker-fail-setup-queue",
	    "ret %d %s, queue 3 %s", ret, strerror(err), refused ? "refused" : "taken");
	ret = mq_setup(2, VPS_SETUP_QUEUE);
	if (!ret)
		mq_eventfds(2);
	tap(!ret && mq_tur(2, 5000), "worker-fail-setup-queue-retried", "ret %d %s", ret,
	    strerror(errno));

	/* armed where a worker exists, the hook waits for the next creation */
	fail_next_worker();
	ret = ioctl(vfd, VPS_SET_KICK_FD, &(struct vps_eventfd){ 1, stale_kick });
	err = mq_setup(3, VPS_SETUP_QUEUE) < 0 ? errno : 0;
	tap(!ret && err == ENOMEM, "worker-fail-only-on-creation",
	    "queue 1's doorbell again: ret %d; queue 3's setup: %s", ret, strerror(err));
	ret = mq_setup(3, VPS_SETUP_QUEUE);
	if (!ret)
		mq_eventfds(3);
	tap(!ret && mq_tur(3, 5000) && mq_tur(1, 5000) && mq_tur(2, 5000),
	    "worker-fail-all-queues-serve", "ret %d %s", ret, strerror(errno));

	/*
	 * The backing out of memory (the hook "backing_nomem": its ENOMEM,
	 * as iomap's direct I/O answers when it cannot allocate): TASK SET
	 * FULL, which a guest retries; until 2026-12-07 HARDWARE ERROR,
	 * which failed the guest's write
	 */
	{
		uint8_t *w = data(), *rd = data() + (1u << 20);
		struct cmd c;
		int e;

		pattern(w, 300, 8, 0x6e6f6d);
		c = rw16(1, 300, 8, w, 512);
		arm_fail_hook("backing_nomem");
		e = run(&c, &r);
		tap(!e && r.host == BTSTAT_SUCCESS && r.scsi == 0x28, "backing-nomem-task-set-full",
		    "run %d host %#x scsi %#x key %#x asc %#x", e, r.host, r.scsi,
		    r.sense[2] & 0xf, r.sense[12]);
		CHECK_GOOD("backing-nomem-retried", c);
		memset(rd, 0, 8 * 512);
		c = rw16(0, 300, 8, rd, 512);
		arm_fail_hook("backing_nomem");
		e = run(&c, &r);
		ret = !e && r.host == BTSTAT_SUCCESS && r.scsi == 0x28;
		e = run(&c, &r);
		tap(ret && !e && good(&r) && !memcmp(w, rd, 8 * 512), "backing-nomem-read-retried",
		    "first answer %s, retry run %d host %#x scsi %#x",
		    ret ? "TASK SET FULL" : "not TASK SET FULL", e, r.host, r.scsi);
	}

	/*
	 * No memory for a request for 100 ms (the hook "req_nomem"): the
	 * descriptor waits in its slot, the worker looks again a tick at a
	 * time, and the command runs once the shortage is over.  Until
	 * 2026-12-07 the worker took the slot again at once, in a loop:
	 * thousands of tries in the 100 ms.
	 */
	{
		unsigned long long n0 = adapter_field("req_nomem"), n;
		double t0;
		int e;

		arm_fail_hook("req_nomem");
		t0 = now();
		e = run(&tur, &r);
		t0 = now() - t0;
		n = adapter_field("req_nomem") - n0;
		tap(!e && good(&r) && n >= 2 && n <= 100 && t0 >= 0.09, "req-nomem-waits-a-tick",
		    "run %d host %#x scsi %#x after %.3f s, %llu tries failed", e, r.host,
		    r.scsi, t0, n);
	}
	return mq_done();
}

/*
 * Every allocation an adapter's life makes in its VMM's thread, failed in
 * turn: the debug kernel's FAILSLAB and FAIL_PAGE_ALLOC through this
 * thread's fail-nth (tests/debug/test_failnth_01 sets them up).  A round
 * sets up a new adapter step by step (open, owner, memory, a LUN, rings,
 * eventfds, a second queue, the dirty log, stop and run, the LUN detached
 * and attached again, an adapter reset and the rings and queue set up
 * again), serves I/O and closes it, the k-th allocation of one step
 * failed; k goes up until that step makes fewer, then the next step.
 * What a failure must leave: an error (ENOMEM) or a success the step
 * could do without (a debugfs file), a retry that takes, later steps that
 * take, and an adapter that then serves I/O on both queues; kmemleak and
 * the kernel log (the script) see what the unwinding leaked or broke.
 * Allocations the workers make for I/O are not in this thread
 * (tests/debug/test_failio_01 fails those).
 */
enum { F_OPEN, F_OWNER, F_MEM, F_ATTACH, F_RINGS, F_MSG, F_KICK0, F_CALL0, F_MSGCALL,
	F_KICK1, F_CALL1, F_QUEUE1, F_LOG, F_STOP, F_RUN, F_DETACH, F_REATTACH, F_RESET,
	F_RINGS2, F_MSG2, F_QUEUE1_2, F_CLOSE, F_STEPS };
static const char *const fstep[F_STEPS] = {
	"open", "set-owner", "mem-table", "attach-lun", "setup-rings", "msg-ring",
	"kick-fd", "call-fd", "msg-call-fd", "kick-fd-q1", "call-fd-q1", "setup-queue-1",
	"set-log", "stop", "run", "detach-lun", "attach-lun-again", "adapter-reset",
	"setup-rings-again", "msg-ring-again", "setup-queue-1-again", "close"
};

static int fail_nth_fd = -1;

static void fail_nth_set(unsigned int n)
{
	char b[16];
	int len = snprintf(b, sizeof(b), "%u", n);

	if (pwrite(fail_nth_fd, b, len, 0) != len)
		die("fail-nth write");
}

/* 0: the failure set was made; else how many allocations it still waits for */
static unsigned int fail_nth_left(void)
{
	char b[16] = "";

	if (pread(fail_nth_fd, b, sizeof(b) - 1, 0) <= 0)
		die("fail-nth read");
	return strtoul(b, NULL, 10);
}

static int fail_step(int s, int disk_fd, const int *efd)
{
	struct vps_lun l = { .fd = disk_fd };
	struct vps_eventfd e;
	int ret;

	switch (s) {
	case F_OPEN:
		vfd = open("/dev/vhost-pvscsi", O_RDWR);
		return vfd < 0 ? -1 : 0;
	case F_OWNER:
		return ioctl(vfd, VHOST_SET_OWNER);
	case F_MEM:
		return set_mem(GPA_BASE, RAM_SIZE, ram);
	case F_ATTACH:
	case F_REATTACH:
		return ioctl(vfd, VPS_ATTACH_LUN, &l);
	case F_RINGS:
	case F_RINGS2:
		return setup_rings(REQ_PAGES, CMP_PAGES, gpa(page(P_RS)));
	case F_MSG:
	case F_MSG2:
		return setup_msg();
	case F_DETACH:
		return detach(0, 0);
	case F_RESET:
		/* the guest's side of it: rings as new, before it sets them up again */
		ret = reset(VPS_RESET_ADAPTER, 0, 0);
		memset(page(P_RS), 0, PG);
		memset(page(P_MQ(1)), 0, 8 * PG);
		req_prod = 0;
		cmp_cons = 0;
		msg_cons = 0;
		return ret;
	case F_KICK0:
		e = (struct vps_eventfd){ 0, efd[0] };
		return ioctl(vfd, VPS_SET_KICK_FD, &e);
	case F_CALL0:
		e = (struct vps_eventfd){ VPS_EVENT_CMPL, efd[1] };
		return ioctl(vfd, VPS_SET_CALL_FD, &e);
	case F_MSGCALL:
		e = (struct vps_eventfd){ VPS_EVENT_MSG, efd[2] };
		return ioctl(vfd, VPS_SET_CALL_FD, &e);
	case F_KICK1:
		e = (struct vps_eventfd){ 1, efd[3] };
		return ioctl(vfd, VPS_SET_KICK_FD, &e);
	case F_CALL1:
		e = (struct vps_eventfd){ VPS_EVENT_CMPL_Q(1), efd[4] };
		return ioctl(vfd, VPS_SET_CALL_FD, &e);
	case F_QUEUE1:
	case F_QUEUE1_2:
		return mq_setup(1, VPS_SETUP_QUEUE);
	case F_LOG:
		return set_log((uintptr_t)logmap, LOG_BYTES, VPS_LOG_ENABLE, 0);
	case F_STOP:
		return stop(1);
	case F_RUN:
		return stop(0);
	default:	/* F_CLOSE */
		return close(vfd);
	}
}

/* the adapter just set up serves a write and its read-back, and queue 1 a TUR */
static int fail_io_ok(const int *efd, unsigned int round)
{
	uint8_t *w = data(), *rd = data() + (1u << 20);
	uint64_t lba = (round * 64ull) % (disk_blocks - 8);
	struct result r;
	struct cmd c;

	kick_fd = efd[0];
	call_fd = efd[1];
	msg_fd = efd[2];
	calls_seen = 0;
	mq[1] = (struct mq){ .kick = efd[3], .call = efd[4] };
	pattern(w, lba, 8, round);
	c = rw16(1, lba, 8, w, 512);
	if (run(&c, &r) || !good(&r))
		return 0;
	memset(rd, 0, 8 * 512);
	c = rw16(0, lba, 8, rd, 512);
	if (run(&c, &r) || !good(&r) || memcmp(w, rd, 8 * 512))
		return 0;
	return mq_tur(1, 5000);
}

/* what the failures left, over the sweep */
struct fail_tally {
	unsigned int points[F_STEPS], without[F_STEPS], enomem, other, retry_bad, io_bad;
	char other_s[256], retry_s[256], io_s[128];
};

/* add to the list @buf (a char array: @size its size) */
static void tally(char *buf, size_t size, const char *fmt, ...)
{
	size_t n = strlen(buf);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf + n, size - n, fmt, ap);
	va_end(ap);
}

#define TALLY(buf, ...) tally(buf, sizeof(buf), __VA_ARGS__)

/*
 * One round: a new adapter through every step and its I/O, closed; the
 * k-th allocation of step @at failed.  1 when that failure was made, 0
 * when step @at made fewer than k allocations.
 */
static int fail_round(int disk_fd, unsigned int at, unsigned int k, struct fail_tally *f)
{
	unsigned int s, left = 1;
	int efd[5], ret = 0, err = 0;

	memset(ram, 0, P_DATA * PG);
	memset(page(P_MQ(1)), 0, 8 * PG);
	req_prod = 0;
	cmp_cons = 0;
	msg_cons = 0;
	for (s = 0; s < 5; s++) {
		efd[s] = eventfd(0, EFD_NONBLOCK);
		if (efd[s] < 0)
			die("eventfd");
	}
	for (s = 0; s < F_STEPS; s++) {
		if (s == F_CLOSE && !fail_io_ok(efd, k) && ++f->io_bad <= 4)
			TALLY(f->io_s, " %s #%u", fstep[at], k);
		if (s != at) {
			/* nothing failed in this step: it must take */
			if (fail_step(s, disk_fd, efd) && ++f->retry_bad <= 4)
				TALLY(f->retry_s, " %s after %s #%u:%s", fstep[s], fstep[at], k,
				      strerror(errno));
			continue;
		}
		fail_nth_set(k);
		ret = fail_step(s, disk_fd, efd);
		err = errno;
		left = fail_nth_left();
		fail_nth_set(0);
		if (left)
			continue;
		f->points[s]++;
		if (!ret) {
			f->without[s]++;
			continue;
		}
		if (err == ENOMEM)
			f->enomem++;
		else if (++f->other <= 4)
			TALLY(f->other_s, " %s #%u:%s", fstep[s], k, strerror(err));
		/* the retry, with nothing failed, must take */
		if (s != F_CLOSE && fail_step(s, disk_fd, efd) && ++f->retry_bad <= 4)
			TALLY(f->retry_s, " %s #%u retried:%s", fstep[s], k, strerror(errno));
	}
	for (s = 0; s < 5; s++)
		close(efd[s]);
	return !left;
}

#define FAIL_MAX_PER_STEP	400
static int do_failnth(const char *disk)
{
	static struct fail_tally f;
	unsigned int s, k, rounds = 0, failed = 0, unended = 0;
	int disk_fd, n0;

	open_ram();
	logmap = mmap(NULL, LOG_BYTES, PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (logmap == MAP_FAILED)
		die("mmap log");
	disk_blocks = vps_sim_blocks(disk);
	disk_fd = open(disk, O_RDWR | O_DIRECT);
	fail_nth_fd = open("/proc/thread-self/fail-nth", O_RDWR);
	tap(disk_fd >= 0 && fail_nth_fd >= 0, "failnth-available",
	    "disk %d, /proc/thread-self/fail-nth %d: %s", disk_fd, fail_nth_fd,
	    strerror(errno));
	if (disk_fd < 0 || fail_nth_fd < 0) {
		printf("1..%d\n", tests);
		return 1;
	}
	n0 = count_workers();
	/*
	 * Step by step, its 1st, 2nd, ... allocation failed until a round's
	 * step made fewer.  (How many a step makes varies a little: the
	 * debug kernel's own bookkeeping, kmemleak's metadata from its pool,
	 * allocates on some calls and not others.)
	 */
	for (s = 0; s < F_STEPS; s++) {
		for (k = 1; k <= FAIL_MAX_PER_STEP; k++) {
			rounds++;
			if (!fail_round(disk_fd, s, k, &f))
				break;
			failed++;
		}
		unended += k > FAIL_MAX_PER_STEP;
	}
	printf("# %u rounds, %u allocations failed; per step:", rounds, failed);
	for (s = 0; s < F_STEPS; s++)
		if (f.points[s])
			printf(" %s %u (%u done without)", fstep[s], f.points[s], f.without[s]);
	printf("; %u answered ENOMEM\n", f.enomem);
	tap(!unended && failed >= 20, "failnth-sweep-ends",
	    "%u allocations failed (at least 20 wanted), %u steps still allocating after %u",
	    failed, unended, FAIL_MAX_PER_STEP);
	/* (the rings are guest memory read in place: their set-up allocates nothing) */
	tap(f.points[F_OPEN] > f.without[F_OPEN] && f.points[F_OWNER] > f.without[F_OWNER] &&
	    f.points[F_ATTACH] > f.without[F_ATTACH] && f.points[F_KICK1] > f.without[F_KICK1] &&
	    f.points[F_MEM], "failnth-steps-reached",
	    "a step none of whose failures answered: open %u/%u owner %u/%u attach %u/%u queue 1's doorbell (its worker) %u/%u; mem %u",
	    f.points[F_OPEN] - f.without[F_OPEN], f.points[F_OPEN],
	    f.points[F_OWNER] - f.without[F_OWNER], f.points[F_OWNER],
	    f.points[F_ATTACH] - f.without[F_ATTACH], f.points[F_ATTACH],
	    f.points[F_KICK1] - f.without[F_KICK1], f.points[F_KICK1], f.points[F_MEM]);
	tap(!f.other, "failnth-errors-enomem", "%u other errors:%s", f.other, f.other_s);
	tap(!f.retry_bad, "failnth-retry-takes", "%u retries or later steps refused:%s",
	    f.retry_bad, f.retry_s);
	tap(!f.io_bad, "failnth-io-after", "%u rounds without I/O:%s", f.io_bad, f.io_s);
	tap(count_workers() == n0, "failnth-no-worker-left", "workers %d -> %d", n0,
	    count_workers());
	close(disk_fd);
	printf("1..%d\n", tests);
	return failures ? 1 : 0;
}

/*
 * The workers out of memory now and then (failslab and fail_page_alloc
 * with task-filter: tests/debug/test_failio_01 sets the rate; this sets
 * make-it-fail on each worker thread), I/O to a block device (LUN 0) and
 * a file (LUN 1), flat and bounced (a buffer off 512-byte alignment):
 * each command answers once, with its interrupt, GOOD or TASK SET FULL
 * (a guest retries that one, and so do we, up to 200 times); nothing
 * else, no data lost (each GOOD write reads back, GOOD), and once the
 * workers are let go every block written reads back at the first try.
 */
#define FAILIO_ROUNDS	160
static int failio_make_it_fail(const char *v)
{
	char dirs[MAX_WORKERS][64], path[80];
	int i, n = find_workers(dirs), ok = 0;

	for (i = 0; i < n; i++) {
		int fd;

		snprintf(path, sizeof(path), "%.64s/make-it-fail", dirs[i]);
		fd = open(path, O_WRONLY);
		ok += fd >= 0 && write(fd, v, 1) == 1;
		if (fd >= 0)
			close(fd);
	}
	return n > 0 && ok == n ? n : 0;
}

struct failio_tally {
	unsigned int tsf, bad, lost, tries_max, mism;
	char bad_s[200];
};

/* run @c until it is not TASK SET FULL; 1 when it ended GOOD */
static int failio_run(struct cmd *c, struct failio_tally *t)
{
	struct result r;
	unsigned int tries;
	int e;

	for (tries = 1; tries <= 200; tries++) {
		e = run(c, &r);
		if (e) {
			if (++t->lost <= 1)
				TALLY(t->bad_s, " no answer (%d) to %#x", e, c->cdb[0]);
			return 0;
		}
		if (r.host == BTSTAT_SUCCESS && r.scsi == 0x28) {
			t->tsf++;
			continue;
		}
		if (tries > t->tries_max)
			t->tries_max = tries;
		if (good(&r))
			return 1;
		if (++t->bad <= 3)
			TALLY(t->bad_s, " %#x: host %#x scsi %#x key %#x asc %#x/%#x", c->cdb[0],
			      r.host, r.scsi, r.sense[2] & 0xf, r.sense[12], r.sense[13]);
		return 0;
	}
	if (++t->bad <= 3)
		TALLY(t->bad_s, " %#x: TASK SET FULL 200 times", c->cdb[0]);
	return 0;
}

static int do_failio(const char *disk, const char *file)
{
	uint32_t seed = (uint32_t)time(NULL), i, lun, workers;
	struct failio_tally t = {};
	uint64_t blocks[2];
	unsigned int clean_bad = 0;
	uint8_t *w, *rd;
	struct cmd c;

	start_on(disk);
	w = data();
	rd = data() + (2u << 20);
	blocks[0] = disk_blocks;
	blocks[1] = vps_sim_blocks(file);
	if (attach(0, 0, disk, 0, 0) || attach(0, 1, file, 0, 0))
		die("failio attach");
	workers = failio_make_it_fail("1");
	tap(workers > 0, "failio-armed", "no worker's make-it-fail could be set");
	for (i = 0; i < FAILIO_ROUNDS; i++) {
		/* odd rounds bounce: the buffers 100 bytes off alignment */
		uint32_t off = (i & 1) * 100, n = 1 + i % 8;
		uint64_t lba;

		lun = (i / 2) & 1;
		lba = (i * 16ull) % (blocks[lun] - 16);
		pattern(w + off, lba, n, seed + lun);
		c = rw16(1, lba, n, w + off, 512);
		c.lun = lun;
		if (!failio_run(&c, &t))
			continue;
		memset(rd + off, 0, n * 512);
		c = rw16(0, lba, n, rd + off, 512);
		c.lun = lun;
		if (failio_run(&c, &t) && memcmp(w + off, rd + off, n * 512))
			t.mism++;
	}
	printf("# %u workers failing; %u TASK SET FULL answers, at most %u tries\n", workers,
	       t.tsf, t.tries_max);
	tap(!t.lost, "failio-every-command-answered", "%u lost:%s", t.lost, t.bad_s);
	tap(!t.bad, "failio-good-or-task-set-full", "%u other answers:%s", t.bad, t.bad_s);
	tap(t.tsf > 0, "failio-failures-made", "no TASK SET FULL in %u rounds: nothing failed?",
	    FAILIO_ROUNDS);
	tap(!t.mism, "failio-data-intact", "%u read-backs differ", t.mism);

	/* let go: every block written reads back at once */
	failio_make_it_fail("0");
	for (i = 0; i < FAILIO_ROUNDS; i++) {
		uint32_t off = (i & 1) * 100, n = 1 + i % 8;
		uint64_t lba;
		struct result r;

		lun = (i / 2) & 1;
		lba = (i * 16ull) % (blocks[lun] - 16);
		pattern(w + off, lba, n, seed + lun);
		memset(rd + off, 0, n * 512);
		c = rw16(0, lba, n, rd + off, 512);
		c.lun = lun;
		clean_bad += run(&c, &r) || !good(&r) || memcmp(w + off, rd + off, n * 512);
	}
	tap(!clean_bad, "failio-clean-after", "%u of %u reads failed or differ", clean_bad,
	    FAILIO_ROUNDS);
	close_adapter();
	printf("1..%d\n", tests);
	return failures ? 1 : 0;
}

/*
 * Of this process's adapter's first @nq queues, how many show in debugfs
 * ("queue N ... worker TID") a thread id of their own that is one of the
 * module's workers: what scripts/bench --pin and taskset go by, since a
 * worker's comm is cut short of its queue's number.  A vhost_task writes
 * its id on its first round, so a zero is waited out for up to a second.
 */
static uint32_t worker_tids_ok(uint32_t nq)
{
	int tid[VPS_MAX_QUEUES] = { 0 };
	uint32_t i, j, ok = 0;

	if (nq > VPS_MAX_QUEUES)
		return 0;
	for (int tries = 0; tries < 100; tries++) {
		uint32_t zero = 0;
		char line[256];
		FILE *f = adapter_file();

		if (!f)
			return 0;
		while (fgets(line, sizeof(line), f)) {
			const char *w = strstr(line, " worker ");

			if (sscanf(line, "queue %u", &i) == 1 && i < nq && w)
				tid[i] = atoi(w + 8);
		}
		fclose(f);
		for (i = 0; i < nq; i++)
			zero += !tid[i];
		if (!zero)
			break;
		usleep(10000);
	}
	for (i = 0; i < nq; i++) {
		char path[64], comm[32] = "";
		bool twice = false;
		FILE *f;

		for (j = 0; j < i; j++)
			twice |= tid[j] == tid[i];
		snprintf(path, sizeof(path), "/proc/%d/comm", tid[i]);
		f = tid[i] > 0 ? fopen(path, "r") : NULL;
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f) && !strncmp(comm, "vhost-pvscsi", 12) && !twice)
			ok++;
		fclose(f);
	}
	return ok;
}

/*
 * A worker per queue, and no lock shared by the queues on the data path:
 * queue 1's worker is held in a WRITE to a file LUN on a frozen
 * filesystem (kiocb_start_write() waits for the thaw, in the worker),
 * while queue 2 serves a READ and a TEST UNIT READY on DISK and the
 * stats are read; after the thaw queue 1's WRITE completes and reads
 * back.  With one worker for all queues (before 2026-12-03) queue 2
 * waited for the thaw too.
 */
static int do_mq_freeze(const char *disk, const char *file, const char *mnt)
{
	struct cmd tur = { .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	uint8_t *w, *r, *back;
	struct cmd wr, rd;
	struct result res[4];
	struct vps_stats st;
	char cmd[300];
	uint32_t q, got, bad = 0;
	int n, ret;

	start_on(disk);
	/* guest memory is there from here on */
	w = data();
	r = w + 64 * 1024;
	back = w + 128 * 1024;
	wr = rw16(1, 8, 8, w, 512);
	rd = rw16(0, 8, 8, r, 512);
	tap(!attach(0, 0, disk, 0, 0) && !attach(1, 0, file, 0, 0), "mq-freeze-attach",
	    "%s", strerror(errno));
	for (q = 1; q <= 2; q++) {
		mq_eventfds(q);
		bad += !!mq_setup(q, VPS_SETUP_QUEUE);
	}
	tap(!bad, "mq-freeze-setup", "%u queues refused", bad);
	n = count_workers();
	tap(n == 3, "mq-worker-per-queue", "%d workers for 3 queues", n);
	got = worker_tids_ok(3);
	tap(got == 3, "mq-worker-tids", "%u of 3 queues show their own worker's thread id", got);
	/*
	 * A process sharing the owner's mm that is not one of its threads (a
	 * vfork child) is no owner: a queue's worker would start in it and
	 * take the adapter down when it exits
	 */
	{
		struct vps_eventfd e = { 3, mq[1].kick };
		int st = 0;
		pid_t pid = vfork();

		if (pid == 0)
			_exit(ioctl(vfd, VPS_SET_KICK_FD, &e) < 0 && errno == EPERM ? 0 : 1);
		waitpid(pid, &st, 0);
		n = count_workers();
		tap(pid > 0 && WIFEXITED(st) && !WEXITSTATUS(st) && n == 3,
		    "mq-vfork-child-not-owner", "child %s, %d workers",
		    WIFEXITED(st) && !WEXITSTATUS(st) ? "refused" : "served", n);
	}

	snprintf(cmd, sizeof(cmd), "fsfreeze --freeze %s", mnt);
	tap(!shell(cmd), "mq-freeze", "");
	wr.target = 1;
	pattern(w, 8, 8, 53);
	mq_put(1, &wr, next_ctx++);
	mq_kick(1);
	usleep(300000);
	got = mq_reap(1, res, 1, 10);
	tap(!got, "mq-write-held-by-freeze", "%u completed, %u consumed", got,
	    mq_state(1)->req_cons_idx);

	memset(r, 0, 4096);
	mq_put(2, &rd, next_ctx++);
	mq_put(2, &tur, next_ctx++);
	mq_kick(2);
	got = mq_reap(2, res, 2, 3000);
	tap(got == 2 && good(&res[0]) && good(&res[1]), "mq-other-queue-served-meanwhile",
	    "%u of 2 completed on queue 2 while queue 1's worker waits", got);
	ret = ioctl(vfd, VPS_GET_STATS, &st);
	tap(!ret && st.in_flight == 1, "mq-stats-meanwhile", "ret %d, in flight %llu", ret,
	    (unsigned long long)st.in_flight);

	snprintf(cmd, sizeof(cmd), "fsfreeze --unfreeze %s", mnt);
	tap(!shell(cmd), "mq-thaw", "");
	got = mq_reap(1, res, 1, 10000);
	tap(got == 1 && good(&res[0]), "mq-held-write-completes-after-thaw", "%u of 1", got);
	rd = rw16(0, 8, 8, back, 512);
	rd.target = 1;
	memset(back, 0, 4096);
	mq_put(2, &rd, next_ctx++);
	mq_kick(2);
	got = mq_reap(2, res, 1, 5000);
	tap(got == 1 && good(&res[0]) && !memcmp(w, back, 4096), "mq-held-write-reads-back",
	    "%u of 1", got);
	return mq_done();
}

/*
 * Interrupt coalescing (coalesce_us) on DISK, whose I/O takes tens of
 * milliseconds (null_blk irqmode=2): a READ stays in flight while TEST
 * UNIT READYs complete at once beside it.  Their interrupt is held (the
 * debugfs count "coalesced" rises) and still comes, by the timer, while
 * the READ is in flight; a burst of them shares a few; a request alone
 * in flight is never held; coalesce_us 0 holds nothing; and an adapter
 * closed while an interrupt is held goes cleanly (the timer goes first).
 */
#define COAL_BURST 12

/* wait (up to a second) until the adapter raised N interrupts in all */
static int calls_reach(uint64_t n)
{
	double t0 = now();

	while (stats().calls < n && now() - t0 < 1)
		usleep(100);
	return stats().calls >= n;
}

static int do_coalesce(const char *disk)
{
	struct cmd tur = { .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	struct cmd rd = cmd_in((uint8_t[]){ 0x28, 0, 0, 0, 0, 0, 0, 0, 8, 0 }, 10, 4096);
	unsigned long long h0, h1;
	struct vps_stats s0, s1;
	struct result r, res[COAL_BURST];
	int i, got, pending;
	double t0, ms;
	char g[256];

	start_on(disk);
	if (attach(0, 0, disk, 0, 0))
		die("coalesce set-up");
	tap(!set_param("coalesce_us", "1000"), "coalesce-us-set", "%s", strerror(errno));

	/* alone in flight: nothing to wait for, the interrupt comes at once */
	h0 = adapter_field("coalesced");
	s0 = stats();
	put_req(&rd, next_ctx++, 0);
	kick();
	got = get_cmps(&r, 1, 5000);
	calls_reach(s0.calls + 1);
	s1 = stats();
	tap(got == 1 && good(&r) && adapter_field("coalesced") == h0 && s1.calls == s0.calls + 1,
	    "coalesce-alone-not-held", "got %d, held %llu, calls %llu",
	    got, adapter_field("coalesced") - h0, (unsigned long long)(s1.calls - s0.calls));

	/* beside a READ in flight: held, and due by the timer */
	h0 = adapter_field("coalesced");
	s0 = stats();
	put_req(&rd, next_ctx++, 0);
	kick();
	usleep(2000);
	put_req(&tur, next_ctx++, 1);
	kick();
	got = get_cmps(&r, 1, 5000);
	t0 = now();
	calls_reach(s0.calls + 1);
	ms = (now() - t0) * 1000;
	s1 = stats();
	pending = __atomic_load_n(&rs->cmp_prod_idx, __ATOMIC_ACQUIRE) == cmp_cons;
	h1 = adapter_field("coalesced");
	printf("# the TUR's interrupt came %.1f ms after its completion\n", ms);
	tap(got == 1 && good(&r) && h1 == h0 + 1 && s1.calls == s0.calls + 1 && pending,
	    "coalesce-held-then-due", "got %d, held %llu, calls %llu, READ done before: %d",
	    got, h1 - h0, (unsigned long long)(s1.calls - s0.calls), !pending);
	got = get_cmps(&r, 1, 5000);
	h0 = adapter_field("coalesced");
	tap(got == 1 && good(&r) && calls_reach(s1.calls + 1) && h0 == h1,
	    "coalesce-last-at-once", "got %d, calls %llu, held %llu", got,
	    (unsigned long long)(stats().calls - s1.calls), h0 - h1);

	/* a burst beside a READ: fewer interrupts than completions */
	s0 = stats();
	put_req(&rd, next_ctx++, 0);
	kick();
	usleep(2000);
	for (i = 0; i < COAL_BURST; i++) {
		put_req(&tur, next_ctx++, 1 + i);
		kick();
	}
	got = get_cmps(res, COAL_BURST, 5000);
	usleep(5000);
	s1 = stats();
	pending = __atomic_load_n(&rs->cmp_prod_idx, __ATOMIC_ACQUIRE) == cmp_cons;
	tap(got == COAL_BURST && pending && s1.calls - s0.calls >= 1 &&
	    s1.calls - s0.calls <= COAL_BURST / 3, "coalesce-burst-shares",
	    "%d completions, %llu interrupts (at most %d), READ done: %d", got,
	    (unsigned long long)(s1.calls - s0.calls), COAL_BURST / 3, !pending);
	printf("# %d completions beside a READ: %llu interrupts\n", got,
	       (unsigned long long)(s1.calls - s0.calls));
	tap(get_cmps(&r, 1, 5000) == 1 && good(&r), "coalesce-burst-read", "READ lost");

	/* off: nothing held */
	tap(!set_param("coalesce_us", "0"), "coalesce-us-off", "%s", strerror(errno));
	h0 = adapter_field("coalesced");
	s0 = stats();
	put_req(&rd, next_ctx++, 0);
	kick();
	usleep(2000);
	put_req(&tur, next_ctx++, 1);
	kick();
	got = get_cmps(&r, 1, 5000);
	calls_reach(s0.calls + 1);
	s1 = stats();
	pending = __atomic_load_n(&rs->cmp_prod_idx, __ATOMIC_ACQUIRE) == cmp_cons;
	tap(got == 1 && adapter_field("coalesced") == h0 && s1.calls == s0.calls + 1 && pending,
	    "coalesce-off-not-held", "held %llu, calls %llu",
	    adapter_field("coalesced") - h0, (unsigned long long)(s1.calls - s0.calls));
	tap(get_cmps(&r, 1, 5000) == 1 && good(&r), "coalesce-off-read", "READ lost");

	/* closed with an interrupt held (and a READ in flight) */
	tap(!set_param("coalesce_us", "1000"), "coalesce-us-again", "%s", strerror(errno));
	h0 = adapter_field("coalesced");
	put_req(&rd, next_ctx++, 0);
	kick();
	usleep(2000);
	put_req(&tur, next_ctx++, 1);
	kick();
	got = get_cmps(&r, 1, 5000);
	tap(got == 1 && adapter_field("coalesced") == h0 + 1, "coalesce-held-at-close",
	    "got %d, held %llu", got, adapter_field("coalesced") - h0);
	/* the held interrupt's timer goes with it, and so does the adapter */
	close_adapter();
	tap(vps_sim_gauges_zero_within(g, sizeof(g), 5000), "coalesce-close",
	    "gauges 5 s after: %s", g);
	tap(!set_param("coalesce_us", "0"), "coalesce-us-default", "%s", strerror(errno));
	printf("1..%d\n", tests);
	return failures ? 1 : 0;
}

/*
 * The worker's scheduling policy (batch_workers, vps_worker_policy()):
 * SCHED_NORMAL while each doorbell brings one request, SCHED_BATCH once a
 * round takes several, SCHED_NORMAL again after VPS_BATCH_SINGLES single
 * rounds in a row, a one-round try of SCHED_BATCH after VPS_BATCH_TRY of
 * them; 0 and 2 hold it NORMAL and BATCH.  Every command completes.
 */
/* wait (up to a second) for the worker's policy to be @want */
static int policy_is(pid_t tid, int want)
{
	double t0 = now();
	int p;

	while ((p = sched_getscheduler(tid)) != want && now() - t0 < 1)
		usleep(1000);
	return p;
}

/* @n requests, each alone: its doorbell, its completion */
static int singles(int n)
{
	struct cmd tur = { .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	struct result r;
	int i, ok = 0;

	for (i = 0; i < n; i++) {
		put_req(&tur, next_ctx++, 0);
		kick();
		ok += get_cmps(&r, 1, 5000) == 1 && good(&r);
	}
	return ok == n;
}

/* @n requests on one doorbell */
static int batch(int n)
{
	struct cmd tur = { .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	struct result r[8];
	int i, got, ok = 0;

	for (i = 0; i < n; i++)
		put_req(&tur, next_ctx++, i);
	kick();
	got = get_cmps(r, n, 5000);
	for (i = 0; i < got; i++)
		ok += good(&r[i]);
	return got == n && ok == n;
}

static int do_batch(const char *disk)
{
	unsigned long long on, off;
	pid_t tid;
	int p, ok;

	start_on(disk);
	if (attach(0, 0, disk, 0, 0))
		die("batch set-up");
	tap(!set_param("batch_workers", "1"), "batch-default-mode", "%s", strerror(errno));
	ok = singles(3);
	tid = worker_tid();
	tap(tid > 0, "batch-worker-found", "tid %d", tid);
	if (tid <= 0)
		die("no worker");
	p = policy_is(tid, SCHED_OTHER);
	tap(ok && p == SCHED_OTHER, "batch-singles-normal", "policy %d, singles ok %d", p, ok);

	on = adapter_field("batch_on");
	ok = batch(4);
	p = policy_is(tid, SCHED_BATCH);
	tap(ok && p == SCHED_BATCH && adapter_field("batch_on") == on + 1,
	    "batch-on-after-a-batch", "policy %d, batch ok %d, batch_on +%llu", p, ok,
	    adapter_field("batch_on") - on);

	/* VPS_BATCH_SINGLES - 1 single rounds keep it */
	ok = singles(7);
	usleep(20000);
	p = sched_getscheduler(tid);
	tap(ok && p == SCHED_BATCH, "batch-kept-through-7-singles", "policy %d", p);
	off = adapter_field("batch_off");
	ok = singles(1);
	p = policy_is(tid, SCHED_OTHER);
	tap(ok && p == SCHED_OTHER && adapter_field("batch_off") == off + 1,
	    "batch-off-after-8-singles", "policy %d, batch_off +%llu", p,
	    adapter_field("batch_off") - off);

	/* VPS_BATCH_TRY single rounds: a one-round try */
	on = adapter_field("batch_on");
	ok = singles(63);
	usleep(20000);
	p = sched_getscheduler(tid);
	tap(ok && p == SCHED_OTHER && adapter_field("batch_on") == on,
	    "batch-no-try-before-64", "policy %d, batch_on +%llu", p,
	    adapter_field("batch_on") - on);
	ok = singles(1);
	p = policy_is(tid, SCHED_BATCH);
	tap(ok && p == SCHED_BATCH, "batch-try-after-64", "policy %d", p);
	ok = singles(1);
	p = policy_is(tid, SCHED_OTHER);
	tap(ok && p == SCHED_OTHER, "batch-try-ends-on-a-single", "policy %d", p);
	ok = singles(1);
	usleep(20000);
	p = sched_getscheduler(tid);
	tap(ok && p == SCHED_OTHER, "batch-no-second-try", "policy %d", p);

	/* 0: never, even after a batch; 2: always, even for a single */
	ok = batch(4) && policy_is(tid, SCHED_BATCH) == SCHED_BATCH;
	tap(!set_param("batch_workers", "0"), "batch-param-0", "%s", strerror(errno));
	ok = ok && batch(4);
	p = policy_is(tid, SCHED_OTHER);
	tap(ok && p == SCHED_OTHER, "batch-0-normal-after-a-batch", "policy %d, ok %d", p, ok);
	tap(!set_param("batch_workers", "2"), "batch-param-2", "%s", strerror(errno));
	ok = singles(1);
	p = policy_is(tid, SCHED_BATCH);
	tap(ok && p == SCHED_BATCH, "batch-2-batch-for-a-single", "policy %d", p);

	/*
	 * A change of policy that fails (the hook "setattr") leaves the
	 * worker as it was and is tried again at the next round
	 */
	{
		unsigned long long nf;

		set_param("batch_workers", "0");
		ok = singles(1) && policy_is(tid, SCHED_OTHER) == SCHED_OTHER;
		on = adapter_field("batch_on");
		nf = adapter_field("policy_failed");
		arm_fail_hook("setattr");
		set_param("batch_workers", "2");
		ok = ok && singles(1);
		usleep(20000);
		tap(ok && adapter_field("policy_failed") == nf + 1 &&
		    adapter_field("batch_on") == on, "batch-setattr-fails",
		    "ok %d, policy_failed +%llu, batch_on +%llu", ok,
		    adapter_field("policy_failed") - nf, adapter_field("batch_on") - on);
		ok = singles(1);
		p = policy_is(tid, SCHED_BATCH);
		tap(ok && p == SCHED_BATCH && adapter_field("batch_on") == on + 1 &&
		    adapter_field("policy_failed") == nf + 1, "batch-setattr-retried",
		    "policy %d, batch_on +%llu, policy_failed +%llu", p,
		    adapter_field("batch_on") - on, adapter_field("policy_failed") - nf);
	}
	tap(!set_param("batch_workers", "1"), "batch-param-back", "%s", strerror(errno));

	/* a policy the administrator gave the worker is left alone */
	{
		struct sched_param sp = { .sched_priority = 1 };

		tap(!sched_setscheduler(tid, SCHED_FIFO, &sp), "batch-rt-set", "%s",
		    strerror(errno));
		ok = singles(8) && batch(4);
		usleep(20000);
		p = sched_getscheduler(tid);
		tap(ok && p == SCHED_FIFO, "batch-rt-policy-kept", "policy %d", p);
		sp.sched_priority = 0;
		sched_setscheduler(tid, SCHED_OTHER, &sp);
	}
	close_adapter();
	printf("1..%d\n", tests);
	return failures ? 1 : 0;
}

/* a random 4k-aligned LBA of the disk, from the bench runs' own sequence */
static uint64_t bench_lba(uint32_t *seed)
{
	*seed = *seed * 1103515245 + 12345;
	return (*seed % (disk_blocks / 8)) * 8;
}

static int do_bench(const char *disk, int qd, double seconds, bool spin)
{
	static struct result res[256];
	uint64_t done = 0;
	uint32_t seed = 1, i;
	double t0, t1;

	start_on(disk);
	if (attach(0, 0, disk, 0, 0))
		die("attach");
	if (qd < 1 || qd > 128)
		qd = 1;
	t0 = now();
	for (i = 0; i < (uint32_t)qd; i++) {
		struct cmd c = rw16(0, bench_lba(&seed), 8, data() + i * 4096, 512);

		put_req(&c, next_ctx++, i);
	}
	kick();
	while ((t1 = now()) - t0 < seconds) {
		int got = get_cmps_how(res, 1, 1000, spin), k;

		if (got <= 0)
			break;
		/* harvest whatever else is there */
		got += get_cmps(res + 1, (int)(rs->cmp_prod_idx - cmp_cons), 0);
		for (k = 0; k < got; k++) {
			struct cmd c = rw16(0, bench_lba(&seed), 8,
					    data() + (res[k].context % qd) * 4096, 512);

			put_req(&c, next_ctx++, k);
		}
		done += got;
		if ((uint32_t)(req_prod - rs->req_cons_idx) >= rs->req_call_threshold)
			kick();
	}
	t1 = now();
	printf("iops %.0f\nios %llu\nseconds %.3f\n", done / (t1 - t0),
	       (unsigned long long)done, t1 - t0);
	close_adapter();
	return 0;
}

/*
 * What a hold costs a guest whose bursts end below its ceiling: bursts of
 * 4k reads of the sizes in @sizes in turn ("8,3": the hold learns a
 * ceiling of 8, then a burst of 3 waits a window for its interrupt), each
 * posted @gap_us apart (0: back to back) with the doorbell by the
 * threshold rule and reaped in the interrupt as vmw_pvscsi does, then
 * @think_us asleep.  The module runs as it is set (scripts/bench-host
 * sets hold_us).  Per size: the wait from the burst's last request
 * posted to all its completions reaped, median and 99th percentile;
 * interrupts per I/O; the holds; IOPS.
 */
#define BURST_MAX_SIZES 8
#define BURST_MAX_SAMPLES 100000
static int do_burst(const char *disk, double seconds, const char *sizes, int think_us,
		    int gap_us)
{
	static double w[BURST_MAX_SIZES][BURST_MAX_SAMPLES];
	static struct result res[64];
	int size[BURST_MAX_SIZES], n[BURST_MAX_SIZES] = {}, nsizes = 0, k, i;
	unsigned long long held, got, wasted;
	uint64_t done = 0, bursts = 0;
	uint32_t seed = 1, one = 1;
	struct vps_stats s0, s1;
	const char *p = sizes;
	double t0, t1;

	while (*p && nsizes < BURST_MAX_SIZES) {
		char *end;
		long v = strtol(p, &end, 10);

		if (end == p || v < 1 || v > 64 || (*end && *end != ','))
			break;
		size[nsizes++] = (int)v;
		p = *end ? end + 1 : end;
	}
	if (*p || !nsizes) {
		fprintf(stderr, "vps_test burst: SIZES: up to %d of 1-64, commas between: '%s'\n",
			BURST_MAX_SIZES, sizes);
		return 2;
	}
	if (think_us < 0 || gap_us < 0 || seconds <= 0) {
		fprintf(stderr, "vps_test burst: SECONDS above 0, THINK_US and GAP_US 0 or more\n");
		return 2;
	}
	start_on(disk);
	if (attach(0, 0, disk, 0, 0) || ioctl(vfd, VPS_SET_REQ_CALL_THRESHOLD, &one))
		die("burst set-up");
	/* the worker and this guest each on a CPU of their own, as on a host */
	if (split_cpus())
		die("burst: worker CPU");
	held = adapter_field("held");
	got = adapter_field("held_got");
	wasted = adapter_field("hold_wasted");
	s0 = stats();
	t0 = now();
	for (k = 0; now() - t0 < seconds; k = (k + 1) % nsizes) {
		double t;

		for (i = 0; i < size[k]; i++) {
			struct cmd c;

			c = rw16(0, bench_lba(&seed), 8, data() + i * 4096, 512);
			if (i && gap_us)
				spin_us(gap_us);
			put_req(&c, next_ctx++, i);
			kick_by_rule();
		}
		t = now();
		if (reap_on_interrupt(res, size[k], 5000) != size[k])
			die("burst: completions missing");
		for (i = 0; i < size[k]; i++)
			if (!good(&res[i]))
				die("burst: a read failed");
		if (n[k] < BURST_MAX_SAMPLES)
			w[k][n[k]++] = (now() - t) * 1e6;
		done += size[k];
		bursts++;
		if (think_us)
			usleep(think_us);
	}
	t1 = now();
	s1 = stats();
	printf("bursts %llu\nios %llu\niops %.0f\ncalls_per_io %.3f\n",
	       (unsigned long long)bursts, (unsigned long long)done, done / (t1 - t0),
	       done ? (double)(s1.calls - s0.calls) / done : 0);
	printf("held %llu\nheld_got %llu\nhold_wasted %llu\n", adapter_field("held") - held,
	       adapter_field("held_got") - got, adapter_field("hold_wasted") - wasted);
	for (k = 0; k < nsizes; k++) {
		if (!n[k])
			continue;
		qsort(w[k], n[k], sizeof(w[k][0]), cmp_double);
		printf("size %d n %d p50_us %.0f p99_us %.0f\n", size[k], n[k], w[k][n[k] / 2],
		       w[k][(int)(n[k] * 0.99)]);
	}
	close_adapter();
	return 0;
}

/* @len bytes at @off of @path, read through the host's page cache */
static int host_read(const char *path, uint64_t off, void *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		die(path);
	n = pread(fd, buf, len, off);
	close(fd);
	return n == (ssize_t)len ? 0 : -1;
}

/*
 * A block device made read-only on the host after the attach (blockdev
 * --setro): UNMAP and WRITE SAME must be refused like WRITE, DATA PROTECT,
 * and the data stays.  Before that, an UNMAP drops the host's page cache
 * of the range: a buffered read on the host sees what the device holds.
 */
static int do_ro_bdev(const char *disk)
{
	static uint8_t host[64 * 512], want[64 * 512];
	uint8_t *w, *u;
	char cmd[300];
	struct result r;
	struct cmd c;
	int e, i, zero;

	open_ram();
	open_adapter();
	tap(!attach(0, 0, disk, 0, 0), "attach", "%s", strerror(errno));
	w = data();
	u = w + 64 * 512;
	pattern(w, 2048, 64, 21);
	memcpy(want, w, sizeof(want));
	c = rw16(1, 2048, 64, w, 512);
	CHECK_GOOD("write-pattern", c);
	/* the host caches the range, then the guest unmaps half of it */
	tap(!host_read(disk, 2048 * 512, host, sizeof(host)) &&
	    !memcmp(host, want, sizeof(host)), "host-reads-pattern", "");
	c = unmap_cmd(u, 2048, 32);
	CHECK_GOOD("unmap", c);
	e = host_read(disk, 2048 * 512, host, sizeof(host));
	for (zero = 1, i = 0; i < 32 * 512; i++)
		zero &= !host[i];
	tap(!e && zero && !memcmp(host + 32 * 512, want + 32 * 512, 32 * 512),
	    "unmap-drops-host-page-cache", "host sees %02x%02x... in the unmapped half",
	    host[0], host[1]);
	snprintf(cmd, sizeof(cmd), "blockdev --setro %s", disk);
	tap(!shell(cmd), "setro", "");
	c = unmap_cmd(u, 2080, 32);
	CHECK_SENSE("unmap-refused-on-ro-device", c, 7, 0x27, 0);
	c = (struct cmd){ .cdb = { 0x93, 0x08 }, .cdb_len = 16,
			  .flags = PVSCSI_FLAG_CMD_DIR_TODEVICE, .data_gpa = gpa(u),
			  .data_len = 512 };
	be64(&c.cdb[2], 2080);
	be32(&c.cdb[10], 32);
	CHECK_SENSE("write-same-refused-on-ro-device", c, 7, 0x27, 0);
	c = rw16(1, 2080, 1, w, 512);
	CHECK_SENSE("write-refused-on-ro-device", c, 7, 0x27, 0);
	c = cmd_in((uint8_t[]){ 0x1a, 0, 0x3f, 0, 255, 0 }, 6, 255);
	e = run(&c, &r);
	tap(!e && good(&r) && (data()[2] & 0x80), "mode-sense-wp-on-ro-device", "%x",
	    data()[2]);
	memset(w, 0xee, 32 * 512);
	c = rw16(0, 2080, 32, w, 512);
	e = run(&c, &r);
	tap(!e && good(&r) && !memcmp(w, want + 32 * 512, 32 * 512), "data-kept-on-ro-device",
	    "host %x scsi %x", r.host, r.scsi);
	snprintf(cmd, sizeof(cmd), "blockdev --setrw %s", disk);
	shell(cmd);
	c = unmap_cmd(u, 2080, 32);
	CHECK_GOOD("unmap-after-setrw", c);
	close_adapter();
	printf("1..%d\n", tests);
	return failures ? 1 : 0;
}

/*
 * The worker runs in the owner's cgroups (as vhost's does), so cpu.max,
 * io.max and memory.max hold for the work a guest makes it do: a thread of
 * ours on 6.12 (vhost_task), a kthread moved there on 6.1.
 */
static int read_text(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return -1;
	n = fread(buf, 1, len - 1, f);
	buf[n] = 0;
	fclose(f);
	return 0;
}

static int do_cgroup(void)
{
	char want[512], got[512] = "", path[600], comm[64], name[32];
	struct dirent *p, *t;
	DIR *pd, *td;
	int found = 0;

	open_ram();
	open_adapter();
	if (read_text("/proc/self/cgroup", want, sizeof(want)))
		die("/proc/self/cgroup");
	/*
	 * the worker is named after the owner's pid: a thread's comm keeps
	 * 15 characters of it, a 6.1 kthread's shows it whole
	 */
	snprintf(name, sizeof(name), "vhost-pvscsi-%d", getpid());
	pd = opendir("/proc");
	while (pd && (p = readdir(pd))) {
		if (p->d_name[0] < '0' || p->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/task", p->d_name);
		td = opendir(path);
		while (td && (t = readdir(td))) {
			snprintf(path, sizeof(path), "/proc/%s/task/%s/comm", p->d_name,
				 t->d_name);
			if (t->d_name[0] == '.' || read_text(path, comm, sizeof(comm)))
				continue;
			comm[strcspn(comm, "\n")] = 0;
			if (strstr(comm, "pvscsi"))
				printf("# %s/%s: %s\n", p->d_name, t->d_name, comm);
			if (strcmp(comm, name) &&
			    (strlen(comm) != 15 || strncmp(comm, name, 15)))
				continue;
			found++;
			snprintf(path, sizeof(path), "/proc/%s/task/%s/cgroup", p->d_name,
				 t->d_name);
			read_text(path, got, sizeof(got));
		}
		if (td)
			closedir(td);
	}
	if (pd)
		closedir(pd);
	tap(found == 1, "worker-found", "%d threads named %s", found, name);
	tap(found == 1 && !strcmp(got, want) && strcmp(want, "0::/\n"),
	    "worker-in-owner-cgroup", "owner %s worker %s", want, got);
	close_adapter();
	printf("1..%d\n", tests);
	return failures ? 1 : 0;
}

/*
 * fsfreeze with writes in flight: a file LUN on a filesystem over a slow
 * device (dm-delay, 300 ms), a burst of writes in flight, the freeze
 * started, a second burst the worker must wait with until the thaw.  The freeze
 * must complete within seconds (it waits only for the first burst), and
 * after the thaw every write completes GOOD once and reads back.
 */
static int do_freeze(const char *file, const char *mnt)
{
	static struct result res[64];
	uint64_t base;
	uint32_t i, got, nok = 0, dup, bad = 0;
	char cmd[300];
	int st = -1, e;
	double t0;
	pid_t pid;

	start_on(file);
	tap(!attach(0, 0, file, 0, 0), "attach", "%s", strerror(errno));
	base = next_ctx;
	for (i = 0; i < 32; i++) {
		uint8_t *b = data() + (size_t)i * 4096;
		struct cmd c = rw16(1, i * 64, 8, b, 512);

		pattern(b, i * 64, 8, 41);
		put_req(&c, next_ctx++, i);
	}
	kick();
	usleep(20000);
	t0 = now();
	pid = fork();
	if (pid == 0) {
		execlp("fsfreeze", "fsfreeze", "--freeze", mnt, (char *)NULL);
		_exit(127);
	}
	/* the freeze has begun: it waits for the first burst's writes */
	usleep(250000);
	for (i = 32; i < 64; i++) {
		uint8_t *b = data() + (size_t)i * 4096;
		struct cmd c = rw16(1, i * 64, 8, b, 512);

		pattern(b, i * 64, 8, 41);
		put_req(&c, next_ctx++, i);
	}
	kick();
	while (now() - t0 < 15 && waitpid(pid, &st, WNOHANG) == 0)
		usleep(20000);
	tap(WIFEXITED(st) && !WEXITSTATUS(st), "freeze-completes-with-writes-in-flight",
	    "fsfreeze --freeze %s: %s after %.1f s", mnt,
	    st == -1 ? "still waiting" : "failed", now() - t0);
	printf("# frozen after %.2f s\n", now() - t0);
	if (st == -1) {
		/* the deadlock: a thaw would wait for the freeze forever */
		printf("1..%d\n", tests);
		_exit(1);
	}
	usleep(300000);
	snprintf(cmd, sizeof(cmd), "fsfreeze --unfreeze %s", mnt);
	tap(!shell(cmd), "thaw", "");
	got = get_cmps(res, 64, 20000);
	dup = count_dups(res, got, base, 64);
	for (i = 0; i < got; i++)
		if (!good(&res[i]))
			nok++;
	tap(got == 64 && !dup && !nok, "writes-complete-once-after-thaw",
	    "got %u/64 dup %u not good %u", got, dup, nok);
	for (i = 0; i < 64; i++) {
		uint8_t *want = data() + (4u << 20), *rd = want + 4096;
		struct result r;
		struct cmd c = rw16(0, i * 64, 8, rd, 512);

		pattern(want, i * 64, 8, 41);
		e = run(&c, &r);
		if (e || !good(&r) || memcmp(want, rd, 4096))
			bad++;
	}
	tap(!bad, "writes-read-back", "%u of 64 ranges differ", bad);
	close_adapter();
	printf("1..%d\n", tests);
	return failures ? 1 : 0;
}

/*
 * Discards weigh: 128 UNMAPs of 64 MiB each (the most VPD B0 allows)
 * queued at once, then an ABORT: the worker runs one discard a pass and
 * lets go of the adapter between passes, so the abort waits for one
 * discard, not for all of them (before: 24.7 s here on 6.1, 256 a pass
 * and no cap): within @bound_ms (100 on the stock kernels; the debug
 * kernel's KASAN and lockdep make one discard's pass slower, 150 ms seen,
 * still two orders of magnitude under the regression), or within an
 * eighth of the time all 128 took (a loaded host slows each alike; the
 * regression waits nearly all of it).
 * The aborted command is a TEST UNIT READY queued behind the 128: an
 * abort consumes the whole ring before it answers (vmw_pvscsi treats
 * what it did not get back as gone, and a command consumed later would
 * complete a reused context), so it finds it, and answers BUSY to the
 * discards it consumes rather than run them (the guest sends them
 * again).  Until 2026-12-06 the abort ran one discard a pass for a few
 * passes and left the rest of the ring, the TUR too, for the worker:
 * ENOENT.  Also: VPD B0's MAXIMUM UNMAP LBA COUNT, and an UNMAP beyond
 * it refused.
 */
static int do_discard_abort(const char *disk, double bound_ms)
{
	static struct result res[129];
	uint32_t i, got, nok = 0, busy = 0, tur_ok = 0, max_lba, cons;
	uint64_t tur;
	struct vps_abort a = { 0, 0, 0 };
	struct result r;
	struct cmd c;
	uint8_t *w;
	double t0, t_kick, ms, all_ms;
	int e, err;

	start_on(disk);
	tap(!attach(0, 0, disk, 0, 0), "attach", "%s", strerror(errno));
	c = cmd_in((uint8_t[]){ 0x12, 0x01, 0xb0, 0, 255, 0 }, 6, 255);
	e = run(&c, &r);
	max_lba = get_be32(data() + 20);
	tap(!e && good(&r) && max_lba == (64u << 20) / 512, "vpd-b0-max-unmap-lba-count",
	    "%u", max_lba);
	/* two descriptors of the most each: twice the most */
	w = data();
	memset(w, 0, 40);
	w[1] = 38;
	w[3] = 32;
	be64(w + 8, 0);
	be32(w + 16, (64u << 20) / 512);
	be64(w + 24, (64u << 20) / 512);
	be32(w + 32, (64u << 20) / 512);
	c = (struct cmd){ .cdb = { 0x42, 0, 0, 0, 0, 0, 0, 0, 40 }, .cdb_len = 10,
			  .flags = PVSCSI_FLAG_CMD_DIR_TODEVICE,
			  .data_gpa = gpa(w), .data_len = 40 };
	CHECK_SENSE("unmap-over-max-refused", c, 5, 0x26, 0);
	for (i = 0; i < 128; i++) {
		c = unmap_cmd(data() + (size_t)i * 64,
			      (uint64_t)(i % 16) * ((64u << 20) / 512) % disk_blocks,
			      (64u << 20) / 512);
		put_req(&c, next_ctx++, i % 64);
	}
	c = (struct cmd){ .cdb_len = 6, .flags = PVSCSI_FLAG_CMD_DIR_NONE };
	tur = next_ctx++;
	put_req(&c, tur, 0);
	t_kick = now();
	kick();
	usleep(20000);
	a.context = tur;
	t0 = now();
	e = ioctl(vfd, VPS_ABORT, &a);
	err = e ? errno : 0;
	ms = (now() - t0) * 1000;
	cons = __atomic_load_n(&rs->req_cons_idx, __ATOMIC_ACQUIRE);
	got = get_cmps(res, 129, 60000);
	all_ms = (now() - t_kick) * 1000;
	printf("# VPS_ABORT waited %.1f ms behind 128 UNMAPs of 64 MiB", ms);
	printf(", all done %.1f ms after the doorbell\n", all_ms);
	tap(cons == req_prod, "abort-consumes-the-ring",
	    "%u of the ring's %u consumed when the abort returned",
	    cons - (req_prod - 129), 129);
	/*
	 * The bound, or else an eighth of what all 128 took: a loaded
	 * machine makes every discard slower alike (178.7 ms against 100
	 * seen in a gate on 6.1), while an abort that waits for the ring
	 * waits nearly all of it.
	 */
	tap(!err && (ms < bound_ms || ms * 8 < all_ms),
	    "abort-waits-under-bound-behind-discards",
	    "%.1f ms (bound %.0f ms, or %.1f: an eighth of the %.1f ms all took), abort: %s",
	    ms, bound_ms, all_ms / 8, all_ms, err ? strerror(err) : "succeeded");
	for (i = 0; i < got; i++) {
		if (res[i].context == tur)
			tur_ok += res[i].host == BTSTAT_ABORTQUEUE;
		else if (res[i].host == BTSTAT_SUCCESS && res[i].scsi == SCSI_BUSY)
			busy++;
		else if (!good(&res[i]))
			nok++;
	}
	tap(got == 129 && !nok && tur_ok == 1, "discards-complete",
	    "got %u/129, %u neither good nor BUSY, the TUR aborted %u times", got, nok, tur_ok);
	printf("# %u discards ran, %u answered BUSY\n", got - 1 - busy, busy);
	tap(busy > 0 && busy < 128, "abort-busies-the-rest", "%u of 128 BUSY", busy);
	close_adapter();
	printf("1..%d\n", tests);
	return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	/* scripts/bench-host measures the module as it is set */
	if (argc < 2 || (strcmp(argv[1], "bench") && strcmp(argv[1], "burst")))
		hold_us_off();
	if (argc == 5 && !strcmp(argv[1], "check"))
		return do_check(argv[2], argv[3], argv[4]);
	if (argc == 4 && !strcmp(argv[1], "hung-lun"))
		return do_hung_lun(argv[2], argv[3]);
	if (argc == 3 && !strcmp(argv[1], "close-inflight"))
		return do_close_inflight(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "poll"))
		return do_poll(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "hold"))
		return do_hold(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "batch"))
		return do_batch(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "coalesce"))
		return do_coalesce(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "mq"))
		return do_mq(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "worker-fail"))
		return do_worker_fail(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "failnth"))
		return do_failnth(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "failio"))
		return do_failio(argv[2], argv[3]);
	if (argc == 5 && !strcmp(argv[1], "mq-freeze"))
		return do_mq_freeze(argv[2], argv[3], argv[4]);
	if (argc == 3 && !strcmp(argv[1], "event"))
		return do_event(argv[2]);
	if ((argc == 5 || (argc == 6 && !strcmp(argv[5], "spin"))) && !strcmp(argv[1], "bench"))
		return do_bench(argv[2], atoi(argv[3]), atof(argv[4]), argc == 6);
	if ((argc == 6 || argc == 7) && !strcmp(argv[1], "burst"))
		return do_burst(argv[2], atof(argv[3]), argv[4], atoi(argv[5]),
				argc == 7 ? atoi(argv[6]) : 0);
	if (argc == 7 && !strcmp(argv[1], "faults"))
		return do_faults(argv[2], strtoull(argv[3], NULL, 0),
				 !strcmp(argv[4], "write"), argv[5], argv[6]);
	if (argc == 5 && !strcmp(argv[1], "cap"))
		return do_cap(argv[2], atoi(argv[3]), atoi(argv[4]));
	if ((argc == 3 || argc == 4) && !strcmp(argv[1], "detach-inflight"))
		return do_detach_inflight(argv[2], argc == 4 ? argv[3] : NULL);
	if (argc == 3 && !strcmp(argv[1], "remap-inflight"))
		return do_remap_inflight(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "ro-bdev"))
		return do_ro_bdev(argv[2]);
	if (argc == 2 && !strcmp(argv[1], "cgroup"))
		return do_cgroup();
	if (argc == 4 && !strcmp(argv[1], "freeze"))
		return do_freeze(argv[2], argv[3]);
	if ((argc == 3 || argc == 4) && !strcmp(argv[1], "discard-abort"))
		return do_discard_abort(argv[2], argc == 4 ? atof(argv[3]) : 100);
	fprintf(stderr, "usage: vps_test check DISK FILE RO_DISK\n"
		"       vps_test close-inflight DISK\n"
		"       vps_test hung-lun DISK DM_NAME\n"
		"       vps_test bench DISK QD SECONDS [spin]\n"
		"       vps_test burst DISK SECONDS SIZES THINK_US [GAP_US]\n"
		"       vps_test poll DISK\n"
		"       vps_test coalesce SLOW_DISK\n"
		"       vps_test event DISK\n"
		"       vps_test faults DISK LBA read|write ON_CMD OFF_CMD\n"
		"       vps_test detach-inflight DISK [CMD]\n"
		"       vps_test cap DISK CAP WANT_GOOD\n"
		"       vps_test ro-bdev DISK\n"
		"       vps_test cgroup\n"
		"       vps_test freeze FILE MOUNTPOINT\n"
		"       vps_test mq DISK\n"
		"       vps_test mq-freeze DISK FILE MOUNTPOINT\n"
		"       vps_test worker-fail DISK\n"
		"       vps_test failnth DISK\n"
		"       vps_test failio DISK FILE\n"
		"       vps_test discard-abort DISK [BOUND_MS]\n");
	return 2;
}
