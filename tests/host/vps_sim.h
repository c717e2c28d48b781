/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the guest simulators (vps_test, vps_fuzz) share of the VMM's side:
 * an adapter's eventfds, its queues' too.  Each program keeps its own
 * guest memory layout.
 */
#ifndef VPS_SIM_H
#define VPS_SIM_H

#include <stdio.h>
#include <stdlib.h>
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

#endif /* VPS_SIM_H */
