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

/* [offset, offset + len) must be a valid range of a regular file (memfds are); the file's
 * identity goes into map. */
static int check_file(int fd, off_t offset, size_t len, struct mr_map *map)
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
	map->dev = st.st_dev;
	map->ino = st.st_ino;
	return 0;
}

/* Maps [offset, offset + len) of fd with iova's offset within a page, or takes back the
 * client's kept mapping of that range; *in_page is where offset lies in the mapping's
 * first page. */
static int map_file(struct mr_client *client, int fd, off_t offset, size_t len,
		    uint64_t iova, struct mr_map *map, size_t *in_page)
{
	size_t page_size = client->table->page_size;
	int err = check_file(fd, offset, len, map);

	if (err)
		return err;
	*in_page = (size_t)offset & (page_size - 1);
	if ((iova & (page_size - 1)) != *in_page || len > SIZE_MAX - *in_page - (page_size - 1))
		return -EINVAL;
	map->len = (*in_page + len + page_size - 1) & ~(page_size - 1);
	map->offset = offset - (off_t)*in_page;
	map->addr = mr_map_take(client, map);
	if (map->addr)
		return 0;
	map->addr = mmap(NULL, map->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, map->offset);
	if (map->addr == MAP_FAILED)
		return errno == EPERM ? -EACCES : -errno; /* EPERM would read as mlock's */
	/* Populating shared memory a 4 KiB page at a time costs about twice what it costs
	 * for anonymous memory, and registration's mlock is what populates; in 2 MiB pages
	 * it costs a fraction. Only where the administrator lets shmem have huge pages on
	 * request (transparent_hugepage/shmem_enabled "advise", or tmpfs huge=advise);
	 * anywhere else, a kernel without them included, nothing changes. Below 2 MiB no
	 * huge page fits, and the call is spared (a registration of a few pages each time a
	 * connection is made is a common pattern). */
	if (map->len >= HUGE_PAGE_MIN_BYTES)
		(void)madvise(map->addr, map->len, MADV_HUGEPAGE);
	return 0;
}

int mr_reg_fd(struct mr_pd *pd, int fd, off_t offset, size_t len, uint64_t iova, int access,
	      struct mr **out)
{
	struct mr_map map;
	size_t in_page;
	int err;

	err = mr_check_args(iova, len, access);
	if (!err)
		err = map_file(pd->client, fd, offset, len, iova, &map, &in_page);
	if (err)
		return err;
	err = mr_register(pd, (uintptr_t)map.addr + in_page, len, iova, access, &map, out);
	if (err)
		mr_map_release(pd->client, &map);
	return err;
}

int mr_rereg_fd(struct mr *mr, const struct mr_rereg *req, int fd, off_t offset)
{
	struct mr_map map;
	size_t in_page;
	int err;

	if (!(req->flags & IBV_REREG_MR_CHANGE_TRANSLATION))
		return mr_rereg_at(mr, req, 0, NULL);
	err = map_file(mr->pd->client, fd, offset, req->len, req->iova, &map, &in_page);
	if (err)
		return err;
	err = mr_rereg_at(mr, req, (uintptr_t)map.addr + in_page, &map);
	if (err)
		mr_map_release(mr->pd->client, &map);
	return err;
}
