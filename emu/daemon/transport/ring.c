/* What the client and the daemon share for each queue: a ring in a memfd both map, and a
 * pipe for wakeups (CQs, SRQs and QPs all use both). */

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emu/daemon/transport/transport.h"

/* A doorbell or notification channel: a pipe, so the daemon's end is an open file of its
 * own that no client can make blocking (an eventfd would share its flags with the client).
 * ends[0] reads, ends[1] writes; the daemon's end is made non-blocking. */
int ring_channel_open(int ends[2], int daemon_end)
{
	if (pipe2(ends, O_CLOEXEC) < 0)
		return -errno;
	if (fcntl(ends[daemon_end], F_SETFL, O_NONBLOCK) < 0) {
		close(ends[0]);
		close(ends[1]);
		return -errno;
	}
	return 0;
}

/* A zeroed shared mapping of bytes in a new memfd; *fd receives the memfd. */
void *ring_alloc(const char *name, size_t bytes, int *fd)
{
	void *map;

	/* sealed to its size: a client that could shrink it would make our next access SIGBUS */
	*fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (*fd < 0)
		return NULL;
	if (ftruncate(*fd, (off_t)bytes) < 0 ||
	    fcntl(*fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		goto fail;
	map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	if (map == MAP_FAILED)
		goto fail;
	return map;
fail:
	close(*fd);
	*fd = -1;
	return NULL;
}
