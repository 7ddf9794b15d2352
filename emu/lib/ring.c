/* Mapping the rings the daemon creates. The daemon is trusted, but a bad layout would
 * make us read or write outside the mapping, so the reply's numbers are checked first. */
#include "emu/lib/lib_int.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/stat.h>

int ring_map(int fd, uint64_t bytes, void **map)
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
	p = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return errno;
	*map = p;
	return 0;
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
