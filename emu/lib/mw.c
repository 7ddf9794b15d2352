/* Memory windows: a handle and a key on the daemon's side; binding and invalidation are
 * work requests (post.c). */
#include "emu/lib/lib_int.h"

#include <errno.h>
#include <stdlib.h>

struct rocemu_mw *rocemu_alloc_mw(struct rocemu_pd *pd, int type)
{
	struct proto_alloc_mw req = { .hdr.op = PROTO_ALLOC_MW };
	struct proto_alloc_mw_reply r;
	struct rpc_msg in = { .buf = &req, .len = sizeof(req) };
	struct rpc_msg out = { .buf = &r, .len = sizeof(r) };
	struct mw_priv *mw;
	int err;

	if (!pd) {
		errno = EINVAL;
		return NULL;
	}
	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) {
		errno = rpc_fail(pd->ctx, EINVAL, "memory window type %d: only 1 and 2", type);
		return NULL;
	}
	mw = calloc(1, sizeof(*mw));
	if (!mw)
		return NULL;
	req.pd = pd->handle;
	req.type = (uint32_t)type;
	err = rpc_call(pd->ctx, &in, &out);
	if (err) {
		free(mw);
		errno = err;
		return NULL;
	}
	mw->ctx = pd->ctx;
	mw->pub = (struct rocemu_mw){ .pd = pd, .type = type, .rkey = r.rkey,
				      .handle = r.handle };
	LIST_INSERT_HEAD(&pd->ctx->mws, mw, link);
	return &mw->pub;
}

int rocemu_dealloc_mw(struct rocemu_mw *pub)
{
	struct mw_priv *mw;
	int err;

	if (!pub)
		return EINVAL;
	mw = (struct mw_priv *)((char *)pub - offsetof(struct mw_priv, pub));
	err = rpc_handle_op(mw->ctx, PROTO_DEALLOC_MW, pub->handle);
	if (err)
		return err;
	LIST_REMOVE(mw, link);
	free(mw);
	return 0;
}
