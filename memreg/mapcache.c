/* Mappings of a client's file kept past the MR that made them.
 *
 * A program that connects often registers the same small buffer for each connection and
 * deregisters it at the end. Under emulation an mmap and its munmap (which flushes the
 * daemon's TLB on every CPU it ran on) cost several times an munlock and mlock
 * (docs/benchmarks.md), so a released mapping is only unlocked and kept, and the next
 * registration of the same range of the same file takes it back.
 *
 * A kept mapping is MAP_SHARED of the very file pages a new mmap would map, so taking it
 * back is the same as mapping again: it is unlocked while kept (no pin is charged or
 * held), and the registration locks it anew, faulting back in whatever the file lost
 * meanwhile (the client's library punches holes beneath pages that hold nothing). Only
 * small mappings are kept, a few per client, and all are unmapped with the client. */
#include "memreg/memreg_int.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static bool same_range(const struct mr_map *a, const struct mr_map *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->offset == b->offset && a->len == b->len;
}

void *mr_map_take(struct mr_client *client, const struct mr_map *want)
{
	for (unsigned i = 0; i < MR_MAP_KEPT; i++) {
		struct mr_map *kept = &client->kept[i];

		if (kept->addr && same_range(kept, want)) {
			void *addr = kept->addr;

			kept->addr = NULL;
			return addr;
		}
	}
	return NULL;
}

/* The mapping is the MR's own (no other MR shares its pages), so one munlock (a raw
 * system call, as pin.c explains) drops every lock it held. */
void mr_map_release(struct mr_client *client, const struct mr_map *map)
{
	struct mr_map *slot = &client->kept[client->kept_next];

	if (map->len > MR_MAP_KEPT_MAX_BYTES) {
		munmap(map->addr, map->len);
		return;
	}
	(void)syscall(SYS_munlock, map->addr, map->len);
	if (slot->addr)
		munmap(slot->addr, slot->len);
	*slot = *map;
	client->kept_next = (client->kept_next + 1) % MR_MAP_KEPT;
}

void mr_map_forget_all(struct mr_client *client)
{
	for (unsigned i = 0; i < MR_MAP_KEPT; i++) {
		if (client->kept[i].addr)
			munmap(client->kept[i].addr, client->kept[i].len);
		client->kept[i].addr = NULL;
	}
}
