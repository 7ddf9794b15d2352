/* Address handles: the daemon keeps the path; the client keeps the handle that UD work
 * requests name. */
#include "emu/lib/lib_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void ah_release(struct ah_priv *ah)
{
	LIST_REMOVE(ah, link);
	free(ah);
}

/* RoCE has no LIDs: the GRH is the address, and the one port is the only source. */
static int check_attr(struct rocemu_context *ctx, const struct ibv_ah_attr *attr)
{
	if (!attr->is_global)
		return rpc_fail(ctx, EINVAL, "RoCE address handles need a GRH (is_global 1)");
	if (attr->port_num > 1)
		return rpc_fail(ctx, EINVAL, "port %u: rocemu devices have port 1 only",
				attr->port_num);
	return 0;
}

static int send_create_ah(struct rocemu_pd *pd, const struct ibv_ah_attr *attr,
			  uint32_t *handle)
{
	struct proto_create_ah req = {
		.hdr.op = PROTO_CREATE_AH,
		.pd = pd->handle,
		.flow_label = attr->grh.flow_label,
		.sgid_index = attr->grh.sgid_index,
		.traffic_class = attr->grh.traffic_class,
		.hop_limit = attr->grh.hop_limit,
	};
	struct proto_handle_reply r;
	struct rpc_msg in = { .buf = &req, .len = sizeof(req) };
	struct rpc_msg out = { .buf = &r, .len = sizeof(r) };
	int err;

	memcpy(req.dgid, attr->grh.dgid.raw, sizeof(req.dgid));
	err = rpc_call(pd->ctx, &in, &out);
	if (!err)
		*handle = r.handle;
	return err;
}

struct rocemu_ah *rocemu_create_ah(struct rocemu_pd *pd, const struct ibv_ah_attr *attr)
{
	struct ah_priv *ah;
	int err;

	if (!pd || !attr) {
		errno = EINVAL;
		return NULL;
	}
	err = check_attr(pd->ctx, attr);
	ah = err ? NULL : calloc(1, sizeof(*ah));
	if (!err && !ah)
		err = ENOMEM;
	if (!err)
		err = send_create_ah(pd, attr, &ah->pub.handle);
	if (err) {
		free(ah);
		errno = err;
		return NULL;
	}
	ah->pub.pd = pd;
	ah->pub.ibv.handle = ah->pub.handle;
	LIST_INSERT_HEAD(&pd->ctx->ahs, ah, link);
	return &ah->pub;
}

int rocemu_destroy_ah(struct rocemu_ah *pub)
{
	int err;

	if (!pub)
		return EINVAL;
	err = rpc_handle_op(pub->pd->ctx, PROTO_DESTROY_AH, pub->handle);
	if (!err)
		ah_release(to_ah(pub));
	return err;
}
