/* The arena: how the daemon writes straight into the application's own buffers.
 *
 * One process-wide memfd, sparse and as large as the address space, in which the file
 * offset of every page equals its virtual address. Registering a buffer puts the current
 * contents of its pages into the arena at those offsets and maps the arena over them with
 * MAP_FIXED: the same addresses show the same bytes, now backed by memory the daemon maps
 * too (REG_MR hands it the fd with fd_offset = addr). One fd serves every MR, and a page
 * two MRs share is one page for the daemon as well.
 *
 * Only pages with contents are copied. A fresh buffer is mostly pages the application
 * never touched, and copying them would make the kernel fault in and copy a gigabyte of
 * zeros. In a private anonymous mapping, a page that /proc/self/pagemap shows neither
 * present nor swapped out has never been populated (or was discarded) and reads as zeros;
 * so does a hole in the arena, which is punched beneath such pages because the arena may
 * still hold an earlier buffer's bytes at those offsets. pagemap rather than mincore():
 * mincore() reports residency, so a swapped-out page would look empty and its bytes would
 * be lost. Only anonymous mappings: in a file mapping a page that is not mapped still has
 * the file's bytes, so every page of any other mapping is copied.
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
 * - Moved pages are MAP_SHARED, which a fork() would share with the child instead of
 *   copying: the child's writes (its malloc's among them, on a heap page next to a buffer)
 *   would land in the parent's memory. So the child, first thing, replaces every arena
 *   mapping it inherited with a private copy, and starts a fresh arena of its own for its
 *   own registrations. A large registered buffer is thus copied at each fork (only the
 *   parts with data), where copy-on-write would copy only what the child touches.
 * - Another thread writing to a buffer while it is being registered may lose that write.
 * - Moved pages are readable and writable whatever their protection was, and a buffer in
 *   a file mapping is detached from its file (it keeps the contents).
 * - Memory whose missing pages a userfaultfd handler supplies registers its untouched
 *   pages as zeros without asking the handler (the move ends its userfaultfd
 *   registration anyway).
 * - The main thread's stack grows only below a mapping the kernel made for it: a buffer
 *   in its lowest pages, once moved, keeps it from growing any deeper. */
#include "emu/lib/lib_int.h"

#include <alloca.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* Above every user address, 5-level paging included (user space ends below 2^56). */
#define ARENA_BYTES (UINT64_C(1) << 57)

/* Entries of /proc/self/pagemap read at once: 16 MiB of address space in 32 KiB. */
#define PAGEMAP_BATCH 4096
/* Set for pages never populated too (it follows the mapping's soft-dirty flag), so it is
 * the one bit that says nothing about whether a page has contents. */
#define PAGEMAP_SOFT_DIRTY (UINT64_C(1) << 55)
/* /proc/self/maps is read a piece at a time and no further than needed: the kernel
 * formats only what a read asks for, and every line is dear under emulation
 * (docs/benchmarks.md), while a registered buffer usually lies in the first mappings (the
 * program's data and heap). The first piece holds a dozen lines, and each next one twice
 * as many up to MAPS_PIECE_MAX, so a buffer far down costs a few more reads. Beside a
 * largest piece the reader's buffer has room for twice MAPS_LINE_MAX, more than the
 * longest line the kernel writes (its path at most PATH_MAX), so a line is never cut. */
#define MAPS_PIECE_FIRST 1024
#define MAPS_PIECE_MAX 16384
#define MAPS_LINE_MAX 4096
/* The most stack the moves use below the frame that starts them, system calls and
 * allocations included; they need a few KiB. */
#define MOVE_STACK_BYTES (64 * 1024)

/* What registration does with a mapping in the range. */
enum vma_kind {
	VMA_IN_ARENA,     /* already moved: leave it, the daemon may be writing into it */
	VMA_ANON_PRIVATE, /* pages never populated read as zeros and need no copy */
	VMA_OTHER,        /* every page is copied */
};

struct vma_piece {
	uintptr_t start, end;
	enum vma_kind kind;
};

/* The mappings that make up a range. */
struct layout {
	struct vma_piece *v;
	size_t n, cap;
};

/* The fields of one line of /proc/self/maps. */
struct maps_line {
	uintptr_t start, end;
	char perms[5];
	uint64_t offset, inode;
	unsigned dev_major, dev_minor;
	const char *name; /* "" for an anonymous mapping without one */
};

/* /proc/self/maps line by line, with no allocation (a forked child reads it while its heap
 * pages are still shared with the parent). */
struct maps_reader {
	int fd;
	off_t off;       /* where the next read starts in the file */
	size_t have, at; /* bytes in buf, and where the next line starts */
	size_t piece;    /* what the next read asks for */
	char buf[MAPS_PIECE_MAX + 2 * MAPS_LINE_MAX + 1];
};

static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t arena_fork_once = PTHREAD_ONCE_INIT;
static int arena_fd = -1;
static dev_t arena_dev;
static ino_t arena_ino;
/* /proc/self/maps, kept open for every registration's look: opening it walks procfs's
 * path, which cost as much as the read under emulation. A read from offset 0 formats the
 * maps anew, so it is never stale. Its identity tells, after a failed look, whether the
 * descriptor is still ours or the program closed it (and the number names another file). */
static int maps_fd = -1;
static dev_t maps_dev;
static ino_t maps_ino;

static void fork_prepare(void)
{
	pthread_mutex_lock(&arena_lock);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&arena_lock);
}

static enum vma_kind vma_kind(const struct maps_line *l);
static int maps_open(struct maps_reader *r);
static int maps_next(struct maps_reader *r, struct maps_line *l);

/* The child's copy of [start, end): only the arena's data extents are read (pread, with no
 * fault on the shared mapping), holes stay untouched zero pages; then the copy takes the
 * mapping's place in one step. False when it could not. */
static bool privatize(uintptr_t start, uintptr_t end)
{
	size_t len = end - start;
	uint8_t *copy = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	off_t at = (off_t)start, data, hole;

	if (copy == MAP_FAILED)
		return false;
	while (at < (off_t)end && (data = lseek(arena_fd, at, SEEK_DATA)) >= 0 && data < (off_t)end) {
		hole = lseek(arena_fd, data, SEEK_HOLE);
		if (hole < 0 || hole > (off_t)end)
			hole = (off_t)end;
		if (pread(arena_fd, copy + (data - (off_t)start), (size_t)(hole - data), data) < 0)
			break;
		at = hole;
	}
	if (mremap(copy, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)start) != MAP_FAILED)
		return true;
	munmap(copy, len);
	return false;
}

/* Up to max arena mappings of this process, read with a buffer on the stack: nothing here
 * may allocate, since malloc would write to the heap pages that are still shared. How many
 * it found; 0 when there are none left (or on any error). */
#define FORK_BATCH 64
static unsigned find_arena_mappings(uintptr_t (*ranges)[2], unsigned max)
{
	struct maps_reader r;
	struct maps_line l;
	unsigned n = 0;

	if (maps_open(&r) != 0)
		return 0;
	while (n < max && maps_next(&r, &l) > 0) {
		if (vma_kind(&l) == VMA_IN_ARENA) {
			ranges[n][0] = l.start;
			ranges[n][1] = l.end;
			n++;
		}
	}
	close(r.fd);
	return n;
}

/* A child registering through the parent's arena would write into the parent's pages, and
 * must not share the pages already there (see the caveats above). */
static void fork_child(void)
{
	uintptr_t ranges[FORK_BATCH][2];
	unsigned n;
	bool progress = true;

	if (arena_fd >= 0) {
		/* each pass changes the mappings under the reader: read them again; a mapping
		 * that cannot be copied (out of memory) stays shared rather than loop forever */
		while (progress && (n = find_arena_mappings(ranges, FORK_BATCH)) > 0) {
			progress = false;
			for (unsigned i = 0; i < n; i++)
				progress |= privatize(ranges[i][0], ranges[i][1]);
		}
		close(arena_fd);
	}
	arena_fd = -1;
	if (maps_fd >= 0)
		close(maps_fd);     /* the parent's maps */
	maps_fd = -1;
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

/* Appends [start, end), merged into the last piece when it continues it. */
static int pieces_add(struct layout *p, uintptr_t start, uintptr_t end, enum vma_kind kind)
{
	struct vma_piece *last = p->n ? &p->v[p->n - 1] : NULL;

	if (last && last->end == start && last->kind == kind) {
		last->end = end;
		return 0;
	}
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 8;
		struct vma_piece *v = realloc(p->v, cap * sizeof(*v));

		if (!v)
			return ENOMEM;
		p->v = v;
		p->cap = cap;
	}
	p->v[p->n++] = (struct vma_piece){ start, end, kind };
	return 0;
}

/* A number in base at *p, which moves past it; false when there is none. */
static bool take_number(const char **p, int base, uint64_t *v)
{
	char *end;

	*v = strtoull(*p, &end, base);
	if (end == *p)
		return false;
	*p = end;
	return true;
}

/* Whether *p is c, then moves past it. */
static bool take_char(const char **p, char c)
{
	if (**p != c)
		return false;
	(*p)++;
	return true;
}

/* "start-end perms offset major:minor inode   name", as fs/proc/task_mmu.c writes it (by
 * hand: sscanf was a tenth of a registration's time under emulation). */
static bool parse_maps_line(const char *line, struct maps_line *l)
{
	uint64_t start, end, major, minor;

	if (!take_number(&line, 16, &start) || !take_char(&line, '-') ||
	    !take_number(&line, 16, &end) || !take_char(&line, ' ') || strnlen(line, 5) < 5 ||
	    line[4] != ' ')
		return false;
	memcpy(l->perms, line, 4);
	l->perms[4] = '\0';
	line += 5;
	if (!take_number(&line, 16, &l->offset) || !take_char(&line, ' ') ||
	    !take_number(&line, 16, &major) || !take_char(&line, ':') ||
	    !take_number(&line, 16, &minor) || !take_char(&line, ' ') ||
	    !take_number(&line, 10, &l->inode))
		return false;
	while (*line == ' ')
		line++;
	l->start = (uintptr_t)start;
	l->end = (uintptr_t)end;
	l->dev_major = (unsigned)major;
	l->dev_minor = (unsigned)minor;
	l->name = line;
	return true;
}

static int maps_open(struct maps_reader *r)
{
	r->fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	r->off = 0;
	r->have = r->at = 0;
	r->piece = MAPS_PIECE_FIRST;
	return r->fd < 0 ? errno : 0;
}

/* The same, through the kept fd. */
static int maps_open_kept(struct maps_reader *r)
{
	struct stat st;
	int err;

	if (maps_fd < 0) {
		err = maps_open(r);
		if (!err && fstat(r->fd, &st) != 0) {
			err = errno;
			close(r->fd);
		}
		if (err)
			return err;
		maps_fd = r->fd;
		maps_dev = st.st_dev;
		maps_ino = st.st_ino;
	}
	r->fd = maps_fd;
	r->off = 0;
	r->have = r->at = 0;
	r->piece = MAPS_PIECE_FIRST;
	return 0;
}

/* The next line: 1, 0 at the end, or -errno. A line that does not parse is skipped. */
static int maps_next(struct maps_reader *r, struct maps_line *l)
{
	for (;;) {
		char *line = r->buf + r->at, *nl = memchr(line, '\n', r->have - r->at);
		ssize_t got;

		if (nl) {
			*nl = '\0';
			r->at = (size_t)(nl + 1 - r->buf);
			if (parse_maps_line(line, l))
				return 1;
			continue;
		}
		r->have -= r->at;
		memmove(r->buf, line, r->have);
		r->at = 0;
		if (r->have > sizeof(r->buf) - 1 - MAPS_PIECE_MAX)
			return -EIO; /* longer than the kernel writes: not the maps */
		got = pread(r->fd, r->buf + r->have, r->piece, r->off);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return got < 0 ? -errno : 0;
		r->off += got;
		r->have += (size_t)got;
		if (r->piece < MAPS_PIECE_MAX)
			r->piece *= 2;
	}
}

/* The names the kernel gives private anonymous memory: none, the heap, a stack, or one
 * set with PR_SET_VMA_ANON_NAME. [vdso] and the like also have no inode but are not. */
static bool anonymous_name(const char *name)
{
	return !*name || strcmp(name, "[heap]") == 0 || strncmp(name, "[stack", 6) == 0 ||
	       strncmp(name, "[anon:", 6) == 0;
}

/* Unreadable memory counts as VMA_OTHER, so copying it fails as it always did. */
static enum vma_kind vma_kind(const struct maps_line *l)
{
	if (l->dev_major == major(arena_dev) && l->dev_minor == minor(arena_dev) &&
	    l->inode == arena_ino && l->offset == l->start)
		return VMA_IN_ARENA;
	if (l->dev_major == 0 && l->dev_minor == 0 && l->inode == 0 && l->perms[0] == 'r' &&
	    l->perms[3] == 'p' && anonymous_name(l->name))
		return VMA_ANON_PRIVATE;
	return VMA_OTHER;
}

/* The mappings that make up [start, end), in address order and clipped to it, read
 * through r (opened); EFAULT when part of the range is not mapped. */
static int layout_from(struct maps_reader *r, uintptr_t start, uintptr_t end,
		       struct layout *out)
{
	struct maps_line l;
	uintptr_t covered = start;
	int err = 0, got = 0;

	out->n = 0;
	while (!err && covered < end && (got = maps_next(r, &l)) > 0) {
		uintptr_t piece_end;

		if (l.end <= covered)
			continue;
		if (l.start > covered)
			break;
		piece_end = l.end < end ? l.end : end;
		err = pieces_add(out, covered, piece_end, vma_kind(&l));
		covered = piece_end;
	}
	if (!err && got < 0)
		err = -got;
	return err ? err : covered < end ? EFAULT : 0;
}

static bool maps_fd_ours(void)
{
	struct stat st;

	return fstat(maps_fd, &st) == 0 && st.st_dev == maps_dev && st.st_ino == maps_ino;
}

/* The layout of [start, end), before anything moved, read through the kept fd. A look
 * that fails otherwise than on a range not mapped, or through a descriptor that is no
 * longer ours, is made again through a new one; one that is not ours is forgotten, not
 * closed. */
static int read_layout(uintptr_t start, uintptr_t end, struct layout *out)
{
	struct maps_reader *r = malloc(sizeof(*r));
	int err = r ? maps_open_kept(r) : ENOMEM;

	if (!err)
		err = layout_from(r, start, end, out);
	if (err && err != ENOMEM && maps_fd >= 0) {
		bool ours = maps_fd_ours();

		if (!ours || err != EFAULT) {
			if (ours)
				close(maps_fd);
			maps_fd = -1;
			err = maps_open_kept(r);
			if (!err)
				err = layout_from(r, start, end, out);
		}
	}
	free(r);
	return err;
}

/* Whole pages are copied, bytes the application never allocated included (malloc's
 * headers, a sanitizer's redzones): the raw system call keeps a sanitizer's pwrite()
 * interceptor from taking that for an overflow. */
static int copy_to_arena(uintptr_t start, uintptr_t end)
{
	for (uintptr_t at = start; at < end;) {
		ssize_t n = syscall(SYS_pwrite64, arena_fd, (void *)at, end - at, (off_t)at);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? errno : EIO;
		at += (uintptr_t)n;
	}
	return 0;
}

static int punch_arena(uintptr_t start, uintptr_t end)
{
	if (fallocate(arena_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)start,
		      (off_t)(end - start)) != 0)
		return errno;
	return 0;
}

static int read_pagemap(int pagemap_fd, uintptr_t at, uint64_t *entries, size_t n)
{
	size_t want = n * sizeof(*entries), got = 0;
	off_t where = (off_t)(at / (uintptr_t)sysconf(_SC_PAGESIZE) * sizeof(*entries));

	while (got < want) {
		ssize_t r = pread(pagemap_fd, (char *)entries + got, want - got,
				  where + (off_t)got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? errno : EIO;
		got += (size_t)r;
	}
	return 0;
}

/* Copies the runs of pages of [start, end) that have ever been populated (present or
 * swapped out); what pagemap shows with no bit but soft-dirty is a page never populated.
 * entries holds PAGEMAP_BATCH of pagemap's: it comes from the caller, because a malloc or
 * free here could change a heap page (malloc's top chunk) after it was copied. */
static int copy_populated(int pagemap_fd, uint64_t *entries, uintptr_t start, uintptr_t end)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), at = start, run_start = start;
	bool in_run = false;
	int err = 0;

	while (!err && at < end) {
		size_t n = (end - at) / page < PAGEMAP_BATCH ? (end - at) / page : PAGEMAP_BATCH;

		err = read_pagemap(pagemap_fd, at, entries, n);
		for (size_t i = 0; !err && i < n; i++, at += page) {
			bool populated = (entries[i] & ~PAGEMAP_SOFT_DIRTY) != 0;

			if (populated && !in_run)
				run_start = at;
			else if (!populated && in_run)
				err = copy_to_arena(run_start, at);
			in_run = populated;
		}
	}
	if (!err && in_run)
		err = copy_to_arena(run_start, end);
	return err;
}

/* Puts the piece's contents into the arena, then maps the arena over it. Without pagemap
 * (a /proc that hides it) anonymous memory is copied whole, like any other. */
static int move_piece(const struct vma_piece *p, int pagemap_fd, uint64_t *entries)
{
	int err;

	if (p->kind == VMA_ANON_PRIVATE && pagemap_fd >= 0) {
		err = punch_arena(p->start, p->end);
		if (!err)
			err = copy_populated(pagemap_fd, entries, p->start, p->end);
	} else {
		err = copy_to_arena(p->start, p->end);
	}
	if (err)
		return err;
	if (mmap((void *)p->start, p->end - p->start, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED, arena_fd, (off_t)p->start) == MAP_FAILED)
		return errno;
	return 0;
}

static int move_pieces(const struct layout *layout, int pagemap_fd, uint64_t *entries)
{
	int err = 0;

	for (size_t i = 0; !err && i < layout->n; i++) {
		if (layout->v[i].kind != VMA_IN_ARENA)
			err = move_piece(&layout->v[i], pagemap_fd, entries);
	}
	return err;
}

/* A page must not change between being copied and being mapped over, or the change is
 * undone. A buffer on the caller's own stack can share its first page with the frames of
 * this very call, which do change (locals, return addresses): so when the range reaches
 * the stack below this frame, the moves run with the stack pointer first taken below the
 * range, where every frame they push stays outside it, while the frames above wait
 * unchanged. A buffer in a live frame starts less than a page below this one; a range
 * reaching further down holds the free stack the moves themselves run on, and is refused. */
static int __attribute__((noinline)) move_pieces_clear_of_stack(const struct layout *layout,
								int pagemap_fd, uint64_t *entries,
								uintptr_t start, uintptr_t end)
{
	uintptr_t frame = (uintptr_t)__builtin_frame_address(0);
	size_t drop = 0;
	void *gap;
	int err;

	if (start < frame && end > frame - MOVE_STACK_BYTES) {
		if (frame - start > MOVE_STACK_BYTES)
			return EINVAL;
		drop = frame - start;
	}
	gap = alloca(drop);
	/* Uses gap after the call, so that the call cannot become a jump that frees it. */
	__asm__ volatile("" : : "r"(gap) : "memory");
	err = move_pieces(layout, pagemap_fd, entries);
	__asm__ volatile("" : : "r"(gap) : "memory");
	return err;
}

static bool needs_pagemap(const struct layout *layout)
{
	for (size_t i = 0; i < layout->n; i++)
		if (layout->v[i].kind == VMA_ANON_PRIVATE)
			return true;
	return false;
}

/* Everything the moves need is allocated before the first page is copied and freed after
 * the last is mapped: the span may hold heap pages whose malloc state must not change in
 * between. A span already in the arena (a buffer registered again) needs nothing more
 * than the look at the maps. */
static int adopt_span(uintptr_t start, uintptr_t end)
{
	struct layout layout = { 0 };
	uint64_t *entries = NULL;
	int err = read_layout(start, end, &layout), pagemap_fd = -1;

	if (!err && needs_pagemap(&layout)) {
		entries = malloc(PAGEMAP_BATCH * sizeof(*entries));
		err = entries ? 0 : ENOMEM;
		pagemap_fd = err ? -1 : open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	}
	if (!err)
		err = move_pieces_clear_of_stack(&layout, pagemap_fd, entries, start, end);
	if (pagemap_fd >= 0)
		close(pagemap_fd);
	free(layout.v);
	free(entries);
	return err;
}

int arena_adopt(void *addr, size_t len, int *fd, uint64_t *ino)
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
	if (ino)
		*ino = arena_ino;
	pthread_mutex_unlock(&arena_lock);
	return err;
}
