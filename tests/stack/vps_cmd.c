// SPDX-License-Identifier: GPL-2.0
/*
 * vps_cmd: a hostile guest's PVSCSI command, written straight to an
 * adapter's registers from userspace (tests/stack/test_mq_01).
 *
 *   vps_cmd BAR CMD [DWORD | COUNT*VALUE...]
 *
 * BAR is the adapter's register BAR as a file that maps it (the PCI
 * device's sysfs resource0; a driver's BAR maps only with iomem=relaxed).
 * CMD goes to PVSCSI_REG_COMMAND, each DWORD in turn to
 * PVSCSI_REG_COMMAND_DATA, then PVSCSI_REG_COMMAND_STATUS is read and
 * printed (0x%08X).  COUNT*VALUE stands for COUNT dwords of VALUE (132*0:
 * SETUP_RINGS's data, all zeros), at most a page of them.  busybox devmem
 * did the same a register write per process: 134 processes for one
 * EXT_SETUP_QUEUES, 40 s of the test's nested guest for seven of them.
 * Exit 1 with a message if the BAR cannot be mapped or an argument is
 * not a number (tests/harness/test_vpscmd_01: on a plain file).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vhost_pvscsi.h"

static int parse_u32(const char *s, uint32_t *v)
{
	unsigned long long x;
	char *end;

	errno = 0;
	x = strtoull(s, &end, 0);
	if (errno || end == s || *end || x > UINT32_MAX) {
		fprintf(stderr, "vps_cmd: not a 32-bit number: %s\n", s);
		return -1;
	}
	*v = x;
	return 0;
}

/* "COUNT*VALUE" or "VALUE": how many dwords, and their value */
static int parse_dwords(const char *s, uint32_t *count, uint32_t *v)
{
	char head[32];
	const char *star = strchr(s, '*');

	*count = 1;
	if (!star)
		return parse_u32(s, v);
	if ((size_t)(star - s) >= sizeof(head)) {
		fprintf(stderr, "vps_cmd: not COUNT*VALUE: %s\n", s);
		return -1;
	}
	memcpy(head, s, star - s);
	head[star - s] = '\0';
	if (parse_u32(head, count) || parse_u32(star + 1, v))
		return -1;
	/* a command's data is at most a page of dwords */
	if (*count > PVSCSI_PAGE_SIZE / 4) {
		fprintf(stderr, "vps_cmd: more than %d dwords: %s\n", PVSCSI_PAGE_SIZE / 4, s);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	uint32_t *regs;
	uint32_t cmd, count, v, *data;
	void *map;
	int fd, i, n;

	if (argc < 3) {
		fprintf(stderr, "usage: vps_cmd BAR CMD [DWORD | COUNT*VALUE...]\n");
		return 1;
	}
	if (parse_u32(argv[2], &cmd))
		return 1;
	/* every argument stands for at most a page of dwords: bounded */
	data = calloc((size_t)(argc - 2) * (PVSCSI_PAGE_SIZE / 4), sizeof(*data));
	if (!data) {
		perror("vps_cmd");
		return 1;
	}
	n = 0;
	for (i = 3; i < argc; i++) {
		if (parse_dwords(argv[i], &count, &v))
			return 1;
		while (count--)
			data[n++] = v;
	}
	fd = open(argv[1], O_RDWR | O_SYNC);
	if (fd < 0) {
		fprintf(stderr, "vps_cmd: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	map = mmap(NULL, PVSCSI_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		fprintf(stderr, "vps_cmd: mapping %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	/*
	 * Each access made, once and in this order (the device counts the
	 * data dwords): sequentially consistent atomics, not volatile
	 */
	regs = map;
	__atomic_store_n(&regs[PVSCSI_REG_COMMAND / 4], cmd, __ATOMIC_SEQ_CST);
	for (i = 0; i < n; i++)
		__atomic_store_n(&regs[PVSCSI_REG_COMMAND_DATA / 4], data[i],
				 __ATOMIC_SEQ_CST);
	printf("0x%08X\n",
	       __atomic_load_n(&regs[PVSCSI_REG_COMMAND_STATUS / 4], __ATOMIC_SEQ_CST));
	munmap(map, PVSCSI_PAGE_SIZE);
	close(fd);
	free(data);
	return 0;
}
