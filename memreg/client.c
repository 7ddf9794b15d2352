/* Clients (one per local process) and their protection domains. */
#include "memreg/memreg_int.h"

#include <errno.h>
#include <stdlib.h>

struct mr_client *mr_client_new(struct mr_table *table, uint64_t pin_cap)
{
	struct mr_client *client = calloc(1, sizeof(*client));

	if (!client)
		return NULL;
	client->table = table;
	client->pin_cap = pin_cap;
	LIST_INIT(&client->pds);
	LIST_INSERT_HEAD(&table->clients, client, link);
	return client;
}

static void pd_destroy(struct mr_pd *pd)
{
	struct mr *mr;

	/* Windows first: they hold their MRs */
	while (!LIST_EMPTY(&pd->mws))
		mr_mw_destroy(LIST_FIRST(&pd->mws));
	/* Invalidate them all before tearing any down: no key of a dying PD is valid. */
	LIST_FOREACH(mr, &pd->mrs, pd_link)
		mr_invalidate(mr);
	while (!LIST_EMPTY(&pd->mrs))
		mr_destroy(LIST_FIRST(&pd->mrs));
	LIST_REMOVE(pd, link);
	free(pd);
}

void mr_client_free(struct mr_client *client)
{
	if (!client)
		return;
	while (!LIST_EMPTY(&client->pds))
		pd_destroy(LIST_FIRST(&client->pds));
	mr_map_forget_all(client);
	LIST_REMOVE(client, link);
	free(client);
}

uint64_t mr_client_pinned_bytes(const struct mr_client *client)
{
	return client->pinned;
}

struct mr_pd *mr_pd_alloc(struct mr_client *client)
{
	struct mr_pd *pd = calloc(1, sizeof(*pd));

	if (!pd)
		return NULL;
	pd->client = client;
	LIST_INIT(&pd->mrs);
	LIST_INIT(&pd->mws);
	LIST_INSERT_HEAD(&client->pds, pd, link);
	return pd;
}

int mr_pd_dealloc(struct mr_pd *pd)
{
	if (!LIST_EMPTY(&pd->mrs) || !LIST_EMPTY(&pd->mws))
		return -EBUSY;
	pd_destroy(pd);
	return 0;
}

struct mr_client *mr_pd_client(const struct mr_pd *pd)
{
	return pd->client;
}
