/* Per-client handle tables: small integers a client names its objects by. Handle 0 is never
 * given out, and a handle is only ever looked up in the table of the client that sent it. */
#include <errno.h>
#include <stdlib.h>

#include "emu/daemon/control/control.h"

#define HANDLES_MAX (1u << 20)

int handle_add(struct handle_table *t, void *item, uint32_t *handle)
{
	uint32_t i;

	for (i = 1; i < t->cap && t->items[i]; i++)
		;
	if (i >= t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 16;
		void **items;

		if (cap > HANDLES_MAX)
			return -ENOSPC;
		items = realloc(t->items, cap * sizeof(*items));
		if (!items)
			return -ENOMEM;
		for (uint32_t j = t->cap; j < cap; j++)
			items[j] = NULL;
		t->items = items;
		i = t->cap ? t->cap : 1;
		t->cap = cap;
	}
	t->items[i] = item;
	t->count++;
	*handle = i;
	return 0;
}

void *handle_get(const struct handle_table *t, uint32_t handle)
{
	return handle && handle < t->cap ? t->items[handle] : NULL;
}

void handle_del(struct handle_table *t, uint32_t handle)
{
	if (handle_get(t, handle)) {
		t->items[handle] = NULL;
		t->count--;
	}
}

void handle_free(struct handle_table *t)
{
	free(t->items);
	t->items = NULL;
	t->cap = t->count = 0;
}
