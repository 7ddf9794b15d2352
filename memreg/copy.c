/* Data movement through an MR's page table, one page at a time. */
#include "memreg/memreg_int.h"

#include <errno.h>
#include <string.h>

/* Host address of va and the bytes contiguous from there (at least one: to the end of its
 * page or of the MR); NULL when va lies outside the MR. */
static char *host_at(const struct mr *mr, uint64_t va, size_t *avail)
{
	size_t page_size = mr->pd->client->table->page_size;
	uint64_t left;
	size_t rel, in_page;

	if (va < mr->iova || va - mr->iova >= mr->length)
		return NULL;
	left = mr->length - (va - mr->iova);
	/* Offset from the MR's first page; registration made sure the page-rounded span fits
	 * in a size_t, so this cannot overflow. */
	rel = mr->page_offset + (size_t)(va - mr->iova);
	in_page = rel & (page_size - 1);
	*avail = page_size - in_page < left ? page_size - in_page : (size_t)left;
	return (char *)mr->pages[rel / page_size] + in_page;
}

void *mr_host_span(const struct mr *mr, uint64_t va, size_t *contiguous)
{
	size_t avail;
	char *host = host_at(mr, va, &avail);

	if (host && contiguous)
		*contiguous = avail;
	return host;
}

int mr_copy_in(struct mr *mr, uint64_t va, const void *src, size_t len)
{
	const char *from = src;

	if (len && !mr_range_ok(mr, va, len))
		return -ERANGE;
	while (len) {
		size_t chunk;
		char *to = host_at(mr, va, &chunk);

		/* a step that would move nothing ends the copy rather than spin on it */
		if (!to)
			return -EFAULT;
		if (chunk > len)
			chunk = len;
		memcpy(to, from, chunk);
		va += chunk;
		from += chunk;
		len -= chunk;
	}
	return 0;
}

int mr_copy_out(const struct mr *mr, uint64_t va, void *dst, size_t len)
{
	char *to = dst;

	if (len && !mr_range_ok(mr, va, len))
		return -ERANGE;
	while (len) {
		size_t chunk;
		const char *from = host_at(mr, va, &chunk);

		if (!from)
			return -EFAULT;
		if (chunk > len)
			chunk = len;
		memcpy(to, from, chunk);
		va += chunk;
		to += chunk;
		len -= chunk;
	}
	return 0;
}
