/* fork and registered memory.
 *
 * Registration moves a buffer's pages onto memory shared with the daemon (MAP_SHARED), so a
 * fork never takes them away from the daemon by copy-on-write: what ibv_fork_init exists
 * for is not needed here (IBV_FORK_UNNEEDED). A child would share those pages with its
 * parent instead of copying them; after ibv_fork_init they are kept out of children
 * (MADV_DONTFORK) while registered, as programs that call it expect, and given back to
 * children (MADV_DOFORK) once no MR covers them, as libibverbs does: the heap reuses them. */
#include "emu/verbs/verbs_int.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

struct range {
	uintptr_t start, end;           /* page-aligned */
};

static pthread_mutex_t fork_lock = PTHREAD_MUTEX_INITIALIZER;
static bool fork_init_called;
static struct range *ranges;    /* one per MR registered since ibv_fork_init */
static size_t nranges, ranges_cap;

static struct range page_range(const void *addr, size_t length)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);

	return (struct range){ (uintptr_t)addr & ~(page - 1),
			       ((uintptr_t)addr + length + page - 1) & ~(page - 1) };
}

void rv_fork_track(const void *addr, size_t length)
{
	struct range r = page_range(addr, length);

	pthread_mutex_lock(&fork_lock);
	if (fork_init_called && nranges == ranges_cap) {
		size_t cap = ranges_cap ? 2 * ranges_cap : 16;
		struct range *grown = realloc(ranges, cap * sizeof(*grown));

		if (grown) {
			ranges = grown;
			ranges_cap = cap;
		}
	}
	if (fork_init_called && nranges < ranges_cap) {
		ranges[nranges++] = r;
		madvise((void *)r.start, r.end - r.start, MADV_DONTFORK);
	}
	pthread_mutex_unlock(&fork_lock);
}

/* Where the next stretch of [at, end) that no tracked range covers begins (end if none),
 * and in *gap_end where it stops. */
static uintptr_t next_gap(uintptr_t at, uintptr_t end, uintptr_t *gap_end)
{
	bool moved = true;

	while (moved && at < end) {
		moved = false;
		for (size_t i = 0; i < nranges; i++)
			if (ranges[i].start <= at && at < ranges[i].end) {
				at = ranges[i].end;
				moved = true;
			}
	}
	*gap_end = end;
	for (size_t i = 0; i < nranges; i++)
		if (ranges[i].start > at && ranges[i].start < *gap_end)
			*gap_end = ranges[i].start;
	return at < end ? at : end;
}

void rv_fork_untrack(const void *addr, size_t length)
{
	struct range r = page_range(addr, length);
	uintptr_t at, gap_end;

	pthread_mutex_lock(&fork_lock);
	for (size_t i = 0; i < nranges; i++) {
		if (ranges[i].start != r.start || ranges[i].end != r.end)
			continue;
		ranges[i] = ranges[--nranges];
		for (at = next_gap(r.start, r.end, &gap_end); at < r.end;
		     at = next_gap(gap_end, r.end, &gap_end))
			madvise((void *)at, gap_end - at, MADV_DOFORK);
		break;
	}
	pthread_mutex_unlock(&fork_lock);
}

int ibv_fork_init(void)
{
	pthread_mutex_lock(&fork_lock);
	fork_init_called = true;
	pthread_mutex_unlock(&fork_lock);
	return 0;
}

enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_UNNEEDED;
}

/* Exported by libibverbs, declared only in its private driver.h. */
int ibv_dontfork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size);

int ibv_dontfork_range(void *base, size_t size)
{
	return madvise(base, size, MADV_DONTFORK) ? errno : 0;
}

int ibv_dofork_range(void *base, size_t size)
{
	return madvise(base, size, MADV_DOFORK) ? errno : 0;
}
