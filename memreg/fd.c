/* Registration of memory handed over as a file descriptor (a client's memfd): the daemon
 * maps the pages itself, so it never depends on the client's address space. */
#include "memreg/memreg_int.h"

#include <errno.h>
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <sys/stat.h>

/* The smallest transparent huge page there is (x86-64's and 4 KiB-paged arm64's PMD). */
#define HUGE_PAGE_MIN_BYTES ((size_t)2 << 20)
#define OFF_T_MAX ((off_t)((UINT64_C(1) << (sizeof(off_t) * 8 - 1)) - 1))

/* [offset, offset + len) must be a valid range of a regular file (memfds are). */
static int check_file(int fd, off_t offset, size_t len)
{
	struct stat st;

	if (offset < 0 || len > (uint64_t)(OFF_T_MAX - offset))
		return -EINVAL;
	if (fstat(fd, &st) != 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if (offset > st.st_size || (off_t)len > st.st_size - offset)
		return -EOVERFLOW;
	return 0;
}

/* Maps [offset, offset + len) of fd with iova's offset within a page; *in_page is where
 * offset lies in the mapping's first page. */
static int map_file(size_t page_size, int fd, off_t offset, size_t len, uint64_t iova,
		    void **map, size_t *in_page)
{
	size_t map_len;
	int err = check_file(fd, offset, len);

	if (err)
		return err;
	*in_page = (size_t)offset & (page_size - 1);
	if ((iova & (page_size - 1)) != *in_page || len > SIZE_MAX - *in_page - (page_size - 1))
		return -EINVAL;
	map_len = (*in_page + len + page_size - 1) & ~(page_size - 1);
	*map = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		    offset - (off_t)*in_page);
	if (*map == MAP_FAILED)
		return errno == EPERM ? -EACCES : -errno; /* EPERM would read as mlock's */
	/* Populating shared memory a 4 KiB page at a time costs about twice what it costs
	 * for anonymous memory, and registration's mlock is what populates; in 2 MiB pages
	 * it costs a fraction. Only where the administrator lets shmem have huge pages on
	 * request (transparent_hugepage/shmem_enabled "advise", or tmpfs huge=advise);
	 * anywhere else, a kernel without them included, nothing changes. Below 2 MiB no
	 * huge page fits, and the call is spared (a registration of a few pages each time a
	 * connection is made is a common pattern). */
	if (map_len >= HUGE_PAGE_MIN_BYTES)
		(void)madvise(*map, map_len, MADV_HUGEPAGE);
	return 0;
}

static void unmap_file(size_t page_size, void *map, size_t in_page, size_t len)
{
	munmap(map, (in_page + len + page_size - 1) & ~(page_size - 1));
}

int mr_reg_fd(struct mr_pd *pd, int fd, off_t offset, size_t len, uint64_t iova, int access,
	      struct mr **out)
{
	size_t page_size = pd->client->table->page_size;
	size_t in_page;
	void *map;
	int err;

	err = mr_check_args(iova, len, access);
	if (!err)
		err = map_file(page_size, fd, offset, len, iova, &map, &in_page);
	if (err)
		return err;
	err = mr_register(pd, (uintptr_t)map + in_page, len, iova, access, map, out);
	if (err)
		unmap_file(page_size, map, in_page, len);
	return err;
}

int mr_rereg_fd(struct mr *mr, const struct mr_rereg *req, int fd, off_t offset)
{
	size_t page_size = mr->pd->client->table->page_size;
	size_t in_page;
	void *map;
	int err;

	if (!(req->flags & IBV_REREG_MR_CHANGE_TRANSLATION))
		return mr_rereg_at(mr, req, 0, NULL);
	err = map_file(page_size, fd, offset, req->len, req->iova, &map, &in_page);
	if (err)
		return err;
	err = mr_rereg_at(mr, req, (uintptr_t)map + in_page, map);
	if (err)
		unmap_file(page_size, map, in_page, req->len);
	return err;
}
