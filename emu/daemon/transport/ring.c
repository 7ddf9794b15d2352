/* What the client and the daemon share for each queue: a ring in a memfd both map, and a
 * pipe for wakeups (CQs, SRQs and QPs all use both).
 *
 * A destroyed queue leaves its memfd, mapping and pipe to its owner's next queue of the
 * same kind and size, zeroed and drained, for as long as the owner lives (up to
 * PROTO_RING_PARK_SLOTS of them, each at most PROTO_RING_PARK_MAX_BYTES). A client that
 * makes and destroys queues in turn (every RDMA CM connection makes two CQs and a QP and
 * destroys them) then costs the daemon no memfd_create, ftruncate, seals, mmap, munmap or
 * pipe2 each time: nearly a third of the system calls a connection cost both daemons, and
 * in an emulated guest 0.2 to 0.3 ms an object (docs/benchmarks.md). The client gets the
 * same memfd and pipe end again; its library kept its mapping of that memfd too
 * (emu/lib/ring.c) and closes the descriptors as it did. The price: a live queue keeps
 * its memfd open in the daemon, three descriptors a queue instead of two. */

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emu/daemon/transport/transport.h"

/* A doorbell or notification channel: a pipe, so the daemon's end is an open file of its
 * own that no client can make blocking (an eventfd would share its flags with the client).
 * ends[0] reads, ends[1] writes; both are non-blocking: the daemon never waits on its end,
 * and a client's doorbell to a full pipe returns EAGAIN (a wakeup is pending anyway)
 * rather than stopping its post. */
int ring_channel_open(int ends[2])
{
	return pipe2(ends, O_CLOEXEC | O_NONBLOCK) < 0 ? -errno : 0;
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

static void ring_mem_free(struct ring_mem *m)
{
	munmap(m->map, m->bytes);
	close(m->memfd);
	close(m->ends[0]);
	close(m->ends[1]);
}

/* What a client left in the pipe's read end (the daemon holds both ends): a parked CQ's
 * unread wakeups would wake the next CQ's sleeper for nothing. FIONREAD first: the read
 * end's flags are the client's to change. */
static void drain(int fd)
{
	char buf[256];
	int left = 0;

	if (ioctl(fd, FIONREAD, &left) < 0)
		return;
	while (left > 0) {
		ssize_t n = read(fd, buf, (size_t)left < sizeof(buf) ? (size_t)left : sizeof(buf));

		if (n <= 0)
			return;
		left -= (int)n;
	}
}

static bool take_parked(struct ring_park *park, enum ring_kind kind, size_t bytes,
			struct ring_mem *m)
{
	for (unsigned i = 0; i < park->n; i++) {
		if (park->slot[i].kind != kind || park->slot[i].mem.bytes != bytes)
			continue;
		*m = park->slot[i].mem;
		park->slot[i] = park->slot[--park->n];
		memset(m->map, 0, bytes);
		drain(m->ends[0]);
		return true;
	}
	return false;
}

int ring_take(struct owner *o, enum ring_kind kind, size_t bytes, struct ring_mem *m)
{
	static const char *const names[] = { [RING_CQ] = "rocemu-cq", [RING_SRQ] = "rocemu-srq",
					     [RING_QP] = "rocemu-qp" };
	int err;

	if (take_parked(&o->park, kind, bytes, m)) {
		o->dev->cnt.rings_reused++;
		return 0;
	}
	m->bytes = bytes;
	m->map = ring_alloc(names[kind], bytes, &m->memfd);
	if (!m->map)
		return -errno;
	err = ring_channel_open(m->ends);
	if (err) {
		munmap(m->map, bytes);
		close(m->memfd);
	}
	return err;
}

void ring_give(struct owner *o, enum ring_kind kind, struct ring_mem *m)
{
	struct ring_park *park = &o->park;

	if (park->n == PROTO_RING_PARK_SLOTS || m->bytes > PROTO_RING_PARK_MAX_BYTES) {
		ring_mem_free(m);
		return;
	}
	park->slot[park->n++] = (struct parked_ring){ .kind = kind, .mem = *m };
}

void ring_park_empty(struct owner *o)
{
	while (o->park.n)
		ring_mem_free(&o->park.slot[--o->park.n].mem);
}
