/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the guest simulators (vps_test, vps_fuzz) share of the VMM's side:
 * an adapter's eventfds, its queues' too.  Each program keeps its own
 * guest memory layout.
 */
#ifndef VPS_SIM_H
#define VPS_SIM_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>

#include "vhost_pvscsi.h"

static inline void vps_sim_die(const char *what)
{
	perror(what);
	exit(2);
}

/* non-blocking kick, completion-call and message-call eventfds, handed over */
static inline void vps_sim_eventfds(int vfd, int *kick, int *call, int *msg)
{
	struct vps_eventfd e;

	*kick = eventfd(0, EFD_NONBLOCK);
	*call = eventfd(0, EFD_NONBLOCK);
	*msg = eventfd(0, EFD_NONBLOCK);
	if (*kick < 0 || *call < 0 || *msg < 0)
		vps_sim_die("eventfd");
	e = (struct vps_eventfd){ 0, *kick };
	if (ioctl(vfd, VPS_SET_KICK_FD, &e))
		vps_sim_die("SET_KICK_FD");
	e = (struct vps_eventfd){ VPS_EVENT_CMPL, *call };
	if (ioctl(vfd, VPS_SET_CALL_FD, &e))
		vps_sim_die("SET_CALL_FD");
	e = (struct vps_eventfd){ VPS_EVENT_MSG, *msg };
	if (ioctl(vfd, VPS_SET_CALL_FD, &e))
		vps_sim_die("SET_CALL_FD msg");
}

/* queue q's (1..) doorbell and completion-call eventfds, handed over */
static inline void vps_sim_queue_eventfds(int vfd, uint32_t q, int *kick, int *call)
{
	struct vps_eventfd e;

	*kick = eventfd(0, EFD_NONBLOCK);
	*call = eventfd(0, EFD_NONBLOCK);
	if (*kick < 0 || *call < 0)
		vps_sim_die("eventfd");
	e = (struct vps_eventfd){ q, *kick };
	if (ioctl(vfd, VPS_SET_KICK_FD, &e))
		vps_sim_die("SET_KICK_FD queue");
	e = (struct vps_eventfd){ VPS_EVENT_CMPL_Q(q), *call };
	if (ioctl(vfd, VPS_SET_CALL_FD, &e))
		vps_sim_die("SET_CALL_FD queue");
}

/* a disk's (or file's) size in 512-byte blocks */
static inline uint64_t vps_sim_blocks(const char *path)
{
	int fd = open(path, O_RDONLY);
	off_t end;

	if (fd < 0)
		vps_sim_die(path);
	end = lseek(fd, 0, SEEK_END);
	close(fd);
	return end / 512;
}

#define VPS_SIM_GAUGES	"/sys/kernel/debug/vhost_pvscsi/gauges"

/*
 * The module's gauges into @buf, on one line ("open_devices 0
 * requests_in_flight 0 luns 0 ", for a test's output); 0, and why in
 * @buf, when they cannot be read
 */
static inline int vps_sim_gauges(char *buf, size_t len)
{
	FILE *f = fopen(VPS_SIM_GAUGES, "r");
	size_t n;
	char *c;

	if (!f) {
		snprintf(buf, len, "%s: %s", VPS_SIM_GAUGES, strerror(errno));
		return 0;
	}
	n = fread(buf, 1, len - 1, f);
	buf[n] = 0;
	fclose(f);
	for (c = buf; *c; c++)
		if (*c == '\n')
			*c = ' ';
	return 1;
}

/*
 * Up to @ms for the module to let every adapter go (no adapter open, no
 * request in flight, no LUN): a close does not wait for backing I/O in
 * flight, the release finishes when it completes.  1 when it did; the
 * gauges last read in @buf.
 */
static inline int vps_sim_gauges_zero_within(char *buf, size_t len, int ms)
{
	int i;

	for (i = 0; i <= ms / 10; i++) {
		if (i)
			usleep(10000);
		if (vps_sim_gauges(buf, len) &&
		    !strcmp(buf, "open_devices 0 requests_in_flight 0 luns 0 "))
			return 1;
	}
	return 0;
}

#endif /* VPS_SIM_H */
