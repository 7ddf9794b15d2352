/* Memory windows: a remote key onto part of an MR, bound and invalidated by work requests,
 * with the checks rxe's rxe_mw.c makes (and the PDs compared for type 1 as well). */
#include "memreg/memreg_int.h"

#include <errno.h>
#include <infiniband/verbs.h>
#include <stdlib.h>

#define MW_ACCESS_SUPPORTED (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
			     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | \
			     IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED)

int mr_mw_alloc(struct mr_pd *pd, int type, struct mr_mw **out)
{
	struct mr_table *table = pd->client->table;
	struct mr_mw *mw;
	uint32_t key;
	int err;

	if (type != MR_MW_TYPE_1 && type != MR_MW_TYPE_2)
		return -EINVAL;
	err = mr_table_reserve_key(table, &key);
	if (err)
		return err;
	mw = calloc(1, sizeof(*mw));
	if (!mw)
		return -ENOMEM;
	mw->pd = pd;
	mw->rkey = key;
	mw->type = type;
	/* a type 1 window is usable (with nothing in it) at once; type 2 waits for a bind */
	mw->state = type == MR_MW_TYPE_1 ? MW_STATE_VALID : MW_STATE_FREE;
	mr_table_publish_mw(table, mw);
	LIST_INSERT_HEAD(&pd->mws, mw, pd_link);
	*out = mw;
	return 0;
}

static void mw_release_mr(struct mr_mw *mw)
{
	if (mw->mr)
		mw->mr->num_mw--;
	mw->mr = NULL;
}

/* Back to what a bind starts from, keeping the key. */
static void mw_clear(struct mr_mw *mw)
{
	mw_release_mr(mw);
	mw->qp = NULL;
	mw->access = 0;
	mw->addr = 0;
	mw->length = 0;
}

void mr_mw_destroy(struct mr_mw *mw)
{
	mw_clear(mw);
	mr_table_unpublish_mw(mw->pd->client->table, mw);
	LIST_REMOVE(mw, pd_link);
	free(mw);
}

void mr_mw_dealloc(struct mr_mw *mw)
{
	mr_mw_destroy(mw);
}

uint32_t mr_mw_rkey(const struct mr_mw *mw)
{
	return mw->rkey;
}

int mr_mw_type(const struct mr_mw *mw)
{
	return mw->type;
}

int mr_dereg_check(const struct mr *mr)
{
	return mr->num_mw ? -EINVAL : 0;
}

/* The MW of this client with exactly this key, or NULL. */
static struct mr_mw *client_mw(struct mr_client *client, uint32_t rkey)
{
	struct mr_mw *mw = mr_table_mw_slot(client->table, rkey);

	return mw && mw->rkey == rkey && mw->pd->client == client ? mw : NULL;
}

/* Whether [addr, addr + length) lies inside the MR. A zero-based window's addr is where
 * it starts in the MR's address space too, as verbs programs and rxe give it; only the
 * peer's addresses count from 0 (checked here at bind, where rxe waits for the access). */
static bool window_in_mr(const struct mr *mr, const struct mr_mw_bind *b)
{
	return mr_range_ok(mr, b->addr, b->length);
}

/* rxe's rxe_check_bind_mw, in its order. */
static int check_bind(const struct mr_mw *mw, const struct mr *mr, const struct mr_pd *qp_pd,
		      const struct mr_mw_bind *b)
{
	if (mw->pd != qp_pd)
		return -EINVAL;
	if (mw->type == MR_MW_TYPE_1) {
		if (mw->state != MW_STATE_VALID || (b->access & IBV_ACCESS_ZERO_BASED))
			return -EINVAL;
	} else if (mw->state != MW_STATE_FREE || !mr || b->length == 0) {
		return -EINVAL;
	}
	if (!mr)
		return 0;
	if (mr->pd != mw->pd || !(mr->access & IBV_ACCESS_MW_BIND))
		return -EINVAL;
	if ((b->access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(mr->access & IBV_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	return window_in_mr(mr, b) ? 0 : -EINVAL;
}

int mr_mw_bind(struct mr_client *client, const struct mr_pd *qp_pd, const void *qp,
	       const struct mr_mw_bind *b)
{
	struct mr_mw *mw = client_mw(client, b->mw_rkey);
	struct mr *mr = NULL;
	int err;

	if (!mw)
		return -EINVAL;
	if (b->length) {
		mr = mr_find_local(client, b->mr_lkey);
		if (!mr)
			return -EINVAL;
	}
	if (b->access & ~MW_ACCESS_SUPPORTED)
		return -EOPNOTSUPP;
	err = check_bind(mw, mr, qp_pd, b);
	if (err)
		return err;
	mw_clear(mw);
	mw->rkey = (mw->rkey & ~0xffu) | (b->new_rkey & 0xff);
	mw->access = b->access;
	mw->state = MW_STATE_VALID;
	mw->addr = b->addr;
	mw->length = b->length;
	if (mw->length) {
		mw->mr = mr;
		mr->num_mw++;
	}
	if (mw->type == MR_MW_TYPE_2)
		mw->qp = qp;
	return 0;
}

/* IBA o10-37.2.26: only a type 2 window can be invalidated. rxe checks neither the PD nor
 * the QP here; rocemu does, since one daemon serves every process on the host and a peer
 * must not close another tenant's window by guessing its key (a LOCAL_INV, qp NULL, may
 * come from any QP of the PD). Invalidating a free type 2 window leaves it free (rxe would
 * dereference its missing QP). */
int mr_mw_invalidate(struct mr_table *table, uint32_t rkey, const struct mr_pd *pd,
		     const void *qp)
{
	struct mr_mw *mw = mr_table_mw_slot(table, rkey);

	if (!mw || mw->rkey != rkey || mw->pd != pd || mw->type != MR_MW_TYPE_2)
		return -EINVAL;
	if (qp && mw->state == MW_STATE_VALID && mw->qp != qp)
		return -EINVAL;
	mw_clear(mw);
	mw->state = MW_STATE_FREE;
	return 0;
}

/* A sentinel no QP can be: what a type 2 window keeps once its QP is destroyed. */
static const char qp_gone;

void mr_mw_forget_qp(struct mr_client *client, const void *qp)
{
	struct mr_pd *pd;
	struct mr_mw *mw;

	LIST_FOREACH(pd, &client->pds, link)
		LIST_FOREACH(mw, &pd->mws, pd_link)
			if (mw->qp == qp)
				mw->qp = &qp_gone;
}

/* rxe_lookup_mw's checks, each with its own answer, then the window's bounds. */
static enum mr_check check_mw(const struct mr_mw *mw, uint32_t key, const struct mr_pd *pd,
			      const void *qp, int access, uint64_t va, uint64_t len)
{
	uint64_t start = mw->access & IBV_ACCESS_ZERO_BASED ? 0 : mw->addr;

	if (mw->rkey != key)
		return MR_KEY_MISMATCH;
	if (mw->pd != pd)
		return MR_PD_MISMATCH;
	if (mw->type == MR_MW_TYPE_2 && mw->state == MW_STATE_VALID && mw->qp != qp)
		return MR_QP_MISMATCH;
	if (mw->state != MW_STATE_VALID || mw->length == 0 || !mw->mr)
		return MR_MW_UNBOUND;
	if (access & ~mw->access)
		return MR_ACCESS;
	if (len && (va < start || len > mw->length || va - start > mw->length - len))
		return MR_BOUNDS;
	return MR_OK;
}

enum mr_check mr_lookup_remote(struct mr_table *table, uint32_t key, const struct mr_pd *pd,
			       const void *qp, int access, uint64_t va, uint64_t len,
			       struct mr **out, uint64_t *mr_va)
{
	struct mr_mw *mw = mr_table_mw_slot(table, key);
	enum mr_check check;

	*mr_va = va;
	if (!mw)
		return mr_lookup(table, key, pd, access, va, len, out);
	if (out)
		*out = NULL;
	check = check_mw(mw, key, pd, qp, access, va, len);
	if (check != MR_OK)
		return check;
	if (mw->access & IBV_ACCESS_ZERO_BASED)
		*mr_va = mw->addr + va;
	/* the MR's own remote rights do not matter: the window grants them (IBA 10.6.7) */
	if (!mw->mr->valid)
		return MR_INVALID;
	if (len && !mr_range_ok(mw->mr, *mr_va, len))
		return MR_BOUNDS;
	if (out)
		*out = mw->mr;
	return MR_OK;
}
