// SPDX-License-Identifier: GPL-2.0
/*
 * vps_fuzz: a hostile guest for /dev/vhost-pvscsi.  Like vps_test it plays
 * both VMM and guest; instead of fixed checks it generates, from a seed,
 * random and mutated request descriptors (CDB bytes, flags, lengths, SG
 * lists, addresses near and outside the memory table, targets and LUNs),
 * writes to the ring-state indices, and control operations (ring setup,
 * resets, aborts, LUN attach and detach, memory table changes, the
 * request call threshold, the completion event index on and off with the
 * index anywhere, closing the adapter, further queues of the multi-queue
 * extension set up and refused) interleaved with the I/O, which goes to
 * any of the queues set up.
 *
 *   vps_fuzz [--seed N] [--iterations M] [--seconds S] [--descriptors D]
 *            DISK FILE RO_DISK
 *
 * DISK and FILE are overwritten.  Each run prints its seed; the stream of
 * operations and descriptors is a function of the seed alone (no random
 * choice depends on timing), so `--seed N` replays it, while the moments
 * at which the kernel completes requests stay the kernel's.
 *
 * What every run checks (TAP at the end, details on the first violation):
 *  - every completion has a valid host and SCSI status, a data length no
 *    larger than asked, sense no longer than asked, and the context of a
 *    request that is outstanding (or 0 for a context-0 request: zero is a
 *    legal cookie): nothing completes twice, nothing unknown or stale
 *    (from before an adapter reset or a close) completes, and a request
 *    completes on the queue it was posted on;
 *  - in an epoch (the rings between two setups) in which the fuzzer broke
 *    no rule of the ring protocol, every request completes: no hang;
 *  - the ioctls answer 0 or their documented errors only (a refused
 *    VPS_SETUP_QUEUE: the one its mistake calls for); an abort that
 *    succeeds names a request that is outstanding;
 *  - after each close (within 5 s: the release of an adapter with I/O in
 *    flight finishes when the I/O does), and at the end, the module's
 *    gauges read 0;
 *  - the run set up queues, had some refused and posted on them.
 * The kernel staying up, and KASAN, lockdep, kmemleak staying quiet, are
 * checked by the harness around it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <linux/vhost.h>

#include "vhost_pvscsi.h"
#include "vps_sim.h"

#define GPA_BASE	0x100000000ull
#define RAM_SIZE	(64u << 20)
#define PG		4096u
#define RAM_PAGES	(RAM_SIZE / PG)
/* guest RAM layout (pages); data areas sit at both ends of the table */
#define P_LOW		0		/* low data area: 256 pages */
#define N_LOW		256
#define P_RS		256
#define P_REQ		257		/* up to 32 pages */
#define P_CMP		289		/* up to 32 pages */
#define P_MSG		321		/* up to 16 pages */
#define P_QRING		337		/* queues 1..: 8 pages each (req, cmp) */
#define P_SG		400		/* one SG page per request slot: 1024 */
#define P_SENSE		1424		/* 64 bytes per slot: 16 pages */
#define P_QSG		1440		/* queues 1..: SG pages, Q_SLOTS each */
#define P_QSENSE	1824		/* queues 1..: sense, 64 bytes per slot */
#define P_HIGH		1832		/* high data area: to the end */
/* the module's data transfer cap (VPS_MAX_DATA_LEN) */
#define VPS_MAX_DATA	(8u << 20)
#define fallthrough	__attribute__((__fallthrough__))

/* ---- seeded generator (xorshift64*): the only source of choices ---------- */

static uint64_t rng_state;

static uint64_t rnd64(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static uint32_t rnd(uint32_t n)
{
	return n ? (uint32_t)(rnd64() % n) : 0;
}

static int chance(uint32_t percent)
{
	return rnd(100) < percent;
}

/* ---- state ------------------------------------------------------------- */

enum { ST_NONE, ST_OUT, ST_DONE, ST_GONE };

struct ctxinfo {
	uint8_t state;
	uint8_t target;
	uint8_t sense_len;		/* asked, capped at 255 */
	uint8_t queue;			/* posted on */
	uint8_t op;			/* the CDB's operation code */
	uint32_t data_len;		/* asked, capped */
};

static struct ctxinfo *ctxs;
static uint64_t nctx_alloc, next_ctx = 1;

static int vfd = -1, msg_fd;
static uint8_t *ram;
static struct pvscsi_rings_state *rs;
static uint32_t msg_pages;
static int rings_up, threshold_on, broken, hold_cmp;

/*
 * The queues: 0 from SETUP_RINGS, 1..nq-1 from VPS_SETUP_QUEUE (the
 * multi-queue extension), each with its rings, its indices (queue 0's in
 * struct pvscsi_rings_state, the others' in their struct
 * pvscsi_ext_queue_state), its doorbell and its interrupt.  Queues 1..
 * have rings of at most Q_PAGES pages.
 */
#define NQ		4
#define Q_PAGES		4
#define Q_SLOTS		(Q_PAGES * PVSCSI_REQ_DESCS_PER_PAGE)
struct fq {
	uint32_t req_entries, cmp_entries;
	uint32_t req_prod, cmp_cons;
	unsigned int p_req, p_cmp;		/* their first pages */
	/* the indices, in the rings state page */
	uint32_t *req_prod_idx, *req_cons_idx, *cmp_prod_idx, *cmp_cons_idx;
	uint32_t *req_call_threshold, *cmp_event_idx;
	int kick_fd, call_fd;
	uint32_t log_want_cmp;			/* bit i: completion ring page i */
	uint32_t log_from;	/* the first completion written with the log on */
};

static struct fq qs[NQ];
static uint32_t nq;				/* queues set up */
static uint64_t outstanding, zero_pending;
static const char *paths[3];
static int attached[4][2];		/* [target][lun]: 1 = attached */

static struct {
	uint64_t iterations, descriptors, completions, epochs, breaks, closes;
	uint64_t aborts_ok, resets, detaches, drains, stale_ok;
	uint64_t stops, stops_busy, log_checks;
	uint64_t queues_added, queues_refused, mq_descriptors;
} st;

/*
 * The dirty log (VPS_SET_LOG) over all guest-physical pages up to the end
 * of RAM.  It is turned on, off and cleared only while the adapter is
 * stopped (nothing half written), and checked there: every completion
 * ring page (of any queue) the fuzzer harvested entries from since the
 * last clear, and the rings state page, must have their bits.
 */
#define LOG_BYTES	((GPA_BASE + RAM_SIZE) / PG / 8)
static uint8_t *logmap;
static int log_on;
static int log_want_rs;

/* READ/WRITEs to LUNs lately submitted: the abort's favourite victims */
static uint64_t recent_rw[64];
static unsigned int nrecent;

static int failed;
static uint64_t iter;
static char oplog[16][96];
static unsigned int opn;

static void op(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(oplog[opn++ % 16], sizeof(oplog[0]), fmt, ap);
	va_end(ap);
}

static void fail(const char *fmt, ...)
{
	va_list ap;
	unsigned int i;

	if (failed++)
		return;
	printf("# VIOLATION at iteration %llu: ",
	       (unsigned long long)iter);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n# last operations:\n");
	for (i = opn > 16 ? opn - 16 : 0; i < opn; i++)
		printf("#   %s\n", oplog[i % 16]);
	fflush(stdout);
}

static void die(const char *what)
{
	perror(what);
	exit(2);
}

static void *page(unsigned int n)
{
	return ram + (size_t)n * PG;
}

static uint64_t gpa_of(unsigned int pg)
{
	return GPA_BASE + (uint64_t)pg * PG;
}

/*
 * Queue q's indices: struct pvscsi_ext_queue_state begins with the same
 * seven words as struct pvscsi_rings_state (queue 0's), in the same order
 */
static_assert(offsetof(struct pvscsi_rings_state, req_call_threshold) ==
	      offsetof(struct pvscsi_ext_queue_state, req_call_threshold),
	      "queue state layout");

static uint32_t *rs_word(size_t off)
{
	return (uint32_t *)((uint8_t *)page(P_RS) + off);
}

static void fq_bind(uint32_t q)
{
	size_t b = q ? PVSCSI_EXT_QUEUE_STATE_OFFSET(q) : 0;
	struct fq *f = &qs[q];

	f->p_req = q ? P_QRING + (q - 1) * 2 * Q_PAGES : P_REQ;
	f->p_cmp = q ? f->p_req + Q_PAGES : P_CMP;
	f->req_prod_idx = rs_word(b + offsetof(struct pvscsi_rings_state, req_prod_idx));
	f->req_cons_idx = rs_word(b + offsetof(struct pvscsi_rings_state, req_cons_idx));
	f->cmp_prod_idx = rs_word(b + offsetof(struct pvscsi_rings_state, cmp_prod_idx));
	f->cmp_cons_idx = rs_word(b + offsetof(struct pvscsi_rings_state, cmp_cons_idx));
	f->req_call_threshold =
		rs_word(b + offsetof(struct pvscsi_rings_state, req_call_threshold));
	/* queue 0's event index sits outside struct pvscsi_rings_state */
	f->cmp_event_idx = rs_word(q ? b + offsetof(struct pvscsi_ext_queue_state, cmp_event_idx) :
				   PVSCSI_EXT_CMP_EVENT_OFFSET);
}

/* the SG page and the sense slot of queue q's request slot */
static unsigned int sg_page(uint32_t q, uint32_t slot)
{
	return q ? P_QSG + (q - 1) * Q_SLOTS + slot : P_SG + slot;
}

static uint64_t sense_gpa(uint32_t q, uint32_t slot)
{
	return q ? gpa_of(P_QSENSE) + ((q - 1) * Q_SLOTS + slot) * 64ull :
		gpa_of(P_SENSE) + slot * 64ull;
}

static struct ctxinfo *ctx_info(uint64_t ctx)
{
	if (ctx >= nctx_alloc) {
		uint64_t n = nctx_alloc ? nctx_alloc * 2 : 1 << 16;

		while (n <= ctx)
			n *= 2;
		ctxs = realloc(ctxs, n * sizeof(*ctxs));
		if (!ctxs)
			die("realloc");
		memset(ctxs + nctx_alloc, 0, (n - nctx_alloc) * sizeof(*ctxs));
		nctx_alloc = n;
	}
	return &ctxs[ctx];
}

/* ---- VMM side ---------------------------------------------------------- */

static int set_mem(uint64_t size)
{
	struct {
		struct vhost_memory m;
		struct vhost_memory_region r[1];
	} t = {};

	t.m.nregions = 1;
	t.r[0].guest_phys_addr = GPA_BASE;
	t.r[0].memory_size = size;
	t.r[0].userspace_addr = (uintptr_t)ram;
	return ioctl(vfd, VHOST_SET_MEM_TABLE, &t);
}

static int attach(uint32_t target, uint32_t lun)
{
	struct vps_lun l = {};
	int ro = target == 2, fd, ret;

	fd = open(paths[target], (ro ? O_RDONLY : O_RDWR) | O_DIRECT);
	if (fd < 0)
		die(paths[target]);
	l.target = target;
	l.lun = lun;
	l.fd = fd;
	l.flags = ro ? VPS_LUN_READ_ONLY : 0;
	/* a small cap now and then: TASK SET FULL paths */
	l.max_outstanding = chance(20) ? 1 + rnd(8) : 0;
	ret = ioctl(vfd, VPS_ATTACH_LUN, &l);
	close(fd);
	return ret;
}

/* forget everything outstanding: its completions can no longer come */
static void forget_all(void)
{
	uint64_t c;

	for (c = 1; c < next_ctx; c++)
		if (ctxs[c].state == ST_OUT)
			ctxs[c].state = ST_GONE;
	outstanding = 0;
	zero_pending = 0;
}

/* ring sizes of the next epoch */
static void draw_sizes(uint32_t *r, uint32_t *c, uint32_t *m)
{
	static const uint32_t pow2[] = { 1, 2, 4, 8, 16, 32 };

	*r = pow2[rnd(6)];
	*c = pow2[rnd(6)];
	*m = pow2[rnd(5)];
}

/* a queue's rings start empty: its indices and what the log wants */
static void fq_start(struct fq *f, uint32_t req_pages, uint32_t cmp_pages)
{
	f->req_entries = req_pages * PVSCSI_REQ_DESCS_PER_PAGE;
	f->cmp_entries = cmp_pages * PVSCSI_CMP_DESCS_PER_PAGE;
	f->req_prod = 0;
	f->cmp_cons = 0;
	f->log_want_cmp = 0;
	f->log_from = 0;
}

/*
 * VPS_SETUP_QUEUE for queue nq, the next one; one in seven calls makes a
 * mistake (bad magic, a queue out of order, a bad page count, a page
 * outside the memory table) that must be refused with its error, changing
 * nothing; without rings every call must be refused.
 */
static void add_queue(void)
{
	static const uint32_t pow2[] = { 1, 2, 4 };
	struct pvscsi_cmd_ext_setup_queue c = { .magic = PVSCSI_EXT_QUERY_MAGIC };
	uint32_t q = nq, rp = pow2[rnd(3)], cp = pow2[rnd(3)];
	uint32_t bad = chance(14) ? 1 + rnd(4) : 0, i;
	int e, want = 0;
	struct fq *f;

	if (q >= NQ)
		return;
	/*
	 * A short run (a debug kernel, dm-delay) may reach the queues a dozen
	 * times only, and a 1-in-7 mistake then misses all of them one run in
	 * seven: once two queues were taken, the first refusal is made sure of
	 */
	if (!bad && !st.queues_refused && st.queues_added >= 2)
		bad = 1 + rnd(4);
	f = &qs[q];
	c.queue = q;
	c.req_ring_num_pages = rp;
	c.cmp_ring_num_pages = cp;
	for (i = 0; i < rp; i++)
		c.req_ring_ppns[i] = gpa_of(f->p_req + i) / PG;
	for (i = 0; i < cp; i++)
		c.cmp_ring_ppns[i] = gpa_of(f->p_cmp + i) / PG;
	switch (bad) {
	case 1:
		c.magic ^= 1u << rnd(32);
		want = EINVAL;
		break;
	case 2:
		/* 0 is SETUP_RINGS's; below q is set up; above q skips one */
		c.queue = chance(50) ? rnd(q) : q + 1 + rnd(40);
		want = EINVAL;
		break;
	case 3:
		if (chance(50))
			c.req_ring_num_pages = chance(50) ? 0 : 3 + 2 * rnd(20);
		else
			c.cmp_ring_num_pages = chance(50) ? 64 : (uint32_t)rnd64() | 64;
		want = EINVAL;
		break;
	case 4:
		if (chance(50))
			c.req_ring_ppns[rnd(rp)] = chance(50) ? 0 :
				(GPA_BASE + RAM_SIZE) / PG + rnd(1 << 20);
		else
			c.cmp_ring_ppns[rnd(cp)] = ~0ull >> rnd(20);
		want = EFAULT;
		break;
	}
	if (!rings_up)
		want = EINVAL;
	e = ioctl(vfd, VPS_SETUP_QUEUE, &c) ? errno : 0;
	op("setup queue %u (%u) req %u cmp %u: %d want %d", q, c.queue,
	   c.req_ring_num_pages, c.cmp_ring_num_pages, e, want);
	/*
	 * EBUSY (requests of the queue still in flight) cannot happen here:
	 * queue q is the next one, not set up since the rings were, and
	 * SETUP_RINGS and RESUME_RINGS refuse while anything is in flight
	 */
	if (e == EBUSY) {
		fail("setup queue %u: EBUSY, yet the queue took nothing since the rings", q);
		return;
	}
	if (want) {
		st.queues_refused++;
		if (e != want)
			fail("setup queue %u with mistake %u: %s, not %s", q, bad,
			     e ? strerror(e) : "accepted", strerror(want));
		return;
	}
	if (e) {
		fail("setup queue %u (req %u cmp %u pages): %s", q, rp, cp, strerror(e));
		return;
	}
	fq_start(f, rp, cp);
	nq = q + 1;
	st.queues_added++;
}

static void new_epoch_rings(void)
{
	struct pvscsi_cmd_setup_rings c = {};
	struct pvscsi_cmd_setup_msg_ring m = {};
	uint32_t i, req_pages, cmp_pages, more;
	uint64_t main_stream, sub = rnd64();
	int e;

	/*
	 * The epoch's choices come from a stream of their own, seeded by
	 * one draw: a setup skipped because I/O was still outstanding (a
	 * matter of timing) takes that one draw too, and the main stream
	 * goes on the same either way.
	 */
	main_stream = rng_state;
	rng_state = sub ? sub : 1;
	/* the guest's view starts over; stale bytes must never be read back */
	memset(page(P_RS), 0, (P_SG - P_RS) * PG);
	draw_sizes(&req_pages, &cmp_pages, &msg_pages);
	fq_start(&qs[0], req_pages, cmp_pages);
	nq = 1;
	threshold_on = 0;
	broken = 0;
	c.req_ring_num_pages = req_pages;
	c.cmp_ring_num_pages = cmp_pages;
	c.rings_state_ppn = gpa_of(P_RS) / PG;
	for (i = 0; i < req_pages; i++)
		c.req_ring_ppns[i] = gpa_of(P_REQ + i) / PG;
	for (i = 0; i < cmp_pages; i++)
		c.cmp_ring_ppns[i] = gpa_of(P_CMP + i) / PG;
	e = ioctl(vfd, VPS_SETUP_RINGS, &c);
	if (e)
		fail("SETUP_RINGS %u/%u: %s", req_pages, cmp_pages, strerror(errno));
	m.num_pages = msg_pages;
	for (i = 0; i < msg_pages; i++)
		m.ring_ppns[i] = gpa_of(P_MSG + i) / PG;
	e = ioctl(vfd, VPS_SETUP_MSG_RING, &m);
	if (e)
		fail("SETUP_MSG_RING %u: %s", msg_pages, strerror(errno));
	rings_up = 1;
	st.epochs++;
	op("rings req %u cmp %u msg %u pages", req_pages, cmp_pages, msg_pages);
	/* half the epochs have further queues, as pvscsi_mq sets them up */
	for (more = chance(50) ? 1 + rnd(NQ - 1) : 0; more; more--)
		add_queue();
	rng_state = main_stream;
}

static void open_adapter(void)
{
	uint32_t t, l, q;

	vfd = open("/dev/vhost-pvscsi", O_RDWR);
	if (vfd < 0)
		die("/dev/vhost-pvscsi");
	if (ioctl(vfd, VHOST_SET_OWNER))
		die("SET_OWNER");
	if (set_mem(RAM_SIZE))
		die("SET_MEM_TABLE");
	vps_sim_eventfds(vfd, &qs[0].kick_fd, &qs[0].call_fd, &msg_fd);
	for (q = 1; q < NQ; q++)
		vps_sim_queue_eventfds(vfd, q, &qs[q].kick_fd, &qs[q].call_fd);
	new_epoch_rings();
	memset(attached, 0, sizeof(attached));
	for (t = 0; t < 3; t++)
		for (l = 0; l < 2; l++) {
			if (t == 2 && l)
				continue;
			if (attach(t, l))
				fail("attach %u/%u: %s", t, l, strerror(errno));
			attached[t][l] = 1;
		}
}

static void close_adapter(int check)
{
	char g[256];
	uint32_t q;

	close(vfd);
	for (q = 0; q < NQ; q++) {
		close(qs[q].kick_fd);
		close(qs[q].call_fd);
	}
	close(msg_fd);
	vfd = -1;
	rings_up = 0;
	log_on = 0;
	forget_all();
	st.closes++;
	op("close");
	/* nothing may be left behind */
	/* close does not wait for backing I/O in flight: 5 s for it */
	if (check && !vps_sim_gauges_zero_within(g, sizeof(g), 5000))
		fail("gauges 5 s after close: %s", g);
}

/* ---- guest side: completions --------------------------------------------- */

static int host_ok(uint16_t h)
{
	switch (h) {
	case BTSTAT_SUCCESS:
	case BTSTAT_SELTIMEO:
	case BTSTAT_DATARUN:
	case BTSTAT_INVPARAM:
	case BTSTAT_BUSRESET:
	case BTSTAT_ABORTQUEUE:
		return 1;
	}
	return 0;
}

static int scsi_ok(uint16_t s)
{
	return s == 0 || s == 2 || s == 0x28;	/* GOOD, CHECK, TASK SET FULL */
}

/*
 * BUSY: only a discard (UNMAP, WRITE SAME(16)) that an abort or a reset
 * consumed (the module does not run one there); context 0's op is not
 * kept
 */
static int busy_ok(uint64_t ctx, const struct pvscsi_cmp_desc *c)
{
	uint8_t op;

	if (c->scsi_status != 0x08 || c->host_status)
		return 0;
	if (!ctx)
		return 1;
	if (ctx >= next_ctx)
		return 0;
	op = ctxs[ctx].op;
	return op == 0x42 || op == 0x93;
}

static void check_cmp(const struct pvscsi_cmp_desc *c, uint32_t q)
{
	uint64_t ctx = c->context;
	struct ctxinfo *ci;

	st.completions++;
	if (!busy_ok(ctx, c) &&
	    (!host_ok(c->host_status) || !scsi_ok(c->scsi_status) ||
	     (c->host_status && c->scsi_status))) {
		fail("completion ctx %llu: host 0x%x scsi 0x%x",
		     (unsigned long long)ctx, c->host_status, c->scsi_status);
		return;
	}
	if (!ctx) {
		/* zero is a legal cookie (SeaBIOS): any valid outcome */
		if (!zero_pending)
			fail("completion with context 0 and none outstanding");
		else
			zero_pending--;
		return;
	}
	if (ctx >= next_ctx) {
		fail("completion of never submitted context %llu",
		     (unsigned long long)ctx);
		return;
	}
	ci = &ctxs[ctx];
	if (ci->state == ST_DONE) {
		fail("context %llu completed twice", (unsigned long long)ctx);
		return;
	}
	if (ci->state == ST_GONE) {
		fail("context %llu completed after its adapter was reset or closed",
		     (unsigned long long)ctx);
		return;
	}
	if (ci->queue != q) {
		fail("context %llu posted on queue %u completed on queue %u",
		     (unsigned long long)ctx, ci->queue, q);
		return;
	}
	if (c->data_len > ci->data_len || c->sense_len > ci->sense_len ||
	    c->sense_len > 18 || (c->sense_len && c->scsi_status != 2)) {
		fail("context %llu: data_len %llu (asked %u) sense_len %u (asked %u) scsi 0x%x",
		     (unsigned long long)ctx, (unsigned long long)c->data_len,
		     ci->data_len, c->sense_len, ci->sense_len, c->scsi_status);
		return;
	}
	ci->state = ST_DONE;
	outstanding--;
}

/* read what the device posted on queue q */
static uint32_t harvest_queue(uint32_t q)
{
	struct fq *f = &qs[q];
	uint32_t prod, n = 0;
	uint64_t v;

	if (read(f->call_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		die("call read");
	prod = __atomic_load_n(f->cmp_prod_idx, __ATOMIC_ACQUIRE);
	if (prod - f->cmp_cons > f->cmp_entries) {
		fail("queue %u: completion producer %u more than a ring ahead of %u",
		     q, prod, f->cmp_cons);
		return 0;
	}
	while (f->cmp_cons != prod) {
		uint32_t i = f->cmp_cons & (f->cmp_entries - 1);
		const struct pvscsi_cmp_desc *c = (void *)((uint8_t *)page(f->p_cmp) +
			(size_t)i * sizeof(*c));

		check_cmp(c, q);
		if (log_on && (int32_t)(f->cmp_cons - f->log_from) >= 0) {
			f->log_want_cmp |= 1u << (i * sizeof(*c) / PG);
			log_want_rs = 1;
		}
		f->cmp_cons++;
		n++;
	}
	__atomic_store_n(f->cmp_cons_idx, f->cmp_cons, __ATOMIC_RELEASE);
	return n;
}

/* read what the device posted; returns the number of completions */
static uint32_t harvest(void)
{
	uint32_t q, n = 0;

	if (!rings_up || hold_cmp)
		return 0;
	for (q = 0; q < nq && !failed; q++)
		n += harvest_queue(q);
	/* consume messages (attach/detach) so the ring never fills */
	rs->msg_cons_idx = rs->msg_prod_idx;
	return n;
}

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000ull + t.tv_nsec / 1000000;
}

/* wait until nothing is outstanding; a hang is a violation unless broken */
static void drain(uint32_t timeout_ms)
{
	uint64_t t0 = now_ms();

	st.drains++;
	hold_cmp = 0;
	while (outstanding || zero_pending) {
		struct pollfd p[NQ];
		char where[NQ * 128];
		uint32_t q;
		int n = 0;

		if (harvest())
			continue;
		if (failed)
			return;
		if (now_ms() - t0 > timeout_ms) {
			if (broken)
				return;	/* the fuzzer broke the ring: allowed */
			for (q = 0; q < nq; q++)
				n += snprintf(where + n, sizeof(where) - n,
					      "; queue %u: req prod %u cons %u threshold %u, cmp prod %u cons %u",
					      q, qs[q].req_prod, *qs[q].req_cons_idx,
					      *qs[q].req_call_threshold,
					      *qs[q].cmp_prod_idx, qs[q].cmp_cons);
			fail("hang: %llu requests (+%llu context 0) outstanding after %u ms%s",
			     (unsigned long long)outstanding,
			     (unsigned long long)zero_pending, timeout_ms, where);
			return;
		}
		for (q = 0; q < nq; q++)
			p[q] = (struct pollfd){ qs[q].call_fd, POLLIN, 0 };
		poll(p, nq, 20);
	}
}

/* ---- guest side: descriptors --------------------------------------------- */

static uint64_t disk_blocks[3];

/* an address the device may write to: a data area, or outside the table */
static uint64_t data_addr(uint64_t len, int aligned)
{
	uint64_t a, span;

	switch (rnd(12)) {
	case 0:
		return GPA_BASE + RAM_SIZE - (rnd(8) + 1) * 512ull;	/* crosses the end */
	case 1:
		return GPA_BASE + RAM_SIZE + rnd(1 << 20);		/* beyond */
	case 2:
		return GPA_BASE - (rnd(8) + 1) * 512ull;		/* below */
	case 3:
		return chance(50) ? 0 : ~0ull - rnd(4096);
	case 4:
		if (len <= N_LOW * PG) {				/* low area */
			span = N_LOW * PG - len;
			a = gpa_of(P_LOW) + rnd64() % (span + 1);
			return aligned ? a & ~511ull : a;
		}
		fallthrough;
	default:
		span = (uint64_t)(RAM_PAGES - P_HIGH) * PG;
		a = gpa_of(P_HIGH) + rnd64() % span;
		return aligned ? a & ~511ull : a;
	}
}

static void put_be(uint8_t *p, uint64_t v, int n)
{
	while (n--) {
		p[n] = (uint8_t)v;
		v >>= 8;
	}
}

/* a well-formed command for target t, lun l */
static void template(struct pvscsi_req_desc *d, uint32_t t)
{
	static const uint8_t rw[] = { 0x08, 0x0a, 0x28, 0x2a, 0xa8, 0xaa, 0x88, 0x8a };
	static const uint8_t emu[] = { 0x12, 0x25, 0x9e, 0x1a, 0x5a, 0xa0, 0x00,
		0x03, 0x35, 0x91, 0x42, 0x93, 0x2f, 0x8f, 0x12, 0xff };
	static const uint8_t vpd[] = { 0, 0x80, 0x83, 0xb0, 0xb1, 0xb2, 0x99 };
	uint64_t blocks = disk_blocks[t], lba;
	uint32_t nblk = chance(90) ? 1 + rnd(64) : 1 + rnd(16384);
	uint8_t opc;

	if (chance(70)) {
		opc = rw[rnd(sizeof(rw))];
		if (opc <= 0x0a)
			nblk = 1 + rnd(255);
		lba = blocks > nblk ? rnd64() % (blocks - nblk) : 0;
		if (chance(5))
			lba = blocks - rnd(4);	/* at and past the end */
		d->cdb[0] = opc;
		switch (opc) {
		case 0x08: case 0x0a:
			put_be(&d->cdb[1], lba & 0x1fffff, 3);
			d->cdb[4] = (uint8_t)nblk;
			d->cdb_len = 6;
			break;
		case 0x28: case 0x2a:
			put_be(&d->cdb[2], lba, 4);
			put_be(&d->cdb[7], nblk & 0xffff, 2);
			d->cdb_len = 10;
			break;
		case 0xa8: case 0xaa:
			put_be(&d->cdb[2], lba, 4);
			put_be(&d->cdb[6], nblk, 4);
			d->cdb_len = 12;
			break;
		default:
			put_be(&d->cdb[2], lba, 8);
			put_be(&d->cdb[10], nblk, 4);
			d->cdb_len = 16;
			if (chance(10))
				d->cdb[1] |= 0x08;	/* FUA */
			break;
		}
		d->data_len = (uint64_t)nblk * 512;
		d->flags = (opc & 2) ? PVSCSI_FLAG_CMD_DIR_TODEVICE :
			PVSCSI_FLAG_CMD_DIR_TOHOST;
	} else {
		opc = emu[rnd(sizeof(emu))];
		d->cdb[0] = opc;
		d->cdb_len = opc < 0x20 ? 6 : opc < 0x60 ? 10 : opc < 0xa0 ? 16 : 12;
		switch (opc) {
		case 0x12:
			d->cdb[1] = rnd(2);
			d->cdb[2] = d->cdb[1] ? vpd[rnd(sizeof(vpd))] : 0;
			d->cdb[4] = rnd(256);
			break;
		case 0x1a:
			d->cdb[2] = rnd(256);
			d->cdb[4] = rnd(256);
			break;
		case 0x5a:
			d->cdb[2] = rnd(256);
			put_be(&d->cdb[7], rnd(1024), 2);
			break;
		case 0x9e:
			d->cdb[1] = chance(80) ? 0x10 : rnd(32);
			put_be(&d->cdb[10], rnd(64), 4);
			break;
		case 0xa0:
			put_be(&d->cdb[6], rnd(1024), 4);
			break;
		case 0x42:	/* UNMAP: a parameter list in the data buffer */
			put_be(&d->cdb[7], 8 + 16 * rnd(4), 2);
			break;
		case 0x93:	/* WRITE SAME 16 (+UNMAP) */
			d->cdb[1] = chance(70) ? 0x08 : 0;
			put_be(&d->cdb[2], rnd64() % (blocks + 8), 8);
			put_be(&d->cdb[10], rnd(128), 4);
			break;
		case 0x2f: case 0x8f:
			d->cdb[1] = chance(20) ? 0x02 : 0;
			put_be(&d->cdb[2], rnd64() % (blocks + 8), 4);
			break;
		}
		d->data_len = rnd(4096);
		d->flags = opc == 0x42 || opc == 0x93 ? PVSCSI_FLAG_CMD_DIR_TODEVICE :
			chance(80) ? PVSCSI_FLAG_CMD_DIR_TOHOST : PVSCSI_FLAG_CMD_DIR_NONE;
	}
}

static void mutate(struct pvscsi_req_desc *d)
{
	uint8_t *b = (uint8_t *)d;

	switch (rnd(10)) {
	case 0:
		d->cdb[rnd(16)] ^= 1u << rnd(8);
		break;
	case 1:
		d->cdb_len = chance(50) ? rnd(256) : rnd(18);
		break;
	case 2:
		d->flags ^= 1u << rnd(chance(80) ? 5 : 32);
		break;
	case 3:
		d->data_len = chance(50) ? rnd64() : (d->data_len ^ (1ull << rnd(64)));
		break;
	case 4:
		d->lun[rnd(8)] = rnd(256);
		break;
	case 5:
		d->target = chance(50) ? rnd(8) : rnd(256);
		break;
	case 6:
		d->bus = rnd(4);
		break;
	case 7:
		d->sense_len = chance(50) ? rnd(64) : (uint32_t)rnd64();
		break;
	case 8:
		d->cdb[0] = rnd(256);
		break;
	default:
		/* any byte that the address fix-up below does not own */
		b[40 + rnd(sizeof(*d) - 40)] = rnd(256);
		break;
	}
}

/* SG list for the slot's own page (copied there when it is submitted) */
static struct pvscsi_sg_element sg_next[PG / sizeof(struct pvscsi_sg_element)];

/* elements in data areas or invalid */
static uint64_t make_sg(uint32_t q, uint32_t slot, uint64_t len)
{
	struct pvscsi_sg_element *sg = sg_next;
	uint32_t n = chance(90) ? 1 + rnd(16) : 1 + rnd(PVSCSI_MAX_SG_ENTRIES_PER_SEGMENT + 4);
	uint32_t i;
	uint64_t per = n ? (len + n - 1) / n : 0;

	if (n > PVSCSI_MAX_SG_ENTRIES_PER_SEGMENT + 4)
		n = PVSCSI_MAX_SG_ENTRIES_PER_SEGMENT + 4;
	for (i = 0; i < PG / sizeof(*sg); i++) {
		uint64_t el = chance(85) ? (per + 511) & ~511ull : rnd(1 << 17);

		if (i >= n) {
			sg[i] = (struct pvscsi_sg_element){ 0 };
			continue;
		}
		sg[i].length = (uint32_t)el;
		sg[i].addr = data_addr(el, chance(90));
		sg[i].flags = chance(2) ? 1 : 0;
	}
	switch (rnd(40)) {
	case 0:
		return GPA_BASE + RAM_SIZE - 64;	/* SG page crosses the end */
	case 1:
		return GPA_BASE + RAM_SIZE + PG;
	default:
		return gpa_of(sg_page(q, slot));
	}
}

static void gen_desc(struct pvscsi_req_desc *d, uint32_t q, uint32_t slot)
{
	uint32_t t = rnd(4), m;
	uint64_t len;

	memset(d, 0, sizeof(*d));
	if (chance(5)) {
		uint8_t *b = (uint8_t *)d;
		uint32_t i;

		for (i = 0; i < sizeof(*d); i++)
			b[i] = rnd(256);
	} else {
		template(d, t < 3 ? t : 0);
		d->target = t;			/* target 3 has no LUN */
		d->lun[1] = chance(90) ? 0 : rnd(3);
		d->sense_len = chance(90) ? 18 + rnd(48) : rnd(18);
		for (m = chance(60) ? 0 : 1 + rnd(4); m; m--)
			mutate(d);
	}
	/* addresses the device may write: data areas, sense slot, or invalid */
	len = d->data_len > VPS_MAX_DATA ? VPS_MAX_DATA : d->data_len;
	if (d->flags & PVSCSI_FLAG_CMD_WITH_SG_LIST)
		d->data_addr = make_sg(q, slot, len);
	else
		d->data_addr = data_addr(len, chance(90));
	d->sense_addr = chance(95) ? sense_gpa(q, slot) :
		chance(50) ? GPA_BASE + RAM_SIZE - 8 : GPA_BASE + RAM_SIZE + 4096;
	if (d->sense_len > 64 && d->sense_addr == sense_gpa(q, slot))
		d->sense_len = 64;
	d->context = chance(1) ? 0 : next_ctx;
}

static void kick(uint32_t q)
{
	uint64_t one = 1;

	if (write(qs[q].kick_fd, &one, sizeof(one)) != sizeof(one))
		die("kick");
}

/* the doorbell rule of a PVSCSI driver (Linux vmw_pvscsi), per queue */
static void kick_by_rule(uint32_t q)
{
	struct fq *f = &qs[q];
	uint32_t cons = __atomic_load_n(f->req_cons_idx, __ATOMIC_ACQUIRE);

	if (!threshold_on || f->req_prod - cons >= *f->req_call_threshold)
		kick(q);
}

/* n requests on one queue (any set up), as a blk-mq hardware queue posts */
static uint32_t submit(uint32_t n)
{
	uint32_t q = rnd(nq);
	struct fq *f = &qs[q];
	uint32_t cons = __atomic_load_n(f->req_cons_idx, __ATOMIC_ACQUIRE);
	uint32_t i;

	/* all n are generated: the seed's stream must not depend on timing */
	for (i = 0; i < n; i++) {
		uint32_t slot = f->req_prod & (f->req_entries - 1);
		struct pvscsi_req_desc *d = (void *)((uint8_t *)page(f->p_req) +
						     (size_t)slot * sizeof(*d));
		struct pvscsi_req_desc local;
		struct ctxinfo *ci;

		gen_desc(&local, q, slot);
		if (f->req_prod - cons >= f->req_entries)
			continue;	/* ring full: dropped */
		if (local.flags & PVSCSI_FLAG_CMD_WITH_SG_LIST)
			memcpy(page(sg_page(q, slot)), sg_next, PG);
		memcpy(d, &local, sizeof(local));
		if (local.context) {
			ci = ctx_info(next_ctx);
			ci->state = ST_OUT;
			ci->queue = q;
			ci->target = local.target;
			ci->op = local.cdb[0];
			ci->sense_len = local.sense_len > 255 ? 255 : local.sense_len;
			ci->data_len = local.data_len > VPS_MAX_DATA ? VPS_MAX_DATA :
				(uint32_t)local.data_len;
			if (local.target < 3 && (local.cdb[0] & 0x1d) == 0x08)
				recent_rw[nrecent++ % 64] = next_ctx;
			next_ctx++;
			outstanding++;
		} else {
			zero_pending++;
		}
		st.descriptors++;
		st.mq_descriptors += !!q;
		f->req_prod++;
		/* publish one by one, or as a batch (a producer jump) */
		if (rnd(2))
			__atomic_store_n(f->req_prod_idx, f->req_prod, __ATOMIC_RELEASE);
	}
	__atomic_store_n(f->req_prod_idx, f->req_prod, __ATOMIC_RELEASE);
	op("%s %u on queue %u (prod %u)", __func__, n, q, f->req_prod);
	kick_by_rule(q);
	return q;
}

/* ---- control operations ------------------------------------------------- */

static void expect(int ret, const char *what, int ok1, int ok2)
{
	if (ret && errno != ok1 && errno != ok2)
		fail("%s: %s", what, strerror(errno));
}

static void adapter_reset(void)
{
	struct vps_reset r = { VPS_RESET_ADAPTER, 0, 0, 0 };

	op("adapter reset");
	if (ioctl(vfd, VPS_RESET, &r))
		fail("adapter reset: %s", strerror(errno));
	/* completions posted while the reset waited for the backing I/O */
	hold_cmp = 0;
	if (rings_up)
		harvest();
	forget_all();
	st.resets++;
	new_epoch_rings();
}

static int log_bit(unsigned int pg)
{
	uint64_t n = gpa_of(pg) / PG;

	return (logmap[n / 8] >> (n % 8)) & 1;
}

static int set_log(uint32_t flags, uint64_t size)
{
	struct vps_log l = { (uintptr_t)logmap, size, flags, 0 };

	return ioctl(vfd, VPS_SET_LOG, &l);
}

static void log_clear(void)
{
	uint32_t q;

	memset(logmap, 0, LOG_BYTES);
	for (q = 0; q < NQ; q++)
		qs[q].log_want_cmp = 0;
	log_want_rs = 0;
}

/* every queue's completions all read */
static int all_read(void)
{
	uint32_t q;

	for (q = 0; q < nq; q++)
		if (qs[q].cmp_cons != __atomic_load_n(qs[q].cmp_prod_idx, __ATOMIC_ACQUIRE))
			return 0;
	return 1;
}

/* a requests_in_flight gauge of 0: nothing of this adapter in flight */
static int nothing_in_flight(char *buf, size_t len)
{
	return vps_sim_gauges(buf, len) && strstr(buf, "requests_in_flight 0 ");
}

/*
 * A live migration's hand-over on this adapter: VPS_STOP 1 drains and
 * posts what is in flight (EBUSY only when completions wait for room the
 * guest did not make), consumes nothing while stopped, VPS_STOP 0 runs
 * it again; the dirty log is checked, cleared and toggled meanwhile.
 */
static void stop_op(void)
{
	uint32_t one = 1, zero = 0, cons[NQ], i, q, n = 1 + rnd(4), k = rnd(100);
	char g[256];
	int e;

	op("stop");
	st.stops++;
	e = ioctl(vfd, VPS_STOP, &one);
	if (e && errno == EBUSY) {
		int full = 0;

		st.stops_busy++;
		for (q = 0; q < nq; q++)
			full |= *qs[q].cmp_prod_idx - *qs[q].cmp_cons_idx >= qs[q].cmp_entries;
		if (!broken && !full)
			fail("stop: EBUSY, room in all %u cmp rings (queue 0: %u - %u of %u)",
			     nq, *qs[0].cmp_prod_idx, *qs[0].cmp_cons_idx,
			     qs[0].cmp_entries);
	} else if (e) {
		fail("stop: %s", strerror(errno));
	} else {
		if (!nothing_in_flight(g, sizeof(g)))
			fail("stopped, yet in flight: %s", g);
		harvest();
		if (log_on) {
			st.log_checks++;
			if (log_want_rs && !log_bit(P_RS))
				fail("dirty log: rings state page not logged");
			for (q = 0; q < nq; q++)
				for (i = 0; i < 32; i++)
					if ((qs[q].log_want_cmp >> i & 1) &&
					    !log_bit(qs[q].p_cmp + i))
						fail("dirty log: queue %u cmp page %u not logged",
						     q, i);
			/* what was posted is all read: nothing is half seen */
			if (all_read())
				log_clear();
		}
		if (k < 20) {
			op("log %s", log_on ? "off" : "on");
			if (!log_on) {
				/* what was posted so far, unread or not, was not logged */
				log_clear();
				for (q = 0; q < nq; q++)
					qs[q].log_from = *qs[q].cmp_prod_idx;
			}
			expect(set_log(log_on ? 0 : VPS_LOG_ENABLE, LOG_BYTES), "set log", 0, 0);
			log_on = !log_on;
		} else if (k < 25) {
			/* a bitmap short of the memory table is refused */
			op("log too small");
			e = set_log(VPS_LOG_ENABLE, LOG_BYTES / 2);
			e = e && errno == EINVAL ? 0 : (errno = EPROTO, -1);
			expect(e, "short log", 0, 0);
			/* and changed nothing: the log stays as it was */
		}
	}
	/* stopped: a doorbell is kept, nothing is taken from any ring */
	for (q = 0; q < nq; q++)
		cons[q] = __atomic_load_n(qs[q].req_cons_idx, __ATOMIC_ACQUIRE);
	if (rings_up && !broken) {
		kick(submit(n));
		usleep(2000);
		for (q = 0; q < nq; q++)
			if (__atomic_load_n(qs[q].req_cons_idx, __ATOMIC_ACQUIRE) != cons[q])
				fail("stopped adapter consumed requests of queue %u: cons %u -> %u",
				     q, cons[q], *qs[q].req_cons_idx);
	}
	op("run again");
	expect(ioctl(vfd, VPS_STOP, &zero), "run again", 0, 0);
}

static void one_op(void)
{
	uint32_t k = rnd(1000);
	int e;

	if (k < 550) {
		if (rings_up)
			submit(1 + rnd(chance(80) ? 16 : 64));
	} else if (k < 680) {
		harvest();
	} else if (k < 720) {
		struct vps_abort a = { 0, 0, 0 };
		uint64_t back = rnd(40);

		a.context = next_ctx > back + 1 ? next_ctx - 1 - back : 1;
		if (chance(70) && recent_rw[back % 64])
			a.context = recent_rw[back % 64];
		a.target = chance(90) && a.context < next_ctx ?
			ctx_info(a.context)->target : rnd(4);
		op("abort %llu/%u", (unsigned long long)a.context, a.target);
		e = ioctl(vfd, VPS_ABORT, &a);
		expect(e, "abort", ENOENT, 0);
		if (!e) {
			st.aborts_ok++;
			if (ctx_info(a.context)->state != ST_OUT)
				fail("abort of context %llu succeeded, not outstanding (state %u)",
				     (unsigned long long)a.context,
				     ctx_info(a.context)->state);
		}
	} else if (k < 745) {
		struct vps_reset r = { VPS_RESET_DEVICE, rnd(5), rnd(3), 0 };

		if (chance(40))
			r.kind = VPS_RESET_BUS;
		if (chance(3))
			r.target = VPS_MAX_TARGETS + rnd(10);
		op("reset kind %u %u/%u", r.kind, r.target, r.lun);
		e = ioctl(vfd, VPS_RESET, &r);
		if (r.target >= VPS_MAX_TARGETS && r.kind == VPS_RESET_DEVICE)
			e = e && errno == EINVAL ? 0 : (errno = EPROTO, -1);
		expect(e, "device/bus reset", 0, 0);
		st.resets++;
	} else if (k < 752) {
		adapter_reset();
	} else if (k < 772) {
		uint32_t t = rnd(3), l = t == 2 ? 0 : rnd(2);
		struct vps_lun_addr a = { t, l };

		if (attached[t][l]) {
			op("detach %u/%u", t, l);
			e = ioctl(vfd, VPS_DETACH_LUN, &a);
			expect(e, "detach", 0, 0);
			attached[t][l] = 0;
			st.detaches++;
		} else {
			op("attach %u/%u", t, l);
			e = attach(t, l);
			expect(e, "attach", 0, 0);
			attached[t][l] = !e;
		}
	} else if (k < 775) {
		close_adapter(1);
		open_adapter();
	} else if (k < 785) {
		uint32_t q = rnd(nq);
		struct fq *f = &qs[q];

		if (!rings_up)
			return;
		switch (rnd(5)) {
		case 0:	/* producer more than a ring ahead: the adapter stops */
			op("chaos: queue %u req prod +%u", q, f->req_entries + 1);
			*f->req_prod_idx = f->req_prod + f->req_entries + 1 + rnd(1u << 30);
			kick(q);
			broken = 1;
			st.breaks++;
			break;
		case 1:	/* producer behind the consumer: same */
			op("chaos: queue %u req prod behind", q);
			*f->req_prod_idx = *f->req_cons_idx - 1 - rnd(1000);
			kick(q);
			broken = 1;
			st.breaks++;
			break;
		case 2:	/* completion consumer ahead of the producer */
			op("chaos: queue %u cmp cons ahead", q);
			*f->cmp_cons_idx = f->cmp_cons + f->cmp_entries + 1 + rnd(1u << 30);
			hold_cmp = 1;	/* keep it there until the next drain */
			broken = 1;
			st.breaks++;
			break;
		case 3:
			/*
			 * Completion consumer moved back: the ring looks full,
			 * or, with completions posted meanwhile, more than
			 * full, which stops the adapter (a race: count it as
			 * a break either way).
			 */
			op("chaos: queue %u cmp cons behind", q);
			*f->cmp_cons_idx = f->cmp_cons - 1 - rnd(f->cmp_entries);
			hold_cmp = 1;
			broken = 1;
			st.breaks++;
			break;
		default: /* garbage in the threshold the device reads */
			op("chaos: queue %u threshold", q);
			*f->req_call_threshold = (uint32_t)rnd64();
			kick(q);	/* the device rewrites it when it runs */
			break;
		}
	} else if (k < 790) {
		if (chance(60)) {
			op("mem table: same");
			expect(set_mem(RAM_SIZE), "same mem table", 0, 0);
		} else {
			/*
			 * The rings fall outside the table: the adapter drops
			 * them, as an adapter reset does.  What it posted before
			 * is read; what was in flight completes unposted; no
			 * ring until the guest sets them up again (a reset).
			 */
			op("mem table: without the rings");
			expect(set_mem(P_RS * PG), "small mem table", 0, 0);
			if (rings_up)
				harvest();
			forget_all();
			rings_up = 0;
			hold_cmp = 0;
			broken = 1;
			st.breaks++;
			expect(set_mem(RAM_SIZE), "mem table back", 0, 0);
		}
	} else if (k < 810) {
		uint32_t on = rnd(10) ? rnd(2) : 2 + rnd(5), q;

		op("threshold %u", on);
		e = ioctl(vfd, VPS_SET_REQ_CALL_THRESHOLD, &on);
		if (on > 1)
			e = e && errno == EINVAL ? 0 : (errno = EPROTO, -1);
		else if (!e)
			threshold_on = on;
		expect(e, "threshold", rings_up ? 0 : EINVAL, 0);

		/*
		 * The completion event index: on, off or an unknown bit, and
		 * the index anywhere (a guest may ask for no interrupts at
		 * all: drain() looks at the ring every 20 ms regardless)
		 */
		on = rnd(4) ? rnd(2) * VPS_FEAT_CMP_EVENT_IDX : 1u << rnd(32);
		op("features %#x", on);
		e = ioctl(vfd, VPS_SET_FEATURES, &on);
		if (on & ~VPS_FEATURES_ALL)
			e = e && errno == EINVAL ? 0 : (errno = EPROTO, -1);
		expect(e, "features", rings_up ? 0 : EINVAL, 0);
		q = rnd(nq);
		__atomic_store_n(qs[q].cmp_event_idx, rnd(2) ? qs[q].cmp_cons + rnd(64) :
				 (uint32_t)rnd64(), __ATOMIC_RELAXED);
	} else if (k < 820) {
		/* SETUP_RINGS again, without a reset, once idle */
		harvest();
		if (outstanding || zero_pending || broken || hold_cmp) {
			rnd64();	/* the draw new_epoch_rings() takes */
			return;
		}
		op("setup rings again, idle");
		forget_all();
		new_epoch_rings();
	} else if (k < 845) {
		op("hold completions");
		hold_cmp = 1;
	} else if (k < 880) {
		op("drain");
		if (broken)
			adapter_reset();	/* nothing would come */
		else
			drain(30000);
	} else if (k < 900) {
		/* let the worker run: requests get consumed and reach the disk */
		op("pause");
		usleep(200 + rnd(3000));
	} else if (k < 912) {
		stop_op();
	} else if (k < 920) {
		/* the next queue, mid-epoch, beside I/O on the others */
		add_queue();
	} else {
		harvest();
		if (rings_up && !broken)
			kick_by_rule(rnd(nq));
	}
}

static int print_usage(void)
{
	fprintf(stderr, "usage: %s [--seed N] [--iterations M] [--seconds S]\n", "vps_fuzz");
	fprintf(stderr, "       [--descriptors D] DISK FILE RO_DISK\n");
	return 2;
}

int main(int argc, char **argv)
{
	uint64_t seed = 0, iterations = 100000, descriptors = 0;
	double seconds = 0;
	uint64_t t0;
	char g[256];
	int i, n = 0, gz, mq;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--iterations") && i + 1 < argc)
			iterations = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--descriptors") && i + 1 < argc)
			descriptors = strtoull(argv[++i], NULL, 0);
		else if (argv[i][0] == '-')
			return print_usage();
		else if (n < 3)
			paths[n++] = argv[i];
		else
			return print_usage();
	}
	if (n != 3)
		return print_usage();
	if (!seed) {
		struct timespec t;

		clock_gettime(CLOCK_REALTIME, &t);
		seed = (uint64_t)t.tv_sec * 1000003u ^ t.tv_nsec ^ getpid();
	}
	printf("# seed %llu (replay: vps_fuzz --seed %llu --iterations %llu ...)\n",
	       (unsigned long long)seed, (unsigned long long)seed,
	       (unsigned long long)iterations);
	fflush(stdout);
	rng_state = seed * 0x9e3779b97f4a7c15ull + 1;
	for (i = 0; i < 3; i++)
		disk_blocks[i] = vps_sim_blocks(paths[i]);
	ram = mmap(NULL, RAM_SIZE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (ram == MAP_FAILED)
		die("mmap");
	rs = page(P_RS);
	for (i = 0; i < NQ; i++)
		fq_bind(i);
	ctx_info(1);
	logmap = calloc(1, LOG_BYTES);
	if (!logmap)
		die("calloc");

	t0 = now_ms();
	open_adapter();
	for (iter = 0; iter < iterations && !failed; iter++) {
		if (seconds > 0 && now_ms() - t0 > seconds * 1000)
			break;
		if (descriptors && st.descriptors >= descriptors)
			break;
		one_op();
		if (iter % 100000 == 99999) {
			printf("# %llu iterations, %llu descriptors, %llu completions\n",
			       (unsigned long long)iter + 1,
			       (unsigned long long)st.descriptors,
			       (unsigned long long)st.completions);
			fflush(stdout);
		}
	}
	st.iterations = iter;
	if (!failed && !broken) {
		op("final drain");
		drain(30000);
	}
	close_adapter(0);
	/*
	 * A run that ended with a broken ring was not drained: its backing
	 * I/O may still be in flight, as after any close.
	 */
	gz = vps_sim_gauges_zero_within(g, sizeof(g), 5000);
	printf("# seed %llu: %llu iterations, %llu descriptors, %llu completions,",
	       (unsigned long long)seed, (unsigned long long)st.iterations,
	       (unsigned long long)st.descriptors,
	       (unsigned long long)st.completions);
	printf(" %llu epochs, %llu ring breaks, %llu closes, %llu resets,",
	       (unsigned long long)st.epochs, (unsigned long long)st.breaks,
	       (unsigned long long)st.closes, (unsigned long long)st.resets);
	printf(" %llu aborts hit, %llu detaches, %llu drains, %.1f s\n",
	       (unsigned long long)st.aborts_ok, (unsigned long long)st.detaches,
	       (unsigned long long)st.drains, (now_ms() - t0) / 1000.0);
	printf("# %llu stops (%llu busy), %llu dirty log checks\n",
	       (unsigned long long)st.stops, (unsigned long long)st.stops_busy,
	       (unsigned long long)st.log_checks);
	printf("# %llu queues set up, %llu refused, %llu descriptors on queues 1..%u\n",
	       (unsigned long long)st.queues_added,
	       (unsigned long long)st.queues_refused,
	       (unsigned long long)st.mq_descriptors, NQ - 1);
	if (failed)
		printf("not ok 1 - fuzz # seed %llu: %d violation(s), first above\n",
		       (unsigned long long)seed, failed);
	else
		printf("ok 1 - fuzz\n");
	if (gz)
		printf("ok 2 - gauges-zero\n");
	else
		printf("not ok 2 - gauges-zero # %s\n", g);
	/* a run that never reached the queues proved nothing about them */
	mq = st.queues_added && st.queues_refused && st.mq_descriptors;
	if (mq)
		printf("ok 3 - queues-exercised\n");
	else
		printf("not ok 3 - queues-exercised # %llu set up, %llu refused, %llu requests\n",
		       (unsigned long long)st.queues_added,
		       (unsigned long long)st.queues_refused,
		       (unsigned long long)st.mq_descriptors);
	printf("1..3\n");
	return failed || !gz || !mq;
}
