/* The arena: how the daemon writes straight into the application's own buffers.
 *
 * One process-wide memfd, sparse and as large as the address space, in which the file
 * offset of every page equals its virtual address. Registering a buffer copies the current
 * contents of its pages into the arena at those offsets and maps the arena over them with
 * MAP_FIXED: the same addresses show the same bytes, now backed by memory the daemon maps
 * too (REG_MR hands it the fd with fd_offset = addr). One fd serves every MR, and a page
 * two MRs share is one page for the daemon as well.
 *
 * Whether a page is already in the arena is read from /proc/self/maps (mapped from the
 * arena's inode at offset == address), not remembered: a list of moved ranges goes stale
 * when the application unmaps a buffer (free() of a large malloc) and later gets new memory
 * at the same address, which would then never be moved and never reach the daemon. Moving
 * a page that is already there again would race with the daemon writing into it.
 *
 * Caveats, by design:
 * - Pages stay in the arena after deregistration: they remain the application's memory,
 *   now memfd-backed, and are freed with the process. Arena pages of memory the
 *   application unmaps stay allocated in the memfd until the process exits, or until a
 *   buffer at the same address is registered and reuses them.
 * - Moved pages become MAP_SHARED: a child made by fork() shares them with its parent
 *   instead of getting a copy. The child starts a fresh arena of its own for its own
 *   registrations (which copy, and so detach, any inherited arena pages they cover).
 * - Another thread writing to a buffer while it is being registered may lose that write.
 * - Moved pages are readable and writable whatever their protection was, and a buffer in
 *   a file mapping is detached from its file (it keeps the contents). */
#include "emu/lib/lib_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* Above every user address, 5-level paging included (user space ends below 2^56). */
#define ARENA_BYTES (UINT64_C(1) << 57)

struct span {
	uintptr_t start, end;
};

struct spans {
	struct span *v;
	size_t n, cap;
};

static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t arena_fork_once = PTHREAD_ONCE_INIT;
static int arena_fd = -1;
static dev_t arena_dev;
static ino_t arena_ino;

static void fork_prepare(void)
{
	pthread_mutex_lock(&arena_lock);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&arena_lock);
}

/* A child registering through the parent's arena would write into the parent's pages. */
static void fork_child(void)
{
	if (arena_fd >= 0)
		close(arena_fd);
	arena_fd = -1;
	pthread_mutex_unlock(&arena_lock);
}

static void register_fork_handlers(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* F_SEAL_SHRINK because the daemon refuses an fd without it: a shrink would SIGBUS it. */
static int arena_open(void)
{
	struct stat st;
	int fd, err;

	if (arena_fd >= 0)
		return 0;
	fd = memfd_create("rocemu-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return errno;
	if (ftruncate(fd, (off_t)ARENA_BYTES) != 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0 || fstat(fd, &st) != 0) {
		err = errno;
		close(fd);
		return err;
	}
	pthread_once(&arena_fork_once, register_fork_handlers);
	arena_fd = fd;
	arena_dev = st.st_dev;
	arena_ino = st.st_ino;
	return 0;
}

static int spans_add(struct spans *s, uintptr_t start, uintptr_t end)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 8;
		struct span *v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = (struct span){ start, end };
	return 0;
}

/* One line of /proc/self/maps: is it [ms, me) of the arena with offset == address? */
static bool parse_arena_line(const char *line, uintptr_t *ms, uintptr_t *me)
{
	uint64_t offset, inode;
	unsigned maj, min;

	if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %*s %" SCNx64 " %x:%x %" SCNu64, ms, me,
		   &offset, &maj, &min, &inode) != 6)
		return false;
	return maj == major(arena_dev) && min == minor(arena_dev) && inode == arena_ino &&
	       offset == *ms;
}

/* The parts of [start, end) already in the arena, in address order. */
static int arena_spans(uintptr_t start, uintptr_t end, struct spans *out)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char *line = NULL;
	size_t cap = 0;
	int err = 0;

	if (!f)
		return errno;
	while (!err && getline(&line, &cap, f) > 0) {
		uintptr_t ms, me;

		if (!parse_arena_line(line, &ms, &me) || me <= start)
			continue;
		if (ms >= end)
			break;
		err = spans_add(out, ms > start ? ms : start, me < end ? me : end);
	}
	free(line);
	fclose(f);
	return err;
}

/* Whole pages are copied, bytes the application never allocated included (malloc's
 * headers, a sanitizer's redzones): the raw system call keeps a sanitizer's pwrite()
 * interceptor from taking that for an overflow. */
static ssize_t copy_to_arena(uintptr_t at, size_t len)
{
	return syscall(SYS_pwrite64, arena_fd, (void *)at, len, (off_t)at);
}

/* Copies the pages' contents into the arena, then maps the arena over them. */
static int move_run(uintptr_t start, uintptr_t end)
{
	for (uintptr_t at = start; at < end;) {
		ssize_t n = copy_to_arena(at, end - at);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? errno : EIO;
		at += (uintptr_t)n;
	}
	if (mmap((void *)start, end - start, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		 arena_fd, (off_t)start) == MAP_FAILED)
		return errno;
	return 0;
}

static int adopt_span(uintptr_t start, uintptr_t end)
{
	struct spans in_arena = { 0 };
	uintptr_t cursor = start;
	int err = arena_spans(start, end, &in_arena);

	for (size_t i = 0; !err && i < in_arena.n; i++) {
		if (in_arena.v[i].start > cursor)
			err = move_run(cursor, in_arena.v[i].start);
		cursor = in_arena.v[i].end;
	}
	if (!err && cursor < end)
		err = move_run(cursor, end);
	free(in_arena.v);
	return err;
}

int arena_adopt(void *addr, size_t len, int *fd)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t first = (uintptr_t)addr, start, end;
	int err;

	if (len == 0 || first > UINTPTR_MAX - len || first + len > UINTPTR_MAX - (page - 1))
		return EINVAL;
	start = first & ~(page - 1);
	end = (first + len + page - 1) & ~(page - 1);
	if (end > ARENA_BYTES)
		return EINVAL;
	pthread_mutex_lock(&arena_lock);
	err = arena_open();
	if (!err)
		err = adopt_span(start, end);
	*fd = arena_fd;
	pthread_mutex_unlock(&arena_lock);
	return err;
}
