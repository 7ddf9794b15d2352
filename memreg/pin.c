/* Pinned memory: the per-client and per-table budgets, and the mlock()s they account for.
 *
 * Each MR is charged its own page-rounded span, so two MRs sharing a page are both charged
 * for it, as the kernel charges pinned_vm per registration. mlock() itself does not count:
 * one munlock() undoes any number of mlock()s of a page, so unlocking skips every page
 * that another MR still holds.
 *
 * mlock() and munlock() are made as raw syscalls because the sanitizer runtimes replace
 * the libc wrappers with no-ops (to spare their shadow memory from mlockall()), which
 * would take the pinning and its RLIMIT_MEMLOCK failures out of the sanitizer build. */
#include "memreg/memreg_int.h"

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

static bool over_cap(uint64_t cap, uint64_t used, uint64_t bytes)
{
	return cap && (used > cap || bytes > cap - used);
}

/* -EDQUOT when pinning bytes more would exceed the client's or the table's cap. */
int mr_pin_check(const struct mr_client *client, uint64_t bytes)
{
	const struct mr_table *table = client->table;

	if (over_cap(client->pin_cap, client->pinned, bytes) ||
	    over_cap(table->max_pinned, table->pinned, bytes))
		return -EDQUOT;
	return 0;
}

void mr_pin_charge(struct mr_client *client, uint64_t bytes)
{
	client->pinned += bytes;
	client->table->pinned += bytes;
}

void mr_pin_uncharge(struct mr_client *client, uint64_t bytes)
{
	client->pinned -= bytes;
	client->table->pinned -= bytes;
}

/* The end of the furthest-reaching locked span of a published MR containing pos, or pos
 * when none contains it. */
static uintptr_t held_until(const struct mr_table *table, uintptr_t pos)
{
	uintptr_t until = pos;
	const struct mr *mr;

	LIST_FOREACH(mr, &table->mrs, table_link) {
		uintptr_t end = mr->lock_start + mr->lock_len;

		if (mr->lock_start <= pos && pos < end && end > until)
			until = end;
	}
	return until;
}

/* The start of the first locked span of a published MR inside (pos, end), else end. */
static uintptr_t next_held(const struct mr_table *table, uintptr_t pos, uintptr_t end)
{
	uintptr_t next = end;
	const struct mr *mr;

	LIST_FOREACH(mr, &table->mrs, table_link) {
		if (mr->lock_start > pos && mr->lock_start < next)
			next = mr->lock_start;
	}
	return next;
}

/* Unlocks the pages of [start, start + len) that no published MR still holds. The caller
 * has already unpublished the MR whose span this is. Each step scans every MR, which is
 * fine for the rare deregistration; the per-packet lookup never comes here. */
void mr_pin_unlock(const struct mr_table *table, uintptr_t start, size_t len)
{
	uintptr_t pos = start, end = start + len;

	while (pos < end) {
		uintptr_t held = held_until(table, pos);
		uintptr_t free_end;

		if (held > pos) {
			pos = held;
			continue;
		}
		free_end = next_held(table, pos, end);
		/* Fails only on pages that are not mapped, which hold no lock either. */
		(void)syscall(SYS_munlock, pos, free_end - pos);
		pos = free_end;
	}
}

/* Locks [start, start + len); on failure leaves no lock of its own behind. */
int mr_pin_lock(const struct mr_table *table, uintptr_t start, size_t len)
{
	int err;

	if (syscall(SYS_mlock, start, len) == 0)
		return 0;
	err = errno == EPERM ? -EPERM : -ENOMEM;
	/* mlock() may have locked the mappings before a hole or a failed fault-in. */
	mr_pin_unlock(table, start, len);
	return err;
}
