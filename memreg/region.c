/* Memory Regions: registration, the page table, deregistration. */
#include "memreg/memreg_int.h"

#include <errno.h>
#include <infiniband/verbs.h>
#include <stdlib.h>

#define MR_ACCESS_SUPPORTED (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
			     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | \
			     IBV_ACCESS_MW_BIND | MR_ACCESS_FLUSH_GLOBAL)

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

/* The page table of a span: the host address of each of its pages. */
static void **span_pages(const struct span *span, size_t page_size)
{
	void **pages = calloc(span->npages, sizeof(*pages));

	if (!pages)
		return NULL;
	for (size_t i = 0; i < span->npages; i++)
		pages[i] = (void *)(span->start + i * page_size);
	return pages;
}

static void set_translation(struct mr *mr, const struct span *span, void **pages)
{
	mr->pages = pages;
	mr->npages = span->npages;
	mr->page_offset = span->offset;
	mr->lock_start = span->start;
	mr->lock_len = span->len;
}

static struct mr *mr_alloc(const struct span *span, size_t page_size)
{
	struct mr *mr = calloc(1, sizeof(*mr));
	void **pages = span_pages(span, page_size);

	if (!mr || !pages) {
		free(mr);
		free(pages);
		return NULL;
	}
	set_translation(mr, span, pages);
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
		const struct mr_map *map, struct mr **out)
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
	if (map)
		mr->map = *map;
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

/* Releases a span an MR held: its mapping, or the locks of its pages that no published
 * MR still holds (so the MR it was taken from is unpublished or holds another span now). */
static void release_span(struct mr_client *client, uintptr_t start, size_t len,
			 const struct mr_map *map)
{
	/* An fd MR's mapping is its own, so no other MR shares its pages and one munlock
	 * drops its locks: the overlap scan of mr_pin_unlock is only for caller memory. */
	if (map->addr)
		mr_map_release(client, map);
	else
		mr_pin_unlock(client->table, start, len);
	mr_pin_uncharge(client, len);
}

/* Unpublishes first, so the keys stop resolving before anything is released. */
void mr_destroy(struct mr *mr)
{
	struct mr_client *client = mr->pd->client;

	mr_invalidate(mr);
	mr_table_unpublish(client->table, mr);
	LIST_REMOVE(mr, pd_link);
	release_span(client, mr->lock_start, mr->lock_len, &mr->map);
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

#define REREG_FLAGS (IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | \
		     IBV_REREG_MR_CHANGE_ACCESS)

/* The checks that need no new memory, in the kernel's order. */
static int rereg_check(const struct mr *mr, const struct mr_rereg *req)
{
	bool moves = req->flags & IBV_REREG_MR_CHANGE_TRANSLATION;
	int access = req->flags & IBV_REREG_MR_CHANGE_ACCESS ? req->access : mr->access;

	if (!req->flags)
		return -EINVAL;
	if (req->flags & ~REREG_FLAGS)
		return -EOPNOTSUPP;
	if (mr->num_mw)
		return -EBUSY;
	if ((req->flags & IBV_REREG_MR_CHANGE_PD) &&
	    (!req->pd || req->pd->client != mr->pd->client))
		return -EINVAL;
	return mr_check_args(moves ? req->iova : mr->iova, moves ? req->len : mr->length,
			     access);
}

/* Pins the new span and swaps it in; the old one is released only once the MR no longer
 * names it, so the unlock skips exactly the pages the new span (or another MR) holds. */
static int move_translation(struct mr *mr, const struct mr_rereg *req, uintptr_t addr,
			    const struct mr_map *map)
{
	struct mr_client *client = mr->pd->client;
	struct mr_table *table = client->table;
	uintptr_t old_start = mr->lock_start;
	size_t old_len = mr->lock_len;
	void **old_pages = mr->pages, **pages;
	struct mr_map old_map = mr->map;
	struct span span;
	int err;

	err = host_span(table->page_size, addr, req->len, req->iova, &span);
	if (err)
		return err;
	/* the old span's pages are given back, so only the rest counts against the caps */
	mr_pin_uncharge(client, old_len);
	err = mr_pin_check(client, span.len);
	mr_pin_charge(client, old_len);
	if (err)
		return err;
	pages = span_pages(&span, table->page_size);
	if (!pages)
		return -ENOMEM;
	err = mr_pin_lock(table, span.start, span.len);
	if (err) {
		free(pages);
		return err;
	}
	set_translation(mr, &span, pages);
	mr->map = map ? *map : (struct mr_map){ 0 };
	mr->iova = req->iova;
	mr->length = req->len;
	mr_pin_charge(client, span.len);
	release_span(client, old_start, old_len, &old_map);
	free(old_pages);
	return 0;
}

int mr_rereg_at(struct mr *mr, const struct mr_rereg *req, uintptr_t addr,
		const struct mr_map *map)
{
	int err = rereg_check(mr, req);

	if (!err && (req->flags & IBV_REREG_MR_CHANGE_TRANSLATION))
		err = move_translation(mr, req, addr, map);
	if (err)
		return err;
	if (req->flags & IBV_REREG_MR_CHANGE_PD) {
		LIST_REMOVE(mr, pd_link);
		mr->pd = req->pd;
		LIST_INSERT_HEAD(&req->pd->mrs, mr, pd_link);
	}
	if (req->flags & IBV_REREG_MR_CHANGE_ACCESS)
		mr->access = req->access;
	return 0;
}

int mr_rereg(struct mr *mr, const struct mr_rereg *req, void *addr)
{
	return mr_rereg_at(mr, req, (uintptr_t)addr, NULL);
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
