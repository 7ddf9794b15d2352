/* The kernel's places for RDMA devices, /sys/class/infiniband, /sys/class/infiniband_verbs,
 * their /sys/devices/virtual directories and /dev/infiniband, as this process alone sees
 * them: libc's calls that look a path up are answered here first, and a path under one of
 * those is looked up in the process's tree (sysfs.c) instead. Every other path goes to libc
 * as it came, after one compare of its first bytes. Nothing outside the process changes.
 *
 * The calls: open, open64, openat, openat64 and their _2 fortified forms, fopen, fopen64,
 * stat, lstat, fstatat (and 64), the __xstat family of older binaries, statx, access,
 * faccessat, euidaccess, eaccess, opendir, scandir, readlink, readlinkat (and their _chk
 * forms), realpath (and __realpath_chk), canonicalize_file_name, chdir, getcwd and the
 * xattr lookups. Each is exported under the version node libc gives it (the map file), so
 * that programs' versioned references bind here; the real one is found with
 * dlsym(RTLD_NEXT).
 *
 * What the tree holds is read as the kernel's: its files cannot be opened for writing
 * (EACCES); the names it resolves to are given back as the kernel's paths (realpath of
 * /sys/class/infiniband/rocemu0 is /sys/devices/virtual/infiniband/rocemu0); the empty
 * file standing for /dev/infiniband/uverbsN is a character device (231, 192 + N), mode
 * 0666, to the stat calls, and opening it opens /dev/null (the device's commands travel
 * over the daemon's socket). A path relative to a directory of the tree (a program that
 * opened one, or moved into one) is seen for what it stands for, so that its files follow
 * the daemon too. */
#undef _FORTIFY_SOURCE
#include "emu/verbs/verbs_int.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#define UVERBS_MAJOR 231
#define UVERBS_MINOR_BASE 192
#define DEVNODE_PREFIX "/dev/infiniband/uverbs"

/* The calls of older binaries and the fortified forms: libc has them, no header does. */
int __xstat(int ver, const char *path, struct stat *st);
int __xstat64(int ver, const char *path, struct stat64 *st);
int __lxstat(int ver, const char *path, struct stat *st);
int __lxstat64(int ver, const char *path, struct stat64 *st);
int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags);
int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags);
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);
char *__realpath_chk(const char *path, char *resolved, size_t resolvedlen);
ssize_t __readlink_chk(const char *path, char *buf, size_t len, size_t buflen);
ssize_t __readlinkat_chk(int dirfd, const char *path, char *buf, size_t len, size_t buflen);

/* ---- the real calls ---- */

static void *real_sym(void **slot, const char *name)
{
	void *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);

	if (!p) {
		p = dlsym(RTLD_NEXT, name);
		__atomic_store_n(slot, p, __ATOMIC_RELEASE);
	}
	return p;
}

/* REAL(open) is libc's open, or NULL (and errno ENOSYS) when it has none. */
#define REAL(fn) ({                                                                     \
	static void *slot_;                                                             \
	__typeof__(&fn) f_ = (__typeof__(&fn))real_sym(&slot_, #fn);                    \
	if (!f_)                                                                        \
		errno = ENOSYS;                                                         \
	f_; })

/* ---- which paths ---- */

static bool under(const char *path, const char *prefix, size_t n)
{
	return strncmp(path, prefix, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

#define UNDER(path, prefix) under(path, prefix, sizeof(prefix) - 1)

/* Whether an absolute path is one of ours: one compare for any other. */
static bool served(const char *path)
{
	if (!path || path[0] != '/')
		return false;
	if (path[1] == 's' && strncmp(path, "/sys/", 5) == 0)
		return UNDER(path, "/sys/class/infiniband") ||
		       UNDER(path, "/sys/class/infiniband_verbs") ||
		       UNDER(path, "/sys/devices/virtual/infiniband") ||
		       UNDER(path, "/sys/devices/virtual/infiniband_verbs");
	return path[1] == 'd' && UNDER(path, "/dev/infiniband");
}

/* Set once the program holds a directory of the tree (or its working directory is one):
 * from then on relative paths are looked at too. */
static bool relative_watch;

/* A lookup: what to hand libc, the kernel's path it stands for, and what making it in the
 * tree said. Its buffer is allocated for the paths of ours only: any other path costs a
 * compare, and no stack (the calls may run on a thread's or a signal handler's small one). */
struct lookup {
	const char *path;               /* for libc */
	const char *served;             /* the kernel's path it stands for; NULL when none */
	char *buf;                      /* malloc'd, PATH_MAX: the tree's path, or served */
	bool ours;                      /* path is the tree's entry (absolute) */
	int absent;                     /* ENOENT or ENOTDIR: not there, the call fails so */
	int err;                        /* opening to read: the kernel file's errno */
};

static void lookup_done(struct lookup *l)
{
	int saved = errno;

	free(l->buf);
	errno = saved;
}

/* Every call's lookup, freed when the call returns. */
#define LOOKUP(l) struct lookup l __attribute__((cleanup(lookup_done))) = { .path = NULL }

/* The directory of the tree under which dir lies, as the kernel's path; NULL if none. */
static const char *unmap(const char *dir)
{
	size_t len;
	const char *root = rv_sysfs_root(&len);

	if (!root || !root[0] || strncmp(dir, root, len) != 0 ||
	    (dir[len] != '/' && dir[len] != '\0'))
		return NULL;
	return dir[len] ? dir + len : "/";
}

/* The kernel's path a relative path stands for, into out (PATH_MAX), when its directory
 * is in the tree; false when it is not. */
static bool resolve_relative(int dirfd, const char *path, char *out)
{
	char dir[PATH_MAX], link[32];
	const char *kdir;
	ssize_t n;

	if (dirfd == AT_FDCWD) {
		if (!REAL(getcwd) || !REAL(getcwd)(dir, sizeof(dir)))
			return false;
	} else {
		snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
		n = REAL(readlink) ? REAL(readlink)(link, dir, sizeof(dir) - 1) : -1;
		if (n <= 0)
			return false;
		dir[n] = '\0';
	}
	kdir = unmap(dir);
	return kdir && (size_t)snprintf(out, PATH_MAX, "%s%s%s", kdir,
					strcmp(kdir, "/") ? "/" : "", path) < PATH_MAX;
}

/* lookup_use for a path that may be ours. */
__attribute__((noinline))
static bool lookup_slow(int dirfd, const char *path, struct lookup *l, enum rv_sysfs_use use)
{
	int saved = errno, err;
	const char *root;
	size_t len, plen;

	l->buf = malloc(PATH_MAX);
	if (!l->buf)
		goto real;
	if (path[0] != '/') {
		if (resolve_relative(dirfd, path, l->buf)) {
			l->served = l->buf;
			err = rv_sysfs_prepare(l->served, use);
			if (err == ENOENT || err == ENOTDIR)
				l->absent = err;
			else
				l->err = err;
		}
		errno = saved;
		return false;   /* libc looks it up in the tree through dirfd already */
	}
	err = rv_sysfs_prepare(path, use);
	if (err == ENOENT || err == ENOTDIR) {
		l->served = path;
		l->absent = err;        /* not there: no tree needed to say so */
		errno = saved;
		return true;
	}
	root = rv_sysfs_root(&len);
	plen = strlen(path);
	if (!root || len + plen >= PATH_MAX)
		goto real;      /* switched off, or no tree could be made: the real path */
	memcpy(l->buf, root, len);
	memcpy(l->buf + len, path, plen + 1);
	l->served = path;
	l->path = l->buf;
	l->ours = true;
	l->err = err;
	errno = saved;
	return true;
real:
	errno = saved;
	return false;
}

/* Maps path (relative to dirfd when not absolute): true when it is ours, with l->path the
 * tree's entry, made for use. A path of ours that the tree cannot serve (it could not be
 * made) goes to libc unchanged. errno is kept. */
static inline bool lookup_use(int dirfd, const char *path, struct lookup *l,
			      enum rv_sysfs_use use)
{
	l->path = path;
	if (!path || (path[0] == '/' ? !served(path) :
		      !path[0] || !__atomic_load_n(&relative_watch, __ATOMIC_RELAXED)))
		return false;
	return lookup_slow(dirfd, path, l, use);
}

#define lookup(dirfd, path, l) lookup_use(dirfd, path, l, RV_SYSFS_LOOKUP)

/* A path of ours that is not there fails the call at once (errno ENOENT or ENOTDIR). */
#define ABSENT(l, ret)                                                                  \
	do {                                                                            \
		if ((l).absent) {                                                       \
			errno = (l).absent;                                             \
			return ret;                                                     \
		}                                                                       \
	} while (0)

#define lookup(dirfd, path, l) lookup_use(dirfd, path, l, RV_SYSFS_LOOKUP)

/* uverbsN: N, or -1 for any other path. */
static int devnode(const struct lookup *l)
{
	const char *p = l->served;
	char *end;
	long n;

	if (strncmp(p, DEVNODE_PREFIX, sizeof(DEVNODE_PREFIX) - 1) != 0)
		return -1;
	p += sizeof(DEVNODE_PREFIX) - 1;
	if (*p < '0' || *p > '9')
		return -1;
	n = strtol(p, &end, 10);
	return *end || n > 63 ? -1 : (int)n;
}

static void fix_stat(const struct lookup *l, struct stat *st)
{
	int n = l->served ? devnode(l) : -1;

	if (n < 0 || !S_ISREG(st->st_mode))
		return;
	st->st_mode = S_IFCHR | 0666;
	st->st_rdev = makedev(UVERBS_MAJOR, UVERBS_MINOR_BASE + (unsigned)n);
	st->st_size = 0;
	st->st_blocks = 0;
	st->st_uid = 0;
	st->st_gid = 0;
}

static void fix_statx(const struct lookup *l, struct statx *st)
{
	int n = l->served ? devnode(l) : -1;

	if (n < 0 || !S_ISREG(st->stx_mode))
		return;
	st->stx_mode = S_IFCHR | 0666;
	st->stx_rdev_major = UVERBS_MAJOR;
	st->stx_rdev_minor = UVERBS_MINOR_BASE + (unsigned)n;
	st->stx_size = 0;
	st->stx_blocks = 0;
	st->stx_uid = 0;
	st->stx_gid = 0;
}

/* Before a file of the tree is opened: 0, or the errno the kernel's file would give.
 * Writing is refused as the kernel refuses it (EACCES), to a file that is there: any other
 * is ENOENT (librdmacm, for one, opens /dev/infiniband/rdma_cm). */
static int before_open(int dirfd, const struct lookup *l, bool write)
{
	if (!l->served || devnode(l) >= 0)
		return 0;
	if (write)
		return REAL(faccessat) && REAL(faccessat)(l->ours ? AT_FDCWD : dirfd,
							   l->path, F_OK, 0) != 0 ? errno : EACCES;
	return l->err;
}

static bool open_writes(int flags)
{
	return (flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC));
}

static void watch_relative(void)
{
	__atomic_store_n(&relative_watch, true, __ATOMIC_RELAXED);
}

/* ---- open ---- */

static int open_at(int dirfd, const char *path, int flags, mode_t mode)
{
	LOOKUP(l);
	bool ours = lookup_use(dirfd, path, &l, open_writes(flags) ? RV_SYSFS_LOOKUP :
				(flags & O_DIRECTORY) ? RV_SYSFS_LIST : RV_SYSFS_READ);
	int err, fd;

	ABSENT(l, -1);
	if (!l.served)
		return REAL(openat) ? REAL(openat)(dirfd, path, flags, mode) : -1;
	err = before_open(dirfd, &l, open_writes(flags));
	if (err) {
		errno = err;
		return -1;
	}
	if (devnode(&l) >= 0)
		return REAL(openat) ? REAL(openat)(AT_FDCWD, "/dev/null",
						   flags & ~(O_CREAT | O_EXCL | O_DIRECTORY), 0) : -1;
	fd = REAL(openat) ? REAL(openat)(ours ? AT_FDCWD : dirfd, l.path, flags, mode) : -1;
	if (fd >= 0 && ours)
		watch_relative();       /* it may be a directory */
	return fd;
}

static mode_t open_mode(int flags, va_list ap)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? va_arg(ap, mode_t) : 0;
}

int open(const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	va_start(ap, flags);
	mode = open_mode(flags, ap);
	va_end(ap);
	return open_at(AT_FDCWD, path, flags, mode);
}

int open64(const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	va_start(ap, flags);
	mode = open_mode(flags, ap);
	va_end(ap);
	return open_at(AT_FDCWD, path, flags | O_LARGEFILE, mode);
}

int openat(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	va_start(ap, flags);
	mode = open_mode(flags, ap);
	va_end(ap);
	return open_at(dirfd, path, flags, mode);
}

int openat64(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	va_start(ap, flags);
	mode = open_mode(flags, ap);
	va_end(ap);
	return open_at(dirfd, path, flags | O_LARGEFILE, mode);
}

int __open_2(const char *path, int flags)
{
	return open_at(AT_FDCWD, path, flags, 0);
}

int __open64_2(const char *path, int flags)
{
	return open_at(AT_FDCWD, path, flags | O_LARGEFILE, 0);
}

int __openat_2(int dirfd, const char *path, int flags)
{
	return open_at(dirfd, path, flags, 0);
}

int __openat64_2(int dirfd, const char *path, int flags)
{
	return open_at(dirfd, path, flags | O_LARGEFILE, 0);
}

static FILE *fopen_with(FILE *(*real)(const char *, const char *), const char *path,
			const char *mode)
{
	LOOKUP(l);
	bool write = strpbrk(mode, "wa+") != NULL;
	int err;

	if (!real)
		return NULL;
	lookup_use(AT_FDCWD, path, &l, write ? RV_SYSFS_LOOKUP : RV_SYSFS_READ);
	ABSENT(l, NULL);
	if (!l.served)
		return real(path, mode);
	err = before_open(AT_FDCWD, &l, write);
	if (err) {
		errno = err;
		return NULL;
	}
	return real(devnode(&l) >= 0 ? "/dev/null" : l.path, mode);
}

FILE *fopen(const char *path, const char *mode)
{
	return fopen_with(REAL(fopen), path, mode);
}

FILE *fopen64(const char *path, const char *mode)
{
	return fopen_with(REAL(fopen64), path, mode);
}

/* ---- stat ---- */

#define STAT_CALL(real_call, fix)                                                       \
	do {                                                                            \
		int r_;                                                                 \
		lookup(dirfd, path, &l);                                                \
		ABSENT(l, -1);                                                          \
		r_ = (real_call);                                                       \
		if (r_ == 0 && l.served)                                             \
			fix(&l, st);                                                    \
		return r_;                                                              \
	} while (0)

static int do_fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	LOOKUP(l);

	STAT_CALL(REAL(fstatat) ? REAL(fstatat)(l.path == path ? dirfd : AT_FDCWD, l.path, st,
						 flags) : -1, fix_stat);
}

int stat(const char *path, struct stat *st)
{
	return do_fstatat(AT_FDCWD, path, st, 0);
}

int stat64(const char *path, struct stat64 *st)
{
	return do_fstatat(AT_FDCWD, path, (struct stat *)st, 0);
}

int lstat(const char *path, struct stat *st)
{
	return do_fstatat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW);
}

int lstat64(const char *path, struct stat64 *st)
{
	return do_fstatat(AT_FDCWD, path, (struct stat *)st, AT_SYMLINK_NOFOLLOW);
}

int fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	return do_fstatat(dirfd, path, st, flags);
}

int fstatat64(int dirfd, const char *path, struct stat64 *st, int flags)
{
	return do_fstatat(dirfd, path, (struct stat *)st, flags);
}

/* The __xstat family: struct stat is the kernel's on x86_64 and ver is always 1 there. */
static int do_xstat(int ver, int dirfd, const char *path, struct stat *st, int flags)
{
	LOOKUP(l);

	STAT_CALL(REAL(__fxstatat) ? REAL(__fxstatat)(ver, l.path == path ? dirfd : AT_FDCWD,
						       l.path, st, flags) : -1, fix_stat);
}

int __xstat(int ver, const char *path, struct stat *st)
{
	return do_xstat(ver, AT_FDCWD, path, st, 0);
}

int __xstat64(int ver, const char *path, struct stat64 *st)
{
	return do_xstat(ver, AT_FDCWD, path, (struct stat *)st, 0);
}

int __lxstat(int ver, const char *path, struct stat *st)
{
	return do_xstat(ver, AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW);
}

int __lxstat64(int ver, const char *path, struct stat64 *st)
{
	return do_xstat(ver, AT_FDCWD, path, (struct stat *)st, AT_SYMLINK_NOFOLLOW);
}

int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags)
{
	return do_xstat(ver, dirfd, path, st, flags);
}

int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags)
{
	return do_xstat(ver, dirfd, path, (struct stat *)st, flags);
}

int statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *st)
{
	LOOKUP(l);

	STAT_CALL(REAL(statx) ? REAL(statx)(l.path == path ? dirfd : AT_FDCWD, l.path, flags,
					     mask, st) : -1, fix_statx);
}

/* ---- access ---- */

int access(const char *path, int mode)
{
	LOOKUP(l);

	lookup(AT_FDCWD, path, &l);
	ABSENT(l, -1);
	return REAL(access) ? REAL(access)(l.path, mode) : -1;
}

int faccessat(int dirfd, const char *path, int mode, int flags)
{
	LOOKUP(l);
	bool ours = lookup(dirfd, path, &l);

	ABSENT(l, -1);
	return REAL(faccessat) ? REAL(faccessat)(ours ? AT_FDCWD : dirfd, l.path, mode, flags) :
				 -1;
}

int euidaccess(const char *path, int mode)
{
	LOOKUP(l);

	lookup(AT_FDCWD, path, &l);
	ABSENT(l, -1);
	return REAL(euidaccess) ? REAL(euidaccess)(l.path, mode) : -1;
}

int eaccess(const char *path, int mode)
{
	return euidaccess(path, mode);
}

/* ---- directories ---- */

DIR *opendir(const char *path)
{
	LOOKUP(l);
	bool ours = lookup_use(AT_FDCWD, path, &l, RV_SYSFS_LIST);
	DIR *d;

	ABSENT(l, NULL);
	d = REAL(opendir) ? REAL(opendir)(l.path) : NULL;
	if (d && ours)
		watch_relative();
	return d;
}

int scandir(const char *path, struct dirent ***list, int (*filter)(const struct dirent *),
	    int (*compar)(const struct dirent **, const struct dirent **))
{
	LOOKUP(l);

	lookup_use(AT_FDCWD, path, &l, RV_SYSFS_LIST);
	ABSENT(l, -1);
	return REAL(scandir) ? REAL(scandir)(l.path, list, filter, compar) : -1;
}

int scandir64(const char *path, struct dirent64 ***list,
	      int (*filter)(const struct dirent64 *),
	      int (*compar)(const struct dirent64 **, const struct dirent64 **))
{
	LOOKUP(l);

	lookup_use(AT_FDCWD, path, &l, RV_SYSFS_LIST);
	ABSENT(l, -1);
	return REAL(scandir64) ? REAL(scandir64)(l.path, list, filter, compar) : -1;
}

int chdir(const char *path)
{
	LOOKUP(l);
	bool ours = lookup(AT_FDCWD, path, &l);
	int r;

	ABSENT(l, -1);
	r = REAL(chdir) ? REAL(chdir)(l.path) : -1;
	if (r == 0 && ours)
		watch_relative();
	return r;
}

/* The working directory inside the tree reads as the kernel's path. */
char *getcwd(char *buf, size_t size)
{
	char *r = REAL(getcwd) ? REAL(getcwd)(buf, size) : NULL;
	const char *k;

	if (r && __atomic_load_n(&relative_watch, __ATOMIC_RELAXED) && (k = unmap(r)) != NULL)
		memmove(r, k, strlen(k) + 1);
	return r;
}

/* ---- names ---- */

ssize_t readlink(const char *path, char *buf, size_t len)
{
	LOOKUP(l);

	lookup(AT_FDCWD, path, &l);
	ABSENT(l, -1);
	return REAL(readlink) ? REAL(readlink)(l.path, buf, len) : -1;
}

ssize_t readlinkat(int dirfd, const char *path, char *buf, size_t len)
{
	LOOKUP(l);
	bool ours = lookup(dirfd, path, &l);

	ABSENT(l, -1);
	return REAL(readlinkat) ? REAL(readlinkat)(ours ? AT_FDCWD : dirfd, l.path, buf, len) :
				  -1;
}

ssize_t __readlink_chk(const char *path, char *buf, size_t len, size_t buflen)
{
	LOOKUP(l);

	lookup(AT_FDCWD, path, &l);
	ABSENT(l, -1);
	return REAL(__readlink_chk) ? REAL(__readlink_chk)(l.path, buf, len, buflen) : -1;
}

ssize_t __readlinkat_chk(int dirfd, const char *path, char *buf, size_t len, size_t buflen)
{
	LOOKUP(l);
	bool ours = lookup(dirfd, path, &l);

	ABSENT(l, -1);
	return REAL(__readlinkat_chk) ?
	       REAL(__readlinkat_chk)(ours ? AT_FDCWD : dirfd, l.path, buf, len, buflen) : -1;
}

/* realpath of the tree's file, given back as the kernel's path. */
static char *realpath_ours(const struct lookup *l, char *resolved)
{
	char out[PATH_MAX];
	const char *k;
	size_t n;

	if (!REAL(realpath) || !REAL(realpath)(l->path, out))
		return NULL;
	k = unmap(out);
	if (!k)
		k = out;
	n = strlen(k) + 1;
	if (!resolved && !(resolved = malloc(n))) {
		errno = ENOMEM;
		return NULL;
	}
	memcpy(resolved, k, n);
	return resolved;
}

char *realpath(const char *path, char *resolved)
{
	LOOKUP(l);

	if (!lookup(AT_FDCWD, path, &l))
		return REAL(realpath) ? REAL(realpath)(path, resolved) : NULL;
	ABSENT(l, NULL);
	return realpath_ours(&l, resolved);
}

char *__realpath_chk(const char *path, char *resolved, size_t resolvedlen)
{
	LOOKUP(l);

	if (!lookup(AT_FDCWD, path, &l))
		return REAL(__realpath_chk) ? REAL(__realpath_chk)(path, resolved, resolvedlen) :
					      NULL;
	ABSENT(l, NULL);
	if (resolved && resolvedlen < PATH_MAX) {
		errno = ERANGE;
		return NULL;
	}
	return realpath_ours(&l, resolved);
}

char *canonicalize_file_name(const char *path)
{
	return realpath(path, NULL);
}

/* ---- extended attributes (ls -l asks for them): none in sysfs, none in the tree ---- */

ssize_t getxattr(const char *path, const char *name, void *value, size_t size)
{
	LOOKUP(l);

	lookup(AT_FDCWD, path, &l);
	ABSENT(l, -1);
	return REAL(getxattr) ? REAL(getxattr)(l.path, name, value, size) : -1;
}

ssize_t lgetxattr(const char *path, const char *name, void *value, size_t size)
{
	LOOKUP(l);

	lookup(AT_FDCWD, path, &l);
	ABSENT(l, -1);
	return REAL(lgetxattr) ? REAL(lgetxattr)(l.path, name, value, size) : -1;
}

ssize_t listxattr(const char *path, char *list, size_t size)
{
	LOOKUP(l);

	lookup(AT_FDCWD, path, &l);
	ABSENT(l, -1);
	return REAL(listxattr) ? REAL(listxattr)(l.path, list, size) : -1;
}

ssize_t llistxattr(const char *path, char *list, size_t size)
{
	LOOKUP(l);

	lookup(AT_FDCWD, path, &l);
	ABSENT(l, -1);
	return REAL(llistxattr) ? REAL(llistxattr)(l.path, list, size) : -1;
}

/* A program started with its working directory in a tree (its parent's: a shell that went
 * into /sys/class/infiniband/rocemu0 and ran cat) moves to the same place in its own. */
__attribute__((constructor)) static void paths_init(void)
{
	char cwd[PATH_MAX], target[PATH_MAX];
	const char *k, *root;
	size_t len;
	int saved = errno;

	if (REAL(getcwd) && REAL(getcwd)(cwd, sizeof(cwd)) && (k = rv_sysfs_foreign(cwd)) &&
	    served(k) && rv_sysfs_prepare(k, RV_SYSFS_LOOKUP) == 0 &&
	    (root = rv_sysfs_root(&len)) && len + strlen(k) < sizeof(target)) {
		memcpy(target, root, len);
		strcpy(target + len, k);
		if (REAL(chdir) && REAL(chdir)(target) == 0)
			watch_relative();
	}
	errno = saved;
}
