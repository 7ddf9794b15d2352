/* Memory Regions: registration, the page table, deregistration. */
#include "memreg/memreg_int.h"

#include <errno.h>
#include <infiniband/verbs.h>
#include <stdlib.h>
#include <sys/mman.h>

#define MR_ACCESS_SUPPORTED (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
			     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | \
			     IBV_ACCESS_MW_BIND)

/* The page-rounded host span of a registration. */
struct span {
	uintptr_t start;
	size_t len;
	size_t offset; /* of the first byte within its page */
	size_t npages;
};

/* Verbs' rules: a peer may only write memory the owner may write, and a flag we do not
 * implement is refused rather than silently dropped. */
static bool access_ok(int access)
{
	if (access & ~MR_ACCESS_SUPPORTED)
		return false;
	return !(access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) ||
	       (access & IBV_ACCESS_LOCAL_WRITE);
}

int mr_check_args(uint64_t iova, size_t len, int access)
{
	if (!access_ok(access) || len == 0 || len > UINT64_MAX - iova)
		return -EINVAL;
	return 0;
}

/* The pages covering [addr, addr + len); -EINVAL when their end is not addressable or
 * iova does not start at the same offset in its page as addr (the page table maps whole
 * pages, so the two spans must line up). */
static int host_span(size_t page_size, uintptr_t addr, size_t len, uint64_t iova,
		     struct span *span)
{
	span->offset = addr & (page_size - 1);
	if ((iova & (page_size - 1)) != span->offset)
		return -EINVAL;
	if (len > SIZE_MAX - span->offset - (page_size - 1))
		return -EINVAL;
	span->start = addr - span->offset;
	span->npages = (span->offset + len + page_size - 1) / page_size;
	span->len = span->npages * page_size;
	return span->len <= UINTPTR_MAX - span->start ? 0 : -EINVAL;
}

static struct mr *mr_alloc(const struct span *span, size_t page_size)
{
	struct mr *mr = calloc(1, sizeof(*mr));

	if (!mr)
		return NULL;
	mr->pages = calloc(span->npages, sizeof(*mr->pages));
	if (!mr->pages) {
		free(mr);
		return NULL;
	}
	for (size_t i = 0; i < span->npages; i++)
		mr->pages[i] = (void *)(span->start + i * page_size);
	mr->npages = span->npages;
	mr->page_offset = span->offset;
	mr->lock_start = span->start;
	mr->lock_len = span->len;
	return mr;
}

static void mr_attach(struct mr_pd *pd, struct mr *mr)
{
	mr->pd = pd;
	mr->valid = true;
	mr_table_publish(pd->client->table, mr);
	LIST_INSERT_HEAD(&pd->mrs, mr, pd_link);
	mr_pin_charge(pd->client, mr->lock_len);
}

int mr_register(struct mr_pd *pd, uintptr_t addr, size_t len, uint64_t iova, int access,
		void *map, struct mr **out)
{
	struct mr_table *table = pd->client->table;
	struct span span;
	uint32_t key;
	struct mr *mr;
	int err;

	err = mr_check_args(iova, len, access);
	if (!err)
		err = host_span(table->page_size, addr, len, iova, &span);
	if (!err)
		err = mr_pin_check(pd->client, span.len);
	if (!err)
		err = mr_table_reserve_key(table, &key);
	if (err)
		return err;
	mr = mr_alloc(&span, table->page_size);
	if (!mr)
		return -ENOMEM;
	err = mr_pin_lock(table, span.start, span.len);
	if (err) {
		free(mr->pages);
		free(mr);
		return err;
	}
	mr->key = key;
	mr->access = access;
	mr->iova = iova;
	mr->length = len;
	mr->map = map;
	mr_attach(pd, mr);
	*out = mr;
	return 0;
}

int mr_reg(struct mr_pd *pd, void *addr, size_t len, uint64_t iova, int access,
	   struct mr **out)
{
	return mr_register(pd, (uintptr_t)addr, len, iova, access, NULL, out);
}

void mr_invalidate(struct mr *mr)
{
	mr->valid = false;
}

/* Unpublishes first, so the keys stop resolving before anything is released. */
void mr_destroy(struct mr *mr)
{
	struct mr_client *client = mr->pd->client;

	mr_invalidate(mr);
	mr_table_unpublish(client->table, mr);
	LIST_REMOVE(mr, pd_link);
	/* An fd MR's mapping is its own, so no other MR shares its pages and munmap drops the
	 * lock with the mapping: the overlap scan of mr_pin_unlock is only for caller memory. */
	if (mr->map)
		munmap(mr->map, mr->lock_len);
	else
		mr_pin_unlock(client->table, mr->lock_start, mr->lock_len);
	mr_pin_uncharge(client, mr->lock_len);
	free(mr->pages);
	free(mr);
}

int mr_dereg(struct mr *mr)
{
	int err = mr_dereg_check(mr);

	if (err)
		return err;
	mr_destroy(mr);
	return 0;
}

struct mr_keys mr_keys(const struct mr *mr)
{
	return (struct mr_keys){ .lkey = mr->key, .rkey = mr->key };
}

uint64_t mr_iova(const struct mr *mr)
{
	return mr->iova;
}

uint64_t mr_length(const struct mr *mr)
{
	return mr->length;
}

int mr_access(const struct mr *mr)
{
	return mr->access;
}

struct mr_pd *mr_pd(const struct mr *mr)
{
	return mr->pd;
}
