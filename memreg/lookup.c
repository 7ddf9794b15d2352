/* Key resolution: the responder's memory checks and the requester's lkey lookup. */
#include "memreg/memreg_int.h"

static const char *const check_names[] = {
	[MR_OK] = "ok",
	[MR_NO_REGION] = "no region",
	[MR_KEY_MISMATCH] = "key mismatch",
	[MR_PD_MISMATCH] = "PD mismatch",
	[MR_ACCESS] = "access denied",
	[MR_INVALID] = "region invalid",
	[MR_BOUNDS] = "out of bounds",
	[MR_QP_MISMATCH] = "MW bound to another QP",
	[MR_MW_UNBOUND] = "MW not bound",
};

/* The checks in enum order. A NULL pd is compared like any other, so it matches no MR. */
static enum mr_check check_mr(const struct mr *mr, uint32_t key, const struct mr_pd *pd,
			      int access, uint64_t va, uint64_t len)
{
	if (!mr)
		return MR_NO_REGION;
	if (mr->key != key)
		return MR_KEY_MISMATCH;
	if (mr->pd != pd)
		return MR_PD_MISMATCH;
	if (access & ~mr->access)
		return MR_ACCESS;
	if (!mr->valid)
		return MR_INVALID;
	if (len && !mr_range_ok(mr, va, len))
		return MR_BOUNDS;
	return MR_OK;
}

enum mr_check mr_lookup(struct mr_table *table, uint32_t key, const struct mr_pd *pd,
			int access, uint64_t va, uint64_t len, struct mr **out)
{
	struct mr *mr = mr_table_slot(table, key);
	enum mr_check check = check_mr(mr, key, pd, access, va, len);

	if (out)
		*out = check == MR_OK ? mr : NULL;
	return check;
}

const char *mr_check_name(enum mr_check check)
{
	if ((unsigned)check >= sizeof(check_names) / sizeof(check_names[0]))
		return "unknown";
	return check_names[check];
}

struct mr *mr_find_local(struct mr_client *client, uint32_t lkey)
{
	struct mr *mr = mr_table_slot(client->table, lkey);

	if (!mr || mr->key != lkey || mr->pd->client != client || !mr->valid)
		return NULL;
	return mr;
}
