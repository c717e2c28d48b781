/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * vhost-pvscsi: the one ABI header of the project.
 *
 * Part 1 describes the VMware PVSCSI device as a guest sees it (PCI IDs,
 * BAR0 registers, commands, ring and descriptor layouts) plus our optional
 * multi-queue extension.  Part 2 is the ioctl interface of the host module
 * (/dev/vhost-pvscsi) that a VMM uses to hand over the data path.
 *
 * The guest driver, the host module, the QEMU patch (through a generated
 * copy, see scripts/sync-qemu-header) and the test programs all include
 * this file.  Everything shared with a guest is little-endian; sizes are
 * checked with static asserts at the end.
 */
#ifndef _UAPI_VHOST_PVSCSI_H
#define _UAPI_VHOST_PVSCSI_H

#include <linux/types.h>
#include <linux/ioctl.h>

/* ------------------------------------------------------------------ */
/* Part 1: the PVSCSI device ABI                                      */
/* ------------------------------------------------------------------ */

#define PVSCSI_PCI_VENDOR_ID		0x15ad
#define PVSCSI_PCI_DEVICE_ID		0x07c0
#define PVSCSI_PCI_SUBSYS_VENDOR_ID	0x15ad
#define PVSCSI_PCI_SUBSYS_ID		0x07c0
#define PVSCSI_PCI_REVISION		0x02

/* BAR0: 8 pages of 4 KiB, whatever the guest's page size */
#define PVSCSI_PAGE_SHIFT		12
#define PVSCSI_PAGE_SIZE		(1u << PVSCSI_PAGE_SHIFT)
#define PVSCSI_BAR0_PAGES		8
#define PVSCSI_BAR0_SIZE		(PVSCSI_BAR0_PAGES * PVSCSI_PAGE_SIZE)
#define PVSCSI_BAR0_MSIX_TABLE_OFFSET	(6 * PVSCSI_PAGE_SIZE)
#define PVSCSI_BAR0_MSIX_PBA_OFFSET	(7 * PVSCSI_PAGE_SIZE)

/* register offsets in BAR0; every access is 4 bytes wide */
#define PVSCSI_REG_COMMAND		0x0000
#define PVSCSI_REG_COMMAND_DATA		0x0004
#define PVSCSI_REG_COMMAND_STATUS	0x0008
#define PVSCSI_REG_LAST_STS_0		0x0100
#define PVSCSI_REG_LAST_STS_1		0x0104
#define PVSCSI_REG_LAST_STS_2		0x0108
#define PVSCSI_REG_LAST_STS_3		0x010c
#define PVSCSI_REG_INTR_STATUS		0x100c
#define PVSCSI_REG_INTR_MASK		0x2010
#define PVSCSI_REG_KICK_NON_RW_IO	0x3014
#define PVSCSI_REG_DEBUG		0x3018
#define PVSCSI_REG_KICK_RW_IO		0x4018

/* interrupt status / mask bits; INTx status is write-1-to-clear */
#define PVSCSI_INTR_CMPL_0		(1u << 0)
#define PVSCSI_INTR_CMPL_1		(1u << 1)
#define PVSCSI_INTR_CMPL_MASK		0x3u
#define PVSCSI_INTR_MSG_0		(1u << 2)
#define PVSCSI_INTR_MSG_1		(1u << 3)
#define PVSCSI_INTR_MSG_MASK		0xcu
#define PVSCSI_INTR_ALL			0xfu

/* commands written to PVSCSI_REG_COMMAND */
enum pvscsi_cmd {
	PVSCSI_CMD_FIRST		= 0,
	PVSCSI_CMD_ADAPTER_RESET	= 1,
	PVSCSI_CMD_ISSUE_SCSI		= 2,
	PVSCSI_CMD_SETUP_RINGS		= 3,
	PVSCSI_CMD_RESET_BUS		= 4,
	PVSCSI_CMD_RESET_DEVICE		= 5,
	PVSCSI_CMD_ABORT_CMD		= 6,
	PVSCSI_CMD_CONFIG		= 7,
	PVSCSI_CMD_SETUP_MSG_RING	= 8,
	PVSCSI_CMD_DEVICE_UNPLUG	= 9,
	PVSCSI_CMD_SETUP_REQCALLTHRESHOLD = 10,
	PVSCSI_CMD_LAST			= 11,

	/*
	 * Our extension (Documentation/abi.rst).  Numbered far above
	 * VMware's range so that no stock device implements it: every stock
	 * device answers an unknown command with PVSCSI_STATUS_UNSUPPORTED.
	 */
	PVSCSI_CMD_EXT_QUERY		= 0x5650,	/* "VP" */
	PVSCSI_CMD_EXT_SETUP_QUEUES	= 0x5651,
	PVSCSI_CMD_EXT_SET_FEATURES	= 0x5652,
};

/* value of PVSCSI_REG_COMMAND_STATUS for a refused/unknown command */
#define PVSCSI_STATUS_UNSUPPORTED	0xffffffffu

/* PVSCSI_CMD_RESET_DEVICE */
struct pvscsi_cmd_reset_device {
	__le32 target;
	__u8 lun[8];
} __attribute__((packed));

/* PVSCSI_CMD_ABORT_CMD */
struct pvscsi_cmd_abort {
	__le64 context;
	__le32 target;
	__le32 pad;
} __attribute__((packed));

/* PVSCSI_CMD_SETUP_REQCALLTHRESHOLD; status: 1 = enabled */
struct pvscsi_cmd_setup_req_call {
	__le32 enable;
} __attribute__((packed));

/* PVSCSI_CMD_CONFIG */
#define PVSCSI_CONFIG_PAGE_CONTROLLER		0x1958
#define PVSCSI_CONFIG_PAGE_PHY			0x1959
#define PVSCSI_CONFIG_PAGE_DEVICE		0x195a
#define PVSCSI_CONFIG_CONTROLLER_ADDRESS	0x2120
#define PVSCSI_CONFIG_BUSTARGET_ADDRESS		0x2121
#define PVSCSI_CONFIG_PHY_ADDRESS		0x2122

struct pvscsi_cmd_config {
	__le64 cmp_addr;		/* guest-physical, page aligned */
	__le64 config_page_address;	/* address type << 32 | address */
	__le32 config_page_num;
	__le32 pad;
} __attribute__((packed));

struct pvscsi_config_page_header {
	__le32 page_num;
	__le16 num_dwords;
	__le16 host_status;
	__le16 scsi_status;
	__le16 reserved[3];
} __attribute__((packed));

struct pvscsi_config_page_controller {
	struct pvscsi_config_page_header header;
	__le64 node_wwn;
	__le16 manufacturer[64];
	__le16 serial_number[64];
	__le16 oprom_version[32];
	__le16 hw_version[32];
	__le16 firmware_version[32];
	__le32 num_phys;		/* the number of targets */
	__u8 use_consecutive_phy_wwns;
	__u8 reserved[3];
} __attribute__((packed));

/* PVSCSI_CMD_SETUP_RINGS */
#define PVSCSI_SETUP_RINGS_MAX_PAGES	32
#define PVSCSI_SETUP_MSG_RING_MAX_PAGES	16

struct pvscsi_cmd_setup_rings {
	__le32 req_ring_num_pages;	/* power of two, 1..32 */
	__le32 cmp_ring_num_pages;	/* power of two, 1..32 */
	__le64 rings_state_ppn;
	__le64 req_ring_ppns[PVSCSI_SETUP_RINGS_MAX_PAGES];
	__le64 cmp_ring_ppns[PVSCSI_SETUP_RINGS_MAX_PAGES];
} __attribute__((packed));

/* PVSCSI_CMD_SETUP_MSG_RING */
struct pvscsi_cmd_setup_msg_ring {
	__le32 num_pages;		/* power of two, 1..16 */
	__le32 pad;
	__le64 ring_ppns[PVSCSI_SETUP_MSG_RING_MAX_PAGES];
} __attribute__((packed));

/* the page shared by driver and device; indices run free (mod 2^32) */
struct pvscsi_rings_state {
	__le32 req_prod_idx;		/* written by the driver */
	__le32 req_cons_idx;		/* written by the device */
	__le32 req_num_entries_log2;	/* written by the device */
	__le32 cmp_prod_idx;		/* written by the device */
	__le32 cmp_cons_idx;		/* written by the driver */
	__le32 cmp_num_entries_log2;	/* written by the device */
	__le32 req_call_threshold;	/* written by the device */
	__u8 pad[100];
	__le32 msg_prod_idx;		/* written by the device */
	__le32 msg_cons_idx;		/* written by the driver */
	__le32 msg_num_entries_log2;	/* written by the device */
} __attribute__((packed));

/* request descriptor flags */
#define PVSCSI_FLAG_CMD_WITH_SG_LIST	(1u << 0)
#define PVSCSI_FLAG_CMD_OUT_OF_BAND_CDB	(1u << 1)
#define PVSCSI_FLAG_CMD_DIR_NONE	(1u << 2)
#define PVSCSI_FLAG_CMD_DIR_TOHOST	(1u << 3)
#define PVSCSI_FLAG_CMD_DIR_TODEVICE	(1u << 4)
#define PVSCSI_FLAG_CMD_DIR_MASK	(7u << 2)

#define PVSCSI_MAX_CDB_LEN		16

struct pvscsi_req_desc {
	__le64 context;			/* non-zero, echoed in the completion */
	__le64 data_addr;		/* buffer, or the SG page with SG_LIST */
	__le64 data_len;
	__le64 sense_addr;
	__le32 sense_len;
	__le32 flags;
	__u8 cdb[PVSCSI_MAX_CDB_LEN];
	__u8 cdb_len;
	__u8 lun[8];			/* SAM LUN; single level: lun[1] */
	__u8 tag;			/* SIMPLE_QUEUE_TAG etc. */
	__u8 bus;
	__u8 target;
	__le16 vcpu_hint;
	__u8 unused[58];
} __attribute__((packed));

/* one SG page per request: at most this many 16-byte elements */
#define PVSCSI_MAX_SG_ENTRIES_PER_SEGMENT	128

struct pvscsi_sg_element {
	__le64 addr;
	__le32 length;
	__le32 flags;			/* must be zero (no chaining) */
} __attribute__((packed));

struct pvscsi_cmp_desc {
	__le64 context;
	__le64 data_len;		/* bytes transferred */
	__le32 sense_len;		/* bytes of sense written */
	__le16 host_status;		/* BTSTAT_* */
	__le16 scsi_status;		/* SAM status */
	__le32 pad[2];
} __attribute__((packed));

/* host adapter status in completions */
enum pvscsi_btstat {
	BTSTAT_SUCCESS			= 0x00,
	BTSTAT_LINKED_COMMAND_COMPLETED	= 0x0a,
	BTSTAT_LINKED_COMMAND_COMPLETED_WITH_FLAG = 0x0b,
	BTSTAT_DATA_UNDERRUN		= 0x0c,
	BTSTAT_SELTIMEO			= 0x11,
	BTSTAT_DATARUN			= 0x12,
	BTSTAT_BUSFREE			= 0x13,
	BTSTAT_INVPHASE			= 0x14,
	BTSTAT_LUNMISMATCH		= 0x17,
	BTSTAT_INVPARAM			= 0x1a,
	BTSTAT_SENSFAILED		= 0x1b,
	BTSTAT_TAGREJECT		= 0x1c,
	BTSTAT_BADMSG			= 0x1d,
	BTSTAT_HAHARDWARE		= 0x20,
	BTSTAT_NORESPONSE		= 0x21,
	BTSTAT_SENTRST			= 0x22,
	BTSTAT_RECVRST			= 0x23,
	BTSTAT_DISCONNECT		= 0x24,
	BTSTAT_BUSRESET			= 0x25,
	BTSTAT_ABORTQUEUE		= 0x26,
	BTSTAT_HASOFTWARE		= 0x27,
	BTSTAT_HATIMEOUT		= 0x30,
	BTSTAT_SCSIPARITY		= 0x34,
};

/* message ring */
enum pvscsi_msg_type {
	PVSCSI_MSG_DEV_ADDED		= 0,
	PVSCSI_MSG_DEV_REMOVED		= 1,
	PVSCSI_MSG_LAST			= 2,
};

struct pvscsi_msg_desc {
	__le32 type;
	__le32 args[31];
} __attribute__((packed));

struct pvscsi_msg_dev_status {
	__le32 type;			/* DEV_ADDED / DEV_REMOVED */
	__le32 bus;
	__le32 target;
	__u8 lun[8];
	__le32 pad[27];
} __attribute__((packed));

#define PVSCSI_REQ_DESCS_PER_PAGE \
	(PVSCSI_PAGE_SIZE / sizeof(struct pvscsi_req_desc))
#define PVSCSI_CMP_DESCS_PER_PAGE \
	(PVSCSI_PAGE_SIZE / sizeof(struct pvscsi_cmp_desc))
#define PVSCSI_MSG_DESCS_PER_PAGE \
	(PVSCSI_PAGE_SIZE / sizeof(struct pvscsi_msg_desc))

/*
 * --- The multi-queue extension ---
 *
 * PVSCSI_CMD_EXT_QUERY, followed by one struct pvscsi_cmd_ext_query
 * streamed to COMMAND_DATA.  A device without the extension answers
 * PVSCSI_STATUS_UNSUPPORTED; a device with it answers a status word with
 * PVSCSI_EXT_STATUS_MAGIC in bits 31:24, the extension version in bits
 * 23:16, the number of queues it offers in bits 15:8 and feature bits in
 * 7:0.  Bit 31 is clear in the magic, so the answer never reads as -1.
 */
#define PVSCSI_EXT_QUERY_MAGIC		0x56505351u	/* "VPSQ" */
#define PVSCSI_EXT_STATUS_MAGIC		0x5au
#define PVSCSI_EXT_VERSION		1
#define PVSCSI_EXT_MAX_QUEUES		16

#define PVSCSI_EXT_FEAT_MULTIQUEUE	(1u << 0)
#define PVSCSI_EXT_FEAT_INTR_MODERATION	(1u << 1)

#define PVSCSI_EXT_STATUS(ver, nq, feat) \
	((PVSCSI_EXT_STATUS_MAGIC << 24) | (((ver) & 0xff) << 16) | \
	 (((nq) & 0xff) << 8) | ((feat) & 0xff))
/* PVSCSI_STATUS_UNSUPPORTED has 0xff in bits 31:24, never the magic */
#define PVSCSI_EXT_STATUS_VALID(s)	(((s) >> 24) == PVSCSI_EXT_STATUS_MAGIC)
#define PVSCSI_EXT_STATUS_VERSION(s)	(((s) >> 16) & 0xff)
#define PVSCSI_EXT_STATUS_QUEUES(s)	(((s) >> 8) & 0xff)
#define PVSCSI_EXT_STATUS_FEATURES(s)	((s) & 0xff)

struct pvscsi_cmd_ext_query {
	__le32 magic;			/* PVSCSI_EXT_QUERY_MAGIC */
	__le32 driver_version;		/* PVSCSI_EXT_VERSION the driver speaks */
} __attribute__((packed));

/*
 * PVSCSI_CMD_EXT_SET_FEATURES: turn on features the EXT_QUERY answer
 * offered, after SETUP_RINGS.  Status 0, or PVSCSI_STATUS_UNSUPPORTED
 * (bad magic, a bit not offered, rings not set up: nothing changes).
 * ADAPTER_RESET and SETUP_RINGS turn every feature off again (as they do
 * SETUP_REQCALLTHRESHOLD): a driver sets them after each SETUP_RINGS.
 *
 * PVSCSI_EXT_FEAT_INTR_MODERATION, the completion event index (virtio's
 * used_event): the driver writes, in the rings state page at
 * PVSCSI_EXT_CMP_EVENT_OFFSET, the completion index it wants an
 * interrupt for, normally its cmpConsIdx once it has reaped; the device
 * raises the completion interrupt only when it publishes that entry, i.e.
 * when cmpProdIdx moves from "old" to "new" with
 * (u32)(new - event - 1) < (u32)(new - old) (pvscsi_ext_need_event()).  The
 * device publishes cmpProdIdx, then a full barrier, then reads the event
 * index; the driver writes the event index, a full barrier, then reads
 * cmpProdIdx again and reaps what came meanwhile, or a completion may
 * wait with no interrupt.  The message ring's interrupt is not affected.
 */
#define PVSCSI_EXT_CMP_EVENT_OFFSET	0x100
static __inline__ int pvscsi_ext_need_event(__u32 event, __u32 new_idx, __u32 old_idx)
{
	return (__u32)(new_idx - event - 1) < (__u32)(new_idx - old_idx);
}

struct pvscsi_cmd_ext_set_features {
	__le32 magic;			/* PVSCSI_EXT_QUERY_MAGIC */
	__le32 features;		/* PVSCSI_EXT_FEAT_* */
} __attribute__((packed));

/*
 * PVSCSI_EXT_FEAT_MULTIQUEUE: request/completion ring pairs beyond the
 * one SETUP_RINGS sets up (queue 0).  After SETUP_RINGS, the driver sends
 * PVSCSI_CMD_EXT_SETUP_QUEUES once per further queue, in order (1, 2, ...,
 * fewer than the query's count), each followed by one struct
 * pvscsi_cmd_ext_setup_queue: its rings, sized as SETUP_RINGS's.  Status
 * 0, or PVSCSI_STATUS_UNSUPPORTED (bad magic, queue out of order or not
 * offered, bad page counts or pages, no queue 0): no queue changes then.
 * ADAPTER_RESET and SETUP_RINGS remove every queue but 0.
 *
 * Queue q >= 1 keeps its indices in the rings state page, in struct
 * pvscsi_ext_queue_state at PVSCSI_EXT_QUEUE_STATE_OFFSET(q), a cache line
 * of its own; they mean what queue 0's mean in struct pvscsi_rings_state
 * (cmp_event_idx is its completion event index, with INTR_MODERATION).
 * The device writes req_cons_idx, req_num_entries_log2, cmp_prod_idx,
 * cmp_num_entries_log2 and req_call_threshold; req_call_threshold starts
 * at 1 (ring the doorbell for each request) and SETUP_REQCALLTHRESHOLD
 * applies to every queue.  The driver rings queue q's doorbell by writing
 * any value to PVSCSI_EXT_REG_KICK(q) (for any command type); completions
 * of queue q raise MSI-X vector q (queue 0's, and the message ring's, stay
 * on vector 0).  A command completes on the queue it was posted on;
 * resets and aborts cover commands of every queue, and a command's
 * context must be unique across queues.
 */
#define PVSCSI_EXT_QUEUE_STATE_OFFSET(q)	(0x400 + (q) * 64)
#define PVSCSI_EXT_REG_KICK(q)		(0x5000 + (q) * 4)

struct pvscsi_cmd_ext_setup_queue {
	__le32 magic;			/* PVSCSI_EXT_QUERY_MAGIC */
	__le32 queue;			/* 1 .. offered - 1, in order */
	__le32 req_ring_num_pages;	/* power of two, 1..32 */
	__le32 cmp_ring_num_pages;	/* power of two, 1..32 */
	__le64 req_ring_ppns[PVSCSI_SETUP_RINGS_MAX_PAGES];
	__le64 cmp_ring_ppns[PVSCSI_SETUP_RINGS_MAX_PAGES];
} __attribute__((packed));

struct pvscsi_ext_queue_state {
	__le32 req_prod_idx;		/* written by the driver */
	__le32 req_cons_idx;		/* written by the device */
	__le32 req_num_entries_log2;	/* written by the device */
	__le32 cmp_prod_idx;		/* written by the device */
	__le32 cmp_cons_idx;		/* written by the driver */
	__le32 cmp_num_entries_log2;	/* written by the device */
	__le32 req_call_threshold;	/* written by the device */
	__le32 cmp_event_idx;		/* written by the driver */
	__u8 pad[32];
} __attribute__((packed));

/* ------------------------------------------------------------------ */
/* Part 2: the host module's ioctl interface (/dev/vhost-pvscsi)      */
/* ------------------------------------------------------------------ */

/*
 * VHOST_SET_OWNER and VHOST_SET_MEM_TABLE from <linux/vhost.h> keep their
 * generic meaning (struct vhost_memory, regions must not overlap).  The
 * rest uses the vhost ioctl type with numbers in 0xd0..0xef, a range the
 * generic vhost interface does not use.  All structures are host-endian.
 */
#define VPS_ABI_VERSION			1
#define VPS_IOC_TYPE			0xaf

#define VPS_MAX_TARGETS			64
#define VPS_MAX_LUNS			64	/* per target, single level */

/* which interrupt an eventfd stands for */
#define VPS_EVENT_CMPL			0	/* completion ring (queue 0) */
#define VPS_EVENT_CMPL_Q(q)		(q)	/* completion ring of queue q */
#define VPS_EVENT_MSG			0xffff	/* message ring */
/* queues the module serves: queue 0 and those of VPS_SETUP_QUEUE */
#define VPS_MAX_QUEUES			PVSCSI_EXT_MAX_QUEUES

struct vps_eventfd {
	__u32 index;			/* VPS_EVENT_* for call; queue for kick */
	__s32 fd;			/* -1 detaches */
};

#define VPS_LUN_READ_ONLY		(1u << 0)
#define VPS_LUN_FLAGS_ALL		VPS_LUN_READ_ONLY

struct vps_lun {
	__u32 target;
	__u32 lun;
	__s32 fd;			/* opened by the VMM; bdev or regular file */
	__u32 flags;			/* VPS_LUN_* */
	__u32 block_size;		/* 512 or 4096; 0 = the backing's */
	__u32 max_outstanding;		/* 0 = module parameter */
	__u8 vendor[8];			/* INQUIRY; zero = "VPSCSI  " */
	__u8 product[16];		/* zero = "vhost-pvscsi    " */
	__u8 serial[20];		/* VPD 0x80; zero = derived */
	__u8 wwn[8];			/* VPD 0x83 NAA, big endian; 0 = derived */
	__u32 reserved[5];		/* must be zero */
};

struct vps_lun_addr {
	__u32 target;
	__u32 lun;
};

#define VPS_RESET_ADAPTER		0
#define VPS_RESET_BUS			1
#define VPS_RESET_DEVICE		2

struct vps_reset {
	__u32 kind;			/* VPS_RESET_* */
	__u32 target;			/* DEVICE only */
	__u32 lun;			/* DEVICE only */
	__u32 reserved;
};

struct vps_abort {
	__u64 context;
	__u32 target;
	__u32 reserved;
};

struct vps_stats {
	__u64 kicks;			/* eventfd wakeups of the worker */
	__u64 requests;			/* descriptors consumed */
	__u64 completions;		/* completion descriptors posted */
	__u64 calls;			/* call eventfd signals */
	__u64 rw_ios;			/* READ/WRITE submitted to the backing */
	__u64 emulated;			/* commands answered by the target */
	__u64 errors_guest;		/* malformed descriptors */
	__u64 errors_backing;		/* backing I/O errors */
	__u64 aborts;
	__u64 resets;
	__u64 in_flight;		/* now */
	__u64 pinned_pages;		/* now */
	__u64 msgs;			/* message ring entries posted */
	__u64 log_pages;		/* dirty-log bits set (VPS_SET_LOG) */
	__u64 log_errors;		/* bits that could not be set: see below */
	__u64 calls_suppressed;		/* VPS_FEAT_CMP_EVENT_IDX: not wanted */
};

/*
 * Dirty log, for live migration (VPS_SET_LOG).  KVM's dirty tracking does
 * not see what the module writes to guest memory through the VMM's
 * mapping, so while the log is on the module sets, in a bitmap in the
 * VMM's memory, the bit of every guest page it writes: the data of
 * commands that move data to the guest (once the data is there, before
 * their completion is posted), sense data, completion and message ring
 * entries and the rings state page.  Bit N (byte N / 8, bit N % 8, as
 * vhost's log) stands for guest-physical page N of VPS_LOG_PAGE bytes.
 * The bitmap must cover every region of the memory table, now and in
 * later VHOST_SET_MEM_TABLE calls while the log is on (EINVAL if not).
 * The VMM reads and clears bits itself; the module only sets them, with
 * atomic bit operations.  A bit that could not be set (the bitmap was
 * unmapped) counts in vps_stats.log_errors: a VMM must then fail the
 * migration, as a page may have been missed.
 */
#define VPS_LOG_PAGE			0x1000
#define VPS_LOG_ENABLE			(1u << 0)
#define VPS_LOG_FLAGS_ALL		VPS_LOG_ENABLE

struct vps_log {
	__u64 base;			/* bitmap address in the VMM, 8-aligned */
	__u64 size;			/* bitmap bytes */
	__u32 flags;			/* VPS_LOG_*; 0 turns the log off */
	__u32 reserved;			/* must be zero */
};

#define VPS_GET_ABI_VERSION	_IOR(VPS_IOC_TYPE, 0xd0, __u32)
#define VPS_SETUP_RINGS		_IOW(VPS_IOC_TYPE, 0xd1, struct pvscsi_cmd_setup_rings)
#define VPS_SETUP_MSG_RING	_IOW(VPS_IOC_TYPE, 0xd2, struct pvscsi_cmd_setup_msg_ring)
#define VPS_SET_KICK_FD		_IOW(VPS_IOC_TYPE, 0xd3, struct vps_eventfd)
#define VPS_SET_CALL_FD		_IOW(VPS_IOC_TYPE, 0xd4, struct vps_eventfd)
#define VPS_SET_REQ_CALL_THRESHOLD _IOW(VPS_IOC_TYPE, 0xd5, __u32)
#define VPS_ATTACH_LUN		_IOW(VPS_IOC_TYPE, 0xd6, struct vps_lun)
#define VPS_DETACH_LUN		_IOW(VPS_IOC_TYPE, 0xd7, struct vps_lun_addr)
#define VPS_RESET		_IOW(VPS_IOC_TYPE, 0xd8, struct vps_reset)
#define VPS_ABORT		_IOW(VPS_IOC_TYPE, 0xd9, struct vps_abort)
#define VPS_GET_STATS		_IOR(VPS_IOC_TYPE, 0xda, struct vps_stats)
#define VPS_SET_LOG		_IOW(VPS_IOC_TYPE, 0xdb, struct vps_log)
/*
 * Live migration, with VPS_SET_LOG.  VPS_STOP 1 on the source: consume no
 * more requests (doorbells are kept for later), wait for every backing
 * I/O in flight and post its completion; EBUSY when completions still
 * wait for room in the completion ring (the guest reaps none: they would
 * be lost), EINTR when the VMM is killed meanwhile; the adapter stays
 * stopped in both.  VPS_STOP 0 runs it again.  On the destination,
 * VPS_RESUME_RINGS and VPS_RESUME_MSG_RING take the guest's set-up
 * commands again, as VPS_SETUP_RINGS / VPS_SETUP_MSG_RING do, but keep
 * the indices the rings state page (guest memory, migrated with it)
 * holds, and look at the request ring at once for what the guest posted
 * while the source was stopped.
 */
#define VPS_STOP		_IOW(VPS_IOC_TYPE, 0xdc, __u32)
#define VPS_RESUME_RINGS	_IOW(VPS_IOC_TYPE, 0xdd, struct pvscsi_cmd_setup_rings)
#define VPS_RESUME_MSG_RING	_IOW(VPS_IOC_TYPE, 0xde, struct pvscsi_cmd_setup_msg_ring)
/*
 * Extension features the module implements for the VMM's
 * PVSCSI_CMD_EXT_SET_FEATURES (VPS_FEAT_* are the PVSCSI_EXT_FEAT_* bits):
 * VPS_GET_FEATURES says which (a module without them: ENOTTY),
 * VPS_SET_FEATURES turns them on or off for the rings set up (EINVAL: a
 * bit unknown, rings not set up).  VPS_SETUP_RINGS, VPS_RESUME_RINGS and
 * VPS_RESET of the adapter turn them off.
 */
#define VPS_FEAT_CMP_EVENT_IDX		PVSCSI_EXT_FEAT_INTR_MODERATION
#define VPS_FEATURES_ALL		VPS_FEAT_CMP_EVENT_IDX
#define VPS_GET_FEATURES	_IOR(VPS_IOC_TYPE, 0xdf, __u32)
#define VPS_SET_FEATURES	_IOW(VPS_IOC_TYPE, 0xe0, __u32)
/*
 * PVSCSI_EXT_FEAT_MULTIQUEUE: VPS_GET_FEATURES reports VPS_FEAT_MULTIQUEUE
 * when the module serves queues beyond 0 (up to VPS_MAX_QUEUES); it is not
 * for VPS_SET_FEATURES.  VPS_SETUP_QUEUE takes the guest's
 * PVSCSI_CMD_EXT_SETUP_QUEUES as it came (after VPS_SETUP_RINGS; queues in
 * order): EINVAL for a queue out of order or beyond VPS_MAX_QUEUES, bad
 * magic or page counts, no queue 0; EFAULT for pages outside the memory
 * table; EBUSY while that queue has requests in flight.  VPS_RESUME_QUEUE
 * is its migration twin (as VPS_RESUME_RINGS).  VPS_SET_KICK_FD index q
 * is queue q's doorbell, VPS_SET_CALL_FD VPS_EVENT_CMPL_Q(q) its
 * completion interrupt.  VPS_SETUP_RINGS, VPS_RESUME_RINGS and VPS_RESET
 * of the adapter remove every queue but 0 (their eventfds stay).
 */
#define VPS_FEAT_MULTIQUEUE		PVSCSI_EXT_FEAT_MULTIQUEUE
#define VPS_SETUP_QUEUE		_IOW(VPS_IOC_TYPE, 0xe1, struct pvscsi_cmd_ext_setup_queue)
#define VPS_RESUME_QUEUE	_IOW(VPS_IOC_TYPE, 0xe2, struct pvscsi_cmd_ext_setup_queue)

/* ------------------------------------------------------------------ */
/* size checks                                                        */
/* ------------------------------------------------------------------ */
#ifdef __KERNEL__
#include <linux/build_bug.h>
#elif !defined(__cplusplus)
#include <assert.h>
#endif
#define VPS_SIZE_CHECK(t, n) static_assert(sizeof(t) == (n), #t)

VPS_SIZE_CHECK(struct pvscsi_cmd_reset_device, 12);
VPS_SIZE_CHECK(struct pvscsi_cmd_abort, 16);
VPS_SIZE_CHECK(struct pvscsi_cmd_setup_req_call, 4);
VPS_SIZE_CHECK(struct pvscsi_cmd_config, 24);
VPS_SIZE_CHECK(struct pvscsi_config_page_header, 16);
VPS_SIZE_CHECK(struct pvscsi_config_page_controller, 16 + 8 + 448 + 8);
VPS_SIZE_CHECK(struct pvscsi_cmd_setup_rings, 16 + 2 * 8 * 32);
VPS_SIZE_CHECK(struct pvscsi_cmd_setup_msg_ring, 8 + 8 * 16);
VPS_SIZE_CHECK(struct pvscsi_rings_state, 140);
VPS_SIZE_CHECK(struct pvscsi_req_desc, 128);
VPS_SIZE_CHECK(struct vps_log, 24);
VPS_SIZE_CHECK(struct pvscsi_sg_element, 16);
VPS_SIZE_CHECK(struct pvscsi_cmp_desc, 32);
VPS_SIZE_CHECK(struct pvscsi_msg_desc, 128);
VPS_SIZE_CHECK(struct pvscsi_msg_dev_status, 128);
VPS_SIZE_CHECK(struct pvscsi_cmd_ext_query, 8);
VPS_SIZE_CHECK(struct pvscsi_cmd_ext_set_features, 8);
VPS_SIZE_CHECK(struct pvscsi_cmd_ext_setup_queue, 16 + 2 * 8 * 32);
VPS_SIZE_CHECK(struct pvscsi_ext_queue_state, 64);
static_assert(PVSCSI_EXT_QUEUE_STATE_OFFSET(0) >= PVSCSI_EXT_CMP_EVENT_OFFSET + 64 &&
	      PVSCSI_EXT_QUEUE_STATE_OFFSET(PVSCSI_EXT_MAX_QUEUES) <= PVSCSI_PAGE_SIZE,
	      "queue state placement");
static_assert(PVSCSI_EXT_REG_KICK(PVSCSI_EXT_MAX_QUEUES) <= PVSCSI_BAR0_MSIX_TABLE_OFFSET,
	      "doorbells below the MSI-X table");
static_assert(sizeof(struct pvscsi_rings_state) <= PVSCSI_EXT_CMP_EVENT_OFFSET &&
	      PVSCSI_EXT_CMP_EVENT_OFFSET % 64 == 0, "event index placement");
VPS_SIZE_CHECK(struct vps_eventfd, 8);
VPS_SIZE_CHECK(struct vps_lun, 96);
VPS_SIZE_CHECK(struct vps_lun_addr, 8);
VPS_SIZE_CHECK(struct vps_reset, 16);
VPS_SIZE_CHECK(struct vps_abort, 16);
VPS_SIZE_CHECK(struct vps_stats, 128);

#endif /* _UAPI_VHOST_PVSCSI_H */
