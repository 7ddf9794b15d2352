/* Data movement through an MR's page table, one page at a time. */
#include "memreg/memreg_int.h"

#include <errno.h>
#include <stdint.h>
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

/* The bytes of a copy into an MR stored last, each exactly once and in rising address
 * order. Programs learn that a peer's WRITE has landed by polling the end of their buffer
 * (riostream, and much RDMA code), as a NIC places each byte once, in order. glibc's memcpy
 * stores some bytes twice: for 64 bytes it stores the same 64 bytes with two vector
 * stores, so a program that saw the first store and wrote its reply there before the
 * second lost its write (riostream stalled for good). */
#define COPY_IN_LAST_BYTES 64

/* Plain stores the compiler may neither widen into overlapping ones nor turn into a
 * memcpy call: aligned 8 bytes at a time where it can, so no word is ever seen torn. */
static void store_once(char *to, const char *from, size_t len)
{
	volatile char *b = to;
	size_t i = 0;

	for (; i < len && ((uintptr_t)(to + i) & 7); i++)
		b[i] = from[i];
	for (; len - i >= 8; i += 8) {
		uint64_t w;

		memcpy(&w, from + i, sizeof(w));
		*(volatile uint64_t *)(void *)(to + i) = w;
	}
	for (; i < len; i++)
		b[i] = from[i];
}

/* [va, va + len) from src, page piece by page piece, each piece with copy(). */
static int copy_pieces(struct mr *mr, uint64_t va, const char *from, size_t len,
		       void (*copy)(char *to, const char *from, size_t len))
{
	while (len) {
		size_t chunk;
		char *to = host_at(mr, va, &chunk);

		/* a step that would move nothing ends the copy rather than spin on it */
		if (!to)
			return -EFAULT;
		if (chunk > len)
			chunk = len;
		copy(to, from, chunk);
		va += chunk;
		from += chunk;
		len -= chunk;
	}
	return 0;
}

static void plain_copy(char *to, const char *from, size_t len)
{
	memcpy(to, from, len);
}

int mr_copy_in(struct mr *mr, uint64_t va, const void *src, size_t len)
{
	size_t bulk = len > COPY_IN_LAST_BYTES ? len - COPY_IN_LAST_BYTES : 0;
	int rc;

	if (len && !mr_range_ok(mr, va, len))
		return -ERANGE;
	rc = copy_pieces(mr, va, src, bulk, plain_copy);
	/* the bulk is in place before any of the last bytes is */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	return rc ? rc : copy_pieces(mr, va + bulk, (const char *)src + bulk, len - bulk,
				     store_once);
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
