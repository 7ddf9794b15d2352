/* Protection domains: a handle on the daemon's side and nothing more on ours. The local
 * struct exists before the daemon is asked, so a failed allocation never leaves a PD the
 * client has no record of. */
#include "emu/lib/lib_int.h"

#include <errno.h>
#include <stdlib.h>

struct rocemu_pd *rocemu_alloc_pd(struct rocemu_context *ctx)
{
	struct proto_handle req = { .hdr.op = PROTO_ALLOC_PD };
	struct proto_handle_reply r;
	struct rpc_msg in = { .buf = &req, .len = sizeof(req) };
	struct rpc_msg out = { .buf = &r, .len = sizeof(r) };
	struct rocemu_pd *pd;
	int err;

	if (!ctx) {
		errno = EINVAL;
		return NULL;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return NULL;
	err = rpc_call(ctx, &in, &out);
	if (err) {
		free(pd);
		errno = err;
		return NULL;
	}
	pd->ctx = ctx;
	pd->handle = r.handle;
	LIST_INSERT_HEAD(&ctx->pds, pd, link);
	return pd;
}

int rocemu_dealloc_pd(struct rocemu_pd *pd)
{
	int err;

	if (!pd)
		return EINVAL;
	err = rpc_handle_op(pd->ctx, PROTO_DEALLOC_PD, pd->handle);
	if (err)
		return err;
	LIST_REMOVE(pd, link);
	free(pd);
	return 0;
}
