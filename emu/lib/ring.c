/* Mapping the rings the daemon creates. The daemon is trusted, but a bad layout would
 * make us read or write outside the mapping, so the reply's numbers are checked first. */
#include "emu/lib/lib_int.h"

#include <errno.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/stat.h>

/* The daemon hands a client's new queue the memfd of one the client destroyed, of the
 * same kind and size, zeroed (its transport/ring.c). The library keeps its mappings of
 * those within the daemon's bounds (proto.h): a memfd found here again spares an mmap, the
 * munmap at the queue's end and the first touch of each of its pages, which dominate a
 * queue's cost under emulation (docs/benchmarks.md). The memfd itself is the key: a kept
 * mapping holds its file, so no other file can have its inode meanwhile. */
static bool take_parked(struct ring_park *park, dev_t dev, ino_t ino, size_t len,
			struct ring_mapping *m)
{
	for (unsigned i = 0; i < park->n; i++) {
		if (park->slot[i].dev != dev || park->slot[i].ino != ino)
			continue;
		*m = park->slot[i];
		park->slot[i] = park->slot[--park->n];
		if (m->len == len)
			return true;
		ring_unmap(m);   /* the daemon never resizes a memfd: not ours to guess why */
		return false;
	}
	return false;
}

int ring_map(struct rocemu_context *ctx, int fd, uint64_t bytes, struct ring_mapping *m)
{
	struct stat st;
	void *p;

	if (bytes == 0 || bytes > SIZE_MAX)
		return EPROTO;
	if (fstat(fd, &st) != 0)
		return errno;
	/* Touching past the end of the file would raise SIGBUS. */
	if (st.st_size < 0 || (uint64_t)st.st_size < bytes)
		return EPROTO;
	if (take_parked(&ctx->park, st.st_dev, st.st_ino, (size_t)bytes, m))
		return 0;
	p = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return errno;
	*m = (struct ring_mapping){ .addr = p, .len = (size_t)bytes, .dev = st.st_dev,
				    .ino = st.st_ino };
	return 0;
}

void ring_unmap(struct ring_mapping *m)
{
	if (m->addr)
		munmap(m->addr, m->len);
	m->addr = NULL;
}

void ring_unmap_park(struct rocemu_context *ctx, struct ring_mapping *m)
{
	struct ring_park *park = &ctx->park;

	if (m->addr && park->n < PROTO_RING_PARK_SLOTS && m->len <= PROTO_RING_PARK_MAX_BYTES) {
		park->slot[park->n++] = *m;
		m->addr = NULL;
		return;
	}
	ring_unmap(m);
}

void ring_park_empty(struct rocemu_context *ctx)
{
	while (ctx->park.n)
		ring_unmap(&ctx->park.slot[--ctx->park.n]);
}

int ring_place(struct ring *r, void *map, size_t map_len, uint64_t off, uint32_t count,
	       size_t entry_size)
{
	uint64_t room;

	if (count > PROTO_MAX_RING || (count & (count - 1)) != 0 || entry_size == 0 ||
	    entry_size > UINT32_MAX)
		return EPROTO;
	/* Misaligned indices would not be atomic, misaligned entries not portable. */
	if (off % sizeof(uint64_t) != 0 || off > map_len)
		return EPROTO;
	room = map_len - off;
	if (room < sizeof(struct proto_ring_ctl) ||
	    (room - sizeof(struct proto_ring_ctl)) / entry_size < count)
		return EPROTO;
	r->ctl = (struct proto_ring_ctl *)((char *)map + off);
	r->entries = r->ctl + 1;
	r->count = count;
	r->stride = (uint32_t)entry_size;
	return 0;
}
