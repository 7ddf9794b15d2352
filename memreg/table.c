/* The daemon-wide key space: index allocation, key bytes and the index array. */
#include "memreg/memreg_int.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>

/* Fills buf from the kernel's CSPRNG, so no key byte can be predicted from earlier keys. */
static int fill_random(void *buf, size_t len)
{
	ssize_t got;

	do
		got = getrandom(buf, len, 0);
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return -errno;
	/* Requests of up to 256 bytes are never cut short once the pool is ready. */
	return (size_t)got == len ? 0 : -EAGAIN;
}

static int random_byte(struct mr_table *table, uint8_t *byte)
{
	if (table->random_left == 0) {
		int err = fill_random(table->random, sizeof(table->random));

		if (err)
			return err;
		table->random_left = sizeof(table->random);
	}
	*byte = table->random[--table->random_left];
	return 0;
}

struct mr_table *mr_table_new(uint32_t max_regions, uint64_t max_pinned_bytes)
{
	long page_size = sysconf(_SC_PAGESIZE);
	struct mr_table *table;
	uint32_t start;
	int err;

	if (max_regions == 0 || page_size <= 0) {
		errno = EINVAL;
		return NULL;
	}
	if (max_regions > MR_MAX_REGIONS)
		max_regions = MR_MAX_REGIONS;
	err = fill_random(&start, sizeof(start));
	if (err) {
		errno = -err;
		return NULL;
	}
	table = calloc(1, sizeof(*table));
	if (!table)
		return NULL;
	table->slots = calloc(max_regions, sizeof(*table->slots));
	if (!table->slots) {
		free(table);
		return NULL;
	}
	table->mw_slots = calloc(max_regions, sizeof(*table->mw_slots));
	if (!table->mw_slots) {
		free(table->slots);
		free(table);
		return NULL;
	}
	table->max_regions = max_regions;
	table->next_index = start % max_regions;
	table->page_size = (size_t)page_size;
	table->max_pinned = max_pinned_bytes;
	LIST_INIT(&table->mrs);
	LIST_INIT(&table->clients);
	return table;
}

void mr_table_free(struct mr_table *table)
{
	if (!table)
		return;
	while (!LIST_EMPTY(&table->clients))
		mr_client_free(LIST_FIRST(&table->clients));
	free(table->slots);
	free(table->mw_slots);
	free(table);
}

uint64_t mr_table_pinned_bytes(const struct mr_table *table)
{
	return table->pinned;
}

uint32_t mr_table_region_count(const struct mr_table *table)
{
	return table->region_count - table->mw_count;
}

uint32_t mr_table_mw_count(const struct mr_table *table)
{
	return table->mw_count;
}

/* The first free index at or after the cursor, wrapping: a freed index comes back only
 * after every other free index has been handed out once. */
static int next_free_index(const struct mr_table *table, uint32_t *index)
{
	uint32_t i = table->next_index;

	if (table->region_count >= table->max_regions)
		return -ENOSPC;
	while (table->slots[i] || table->mw_slots[i])
		i = i + 1 == table->max_regions ? 0 : i + 1;
	*index = i;
	return 0;
}

/* Picks the key of the next MR without publishing anything: the caller publishes the MR
 * once it is complete, or drops the key (its index is then simply skipped). */
int mr_table_reserve_key(struct mr_table *table, uint32_t *key)
{
	uint32_t index;
	uint8_t byte;
	int err;

	err = next_free_index(table, &index);
	if (err)
		return err;
	err = random_byte(table, &byte);
	if (err)
		return err;
	table->next_index = index + 1 == table->max_regions ? 0 : index + 1;
	*key = index << 8 | byte;
	return 0;
}

void mr_table_publish(struct mr_table *table, struct mr *mr)
{
	table->slots[mr->key >> 8] = mr;
	table->region_count++;
	LIST_INSERT_HEAD(&table->mrs, mr, table_link);
}

void mr_table_unpublish(struct mr_table *table, struct mr *mr)
{
	table->slots[mr->key >> 8] = NULL;
	table->region_count--;
	LIST_REMOVE(mr, table_link);
}

/* The MR at the key's index, whatever its key byte; NULL when none. */
struct mr *mr_table_slot(const struct mr_table *table, uint32_t key)
{
	uint32_t index = key >> 8;

	return index < table->max_regions ? table->slots[index] : NULL;
}

void mr_table_publish_mw(struct mr_table *table, struct mr_mw *mw)
{
	table->mw_slots[mw->rkey >> 8] = mw;
	table->region_count++;
	table->mw_count++;
}

void mr_table_unpublish_mw(struct mr_table *table, struct mr_mw *mw)
{
	table->mw_slots[mw->rkey >> 8] = NULL;
	table->region_count--;
	table->mw_count--;
}

/* The MW at the key's index, whatever its key byte; NULL when none. */
struct mr_mw *mr_table_mw_slot(const struct mr_table *table, uint32_t key)
{
	uint32_t index = key >> 8;

	return index < table->max_regions ? table->mw_slots[index] : NULL;
}
